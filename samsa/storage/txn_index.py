"""A segment's aborted-transaction index, ``<base offset>.txnindex`` in Kafka's format.

One entry per transaction aborted by a marker in this segment, in marker order (big-endian)::

    version int16 (0) | producer id int64 | first offset int64 | last offset int64 |
    last stable offset int64

``first offset`` is the transaction's first batch (possibly in an earlier segment), ``last
offset`` the abort marker's, and ``last stable offset`` the partition's LSO right after the
marker. A read_committed Fetch gets the entries that overlap what it reads; the LSO field tells
when later entries cannot overlap any more (Kafka's TransactionIndex.collectAbortedTxns).

The file exists only once a segment has an aborted transaction. It is rebuilt, like producer
state, from the batches after the latest usable producer snapshot (``Log``), so a torn tail
is simply dropped.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._dirty = False
        self._load()

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % _ENTRY.size
        if whole != len(data):
            log.warning("%s: dropping a partial entry at its end", self.path)
        for pos in range(0, whole, _ENTRY.size):
            version, *fields = _ENTRY.unpack_from(data, pos)
            if version != _VERSION:
                log.warning("%s: unknown entry version %d; dropping the rest", self.path,
                            version)
                whole = pos
                break
            self.entries.append(AbortedTxn(*fields))
        if whole != len(data):
            self._rewrite()

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted transaction ending at {txn.last_offset} is not after "
                f"the last one ({self.entries[-1].last_offset})"
            )
        self.entries.append(txn)
        with open(self.path, "ab") as handle:
            handle.write(_ENTRY.pack(_VERSION, *txn))
        self._dirty = True

    def collect(self, fetch_offset: int, upper: int, out: list[AbortedTxn]) -> bool:
        """Append to ``out`` the transactions that overlap [fetch_offset, upper); True once no
        later entry can overlap any more."""
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper:
                out.append(txn)
            if txn.last_stable_offset >= upper:
                return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset``."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        with open(self.path, "r+b" if self.path.exists() else "wb") as handle:
            handle.truncate(len(self.entries) * _ENTRY.size)
            handle.seek(0)
            handle.write(b"".join(_ENTRY.pack(_VERSION, *t) for t in self.entries))
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def delete(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)


def write_txn_index(path: Path, entries: list[AbortedTxn]) -> None:
    """Write a whole index file (the cleaner's ``.txnindex.cleaned``); nothing when empty."""
    if entries:
        with open(path, "wb") as handle:
            handle.write(b"".join(_ENTRY.pack(_VERSION, *t) for t in entries))
            handle.flush()
            os.fsync(handle.fileno())
