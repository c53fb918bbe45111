"""Stateful property test of ``samsa.storage.log.Log`` against an in-memory model.

Random sequences of appends (several batches per call, every codec, CreateTime and
LogAppendTime topics), reads (max_bytes, high watermark, KIP-74), rolls, retention by time and
size, DeleteRecords, follower truncation, timestamp lookups, flushes and clean / unclean
reopens. After every step the log must agree with the model: log start and end offsets, the
bytes of every batch (offsets and epoch stamped, nothing else changed), the records inside
them, the sparse indexes, the leader epoch cache, and the segment layout rules.

The model owns every record ever appended (offsets are dense from 0: a leader log) and the log
start offset. Where a correct implementation has a choice (where segments roll), the model reads
the layout from the log and checks it against the rules instead of predicting it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import shutil
import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from samsa.config import LogConfig
from samsa.errors import RecordListTooLargeError
from samsa.records.batch import HEADER_SIZE, Compression, read_header
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.storage.log import Log

from .conftest import FakeClock, split_batches

DEFAULT_CONFIG = LogConfig()


@dataclass(frozen=True)
class ModelBatch:
    base: int
    last: int
    max_ts: int
    size: int
    stored: bytes  # what the log must hold: the client's bytes with baseOffset/epoch stamped
    append_id: int


# --- strategies ---------------------------------------------------------------------------------

configs = st.builds(
    LogConfig,
    segment_bytes=st.integers(600, 4000),
    index_interval_bytes=st.integers(0, 500),
    # As small as 8 bytes: one offset index entry (8 bytes), time index entries are 12.
    segment_index_bytes=st.one_of(
        st.just(DEFAULT_CONFIG.segment_index_bytes), st.integers(8, 64)
    ),
    segment_ms=st.one_of(st.just(DEFAULT_CONFIG.segment_ms), st.integers(1, 8000)),
    retention_ms=st.one_of(st.just(-1), st.integers(0, 30_000)),
    retention_bytes=st.one_of(st.just(-1), st.integers(0, 6000)),
    message_timestamp_type=st.sampled_from(["CreateTime", "CreateTime", "LogAppendTime"]),
)

# (key length or None, value length, timestamp delta from the batch's base timestamp)
# Mostly small records so that most appends fit a small segment.bytes; some up to 300 bytes.
sizes = st.one_of(st.integers(0, 8), st.integers(0, 40), st.integers(0, 300))
record_specs = st.tuples(st.one_of(st.none(), sizes), sizes, st.integers(-40, 40))
batch_specs = st.tuples(
    st.sampled_from(list(Compression)),
    st.integers(-6000, 1000),  # batch timestamp relative to the clock
    st.lists(record_specs, min_size=1, max_size=10),
)
# Positions are drawn as large integers and reduced modulo the current range.
picks = st.integers(0, 2**32)


@contextlib.contextmanager
def capture_warnings() -> Iterator[list[str]]:
    """Warnings the storage code logs (recovery, index rebuilds) inside the block."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("samsa.storage")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def has_records(machine: LogMachine) -> bool:
    return bool(machine.records)


