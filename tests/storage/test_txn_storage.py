"""Transactions in the partition log: open transactions and the first unstable offset, commit /
abort markers (``Log.append_marker``), the aborted-transaction index (``<base>.txnindex``, Kafka's
34-byte entries, in the segment of the abort marker), ``collect_aborted_txns`` for read_committed
fetches (with Kafka's LSO completeness rule), and how all of it survives clean and unclean
reopens, a torn index tail, truncation and retention. Ends with a stateful Hypothesis test of
random interleavings of several producers' transactions against a simple model.
"""

from __future__ import annotations

import itertools
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from samsa.config import LogConfig
from samsa.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from samsa.storage.log import Log
from samsa.storage.producer_state import CompletedTxn
from samsa.storage.txn_index import AbortedTxn, TransactionIndex

from .conftest import BASE_TIME_MS, FakeClock, make_batch

PID_A, PID_B, PID_C = 1000, 2000, 3000
COORDINATOR_EPOCH = 3
ENTRY = struct.Struct(">hqqqq")  # Kafka's TransactionIndex entry
assert ENTRY.size == 34


# --- helpers ------------------------------------------------------------------------------------


class Producer:
    """A producer's id, epoch and next sequence; builds its batches."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid = pid
        self.epoch = epoch
        self.seq = 0

    def batch(self, count: int = 1, *, transactional: bool = True, seq: int | None = None,
              epoch: int | None = None) -> bytes:
        """The next batch (the sequence moves on unless ``seq`` is given)."""
        first = self.seq if seq is None else seq
        data = make_batch(count, producer_id=self.pid,
                          producer_epoch=self.epoch if epoch is None else epoch,
                          base_sequence=first, transactional=transactional)
        if seq is None:
            self.seq += count
        return data


def new_log(directory: Path, clock: FakeClock, **config: int) -> Log:
    return Log(directory / "t-0", LogConfig(**config), clock=clock)


def reopen(log: Log, *, clean: bool = True, recovery_point: int = 0) -> Log:
    """Close (clean) or crash (``abandon``) and open the directory again."""
    if clean:
        log.close()
        return Log(log.dir, log.config, clock=log.clock, had_clean_shutdown=True,
                   recovery_point=log.recovery_point, log_start_offset=log.log_start_offset)
    log.abandon()
    return Log(log.dir, log.config, clock=log.clock, had_clean_shutdown=False,
               recovery_point=recovery_point, log_start_offset=log.log_start_offset)


def entries_by_segment(log: Log) -> dict[int, list[AbortedTxn]]:
    """The aborted-transaction entries each segment holds in memory (segments with any)."""
    return {s.base_offset: list(s.txn_index.entries) for s in log.segments if s.txn_index.entries}


def read_index_file(path: Path) -> list[AbortedTxn]:
    """Parse a .txnindex file as Kafka would: whole 34-byte entries of version 0."""
    data = path.read_bytes()
    assert len(data) % ENTRY.size == 0, f"{path.name}: {len(data)} bytes is not whole entries"
    out = []
    for pos in range(0, len(data), ENTRY.size):
        version, *fields = ENTRY.unpack_from(data, pos)
        assert version == 0
        out.append(AbortedTxn(*fields))
    return out


def index_files(log: Log) -> dict[int, list[AbortedTxn]]:
    """The .txnindex files in the log directory, parsed, by segment base offset."""
    return {int(p.name[:20]): read_index_file(p) for p in sorted(log.dir.glob("*.txnindex"))}


def all_entries(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.entries]


def check_consistent(log: Log) -> None:
    """Files and memory agree; each entry sits in the segment holding its marker; a file
    exists exactly for the segments with entries."""
    assert index_files(log) == entries_by_segment(log)
    bases = [s.base_offset for s in log.segments] + [log.log_end_offset + 1]
    for i, segment in enumerate(log.segments):
        for txn in segment.txn_index.entries:
            assert bases[i] <= txn.last_offset < bases[i + 1]


def overlapping(entries: list[AbortedTxn], fetch: int, upper: int) -> list[AbortedTxn]:
    """What a read_committed fetch of [fetch, upper) needs: every aborted transaction that
    overlaps it, in marker order."""
    return [t for t in entries if t.last_offset >= fetch and t.first_offset < upper]


@dataclass
class Layout:
    """The log of :func:`build_layout` and its producers."""

    log: Log
    a: Producer
    b: Producer
    c: Producer


def build_layout(tmp_path: Path, clock: FakeClock) -> Layout:
    """Three segments with aborted transactions, one spanning a roll::

        segment 0:  0-2 A txn | 3-4 B txn | 5 A abort -> (A, 0, 5, lso 3) | 6-7 plain
        segment 8:  8 C txn | 9 B abort -> (B, 3, 9, lso 8) | 10 C txn | 11 C abort
                    -> (C, 8, 11, lso 12)
        segment 12: 12-13 B txn | 14 A txn | 15 B commit | 16 A abort -> (A, 14, 16, lso 17)
                    | 17 plain
    """
    log = new_log(tmp_path, clock)
    a, b, c = Producer(PID_A), Producer(PID_B), Producer(PID_C)
    assert log.append(a.batch(3)).first_offset == 0
    assert log.append(b.batch(2)).first_offset == 3
    assert log.append_marker(PID_A, 0, False, COORDINATOR_EPOCH) == CompletedTxn(PID_A, 0, 5, True)
    assert log.append(make_batch(2)).first_offset == 6
    log.roll()
    assert log.append(c.batch()).first_offset == 8
    assert log.append_marker(PID_B, 0, False, COORDINATOR_EPOCH) == CompletedTxn(PID_B, 3, 9, True)
    assert log.append(c.batch()).first_offset == 10
    log.append_marker(PID_C, 0, False, COORDINATOR_EPOCH)
    log.roll()
    assert log.append(b.batch(2)).first_offset == 12
    assert log.append(a.batch()).first_offset == 14
    assert log.append_marker(PID_B, 0, True, COORDINATOR_EPOCH) == CompletedTxn(PID_B, 12, 15,
                                                                                False)
    log.append_marker(PID_A, 0, False, COORDINATOR_EPOCH)
    assert log.append(make_batch(1)).first_offset == 17
    return Layout(log, a, b, c)


LAYOUT_ENTRIES = {
    0: [AbortedTxn(PID_A, 0, 5, 3)],
    8: [AbortedTxn(PID_B, 3, 9, 8), AbortedTxn(PID_C, 8, 11, 12)],
    12: [AbortedTxn(PID_A, 14, 16, 17)],
}


# --- open transactions and markers --------------------------------------------------------------


def test_first_unstable_offset_follows_the_oldest_open_transaction(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The first unstable offset is the first offset of the oldest open transaction: plain
    records do not open one, a marker closes its producer's, and a marker for a producer with
    nothing open is written but completes nothing."""
    log = new_log(tmp_path, clock)
    a, b = Producer(PID_A), Producer(PID_B)
    assert log.first_unstable_offset is None
    log.append(make_batch(2))  # 0-1
    log.append(Producer(99).batch(2, transactional=False))  # 2-3, idempotent only
    assert log.first_unstable_offset is None
    log.append(a.batch(3))  # 4-6
    assert log.first_unstable_offset == 4
    log.append(b.batch(1))  # 7
    log.append(a.batch(1))  # 8
    assert log.first_unstable_offset == 4
    assert dict(log.producer_state.ongoing) == {PID_A: 4, PID_B: 7}
    assert log.append_marker(PID_A, 0, True, COORDINATOR_EPOCH) == CompletedTxn(PID_A, 4, 9,
                                                                                False)
    assert log.first_unstable_offset == 7
    log.append(a.batch(1))  # 10: A's next transaction
    assert log.first_unstable_offset == 7
    assert log.append_marker(PID_B, 0, False, COORDINATOR_EPOCH) == CompletedTxn(PID_B, 7, 11,
                                                                                 True)
    assert log.first_unstable_offset == 10
    assert log.append_marker(PID_A, 0, False, COORDINATOR_EPOCH) == CompletedTxn(PID_A, 10, 12,
                                                                                 True)
    assert log.first_unstable_offset is None
    assert log.append_marker(PID_C, 0, True, COORDINATOR_EPOCH) is None  # nothing open: a no-op
    assert log.log_end_offset == 14
    assert all_entries(log) == [AbortedTxn(PID_B, 7, 11, 10), AbortedTxn(PID_A, 10, 12, 13)]


