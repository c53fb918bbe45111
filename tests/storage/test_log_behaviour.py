"""Focused examples of ``samsa.storage.log.Log``: reads, append validation, rolls, retention,
DeleteRecords, timestamps, flushing, leader epochs, follower appends, truncation and config."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest

from samsa.config import BrokerConfig, ConfigError, LogConfig
from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    UnsupportedForMessageFormatError,
)
from samsa.records.batch import NO_TIMESTAMP, Attr, read_header, validate_batches
from samsa.records.record import decode_records
from samsa.storage.log import Log
from samsa.storage.segment import LogSegment

from .conftest import (
    BASE_TIME_MS,
    FakeClock,
    batch_of_size,
    decode_all,
    make_batch,
    split_batches,
)

T = BASE_TIME_MS
HOUR_MS = 3600 * 1000


def new_log(tmp_path: Path, clock: FakeClock, **props) -> Log:
    return Log(tmp_path / "topic-0", LogConfig.from_props(props), clock=clock)


def reopen(log: Log, *, clean: bool = True) -> Log:
    if clean:
        log.close()
        return Log(
            log.dir, log.config, clock=log.clock, had_clean_shutdown=True,
            log_start_offset=log.log_start_offset, recovery_point=log.recovery_point,
        )
    log.abandon()
    return Log(log.dir, log.config, clock=log.clock, log_start_offset=log.log_start_offset)


def bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def segment_files(log: Log) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.suffix == ".log")


def disk_state(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in log.dir.iterdir() if p.suffix == ".log"}


def read_bytes(log: Log, offset: int, max_bytes: int = 2**31 - 1, **kwargs) -> bytes | None:
    region = log.read(offset, max_bytes, **kwargs)
    return None if region is None else region.read()


def read_all(log: Log) -> bytes:
    """Every batch from the log start offset on, segment by segment."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = read_bytes(log, offset)
        out.append(data)
        offset = read_header(split_batches(data)[-1]).next_offset
    return b"".join(out)


