"""The cleaner's per-batch fast path (samsa/storage/cleaner.py) against its record-by-record
reading, on Logs in temporary directories with the cleaner called directly:

* the offset map reads only keys (``record_keys_in_order``: a batch's offset deltas are
  compared with their positions, not decoded) and the rewrite finds a batch's survivors by
  the offsets the map holds (``record_starts``), without reading any key again; kept records
  are copied byte for byte;
* with the fast path turned off every batch is read record by record, as before: both
  cleanings must leave the same bytes (gzip batches: the same records; a gzip stream records
  when it was written), and the cleaned log exactly the latest record of every
  key, tombstones (until their delete horizon), committed transactions with their markers, and
  nothing of aborted ones;
* a batch whose deltas are not its records' positions (a client may send any) is read record
  by record; the record walkers agree with ``decode_records`` on any records hypothesis makes.
"""

from __future__ import annotations

import random
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.config import LogConfig
from samsa.records import compression
from samsa.records.batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Attr,
    BatchHeader,
    Compression,
    iter_headers,
    read_header,
    record_starts,
)
from samsa.records.record import (
    NotInOrder,
    RecordInput,
    decode_records,
    encode_batch,
    iter_raw_records,
    record_keys,
    record_keys_in_order,
    records_payload,
    write_varint,
)
from samsa.storage import cleaner
from samsa.storage.cleaner import OffsetMap, clean_log, cleanable
from samsa.storage.log import Log

NOW = 1_700_000_000_000
RETENTION_MS = 1000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def config(segment_bytes: int = 1 << 20) -> LogConfig:
    return LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                 "delete.retention.ms": str(RETENTION_MS)})


