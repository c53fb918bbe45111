"""The group coordinator on its own: an in-memory PartitionWriter, no broker, no socket. Joins,
syncs, rebalances, session expiry, commits, and a coordinator loading what another one wrote
(a restart or a move), and letting its groups go."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from samsa.config import BrokerConfig
from samsa.coordinator.group import GroupState
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.records import partition_for
from samsa.errors import ErrorCode

from .memory_writer import InMemoryPartitionWriter

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 5,
          "group.min.session.timeout.ms": 100}
PROTOCOLS = [("range", b"meta")]


def coordinator(writer: InMemoryPartitionWriter, exists: bool = True) -> GroupCoordinator:
    return GroupCoordinator(BrokerConfig(CONFIG), writer, lambda topic, partition: exists)


@pytest_asyncio.fixture
async def groups() -> AsyncIterator[tuple[GroupCoordinator, InMemoryPartitionWriter]]:
    writer = InMemoryPartitionWriter()
    gc = coordinator(writer)
    gc.start()
    try:
        yield gc, writer
    finally:
        await gc.stop()


async def join(gc: GroupCoordinator, member_id: str = "", group: str = "g",
               session_ms: int = 10_000, rebalance_ms: int = 10_000) -> dict[str, Any]:
    return await gc.join(group_id=group, member_id=member_id, instance_id=None,
                         protocol_type="consumer", protocols=PROTOCOLS, session_ms=session_ms,
                         rebalance_ms=rebalance_ms, client_id="c", client_host="/127.0.0.1",
                         version=4)


async def join_as_new_member(gc: GroupCoordinator, group: str = "g",
                             session_ms: int = 10_000) -> dict[str, Any]:
    """JoinGroup v4+: the first join gets MEMBER_ID_REQUIRED and a member id to join with."""
    first = await join(gc, group=group, session_ms=session_ms)
    assert first["error_code"] == ErrorCode.member_id_required
    return await join(gc, first["member_id"], group, session_ms)


async def sync(gc: GroupCoordinator, member_id: str, generation: int,
               assignments: list[tuple[str, bytes]] | None = None,
               group: str = "g") -> dict[str, Any]:
    return await gc.sync(group_id=group, generation=generation, member_id=member_id,
                         instance_id=None, protocol_type="consumer", protocol_name="range",
                         assignments=assignments or [])


async def test_a_member_joins_syncs_and_the_group_is_stable(groups: Any) -> None:
    gc, writer = groups
    joined = await join_as_new_member(gc)
    assert joined["error_code"] == ErrorCode.none
    member, generation = joined["member_id"], joined["generation_id"]
    assert joined["leader"] == member and generation == 1
    assert gc.groups["g"].state == GroupState.COMPLETING_REBALANCE
    synced = await sync(gc, member, generation, [(member, b"assignment")])
    assert synced["error_code"] == ErrorCode.none and synced["assignment"] == b"assignment"
    assert gc.groups["g"].state == GroupState.STABLE
    assert gc.heartbeat(group_id="g", generation=generation, member_id=member,
                        instance_id=None) == ErrorCode.none
    assert writer.records() >= 1  # the group's state went to its partition
    assert list(writer.partitions) == [partition_for("g", 5)]


async def test_a_second_member_makes_the_group_rebalance(groups: Any) -> None:
    gc, _ = groups
    first = await join_as_new_member(gc)
    await sync(gc, first["member_id"], first["generation_id"])
    second = asyncio.ensure_future(join_as_new_member(gc))
    # the first member learns of the rebalance from its heartbeat, then joins again
    await asyncio.sleep(0)  # lets the second join start
    for _ in range(100):
        code = gc.heartbeat(group_id="g", generation=first["generation_id"],
                            member_id=first["member_id"], instance_id=None)
        if code == ErrorCode.rebalance_in_progress:
            break
        await asyncio.sleep(0)
    assert code == ErrorCode.rebalance_in_progress
    rejoined, new = await asyncio.gather(join(gc, first["member_id"]), second)
    assert rejoined["generation_id"] == new["generation_id"] == 2
    assert {m["member_id"] for m in rejoined["members"]} == {
        first["member_id"], new["member_id"]}  # the leader gets every member
    assert gc.groups["g"].state == GroupState.COMPLETING_REBALANCE


async def test_a_member_whose_session_lapses_is_removed(groups: Any) -> None:
    gc, _ = groups
    joined = await join_as_new_member(gc, session_ms=200)
    await sync(gc, joined["member_id"], joined["generation_id"])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while gc.groups["g"].members and loop.time() < deadline:
        await asyncio.sleep(0.05)
    group = gc.groups["g"]
    assert not group.members and group.state == GroupState.EMPTY
    assert group.generation == 2  # the rebalance without members ended at once


async def test_commits_are_stored_and_survive_a_new_coordinator(groups: Any) -> None:
    gc, writer = groups
    joined = await join_as_new_member(gc)
    member, generation = joined["member_id"], joined["generation_id"]
    await sync(gc, member, generation)
    results = gc.commit(group_id="g", generation=generation, member_id=member,
                        instance_id=None, offsets=[("t", 0, 42, 3, "meta"), ("t", 1, 7, 3, None)],
                        version=8)
    assert results == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.none}
    assert await gc.wait_replicated("g") is None
    # another coordinator (a restart, or the partition's new leader) reads the same partition
    other = coordinator(writer)
    other.start()
    try:
        stored = other.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
        assert stored[("t", 0)] is not None and stored[("t", 0)].offset == 42
        assert stored[("t", 0)].metadata == "meta" and stored[("t", 0)].leader_epoch == 3
        assert stored[("t", 1)] is not None and stored[("t", 1)].offset == 7
        assert stored[("t", 2)] is None
        loaded = other.groups["g"]
        assert loaded.state == GroupState.STABLE and member in loaded.members
        assert loaded.generation == generation
    finally:
        await other.stop()


async def test_commits_for_partitions_the_cluster_lacks_are_refused() -> None:
    writer = InMemoryPartitionWriter()
    gc = coordinator(writer, exists=False)
    gc.start()
    try:
        results = gc.commit(group_id="solo", generation=-1, member_id="", instance_id=None,
                            offsets=[("gone", 0, 1, -1, None)], version=8)
        assert results == {("gone", 0): ErrorCode.unknown_topic_or_partition}
        assert writer.records() == 0
    finally:
        await gc.stop()


async def test_a_coordinator_refuses_groups_it_does_not_own(groups: Any) -> None:
    gc, writer = groups
    writer.owned = set()  # another broker leads every __consumer_offsets partition
    assert (await join(gc))["error_code"] == ErrorCode.not_coordinator
    assert gc.heartbeat(group_id="g", generation=1, member_id="m",
                        instance_id=None) == ErrorCode.not_coordinator
    assert gc.commit(group_id="g", generation=-1, member_id="", instance_id=None,
                     offsets=[("t", 0, 1, -1, None)], version=8) == {
        ("t", 0): ErrorCode.not_coordinator}


async def test_a_slow_replication_is_reported_to_the_client(groups: Any) -> None:
    gc, writer = groups
    writer.replication_error = ErrorCode.coordinator_not_available
    assert await gc.wait_replicated("g") == ErrorCode.coordinator_not_available


async def until_blocked(task: asyncio.Future[Any], writer: InMemoryPartitionWriter,
                        waiters: int = 1) -> None:
    """Run the loop until ``task`` is done or ``waiters`` wait_replicated calls wait."""
    for _ in range(1000):
        if task.done() or writer.waiting >= waiters:
            return
        await asyncio.sleep(0)


async def test_the_leaders_sync_answers_once_the_group_is_replicated(groups: Any) -> None:
    """As Kafka's: the assignment is appended to the group's __consumer_offsets partition and
    SyncGroup answers (the leader and the members waiting) only once the ISR has it; until
    then the group stays CompletingRebalance."""
    gc, writer = groups
    first = await join_as_new_member(gc)
    await sync(gc, first["member_id"], first["generation_id"])
    second = asyncio.ensure_future(join_as_new_member(gc))
    for _ in range(1000):
        if gc.groups["g"].state == GroupState.PREPARING_REBALANCE:
            break
        await asyncio.sleep(0)
    leader, follower = await asyncio.gather(join(gc, first["member_id"]), second)
    generation = leader["generation_id"]
    writer.replicated = asyncio.Event()
    records = writer.records()
    follower_sync = asyncio.ensure_future(sync(gc, follower["member_id"], generation))
    leader_sync = asyncio.ensure_future(sync(gc, leader["member_id"], generation, [
        (leader["member_id"], b"a"), (follower["member_id"], b"b")]))
    await until_blocked(leader_sync, writer)
    assert not leader_sync.done(), "SyncGroup answered before the group record was replicated"
    assert not follower_sync.done()
    assert writer.records() == records + 1  # the group record with its assignment
    assert gc.groups["g"].state == GroupState.COMPLETING_REBALANCE
    writer.replicated.set()
    assert (await leader_sync)["assignment"] == b"a"
    assert (await follower_sync)["assignment"] == b"b"
    assert gc.groups["g"].state == GroupState.STABLE


async def test_a_group_record_not_replicated_fails_the_sync_and_rebalances(
        groups: Any) -> None:
    """The append did not reach the ISR in offsets.commit.timeout.ms: every member waiting in
    SyncGroup gets the error and no assignment, and the group rebalances (Kafka's
    resetAndPropagateAssignmentError, then maybePrepareRebalance)."""
    gc, writer = groups
    joined = await join_as_new_member(gc)
    writer.replication_error = ErrorCode.coordinator_not_available
    synced = await sync(gc, joined["member_id"], joined["generation_id"],
                        [(joined["member_id"], b"a")])
    assert synced["error_code"] == ErrorCode.coordinator_not_available
    assert synced["assignment"] == b""
    group = gc.groups["g"]
    assert group.state == GroupState.PREPARING_REBALANCE
    assert group.members[joined["member_id"]].assignment == b""


async def test_load_and_unload_follow_the_partition(groups: Any) -> None:
    gc, writer = groups
    joined = await join_as_new_member(gc)
    await sync(gc, joined["member_id"], joined["generation_id"])
    gc.commit(group_id="g", generation=joined["generation_id"], member_id=joined["member_id"],
              instance_id=None, offsets=[("t", 0, 5, -1, None)], version=8)
    index = partition_for("g", 5)
    other = coordinator(writer)  # a broker that hosts nothing yet: starts empty
    writer_view = writer.partitions
    writer.partitions = {}
    other.start()
    writer.partitions = writer_view
    try:
        assert "g" not in other.groups
        other.load_partition(index)  # it became the partition's leader
        assert other.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 5  # type: ignore[union-attr]
        other.unload_partition(index)  # and lost it again
        assert "g" not in other.groups
    finally:
        await other.stop()


async def test_a_joining_member_is_told_when_the_coordinator_moves(groups: Any) -> None:
    gc, _ = groups
    first = await join_as_new_member(gc)
    await sync(gc, first["member_id"], first["generation_id"])
    waiting = asyncio.ensure_future(join_as_new_member(gc))  # waits for the first to rejoin
    for _ in range(100):
        if gc.groups["g"].state == GroupState.PREPARING_REBALANCE:
            break
        await asyncio.sleep(0)
    gc.unload_partition(partition_for("g", 5))
    answer = await asyncio.wait_for(waiting, 10)
    assert answer["error_code"] == ErrorCode.not_coordinator
    assert "g" not in gc.groups
