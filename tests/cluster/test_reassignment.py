"""The reassignment steps (reassignment.py) and the controlled shutdown decision, as pure
functions: Kafka's KIP-455 replica sets and its checks of a requested replica list."""

from __future__ import annotations

from samsa.cluster.placement import check_target
from samsa.zk import reassignment
from samsa.zk.leader_election import on_controlled_shutdown
from samsa.zk.zk_data import PartitionState, ReplicaAssignment


def test_a_move_adds_the_target_first_and_keeps_the_original_until_it_is_done() -> None:
    moving = reassignment.start(ReplicaAssignment((1, 2, 3)), (4, 2, 5))
    assert moving == ReplicaAssignment((4, 2, 5, 1, 3), adding_replicas=(4, 5),
                                       removing_replicas=(1, 3))
    assert reassignment.in_progress(moving)
    assert reassignment.original_replicas(moving) == (2, 1, 3)
    assert reassignment.target_replicas(moving) == (4, 2, 5)


def test_moving_to_the_original_replicas_is_no_move() -> None:
    moving = reassignment.start(ReplicaAssignment((1, 2)), (3, 2))
    # a cancellation: the target is the original replica set
    back = reassignment.start(moving, reassignment.original_replicas(moving))
    assert back == ReplicaAssignment((2, 1))
    assert not reassignment.in_progress(back)


def test_finishing_needs_the_target_in_sync_and_keeps_a_staying_leader() -> None:
    state = PartitionState(1, 4, (1, 2, 3), 7)
    assert not reassignment.caught_up(PartitionState(1, 4, (1, 2), 7), (1, 3))
    assert reassignment.caught_up(state, (1, 3))
    assert reassignment.finish(state, (3, 1), {1, 2, 3}, 8) == PartitionState(1, 5, (1, 3), 8)


def test_finishing_moves_leadership_when_the_leader_leaves() -> None:
    state = PartitionState(1, 4, (1, 2, 3), 7)
    assert reassignment.finish(state, (3, 2), {1, 2, 3}, 8) == PartitionState(3, 5, (2, 3), 8)
    # no live target replica in sync: no state yet
    assert reassignment.finish(PartitionState(1, 4, (1,), 7), (2, 3), {1, 2, 3}, 8) is None


def test_requested_replica_lists_are_checked_as_kafka_checks_them() -> None:
    assert check_target((1, 2), {1, 2, 3}) is None
    assert check_target((), {1}) == (
        "Empty replica list specified in partition reassignment.")
    assert "Duplicate replica ids" in (check_target((1, 1), {1}) or "")
    assert "not alive" in (check_target((1, 9), {1, 2}) or "")


def test_controlled_shutdown_moves_leadership_to_a_live_in_sync_replica() -> None:
    state = PartitionState(1, 3, (1, 2, 3), 5)
    assert on_controlled_shutdown(state, (1, 2, 3), 1, {2, 3}, 6) == PartitionState(
        2, 4, (2, 3), 6)
    # a follower leaves the ISR; the leader stays
    assert on_controlled_shutdown(state, (1, 2, 3), 3, {1, 2}, 6) == PartitionState(
        1, 4, (1, 2), 6)
    # nobody else in sync: the partition stays with the stopping broker
    assert on_controlled_shutdown(PartitionState(1, 3, (1,), 5), (1, 2), 1, {2}, 6) is None
    # not a replica in the ISR: nothing to do
    assert on_controlled_shutdown(PartitionState(1, 3, (1, 2), 5), (1, 2, 3), 3, {1, 2},
                                  6) is None