def batch_with_deltas(records: list[tuple[bytes | None, bytes | None]], deltas: list[int],
                      base_offset: int, codec: Compression = Compression.NONE) -> bytes:
    """A batch whose records carry the given offset deltas (encode_batch writes 0, 1, ...)."""
    body = bytearray()
    for (key, value), delta in zip(records, deltas, strict=True):
        inner = bytearray(b"\x00")
        write_varint(0, inner)
        write_varint(delta, inner)
        for blob in (key, value):
            write_varint(-1 if blob is None else len(blob), inner)
            inner += blob or b""
        write_varint(0, inner)
        write_varint(len(inner), body)
        body += inner
    payload = compression.compress(codec, bytes(body))
    batch = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(batch, 0, base_offset, len(batch) - LOG_OVERHEAD, -1, 2, 0, int(codec),
                     max(deltas), NOW, NOW, -1, -1, -1, len(records))
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def write_workload(log: Log, seed: int) -> None:
    """Keyed batches of every codec (some records keyless, some tombstones), transactions
    committed and aborted, rolls now and then; some batches appended as a follower copies
    them, one with its offset deltas out of order."""
    rng = random.Random(seed)
    seq = {7: 0, 8: 0}
    for i in range(60):
        kind = rng.random()
        codec = rng.choice(list(Compression))
        if i == 30:  # a follower's copy of a batch with its deltas out of order
            end = log.log_end_offset
            log.append(batch_with_deltas([(b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c")],
                                         [1, 0, 2], end, codec), assign_offsets=False)
            continue
        n = rng.choice([1, 3, 40, 70])  # 70: two-byte offset deltas
        pairs = [(b"k%d" % rng.randrange(25) + b"x" * rng.choice([0, 70]),
                  None if rng.random() < 0.1 else b"v%d-%d" % (i, j) + b"y" * rng.choice([1, 90]))
                 for j in range(n)]
        if kind < 0.15:  # a transaction, committed or aborted
            pid = rng.choice([7, 8])
            records = [RecordInput(v, k) for k, v in pairs]
            log.append(encode_batch(records, timestamp=NOW, producer_id=pid, producer_epoch=0,
                                    base_sequence=seq[pid], transactional=True,
                                    compression_type=codec))
            seq[pid] += len(records)
            log.append_marker(pid, 0, rng.random() < 0.6, 0)
        elif kind < 0.25:  # a follower's copy, a keyless record in it
            end = log.log_end_offset
            pairs[0] = (None, pairs[0][1])
            log.append(batch_with_deltas(pairs, list(range(len(pairs))), end, codec),
                       assign_offsets=False)
        else:
            records = [RecordInput(v, k, timestamp=NOW + j) for j, (k, v) in enumerate(pairs)
                       if k is not None]
            log.append(encode_batch(records, timestamp=NOW, compression_type=codec))
        if rng.random() < 0.1:
            log.roll()
    log.roll()


def clean(log: Log, clock: Clock, capacity: int = 10_000) -> None:
    state = cleanable(log, None, clock.now)
    clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(capacity),
              now_ms=clock.now)


def segment_bytes(log: Log) -> list[bytes]:
    return [s.read_bytes(0, s.size) for s in log.segments]


def layout(segments: list[bytes]) -> list[list[tuple[object, ...]]]:
    """Each segment's batches: the header but its length and CRC (a gzip stream records the
    time it was written), and the records as decode_records reads them."""
    out = []
    for data in segments:
        batches = []
        for pos, header in iter_headers(data):
            batch = data[pos : pos + header.size]
            if header.compression != Compression.GZIP:
                batches.append((batch,))
                continue
            fields = header._replace(batch_length=0, crc=0)
            batches.append((fields, [(r.offset, r.timestamp, r.key, r.value, r.headers)
                                     for r in decode_records(batch)]))
        out.append(batches)
    return out


def batches_of(log: Log) -> Iterator[tuple[BatchHeader, bytes]]:
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for pos, header in iter_headers(data):
            yield header, data[pos : pos + header.size]


def records_of(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for header, batch in batches_of(log)
            if not header.is_control for r in decode_records(batch)]


def cleaned_twice(tmp_path: Path, seed: int, capacity: int, slow: bool,
                  monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], Log, Clock]:
    clock = Clock()
    log = Log(tmp_path / f"t-{seed}-{slow}", config(16384), clock=clock)
    write_workload(log, seed)
    def never_in_order(*_: object) -> None:
        raise NotInOrder(0)

    with monkeypatch.context() as patch:
        if slow:  # every batch read record by record: the cleaner before its fast path
            patch.setattr(cleaner, "record_keys_in_order", never_in_order)
            patch.setattr(cleaner, "_mapped_survivors", lambda *_: None)
        clean(log, clock, capacity)  # tombstones get their horizon
        clock.now += RETENTION_MS + 1
        clean(log, clock, capacity)  # and go
    return segment_bytes(log), log, clock


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("capacity", [10_000, 100])  # 100: the map fills, stops early
def test_fast_and_record_by_record_cleanings_leave_the_same_batches(
    tmp_path: Path, seed: int, capacity: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, fast_log, _ = cleaned_twice(tmp_path, seed, capacity, False, monkeypatch)
    slow, slow_log, _ = cleaned_twice(tmp_path, seed, capacity, True, monkeypatch)
    try:
        assert layout(fast) == layout(slow)
    finally:
        fast_log.close()
        slow_log.close()


def test_the_cleaned_log_keeps_exactly_the_latest_record_of_every_key(tmp_path: Path) -> None:
    clock = Clock()
    log = Log(tmp_path / "t-0", config(16384), clock=clock)
    write_workload(log, 3)
    before = records_of(log)
    # what a read_committed consumer may see: aborted transactions' records are not data
    aborted = {(t.first_offset, t.last_offset) for s in log.segments for t in s.txn_index.entries}

    def committed(offset: int) -> bool:
        return not any(first <= offset <= last for first, last in aborted)

    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in before:
        if key is not None and committed(offset):
            latest[key] = (offset, value)
    clean(log, clock)
    after = records_of(log)
    kept = {key: (offset, value) for offset, key, value in after}
    assert len(kept) == len(after)  # one record per key
    assert kept == latest  # the latest of each, tombstones too (before their horizon)
    tombstones = {k for k, (_, v) in latest.items() if v is None}
    assert tombstones  # the workload has some
    assert any(h.attributes & Attr.DELETE_HORIZON for h, _ in batches_of(log)
               if not h.is_control)
    clock.now += RETENTION_MS + 1
    clean(log, clock)
    assert {k: v for _, k, v in records_of(log)} == {
        k: v for k, (_, v) in latest.items() if v is not None}
    log.close()


def test_a_batch_with_deltas_out_of_order_is_mapped_by_its_deltas(tmp_path: Path) -> None:
    """Record 0 says delta 1 and record 1 delta 0: key b is at offset 10, a at 11. The later a
    (offset 12) replaces a; b stays."""
    log = Log(tmp_path / "t-0", config(), clock=Clock())
    log.append(batch_with_deltas([(b"a", b"1"), (b"b", b"2")], [1, 0], 10), assign_offsets=False)
    log.append(batch_with_deltas([(b"a", b"3")], [0], 12), assign_offsets=False)
    log.roll()
    clean(log, Clock())
    assert {k: (o, v) for o, k, v in records_of(log)} == {b"b": (10, b"2"), b"a": (12, b"3")}
    log.close()


# --- the record walkers ---------------------------------------------------------------------------

records = st.lists(st.tuples(
    st.one_of(st.none(), st.binary(max_size=80)),  # keys: none, short, two-byte lengths
    st.one_of(st.none(), st.binary(max_size=200)),
    st.integers(min_value=-(1 << 20), max_value=1 << 20),  # timestamp deltas, multi-byte too
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
             max_size=2),
), min_size=1, max_size=150)  # over 64 records: two-byte offset deltas


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.sampled_from([Compression.NONE, Compression.LZ4]))
def test_the_record_walkers_agree_with_decode_records(
    recs: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]],
    codec: Compression,
) -> None:
    batch = encode_batch([RecordInput(v, k, timestamp=NOW + t, headers=h) for k, v, t, h in recs],
                         timestamp=NOW, compression_type=codec, base_offset=5)
    header = read_header(batch)
    payload = records_payload(batch, header)
    decoded = list(decode_records(batch))
    keys = [r.key for r in decoded]
    assert record_keys_in_order(payload, header.records_count) == keys
    assert record_keys(payload, header.records_count) == (keys, list(range(len(recs))))
    starts = record_starts(payload, header.records_count)
    assert starts is not None and len(starts) == len(recs) + 1
    raw = list(iter_raw_records(payload, header.records_count))
    assert [r.start for r in raw] == starts[:-1] and [r.end for r in raw] == starts[1:]
    assert [(r.key, r.value_is_null) for r in raw] == [(r.key, r.value is None) for r in decoded]