def offsets_in(data: bytes | None) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch."""
    if data is None:
        return []
    return [(read_header(b).base_offset, read_header(b).last_offset) for b in split_batches(data)]


def three_record_batches(log: Log, n: int, *, timestamp: int = T, **kwargs) -> list[int]:
    """Append ``n`` batches of 3 records; returns their sizes."""
    sizes = []
    for i in range(n):
        batch = make_batch([b"%d-%d" % (i, j) for j in range(3)], timestamp=timestamp)
        log.append(batch, **kwargs)
        sizes.append(len(batch))
    return sizes


# --- reads ----------------------------------------------------------------------------------


def test_read_returns_whole_batches_within_max_bytes(tmp_path, clock):
    log = new_log(tmp_path, clock)
    sizes = three_record_batches(log, 4)  # offsets 0-2, 3-5, 6-8, 9-11
    everything = read_bytes(log, 0)
    assert offsets_in(everything) == [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert len(everything) == sum(sizes)

    assert offsets_in(read_bytes(log, 0, sizes[0] + sizes[1])) == [(0, 2), (3, 5)]
    assert offsets_in(read_bytes(log, 0, sizes[0] + sizes[1] - 1)) == [(0, 2)]
    assert offsets_in(read_bytes(log, 3, sizes[1] + sizes[2] + 5)) == [(3, 5), (6, 8)]
    # KIP-74: a first batch larger than max_bytes is returned whole, alone.
    for max_bytes in (0, 1, sizes[0] - 1):
        region = log.read(0, max_bytes)
        assert region.length == sizes[0]
        assert offsets_in(region.read()) == [(0, 2)]
        assert log.read(0, max_bytes, min_one_batch=False) is None


def test_read_respects_max_offset(tmp_path, clock):
    log = new_log(tmp_path, clock)
    three_record_batches(log, 3)  # 0-2, 3-5, 6-8
    assert offsets_in(read_bytes(log, 0, max_offset=6)) == [(0, 2), (3, 5)]
    assert offsets_in(read_bytes(log, 0, max_offset=3)) == [(0, 2)]
    assert offsets_in(read_bytes(log, 4, max_offset=9)) == [(3, 5), (6, 8)]
    assert offsets_in(read_bytes(log, 0, max_offset=100)) == [(0, 2), (3, 5), (6, 8)]
    assert log.read(0, 10_000, max_offset=0) is None
    assert log.read(3, 10_000, max_offset=3) is None
    assert log.read(6, 10_000, max_offset=3) is None
    # max_bytes and max_offset together: the tighter one wins.
    size = len(split_batches(read_bytes(log, 0))[0])
    assert offsets_in(read_bytes(log, 0, size, max_offset=6)) == [(0, 2)]


def test_read_of_an_offset_inside_a_batch_starts_at_that_batch(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.bytes": 400})
    three_record_batches(log, 6)
    assert len(log.segments) > 1
    for offset in range(log.log_end_offset):
        data = read_bytes(log, offset)
        first_base, first_last = offsets_in(data)[0]
        assert first_base <= offset <= first_last
        assert first_base == offset - offset % 3
        records = decode_all(data)
        assert [r.offset for r in records] == list(range(first_base, records[-1].offset + 1))


def test_read_at_log_end_offset_returns_none(tmp_path, clock):
    log = new_log(tmp_path, clock)
    assert log.read(0, 1000) is None
    assert log.read_batches(0) == b""
    three_record_batches(log, 2)
    assert log.read(6, 1000) is None
    log.roll()
    assert log.read(6, 1000) is None


def test_read_outside_the_log_raises_offset_out_of_range(tmp_path, clock):
    log = new_log(tmp_path, clock)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1000)
    three_record_batches(log, 3)
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(10, 1000)
    assert exc.value.code == 1  # OFFSET_OUT_OF_RANGE
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)
    log.delete_records_before(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1000)
    # The batch holding the log start offset is returned whole, as Kafka does.
    assert offsets_in(read_bytes(log, 4))[0] == (3, 5)


def test_a_region_of_a_deleted_segment_stays_readable(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.bytes": 200})
    three_record_batches(log, 3)
    region = log.read(0, 10_000)
    expected = region.read()
    log.delete_records_before(log.log_end_offset)
    log.delete_old_segments()
    assert log.segments[0].base_offset > 0
    assert not (log.dir / "00000000000000000000.log").exists()
    assert region.read() == expected


# --- append validation ------------------------------------------------------------------------


def test_append_assigns_offsets_and_stamps_epoch_without_touching_the_rest(tmp_path, clock):
    log = new_log(tmp_path, clock)
    batch = make_batch(3, base_offset=777, leader_epoch=-1)
    log.append(make_batch(2))
    info = log.append(batch, leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (2, 4)
    assert info.log_append_time == -1
    stored = split_batches(read_bytes(log, 2))[0]
    header = read_header(stored)
    assert (header.base_offset, header.leader_epoch) == (2, 7)
    assert stored[16:] == batch[16:]  # everything under the CRC is the client's
    validate_batches(stored)


def test_message_too_large_writes_nothing(tmp_path, clock):
    batch = make_batch([b"x" * 500])
    log = new_log(tmp_path, clock, **{"max.message.bytes": len(batch) - 1})
    log.append(make_batch(1))
    before = disk_state(log)
    with pytest.raises(MessageTooLargeError) as exc:
        log.append(batch)
    assert exc.value.code == 10  # MESSAGE_TOO_LARGE
    assert log.log_end_offset == 1
    assert disk_state(log) == before

    log = new_log(tmp_path / "b", clock, **{"max.message.bytes": len(batch)})
    assert log.append(batch).last_offset == 0


def test_append_larger_than_a_segment_is_refused(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.bytes": 300})
    batches = make_batch([b"a" * 100]) + make_batch([b"b" * 100]) + make_batch([b"c" * 100])
    assert len(batches) > 300
    with pytest.raises(RecordListTooLargeError):
        log.append(batches)
    assert log.log_end_offset == 0
    assert log.size == 0


def _flip_crc_covered_byte(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[-1] ^= 0x01
    return bytes(damaged)


def _set_magic(batch: bytes, magic: int) -> bytes:
    damaged = bytearray(batch)
    damaged[16] = magic  # magic is outside the CRC
    return bytes(damaged)


def _set_batch_length(batch: bytes, length: int) -> bytes:
    damaged = bytearray(batch)
    struct.pack_into(">i", damaged, 8, length)
    return bytes(damaged)


GOOD = make_batch(3)
BAD_BATCHES = {
    "crc": (_flip_crc_covered_byte(GOOD), CorruptRecordError),
    "truncated": (GOOD[:-1], CorruptRecordError),
    "truncated header": (GOOD[:40], CorruptRecordError),
    "length past the end": (_set_batch_length(GOOD, len(GOOD)), CorruptRecordError),
    "length too small": (_set_batch_length(GOOD, 10), CorruptRecordError),
    "magic 1": (_set_magic(GOOD, 1), UnsupportedForMessageFormatError),
    "magic 0": (_set_magic(GOOD, 0), UnsupportedForMessageFormatError),
    "magic 3": (_set_magic(GOOD, 3), CorruptRecordError),
    "empty": (b"", InvalidRecordError),
    "control batch from a client": (make_batch(1, control=True), InvalidRecordError),
}


@pytest.mark.parametrize("bad,error", BAD_BATCHES.values(), ids=BAD_BATCHES.keys())
def test_invalid_batches_raise_and_write_nothing(tmp_path, clock, bad, error):
    log = new_log(tmp_path, clock)
    log.append(make_batch(2))
    before = disk_state(log)
    with pytest.raises(error):
        log.append(bad)
    assert log.log_end_offset == 2
    assert disk_state(log) == before
    assert log.append(make_batch(1)).first_offset == 2


NON_EMPTY_BAD_BATCHES = {k: v for k, v in BAD_BATCHES.items() if v[0]}


@pytest.mark.parametrize(
    "bad,error", NON_EMPTY_BAD_BATCHES.values(), ids=NON_EMPTY_BAD_BATCHES.keys()
)
def test_a_bad_batch_after_a_good_one_writes_nothing(tmp_path, clock, bad, error):
    log = new_log(tmp_path, clock)
    log.append(make_batch(2))
    before = disk_state(log)
    with pytest.raises(error):
        log.append(make_batch(3) + bad + make_batch(1))
    assert log.log_end_offset == 2
    assert disk_state(log) == before
    assert offsets_in(read_bytes(log, 0)) == [(0, 1)]


def test_error_classes_carry_kafka_codes():
    assert CorruptRecordError().code == 2  # CORRUPT_MESSAGE
    assert InvalidRecordError().code == 87  # INVALID_RECORD
    assert RecordListTooLargeError().code == 18  # RECORD_LIST_TOO_LARGE
    assert UnsupportedForMessageFormatError().code == 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT


# --- rolling ------------------------------------------------------------------------------------


def test_roll_by_segment_bytes(tmp_path, clock):
    size = 100
    log = new_log(tmp_path, clock, **{"segment.bytes": 3 * size})
    for _ in range(7):
        log.append(batch_of_size(size))
    assert bases(log) == [0, 3, 6]
    assert [s.size for s in log.segments] == [3 * size, 3 * size, size]
    assert segment_files(log) == [f"{b:020d}.log" for b in (0, 3, 6)]
    # A batch that exactly fills what is left does not roll; one byte more does.
    log2 = new_log(tmp_path / "b", clock, **{"segment.bytes": 2 * size + 1})
    log2.append(batch_of_size(size))
    log2.append(batch_of_size(size + 1))
    log2.append(batch_of_size(size))
    assert bases(log2) == [0, 2]


def test_roll_by_segment_ms_uses_batch_timestamps(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.ms": 1000})
    log.append(make_batch(1, timestamp=T))
    clock.advance(10 * HOUR_MS)  # the wall clock does not matter once batches have timestamps
    log.append(make_batch(1, timestamp=T + 1000))  # exactly segment.ms: no roll
    log.append(make_batch(1, timestamp=T - 5000))
    assert bases(log) == [0]
    log.append(make_batch(1, timestamp=T + 1001))
    assert bases(log) == [0, 3]
    # The new segment's clock starts at its first batch; the batch's max timestamp counts.
    log.append(make_batch(timestamps=[T + 1001, T + 2001], values=[b"a", b"b"]))
    assert bases(log) == [0, 3]
    log.append(make_batch(timestamps=[T, T + 2002], values=[b"a", b"b"]))
    assert bases(log) == [0, 3, 6]


def test_roll_by_segment_ms_without_timestamps_uses_the_clock(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.ms": 1000})
    log.append(make_batch(1, timestamp=NO_TIMESTAMP))
    clock.advance(1000)
    log.append(make_batch(1, timestamp=NO_TIMESTAMP))
    assert bases(log) == [0]
    clock.advance(1)
    log.append(make_batch(1, timestamp=NO_TIMESTAMP))
    assert bases(log) == [0, 2]


def test_roll_when_the_offset_index_is_full(tmp_path, clock):
    # 32 bytes: 4 offset index entries (8 bytes each). Equal timestamps keep the time index at
    # one entry, so the offset index fills first.
    log = new_log(tmp_path, clock, **{"segment.index.bytes": 32, "index.interval.bytes": 0})
    for _ in range(6):
        log.append(make_batch(1, timestamp=T))
    # No entry for the first batch of a segment; one for each following batch.
    assert bases(log) == [0, 5]
    assert len(log.segments[0].index) == 4
    assert len(log.segments[1].index) == 0


def test_roll_when_the_time_index_is_full(tmp_path, clock):
    # 24 bytes: 3 offset index entries but only 2 time index entries (12 bytes each).
    log = new_log(tmp_path, clock, **{"segment.index.bytes": 24, "index.interval.bytes": 0})
    for i in range(4):
        log.append(make_batch(1, timestamp=T + i))
    assert bases(log) == [0, 3]
    assert len(log.segments[0].time_index) == 2
    assert len(log.segments[0].index) == 2


def test_roll_when_relative_offsets_would_overflow(tmp_path, clock):
    log = new_log(tmp_path, clock)
    log.append(make_batch(1, base_offset=0, leader_epoch=0), assign_offsets=False)
    far = 2**31 + 5
    log.append(make_batch(1, base_offset=far, leader_epoch=0), assign_offsets=False)
    assert bases(log) == [0, far]
    assert log.log_end_offset == far + 1
    assert offsets_in(read_bytes(log, far)) == [(far, far)]


def test_explicit_roll_only_rolls_a_non_empty_segment(tmp_path, clock):
    log = new_log(tmp_path, clock)
    log.roll()
    assert bases(log) == [0]
    three_record_batches(log, 1)
    log.roll()
    log.roll()
    assert bases(log) == [0, 3]
    assert segment_files(log) == ["00000000000000000000.log", "00000000000000000003.log"]


# --- retention ----------------------------------------------------------------------------------


def one_batch_per_segment(tmp_path, clock, timestamps: list[int], **props) -> Log:
    size = 100
    log = new_log(tmp_path, clock, **{"segment.bytes": size, **props})
    for ts in timestamps:
        log.append(batch_of_size(size, timestamp=ts, keys=[b"k"]))  # compacted topics want keys
    assert bases(log) == list(range(len(timestamps)))
    return log


def test_retention_ms_deletes_old_segments_but_never_the_active_one(tmp_path, clock):
    log = one_batch_per_segment(
        tmp_path, clock, [T - 5000, T - 3000, T - 1000, T], **{"retention.ms": 1000}
    )
    assert log.delete_old_segments() == 2  # T - 1000 is exactly retention.ms old: kept
    assert bases(log) == [2, 3]
    assert log.log_start_offset == 2
    assert segment_files(log) == [f"{b:020d}.log" for b in (2, 3)]
    assert not list(log.dir.glob("0000000000000000000[01].*index"))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1000)
    clock.advance(HOUR_MS)
    assert log.delete_old_segments() == 1
    assert bases(log) == [3]  # the active segment stays, however old
    assert log.log_start_offset == 3
    assert offsets_in(read_bytes(log, 3)) == [(3, 3)]
    assert log.delete_old_segments() == 0
    assert log.append(make_batch(1, timestamp=clock.now)).first_offset == 4


def test_retention_ms_stops_at_the_first_segment_to_keep(tmp_path, clock):
    log = one_batch_per_segment(
        tmp_path, clock, [T - 5000, T, T - 5000, T], **{"retention.ms": 1000}
    )
    assert log.delete_old_segments() == 1
    assert bases(log) == [1, 2, 3]


@pytest.mark.parametrize(
    "retention_bytes,deleted", [(-1, 0), (1000, 0), (201, 1), (200, 2), (100, 3), (0, 3)]
)
def test_retention_bytes(tmp_path, clock, retention_bytes, deleted):
    # 4 segments of 100 bytes: delete the oldest while the rest still holds retention.bytes.
    log = one_batch_per_segment(
        tmp_path, clock, [T] * 4, **{"retention.bytes": retention_bytes}
    )
    assert log.delete_old_segments() == deleted
    assert bases(log) == list(range(deleted, 4))
    assert log.log_start_offset == deleted


def test_compacted_topics_are_not_deleted_by_retention(tmp_path, clock):
    log = one_batch_per_segment(
        tmp_path, clock, [T - 5000] * 3,
        **{"retention.ms": 0, "retention.bytes": 0, "cleanup.policy": "compact"},
    )
    assert log.delete_old_segments() == 0
    log.delete_records_before(2)
    assert log.delete_old_segments() == 0  # already deleted by delete_records_before
    assert bases(log) == [2]


def test_no_retention_keeps_everything(tmp_path, clock):
    log = one_batch_per_segment(
        tmp_path, clock, [T - 10**9] * 3, **{"retention.ms": -1, "retention.bytes": -1}
    )
    assert log.delete_old_segments() == 0
    assert bases(log) == [0, 1, 2]


# --- DeleteRecords --------------------------------------------------------------------------------


def test_delete_records_before(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.bytes": 250})
    for i in range(5):
        log.append(make_batch([b"a" * 50, b"b" * 50], timestamp=T + i))  # 2 records, ~170 bytes
    assert bases(log) == [0, 2, 4, 6, 8]
    assert log.delete_records_before(5) == 5
    assert log.log_start_offset == 5
    assert bases(log) == [4, 6, 8]  # segments wholly below the start are gone
    for offset in (0, 3, 4):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(offset, 1000)
    assert offsets_in(read_bytes(log, 5))[0] == (4, 5)
    # Timestamp lookups do not return deleted records, even from the batch holding the start.
    found = log.offset_for_timestamp(0)
    assert (found.offset, found.timestamp) == (5, T + 2)
    assert log.delete_records_before(2) == 5  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(11)
    assert log.delete_records_before(10) == 10
    assert log.read(10, 1000) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 1000)
    assert log.log_end_offset == 10
    assert log.append(make_batch(1)).first_offset == 10
    # The start offset survives a clean reopen.
    log = reopen(log)
    assert log.log_start_offset == 10
    assert offsets_in(read_bytes(log, 10)) == [(10, 10)]


# --- LogAppendTime --------------------------------------------------------------------------------


def test_log_append_time(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    clock.set(T + 12345)
    sent = make_batch([b"a", b"b", b"c"], timestamps=[T - 300, T - 100, T - 200])
    sent_copy = bytes(sent)
    info = log.append(sent)
    assert info.log_append_time == T + 12345
    assert sent == sent_copy  # the client's buffer is not modified
    stored = read_bytes(log, 0)
    validate_batches(stored)  # CRC re-computed
    header = read_header(stored)
    assert header.attributes & Attr.LOG_APPEND_TIME
    assert header.log_append_time
    assert header.max_timestamp == T + 12345
    assert header.base_timestamp == T - 300
    assert [r.timestamp for r in decode_records(stored)] == [T + 12345] * 3
    assert [r.value for r in decode_records(stored)] == [b"a", b"b", b"c"]
    found = log.offset_for_timestamp(T + 12345)
    assert (found.offset, found.timestamp) == (0, T + 12345)
    assert log.offset_for_timestamp(T + 12346) is None
    mts = log.max_timestamp_offset()
    assert (mts.offset, mts.timestamp) == (0, T + 12345)
    # A follower copies the leader's bytes as they are.
    follower = new_log(tmp_path / "f", clock, **{"message.timestamp.type": "LogAppendTime"})
    clock.advance(5000)
    assert follower.append(stored, assign_offsets=False).log_append_time == -1
    assert read_bytes(follower, 0) == stored


def test_create_time_keeps_the_producer_timestamps(tmp_path, clock):
    log = new_log(tmp_path, clock)
    clock.set(T + 12345)
    sent = make_batch([b"a", b"b"], timestamps=[T - 300, T - 100])
    log.append(sent)
    stored = read_bytes(log, 0)
    assert not read_header(stored).log_append_time
    assert [r.timestamp for r in decode_records(stored)] == [T - 300, T - 100]


# --- timestamps -----------------------------------------------------------------------------------


def timestamp_log(tmp_path, clock, interval: int) -> Log:
    log = new_log(tmp_path, clock, **{"index.interval.bytes": interval})
    log.append(make_batch(3, timestamps=[T + 100, T + 300, T + 200]))  # offsets 0-2
    log.append(make_batch(2, timestamps=[T + 250, T + 400]))  # 3-4
    log.roll()
    log.append(make_batch(2, timestamps=[T + 50, T + 400]))  # 5-6
    log.append(make_batch(3, timestamps=[T + 500, T + 10, T + 500]))  # 7-9
    return log


TIMESTAMP_CASES = [
    (0, 0), (T, 0), (T + 100, 0), (T + 101, 1), (T + 200, 1), (T + 300, 1), (T + 301, 4),
    (T + 400, 4), (T + 401, 7), (T + 500, 7), (T + 501, None),
]


@pytest.mark.parametrize("interval", [0, 4096])
def test_offset_for_timestamp_is_the_first_record_at_or_after(tmp_path, clock, interval):
    log = timestamp_log(tmp_path, clock, interval)
    for reopened in (False, True):
        for target, offset in TIMESTAMP_CASES:
            found = log.offset_for_timestamp(target)
            if offset is None:
                assert found is None, target
            else:
                assert found is not None, target
                expected_ts = [T + 100, T + 300, T + 200, T + 250, T + 400, T + 50, T + 400,
                               T + 500, T + 10, T + 500][offset]
                assert (found.offset, found.timestamp) == (offset, expected_ts), target
        if not reopened:
            log = reopen(log)


def test_offset_for_timestamp_on_an_empty_log(tmp_path, clock):
    log = new_log(tmp_path, clock)
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None


def test_max_timestamp_offset_is_the_first_record_with_the_largest_timestamp(tmp_path, clock):
    log = timestamp_log(tmp_path, clock, 0)
    found = log.max_timestamp_offset()
    assert (found.offset, found.timestamp) == (7, T + 500)
    log = reopen(log)
    found = log.max_timestamp_offset()
    assert (found.offset, found.timestamp) == (7, T + 500)
    log.append(make_batch(2, timestamps=[T + 1, T + 600]))  # 10-11
    log.append(make_batch(1, timestamp=T + 600))  # 12
    found = log.max_timestamp_offset()
    assert (found.offset, found.timestamp) == (11, T + 600)


# --- flushing -------------------------------------------------------------------------------------


def test_flush_messages_one_moves_the_recovery_point_with_every_append(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"flush.messages": 1})
    for _ in range(3):
        log.append(make_batch(2))
        assert log.recovery_point == log.log_end_offset


def test_default_flush_leaves_the_recovery_point(tmp_path, clock):
    log = new_log(tmp_path, clock)
    three_record_batches(log, 3)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 9


def test_flush_messages_counts_records(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"flush.messages": 5})
    log.append(make_batch(2))
    log.append(make_batch(2))
    assert log.recovery_point == 0
    log.append(make_batch(1))
    assert log.recovery_point == 5


def test_flush_rolled_makes_the_inactive_segments_durable(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.bytes": 200})
    three_record_batches(log, 5)
    assert len(log.segments) > 2
    log.flush_rolled()
    assert log.recovery_point == log.active.base_offset < log.log_end_offset


def test_flush_rolled_stops_quietly_when_the_log_is_deleted_under_it(tmp_path, clock,
                                                                     monkeypatch):
    """The broker flushes rolled segments on a worker thread; a topic deletion on the event
    loop meanwhile empties the log (found by fuzz_requests: an IndexError nobody retrieved)."""
    log = new_log(tmp_path, clock, **{"segment.bytes": 200})
    three_record_batches(log, 5)
    inside, deleted = threading.Event(), threading.Event()
    real_flush = LogSegment.flush

    def flush_that_waits(segment: LogSegment) -> None:
        inside.set()
        deleted.wait(10)
        real_flush(segment)

    monkeypatch.setattr(LogSegment, "flush", flush_that_waits)
    failures: list[BaseException] = []

    def flush_rolled() -> None:
        try:
            log.flush_rolled()
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=flush_rolled)
    worker.start()
    assert inside.wait(10)
    log.delete()
    deleted.set()
    worker.join(10)
    assert failures == []


def test_indexes_reach_disk_on_roll(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"index.interval.bytes": 0})
    for i in range(4):
        log.append(make_batch(1, timestamp=T + i))
    old = log.segments[0]
    log.roll()
    assert len(old.index) == 3  # every batch but the first
    assert old.index.path.stat().st_size == 3 * 8
    assert old.time_index.path.stat().st_size == len(old.time_index) * 12
    assert old.time_index.last_entry == (T + 3, 3)


def test_flush_ms(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"flush.ms": 1000})
    log.append(make_batch(2))
    clock.advance(999)
    assert not log.maybe_flush_by_time()
    assert log.recovery_point == 0
    clock.advance(1)
    assert log.maybe_flush_by_time()
    assert log.recovery_point == 2


# --- leader epochs --------------------------------------------------------------------------------


def test_end_offset_for_epoch_follows_offset_for_leader_epoch(tmp_path, clock):
    log = new_log(tmp_path, clock)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    three_record_batches(log, 2, leader_epoch=0)  # 0-5
    three_record_batches(log, 1, leader_epoch=3)  # 6-8
    assert [read_header(b).leader_epoch for b in split_batches(read_bytes(log, 0))] == [0, 0, 3]
    expected = {
        -1: (-1, -1),  # undefined epoch
        0: (0, 6),  # ends where epoch 3 starts
        1: (0, 6),  # unknown epoch between two known: the floor epoch and its end
        2: (0, 6),
        3: (3, 9),  # the latest epoch ends at the log end offset
        4: (-1, -1),  # above the latest
    }
    for epoch, answer in expected.items():
        assert log.end_offset_for_epoch(epoch) == answer, epoch
    log = reopen(log)  # leader-epoch-checkpoint
    for epoch, answer in expected.items():
        assert log.end_offset_for_epoch(epoch) == answer, epoch


def test_end_offset_for_an_epoch_below_the_first(tmp_path, clock):
    log = new_log(tmp_path, clock)
    three_record_batches(log, 1, leader_epoch=2)
    three_record_batches(log, 1, leader_epoch=4)
    assert log.end_offset_for_epoch(1) == (1, 0)  # Kafka: (requested epoch, first start)
    assert log.end_offset_for_epoch(3) == (2, 3)
    assert log.end_offset_for_epoch(4) == (4, 6)


# --- follower appends -----------------------------------------------------------------------------


def test_follower_append_keeps_offsets_and_epochs(tmp_path, clock):
    leader = new_log(tmp_path / "leader", clock, **{"segment.bytes": 300})
    three_record_batches(leader, 2, leader_epoch=1)
    three_record_batches(leader, 3, leader_epoch=2)
    follower = new_log(tmp_path / "follower", clock, **{"segment.bytes": 300})
    offset = 0
    while offset < leader.log_end_offset:
        data = read_bytes(leader, offset)
        info = follower.append(data, assign_offsets=False, leader_epoch=99)
        assert info.first_offset == offset
        offset = info.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset == 15
    assert read_bytes(follower, 0, 10**6) == read_bytes(leader, 0, 10**6)
    assert follower.epochs.entries == leader.epochs.entries == [(1, 0), (2, 6)]
    # A follower accepts a control batch copied from its leader (clients may not send one).
    control = make_batch(1, control=True, base_offset=15, leader_epoch=2)
    follower.append(control, assign_offsets=False)
    assert follower.log_end_offset == 16


def test_follower_append_below_the_log_end_offset_is_refused(tmp_path, clock):
    log = new_log(tmp_path, clock)
    log.append(make_batch(3, base_offset=0, leader_epoch=0), assign_offsets=False)
    before = disk_state(log)
    with pytest.raises(InvalidRecordError):
        log.append(make_batch(1, base_offset=2, leader_epoch=0), assign_offsets=False)
    with pytest.raises(InvalidRecordError):
        both = make_batch(1, base_offset=5) + make_batch(1, base_offset=4)
        log.append(both, assign_offsets=False)
    assert disk_state(log) == before
    assert log.log_end_offset == 3
    # A gap (offsets removed by compaction on the leader) is fine.
    log.append(make_batch(1, base_offset=7, leader_epoch=0), assign_offsets=False)
    assert log.log_end_offset == 8


# --- truncation -----------------------------------------------------------------------------------


def truncation_log(tmp_path, clock) -> tuple[Log, list[bytes]]:
    """5 batches of 3 records, 2 per segment: [0-2 3-5] [6-8 9-11] [12-14]."""
    log = new_log(tmp_path, clock, **{"segment.bytes": 2 * len(make_batch([b"0-0"] * 3))})
    for i in range(5):
        log.append(
            make_batch([b"%d-%d" % (i, j) for j in range(3)], timestamp=T + i),
            leader_epoch=i,
        )
    assert bases(log) == [0, 6, 12]
    return log, split_batches(read_all(log))


@pytest.mark.parametrize("reopened", [False, True])
def test_truncate_to_drops_batches_at_and_after_the_offset(tmp_path, clock, reopened):
    log, stored = truncation_log(tmp_path, clock)
    if reopened:
        log = reopen(log)  # inactive segments know less about themselves after a reload
    log.flush()
    log.truncate_to(9)
    assert log.log_end_offset == 9
    assert bases(log) == [0, 6]
    assert segment_files(log) == [f"{b:020d}.log" for b in (0, 6)]
    assert read_bytes(log, 6) == stored[2]
    assert log.recovery_point == 9
    assert log.epochs.entries == [(0, 0), (1, 3), (2, 6)]
    assert log.offset_for_timestamp(T + 3) is None
    assert log.max_timestamp_offset().offset == 6

    log.truncate_to(6)  # a segment boundary: the segment goes
    assert log.log_end_offset == 6
    assert bases(log) == [0]
    assert log.append(make_batch(1), leader_epoch=7).first_offset == 6
    assert offsets_in(read_all(log)) == [(0, 2), (3, 5), (6, 6)]
    assert log.epochs.entries == [(0, 0), (1, 3), (7, 6)]

    log = reopen(log)
    assert log.log_end_offset == 7
    assert offsets_in(read_all(log)) == [(0, 2), (3, 5), (6, 6)]


def test_truncate_to_at_or_past_the_end_does_nothing(tmp_path, clock):
    log, stored = truncation_log(tmp_path, clock)
    for offset in (15, 16, 100):
        log.truncate_to(offset)
        assert log.log_end_offset == 15
        assert bases(log) == [0, 6, 12]


def test_truncate_to_the_end_drops_epochs_that_start_there(tmp_path, clock):
    """A replica that led an epoch without writing keeps no trace of it after truncating to
    its end (Kafka's truncateTo cuts the leader epoch cache too)."""
    log, stored = truncation_log(tmp_path, clock)
    before = log.epochs.latest_epoch
    log.epochs.assign(before + 5, log.log_end_offset)
    log.truncate_to(log.log_end_offset)
    assert log.log_end_offset == 15
    assert log.epochs.latest_epoch == before


def test_truncate_to_zero_empties_the_log(tmp_path, clock):
    log, _ = truncation_log(tmp_path, clock)
    log.truncate_to(0)
    assert log.log_end_offset == 0
    assert bases(log) == [0]
    assert log.size == 0
    assert log.read(0, 1000) is None
    assert log.epochs.entries == []
    assert log.offset_for_timestamp(0) is None
    assert log.append(make_batch(1)).first_offset == 0


def test_truncating_a_segment_to_empty_resets_its_roll_timer(tmp_path, clock):
    """Kafka's LogSegment.truncateTo resets rollingBasedTimestamp when the segment becomes
    empty: the next batch's timestamp starts the segment.ms clock anew."""
    log = new_log(tmp_path, clock, **{"segment.ms": 1000})
    log.append(make_batch(1, timestamp=T + 5000))
    log.truncate_to(0)
    log.append(make_batch(1, timestamp=T))  # the segment's first batch is now this one
    log.append(make_batch(1, timestamp=T + 1500))  # 1500 ms after it: must roll
    assert bases(log) == [0, 1]


# --- configuration --------------------------------------------------------------------------------


def test_log_config_rejects_unknown_keys():
    with pytest.raises(ConfigError, match="segment.byte"):
        LogConfig.from_props({"segment.byte": 1000})
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        LogConfig.from_props({"log.segment.bytes": 1000})  # a broker key, not a topic key


@pytest.mark.parametrize(
    "key,value",
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", 13),
        ("segment.bytes", 2**31),
        ("segment.bytes", True),
        ("segment.ms", 0),
        ("segment.index.bytes", 4),
        ("index.interval.bytes", -1),
        ("retention.ms", -2),
        ("retention.ms", "1.5"),
        ("flush.messages", 0),
        ("flush.ms", -1),
        ("max.message.bytes", -1),
        ("message.timestamp.type", "WallClock"),
        ("cleanup.policy", "delete,shred"),
        ("file.delete.delay.ms", -5),
    ],
)
def test_log_config_rejects_bad_values_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        LogConfig.from_props({key: value})


