"""Crash recovery of the partition log.

Every test builds a log of several small segments, "crashes" it (``Log.abandon`` or
``LogManager.abandon``: no flush, no checkpoint, no clean-shutdown marker, so the recovery point
is 0), damages the files the way a crash or a bad disk would, reopens, and checks that the log
holds exactly the intact prefix of what was written, byte for byte, and keeps working.

The expected bytes of every batch are computed independently of the log: a batch stored at
offset ``o`` is ``encode_batch(records, base_offset=o, leader_epoch=EPOCH)`` (the log only stamps
baseOffset and partitionLeaderEpoch, which are outside the CRC).
"""

from __future__ import annotations

import logging
import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.config import BrokerConfig, LogConfig
from samsa.records.record import RecordInput, encode_batch
from samsa.storage import Log, LogManager

T0 = 1_700_000_000_000
NOW = T0 + 60_000
EPOCH = 7
RECORDS_PER_BATCH = 3
INT32_MAX = 2**31 - 1
SEGMENT_BYTES = 1000
INDEX_INTERVAL = 200
CONFIG = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL)

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte RecordBatch v2 header


def clock() -> int:
    return NOW


# --- data ---------------------------------------------------------------------------------------


def records_for(i: int) -> list[RecordInput]:
    """Three records per batch; record timestamps strictly increase across the whole log."""
    return [
        RecordInput(
            key=f"k{i}.{j}".encode(),
            value=bytes([97 + (i + j) % 26]) * (12 + 5 * j),
            timestamp=T0 + 10 * i + j,
            headers=[("h", str(i).encode())],
        )
        for j in range(RECORDS_PER_BATCH)
    ]


def client_batch(i: int) -> bytes:
    """What a producer sends: baseOffset 0, partitionLeaderEpoch -1."""
    return encode_batch(records_for(i))


def stored_batch(i: int, base_offset: int) -> bytes:
    """The same batch as the log must store it at ``base_offset``."""
    return encode_batch(records_for(i), base_offset=base_offset, leader_epoch=EPOCH)


def record_timestamp(offset: int) -> int:
    i, j = divmod(offset, RECORDS_PER_BATCH)
    return T0 + 10 * i + j


@dataclass(frozen=True)
class Stored:
    index: int  # which client_batch
    base: int  # base offset assigned
    data: bytes  # bytes as stored
    segment: int  # base offset of the segment holding it
    position: int  # file position in that segment

    @property
    def next_offset(self) -> int:
        return self.base + RECORDS_PER_BATCH


# --- file helpers -------------------------------------------------------------------------------


def parse_batches(data: bytes) -> list[tuple[int, bytes]]:
    """(position, bytes) of each whole batch in ``data`` (independent of samsa's parser)."""
    out, pos = [], 0
    while len(data) - pos >= 12:
        _, length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
        end = pos + 12 + length
        if length < 49 or end > len(data):
            break
        out.append((pos, data[pos:end]))
        pos = end
    return out


def header_of(batch: bytes) -> tuple:
    return _HEADER.unpack_from(batch, 0)


def last_offset_of(batch: bytes) -> int:
    h = header_of(batch)
    return h[0] + h[6]


def max_timestamp_of(batch: bytes) -> int:
    return header_of(batch)[8]


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


def restore(directory: Path, snap: dict[str, bytes]) -> None:
    """Put the files back as in ``snap`` (rewriting only those that changed)."""
    for p in directory.iterdir():
        if p.name not in snap:
            p.unlink()
    for name, data in snap.items():
        path = directory / name
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)


def layout(directory: Path) -> list[tuple[int, int, bytes]]:
    """(segment base, position, bytes) of every batch on disk, in order."""
    out = []
    for path in segment_files(directory):
        base = int(path.stem)
        for pos, data in parse_batches(path.read_bytes()):
            out.append((base, pos, data))
    return out


