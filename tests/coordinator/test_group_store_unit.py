"""The group table and committed offsets without the member protocol: ``GroupStore`` and
``OffsetStore`` over an in-memory PartitionWriter. Transactional offsets wait for their marker,
live and on replay; a record outside its group's own partition loses to that partition's."""

from __future__ import annotations

from samsa.coordinator.group_offsets import OffsetStore
from samsa.coordinator.group_store import GroupStore
from samsa.coordinator.records import (
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from samsa.errors import ErrorCode
from samsa.records.control import encode_marker
from samsa.records.record import RecordInput, encode_batch

from .memory_writer import InMemoryPartitionWriter

PARTITIONS = 5


def stores(writer: InMemoryPartitionWriter) -> tuple[GroupStore, OffsetStore]:
    store = GroupStore(writer, PARTITIONS, commit_timeout_s=1.0)
    return store, OffsetStore(store, lambda topic, partition: True, metadata_max_bytes=4096,
                              retention_ms=60_000)


def loaded(writer: InMemoryPartitionWriter, indexes: list[int] | None = None) -> OffsetStore:
    """A new store that read the partitions back (a restart, or a new leader)."""
    store, offsets = stores(writer)
    store.load(writer.hosted() if indexes is None else indexes)
    return offsets


def committed(offsets: OffsetStore, group: str, tp: tuple[str, int]) -> int | None:
    value = offsets.fetch_offsets(group, [tp])[tp]
    return None if value is None else value.offset


def txn_commit(offsets: OffsetStore, pid: int, offset: int) -> dict[tuple[str, int], ErrorCode]:
    return offsets.txn_commit(group_id="g", producer_id=pid, producer_epoch=0, generation=-1,
                              member_id="", instance_id=None, offsets=[("t", 0, offset, -1, None)])


def commit(offsets: OffsetStore, offset: int, group: str = "g") -> None:
    assert offsets.commit(group_id=group, generation=-1, member_id="", instance_id=None,
                          offsets=[("t", 0, offset, -1, None)], version=8) == {
        ("t", 0): ErrorCode.none}


def marker(writer: InMemoryPartitionWriter, pid: int, commit: bool) -> int:
    index = partition_for("g", PARTITIONS)
    writer.append(index, encode_marker(pid, 0, commit, 0, 0), internal=True)
    return index


def test_transactional_offsets_wait_for_their_marker_live_and_on_replay() -> None:
    writer = InMemoryPartitionWriter()
    store, offsets = stores(writer)
    assert txn_commit(offsets, pid=7, offset=5) == {("t", 0): ErrorCode.none}
    assert offsets.unstable_offsets("g") == {("t", 0)}
    assert committed(offsets, "g", ("t", 0)) is None
    assert committed(loaded(writer), "g", ("t", 0)) is None  # no marker yet: still pending
    assert loaded(writer).unstable_offsets("g") == {("t", 0)}

    store.complete_txn_offsets(marker(writer, 7, commit=True), 7, commit=True)
    assert committed(offsets, "g", ("t", 0)) == 5 and offsets.unstable_offsets("g") == set()
    replayed = loaded(writer)
    assert committed(replayed, "g", ("t", 0)) == 5 and replayed.unstable_offsets("g") == set()

    txn_commit(offsets, pid=8, offset=6)
    store.complete_txn_offsets(marker(writer, 8, commit=False), 8, commit=False)
    assert committed(offsets, "g", ("t", 0)) == 5
    assert committed(loaded(writer), "g", ("t", 0)) == 5


def test_a_committed_transaction_does_not_override_a_newer_commit() -> None:
    writer = InMemoryPartitionWriter()
    store, offsets = stores(writer)
    txn_commit(offsets, pid=7, offset=5)
    commit(offsets, 9)  # written after the transaction's offset
    store.complete_txn_offsets(marker(writer, 7, commit=True), 7, commit=True)
    assert committed(offsets, "g", ("t", 0)) == 9
    assert committed(loaded(writer), "g", ("t", 0)) == 9


def test_a_record_outside_its_groups_partition_loses_to_that_partition() -> None:
    writer = InMemoryPartitionWriter()
    home = partition_for("g", PARTITIONS)
    foreign = (home + 1) % PARTITIONS

    def write(index: int, partition: int, offset: int) -> None:
        value = OffsetValue(offset, -1, "", 0)
        writer.append(index, encode_batch([RecordInput(
            encode_offset_value(value), encode_offset_key(OffsetKey("g", "t", partition)))]))

    write(foreign, 0, 1)  # what an older placement left there
    write(foreign, 1, 3)  # a key the home partition lacks still counts
    write(home, 0, 2)
    for order in ([foreign, home], [home, foreign]):
        offsets = loaded(writer, order)
        assert committed(offsets, "g", ("t", 0)) == 2, order
        assert committed(offsets, "g", ("t", 1)) == 3, order