def test_log_config_parses_strings_over_defaults():
    cfg = LogConfig.from_props(
        {
            "segment.bytes": " 1048576 ",
            "cleanup.policy": "compact, delete",
            "message.timestamp.type": "LogAppendTime",
            "retention.bytes": "-1",
        },
        defaults={"segment.bytes": 100, "retention.ms": 5000},
    )
    assert cfg.segment_bytes == 1048576
    assert cfg.retention_ms == 5000
    assert cfg.cleanup_policy == ("compact", "delete")
    assert cfg.log_append_time
    assert cfg.retention_bytes == -1
    assert LogConfig.from_props(cfg.to_props()) == cfg
    default = LogConfig.from_props()
    assert default == LogConfig()
    assert default.segment_bytes == 1024**3
    assert default.retention_ms == 7 * 24 * HOUR_MS
    assert default.index_interval_bytes == 4096
    assert not default.log_append_time


@pytest.mark.parametrize(
    "props,retention_ms",
    [
        ({}, 168 * HOUR_MS),
        ({"log.retention.hours": "1"}, HOUR_MS),
        ({"log.retention.hours": 1, "log.retention.minutes": 5}, 5 * 60_000),
        ({"log.retention.hours": 1, "log.retention.minutes": 5, "log.retention.ms": 42}, 42),
        ({"log.retention.minutes": 5, "log.retention.ms": -1}, -1),
        ({"log.retention.ms": "1234"}, 1234),
    ],
)
def test_broker_config_retention_precedence(props, retention_ms):
    broker = BrokerConfig(props)
    assert broker.get("log.retention.ms") == retention_ms
    assert broker.topic_defaults()["retention.ms"] == retention_ms
    assert LogConfig.from_props(defaults=broker.topic_defaults()).retention_ms == retention_ms