def build(directory: Path, n: int) -> list[Stored]:
    """Append ``n`` batches one by one, crash, and return what must be on disk."""
    log = Log(directory, CONFIG, clock=clock)
    bases = []
    for i in range(n):
        info = log.append(client_batch(i), leader_epoch=EPOCH)
        assert info.first_offset == RECORDS_PER_BATCH * i
        bases.append(info.first_offset)
    assert len(log.segments) >= 4, "the test needs several segments"
    log.abandon()
    on_disk = layout(directory)
    stored = [
        Stored(i, bases[i], stored_batch(i, bases[i]), seg, pos)
        for i, (seg, pos, _) in enumerate(on_disk)
    ]
    assert [s.data for s in stored] == [data for _, _, data in on_disk]
    assert len(stored) == n
    return stored


def reopen_unclean(directory: Path) -> Log:
    return Log(directory, CONFIG, recovery_point=0, had_clean_shutdown=False, clock=clock)


def reopen_clean(directory: Path, recovery_point: int) -> Log:
    return Log(
        directory, CONFIG, recovery_point=recovery_point, had_clean_shutdown=True, clock=clock
    )


def for_each(cases: list, check) -> None:
    """Run ``check(case)`` for every case; report every failing case, not just the first."""
    failures = []
    for case in cases:
        try:
            check(case)
        except AssertionError as exc:
            text = " ".join(str(exc).split())[:240] or "assertion failed"
            failures.append(f"  case {case}: {text}")
    if failures:
        pytest.fail(f"{len(failures)} of {len(cases)} cases fail:\n" + "\n".join(failures))


# --- checks -------------------------------------------------------------------------------------