def test_deltas_out_of_order_are_noticed() -> None:
    batch = batch_with_deltas([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], [0, 2, 1], 0)
    payload = records_payload(batch)
    with pytest.raises(NotInOrder):
        record_keys_in_order(payload, 3)
    assert record_keys(payload, 3) == ([b"a", b"b", b"c"], [0, 2, 1])
    long = batch_with_deltas([(b"k", b"v")] * 70, [*range(64), 65, 64, 66, 67, 68, 69], 0)
    with pytest.raises(NotInOrder):
        record_keys_in_order(records_payload(long), 70)


def test_record_starts_refuses_what_does_not_add_up() -> None:
    payload = records_payload(encode_batch([RecordInput(b"v", b"k")] * 3))
    assert record_starts(payload, 3) is not None
    assert record_starts(payload, 2) is None  # bytes left over
    assert record_starts(payload, 4) is None  # runs out
    assert record_starts(payload[:-1], 3) is None


def test_copies_of_a_log_clean_alike(tmp_path: Path) -> None:
    """The same log cleaned twice from copies leaves the same batches (nothing depends on
    anything but the log and the clock)."""
    clock = Clock()
    log = Log(tmp_path / "a" / "t-0", config(16384), clock=clock)
    write_workload(log, 11)
    log.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    out = []
    for name in ("a", "b"):
        copy = Log(tmp_path / name / "t-0", config(16384), clock=clock, had_clean_shutdown=True)
        clean(copy, clock)
        out.append(segment_bytes(copy))
        copy.close()
    assert layout(out[0]) == layout(out[1])
