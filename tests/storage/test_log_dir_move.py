"""A log moved to another log directory, step by step as the broker's mover does it
(``plan_copy``, ``copy_log``, the batches appended since copied as a follower appends them,
``LogManager.replace_current_with_future``), on real files: the copy holds the same batches,
log start offset, leader epochs, idempotent producers and aborted transactions, and so does the
log reopened from the new directory; what makes a copy stale is counted (``Log.rewrites``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from samsa.cluster.log_dir_mover import LogDirMover
from samsa.config import BrokerConfig, LogConfig
from samsa.errors import KafkaStorageError
from samsa.records.record import RecordInput, encode_batch
from samsa.storage import Log, LogManager
from samsa.storage.checkpoint import LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, read_offsets
from samsa.storage.future import copy_log, plan_copy

T0 = 1_700_000_000_000
TP = ("t", 0)
PID = 7


def clock() -> int:
    return T0 + 1000


def manager(a: Path, b: Path) -> LogManager:
    found = LogManager(BrokerConfig({"log.dirs": f"{a},{b}"}), clock=clock)
    found.startup()
    return found


class Producer:
    """An idempotent producer's batches, sequence after sequence."""

    def __init__(self) -> None:
        self.sequence = 0

    def batch(self, i: int, transactional: bool = False) -> bytes:
        records = _records(i)
        made = encode_batch(records, producer_id=PID, producer_epoch=0,
                            base_sequence=self.sequence, transactional=transactional)
        self.sequence += len(records)
        return made


def _records(i: int) -> list[RecordInput]:
    return [RecordInput(f"v{i}.{j}".encode() * 8, f"k{i}".encode(), T0 + i) for j in range(3)]


def batch(i: int) -> bytes:
    return encode_batch(_records(i))


def state(log: Log) -> tuple[object, ...]:
    """Everything of a log that a move must keep."""
    return (log.read_batches(log.log_start_offset), log.log_start_offset, log.log_end_offset,
            list(log.epochs.entries), dict(log.producer_state.producers),
            log.first_unstable_offset, log.collect_aborted_txns(0, log.log_end_offset))


def test_a_moved_log_keeps_everything(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = manager(a, b)
    log = logs.get_or_create(*TP, LogConfig(segment_bytes=4096, index_interval_bytes=256))
    source_dir = log.parent_dir
    dest = b if source_dir == a else a
    producer = Producer()
    for i in range(60):
        log.append(producer.batch(i) if i % 3 == 0 else batch(i), leader_epoch=1)
    log.append(producer.batch(60, transactional=True), leader_epoch=1)
    log.append_marker(PID, 0, False, 0, leader_epoch=1)  # aborted: in a .txnindex
    assert len(log.segments) > 3

    future = logs.create_future(TP, dest)
    assert future.path.name.startswith("t-0.") and future.path.name.endswith("-future")
    assert logs.futures[TP] is future
    copied = copy_log(plan_copy(log), future, clock=clock, failures=logs.failures,
                      stop=threading.Event())
    assert future.log is copied and copied.log_end_offset == log.log_end_offset
    assert future.size == log.size

    # meanwhile: more batches, an open transaction, a new leader epoch, DeleteRecords
    for i in range(61, 90):
        log.append(producer.batch(i), leader_epoch=2)
    log.append(producer.batch(90, transactional=True), leader_epoch=2)
    log.delete_records_before(7)
    rewrites = log.rewrites
    LogDirMover.copy_batches(log, copied, 1 << 30)  # as the mover catches up
    assert log.rewrites == rewrites
    before = state(log)

    old = logs.replace_current_with_future(TP)
    assert old is log and old.deleted and old.dir.name.endswith("-delete")
    new = logs.get(*TP)
    assert new is not None and new.dir == dest / "t-0" and logs.dir_of(TP) == dest
    assert not logs.futures
    assert state(new) == before
    old.delete()
    assert sorted(p.name for p in source_dir.iterdir() if p.is_dir()) == []
    for name in (RECOVERY_POINT_FILE, LOG_START_OFFSET_FILE):
        assert TP in read_offsets(dest / name) and TP not in read_offsets(source_dir / name)
    assert read_offsets(dest / LOG_START_OFFSET_FILE)[TP] == 7

    # it goes on taking appends where it is now, and reopens from there as it was
    new.append(producer.batch(91, transactional=True), leader_epoch=2)
    new.append_marker(PID, 0, True, 0, leader_epoch=2)
    after = state(new)
    logs.shutdown()
    again = manager(a, b)
    reopened = again.get(*TP)
    assert reopened is not None and again.dir_of(TP) == dest
    assert state(reopened) == after
    again.shutdown()


def test_truncations_and_cleaner_swaps_make_a_copy_stale(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=4096))
    for i in range(40):
        log.append(batch(i))
    counted = log.rewrites
    log.truncate_to(log.log_end_offset)  # nothing cut
    assert log.rewrites == counted
    log.truncate_to(30)
    assert log.rewrites == counted + 1
    log.truncate_fully_and_start_at(100)
    assert log.rewrites == counted + 2


def test_io_on_a_replaced_log_whose_files_moved_away_takes_no_directory_offline(
        tmp_path: Path) -> None:
    """The swap marks the replaced log before it renames its directory, so work already under
    way on another thread (a flush of rolled segments) that then finds its files gone fails
    quietly instead of taking the log directory offline; a live log's failure still does."""
    m = manager(tmp_path / "a", tmp_path / "b")
    replaced, live = m.get_or_create("t", 0), m.get_or_create("t", 1)
    for log_ in (replaced, live):
        log_.append(encode_batch(_records(0)))
    replaced.deleted = True  # as replace_current_with_future marks it
    replaced.dir.rename(replaced.dir.with_name("t-0.moved-delete"))
    with pytest.raises(KafkaStorageError):
        replaced.roll()
    assert not m.failures.offline_dirs
    live.dir.rename(live.dir.with_name("t-1.gone"))
    with pytest.raises(KafkaStorageError):
        live.roll()
    assert list(m.failures.offline_dirs) == [live.parent_dir]