def read_all(log: Log) -> list[bytes]:
    """Every batch from the log start offset to the log end offset, through ``Log.read``."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 30)
        assert region is not None, f"nothing readable at {offset} < {log.log_end_offset}"
        batches = parse_batches(region.read())
        assert batches, f"the region at {offset} holds no whole batch"
        assert sum(len(b) for _, b in batches) == region.length
        for _, batch in batches:
            out.append(batch)
            offset = last_offset_of(batch) + 1
    return out


def check_indexes(log: Log) -> None:
    """Every offset index entry points at a batch start whose last offset is the entry; time
    index entries increase and name the last offset of a batch with that max timestamp."""
    for segment in log.segments:
        batches = dict(parse_batches(segment.log_path.read_bytes()))
        for offset, position in zip(segment.index.offsets, segment.index.positions, strict=True):
            assert position in batches, f"index entry ({offset}, {position}) is not a batch start"
            assert last_offset_of(batches[position]) == offset
        stamps = list(segment.time_index.timestamps)
        assert stamps == sorted(set(stamps))
        by_last = {last_offset_of(b): b for b in batches.values()}
        for ts, offset in zip(stamps, segment.time_index.offsets, strict=True):
            assert offset in by_last, f"time index entry ({ts}, {offset}) names no batch end"
            assert max_timestamp_of(by_last[offset]) == ts


def assert_intact_prefix(log: Log, stored: list[Stored], keep: int) -> None:
    """The log holds exactly ``stored[:keep]`` and accepts a new batch right after it."""
    expected_end = stored[keep].base if keep < len(stored) else stored[-1].next_offset
    assert log.log_start_offset == 0
    assert log.log_end_offset == expected_end
    assert read_all(log) == [s.data for s in stored[:keep]]
    check_indexes(log)
    info = log.append(client_batch(1000), leader_epoch=EPOCH)
    assert info.first_offset == expected_end
    assert log.log_end_offset == expected_end + RECORDS_PER_BATCH
    assert log.read_batches(expected_end) == stored_batch(1000, expected_end)
    if keep:
        last = stored[keep - 1]
        assert log.read_batches(last.base + 1, 1)[: len(last.data)] == last.data


# --- (a) a torn last batch ----------------------------------------------------------------------

# n=22: the active segment holds four batches; the last one comes after an index entry and is
#       not indexed itself;
# n=25: the last batch is alone in a fresh active segment.
LAYOUTS = [pytest.param(22, id="active-has-several"), pytest.param(25, id="active-has-one")]


def _check_layout(stored: list[Stored], n: int) -> None:
    in_active = [s for s in stored if s.segment == stored[-1].segment]
    assert len(in_active) == {22: 4, 25: 1}[n]
    assert (stored[-1].base, stored[-1].segment) == {22: (63, 54), 25: (72, 72)}[n]


@pytest.mark.parametrize("n", LAYOUTS)
def test_torn_last_batch_at_every_length(tmp_path: Path, n: int) -> None:
    stored = build(tmp_path, n)
    _check_layout(stored, n)
    last = stored[-1]
    active = tmp_path / f"{last.segment:020d}.log"
    snap = snapshot(tmp_path)

    def check(length: int) -> None:
        restore(tmp_path, snap)
        with open(active, "r+b") as f:
            f.truncate(length)
        log = reopen_unclean(tmp_path)
        try:
            assert_intact_prefix(log, stored, n - 1)
            assert active.stat().st_size == last.position + len(stored_batch(1000, last.base))
        finally:
            log.abandon()

    for_each(list(range(last.position, last.position + len(last.data))), check)


def test_torn_tail_warning_names_file_and_offset(tmp_path: Path, caplog) -> None:
    stored = build(tmp_path, 22)
    last = stored[-1]
    active = tmp_path / f"{last.segment:020d}.log"
    with open(active, "r+b") as f:
        f.truncate(last.position + 30)
    with caplog.at_level(logging.WARNING, logger="samsa"):
        log = reopen_unclean(tmp_path)
    try:
        messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(active.name in m and str(last.base) in m for m in messages), messages
        assert_intact_prefix(log, stored, len(stored) - 1)
    finally:
        log.abandon()


# --- (b) one corrupt byte in the last batch -----------------------------------------------------

# Bytes of the RecordBatch header that the CRC-32C does not cover.
BASE_OFFSET_BYTES = range(0, 8)
LEADER_EPOCH_BYTES = range(12, 16)

# Which baseOffset bytes may be altered without recovery noticing. Recovery sees a baseOffset
# that went *below* the next expected offset, or so far above the segment's base that the
# relative offset overflows an int32; a moderate jump *forward* looks exactly like a gap left by
# compaction and is kept (Kafka keeps it too), the batch then claims the altered offsets.
#   n=22: last batch base 63 (0x3F) in segment 54;  n=25: last batch base 72 (0x48) alone in
#   segment 72.
#   XOR 0xFF: byte 7 -> 63^0xFF=192 / 72^0xFF=183 (kept), byte 6 +0xFF00, byte 5 +0xFF0000 (kept),
#             byte 4 +0xFF000000 (relative offset overflow), bytes 1-3 (overflow), byte 0 (< 0).
#   XOR 0x01: byte 7 -> 62 (below 63: detected) / 73 (kept), bytes 4-6 +2**24/+2**16/+2**8
#             (kept), bytes 0-3 (relative offset overflow).
SURVIVING_BASE_OFFSET_BYTES = {
    (22, 0xFF): {5, 6, 7},
    (25, 0xFF): {5, 6, 7},
    (22, 0x01): {4, 5, 6},
    (25, 0x01): {4, 5, 6, 7},
}


@pytest.mark.parametrize("mask", [0xFF, 0x01], ids=["xor-ff", "xor-01"])
@pytest.mark.parametrize("n", LAYOUTS)
def test_corrupt_byte_in_last_batch_at_every_position(tmp_path: Path, n: int, mask: int) -> None:
    stored = build(tmp_path, n)
    _check_layout(stored, n)
    last = stored[-1]
    survivors = SURVIVING_BASE_OFFSET_BYTES[(n, mask)]
    active = tmp_path / f"{last.segment:020d}.log"
    snap = snapshot(tmp_path)

    def check(i: int) -> None:
        restore(tmp_path, snap)
        corrupt = bytearray(last.data)
        corrupt[i] ^= mask
        with open(active, "r+b") as f:
            f.seek(last.position + i)
            f.write(corrupt[i : i + 1])
        log = reopen_unclean(tmp_path)
        try:
            if i in LEADER_EPOCH_BYTES:
                # Not under the CRC and not checked: the batch stays, with the altered epoch.
                assert log.log_end_offset == last.next_offset
                assert read_all(log) == [s.data for s in stored[:-1]] + [bytes(corrupt)]
            elif i in survivors:
                new_base = struct.unpack_from(">q", corrupt, 0)[0]
                assert new_base > last.base
                assert new_base + RECORDS_PER_BATCH - 1 - last.segment <= INT32_MAX
                assert log.log_end_offset == new_base + RECORDS_PER_BATCH
                assert read_all(log) == [s.data for s in stored[:-1]] + [bytes(corrupt)]
            else:
                assert_intact_prefix(log, stored, n - 1)
        finally:
            log.abandon()

    assert survivors <= set(BASE_OFFSET_BYTES)
    for_each(list(range(len(last.data))), check)


# --- (c) garbage after the last batch -----------------------------------------------------------


def _garbage_cases() -> list:
    rng = random.Random(1234)
    huge = _HEADER.pack(0, 0x7FFF_FFF0, 0, 2, 0, 0, 0, T0, T0, -1, -1, -1, 1)
    plausible = bytearray(client_batch(77))  # a whole batch whose CRC no longer matches
    plausible[-1] ^= 0x55
    cases = [
        pytest.param(b"\x00", id="one-zero"),
        pytest.param(bytes(11), id="zeros-11"),
        pytest.param(bytes(61), id="zeros-61"),
        pytest.param(bytes(4096), id="zeros-4096"),
        pytest.param(huge, id="header-huge-length"),
        pytest.param(huge + bytes(rng.randrange(256) for _ in range(500)), id="huge-plus-bytes"),
        pytest.param(bytes(plausible), id="whole-batch-bad-crc"),
    ]
    for size in (1, 12, 60, 61, 300, 3000):
        blob = bytes(rng.randrange(256) for _ in range(size))
        cases.append(pytest.param(blob, id=f"random-{size}"))
    return cases


@pytest.mark.parametrize("garbage", _garbage_cases())
def test_garbage_after_last_batch_is_truncated(tmp_path: Path, garbage: bytes) -> None:
    stored = build(tmp_path, 22)
    active = tmp_path / f"{stored[-1].segment:020d}.log"
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(garbage)
    log = reopen_unclean(tmp_path)
    try:
        assert active.stat().st_size == size
        assert_intact_prefix(log, stored, len(stored))
    finally:
        log.abandon()


@pytest.mark.parametrize("which", [0, 5, 16])
def test_replayed_earlier_batch_after_the_end_is_truncated(tmp_path: Path, which: int) -> None:
    """A whole, CRC-valid batch whose offsets go backwards (a stale copy of an earlier one)."""
    stored = build(tmp_path, 22)
    active = tmp_path / f"{stored[-1].segment:020d}.log"
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(stored[which].data)
    log = reopen_unclean(tmp_path)
    try:
        assert active.stat().st_size == size
        assert_intact_prefix(log, stored, len(stored))
    finally:
        log.abandon()


# --- (d) old segment indexes lost or corrupt after a clean shutdown ----------------------------


def _manager(directory: Path) -> LogManager:
    config = BrokerConfig(
        {
            "log.dirs": str(directory),
            "log.segment.bytes": SEGMENT_BYTES,
            "log.index.interval.bytes": INDEX_INTERVAL,
        }
    )
    return LogManager(config, clock=clock)


def _fill(manager: LogManager, n: int, topic: str = "t") -> list[int]:
    log = manager.get_or_create(topic, 0)
    return [log.append(client_batch(i), leader_epoch=EPOCH).first_offset for i in range(n)]


def _entries(path: Path, fmt: str) -> list[tuple[int, int]]:
    return [tuple(e) for e in struct.iter_unpack(fmt, path.read_bytes())]


def _swap_first_two(data: bytes, size: int) -> bytes:
    assert len(data) >= 2 * size
    return data[size : 2 * size] + data[:size] + data[2 * size :]


def _last_entry_mid_batch(data: bytes) -> bytes:
    rel, pos = struct.unpack_from(">II", data, len(data) - 8)
    return data[:-8] + struct.pack(">II", rel, pos + 1)


def _last_entry_wrong_offset(data: bytes) -> bytes:
    rel, pos = struct.unpack_from(">II", data, len(data) - 8)
    return data[:-8] + struct.pack(">II", rel + 1, pos)


def _past_the_end(data: bytes) -> bytes:
    rel, pos = struct.unpack_from(">II", data, len(data) - 8)
    return data + struct.pack(">II", rel + 3, 1 << 20)


INDEX_DAMAGE = {
    "delete-index": (".index", None),
    "delete-timeindex": (".timeindex", None),
    "delete-both": ("both", None),
    "index-empty": (".index", lambda d: b""),
    "index-odd-size": (".index", lambda d: d[:5]),
    "index-extra-byte": (".index", lambda d: d + b"\x00"),
    "index-out-of-order": (".index", lambda d: _swap_first_two(d, 8)),
    "index-last-entry-mid-batch": (".index", _last_entry_mid_batch),
    "index-last-entry-wrong-offset": (".index", _last_entry_wrong_offset),
    "index-entry-past-end": (".index", _past_the_end),
    "index-random": (".index", lambda d: random.Random(5).randbytes(len(d))),
    "timeindex-odd-size": (".timeindex", lambda d: d[:7]),
    "timeindex-out-of-order": (".timeindex", lambda d: _swap_first_two(d, 12)),
    "timeindex-empty": (".timeindex", lambda d: b""),
    "timeindex-random": (".timeindex", lambda d: random.Random(6).randbytes(len(d))),
}


def _check_reads(log: Log, stored_bytes: list[bytes]) -> None:
    """Reads by every offset and by every timestamp give the right answer."""
    assert read_all(log) == stored_bytes
    end = log.log_end_offset
    for batch in stored_bytes:
        base = header_of(batch)[0]
        for offset in range(base, base + RECORDS_PER_BATCH):
            region = log.read(offset, 1)
            assert region is not None and region.read() == batch, offset
    for offset in range(end):
        ts = record_timestamp(offset)
        found = log.offset_for_timestamp(ts)
        assert found is not None and (found.offset, found.timestamp) == (offset, ts), ts
        if offset % RECORDS_PER_BATCH == RECORDS_PER_BATCH - 1 and offset + 1 < end:
            between = log.offset_for_timestamp(ts + 1)  # in the gap before the next batch
            assert between is not None and between.offset == offset + 1
    assert log.offset_for_timestamp(record_timestamp(end - 1) + 1) is None
    newest = log.max_timestamp_offset()
    assert newest is not None
    assert (newest.offset, newest.timestamp) == (end - 1, record_timestamp(end - 1))


def _check_segment_max_timestamps(log: Log) -> None:
    for segment in log.segments:
        batches = [b for _, b in parse_batches(segment.log_path.read_bytes())]
        expected = max((max_timestamp_of(b) for b in batches), default=-1)
        assert segment.max_timestamp == expected, segment.log_path.name


def _check_index_files(directory: Path) -> None:
    """After a clean shutdown the files on disk agree with the log."""
    for path in segment_files(directory):
        base = int(path.stem)
        batches = dict(parse_batches(path.read_bytes()))
        by_last = {last_offset_of(b): b for b in batches.values()}
        index = path.with_suffix(".index")
        if index.exists():
            for rel, pos in _entries(index, ">II"):
                assert pos in batches and last_offset_of(batches[pos]) == base + rel
        timeindex = path.with_suffix(".timeindex")
        assert timeindex.exists(), timeindex
        stamps = []
        for ts, rel in _entries(timeindex, ">qI"):
            assert max_timestamp_of(by_last[base + rel]) == ts
            stamps.append(ts)
        assert stamps == sorted(set(stamps))
        assert stamps and stamps[-1] == max(max_timestamp_of(b) for b in batches.values())


@pytest.mark.parametrize("damage", list(INDEX_DAMAGE))
@pytest.mark.parametrize("victim", [0, 1], ids=["first-segment", "second-segment"])
def test_old_segment_index_damage_after_clean_shutdown(
    tmp_path: Path, damage: str, victim: int
) -> None:
    manager = _manager(tmp_path)
    manager.startup()
    _fill(manager, 22)
    manager.shutdown()
    part = tmp_path / "t-0"
    expected = [data for _, _, data in layout(part)]
    segs = segment_files(part)
    assert len(segs) >= 4
    _check_index_files(part)

    target = segs[victim]
    suffix, change = INDEX_DAMAGE[damage]
    for sfx in (".index", ".timeindex") if suffix == "both" else (suffix,):
        path = target.with_suffix(sfx)
        original = path.read_bytes()
        assert len(original) >= (16 if sfx == ".index" else 24), "need two entries to damage"
        if change is None:
            path.unlink()
        else:
            path.write_bytes(change(original))

    manager = _manager(tmp_path)
    manager.startup()
    try:
        log = manager.get("t", 0)
        assert log is not None
        assert log.log_end_offset == 22 * RECORDS_PER_BATCH
        check_indexes(log)
        _check_reads(log, expected)
    finally:
        manager.shutdown()
    _check_index_files(part)
    assert [data for _, _, data in layout(part)] == expected


# --- (e) corruption in a middle segment after a crash -------------------------------------------


@pytest.mark.parametrize("batch_in_segment", [0, 2], ids=["first-batch", "third-batch"])
def test_corrupt_middle_segment_drops_everything_after(
    tmp_path: Path, batch_in_segment: int
) -> None:
    stored = build(tmp_path, 22)
    segment_bases = sorted({s.segment for s in stored})
    middle = segment_bases[1]
    victims = [s for s in stored if s.segment == middle]
    victim = victims[batch_in_segment]
    path = tmp_path / f"{middle:020d}.log"
    data = bytearray(path.read_bytes())
    data[victim.position + 40] ^= 0x10  # inside the CRC-covered part of the header
    path.write_bytes(bytes(data))

    log = reopen_unclean(tmp_path)
    try:
        keep = stored.index(victim)
        assert [s.base_offset for s in log.segments] == segment_bases[:2]
        assert path.stat().st_size == victim.position
        for later in segment_bases[2:]:
            for suffix in (".log", ".index", ".timeindex"):
                assert not (tmp_path / f"{later:020d}{suffix}").exists()
        assert_intact_prefix(log, stored, keep)
        assert log.epochs.entries == [(EPOCH, 0)]
    finally:
        log.close()
    log = reopen_clean(tmp_path, recovery_point=victim.base + RECORDS_PER_BATCH)
    try:
        assert log.log_end_offset == victim.base + RECORDS_PER_BATCH
        assert read_all(log) == [s.data for s in stored[:keep]] + [
            stored_batch(1000, victim.base)
        ]
    finally:
        log.abandon()


def test_corrupt_middle_segment_through_log_manager(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.startup()
    _fill(manager, 22)
    manager.abandon()
    part = tmp_path / "t-0"
    before = layout(part)
    bases = sorted({seg for seg, _, _ in before})
    middle = [(pos, data) for seg, pos, data in before if seg == bases[1]]
    pos, data = middle[1]
    path = part / f"{bases[1]:020d}.log"
    raw = bytearray(path.read_bytes())
    raw[pos + len(data) - 1] ^= 0x01  # last byte of the batch: a record byte under the CRC
    path.write_bytes(bytes(raw))

    manager = _manager(tmp_path)
    manager.startup()
    try:
        log = manager.get("t", 0)
        expected = [d for seg, _, d in before if seg < bases[1]] + [middle[0][1]]
        assert log.log_end_offset == header_of(data)[0]
        assert read_all(log) == expected
        assert sorted(p.name for p in part.glob("*.log")) == [
            f"{b:020d}.log" for b in bases[:2]
        ]
        check_indexes(log)
    finally:
        manager.shutdown()


def test_crash_with_recovery_point_checkpoint_still_cuts_torn_tail(tmp_path: Path) -> None:
    """Segments below the checkpointed recovery point are trusted, the rest is validated."""
    manager = _manager(tmp_path)
    manager.startup()
    log = manager.get_or_create("t", 0)
    for i in range(8):
        log.append(client_batch(i), leader_epoch=EPOCH)
    log.flush()
    manager.checkpoint_recovery_points()
    flushed = log.recovery_point
    assert flushed == 8 * RECORDS_PER_BATCH
    for i in range(8, 22):
        log.append(client_batch(i), leader_epoch=EPOCH)
    manager.abandon()
    part = tmp_path / "t-0"
    before = layout(part)
    seg, pos, data = before[-1]
    with open(part / f"{seg:020d}.log", "r+b") as f:
        f.truncate(pos + len(data) // 2)

    manager = _manager(tmp_path)
    manager.startup()
    try:
        log = manager.get("t", 0)
        assert log.log_end_offset == header_of(data)[0]
        assert read_all(log) == [d for _, _, d in before[:-1]]
        check_indexes(log)
        assert log.recovery_point == flushed
    finally:
        manager.shutdown()


# --- (f) clean shutdown -------------------------------------------------------------------------


def _count_recoveries(monkeypatch) -> list[int]:
    from samsa.storage.segment import LogSegment

    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment) -> int:
        calls.append(self.base_offset)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


@pytest.mark.parametrize("n", LAYOUTS)
def test_clean_shutdown_needs_no_recovery(tmp_path: Path, monkeypatch, n: int) -> None:
    manager = _manager(tmp_path)
    manager.startup()
    _fill(manager, n)
    manager.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    part = tmp_path / "t-0"
    expected = [data for _, _, data in layout(part)]
    files_before = snapshot(part)

    calls = _count_recoveries(monkeypatch)
    manager = _manager(tmp_path)
    manager.startup()
    try:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
        log = manager.get("t", 0)
        assert log.log_end_offset == n * RECORDS_PER_BATCH
        assert log.recovery_point == log.log_end_offset
        _check_reads(log, expected)
        check_indexes(log)
        assert calls == [], f"segments recovered after a clean shutdown: {calls}"
        assert snapshot(part) == files_before
    finally:
        manager.shutdown()


@pytest.mark.parametrize("n", LAYOUTS)
def test_clean_shutdown_torn_active_tail_at_every_length(tmp_path: Path, n: int) -> None:
    log = Log(tmp_path, CONFIG, clock=clock)
    for i in range(n):
        log.append(client_batch(i), leader_epoch=EPOCH)
    end = log.log_end_offset
    log.close()
    on_disk = layout(tmp_path)
    stored = [
        Stored(i, header_of(d)[0], d, seg, pos) for i, (seg, pos, d) in enumerate(on_disk)
    ]
    last = stored[-1]
    active = tmp_path / f"{last.segment:020d}.log"
    snap = snapshot(tmp_path)

    def check(length: int) -> None:
        restore(tmp_path, snap)
        with open(active, "r+b") as f:
            f.truncate(length)
        log = reopen_clean(tmp_path, recovery_point=end)
        try:
            assert_intact_prefix(log, stored, n - 1)
        finally:
            log.abandon()

    # Every torn length; a cut exactly at the batch boundary (no torn bytes) is
    # test_clean_shutdown_whole_last_batch_lost.
    for_each(list(range(last.position + 1, last.position + len(last.data))), check)


def test_clean_shutdown_torn_active_tail_through_log_manager(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.startup()
    _fill(manager, 22)
    manager.shutdown()
    part = tmp_path / "t-0"
    before = layout(part)
    seg, pos, data = before[-1]
    with open(part / f"{seg:020d}.log", "r+b") as f:
        f.truncate(pos + 61 + 5)
    manager = _manager(tmp_path)
    manager.startup()
    try:
        log = manager.get("t", 0)
        assert log.log_end_offset == header_of(data)[0]
        assert read_all(log) == [d for _, _, d in before[:-1]]
        info = log.append(client_batch(99), leader_epoch=EPOCH)
        assert info.first_offset == header_of(data)[0]
    finally:
        manager.shutdown()
    assert [d for _, _, d in layout(part)] == [d for _, _, d in before[:-1]] + [
        stored_batch(99, header_of(data)[0])
    ]


def test_clean_shutdown_whole_last_batch_lost(tmp_path: Path) -> None:
    """After a clean shutdown the active segment loses its last batch exactly at a batch
    boundary (no torn bytes). The indexes written at shutdown still name the lost offsets;
    they must be found inconsistent and rebuilt, not trusted."""
    log = Log(tmp_path, CONFIG, clock=clock)
    for i in range(22):
        log.append(client_batch(i), leader_epoch=EPOCH)
    log.close()
    before = layout(tmp_path)
    seg, pos, lost = before[-1]
    with open(tmp_path / f"{seg:020d}.log", "r+b") as f:
        f.truncate(pos)
    log = reopen_clean(tmp_path, recovery_point=22 * RECORDS_PER_BATCH)
    try:
        end = header_of(lost)[0]
        assert log.log_end_offset == end
        assert read_all(log) == [d for _, _, d in before[:-1]]
        _check_segment_max_timestamps(log)
        newest = log.max_timestamp_offset()
        assert newest is not None
        assert (newest.offset, newest.timestamp) == (end - 1, record_timestamp(end - 1))
        check_indexes(log)
    finally:
        log.abandon()


def test_recovered_segments_keep_their_max_timestamp_across_a_second_crash(
    tmp_path: Path,
) -> None:
    """Crash, recover (indexes rebuilt), the broker flushes the rolled segments and
    checkpoints the recovery point, crash again: the segments below the recovery point are now
    trusted as they are on disk, so their rebuilt time indexes must end with the segment's
    largest timestamp (Kafka's LogSegment.recover appends that final entry)."""
    manager = _manager(tmp_path)
    manager.startup()
    _fill(manager, 22)
    manager.abandon()  # crash 1
    part = tmp_path / "t-0"
    expected = [d for _, _, d in layout(part)]

    manager = _manager(tmp_path)
    manager.startup()  # recovers every segment
    log = manager.get("t", 0)
    _check_segment_max_timestamps(log)
    manager.flush_due()  # fsyncs the rolled segments: the recovery point moves to the active one
    manager.checkpoint_recovery_points()
    assert log.recovery_point == log.active.base_offset > 0
    manager.abandon()  # crash 2

    manager = _manager(tmp_path)
    manager.startup()
    try:
        log = manager.get("t", 0)
        _check_segment_max_timestamps(log)
        _check_reads(log, expected)
    finally:
        manager.shutdown()


def test_clean_shutdown_garbage_after_active_tail(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.startup()
    _fill(manager, 22)
    manager.shutdown()
    part = tmp_path / "t-0"
    before = layout(part)
    seg = before[-1][0]
    active = part / f"{seg:020d}.log"
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(bytes(100))
    manager = _manager(tmp_path)
    manager.startup()
    try:
        log = manager.get("t", 0)
        assert active.stat().st_size == size
        assert read_all(log) == [d for _, _, d in before]
    finally:
        manager.shutdown()


def test_repeated_crashes_keep_the_log_consistent(tmp_path: Path) -> None:
    """Crash, tear, recover, append, crash again: the log is always the intact prefix."""
    rng = random.Random(99)
    expected: list[bytes] = []
    log = Log(tmp_path, CONFIG, clock=clock)
    i = 0
    for _round in range(12):
        for _ in range(rng.randrange(1, 6)):
            info = log.append(client_batch(i), leader_epoch=EPOCH)
            expected.append(stored_batch(i, info.first_offset))
            i += 1
        log.abandon()
        if rng.random() < 0.7:
            active = segment_files(tmp_path)[-1]
            batches = parse_batches(active.read_bytes())
            if batches:
                pos, data = batches[-1]
                with open(active, "r+b") as f:
                    f.truncate(pos + rng.randrange(len(data)))
                expected.pop()
        log = reopen_unclean(tmp_path)
        assert read_all(log) == expected
        assert log.log_end_offset == (last_offset_of(expected[-1]) + 1 if expected else 0)
        check_indexes(log)
    log.abandon()
