"""Idempotent-producer state of one partition, as Kafka's ProducerStateManager keeps it.

For every producer id the partition remembers the producer epoch, the last timestamp seen and
the metadata of its last 5 batches (first and last sequence, first and last offset, max
timestamp). That is enough to answer a retried batch with the offsets of the original
(INDEX.md section 2 rule 16) and to reject gaps and zombie producers.

Append (leader), checked before anything is written, committed after::

    txn = state.begin()
    for header in headers:                  # as sent: base offsets not yet assigned
        duplicate = txn.check(header)       # raises InvalidProducerEpochError or
        ...                                 #   OutOfOrderSequenceError; None if new
    # a duplicate: write nothing, answer success with duplicate.first_offset (Kafka returns
    # duplicate.timestamp as LogAppendTime); otherwise append, then:
    txn.commit(stamped_headers)             # the same batches, with their final offsets

``txn.check`` validates each batch against the committed state plus the batches it already
accepted in this transaction (so several batches of one producer chain), but changes nothing
in the manager: if any check raises, drop the transaction and the state is as before.
Duplicates are looked up in the committed state only, as Kafka does. ``commit`` takes every
header that was appended (batches without a producer id only move ``map_end_offset``) and
fails if the state changed since ``begin()``. ``check(header)`` / ``update(header)`` on the
manager are the one-batch shorthand.

Rules of ``check``, in Kafka's order: an epoch lower than the known one is
INVALID_PRODUCER_EPOCH; the same epoch and sequence range as a cached batch is a duplicate; a
higher epoch must start at sequence 0 unless the producer is unknown; the same epoch must go
on at last sequence + 1 (after 2**31-1 comes 0); an unknown producer id (say its state went
with retention) is accepted at any sequence, as Kafka does, unless the caller says this state
knows every producer that ever wrote to the log (``begin(knows_every_producer=True)``: the log
starts at offset 0, is not compacted, and no producer expired here). Then a producer unknown here
has nothing in the log, and a first batch at a sequence other than 0 means earlier batches never
reached this leader (refused by a leader that was not one yet, or left on a former leader that
lost them): OUT_OF_ORDER_SEQUENCE_NUMBER, which the clients answer by sending those batches
again, where Kafka's leniency lets librdkafka count them delivered (its "implicit ack" of a
batch whose successor succeeded). Control batches only move the epoch.

Transactions: a producer's first transactional batch opens its transaction on this partition
(``current_txn_first_offset``); the commit or abort marker the coordinator writes closes it
(``apply_marker``, which returns the ``CompletedTxn``). ``first_unstable_offset`` is the first
offset of the oldest open transaction: the last stable offset cannot pass it. Producers with an
open transaction never expire. A non-transactional batch from a producer whose transaction is
open is INVALID_TXN_STATE, as in Kafka.

Snapshots: ``<offset:020d>.snapshot`` in the partition directory holds every producer's state
as of ``offset`` (all batches below it applied), written atomically. Format (big-endian)::

    version int16 (3) | crc uint32: CRC-32C of everything after it |
    flags int8 (1: a producer expired here) | count int32 |
    count x [producer id int64 | epoch int16 | last timestamp int64 |
             current txn first offset int64 (-1: none) | coordinator epoch int32 | n int8 |
             n x [first seq int32 | last seq int32 | first offset int64 | last offset int64 |
                  max timestamp int64]]

Version 2 lacks the flags (read as "a producer may have expired"), version 1 (before
transactions) also the two transaction fields; both are still read.

Unlike Kafka (last batch only) all 5 cached batches are kept, so duplicates are still caught
after a restart. On open, ``load(log_start, log_end)`` restores the latest usable snapshot and
returns the offset from which the caller must ``replay`` every batch up to the log end.
After a log truncation call ``truncate_to`` and then ``load`` again.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from crc32c import crc32c

from samsa.durable import write_atomically
from samsa.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from samsa.records.batch import NO_SEQUENCE, BatchHeader

log = logging.getLogger(__name__)

BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
MAX_SEQUENCE = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 3
NO_TXN = -1

_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_FILE_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_FLAGS = struct.Struct(">b")
_EXPIRED_FLAG = 1
_ENTRY_V1 = struct.Struct(">qhqb")  # producer id, epoch, last timestamp, batch count
# producer id, epoch, last timestamp, current txn first offset, coordinator epoch, batch count
_ENTRY = struct.Struct(">qhqqib")
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, max timestamp


class CorruptSnapshotError(ValueError):
    pass


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction a marker closed on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


class DuplicateBatch(NamedTuple):
    """The original of a retried batch: answer success with these offsets."""

    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]  # oldest first, at most BATCHES_TO_RETAIN, this epoch
    last_timestamp: int
    current_txn_first_offset: int = NO_TXN
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None


def _has_sequence(header: BatchHeader) -> bool:
    return not header.is_control and header.base_sequence >= 0


def _advance(
    entry: ProducerEntry | None, header: BatchHeader, first_offset: int, last_offset: int
) -> ProducerEntry:
    """The entry after ``header``: a new epoch drops the old epoch's batches."""
    batches = entry.batches if entry is not None and entry.epoch == header.producer_epoch else ()
    txn_first = NO_TXN if entry is None else entry.current_txn_first_offset
    coordinator_epoch = -1 if entry is None else entry.coordinator_epoch
    if _has_sequence(header):
        meta = BatchMetadata(
            header.base_sequence, header.last_sequence, first_offset, last_offset,
            header.max_timestamp,
        )
        batches = (*batches, meta)[-BATCHES_TO_RETAIN:]
    if header.is_transactional and not header.is_control and txn_first == NO_TXN:
        txn_first = first_offset
    return ProducerEntry(header.producer_id, header.producer_epoch, batches, header.max_timestamp,
                         txn_first, coordinator_epoch)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


