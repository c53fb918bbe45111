"""Log compaction, as Kafka's log cleaner does it (design chapter "Log Compaction").

A compacted log has a clean head (already compacted) and a dirty tail. One cleaning:

1. ``cleanable`` finds the dirty range: from the cleaner's checkpoint (or the log start) up to
   the first uncleanable offset: the active segment, and any segment holding messages younger
   than ``min.compaction.lag.ms``.
2. ``build_offset_map`` reads the dirty range and remembers the last offset of every key,
   stopping early when the map is full (``log.cleaner.dedupe.buffer.size``, at
   ``OFFSET_MAP_ENTRY_BYTES`` an entry); the cleaning then ends where the map ends.
3. ``clean`` rewrites the segments from the log start to that end, a group of consecutive
   segments (together at most ``segment.bytes``) at a time, keeping a record when no later
   offset of its key is in the map. Offsets, order and batch metadata stay: a batch with every
   record kept is copied byte for byte, one with some kept is written again with the same base
   offset, last offset delta, producer id, epoch and sequence (re-compressed with its codec);
   a batch with none kept is dropped, unless it is its producer's last, which stays as an empty
   batch so idempotent producers keep their sequence. Keyless records are dropped.
4. Tombstones (null values): the first pass that keeps one stamps its batch with a delete
   horizon (attribute bit 6, KIP-534: the base timestamp becomes now + ``delete.retention.ms``,
   record timestamps unchanged); a later pass after the horizon removes it.
5. Transactions (cleaner_txns.py): nothing past the first unstable offset is cleanable;
   aborted transactions' batches are removed and never mapped; markers go once no batch of
   their transaction is left, after a delete horizon of their own.
6. Each group is written to ``<base>.log.cleaned`` (and ``.txnindex.cleaned`` when aborted
   transactions' markers stay), then swapped in by ``Log.replace_segments`` (``.cleaned`` ->
   ``.swap``, old segments deleted, ``.swap`` -> ``.log``); start-up finishes an interrupted
   swap (``Log._load``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.records import compression
from samsa.records.batch import HEADER_SIZE, Attr, BatchHeader, record_starts
from samsa.records.control import read_marker
from samsa.records.record import (
    NotInOrder,
    RawRecord,
    encode_raw_batch,
    iter_raw_records,
    raw_record_at,
    record_keys,
    record_keys_in_order,
)
from samsa.storage.cleaner_txns import TxnCleaning
from samsa.storage.segment import INT32_MAX, LogSegment
from samsa.storage.txn_index import write_txn_index

if TYPE_CHECKING:
    from samsa.storage.log import Log

log = logging.getLogger(__name__)

#: bytes of dedupe buffer one map entry costs: a Python dict entry holding a short key (about
#: 16 bytes) and its offset, measured (bench/cleaner_bench.py). Kafka's map counts 24 (a 16-byte
#: hash and an 8-byte offset), so the same buffer holds about 5x fewer keys here; longer keys
#: cost more than this estimate.
OFFSET_MAP_ENTRY_BYTES = 128
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
LONG_MAX = 2**63 - 1
_WRITE_CHUNK = 1024 * 1024


class CleanerError(RuntimeError):
    """A log cannot be cleaned (the dedupe buffer is too small for one batch)."""


class OffsetMap:
    """key -> the last offset seen for it, holding at most ``capacity`` keys."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self.offsets: dict[bytes, int] = {}

    @classmethod
    def for_buffer(cls, buffer_bytes: int, load_factor: float = 0.9) -> OffsetMap:
        return cls(int(buffer_bytes * load_factor) // OFFSET_MAP_ENTRY_BYTES)

    def room_for(self, keys: int) -> bool:
        return len(self.offsets) + keys <= self.capacity

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(frozen=True)
class Cleanable:
    """A compacted log's dirty range and how dirty it is."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    max_lag_passed: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_messages: int = 0
    segments_cleaned: int = 0
    end_offset: int = 0
    seconds: float = 0.0
    #: the earliest delete horizon of a batch left holding tombstones: a cleaning after it
    #: has tombstones to remove even if nothing new was written
    next_horizon: int | None = None

    def note_horizon(self, horizon: int) -> None:
        if self.next_horizon is None or horizon < self.next_horizon:
            self.next_horizon = horizon


def _segment_ends(segments: list[LogSegment]) -> Iterator[tuple[LogSegment, int]]:
    """Each inactive segment with the offset its successor starts at."""
    for segment, nxt in zip(segments, segments[1:], strict=False):
        yield segment, nxt.base_offset


def cleanable(log_: Log, checkpoint: int | None, now_ms: int) -> Cleanable:
    config = log_.config
    segments = list(log_.segments)
    first_dirty = max(checkpoint if checkpoint is not None else 0, log_.log_start_offset)
    first_uncleanable = segments[-1].base_offset
    unstable = log_.first_unstable_offset
    if unstable is not None:  # an open transaction may still be aborted
        first_uncleanable = min(first_uncleanable, unstable)
    for segment, _ in _segment_ends(segments):
        if (config.min_compaction_lag_ms > 0
                and segment.largest_timestamp > now_ms - config.min_compaction_lag_ms):
            first_uncleanable = min(first_uncleanable, segment.base_offset)
            break
    first_dirty = min(first_dirty, first_uncleanable)
    clean = dirty = 0
    oldest_dirty: int | None = None
    for segment, end in _segment_ends(segments):
        if end <= first_dirty:
            clean += segment.size
        elif segment.base_offset < first_uncleanable:
            dirty += segment.size
            if oldest_dirty is None and segment.first_batch_timestamp is not None:
                oldest_dirty = segment.first_batch_timestamp
    lag = config.max_compaction_lag_ms
    max_lag_passed = (
        dirty > 0 and oldest_dirty is not None and oldest_dirty >= 0 and lag < LONG_MAX
        and now_ms - oldest_dirty > lag
    )
    return Cleanable(first_dirty, first_uncleanable, clean, dirty, max_lag_passed)


def _batches(
    segments: list[LogSegment], start: int, end: int
) -> Iterator[tuple[LogSegment, BatchHeader, memoryview]]:
    """(segment, header, bytes) of every batch holding offsets in ``[start, end)``, read a
    chunk of many batches at a time."""
    for segment, seg_end in _segment_ends(segments):
        if seg_end <= start:
            continue
        if segment.base_offset >= end:
            return
        origin = segment.index.lookup(start) if segment.base_offset <= start else 0
        for _, header, data in segment.read_batches(origin):
            if header.last_offset < start:
                continue
            if header.base_offset >= end:
                return
            yield segment, header, data


def _payload(data: memoryview, header: BatchHeader) -> bytes:
    return compression.decompress(header.compression, data[HEADER_SIZE:])


def build_offset_map(
    log_: Log, start: int, end: int, offset_map: OffsetMap, stats: CleanStats,
    txns: TxnCleaning | None = None,
) -> int:
    """Fill ``offset_map`` from ``[start, end)`` (aborted transactions left out); returns
    where it stopped (exclusive)."""
    segments = list(log_.segments)
    offsets = offset_map.offsets
    for _, header, data in _batches(segments, start, end):
        if header.is_control or header.records_count == 0:
            continue
        if txns is not None and txns.aborted_txn(header) is not None:
            continue
        if not offset_map.room_for(header.records_count):
            if header.base_offset <= start:
                raise CleanerError(
                    f"{log_.name}: a batch of {header.records_count} records does not fit the "
                    f"dedupe map ({offset_map.capacity} entries): raise "
                    "log.cleaner.dedupe.buffer.size"
                )
            return header.base_offset
        payload = _payload(data, header)
        base, count = header.base_offset, header.records_count
        # a key's later offsets in the batch come later in the zip and win, as in a loop
        in_order: list[bytes | None] | None = None
        if count == header.last_offset_delta + 1:  # offset deltas 0, 1, ...: only checked
            with contextlib.suppress(NotInOrder):
                in_order = record_keys_in_order(payload, count)
        if in_order is not None:
            offsets.update(zip(in_order, range(base, base + count),  # type: ignore[arg-type]
                               strict=True))
        else:
            keys, deltas = record_keys(payload, count)
            offsets.update(zip(keys, map(base.__add__, deltas),  # type: ignore[arg-type]
                               strict=True))
        offsets.pop(None, None)  # type: ignore[call-overload]  # keyless records: not mapped
        stats.map_messages += header.records_count
        stats.bytes_read += header.size
    return end


def group_segments(segments: list[LogSegment], end: int, max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive inactive segments below ``end`` in groups of at most ``max_bytes`` whose
    offsets fit one segment (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[LogSegment]] = []
    current: list[LogSegment] = []
    size = 0
    for segment, seg_end in _segment_ends(segments):
        if segment.base_offset >= end:
            break
        if current and (size + segment.size > max_bytes
                        or seg_end - 1 - current[0].base_offset > INT32_MAX):
            groups.append(current)
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(current)
    return groups


@dataclass(frozen=True)
class MappedRange:
    """The offsets the map was built from, ``[start, end)``, and the offsets it holds, sorted.
    Inside that range every keyed record's key is in the map, so a record survives exactly
    when the map holds its offset."""

    start: int
    end: int
    offsets: list[int]

    def covers(self, header: BatchHeader) -> bool:
        return self.start <= header.base_offset and header.last_offset < self.end

    def any_between(self, first: int, last: int) -> bool:
        i = bisect_left(self.offsets, first)
        return i < len(self.offsets) and self.offsets[i] <= last

    def between(self, first: int, last: int) -> list[int]:
        """The mapped offsets in ``[first, last]``, in order."""
        return self.offsets[bisect_left(self.offsets, first):bisect_right(self.offsets, last)]


def _mapped_survivors(payload: bytes, header: BatchHeader, mapped: MappedRange
                      ) -> list[RawRecord] | None:
    """The records of a batch of the mapped range that no later record of their key
    replaces: those whose offsets the map holds, found by position without reading the other
    records' keys (a batch whose offsets are contiguous: record i has offset delta i). None
    when the records do not look as the header says (the caller reads them one by one)."""
    starts = record_starts(payload, header.records_count)
    if starts is None:
        return None
    base = header.base_offset
    survivors = []
    for offset in mapped.between(base, header.last_offset):
        delta = offset - base
        record = raw_record_at(payload, starts[delta])
        if record.offset_delta != delta or record.end != starts[delta + 1]:
            return None
        survivors.append(record)
    return survivors


def clean_batch(
    data: memoryview,
    header: BatchHeader,
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    producer_last_offsets: dict[int, int],
    stats: CleanStats,
    *,
    map_end: int | None = None,
    mapped: MappedRange | None = None,
    txns: TxnCleaning | None = None,
) -> bytes | memoryview | None:
    """What of one batch (``data``, its bytes) survives cleaning: the same bytes, a rewritten
    batch, or None.

    Records at or past ``map_end`` (where the offset map stopped) are kept as they are, as
    Kafka keeps them: the map knows nothing of what follows them, tombstones included.
    ``mapped`` lets a batch of the mapped range whose offsets no key ends at be dropped
    without reading its records. ``txns`` decides about transactions (cleaner_txns.py)."""
    stats.messages_read += header.records_count
    if header.is_control:
        return _clean_marker(data, header, txns, now_ms, delete_retention_ms, stats)
    aborted = txns is not None and txns.on_batch(header)
    if header.records_count == 0:  # an empty batch lives while it is its producer's last
        if producer_last_offsets.get(header.producer_id) == header.last_offset:
            return data
        return None
    if aborted:
        if producer_last_offsets.get(header.producer_id) == header.last_offset:
            payload = _payload(data, header)
            return encode_raw_batch(
                header, payload, [], base_timestamp=header.base_timestamp,
                attributes=header.attributes & ~Attr.CODEC_MASK & ~Attr.DELETE_HORIZON,
            )
        return None
    if (
        mapped is not None
        and mapped.covers(header)
        and not mapped.any_between(header.base_offset, header.last_offset)
        and producer_last_offsets.get(header.producer_id) != header.last_offset
    ):
        return None
    payload = _payload(data, header)
    has_horizon = bool(header.attributes & Attr.DELETE_HORIZON)
    horizon_passed = has_horizon and now_ms >= header.base_timestamp
    kept = []
    tombstones = False
    survivors = None
    if (mapped is not None and mapped.covers(header)
            and header.records_count == header.last_offset_delta + 1):
        survivors = _mapped_survivors(payload, header, mapped)
    if survivors is not None:
        for record in survivors:
            if record.value_is_null:
                if horizon_passed:
                    continue
                tombstones = True
            kept.append(record)
    else:
        offsets = offset_map.offsets
        for record in iter_raw_records(payload, header.records_count):
            if record.key is None:
                continue  # a compacted log holds only keyed records
            offset = header.base_offset + record.offset_delta
            if map_end is not None and offset >= map_end:
                kept.append(record)
                continue
            if offsets.get(record.key, -1) > offset:
                continue  # a later value of this key exists
            if record.value_is_null:
                if horizon_passed:
                    continue
                tombstones = True
            kept.append(record)
    stats.messages_written += len(kept)
    stamp = tombstones and not has_horizon
    if tombstones:
        stats.note_horizon(
            header.base_timestamp if has_horizon else min(now_ms + delete_retention_ms, LONG_MAX)
        )
    if len(kept) == header.records_count and not stamp:
        return data
    if not kept:
        if producer_last_offsets.get(header.producer_id) == header.last_offset:
            return encode_raw_batch(
                header, payload, [], base_timestamp=header.base_timestamp,
                attributes=header.attributes & ~Attr.CODEC_MASK & ~Attr.DELETE_HORIZON,
            )
        return None
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    if stamp:
        attributes |= Attr.DELETE_HORIZON
        base_timestamp = min(now_ms + delete_retention_ms, LONG_MAX)
    elif not tombstones and has_horizon:  # its tombstones are gone: no horizon any more
        attributes &= ~Attr.DELETE_HORIZON
        base_timestamp = header.base_timestamp + kept[0].timestamp_delta
    max_timestamp = header.max_timestamp if header.log_append_time else max(
        header.base_timestamp + r.timestamp_delta for r in kept
    )
    return encode_raw_batch(header, payload, kept, base_timestamp=base_timestamp,
                            attributes=attributes, max_timestamp=max_timestamp)


def _clean_marker(
    data: memoryview, header: BatchHeader, txns: TxnCleaning | None, now_ms: int,
    delete_retention_ms: int, stats: CleanStats,
) -> bytes | memoryview | None:
    """A transaction marker stays, gets its delete horizon, or goes after it."""
    marker = read_marker(data) if txns is not None else None
    if marker is None or txns is None or not txns.on_marker(header, marker):
        stats.messages_written += header.records_count
        return data
    if header.attributes & Attr.DELETE_HORIZON:
        if now_ms >= header.base_timestamp:
            return None
        stats.note_horizon(header.base_timestamp)
        stats.messages_written += header.records_count
        return data
    horizon = min(now_ms + delete_retention_ms, LONG_MAX)
    stats.note_horizon(horizon)
    stats.messages_written += header.records_count
    payload = _payload(data, header)
    records = list(iter_raw_records(payload, header.records_count))
    return encode_raw_batch(header, payload, records, base_timestamp=horizon,
                            attributes=header.attributes | Attr.DELETE_HORIZON,
                            max_timestamp=header.max_timestamp)


def txn_cleaning(log_: Log) -> TxnCleaning:
    """The transactions of ``log_`` as a cleaning pass needs them (read off the event loop:
    list() copies in one step)."""
    aborted = [t for s in list(log_.segments) for t in list(s.txn_index.entries)]
    last_markers = {
        pid: (entry.epoch, entry.batches[-1].last_offset if entry.batches else -1)
        for pid, entry in list(log_.producer_state.producers.items())
    }
    return TxnCleaning(aborted, last_markers)


def write_cleaned(
    log_: Log,
    group: list[LogSegment],
    offset_map: OffsetMap,
    now_ms: int,
    stats: CleanStats,
    map_end: int | None = None,
    mapped: MappedRange | None = None,
    txns: TxnCleaning | None = None,
) -> Path:
    """Write the cleaned form of ``group`` to ``<first base>.log.cleaned`` with its
    ``.index.cleaned``, ``.timeindex.cleaned`` and, when aborted transactions stay,
    ``.txnindex.cleaned`` (fsynced); returns the log file's path."""
    producer_last_offsets = {  # list(): one step, while the event loop may add producers
        pid: entry.batches[-1].last_offset
        for pid, entry in list(log_.producer_state.producers.items())
        if entry.batches
    }
    building = LogSegment(
        log_.dir, group[0].base_offset,
        index_interval_bytes=log_.config.index_interval_bytes,
        max_index_bytes=log_.config.segment_index_bytes,
        created_ms=now_ms, suffix=CLEANED_SUFFIX,
    )
    retention = log_.config.delete_retention_ms
    try:
        out = building.file
        pending: list[bytes | memoryview] = []  # written a chunk at a time
        pending_bytes = 0
        for segment in group:
            for _, header, data in segment.read_batches(0):
                kept = clean_batch(data, header, offset_map, now_ms, retention,
                                   producer_last_offsets, stats, map_end=map_end,
                                   mapped=mapped, txns=txns)
                if kept is not None:
                    pending.append(kept)
                    pending_bytes += len(kept)
                    if pending_bytes >= _WRITE_CHUNK:
                        out.write(b"".join(pending))
                        stats.bytes_written += pending_bytes
                        pending, pending_bytes = [], 0
            stats.segments_cleaned += 1
        if pending:
            out.write(b"".join(pending))
            stats.bytes_written += pending_bytes
        building.recover()  # its indexes, built here rather than on the event loop
        if txns is not None:
            write_txn_index(building.txn_index.path, txns.take_index_entries())
        building.flush()
        building.file.close()
    except BaseException:
        building.file.close()
        building.delete()
        raise
    newest = max(os.stat(s.log_path).st_mtime_ns for s in group)
    os.utime(building.log_path, ns=(newest, newest))  # retention by time sees the data's age
    return building.log_path


def clean_log(
    log_: Log,
    first_dirty: int,
    first_uncleanable: int,
    offset_map: OffsetMap,
    *,
    now_ms: int | None = None,
    swap: Callable[[Callable[[], bool]], bool] | None = None,
) -> CleanStats:
    """Clean ``log_`` from its start up to as much of ``[first_dirty, first_uncleanable)`` as
    the map holds. ``swap`` runs each segment swap where the log's owner wants it (the broker:
    on its event loop); without it the swap runs here. Returns the stats; ``end_offset`` is the
    next first dirty offset."""
    began = time.monotonic()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    stats = CleanStats()
    offset_map.offsets.clear()
    txns = txn_cleaning(log_)
    end = build_offset_map(log_, first_dirty, first_uncleanable, offset_map, stats, txns)
    stats.end_offset = end
    mapped = MappedRange(first_dirty, end, sorted(offset_map.offsets.values()))
    for group in group_segments(list(log_.segments), end, log_.config.segment_bytes):
        if log_.deleted:
            break
        cleaned = write_cleaned(log_, group, offset_map, now, stats, end, mapped, txns)

        def replace(group: list[LogSegment] = group, cleaned: Path = cleaned) -> bool:
            return log_.replace_segments(group, cleaned)

        done = swap(replace) if swap is not None else replace()
        if not done:  # the log changed under us (retention, deletion): try again later
            log.info("%s: segments changed while being cleaned; cleaning stopped", log_.name)
            stats.end_offset = first_dirty
            break
    stats.seconds = time.monotonic() - began
    return stats
