"""The two sparse indexes of a segment, in Kafka's file formats.

``.index``: (relative offset u32, file position u32) per entry; the offset is the *last* offset of
the batch that starts at that position, one entry per ``index.interval.bytes`` of log.
``.timeindex``: (timestamp i64, relative offset u32) per entry; entries are added only when the
segment's maximum timestamp grows, so both columns increase.

Entries live in memory (a 1 GiB segment has about 260,000 of them) and new ones reach the file
when the segment is flushed, rolled or closed. A crash can lose unwritten entries only for
segments past the recovery point, and recovery rebuilds those indexes from the log.
"""

from __future__ import annotations

import os
import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_right
from pathlib import Path

from samsa.records.batch import NO_TIMESTAMP


class IndexCorruptError(Exception):
    """An index file that does not agree with itself or its segment; it gets rebuilt."""


class _Index(ABC):
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY.size)
        self._pending = bytearray()
        self._written = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self._columns()[0])

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _load_raw(self) -> bytes | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % self.ENTRY.size:
            raise IndexCorruptError(
                f"{self.path}: size {len(data)} is not a multiple of {self.ENTRY.size}"
            )
        return data

    def _queue(self, *fields: int) -> None:
        self._pending += self.ENTRY.pack(*fields)

    def flush(self, fsync: bool = False) -> None:
        """Write pending entries to the file."""
        if not self._pending and not fsync and self.path.exists():
            return
        with open(self.path, "ab") as f:
            f.write(self._pending)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        self._written = len(self)
        self._pending.clear()

    def _rewrite(self) -> None:
        self._pending = bytearray(b"".join(self.ENTRY.pack(*e) for e in self._entries()))
        self.path.unlink(missing_ok=True)
        self._written = 0
        self.flush()

    @abstractmethod
    def _entries(self) -> list[tuple[int, int]]:
        """Every entry as it is written to the file."""

    @abstractmethod
    def _columns(self) -> tuple[array, array]:
        """The in-memory columns, first the one the index is searched by."""

    def clear(self) -> None:
        """Drop every entry, in memory and on disk (before a rebuild)."""
        for column in self._columns():
            del column[:]
        self._rewrite()

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


class OffsetIndex(_Index):
    ENTRY = struct.Struct(">II")

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.offsets = array("q")  # absolute last offsets
        self.positions = array("q")

    def load(self, segment_size: int) -> bool:
        """Read the file; False when it is missing. Raises IndexCorruptError when inconsistent."""
        data = self._load_raw()
        if data is None:
            return False
        last_rel = last_pos = -1
        for rel, pos in self.ENTRY.iter_unpack(data):
            if rel <= last_rel and last_rel >= 0 or pos <= last_pos or pos >= segment_size:
                raise IndexCorruptError(
                    f"{self.path}: entry ({rel}, {pos}) out of order or past the segment end"
                )
            last_rel, last_pos = rel, pos
            self.offsets.append(self.base_offset + rel)
            self.positions.append(pos)
        self._written = len(self)
        return True

    def append(self, last_offset: int, position: int) -> None:
        self.offsets.append(last_offset)
        self.positions.append(position)
        self._queue(last_offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """File position from which a forward scan finds ``offset`` (0 when no entry helps)."""
        i = bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def lookup_position(self, position: int) -> int:
        """The greatest indexed batch start at or before ``position`` (0 when none)."""
        i = bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches that start at or after ``position``."""
        keep = bisect_right(self.positions, position - 1)
        if keep < len(self):
            del self.offsets[keep:]
            del self.positions[keep:]
            self._rewrite()

    def _columns(self) -> tuple[array, array]:
        return self.offsets, self.positions

    def _entries(self) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(o - base, p) for o, p in zip(self.offsets, self.positions, strict=True)]


class TimeIndex(_Index):
    ENTRY = struct.Struct(">qI")

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.timestamps = array("q")
        self.offsets = array("q")

    def load(self) -> bool:
        data = self._load_raw()
        if data is None:
            return False
        last_ts = last_rel = None
        for ts, rel in self.ENTRY.iter_unpack(data):
            if last_ts is not None and (ts <= last_ts or rel < last_rel):
                raise IndexCorruptError(f"{self.path}: entry ({ts}, {rel}) out of order")
            last_ts, last_rel = ts, rel
            self.timestamps.append(ts)
            self.offsets.append(self.base_offset + rel)
        self._written = len(self)
        return True

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) when the timestamp is larger than the last entry's. As in
        Kafka, an empty index's last entry is (NO_TIMESTAMP, base offset): a segment whose
        batches carry no timestamp (-1 or below) gets no entry."""
        if timestamp <= (self.timestamps[-1] if self.timestamps else NO_TIMESTAMP):
            return
        self.timestamps.append(timestamp)
        self.offsets.append(offset)
        self._queue(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """The offset of the greatest entry with timestamp <= ``timestamp`` (base when none)."""
        i = bisect_right(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is at or past ``offset``."""
        keep = len(self)
        while keep and self.offsets[keep - 1] >= offset:
            keep -= 1
        if keep < len(self):
            del self.timestamps[keep:]
            del self.offsets[keep:]
            self._rewrite()

    def _columns(self) -> tuple[array, array]:
        return self.timestamps, self.offsets

    def _entries(self) -> list[tuple[int, int]]:
        base = self.base_offset
        return [(t, o - base) for t, o in zip(self.timestamps, self.offsets, strict=True)]