def _check_epoch(entry: ProducerEntry | None, header: BatchHeader) -> None:
    known = NO_PRODUCER_EPOCH if entry is None else entry.epoch
    if header.producer_epoch < known:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id} sent epoch {header.producer_epoch}, "
            f"older than the last seen epoch {known}"
        )


def _check_sequence(entry: ProducerEntry | None, header: BatchHeader,
                    knows_every_producer: bool) -> None:
    seq = header.base_sequence
    if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
        if seq != 0 and knows_every_producer:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} has written nothing here, so its first batch "
                f"starts at sequence 0, not {seq}: the batches before it did not arrive"
            )
        return  # unknown producer id (expired or gone with retention): any sequence
    if header.producer_epoch != entry.epoch:
        if seq != 0:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} started epoch {header.producer_epoch} at "
                f"sequence {seq}, a new epoch starts at 0 (last epoch {entry.epoch})"
            )
    elif not _in_sequence(entry.last_seq, seq):
        raise OutOfOrderSequenceError(
            f"out of order sequence for producer {header.producer_id} epoch "
            f"{header.producer_epoch}: got {seq}, last appended {entry.last_seq}"
        )


def _batch_key(header: BatchHeader) -> tuple[int, int, int, int]:
    return (header.producer_id, header.producer_epoch, header.base_sequence,
            header.last_offset_delta)


class ProducerAppendBatch:
    """One append's worth of checks; nothing reaches the manager before ``commit``."""

    def __init__(self, manager: ProducerStateManager, knows_every_producer: bool) -> None:
        self._manager = manager
        self._strict = knows_every_producer and not manager.expired_producers
        self._version = manager._version
        self._scratch: dict[int, ProducerEntry] = {}
        self._accepted: list[tuple[int, int, int, int]] = []
        self._committed = False

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """Validate one batch as sent; None if it is new (and now counts as appended within
        this transaction), the original's offsets if it is a retry. Raises
        InvalidProducerEpochError or OutOfOrderSequenceError."""
        pid = header.producer_id
        if pid < 0:
            return None
        committed = self._manager._producers.get(pid)
        current = self._scratch.get(pid, committed)
        _check_epoch(current, header)
        if (not header.is_transactional and current is not None
                and current.current_txn_first_offset != NO_TXN):
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {pid}: its transaction "
                f"is still open on this partition"
            )
        if _has_sequence(header):
            original = committed.find_duplicate(header) if committed is not None else None
            if original is not None:
                return DuplicateBatch(
                    original.first_offset, original.last_offset, original.max_timestamp
                )
            _check_sequence(current, header, self._strict)
        # offsets are not assigned yet; any non-negative first offset marks an opened txn
        self._scratch[pid] = _advance(current, header, max(header.base_offset, 0), -1)
        self._accepted.append(_batch_key(header))
        return None

    def commit(self, headers: Iterable[BatchHeader]) -> None:
        """Record the appended batches (final offsets), in log order: exactly those ``check``
        accepted, plus any without a producer id."""
        if self._committed:
            raise RuntimeError("producer state transaction already committed")
        if self._manager._version != self._version:
            raise RuntimeError("producer state changed since begin(); check the batches again")
        headers = list(headers)
        keys = [_batch_key(h) for h in headers if h.producer_id >= 0]
        if keys != self._accepted:
            raise ValueError("commit() needs exactly the batches check() accepted, in order")
        for header in headers:
            self._manager._apply(header)
        self._committed = True