def test_abort_entries_go_to_the_marker_segment_txnindex(
    tmp_path: Path, clock: FakeClock
) -> None:
    """An abort writes one 34-byte Kafka entry (version 0, producer id, first offset, marker
    offset, LSO after the marker) to the .txnindex of the segment holding the marker, even when
    the transaction began segments earlier; commits write none; segments without an abort have
    no .txnindex file."""
    log = new_log(tmp_path, clock)
    a, b = Producer(PID_A), Producer(PID_B)
    log.append(a.batch(2))  # 0-1
    log.roll()
    log.append(b.batch(1))  # 2
    log.roll()
    log.append(make_batch(1))  # 3
    assert log.append_marker(PID_A, 0, False, COORDINATOR_EPOCH) is not None  # 4
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    path = log.dir / "00000000000000000003.txnindex"
    assert sorted(p.name for p in log.dir.glob("*.txnindex")) == [path.name]
    assert path.read_bytes() == ENTRY.pack(0, PID_A, 0, 4, 2)  # B still open: LSO 2
    log.append_marker(PID_B, 0, True, COORDINATOR_EPOCH)  # 5: a commit adds nothing
    assert path.stat().st_size == 34
    log.append(b.batch(1))  # 6
    log.append_marker(PID_B, 0, False, COORDINATOR_EPOCH)  # 7
    assert path.read_bytes() == ENTRY.pack(0, PID_A, 0, 4, 2) + ENTRY.pack(0, PID_B, 6, 7, 8)
    check_consistent(log)


