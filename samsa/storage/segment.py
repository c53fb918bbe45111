"""One segment of a partition log: ``<base offset>.log`` with its ``.index`` and ``.timeindex``.

The segment appends whole batches that the log has already validated and stamped, keeps the
sparse indexes, answers "which file position holds offset N", and can validate itself from the
first byte (recovery) when the log was not shut down cleanly.
"""

from __future__ import annotations

import logging
import mmap
import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path

from crc32c import crc32c

from samsa.records.batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    read_header,
)
from samsa.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from samsa.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INT32_MAX = 2**31 - 1
_FIRST_SCAN_CHUNK = 4 * 1024
_SCAN_CHUNK = 64 * 1024
_RECENT_BATCHES = 256  # the batches appended lately whose positions a segment keeps
_READ_CHUNK = 1024 * 1024
_IOV_MAX = 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        """``suffix`` names the files of a segment being built (the cleaner's ``.cleaned``)."""
        self.base_offset = base_offset
        name = segment_name(base_offset)
        self.log_path = directory / (name + LOG_SUFFIX + suffix)
        # "a+b": O_APPEND for writes; reads use pread and never move a file position.
        self.file = open(self.log_path, "a+b", buffering=0)  # noqa: SIM115 (lives with the segment)
        self.fd = self.file.fileno()
        self.size = os.fstat(self.fd).st_size
        self.index = OffsetIndex(
            directory / (name + INDEX_SUFFIX + suffix), base_offset, max_index_bytes
        )
        self.time_index = TimeIndex(
            directory / (name + TIME_INDEX_SUFFIX + suffix), base_offset, max_index_bytes
        )
        self.txn_index = TransactionIndex(directory / (name + TXN_INDEX_SUFFIX + suffix))
        self.index_interval_bytes = index_interval_bytes
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms = created_ms
        self.next_offset = base_offset  # offset after the last batch; known for the active one
        self.deleted = False
        # Where the batches appended lately start (base offsets ascending): consumers at the
        # end of the log ask for them, and the sparse index would have a fetch read every
        # batch header from its last entry on.
        self._recent_bases: list[int] = []
        self._recent_positions: list[int] = []

    # --- loading ----------------------------------------------------------------------------

    def load_indexes(self) -> bool:
        """Load both index files; False when either is missing or inconsistent."""
        try:
            loaded = self.index.load(self.size) & self.time_index.load()
        except IndexCorruptError as exc:
            log.warning("rebuilding index: %s", exc)
            return False
        if not loaded:
            return False
        if self.index.positions:
            header = self._header_at(self.index.positions[-1])
            if header is None or header.last_offset != self.index.offsets[-1]:
                log.warning("rebuilding index %s: its last entry does not match the log",
                            self.index.path)
                return False
        last = self.time_index.last_entry
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        elif self.size:
            first = self._header_at(0)
            if first is not None and first.max_timestamp >= 0:
                # A segment with timestamps always has its final time index entry.
                log.warning("rebuilding index %s: it is empty", self.time_index.path)
                return False
        return True

    def load_tail(self) -> bool:
        """Find the end of the data from the last index entry on (cheap: bounded by the index
        interval). Returns False when the tail is not made of whole batches."""
        start = self.index.positions[-1] if self.index.positions else 0
        pos = start
        self.bytes_since_last_index_entry = 0
        for pos, header in self.scan(start):
            self.next_offset = header.next_offset
            self._note_timestamp(header)
            if self.first_batch_timestamp is None and pos == 0:
                self.first_batch_timestamp = header.max_timestamp
            self.bytes_since_last_index_entry += header.size
            pos += header.size
        last_time_entry = self.time_index.last_entry
        if last_time_entry is not None and last_time_entry[1] >= self.next_offset:
            return False  # whole batches were lost after the index was written
        if self.size == 0:
            return True
        if self.first_batch_timestamp is None:
            first = self._header_at(0)
            self.first_batch_timestamp = first.max_timestamp if first else None
        return pos == self.size

    def recover(self) -> int:
        """Validate every batch from the start, rebuild both indexes, and cut a torn or corrupt
        tail. Returns the number of bytes truncated."""
        self.index.clear()
        self.time_index.clear()
        self._forget_recent()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        size = os.fstat(self.fd).st_size
        pos, expected, reason = 0, self.base_offset, ""
        if size:
            with mmap.mmap(self.fd, size, access=mmap.ACCESS_READ) as mm:
                view = memoryview(mm)
                try:
                    pos, expected, reason = self._validate(view, size)
                finally:
                    view.release()
        truncated = size - pos
        if truncated:
            log.warning(
                "%s: truncating %d bytes at position %d (offset %d): %s",
                self.log_path, truncated, pos, expected, reason,
            )
            os.ftruncate(self.fd, pos)
        self.size = pos
        self.next_offset = expected
        self.txn_index.truncate_to(expected)
        if self.max_timestamp >= 0:  # as at a roll: the last entry holds the largest timestamp
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush()
        self.time_index.flush()
        return truncated

    def _validate(self, view: memoryview, size: int) -> tuple[int, int, str]:
        pos, expected = 0, self.base_offset
        while pos < size:
            if size - pos < HEADER_SIZE:
                return pos, expected, "torn batch header"
            header = read_header(view, pos)
            if header.magic != 2:
                return pos, expected, f"bad magic {header.magic}"
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > size:
                return pos, expected, "torn batch"
            if crc32c(view[pos + CRC_START : pos + header.size]) != header.crc:
                return pos, expected, "CRC-32C mismatch"
            if (
                header.base_offset < expected
                or header.last_offset_delta < 0
                or header.last_offset - self.base_offset > INT32_MAX
            ):
                return pos, expected, f"offset {header.base_offset} out of sequence"
            self._track(header, pos)
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = header.max_timestamp
            expected = header.next_offset
            pos += header.size
        return pos, expected, ""

    # --- appending --------------------------------------------------------------------------

    def _note_timestamp(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset

    def _track(self, header: BatchHeader, position: int) -> None:
        """Index bookkeeping for one batch at ``position`` (header holds its final offsets)."""
        self._note_timestamp(header)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size

    def append(self, iov: Sequence[bytes | bytearray | memoryview],
               headers: Sequence[BatchHeader]) -> None:
        """Write stamped batches (``headers`` carry the offsets assigned to them)."""
        position = self.size
        bases, positions = self._recent_bases, self._recent_positions
        for header in headers:
            self._track(header, position)
            bases.append(header.base_offset)
            positions.append(position)
            position += header.size
        if len(bases) > 2 * _RECENT_BATCHES:
            del bases[:-_RECENT_BATCHES], positions[:-_RECENT_BATCHES]
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = headers[0].max_timestamp
        _writev_all(self.fd, iov, position - self.size)
        self.size = position
        self.next_offset = headers[-1].next_offset

    # --- reading ----------------------------------------------------------------------------

    def scan(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from ``start`` (a batch boundary) on."""
        end = self.size if end is None else end
        pos = start
        buf, buf_start = b"", start
        chunk = _FIRST_SCAN_CHUNK  # most scans stop after a batch or two: start small
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf, buf_start, off = os.pread(self.fd, min(chunk, end - pos), pos), pos, 0
                chunk = min(chunk * 4, _SCAN_CHUNK)
                if len(buf) < HEADER_SIZE:
                    return
            header = read_header(buf, off)
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
                return
            yield pos, header
            pos += header.size

    def read_batches(self, start: int, chunk: int = _READ_CHUNK
                     ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, bytes) of each whole batch from ``start`` (a batch boundary) on,
        read ``chunk`` bytes at a time (one pread for many batches: the log cleaner)."""
        end = self.size
        pos = start
        buf, buf_start = memoryview(b""), start
        while end - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf, buf_start, off = memoryview(os.pread(self.fd, chunk, pos)), pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = read_header(buf, off)
            size = header.batch_length + LOG_OVERHEAD
            if header.batch_length < MIN_BATCH_LENGTH or pos + size > end:
                return
            if off + size > len(buf):  # the batch runs past the chunk: read from it on
                buf, buf_start, off = memoryview(os.pread(self.fd, max(chunk, size), pos)), pos, 0
                if len(buf) < size:
                    return
            yield pos, header, buf[off : off + size]
            pos += size

    def _header_at(self, position: int) -> BatchHeader | None:
        for _, header in self.scan(position):
            return header
        return None

    def translate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, or None past this segment."""
        bases = self._recent_bases
        if bases and offset >= bases[0]:
            start = self._recent_positions[bisect_right(bases, offset) - 1]
        else:
            start = self.index.lookup(offset)
        for pos, header in self.scan(start):
            if header.last_offset >= offset:
                return pos, header
        return None

    def batch_boundary_before(self, start: int, limit: int) -> int:
        """The last batch boundary at or before ``limit``, scanning from ``start``."""
        pos = max(self.index.lookup_position(limit), start)
        for batch_pos, header in self.scan(pos, limit):
            pos = batch_pos + header.size
        return pos

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)

    # --- lifecycle --------------------------------------------------------------------------

    def time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        if self.first_batch_timestamp is not None and self.first_batch_timestamp >= 0:
            return max_timestamp - self.first_batch_timestamp
        return now_ms - self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """For retention: the largest record timestamp, else the file's modification time."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def on_become_inactive(self) -> None:
        """Rolled away from: record the final max timestamp and write the indexes out."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush()
        self.time_index.flush()

    def flush(self) -> None:
        if self.deleted:  # writing its indexes would bring the files back
            return
        self.index.flush(fsync=True)
        self.time_index.flush(fsync=True)
        self.txn_index.flush()
        os.fsync(self.fd)

    def truncate_to(self, position: int, next_offset: int, now_ms: int) -> None:
        """Drop every batch that starts at or after ``position``."""
        os.ftruncate(self.fd, position)
        self.size = position
        self._forget_recent()
        self.next_offset = next_offset
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(next_offset)
        self.txn_index.truncate_to(next_offset)
        self.max_timestamp = self.offset_of_max_timestamp = -1
        last = self.time_index.last_entry
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        self.first_batch_timestamp = None  # the roll timer restarts from what is left
        if position == 0:
            self.created_ms = now_ms
        self.load_tail()

    def _forget_recent(self) -> None:
        self._recent_bases.clear()
        self._recent_positions.clear()

    def rename_dir(self, directory: Path) -> None:
        """Its directory was renamed: the files are open still, their paths change."""
        self.log_path = directory / self.log_path.name
        self.index.path = directory / self.index.path.name
        self.time_index.path = directory / self.time_index.path.name
        self.txn_index.path = directory / self.txn_index.path.name

    def close(self) -> None:
        self.on_become_inactive()
        self.file.close()

    def delete(self) -> None:
        """Remove the files. The open file object stays valid for readers that still hold it
        (a fetch being sent); it closes when the last of them lets go."""
        self.deleted = True
        for path in (self.log_path, self.index.path, self.time_index.path):
            path.unlink(missing_ok=True)
        self.txn_index.delete()


def _writev_all(fd: int, iov: Sequence[bytes | bytearray | memoryview], total: int) -> None:
    written = 0
    parts = list(iov)
    while parts:
        n = os.writev(fd, parts[:_IOV_MAX])
        written += n
        if written == total:
            return
        # A short write (rare on regular files): drop what went out and continue.
        while parts and n >= len(parts[0]):
            n -= len(parts[0])
            parts.pop(0)
        if parts and n:
            parts[0] = memoryview(parts[0])[n:]