class ProducerStateManager:
    """Per-partition idempotent-producer state and its snapshots in ``directory``.

    Call ``load`` (and replay from the offset it returns) before anything else."""

    def __init__(self, directory: Path, *, max_snapshots: int = 2) -> None:
        if max_snapshots < 1:
            raise ValueError("max_snapshots must be at least 1")
        self.dir = Path(directory)
        self.max_snapshots = max_snapshots
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}
        self._map_end_offset = 0
        self._version = 0
        self._loaded = False
        # a producer's state was dropped (expiration): one unknown here may have written before
        self.expired_producers = False

    # --- state ------------------------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        return MappingProxyType(self._producers)

    @property
    def map_end_offset(self) -> int:
        """Every batch below this offset is reflected in the state."""
        return self._map_end_offset

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def begin(self, knows_every_producer: bool = False) -> ProducerAppendBatch:
        """Checks for one append. ``knows_every_producer``: the log holds every batch ever
        written to it (it starts at 0 and is not compacted), so with no producer expired, an
        unknown producer is a new one (see the module's docstring)."""
        self._require_loaded()
        return ProducerAppendBatch(self, knows_every_producer)

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """One-batch ``begin().check(header)``: changes nothing."""
        return self.begin().check(header)

    def update(self, header: BatchHeader) -> None:
        """Record a batch just appended (``header.base_offset`` final). No checks."""
        self._require_loaded()
        self._apply(header)

    def replay(self, header: BatchHeader) -> None:
        """Apply a batch read back from the log while loading. No checks."""
        self._require_loaded()
        self._apply(header)

    def copy_from(self, other: ProducerStateManager) -> None:
        """Take another replica's state of the same log (a copy of the log that replaces it:
        producers the original expired are gone here too)."""
        other._require_loaded()
        self._producers = dict(other._producers)  # the entries are immutable
        self._ongoing = dict(other._ongoing)
        self._map_end_offset = other._map_end_offset
        self.expired_producers = other.expired_producers
        self._loaded = True
        self._version += 1

    def remove_expired(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms``; returns their ids."""
        expired = [
            pid for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= producer_id_expiration_ms
            and entry.current_txn_first_offset == NO_TXN
        ]
        for pid in expired:
            del self._producers[pid]
        if expired:
            self.expired_producers = True
            self._version += 1
        return expired

    def _apply(self, header: BatchHeader) -> None:
        if header.is_control:
            raise ValueError("control batches go through apply_marker")
        pid = header.producer_id
        if pid >= 0:
            entry = _advance(
                self._producers.get(pid), header, header.base_offset, header.last_offset
            )
            self._producers[pid] = entry
            if entry.current_txn_first_offset != NO_TXN:
                self._ongoing[pid] = entry.current_txn_first_offset
        self._map_end_offset = max(self._map_end_offset, header.next_offset)
        self._version += 1

    # --- transactions -----------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        return min(self._ongoing.values()) if self._ongoing else None

    @property
    def ongoing(self) -> Mapping[int, int]:
        """Producer id -> first offset of its open transaction."""
        return MappingProxyType(self._ongoing)

    def check_marker(self, header: BatchHeader, coordinator_epoch: int) -> None:
        """A marker from a fenced producer epoch or an older coordinator is refused."""
        self._require_loaded()
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"transaction marker for producer {header.producer_id} has epoch "
                f"{header.producer_epoch}, older than the last seen epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"transaction marker from coordinator epoch {coordinator_epoch}, older than "
                f"{entry.coordinator_epoch}"
            )

    def apply_marker(
        self, header: BatchHeader, commit: bool, coordinator_epoch: int
    ) -> CompletedTxn | None:
        """Record a commit or abort marker (``header.base_offset`` final); the transaction it
        closed, if the producer had one open here."""
        self._require_loaded()
        pid = header.producer_id
        entry = self._producers.get(pid)
        first = NO_TXN if entry is None else entry.current_txn_first_offset
        batches = entry.batches if entry is not None and entry.epoch == header.producer_epoch \
            else ()
        self._producers[pid] = ProducerEntry(
            pid, header.producer_epoch, batches, header.max_timestamp, NO_TXN, coordinator_epoch
        )
        self._ongoing.pop(pid, None)
        self._map_end_offset = max(self._map_end_offset, header.next_offset)
        self._version += 1
        if first == NO_TXN:
            return None
        return CompletedTxn(pid, first, header.base_offset, not commit)

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise RuntimeError(f"{self.dir}: producer state is not loaded; call load() first")

    # --- snapshots --------------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        offsets = []
        for name in os.listdir(self.dir):
            match = _SNAPSHOT_FILE.match(name)
            if match is not None:
                offsets.append(int(match[1]))
        return sorted(offsets)

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def take_snapshot(self, offset: int | None = None) -> Path:
        """Write the state as of ``offset`` (default ``map_end_offset``; give the log end
        offset when batches without producer ids came last), keeping the newest
        ``max_snapshots`` files."""
        self._require_loaded()
        offset = self._map_end_offset if offset is None else offset
        if offset < self._map_end_offset:
            raise ValueError(
                f"cannot snapshot at {offset}: the state already holds batches up to "
                f"{self._map_end_offset}"
            )
        path = self.snapshot_path(offset)
        write_atomically(path, _encode(self._producers.values(), self.expired_producers))
        self._map_end_offset = offset
        for old in self.snapshot_offsets()[: -self.max_snapshots]:
            self._delete_snapshot(old)
        return path

    def load(self, log_start_offset: int, log_end_offset: int, newest: int | None = None) -> int:
        """Restore the latest valid snapshot in [log_start_offset, log_end_offset] (and not
        past ``newest``); returns the offset from which every batch up to the log end must be
        ``replay``ed."""
        newest = log_end_offset if newest is None else min(newest, log_end_offset)
        self._producers = {}
        # replayed from the log start, the state has every producer whose batches are there
        self.expired_producers = False
        offsets = self.snapshot_offsets()
        for offset in offsets:
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        start = log_start_offset
        for offset in reversed([o for o in offsets if log_start_offset <= o <= newest]):
            path = self.snapshot_path(offset)
            try:
                self._producers, self.expired_producers = _decode(path.read_bytes())
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("%s: ignoring producer state snapshot: %s", path, exc)
                self._delete_snapshot(offset)
                continue
            start = offset
            break
        self._map_end_offset = start
        self._ongoing = {pid: e.current_txn_first_offset for pid, e in self._producers.items()
                         if e.current_txn_first_offset != NO_TXN}
        self._loaded = True
        self._version += 1
        return start

    def delete_snapshots_below(self, offset: int) -> None:
        """Retention: snapshots below the new log start offset are of no use."""
        for old in self.snapshot_offsets():
            if old < offset:
                self._delete_snapshot(old)

    def truncate_to(self, offset: int) -> None:
        """After the log was truncated to ``offset``: drop later snapshots and the state;
        ``load`` must run again before the next append."""
        for old in self.snapshot_offsets():
            if old > offset:
                self._delete_snapshot(old)
        self._producers = {}
        self._ongoing = {}
        self._loaded = False
        self._version += 1

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at ``offset``: no producers, no snapshots."""
        for old in self.snapshot_offsets():
            self._delete_snapshot(old)
        self._producers = {}
        self._ongoing = {}
        self.expired_producers = False
        self._map_end_offset = offset
        self._loaded = True
        self._version += 1

    def _delete_snapshot(self, offset: int) -> None:
        try:
            self.snapshot_path(offset).unlink()
        except FileNotFoundError:
            pass


def _encode(entries: Iterable[ProducerEntry], expired_producers: bool) -> bytes:
    entries = list(entries)
    body = bytearray(_FLAGS.pack(_EXPIRED_FLAG if expired_producers else 0))
    body += _COUNT.pack(len(entries))
    for e in entries:
        body += _ENTRY.pack(e.producer_id, e.epoch, e.last_timestamp,
                            e.current_txn_first_offset, e.coordinator_epoch, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(*b)
    return _FILE_HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def _decode(data: bytes) -> tuple[dict[int, ProducerEntry], bool]:
    """The producers of a snapshot, and whether a producer had expired (true for versions
    before 3, which did not say)."""
    try:
        version, crc = _FILE_HEADER.unpack_from(data, 0)
        if version not in (1, 2, SNAPSHOT_VERSION):
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        body = memoryview(data)[_FILE_HEADER.size :]
        if crc32c(body) != crc:
            raise CorruptSnapshotError("CRC-32C mismatch")
        pos = 0
        expired = True
        if version >= 3:
            (flags,) = _FLAGS.unpack_from(body, 0)
            expired = bool(flags & _EXPIRED_FLAG)
            pos = _FLAGS.size
        (count,) = _COUNT.unpack_from(body, pos)
        pos += _COUNT.size
        producers: dict[int, ProducerEntry] = {}
        for _ in range(count):
            if version == 1:
                pid, epoch, last_timestamp, n = _ENTRY_V1.unpack_from(body, pos)
                txn_first, coordinator_epoch = NO_TXN, -1
                pos += _ENTRY_V1.size
            else:
                pid, epoch, last_timestamp, txn_first, coordinator_epoch, n = _ENTRY.unpack_from(
                    body, pos)
                pos += _ENTRY.size
            if not 0 <= n <= BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"producer {pid} has {n} batches")
            batches = tuple(
                BatchMetadata(*_BATCH.unpack_from(body, pos + i * _BATCH.size)) for i in range(n)
            )
            pos += n * _BATCH.size
            producers[pid] = ProducerEntry(pid, epoch, batches, last_timestamp, txn_first,
                                           coordinator_epoch)
    except struct.error as exc:
        raise CorruptSnapshotError(f"truncated snapshot: {exc}") from exc
    if pos != len(body):
        raise CorruptSnapshotError(f"{len(body) - pos} trailing bytes")
    return producers, expired