# --- collect_aborted_txns ------------------------------------------------------------------------


def test_collect_aborted_txns_examples(tmp_path: Path, clock: FakeClock) -> None:
    """Hand-checked ranges of the three-segment layout."""
    log = build_layout(tmp_path, clock).log
    assert entries_by_segment(log) == LAYOUT_ENTRIES
    check_consistent(log)
    a0, b, c, a14 = all_entries(log)
    assert log.collect_aborted_txns(0, 3) == [a0]
    # fetch in segment 0: A's entry (LSO 3 < 6) is not conclusive, segment 8 is searched: B's
    # transaction spans [3, 9]
    assert log.collect_aborted_txns(4, 6) == [a0, b]
    assert log.collect_aborted_txns(6, 8) == [b]  # only plain records, inside B's span
    assert log.collect_aborted_txns(10, 12) == [c]
    assert log.collect_aborted_txns(12, 14) == []
    assert log.collect_aborted_txns(12, 16) == [a14]
    assert log.collect_aborted_txns(17, 18) == []
    assert log.collect_aborted_txns(0, 18) == [a0, b, c, a14]


def test_collect_aborted_txns_every_range(tmp_path: Path, clock: FakeClock) -> None:
    """For every [fetch, upper) of the layout: exactly the aborted transactions overlapping it,
    in marker order."""
    log = build_layout(tmp_path, clock).log
    entries = all_entries(log)
    end = log.log_end_offset
    for fetch in range(end + 1):
        for upper in range(fetch + 1, end + 2):
            assert log.collect_aborted_txns(fetch, upper) == overlapping(entries, fetch, upper), (
                fetch, upper)


def test_transaction_index_stops_at_the_lso_rule(tmp_path: Path) -> None:
    """Kafka's TransactionIndex.collectAbortedTxns: the search is complete at the first entry
    whose LSO is at or past the upper bound (no later transaction can start below it), and
    later entries are not looked at; otherwise the caller goes on to the next segment."""
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    first = AbortedTxn(1, 0, 5, 10)
    # not a consistent log (it starts below the LSO of the entry before): shows the early stop
    second = AbortedTxn(2, 3, 12, 13)
    index.append(first)
    index.append(second)
    found: list[AbortedTxn] = []
    assert index.collect(0, 10, found) is True
    assert found == [first]
    found = []
    assert index.collect(0, 11, found) is True
    assert found == [first, second]
    found = []
    assert index.collect(6, 20, found) is False  # keep searching the next segments
    assert found == [second]
    with pytest.raises(ValueError):
        index.append(AbortedTxn(3, 0, 12, 13))  # markers only move forward