def test_broker_config_topic_defaults():
    broker = BrokerConfig(
        {
            "log.segment.bytes": "1000",
            "log.roll.hours": "2",
            "log.index.interval.bytes": "10",
            "log.index.size.max.bytes": "4096",
            "log.retention.bytes": "5000",
            "message.max.bytes": "2000",
            "log.message.timestamp.type": "LogAppendTime",
            "log.cleanup.policy": "compact",
            "log.flush.interval.messages": "7",
            "log.flush.scheduler.interval.ms": "3000",
            "log.segment.delete.delay.ms": "0",
        }
    )
    defaults = broker.topic_defaults()
    assert set(defaults) == set(LogConfig().to_props())
    cfg = LogConfig.from_props(defaults=defaults)
    assert cfg.segment_bytes == 1000
    assert cfg.segment_ms == 2 * HOUR_MS
    assert cfg.index_interval_bytes == 10
    assert cfg.segment_index_bytes == 4096
    assert cfg.retention_bytes == 5000
    assert cfg.max_message_bytes == 2000
    assert cfg.message_timestamp_type == "LogAppendTime"
    assert cfg.cleanup_policy == ("compact",)
    assert cfg.flush_messages == 7
    assert cfg.flush_ms == 3000  # log.flush.interval.ms falls back to the scheduler interval
    assert cfg.file_delete_delay_ms == 0
    # log.roll.ms beats log.roll.hours; topic keys beat broker defaults.
    broker = BrokerConfig({"log.roll.hours": 2, "log.roll.ms": 500, "log.flush.interval.ms": 9})
    assert broker.topic_defaults()["segment.ms"] == 500
    assert broker.topic_defaults()["flush.ms"] == 9
    cfg = LogConfig.from_props({"segment.ms": 77}, defaults=broker.topic_defaults())
    assert cfg.segment_ms == 77
    assert BrokerConfig().topic_defaults()["segment.ms"] == 168 * HOUR_MS