def _content(rng: random.Random, n: int) -> bytes:
    if rng.random() < 0.5:
        return rng.randbytes(n)
    pattern = rng.randbytes(rng.randint(1, 8))
    return (pattern * (n // len(pattern) + 1))[:n]


def _stamped(client_bytes: bytes, base: int, epoch: int, append_time: int | None) -> bytes:
    """The batch as the log must store it: baseOffset and partitionLeaderEpoch set and, for
    LogAppendTime, the timestamp-type bit and maxTimestamp set under a new CRC-32C."""
    header = read_header(client_bytes)
    out = bytearray(struct.pack(">qii", base, header.batch_length, epoch) + client_bytes[16:])
    if append_time is not None:
        struct.pack_into(">h", out, 21, header.attributes | 0x08)
        struct.pack_into(">q", out, 35, append_time)
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


class LogMachine(RuleBasedStateMachine):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.dir = directory
        self.clock = FakeClock()
        self.log: Log | None = None
        self.cfg = DEFAULT_CONFIG
        self.records: list[tuple[bytes | None, bytes, int]] = []  # index = offset
        self.batches: list[ModelBatch] = []
        self.bases: list[int] = []
        self.start = 0
        self.epoch_start: int | None = None  # start offset of epoch 0 in the epoch cache
        self.append_ids = itertools.count()
        self.content_seed = itertools.count()

    # --- model helpers ------------------------------------------------------------------------

    @property
    def leo(self) -> int:
        return len(self.records)

    def batch_at(self, offset: int) -> ModelBatch:
        return self.batches[bisect_right(self.bases, offset) - 1]

    def segment_bases(self) -> list[int]:
        return [s.base_offset for s in self.log.segments]

    def segment_max_ts(self, base: int, end: int) -> int:
        return max((self.records[o][2] for o in range(base, end)), default=-1)

    def open_log(self, **kwargs) -> None:
        self.log = Log(self.dir, self.cfg, clock=self.clock, **kwargs)
        # Kafka's load: truncateFromEnd(log end offset), then truncateFromStart(log start).
        if self.epoch_start is not None and self.epoch_start >= self.leo:
            self.epoch_start = None
        self.note_new_start()

    def note_new_start(self) -> None:
        """The epoch cache follows the log start offset (truncateFromStart)."""
        if self.epoch_start is not None and self.epoch_start < self.start:
            self.epoch_start = self.start

    # --- rules --------------------------------------------------------------------------------

    @initialize(cfg=configs)
    def create(self, cfg: LogConfig) -> None:
        self.cfg = cfg
        self.open_log()
        assert self.log.log_end_offset == 0
        assert self.log.log_start_offset == 0

    # Three append rules: more appends than other steps (rule choice is uniform, and
    # Hypothesis switches random rules off for whole test cases).
    @rule(spec=batch_specs)
    def append_one(self, spec) -> None:
        # The common case: one batch per partition per produce request.
        self.append(specs=[spec])

    @rule(
        codec=st.sampled_from(list(Compression)),
        stamps=st.lists(st.integers(-3000, 1000), min_size=1, max_size=3),
    )
    def append_small(self, codec: Compression, stamps: list[int]) -> None:
        self.append(specs=[(codec, 0, [(None, 4, ts) for ts in stamps])])

    @rule(specs=st.lists(batch_specs, min_size=1, max_size=5))
    def append(self, specs) -> None:
        rng = random.Random(next(self.content_seed))
        encoded: list[tuple[bytes, list[tuple[bytes | None, bytes, int]]]] = []
        for codec, ts_offset, record_list in specs:
            base_ts = self.clock.now + ts_offset
            rows = []
            for key_len, value_len, delta in record_list:
                key = None if key_len is None else _content(rng, key_len)
                rows.append((key, _content(rng, value_len), base_ts + delta))
            batch = encode_batch(
                [RecordInput(v, key=k, timestamp=t) for k, v, t in rows],
                compression_type=codec,
            )
            encoded.append((batch, rows))
        data = b"".join(b for b, _ in encoded)

        files_before = self.file_sizes()
        if len(data) > self.cfg.segment_bytes:
            with pytest.raises(RecordListTooLargeError):
                self.log.append(data)
            assert self.file_sizes() == files_before
            return

        first = self.leo
        info = self.log.append(data)
        assert info.first_offset == first
        append_time = self.clock.now if self.cfg.log_append_time else None
        append_id = next(self.append_ids)
        if self.epoch_start is None:
            self.epoch_start = first
        offset = first
        for batch, rows in encoded:
            header = read_header(batch)
            if append_time is not None:
                rows = [(key, value, append_time) for key, value, _ in rows]
            self.batches.append(
                ModelBatch(
                    offset,
                    offset + len(rows) - 1,
                    header.max_timestamp if append_time is None else append_time,
                    len(batch),
                    _stamped(batch, offset, 0, append_time),
                    append_id,
                )
            )
            self.bases.append(offset)
            self.records.extend(rows)
            offset += len(rows)
        assert info.last_offset == self.leo - 1
        assert info.log_append_time == (-1 if append_time is None else append_time)
        assert info.log_start_offset == self.start

    @rule(
        pick=picks,
        max_bytes=st.integers(0, 6000),
        hw_pick=st.one_of(st.none(), picks),
        min_one_batch=st.booleans(),
    )
    def read(self, pick: int, max_bytes: int, hw_pick: int | None, min_one_batch: bool) -> None:
        offset = self.start + pick % (self.leo - self.start + 1)
        hw = None
        if hw_pick is not None:
            # A high watermark is always at a batch boundary (followers copy whole batches).
            boundaries = [b for b in self.bases if b >= self.start] + [self.leo]
            hw = boundaries[hw_pick % len(boundaries)]
        region = self.log.read(offset, max_bytes, max_offset=hw, min_one_batch=min_one_batch)
        upper = self.leo if hw is None else hw

        if offset == self.leo or self.batch_at(offset).base >= upper:
            assert region is None
            return
        if not min_one_batch and self.batch_at(offset).size > max_bytes:
            assert region is None
            return
        assert region is not None
        data = region.read()
        assert len(data) == region.length
        segment = next(s for s in self.log.segments if s.file is region.file)
        assert region.position + region.length <= segment.size

        batches = split_batches(data)
        assert batches, "a read below the upper bound returns at least one batch"
        first = self.batch_at(offset)
        assert batches[0] == first.stored, "the read starts at the batch holding the offset"
        expected = first.base
        for raw in batches:
            header = read_header(raw)
            model = self.batch_at(header.base_offset)
            assert header.base_offset == expected == model.base
            assert raw == model.stored
            assert header.base_offset < upper
            expected = header.next_offset
        assert len(data) <= max_bytes or (len(batches) == 1 and min_one_batch), "KIP-74"

        # Nothing was left out that fits: the next batch is past the bound, in another segment,
        # or too big for what remains of max_bytes.
        if expected < upper and expected not in self.segment_bases():
            assert len(data) + self.batch_at(expected).size > max_bytes

        for record in (r for raw in batches for r in decode_records(raw)):
            assert (record.key, record.value, record.timestamp) == self.records[record.offset]

    @precondition(has_records)
    @rule()
    def roll(self) -> None:
        self.log.roll()
        assert self.log.active.size == 0 or self.leo == 0
        assert self.log.active.base_offset == self.leo

    @rule(advance=st.integers(0, 20_000))
    def retention(self, advance: int) -> None:
        now = self.clock.advance(advance)
        segments = self.log.segments
        layout = []
        for i, segment in enumerate(segments):
            end = segments[i + 1].base_offset if i + 1 < len(segments) else self.leo
            layout.append(
                (segment.base_offset, os.path.getsize(segment.log_path),
                 self.segment_max_ts(segment.base_offset, end))
            )
        # Predict: below the log start, then retention.ms, then retention.bytes; whole
        # segments from the oldest on, never the active one.
        doomed = 0
        while doomed < len(layout) - 1 and layout[doomed + 1][0] <= self.start:
            doomed += 1
        if self.cfg.retention_ms >= 0:
            while doomed < len(layout) - 1 and now - layout[doomed][2] > self.cfg.retention_ms:
                doomed += 1
        if self.cfg.retention_bytes >= 0:
            excess = sum(size for _, size, _ in layout[doomed:]) - self.cfg.retention_bytes
            while doomed < len(layout) - 1 and excess - layout[doomed][1] >= 0:
                excess -= layout[doomed][1]
                doomed += 1

        old_start = self.start
        deleted = self.log.delete_old_segments()
        assert deleted == doomed
        assert self.segment_bases() == [base for base, _, _ in layout[doomed:]]
        new_start = self.log.log_start_offset
        assert new_start >= old_start
        assert new_start == max(old_start, self.log.segments[0].base_offset)
        if new_start != old_start:
            assert new_start in self.segment_bases()
        self.start = new_start
        self.note_new_start()

    @precondition(has_records)
    @rule(pick=picks)
    def delete_records_before(self, pick: int) -> None:
        target = pick % (self.leo + 1)
        bases = self.segment_bases()
        self.start = max(self.start, target)
        assert self.log.delete_records_before(target) == self.start
        assert self.log.log_start_offset == self.start
        self.note_new_start()
        # Segments wholly below the new start may go now or at the next retention pass (as in
        # Kafka); every other segment stays.
        kept = self.segment_bases()
        assert kept == bases[len(bases) - len(kept) :]
        for i in range(len(bases) - len(kept)):
            assert bases[i + 1] <= self.start

    @precondition(has_records)
    @rule(pick=picks)
    def truncate_to(self, pick: int) -> None:
        """A follower cutting its log back to a batch boundary (its leader's epoch end)."""
        boundaries = [b for b in self.bases if b >= self.start] + [self.leo]
        target = boundaries[pick % len(boundaries)]
        bases = self.segment_bases()
        recovery_point = self.log.recovery_point
        self.log.truncate_to(target)
        if self.epoch_start is not None and self.epoch_start >= target:
            # epochs starting at the target go even when no batch does (Kafka's truncateTo)
            self.epoch_start = None
        if target == self.leo:  # nothing to cut
            assert self.segment_bases() == bases
            assert self.log.recovery_point == recovery_point
            return
        del self.records[target:]
        keep = bisect_right(self.bases, target - 1)
        del self.batches[keep:]
        del self.bases[keep:]
        assert self.log.recovery_point == min(recovery_point, target)
        # Segments starting at or after the target go, except the first one.
        expected = [b for b in bases if b < target] or bases[:1]
        assert self.segment_bases() == expected

    @rule(data=st.data())
    def offset_for_timestamp(self, data) -> None:
        if self.records and data.draw(st.booleans()):
            offset = data.draw(st.integers(0, self.leo - 1))
            target = self.records[offset][2] + data.draw(st.sampled_from([-1, 0, 1]))
        else:
            target = self.clock.now + data.draw(st.integers(-8000, 2000))
        expected = next(
            (
                (o, self.records[o][2])
                for o in range(self.start, self.leo)
                if self.records[o][2] >= target
            ),
            None,
        )
        found = self.log.offset_for_timestamp(target)
        assert (None if found is None else (found.offset, found.timestamp)) == expected

    @precondition(has_records)
    @rule()
    def max_timestamp_offset(self) -> None:
        present = range(self.log.segments[0].base_offset, self.leo)
        best = max((self.records[o][2] for o in present), default=None)
        found = self.log.max_timestamp_offset()
        if best is None:
            assert found is None
            return
        first = next(o for o in present if self.records[o][2] == best)
        assert found is not None
        assert (found.offset, found.timestamp) == (first, best)

    @precondition(has_records)
    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @rule()
    def reopen_clean(self) -> None:
        bases = self.segment_bases()
        recovery_point = self.log.recovery_point
        self.log.close()
        self.log = None
        with capture_warnings() as warnings:
            self.open_log(
                had_clean_shutdown=True,
                log_start_offset=self.start,
                recovery_point=recovery_point,
            )
        assert warnings == [], "a log closed cleanly reopens without repairs"
        assert self.segment_bases() == bases
        assert self.log.log_start_offset == self.start
        assert self.log.recovery_point == self.leo

    @rule(keep_start=st.booleans(), from_recovery_point=st.booleans())
    def reopen_unclean(self, keep_start: bool, from_recovery_point: bool) -> None:
        """A crash: nothing written since the last flush is lost here (the page cache
        survives a process crash), but indexes not yet written are, and recovery runs from
        the recovery point (or from the start: a lost recovery-point checkpoint)."""
        bases = self.segment_bases()
        recovery_point = self.log.recovery_point if from_recovery_point else 0
        self.log.abandon()
        self.log = None
        if keep_start:
            self.open_log(recovery_point=recovery_point, log_start_offset=self.start)
            assert self.log.log_start_offset == self.start
        else:
            # Without the log-start-offset checkpoint the log starts at its first segment.
            self.open_log(recovery_point=recovery_point)
            assert self.log.log_start_offset == bases[0] <= self.start
            self.start = self.log.log_start_offset
        assert self.segment_bases() == bases
        assert self.log.recovery_point == recovery_point

    # --- invariants ---------------------------------------------------------------------------

    def file_sizes(self) -> dict[str, int]:
        return {p.name: p.stat().st_size for p in self.dir.iterdir() if p.suffix == ".log"}

    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.start
        assert self.log.segments[0].base_offset <= self.start <= self.leo
        if self.epoch_start is None:
            assert self.log.epochs.entries == []
            assert self.log.end_offset_for_epoch(0) == (-1, -1)
        else:
            assert self.log.epochs.entries == [(0, self.epoch_start)]
            assert self.log.end_offset_for_epoch(0) == (0, self.leo)
        assert self.log.end_offset_for_epoch(1) == (-1, -1)

    @invariant()
    def segments_hold_the_model(self) -> None:
        """Every segment file holds exactly the model's batches from its base offset on, and
        the segments are contiguous, bounded by segment.bytes and rolled by segment.ms."""
        if self.log is None:
            return
        segments = self.log.segments
        on_disk = sorted(int(p.stem) for p in self.dir.iterdir() if p.suffix == ".log")
        assert on_disk == [s.base_offset for s in segments]
        for i, segment in enumerate(segments):
            end = segments[i + 1].base_offset if i + 1 < len(segments) else self.leo
            if i + 1 < len(segments):
                assert segment.size > 0, "only the active segment may be empty"
            assert segment.base_offset < end or (i == len(segments) - 1 and end == self.leo)
            data = segment.read_bytes(0, segment.size + 1)
            assert len(data) == segment.size == os.path.getsize(segment.log_path)
            assert segment.size <= self.cfg.segment_bytes
            if segment.base_offset == end:
                assert data == b""
                continue
            lo = bisect_right(self.bases, segment.base_offset) - 1
            hi = bisect_right(self.bases, end - 1)
            model = self.batches[lo:hi]
            assert model[0].base == segment.base_offset
            assert data == b"".join(b.stored for b in model)
            first = model[0]
            for b in model:
                if b.append_id != first.append_id:
                    assert b.max_ts - first.max_ts <= self.cfg.segment_ms

    @invariant()
    def indexes_point_at_batches(self) -> None:
        if self.log is None:
            return
        interval = self.cfg.index_interval_bytes
        for segment in self.log.segments:
            index, time_index = segment.index, segment.time_index
            # Offset index: last offset of the batch that starts at the position; one entry
            # at the first batch more than index.interval.bytes past the previous entry.
            expected, since = [], 0
            pos = 0
            stored: dict[int, tuple[int, int]] = {}
            while pos < segment.size:
                header = read_header(segment.read_bytes(pos, HEADER_SIZE))
                stored[header.last_offset] = (pos, header.max_timestamp)
                if since > interval:
                    expected.append((header.last_offset, pos))
                    since = 0
                since += header.size
                pos += header.size
            assert list(zip(index.offsets, index.positions, strict=True)) == expected
            # Time index: increasing timestamps; each entry names the last offset of the batch
            # where the segment's max timestamp first reached the entry's timestamp.
            assert list(time_index.timestamps) == sorted(set(time_index.timestamps))
            for ts, offset in zip(time_index.timestamps, time_index.offsets, strict=True):
                assert offset in stored
                pos, batch_max = stored[offset]
                assert batch_max == ts
                before = [m for p, m in stored.values() if p < pos]
                assert all(m < ts for m in before)

    @invariant()
    def whole_log_reads_back(self) -> None:
        """Reading from the log start to the end, as a consumer would, returns every batch."""
        if self.log is None or self.start == self.leo:
            return
        offset, out = self.start, []
        while offset < self.leo:
            region = self.log.read(offset, 2**31 - 1)
            assert region is not None
            batches = split_batches(region.read())
            out.extend(batches)
            offset = read_header(batches[-1]).next_offset
        assert offset == self.leo
        first = bisect_right(self.bases, self.start) - 1
        assert out == [b.stored for b in self.batches[first:]]

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def test_log_against_model(tmp_path: Path) -> None:
    counter = itertools.count()

    def factory() -> LogMachine:
        return LogMachine(tmp_path / f"case-{next(counter)}")

    run_state_machine_as_test(
        factory,
        settings=settings(
            max_examples=100,
            stateful_step_count=50,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )

