"""A partition log: a directory of segments, as Kafka lays it out on disk.

    orders-0/
        00000000000000000000.log        record batches as producers sent them (recompressed
                                        where compression.type names another codec)
        00000000000000000000.index      sparse offset -> file position
        00000000000000000000.timeindex  sparse timestamp -> offset
        00000000000000172034.log        ... the next segment, named by its base offset
        leader-epoch-checkpoint

Append costs one header parse and one CRC-32C per batch; read returns a file region for
sendfile. Offsets: the log start offset (earliest), the log end offset (next to assign) and, in
between, the recovery point: everything before it is known to be on disk.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Concatenate, NamedTuple, ParamSpec, TypeVar

from samsa.config import LONG_MAX, LogConfig
from samsa.durable import fsync_dir
from samsa.errors import (
    InvalidRecordError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordErrors,
    RecordListTooLargeError,
    TimestampErrors,
)
from samsa.metrics import Histogram
from samsa.records.batch import (
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    BatchHeader,
    Compression,
    read_header,
    set_log_append_time,
    stamp,
    stamp_prefix,
    validate_batches,
)
from samsa.records.compression import recompress_batch, topic_compression
from samsa.records.control import encode_marker, read_marker
from samsa.records.record import (
    decode_records,
    iter_raw_records,
    record_timestamps,
    records_payload,
)
from samsa.storage.epoch import LeaderEpochCache
from samsa.storage.log_dir_failure import LogDirFailureChannel
from samsa.storage.producer_state import CompletedTxn, ProducerStateManager
from samsa.storage.segment import INT32_MAX, LOG_SUFFIX, LogSegment
from samsa.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

log = logging.getLogger(__name__)

Clock = Callable[[], int]
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
_LEFTOVER_SUFFIXES = (".tmp", ".deleted", ".cleaned")
_SWAP_FILE = re.compile(r"^(\d{20})\.log\.swap$")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


P = ParamSpec("P")
T = TypeVar("T")


def _io(what: str) -> Callable[[Callable[Concatenate[Log, P], T]],
                               Callable[Concatenate[Log, P], T]]:
    """A method that touches the disk (Kafka's maybeHandleIOException): refused with
    KafkaStorageError once the log's directory is offline; an OSError takes the directory
    offline and becomes KafkaStorageError."""
    def wrap(method: Callable[Concatenate[Log, P], T]) -> Callable[Concatenate[Log, P], T]:
        @functools.wraps(method)
        def guarded(self: Log, *args: P.args, **kwargs: P.kwargs) -> T:
            if self.offline:
                raise self.offline_error()
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                if self.deleted:  # deleted or replaced (another thread): nothing is lost
                    raise KafkaStorageError(f"{self.name} is gone: {exc}") from exc
                raise self.io_error(what, exc) from exc

        return guarded

    return wrap


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    batches: list[BatchHeader]  # as validated, before offsets were assigned
    duplicate: bool = False  # an idempotent retry: nothing was written, offsets are the original's


@dataclass(frozen=True)
class FileRegion:
    """A run of whole batches in a segment file, ready for sendfile."""

    file: BinaryIO  # holding it keeps the descriptor open even if the segment is deleted
    position: int
    length: int

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


@dataclass(frozen=True)
class TimestampOffset:
    offset: int
    timestamp: int


class Log:
    def __init__(
        self,
        directory: Path,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        clock: Clock = wall_clock_ms,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        """``failures``: where an I/O error takes the log's data directory (the directory
        holding ``directory``) offline; without it only this log stops."""
        self.dir = Path(directory)
        self.parent_dir = self.dir.parent
        self._failures = failures
        self._failed = False  # an I/O error happened here: nothing more is written
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config or LogConfig()
        self.clock = clock
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.epochs = LeaderEpochCache(self.dir)
        self.producer_state = ProducerStateManager(self.dir)
        self.unflushed_messages = 0
        self.last_flush_ms = clock()
        self.flush_timer: Histogram | None = None  # set by the log manager with metrics on
        self.deleted = False
        # counts truncations and segment rewrites: a copy of the log made before one is stale
        self.rewrites = 0
        self._load(recovery_point, log_start_offset, had_clean_shutdown)

    # --- properties ---------------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def name(self) -> str:
        return self.dir.name

    def size_from(self, offset: int) -> int:
        """Bytes of the batches from the one holding ``offset`` to the log end."""
        if offset >= self.log_end_offset:
            return 0
        i = max(0, bisect_right(self._bases, offset) - 1)
        found = self.segments[i].translate(offset)
        position = found[0] if found is not None else self.segments[i].size
        return self.segments[i].size - position + sum(s.size for s in self.segments[i + 1 :])

    def rename_dir(self, directory: Path) -> None:
        """The partition's directory was renamed to ``directory`` (a replica moved between
        log directories): the open files stay, every path follows."""
        self.dir = Path(directory)
        self.parent_dir = self.dir.parent
        for segment in self.segments:
            segment.rename_dir(self.dir)
        self.epochs.path = self.dir / self.epochs.path.name
        self.producer_state.dir = self.dir

    # --- I/O errors ---------------------------------------------------------------------------

    @property
    def offline(self) -> bool:
        """An I/O error happened in this log or elsewhere in its data directory: the log
        answers KAFKA_STORAGE_ERROR from now on (its in-memory state may no longer match the
        files; recovery at the next start sorts them out)."""
        return self._failed or (self._failures is not None
                                and self._failures.is_offline(self.parent_dir))

    def offline_error(self) -> KafkaStorageError:
        return KafkaStorageError(
            f"the log directory {self.parent_dir} of {self.name} is offline")

    def io_error(self, what: str, error: OSError) -> KafkaStorageError:
        """An I/O error while ``what``: the log, and its directory, go offline."""
        self._failed = True
        message = f"I/O error while {what} {self.name}"
        if self._failures is not None:
            self._failures.maybe_add_offline_log_dir(self.parent_dir, message, error)
        else:
            log.error("%s: %s", message, error)
        return KafkaStorageError(f"{message} in {self.parent_dir}: {error}")

    # --- loading and recovery ---------------------------------------------------------------------

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        self._finish_swaps()
        bases = set()
        for path in self.dir.iterdir():
            if path.name.endswith(_LEFTOVER_SUFFIXES):
                path.unlink()
                continue
            match = _SEGMENT_FILE.match(path.name)
            if match is None:
                continue
            if match[2] == "log":
                bases.add(int(match[1]))
            elif not (self.dir / f"{match[1]}{LOG_SUFFIX}").exists():
                path.unlink()  # an index without its log
        for base in sorted(bases):
            segment = self._new_segment(base)
            self.segments.append(segment)
            self._bases.append(base)

        if not self.segments:
            self._add_segment(max(log_start_offset, 0))
        else:
            self._recover(recovery_point, clean)

        self.recovery_point = self.log_end_offset if clean else min(
            recovery_point, self.log_end_offset
        )
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            log.warning(
                "%s: log start offset %d is past the log end offset %d; starting the log anew",
                self.dir, self.log_start_offset, self.log_end_offset,
            )
            self.truncate_fully_and_start_at(self.log_start_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        # After a crash only what is below the recovery point (fsynced) is trusted: producer
        # state and aborted-transaction entries are rebuilt from a snapshot no later than it.
        self._load_producer_state(self.log_end_offset if clean else self.recovery_point)

    def _finish_swaps(self) -> None:
        """Complete a cleaner's segment swap that a crash interrupted: a ``.swap`` file is a
        whole cleaned segment that replaces every segment whose base offset it covers."""
        for path in sorted(self.dir.iterdir()):
            match = _SWAP_FILE.match(path.name)
            if match is None:
                continue
            base = int(match[1])
            last = base
            with open(path, "rb") as handle:  # headers only: a swap file is a whole segment
                fd, size, pos = handle.fileno(), os.fstat(handle.fileno()).st_size, 0
                while pos + HEADER_SIZE <= size:
                    header = read_header(os.pread(fd, HEADER_SIZE, pos))
                    if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > size:
                        break
                    last = header.last_offset
                    pos += header.size
            for other in self.dir.iterdir():
                found = _SEGMENT_FILE.match(other.name)
                if found is not None and base <= int(found[1]) <= last:
                    other.unlink()
            path.rename(self.dir / f"{match[1]}{LOG_SUFFIX}")
            txn_index = self.dir / f"{match[1]}{TXN_INDEX_SUFFIX}.cleaned"
            if txn_index.exists():
                os.replace(txn_index, self.dir / f"{match[1]}{TXN_INDEX_SUFFIX}")
            log.warning("%s: finished an interrupted cleaner swap (offsets %d to %d)",
                        path, base, last)

    def _load_producer_state(self, newest: int | None = None) -> None:
        """Restore producer state: the latest snapshot (at or below ``newest``), then the
        batches after it (headers only; markers are read). The aborted-transaction entries of
        those batches are rebuilt on the way."""
        start = self.producer_state.load(self.log_start_offset, self.log_end_offset, newest)
        first = max(0, bisect_right(self._bases, start) - 1)
        for segment in self.segments[first:]:
            segment.txn_index.truncate_to(start)
        for segment in self.segments[first:]:
            origin = segment.index.lookup(start) if segment.base_offset <= start else 0
            for pos, header in segment.scan(origin):
                # a batch across the start (DeleteRecords cut through it) still counts
                if header.last_offset < start or header.producer_id < 0:
                    continue
                if header.is_control:
                    marker = read_marker(segment.read_bytes(pos, header.size))
                    if marker is not None:
                        self._complete_txn(segment, header, marker.commit,
                                           marker.coordinator_epoch)
                else:
                    self.producer_state.replay(header)

    def _complete_txn(
        self, segment: LogSegment, header: BatchHeader, commit: bool, coordinator_epoch: int
    ) -> CompletedTxn | None:
        """Apply a marker already in ``segment``; an abort goes into its transaction index."""
        done = self.producer_state.apply_marker(header, commit, coordinator_epoch)
        if done is not None and done.aborted:
            unstable = self.producer_state.first_unstable_offset()
            lso = header.next_offset if unstable is None else unstable
            segment.txn_index.append(
                AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso)
            )
        return done

    def _recover(self, recovery_point: int, clean: bool) -> None:
        """Kafka's rules: after an unclean shutdown every segment from the one holding the
        recovery point on is validated; any segment with a missing or bad index is too; on a
        clean shutdown the active segment's tail is still checked for whole batches."""
        first_unflushed = max(0, bisect_right(self._bases, recovery_point) - 1)
        for i, segment in enumerate(self.segments):
            last = i == len(self.segments) - 1
            needs = not segment.load_indexes() or (not clean and i >= first_unflushed)
            if not needs and last and not segment.load_tail():
                log.warning("%s: the active segment ends in a partial batch", segment.log_path)
                needs = True
            if needs and segment.recover() and not last:
                self._drop_segments_after(i)
                return

    def _drop_segments_after(self, index: int) -> None:
        for segment in self.segments[index + 1 :]:
            log.warning("%s: deleting segment after a corrupt one (its offsets start at %d)",
                        segment.log_path, segment.base_offset)
            segment.delete()
        del self.segments[index + 1 :]
        del self._bases[index + 1 :]
        self.segments[-1].load_tail()

    def _new_segment(self, base: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            created_ms=self.clock(),
        )

    def _add_segment(self, base: int) -> LogSegment:
        segment = self._new_segment(base)
        segment.next_offset = base
        self.segments.append(segment)
        self._bases.append(base)
        return segment

    # --- append -----------------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        assign_offsets: bool = True,
        internal: bool = False,
    ) -> AppendInfo:
        """Validate and append the batches in ``records``.

        With ``assign_offsets`` (a leader taking a produce) each batch gets the next offsets and
        the given leader epoch; without it (a follower copying its leader) the batches keep
        theirs, which must continue the log. Nothing is written unless every batch is valid.
        ``internal`` batches come from the broker's own writers (a coordinator's transactional
        offset commits): they may carry a producer id without a sequence.
        """
        view = memoryview(records)
        headers = validate_batches(view, internal=internal, from_client=assign_offsets)
        max_bytes = self.config.max_message_bytes
        for header in headers if assign_offsets else ():  # a leader's data is taken as it is
            if header.size > max_bytes:
                raise MessageTooLargeError(
                    f"record batch of {header.size} bytes exceeds max.message.bytes {max_bytes}"
                )
        if len(view) > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(view)} bytes of records exceed segment.bytes {self.config.segment_bytes}"
            )
        if self._failed or (self._failures is not None
                            and self._failures.is_offline(self.parent_dir)):
            raise self.offline_error()
        try:
            if assign_offsets:
                if any(h.is_control for h in headers):
                    raise InvalidRecordError("control batches are written with append_marker")
                if self.config.compact:
                    self._require_keys(view, headers)
                if not self.config.log_append_time:
                    self._check_timestamps(view, headers)
                return self._append_as_leader(view, headers, leader_epoch)
            return self._append_as_follower(view, headers)
        except OSError as exc:
            raise self.io_error("appending to", exc) from exc

    def _append_as_leader(
        self, view: memoryview, headers: list[BatchHeader], leader_epoch: int
    ) -> AppendInfo:
        now = self.clock()
        append_time = now if self.config.log_append_time else -1
        producer_batch = None
        for header in headers:
            if header.producer_id < 0:
                continue
            if producer_batch is None:
                # nothing was ever removed from this log: it has every producer's batches
                producer_batch = self.producer_state.begin(
                    knows_every_producer=self.log_start_offset == 0 and not self.config.compact)
            duplicate = producer_batch.check(header)
            if duplicate is not None:
                if len(headers) > 1:
                    raise InvalidRecordError("a duplicate batch inside a multi-batch append")
                # Kafka answers the original's max timestamp as the log append time, whatever
                # the topic's timestamp type
                return AppendInfo(duplicate.first_offset, duplicate.last_offset,
                                  duplicate.timestamp,
                                  self.log_start_offset, headers, True)

        first = offset = self.log_end_offset
        target = topic_compression(self.config)
        stamped: list[BatchHeader] = []
        iov: list[bytes | bytearray | memoryview] = []
        pos = written = 0
        for header in headers:
            size = header.size
            copy: bytearray | None = None
            if target is not None and header.compression != target[0]:
                copy = self._recompress(view[pos : pos + size], header, *target)
            elif append_time >= 0:
                copy = bytearray(view[pos : pos + size])
            if copy is not None:  # the batch changes under its CRC
                stamp(copy, 0, offset, leader_epoch)
                if append_time >= 0:
                    set_log_append_time(copy, 0, len(copy), append_time)
                final = read_header(copy)
                iov.append(copy)
            else:
                iov.append(stamp_prefix(offset, header.batch_length, leader_epoch))
                iov.append(view[pos + 16 : pos + size])
                final = BatchHeader(offset, header[1], leader_epoch, *header[3:])
            stamped.append(final)
            offset = final.next_offset
            pos += size
            written += final.size
        if written > self.config.segment_bytes:  # recompressed to more than the segment holds
            raise RecordListTooLargeError(
                f"{written} bytes of records exceed segment.bytes {self.config.segment_bytes}")

        self._maybe_roll(written, stamped, now).append(iov, stamped)
        if producer_batch is not None:
            producer_batch.commit([h for h in stamped if h.producer_id >= 0])
        if leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(leader_epoch, first)
        self._count_unflushed(offset - first)
        return AppendInfo(first, offset - 1, append_time, self.log_start_offset, headers)

    def _recompress(self, batch: memoryview, header: BatchHeader, codec: Compression,
                    level: int | None) -> bytearray:
        """``batch`` in the topic's codec (compression.type), as Kafka's LogValidator rebuilds
        it; refused, as Kafka refuses it, when that makes it larger than max.message.bytes."""
        copy = recompress_batch(batch, header, codec, level)
        if len(copy) > self.config.max_message_bytes:
            raise MessageTooLargeError(
                f"record batch of {len(copy)} bytes in {codec.name.lower()} (compression.type "
                f"{self.config.compression_type}) exceeds max.message.bytes "
                f"{self.config.max_message_bytes}")
        return copy

    def _append_as_follower(self, view: memoryview, headers: list[BatchHeader]) -> AppendInfo:
        """The leader's batches as they are, in one write: per batch only its header is
        looked at (offsets in sequence, producer state, leader epochs), never its records."""
        first = headers[0].base_offset
        offset = self.log_end_offset
        producers = epochs = False
        latest_epoch = self.epochs.latest_epoch
        messages = 0
        for header in headers:
            if header.base_offset < offset:
                raise InvalidRecordError(
                    f"batch offset {header.base_offset} is below the log end offset {offset}"
                )
            offset = header.base_offset + header.last_offset_delta + 1
            producers = producers or header.producer_id >= 0
            epochs = epochs or header.leader_epoch > latest_epoch
            messages += header.records_count
        segment = self._maybe_roll(len(view), headers, self.clock())
        segment.append((view,), headers)
        if producers:
            pos = 0
            for header in headers:
                if header.is_control and header.producer_id >= 0:
                    marker = read_marker(view[pos : pos + header.size])
                    if marker is not None:
                        self._complete_txn(segment, header, marker.commit,
                                           marker.coordinator_epoch)
                elif header.producer_id >= 0:
                    self.producer_state.update(header)
                pos += header.size
        if epochs:
            for header in headers:
                if header.leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(header.leader_epoch, header.base_offset)
        self._count_unflushed(messages)
        return AppendInfo(first, offset - 1, -1, self.log_start_offset, headers)

    @_io("writing a transaction marker to")
    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        *, leader_epoch: int = 0,
    ) -> CompletedTxn | None:
        """Write a transaction's commit or abort marker (the coordinator's WriteTxnMarkers).
        Raises InvalidProducerEpochError for a fenced epoch, TransactionCoordinatorFencedError
        for an older coordinator."""
        now = self.clock()
        batch = bytearray(encode_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                        now))
        (header,) = validate_batches(batch, internal=True)
        self.producer_state.check_marker(header, coordinator_epoch)
        offset = self.log_end_offset
        stamp(batch, 0, offset, leader_epoch)
        final = BatchHeader(offset, header[1], leader_epoch, *header[3:])
        segment = self._maybe_roll(len(batch), [final], now)
        segment.append([batch], [final])
        done = self._complete_txn(segment, final, commit, coordinator_epoch)
        if leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(leader_epoch, offset)
        self._count_unflushed(1)
        return done

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return self.producer_state.first_unstable_offset()

    def offset_after(self, region: FileRegion) -> int:
        """The offset that follows the batches of ``region`` (a read_committed fetch asks
        for the aborted transactions up to there)."""
        end = region.position + region.length
        for i, segment in enumerate(self.segments):
            if segment.file is region.file:
                if end < segment.size:
                    header = segment._header_at(end)
                    if header is not None:
                        return header.base_offset
                return self._bases[i + 1] if i + 1 < len(self._bases) else self.log_end_offset
        return self.log_end_offset

    def collect_aborted_txns(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of [fetch_offset, upper) needs."""
        found: list[AbortedTxn] = []
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        for segment in self.segments[i:]:
            if segment.txn_index.entries and segment.txn_index.collect(fetch_offset, upper,
                                                                       found):
                break
        return found

    def _require_keys(self, view: memoryview, headers: list[BatchHeader]) -> None:
        """Kafka's rule for compacted topics: every record has a key; those without one are
        named by their index in the batch (KIP-467)."""
        pos = 0
        for header in headers:
            if not header.is_control:
                payload = records_payload(view[pos : pos + header.size], header)
                missing = [
                    (i, "Compacted topic cannot accept message without key in topic "
                        f"partition {self.name}.")
                    for i, record in enumerate(iter_raw_records(payload, header.records_count))
                    if record.key is None]
                if missing:
                    raise RecordErrors(missing)
            pos += header.size

    def _check_timestamps(self, view: memoryview, headers: list[BatchHeader]) -> None:
        """CreateTime: every record's timestamp within [now - message.timestamp.before.max.ms,
        now + message.timestamp.after.max.ms], as Kafka's LogValidator (KIP-937). Per batch
        from its header (the max timestamp bounds every record from above) unless a bound is
        crossed or before.max.ms is set; then the records, to name the ones out of range."""
        now = self.clock()
        before, after = (self.config.message_timestamp_before_max_ms,
                         self.config.message_timestamp_after_max_ms)
        low, high = now - before, now + after
        pos = 0
        for header in headers:
            if header.max_timestamp > high or before < LONG_MAX:
                errors = [
                    (i, f"Timestamp {ts} of message with offset {i} is out of range. The "
                        f"timestamp should be within [{low}, {high}]")
                    for i, ts in enumerate(record_timestamps(view[pos : pos + header.size],
                                                             header))
                    if ts != NO_TIMESTAMP and not low <= ts <= high]
                if errors:
                    raise TimestampErrors(errors)
            pos += header.size

    def _count_unflushed(self, messages: int) -> None:
        self.unflushed_messages += messages
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, size: int, headers: list[BatchHeader], now: int) -> LogSegment:
        if headers[-1].last_offset - headers[0].base_offset > INT32_MAX:
            # no segment could index them: its offsets are 32 bits relative to its base
            # (Kafka's LogSegmentOffsetOverflowException); refused before anything is written
            raise InvalidRecordError(
                f"the batches span offsets {headers[0].base_offset}-{headers[-1].last_offset}, "
                f"more than one segment holds ({INT32_MAX + 1})"
            )
        segment = self.active
        max_ts = max(h.max_timestamp for h in headers)
        if (
            segment.size > self.config.segment_bytes - size
            or (segment.size > 0
                and segment.time_waited_for_roll(now, max_ts) > self.config.segment_ms)
            or segment.index.is_full
            or segment.time_index.is_full
            or headers[-1].last_offset - segment.base_offset > INT32_MAX
        ):
            return self.roll(headers[0].base_offset)
        return segment

    @_io("rolling a segment of")
    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment (at the log end offset unless told otherwise)."""
        base = self.log_end_offset if base_offset is None else base_offset
        if self.active.size == 0:
            if self.active.base_offset == base:
                return self.active
            self._remove_segment(self.active)  # an empty segment with a stale base
        else:
            self.active.on_become_inactive()
        segment = self._add_segment(base)
        self.producer_state.take_snapshot(base)
        return segment

    # --- read -------------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FileRegion | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (always at least
        one batch with ``min_one_batch``, KIP-74) and below ``max_offset`` (the high watermark).
        None when there is nothing to return yet."""
        if self._failed or (self._failures is not None
                            and self._failures.is_offline(self.parent_dir)):
            raise self.offline_error()
        end_offset = self.log_end_offset
        if offset < self.log_start_offset or offset > end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {end_offset}] in {self.name}"
            )
        upper = end_offset if max_offset is None else min(max_offset, end_offset)
        if offset >= upper:  # a fetch that has caught up (a batch across upper holds none)
            return None
        i = max(0, bisect_right(self._bases, offset) - 1)
        try:
            for segment in self.segments[i:]:
                found = segment.translate(offset)
                if found is None:
                    continue
                start, first = found
                if first.base_offset >= upper:
                    return None
                end = segment.size
                if upper < end_offset:
                    bound = segment.translate(upper)
                    if bound is not None:
                        end = bound[0]
                if end - start > max_bytes:
                    end = segment.batch_boundary_before(start, start + max_bytes)
                    if end == start:
                        if not min_one_batch:
                            return None
                        end = start + first.size
                if end <= start:  # a high watermark inside the first batch
                    return None
                return FileRegion(segment.file, start, end - start)
            return None
        except OSError as exc:
            raise self.io_error("reading", exc) from exc

    def read_batches(self, offset: int, max_bytes: int = 2**31 - 1) -> bytes:
        """The bytes ``read`` would send (tests and tools)."""
        region = self.read(offset, max_bytes)
        return region.read() if region else b""

    # --- offset lookups ---------------------------------------------------------------------------

    @_io("reading")
    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record whose timestamp is >= ``timestamp`` (ListOffsets), or None."""
        for segment in self.segments:
            if segment.largest_timestamp < timestamp:
                continue
            # The time index entry names the last offset of the batch where the segment's
            # max timestamp first reached it: start from that batch, not from that offset.
            start = max(segment.time_index.lookup(timestamp), self.log_start_offset)
            for pos, header in segment.scan(segment.index.lookup(start)):
                if header.max_timestamp < timestamp or header.last_offset < self.log_start_offset:
                    continue
                batch = segment.read_bytes(pos, header.size)
                for record in decode_records(batch):
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        return TimestampOffset(record.offset, record.timestamp)
        return None

    @_io("reading")
    def max_timestamp_offset(self) -> TimestampOffset | None:
        """The record with the largest timestamp (ListOffsets -3, KIP-734), or None if empty."""
        best = max(
            (s for s in self.segments if s.max_timestamp >= 0),
            key=lambda s: s.max_timestamp,
            default=None,
        )
        if best is None:
            return None
        found = best.translate(best.offset_of_max_timestamp)
        if found is None:
            return None
        pos, header = found
        for record in decode_records(best.read_bytes(pos, header.size)):
            if record.timestamp == best.max_timestamp:
                return TimestampOffset(record.offset, record.timestamp)
        return TimestampOffset(header.last_offset, best.max_timestamp)

    @_io("writing the leader epoch checkpoint of")
    def assign_leader_epoch(self, epoch: int) -> None:
        """A leader's new epoch starts at the log end offset (when it is newer)."""
        if epoch > self.epochs.latest_epoch:
            self.epochs.assign(epoch, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        return self.epochs.epoch_for(offset)

    # --- retention and deletion -------------------------------------------------------------------

    @_io("deleting segments of")
    def delete_old_segments(self) -> int:
        """Delete whole segments below the log start offset and, under ``cleanup.policy=delete``,
        those past ``retention.ms`` or ``retention.bytes``. Never the active segment."""
        now = self.clock()
        deleted = self._delete_while(
            lambda s, nxt: nxt.base_offset <= self.log_start_offset
        )
        if "delete" in self.config.cleanup_policy:
            if self.config.retention_ms >= 0:
                deleted += self._delete_while(
                    lambda s, nxt: now - s.largest_timestamp > self.config.retention_ms
                )
            if self.config.retention_bytes >= 0:
                excess = self.size - self.config.retention_bytes

                def over_size(s: LogSegment, nxt: LogSegment) -> bool:
                    nonlocal excess
                    if excess - s.size < 0:
                        return False
                    excess -= s.size
                    return True

                deleted += self._delete_while(over_size)
        return deleted

    def _delete_while(self, predicate: Callable[[LogSegment, LogSegment], bool]) -> int:
        doomed = []
        for segment, nxt in zip(self.segments, self.segments[1:], strict=False):
            if not predicate(segment, nxt):
                break
            doomed.append(segment)
        for segment in doomed:
            self._remove_segment(segment)
        if doomed:
            self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
            new_start = self.segments[0].base_offset
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start
                self.epochs.truncate_from_start(new_start)
            log.info("%s: deleted %d segment(s); log start offset %d",
                     self.name, len(doomed), self.log_start_offset)
        return len(doomed)

    @_io("swapping cleaned segments into")
    def replace_segments(self, old: list[LogSegment], cleaned: Path) -> bool:
        """Swap the cleaner's ``cleaned`` file in for the consecutive inactive segments ``old``
        (Kafka's .cleaned -> .swap -> .log steps). False, with ``cleaned`` removed, when ``old``
        is no longer part of the log as it was."""
        try:
            first = -1 if self.deleted else self.segments.index(old[0])
        except ValueError:
            first = -1
        if (first < 0 or self.segments[first : first + len(old)] != old
                or first + len(old) >= len(self.segments)):
            for path in (old[0].log_path, old[0].index.path, old[0].time_index.path,
                         old[0].txn_index.path):
                path.with_name(path.name + ".cleaned").unlink(missing_ok=True)
            return False
        swap = cleaned.with_name(old[0].log_path.name + ".swap")
        os.replace(cleaned, swap)
        fsync_dir(self.dir)  # from here on, start-up finishes the swap
        for segment in old:
            segment.delete()
        os.replace(swap, old[0].log_path)
        for index in (old[0].index.path, old[0].time_index.path):
            os.replace(index.with_name(index.name + ".cleaned"), index)
        txn_index = old[0].txn_index.path
        if txn_index.with_name(txn_index.name + ".cleaned").exists():
            os.replace(txn_index.with_name(txn_index.name + ".cleaned"), txn_index)
        fsync_dir(self.dir)
        segment = self._new_segment(old[0].base_offset)
        if not segment.load_indexes():
            segment.recover()
        segment.next_offset = self.segments[first + len(old)].base_offset
        first_batch = next(segment.scan(0), None)
        segment.first_batch_timestamp = first_batch[1].max_timestamp if first_batch else None
        self.segments[first : first + len(old)] = [segment]
        self._bases[first : first + len(old)] = [segment.base_offset]
        self.rewrites += 1
        return True

    def _remove_segment(self, segment: LogSegment) -> None:
        i = self.segments.index(segment)
        del self.segments[i]
        del self._bases[i]
        segment.delete()

    @_io("deleting records of")
    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset forward to ``offset`` (DeleteRecords); returns it."""
        if offset < 0 or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: the log ends at {self.log_end_offset}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epochs.truncate_from_start(offset)
            self._delete_while(lambda s, nxt: nxt.base_offset <= self.log_start_offset)
        return self.log_start_offset

    @_io("truncating")
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets at or after ``offset`` (a follower diverging
        from its leader; followers truncate at batch boundaries)."""
        if offset >= self.log_end_offset:
            # no batch to cut, but epochs that start there go (as Kafka's truncateTo): an
            # epoch this replica led without writing must not make it diverge again
            self.epochs.truncate_from_end(offset)
            return
        self.rewrites += 1
        while len(self.segments) > 1 and self.active.base_offset >= offset:
            self._remove_segment(self.active)
        segment = self.active
        segment.load_tail()
        found = segment.translate(offset)
        if found is not None:  # as Kafka: the batch holding ``offset`` goes whole
            pos, header = found
            segment.truncate_to(pos, min(offset, header.base_offset), self.clock())
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.producer_state.truncate_to(self.log_end_offset)
        self._load_producer_state()

    @_io("truncating")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.rewrites += 1
        for segment in list(self.segments):
            segment.delete()
        self.segments.clear()
        self._bases.clear()
        self._add_segment(offset)
        self.log_start_offset = self.recovery_point = offset
        self.epochs.clear()
        self.producer_state.truncate_fully_and_start_at(offset)
        self.producer_state.load(offset, offset)

    # --- durability -------------------------------------------------------------------------------

    @_io("flushing")
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``offset`` (default: all) that is past the
        recovery point, then move the recovery point there."""
        if self.deleted:
            return
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if target > self.recovery_point:
            started = time.monotonic()
            segments, bases = list(self.segments), list(self._bases)
            for i, segment in enumerate(segments):
                if segment.base_offset >= target:
                    break
                segment_end = bases[i + 1] if i + 1 < len(bases) else None
                if (segment_end is None or segment_end > self.recovery_point) and not (
                    segment.deleted
                ):
                    segment.flush()
            self.recovery_point = target
            if self.flush_timer is not None:  # Kafka's LogFlushRateAndTimeMs
                self.flush_timer.record((time.monotonic() - started) * 1000.0)
        if target == self.log_end_offset:
            self.unflushed_messages = 0
        self.last_flush_ms = self.clock()

    @_io("flushing")
    def flush_rolled(self) -> None:
        """Make the inactive segments durable (Kafka does this after each roll, off the
        request path). It runs on a worker thread: when the log is deleted meanwhile (its
        segments gone, its files closed) it stops quietly, there is nothing left to keep."""
        try:
            if not self.deleted:
                self.flush(self.active.base_offset)
        except (IndexError, OSError, ValueError):
            if not self.deleted:
                raise

    @_io("flushing")
    def maybe_flush_by_time(self) -> bool:
        if self.clock() - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.index_interval_bytes = config.index_interval_bytes

    @_io("closing")
    def close(self) -> None:
        """Clean close: fsync everything, write the indexes and release the files."""
        self.active.on_become_inactive()
        self.producer_state.take_snapshot(self.log_end_offset)
        self.flush()
        for segment in self.segments:
            segment.close()

    def abandon(self) -> None:
        """Release the files without any of a clean close: what a crash leaves behind."""
        for segment in self.segments:
            segment.file.close()

    def delete(self) -> None:
        """Remove the partition's directory. Work in flight on other threads (a flush of rolled
        segments, the cleaner) sees ``deleted`` and stops; what it may still leave goes too."""
        self.deleted = True
        for segment in self.segments:
            segment.delete()
        self.segments.clear()
        self._bases.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