def test_broker_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ConfigError, match="log.retention.dayz"):
        BrokerConfig({"log.retention.dayz": 1})
    with pytest.raises(ConfigError, match="segment.bytes"):
        BrokerConfig({"segment.bytes": 1})  # a topic key, not a broker key
    with pytest.raises(ConfigError, match=r"log\.retention\.hours"):
        BrokerConfig({"log.retention.hours": "soon"})
    with pytest.raises(ConfigError, match=r"log\.segment\.bytes"):
        BrokerConfig({"log.segment.bytes": 10})
    with pytest.raises(ConfigError, match=r"log\.message\.timestamp\.type"):
        BrokerConfig({"log.message.timestamp.type": "Now"})


def test_log_files_follow_kafka_naming(tmp_path, clock):
    log = new_log(tmp_path, clock, **{"segment.bytes": 200, "index.interval.bytes": 0})
    three_record_batches(log, 4, leader_epoch=0)
    log.close()
    names = sorted(os.listdir(log.dir))
    for base in bases(log):
        for suffix in (".log", ".index", ".timeindex"):
            assert f"{base:020d}{suffix}" in names
    assert "leader-epoch-checkpoint" in names


# --- idempotent producers unknown to the log -----------------------------------------------------

def idempotent(seq: int, count: int = 1, pid: int = 77) -> bytes:
    return make_batch(count, producer_id=pid, producer_epoch=0, base_sequence=seq)


def test_a_new_producer_must_start_at_sequence_zero(tmp_path, clock):
    # the log has every batch ever written to it: a producer it does not know has none there,
    # so a first batch at sequence 3 means the batches 0-2 did not arrive
    log = new_log(tmp_path, clock)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(3))
    assert log.log_end_offset == 0
    log.append(idempotent(0, 3))
    log.append(idempotent(3))
    assert log.log_end_offset == 4


def test_a_log_that_lost_its_start_takes_an_unknown_producer_anywhere(tmp_path, clock):
    log = new_log(tmp_path, clock)
    log.append(make_batch(2))
    log.delete_records_before(1)  # its state may have gone with the records: as Kafka does
    log.append(idempotent(40))
    assert log.log_end_offset == 3


def test_a_compacted_log_takes_an_unknown_producer_anywhere(tmp_path, clock):
    # the cleaner drops the batches of producers that expired: their state may be gone
    log = new_log(tmp_path, clock, **{"cleanup.policy": "compact"})
    log.append(make_batch([b"v"], keys=[b"k"], producer_id=77, producer_epoch=0,
                          base_sequence=40))
    assert log.log_end_offset == 1
