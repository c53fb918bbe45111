"""The controller's leader and ISR decisions (samsa/zk/leader_election.py): Kafka's rules
for new partitions, lost brokers (clean and unclean), brokers coming back, preferred leaders
and a leader's own ISR changes; plus a Hypothesis check that a clean election never picks a
leader outside the last ISR."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from samsa.zk.leader_election import (
    initial_state,
    isr_change,
    on_broker_back,
    on_brokers_lost,
    preferred_leader,
)
from samsa.zk.zk_data import NO_LEADER, PartitionState

REPLICAS = (1, 2, 3)


def test_new_partition_is_led_by_the_first_live_replica() -> None:
    assert initial_state(REPLICAS, {1, 2, 3}, 4) == PartitionState(1, 0, (1, 2, 3), 4)
    assert initial_state(REPLICAS, {2, 3}, 4) == PartitionState(2, 0, (2, 3), 4)
    assert initial_state(REPLICAS, set(), 4) == PartitionState(NO_LEADER, 0, (), 4)


def test_lost_follower_leaves_the_isr_and_the_epoch_moves() -> None:
    state = PartitionState(1, 3, (1, 2, 3), 1)
    assert on_brokers_lost(state, REPLICAS, {1, 2}, 2) == PartitionState(1, 4, (1, 2), 2)
    assert on_brokers_lost(state, REPLICAS, {1, 2, 3}, 2) is None


def test_lost_leader_is_replaced_from_the_isr_in_assignment_order() -> None:
    state = PartitionState(1, 3, (1, 3, 2), 1)
    assert on_brokers_lost(state, REPLICAS, {2, 3}, 2) == PartitionState(2, 4, (3, 2), 2)
    lagging = PartitionState(1, 3, (1, 3), 1)  # 2 is alive but out of sync
    assert on_brokers_lost(lagging, REPLICAS, {2, 3}, 2) == PartitionState(3, 4, (3,), 2)


def test_no_live_isr_goes_offline_unless_unclean() -> None:
    state = PartitionState(1, 3, (1,), 1)
    offline = on_brokers_lost(state, REPLICAS, {2, 3}, 2)
    assert offline == PartitionState(NO_LEADER, 4, (1,), 2)
    assert on_brokers_lost(offline, REPLICAS, {2, 3}, 2) is None  # stays offline
    assert on_brokers_lost(state, REPLICAS, {2, 3}, 2, unclean=True) == PartitionState(
        2, 4, (2,), 2)
    # the last in-sync replica returns: it leads again
    assert on_broker_back(offline, REPLICAS, 1, 3) == PartitionState(1, 5, (1,), 3)
    assert on_broker_back(offline, REPLICAS, 2, 3) is None  # not in sync: no
    assert on_broker_back(state, REPLICAS, 1, 3) is None  # not offline: nothing to do


def test_preferred_leader_election() -> None:
    state = PartitionState(2, 5, (2, 1, 3), 1)
    assert preferred_leader(state, REPLICAS, {1, 2, 3}, 2) == PartitionState(1, 6, (2, 1, 3), 2)
    assert preferred_leader(state, REPLICAS, {2, 3}, 2) is None  # the preferred one is down
    out_of_sync = PartitionState(2, 5, (2, 3), 1)
    assert preferred_leader(out_of_sync, REPLICAS, {1, 2, 3}, 2) is None
    assert preferred_leader(PartitionState(1, 5, (1,), 1), REPLICAS, {1}, 2) is None


def test_a_leaders_isr_change_keeps_its_epoch() -> None:
    state = PartitionState(2, 5, (2, 1, 3), 7)
    assert isr_change(state, {2, 3}) == PartitionState(2, 5, (2, 3), 7)
    assert isr_change(state, {1, 2, 3}) is None


@given(
    isr=st.sets(st.sampled_from(REPLICAS), min_size=1),
    live=st.sets(st.sampled_from(REPLICAS)),
    leader=st.sampled_from(REPLICAS),
)
def test_clean_election_never_leaves_the_isr(isr: set[int], live: set[int], leader: int) -> None:
    isr = isr | {leader}
    state = PartitionState(leader, 0, tuple(sorted(isr)), 1)
    new = on_brokers_lost(state, REPLICAS, live, 2)
    result = new or state
    if result.leader != NO_LEADER:
        assert result.leader in isr and result.leader in live
        assert set(result.isr) <= isr & live
    else:
        assert not isr & live
    if new is not None:
        assert new.leader_epoch == state.leader_epoch + 1