# --- durability: reopen, crash, torn tail -------------------------------------------------------


def open_transactions_layout(tmp_path: Path, clock: FakeClock) -> tuple[Log, Producer, Producer]:
    """The three-segment layout, then A and B open again (A's across a roll)."""
    layout = build_layout(tmp_path, clock)
    log = layout.log
    log.append(layout.a.batch(2))  # 18-19
    log.roll()
    log.append(make_batch(1))  # 20
    log.append(layout.b.batch(1))  # 21
    assert dict(log.producer_state.ongoing) == {PID_A: 18, PID_B: 21}
    return log, layout.a, layout.b


def test_clean_reopen_keeps_entries_and_open_transactions(
    tmp_path: Path, clock: FakeClock
) -> None:
    """After a clean close the index entries and the open transactions are as before, and the
    transactions can still be completed."""
    log, _, _ = open_transactions_layout(tmp_path, clock)
    before = entries_by_segment(log)
    log = reopen(log)
    assert entries_by_segment(log) == before == LAYOUT_ENTRIES
    check_consistent(log)
    assert dict(log.producer_state.ongoing) == {PID_A: 18, PID_B: 21}
    assert log.first_unstable_offset == 18
    assert log.append_marker(PID_A, 0, False, COORDINATOR_EPOCH) == CompletedTxn(PID_A, 18, 22,
                                                                                 True)
    assert all_entries(log)[-1] == AbortedTxn(PID_A, 18, 22, 21)
    assert log.first_unstable_offset == 21
    check_consistent(log)


@pytest.mark.parametrize("recovery_point", [0, 10, 12, 14, 20], ids=lambda r: f"rp{r}")
def test_unclean_reopen_rebuilds_the_same_state(
    tmp_path: Path, clock: FakeClock, recovery_point: int
) -> None:
    """After a crash (no final snapshot, recovery from 0, a segment base with its roll snapshot,
    the middle of a segment, the last segment) the entries and open transactions are rebuilt
    exactly, and the log goes on as before."""
    log, a, b = open_transactions_layout(tmp_path, clock)
    before = entries_by_segment(log)
    log = reopen(log, clean=False, recovery_point=recovery_point)
    assert entries_by_segment(log) == before
    check_consistent(log)
    assert dict(log.producer_state.ongoing) == {PID_A: 18, PID_B: 21}
    assert log.first_unstable_offset == 18
    log.append(a.batch(1))  # 22: sequences carry on
    log.append_marker(PID_B, 0, False, COORDINATOR_EPOCH)  # 23
    assert all_entries(log)[-1] == AbortedTxn(PID_B, 21, 23, 18)
    log = reopen(log, clean=False, recovery_point=0)
    assert all_entries(log)[-1] == AbortedTxn(PID_B, 21, 23, 18)
    assert dict(log.producer_state.ongoing) == {PID_A: 18}
    check_consistent(log)


def test_unclean_reopen_from_zero_rebuilds_lost_index_files(
    tmp_path: Path, clock: FakeClock
) -> None:
    """A crash that lost index files (one gone, one cut inside an entry): recovery from offset
    0 rebuilds every entry from the markers."""
    log, _, _ = open_transactions_layout(tmp_path, clock)
    before = entries_by_segment(log)
    log.abandon()
    (log.dir / "00000000000000000000.txnindex").unlink()
    cut = log.dir / "00000000000000000008.txnindex"
    cut.write_bytes(cut.read_bytes()[: ENTRY.size + 20])
    log = Log(log.dir, log.config, clock=clock, had_clean_shutdown=False, recovery_point=0)
    assert entries_by_segment(log) == before
    check_consistent(log)
    assert dict(log.producer_state.ongoing) == {PID_A: 18, PID_B: 21}


