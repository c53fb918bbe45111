"""Idempotent-producer state: sequence and epoch rules, duplicates, snapshots, expiry."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from crc32c import crc32c

from samsa.records.batch import Attr, BatchHeader, read_header
from samsa.records.record import RecordInput, encode_batch
from samsa.storage.producer_state import (
    MAX_SEQUENCE,
    DuplicateBatch,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
)

from .conftest import BASE_TIME_MS

PID = 1000


def hdr(
    seq: int,
    count: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    base_offset: int = 0,
    ts: int = BASE_TIME_MS,
    attributes: int = 0,
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset, batch_length=100, leader_epoch=0, magic=2, crc=0,
        attributes=attributes, last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, records_count=count,
    )


class Leader:
    """A stand-in for Log.append: assigns offsets and drives the manager as the Log will."""

    def __init__(self, state: ProducerStateManager, next_offset: int = 0) -> None:
        self.state = state
        self.next_offset = next_offset
        self.log: list[BatchHeader] = []

    def append(self, *headers: BatchHeader) -> DuplicateBatch | None:
        txn = self.state.begin()
        for header in headers:
            duplicate = txn.check(header)
            if duplicate is not None:
                return duplicate
        stamped = []
        for header in headers:
            stamped.append(header._replace(base_offset=self.next_offset))
            self.next_offset = stamped[-1].next_offset
        self.log.extend(stamped)
        txn.commit(stamped)
        return None


@pytest.fixture
def state(tmp_path: Path) -> ProducerStateManager:
    manager = ProducerStateManager(tmp_path)
    assert manager.load(0, 0) == 0
    return manager


@pytest.fixture
def leader(state: ProducerStateManager) -> Leader:
    return Leader(state)


def test_in_sequence_appends(leader: Leader, state: ProducerStateManager) -> None:
    assert leader.append(hdr(0, 3)) is None
    assert leader.append(hdr(3, 2)) is None
    assert leader.append(hdr(5)) is None
    entry = state.entry(PID)
    assert entry is not None
    assert entry.epoch == 0 and entry.last_seq == 5
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches] == [
        (0, 2, 0, 2), (3, 4, 3, 4), (5, 5, 5, 5)
    ]
    assert state.map_end_offset == 6


def test_duplicate_of_each_of_last_five(leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(0, 2, pid=7))  # another producer in between shifts the offsets
    for i in range(7):
        assert leader.append(hdr(i * 2, 2, ts=BASE_TIME_MS + i)) is None
    originals = [h for h in leader.log if h.producer_id == PID][-5:]
    before = dict(state.producers)
    for original in originals:
        retry = hdr(original.base_sequence, 2, ts=original.max_timestamp)
        assert state.check(retry) == DuplicateBatch(
            original.base_offset, original.last_offset, original.max_timestamp
        )
        assert leader.append(retry) == DuplicateBatch(
            original.base_offset, original.last_offset, original.max_timestamp
        )
    assert dict(state.producers) == before
    assert leader.next_offset == 16


def test_duplicate_older_than_last_five_is_out_of_order(leader: Leader) -> None:
    for i in range(6):
        leader.append(hdr(i))
    with pytest.raises(OutOfOrderSequenceError) as info:
        leader.append(hdr(0))
    assert info.value.code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.append(hdr(1)) == DuplicateBatch(1, 1, BASE_TIME_MS)


def test_gap_and_overlap_are_out_of_order(leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(0, 3))
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(4))
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(1, 3))  # overlaps, but not the same range as the original
    assert state.check(hdr(3)) is None


def test_stale_epoch(leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(0, epoch=5))
    with pytest.raises(InvalidProducerEpochError) as info:
        state.check(hdr(1, epoch=4))
    assert info.value.code == 47  # INVALID_PRODUCER_EPOCH
    with pytest.raises(InvalidProducerEpochError):
        state.check(hdr(0, epoch=4))  # even a "duplicate" range from an older epoch


def test_new_epoch_restarts_at_zero(leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(0, 3, epoch=1))
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(3, epoch=2))
    assert leader.append(hdr(0, 2, epoch=2)) is None
    entry = state.entry(PID)
    assert entry is not None and entry.epoch == 2
    assert [(b.first_seq, b.last_seq) for b in entry.batches] == [(0, 1)]  # old epoch dropped
    with pytest.raises(InvalidProducerEpochError):
        state.check(hdr(0, 3, epoch=1))  # a retry from the old epoch is fenced


def test_sequence_wraps_after_int32_max(leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(MAX_SEQUENCE - 1, 2))
    assert state.entry(PID).last_seq == MAX_SEQUENCE  # type: ignore[union-attr]
    assert leader.append(hdr(0, 3)) is None
    # a batch that itself crosses the wrap: last sequence 1
    leader.append(hdr(3, 1))
    leader.append(hdr(MAX_SEQUENCE, 3, pid=9))
    assert state.entry(9).last_seq == 1  # type: ignore[union-attr]
    assert state.check(hdr(2, pid=9)) is None
    assert state.check(hdr(MAX_SEQUENCE, 3, pid=9)) == DuplicateBatch(6, 8, BASE_TIME_MS)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(MAX_SEQUENCE, pid=9))


def test_unknown_producer_accepts_any_sequence(leader: Leader, state: ProducerStateManager) -> None:
    assert state.check(hdr(42, epoch=3)) is None
    leader.append(hdr(42, epoch=3))
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(44, epoch=3))
    assert state.check(hdr(43, epoch=3)) is None


def test_a_log_that_knows_every_producer_wants_a_new_one_at_sequence_zero(
        leader: Leader, state: ProducerStateManager) -> None:
    # its first batches did not arrive (refused by a leader that was not one yet): the ones
    # after them are refused too, so that the client sends them all again
    with pytest.raises(OutOfOrderSequenceError, match="starts at sequence 0, not 3"):
        state.begin(knows_every_producer=True).check(hdr(3))
    assert state.begin(knows_every_producer=True).check(hdr(0, 3)) is None
    assert state.begin(knows_every_producer=False).check(hdr(3)) is None  # as Kafka
    leader.append(hdr(0, 3))
    assert state.begin(knows_every_producer=True).check(hdr(3)) is None  # known: in order


def test_after_an_expiry_an_unknown_producer_goes_on_at_any_sequence(
        tmp_path: Path, leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(0, 5, ts=BASE_TIME_MS))
    assert state.remove_expired(BASE_TIME_MS + 86_400_000) == [PID]
    # an idle producer back after its state expired: its sequence goes on where it was
    assert state.begin(knows_every_producer=True).check(hdr(5)) is None
    state.take_snapshot()
    reopened = ProducerStateManager(tmp_path)
    reopened.load(0, leader.next_offset)
    assert reopened.expired_producers  # kept in the snapshot
    assert reopened.begin(knows_every_producer=True).check(hdr(5)) is None


def test_a_version_2_snapshot_may_have_lost_producers(tmp_path: Path) -> None:
    # version 2 | CRC | count 0: written before the flags, read as "a producer may have expired"
    body = b"\x00\x00\x00\x00"
    (tmp_path / "00000000000000000004.snapshot").write_bytes(
        b"\x00\x02" + crc32c(body).to_bytes(4, "big") + body)
    manager = ProducerStateManager(tmp_path)
    assert manager.load(0, 4) == 4
    assert manager.expired_producers
    assert manager.begin(knows_every_producer=True).check(hdr(9)) is None


def test_headers_from_encoded_batches(state: ProducerStateManager) -> None:
    records = [RecordInput(b"a"), RecordInput(b"b")]
    first = read_header(encode_batch(records, producer_id=PID, producer_epoch=0, base_sequence=0))
    second = read_header(encode_batch(records, producer_id=PID, producer_epoch=0, base_sequence=2))
    assert first.last_sequence == 1
    leader = Leader(state, next_offset=10)
    assert leader.append(first) is None
    assert leader.append(second) is None
    assert leader.append(first) == DuplicateBatch(10, 11, 0)


def test_batches_without_producer_id_only_move_the_end(state: ProducerStateManager) -> None:
    plain = hdr(-1, 4, pid=-1, epoch=-1)
    assert state.check(plain) is None
    Leader(state).append(plain)
    assert state.producers == {} and state.map_end_offset == 4


def test_multi_batch_append_is_atomic(leader: Leader, state: ProducerStateManager) -> None:
    leader.append(hdr(0))
    before = dict(state.producers)
    txn = state.begin()
    assert txn.check(hdr(1, pid=PID)) is None
    assert txn.check(hdr(0, 2, pid=8)) is None
    assert txn.check(hdr(2, pid=PID)) is None  # chained on the batch accepted above
    with pytest.raises(OutOfOrderSequenceError):
        txn.check(hdr(4, pid=PID))
    assert dict(state.producers) == before and state.map_end_offset == 1

    # the same batches without the bad one go through in one append
    assert leader.append(hdr(1), hdr(0, 2, pid=8), hdr(2)) is None
    assert state.entry(PID).last_seq == 2  # type: ignore[union-attr]
    assert state.entry(8).batches[0].first_offset == 2  # type: ignore[union-attr]
    assert state.map_end_offset == 5


def test_same_batch_twice_in_one_append_is_out_of_order(state: ProducerStateManager) -> None:
    txn = state.begin()
    assert txn.check(hdr(0)) is None
    with pytest.raises(OutOfOrderSequenceError):
        txn.check(hdr(0))


def test_commit_guards(state: ProducerStateManager) -> None:
    txn = state.begin()
    txn.check(hdr(0))
    with pytest.raises(ValueError):
        txn.commit([hdr(1)])
    stale = state.begin()
    stale.check(hdr(0))
    txn.commit([hdr(0)])
    with pytest.raises(RuntimeError):
        txn.commit([hdr(0)])
    with pytest.raises(RuntimeError):
        stale.commit([hdr(0)])


def test_control_batch_moves_the_epoch_only(state: ProducerStateManager) -> None:
    leader = Leader(state)
    leader.append(hdr(0, 2, epoch=0))
    marker = hdr(-1, epoch=1, attributes=Attr.CONTROL | Attr.TRANSACTIONAL)
    state.apply_marker(marker._replace(base_offset=2), commit=False, coordinator_epoch=0)
    entry = state.entry(PID)
    assert entry is not None and entry.epoch == 1 and entry.batches == ()
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(2, epoch=1))
    assert state.check(hdr(0, epoch=1)) is None


def fill(leader: Leader) -> None:
    for i in range(7):
        leader.append(hdr(i, ts=BASE_TIME_MS + i))
    leader.append(hdr(0, 3, pid=2, epoch=4))
    leader.append(hdr(-1, 2, pid=-1, epoch=-1))


def test_snapshot_round_trip(tmp_path: Path, leader: Leader, state: ProducerStateManager) -> None:
    fill(leader)
    path = state.take_snapshot()
    assert path.name == "00000000000000000012.snapshot"
    assert not list(tmp_path.glob("*.tmp"))
    reopened = ProducerStateManager(tmp_path)
    assert reopened.load(0, 12) == 12
    assert dict(reopened.producers) == dict(state.producers)
    assert len(reopened.entry(PID).batches) == 5  # type: ignore[union-attr]
    assert reopened.check(hdr(2)) == DuplicateBatch(2, 2, BASE_TIME_MS + 2)
    assert reopened.check(hdr(7)) is None


def test_load_replays_from_snapshot(tmp_path: Path, leader: Leader,
                                    state: ProducerStateManager) -> None:
    leader.append(hdr(0, 2, pid=3))
    state.take_snapshot()
    fill(leader)
    reopened = ProducerStateManager(tmp_path)
    start = reopened.load(0, leader.next_offset)
    assert start == 2
    for header in leader.log:
        if header.base_offset >= start:
            reopened.replay(header)
    assert dict(reopened.producers) == dict(state.producers)
    assert reopened.map_end_offset == state.map_end_offset


def test_corrupt_snapshot_is_ignored(tmp_path: Path, leader: Leader, state: ProducerStateManager,
                                     caplog: pytest.LogCaptureFixture) -> None:
    leader.append(hdr(0))
    state.take_snapshot()
    leader.append(hdr(1))
    latest = state.take_snapshot()
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF
    latest.write_bytes(bytes(data))
    reopened = ProducerStateManager(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert reopened.load(0, 2) == 1
    assert "CRC-32C mismatch" in caplog.text and latest.name in caplog.text
    assert not latest.exists()
    assert reopened.entry(PID).last_seq == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x00", b"\x00\x07" + b"\x00" * 8])
def test_unreadable_snapshot_means_replay_from_start(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "00000000000000000005.snapshot").write_bytes(content)
    manager = ProducerStateManager(tmp_path)
    assert manager.load(0, 10) == 0
    assert manager.producers == {} and manager.snapshot_offsets() == []


def test_load_picks_latest_at_or_below_log_end(tmp_path: Path, leader: Leader,
                                               state: ProducerStateManager) -> None:
    state.max_snapshots = 10
    for i in range(4):
        leader.append(hdr(i))
        state.take_snapshot()
    assert state.snapshot_offsets() == [1, 2, 3, 4]
    reopened = ProducerStateManager(tmp_path)
    assert reopened.load(0, 2) == 2
    assert reopened.snapshot_offsets() == [1, 2]
    assert reopened.entry(PID).last_seq == 1  # type: ignore[union-attr]
    assert reopened.load(2, 2) == 2
    assert reopened.snapshot_offsets() == [2]  # below the log start offset: useless


def test_no_snapshot_loads_empty_at_log_start(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000003.snapshot.tmp").write_bytes(b"leftover")
    manager = ProducerStateManager(tmp_path)
    assert manager.load(7, 20) == 7
    assert manager.producers == {} and manager.map_end_offset == 7


def test_keeps_last_snapshots_and_retention(leader: Leader, state: ProducerStateManager) -> None:
    for i in range(4):
        leader.append(hdr(i))
        state.take_snapshot()
    assert state.snapshot_offsets() == [3, 4]
    assert state.latest_snapshot_offset() == 4
    state.delete_snapshots_below(4)
    assert state.snapshot_offsets() == [4]
    with pytest.raises(ValueError):
        state.take_snapshot(3)
    state.take_snapshot(6)  # batches without producer ids may follow the last update
    assert state.snapshot_offsets() == [4, 6] and state.map_end_offset == 6


def test_truncate_requires_reload(leader: Leader, state: ProducerStateManager) -> None:
    state.max_snapshots = 10
    for i in range(3):
        leader.append(hdr(i))
        state.take_snapshot()
    state.truncate_to(2)
    assert state.snapshot_offsets() == [1, 2]
    with pytest.raises(RuntimeError):
        state.check(hdr(2))
    assert state.load(0, 2) == 2
    assert state.check(hdr(2)) is None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(hdr(3))
    state.truncate_fully_and_start_at(50)
    assert state.snapshot_offsets() == [] and state.producers == {}
    assert state.map_end_offset == 50 and state.check(hdr(9)) is None


def test_not_loaded(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    with pytest.raises(RuntimeError):
        manager.begin()
    with pytest.raises(RuntimeError):
        manager.update(hdr(0))


def test_remove_expired(leader: Leader, state: ProducerStateManager) -> None:
    hour = 3_600_000
    leader.append(hdr(0, pid=1, ts=BASE_TIME_MS))
    leader.append(hdr(0, pid=2, ts=BASE_TIME_MS + 2 * hour))
    stale = state.begin()
    stale.check(hdr(1, pid=2))
    assert state.remove_expired(BASE_TIME_MS + 24 * hour - 1) == []
    assert state.remove_expired(BASE_TIME_MS + 24 * hour) == [1]
    assert set(state.producers) == {2}
    assert state.check(hdr(5, pid=1)) is None  # forgotten: any sequence again
    with pytest.raises(RuntimeError):
        stale.commit([hdr(1, pid=2)])
    assert state.remove_expired(BASE_TIME_MS + 3 * hour, producer_id_expiration_ms=hour) == [2]