def test_torn_txnindex_tail_is_dropped(tmp_path: Path, clock: FakeClock) -> None:
    """A partial entry at the end of a .txnindex (a torn write) is dropped on load; the whole
    entries stay, and the file is whole entries again."""
    log = build_layout(tmp_path, clock).log
    log.close()
    path = log.dir / "00000000000000000008.txnindex"
    whole = path.read_bytes()
    path.write_bytes(whole + ENTRY.pack(0, PID_A, 30, 31, 32)[:17])
    log = Log(log.dir, log.config, clock=clock, had_clean_shutdown=True,
              recovery_point=log.recovery_point)
    assert entries_by_segment(log) == LAYOUT_ENTRIES
    assert path.read_bytes() == whole
    check_consistent(log)


# --- truncation and retention -------------------------------------------------------------------


def test_truncate_to_drops_entries_and_reopens_transactions(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Truncation drops the entries of the markers it removes (and files left empty), and a
    transaction whose marker was removed is open again."""
    layout = build_layout(tmp_path, clock)
    log = layout.log
    log.truncate_to(16)  # A's abort at 16 goes
    assert entries_by_segment(log) == {0: LAYOUT_ENTRIES[0], 8: LAYOUT_ENTRIES[8]}
    assert not (log.dir / "00000000000000000012.txnindex").exists()
    assert dict(log.producer_state.ongoing) == {PID_A: 14}
    check_consistent(log)

    log.truncate_to(10)  # segment 12 goes; C's batch at 10 and its abort at 11 go
    assert [s.base_offset for s in log.segments] == [0, 8]
    assert entries_by_segment(log) == {0: LAYOUT_ENTRIES[0], 8: [AbortedTxn(PID_B, 3, 9, 8)]}
    assert dict(log.producer_state.ongoing) == {PID_C: 8}
    check_consistent(log)

    log.truncate_to(9)  # B's abort goes: B's transaction is open again, from 3
    assert entries_by_segment(log) == {0: LAYOUT_ENTRIES[0]}
    assert not (log.dir / "00000000000000000008.txnindex").exists()
    assert dict(log.producer_state.ongoing) == {PID_B: 3, PID_C: 8}
    assert log.first_unstable_offset == 3
    assert log.append_marker(PID_B, 0, False, COORDINATOR_EPOCH) == CompletedTxn(PID_B, 3, 9, True)
    assert entries_by_segment(log) == {0: LAYOUT_ENTRIES[0], 8: [AbortedTxn(PID_B, 3, 9, 8)]}
    check_consistent(log)


def test_retention_removes_the_txnindex_of_deleted_segments(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Segments deleted by retention.ms take their .txnindex with them; the surviving segment's
    entries still answer fetches."""
    layout = build_layout(tmp_path, clock)
    log = layout.log
    log.update_config(LogConfig(retention_ms=60_000))
    clock.advance(60_001)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 12
    assert sorted(p.name for p in log.dir.glob("*.txnindex")) == ["00000000000000000012.txnindex"]
    assert entries_by_segment(log) == {12: LAYOUT_ENTRIES[12]}
    assert log.collect_aborted_txns(12, 18) == LAYOUT_ENTRIES[12]
    log = reopen(log)
    assert entries_by_segment(log) == {12: LAYOUT_ENTRIES[12]}
    check_consistent(log)


def test_follower_copy_builds_the_same_index(tmp_path: Path, clock: FakeClock) -> None:
    """A follower appending the leader's batches as they are (markers included) ends with the
    same entries and open transactions."""
    leader, _, _ = open_transactions_layout(tmp_path / "leader", clock)
    follower = new_log(tmp_path / "follower", clock)
    offset = 0
    while offset < leader.log_end_offset:
        region = leader.read(offset, 2**31 - 1)
        assert region is not None
        info = follower.append(region.read(), assign_offsets=False)
        offset = info.last_offset + 1
    assert all_entries(follower) == all_entries(leader)
    assert dict(follower.producer_state.ongoing) == dict(leader.producer_state.ongoing)
    check_consistent(follower)


# --- refused writes -----------------------------------------------------------------------------


def test_marker_from_a_fenced_epoch_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    """A marker with an epoch older than the producer's last one raises InvalidProducerEpoch,
    one from an older coordinator epoch TransactionCoordinatorFenced; nothing is written."""
    log = new_log(tmp_path, clock)
    a = Producer(PID_A, epoch=2)
    log.append(a.batch(2))
    log.append_marker(PID_A, 2, True, COORDINATOR_EPOCH)
    log.append(a.batch(1))  # 3: open
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(PID_A, 1, False, COORDINATOR_EPOCH)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(PID_A, 2, False, COORDINATOR_EPOCH - 1)
    assert log.log_end_offset == 4
    assert dict(log.producer_state.ongoing) == {PID_A: 3}
    assert all_entries(log) == []
    # a newer producer epoch (the coordinator bumped it aborting a timed-out transaction) and
    # a newer coordinator epoch are accepted
    assert log.append_marker(PID_A, 3, False, COORDINATOR_EPOCH + 1) == CompletedTxn(PID_A, 3, 4,
                                                                                     True)
    with pytest.raises(InvalidProducerEpochError):
        log.append(a.batch(1))  # epoch 2 is fenced now


@pytest.mark.parametrize("epoch", [0, 1], ids=["same-epoch", "newer-epoch"])
def test_non_transactional_write_during_an_open_transaction_is_refused(
    tmp_path: Path, clock: FakeClock, epoch: int
) -> None:
    """A non-transactional batch from a producer whose transaction is open on the partition is
    INVALID_TXN_STATE (Kafka's ProducerAppendInfo.appendDataBatch, whatever the batch's epoch);
    nothing is written. Once the transaction is closed it is accepted."""
    log = new_log(tmp_path, clock)
    a = Producer(PID_A)
    log.append(a.batch(2))
    with pytest.raises(InvalidTxnStateError):
        log.append(a.batch(1, transactional=False, epoch=epoch, seq=2 if epoch == 0 else 0))
    assert log.log_end_offset == 2
    assert dict(log.producer_state.ongoing) == {PID_A: 0}
    log.append_marker(PID_A, 0, True, COORDINATOR_EPOCH)
    assert log.append(a.batch(1, transactional=False)).first_offset == 3
    assert log.first_unstable_offset is None


# --- producer snapshots of version 1 ------------------------------------------------------------


def snapshot_v1(producers: list[tuple[int, int, int, list[tuple[int, int, int, int, int]]]]
                ) -> bytes:
    """A version 1 producer snapshot (before transactions): (pid, epoch, last timestamp,
    batches of (first seq, last seq, first offset, last offset, max timestamp))."""
    body = bytearray(struct.pack(">i", len(producers)))
    for pid, epoch, last_ts, batches in producers:
        body += struct.pack(">qhqb", pid, epoch, last_ts, len(batches))
        for batch in batches:
            body += struct.pack(">iiqqq", *batch)
    return struct.pack(">hI", 1, crc32c(bytes(body))) + bytes(body)


def test_producer_snapshot_v1_still_loads(tmp_path: Path, clock: FakeClock) -> None:
    """A version 1 snapshot (an older samsa) is loaded, not rebuilt: it restores a producer the
    log cannot replay (its batches are gone), keeps the cached batches for duplicates, and the
    transactional batches after it are replayed into entries and open transactions."""
    log = new_log(tmp_path, clock)
    p, a, b = Producer(42), Producer(PID_A), Producer(PID_B)
    log.append(p.batch(3, transactional=False))  # 0-2
    log.append(a.batch(1))  # 3
    log.append_marker(PID_A, 0, False, COORDINATOR_EPOCH)  # 4
    log.append(b.batch(1))  # 5
    log.abandon()
    for path in [*log.dir.glob("*.snapshot"), *log.dir.glob("*.txnindex")]:
        path.unlink()
    gone_pid = 77  # known only from the snapshot
    (log.dir / f"{3:020d}.snapshot").write_bytes(snapshot_v1([
        (42, 0, BASE_TIME_MS, [(0, 2, 0, 2, BASE_TIME_MS)]),
        (gone_pid, 4, BASE_TIME_MS, []),
    ]))
    log = Log(log.dir, log.config, clock=clock, had_clean_shutdown=False, recovery_point=3)
    assert (log.dir / f"{3:020d}.snapshot").exists()
    entry = log.producer_state.entry(gone_pid)
    assert entry is not None and entry.epoch == 4
    assert all_entries(log) == [AbortedTxn(PID_A, 3, 4, 5)]
    assert dict(log.producer_state.ongoing) == {PID_B: 5}
    retry = log.append(p.batch(3, transactional=False, seq=0))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
    with pytest.raises(InvalidProducerEpochError):
        log.append(Producer(gone_pid, epoch=3).batch(1))


# --- stateful property test ---------------------------------------------------------------------

PIDS = (11, 22, 33)
IDEMPOTENT_PID = 99


@dataclass(frozen=True)
class Event:
    """One batch in the model log: data (``marker`` None) or a marker (commit True/False)."""

    base: int
    last: int
    pid: int
    epoch: int
    transactional: bool
    marker: bool | None = None
    first_seq: int = -1


def replay(events: list[Event]) -> tuple[dict[int, int], list[AbortedTxn]]:
    """The model: open transactions (pid -> first offset) and the aborted entries, each with
    the LSO right after its marker (the oldest other open transaction, else marker + 1)."""
    open_txns: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    for e in events:
        if e.marker is not None:
            first = open_txns.pop(e.pid, None)
            if first is not None and not e.marker:
                lso = min(open_txns.values(), default=e.base + 1)
                aborted.append(AbortedTxn(e.pid, first, e.base, lso))
        elif e.transactional and e.pid not in open_txns:
            open_txns[e.pid] = e.base
    return open_txns, aborted


picks = st.integers(0, 2**32)


class TxnLogMachine(RuleBasedStateMachine):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.dir = directory
        self.clock = FakeClock()
        self.config = LogConfig(segment_bytes=700)
        self.log = Log(directory, self.config, clock=self.clock)
        self.events: list[Event] = []
        self.epochs = dict.fromkeys((*PIDS, IDEMPOTENT_PID), 0)

    @property
    def leo(self) -> int:
        return self.events[-1].last + 1 if self.events else 0

    def next_seq(self, pid: int) -> int:
        """Last sequence + 1 of the producer's batches in its current epoch, else 0."""
        for e in reversed(self.events):
            if e.pid == pid and e.marker is None and e.epoch == self.epochs[pid]:
                return e.first_seq + (e.last - e.base) + 1
        return 0

    def append_data(self, pid: int, count: int, transactional: bool) -> None:
        seq = self.next_seq(pid) if pid >= 0 else -1
        data = make_batch(count, producer_id=pid, producer_epoch=self.epochs.get(pid, -1),
                          base_sequence=seq, transactional=transactional)
        info = self.log.append(data)
        assert not info.duplicate
        assert info.first_offset == self.leo
        self.events.append(Event(self.leo, self.leo + count - 1, pid, self.epochs.get(pid, -1),
                                 transactional, first_seq=seq))

    # --- rules --------------------------------------------------------------------------------

    @rule(pid=st.sampled_from(PIDS), count=st.integers(1, 4))
    def transactional_batch(self, pid: int, count: int) -> None:
        self.append_data(pid, count, True)

    @rule(count=st.integers(1, 3), idempotent=st.booleans())
    def plain_batch(self, count: int, idempotent: bool) -> None:
        self.append_data(IDEMPOTENT_PID if idempotent else -1, count, False)

    @rule(pid=st.sampled_from(PIDS), commit=st.booleans(), bump=st.booleans())
    def end_transaction(self, pid: int, commit: bool, bump: bool) -> None:
        """A commit or abort marker; ``bump`` writes it with the next producer epoch (the
        coordinator aborting or completing with an epoch bump)."""
        if bump:
            self.epochs[pid] += 1
        open_before, _ = replay(self.events)
        done = self.log.append_marker(pid, self.epochs[pid], commit, 0)
        self.events.append(Event(self.leo, self.leo, pid, self.epochs[pid], True, commit))
        if pid in open_before:
            assert done == CompletedTxn(pid, open_before[pid], self.leo - 1, not commit)
        else:
            assert done is None

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def reopen_clean(self) -> None:
        self.log = reopen(self.log)

    @rule(pick=picks)
    def reopen_unclean(self, pick: int) -> None:
        self.log = reopen(self.log, clean=False, recovery_point=pick % (self.leo + 1))

    @precondition(lambda self: bool(self.events))
    @rule(pick=picks)
    def truncate(self, pick: int) -> None:
        """A follower truncating at a batch boundary."""
        cut = self.events[pick % len(self.events)].base
        self.log.truncate_to(cut)
        self.events = [e for e in self.events if e.base < cut]

    @precondition(lambda self: bool(self.events))
    @rule(fetch=picks, length=st.integers(1, 40))
    def collect(self, fetch: int, length: int) -> None:
        fetch %= self.leo + 1
        upper = fetch + length
        _, aborted = replay(self.events)
        assert self.log.collect_aborted_txns(fetch, upper) == overlapping(aborted, fetch, upper)

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        open_txns, aborted = replay(self.events)
        assert self.log.log_end_offset == self.leo
        assert dict(self.log.producer_state.ongoing) == open_txns
        assert self.log.first_unstable_offset == min(open_txns.values(), default=None)
        assert {(t.producer_id, t.first_offset, t.last_offset) for t in all_entries(self.log)} \
            == {(t.producer_id, t.first_offset, t.last_offset) for t in aborted}
        assert all_entries(self.log) == aborted  # in marker order, with their LSOs
        check_consistent(self.log)

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def test_transactions_against_model(tmp_path: Path) -> None:
    """Random interleavings of three producers' transactional batches, plain and idempotent
    batches, commits and aborts (some with an epoch bump), rolls, truncations and clean and
    unclean reopens: the first unstable offset, the open transactions, the aborted entries
    (memory and files) and collect_aborted_txns always match the model."""
    counter = itertools.count()

    def factory() -> TxnLogMachine:
        return TxnLogMachine(tmp_path / f"case-{next(counter)}")

    run_state_machine_as_test(
        factory,
        settings=settings(
            max_examples=60,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )


# --- found in review ----------------------------------------------------------------------------


def test_fetch_gets_only_the_aborted_transactions_its_batches_overlap(
    tmp_path: Path, clock: FakeClock
) -> None:
    """A read_committed fetch of the first batch is told about the aborted transaction that
    batch belongs to, not about every aborted transaction up to the LSO."""
    log = new_log(tmp_path, clock)
    producer = Producer(10)
    for _ in range(50):
        log.append(producer.batch(2))
        log.append_marker(producer.pid, producer.epoch, False, COORDINATOR_EPOCH)
    assert len(all_entries(log)) == 50
    first = log.read(0, 1)  # one batch (KIP-74: the first batch goes out whole)
    assert first is not None
    assert log.offset_after(first) == 2
    assert [t.first_offset for t in log.collect_aborted_txns(0, log.offset_after(first))] == [0]
    whole = log.read(0, 1 << 30)
    assert whole is not None and log.offset_after(whole) == log.log_end_offset
    assert len(log.collect_aborted_txns(0, log.offset_after(whole))) == 50


def test_open_transaction_cut_by_delete_records_survives_a_crash(
    tmp_path: Path, clock: FakeClock
) -> None:
    """DeleteRecords inside the batch that opened a transaction, then a crash: the replay
    still sees that batch, so the transaction is open after the restart and its abort is
    indexed."""
    log = new_log(tmp_path, clock)
    log.append(make_batch(5))
    producer = Producer(11)
    log.append(producer.batch(10))  # offsets 5..14, opens the transaction
    log.delete_records_before(10)
    log = reopen(log, clean=False, recovery_point=0)
    assert log.first_unstable_offset == 5
    log.append_marker(producer.pid, producer.epoch, False, COORDINATOR_EPOCH)
    assert [(t.first_offset, t.last_offset) for t in log.collect_aborted_txns(10, 16)] == [
        (5, 15)
    ]
