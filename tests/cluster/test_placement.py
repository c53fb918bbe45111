"""Replica placement (Kafka's AdminUtils.assignReplicasToBrokers): the exact assignments of
Kafka's own tests (AdminTest / AdminRackAwareTest.testReplicaAssignment,
testGetRackAlternatedBrokerListAndAssignReplicasToBrokers, AddPartitionsTest), the
distribution checks of AdminRackAwareTest, properties over random clusters, and Kafka's errors.

Expectations marked "derived" are not in Kafka's tests: they were computed with the algorithm
(and agree with a transcription of Kafka's Java AdminUtils run on the JVM)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.cluster.placement import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas,
    rack_alternated_broker_list,
    replica_index,
)
from samsa.errors import ErrorCode, KafkaError

Assignment = dict[int, list[int]]


class Draws(random.Random):
    """An rng that answers randrange with the given values, in order (Kafka's RAND.nextInt)."""

    def __init__(self, *values: int) -> None:
        super().__init__(0)
        self.values = list(values)
        self.bounds: list[int] = []

    def randrange(self, n: int, *args: object, **kwargs: object) -> int:  # type: ignore[override]
        assert not args and not kwargs
        self.bounds.append(n)
        value = self.values.pop(0)
        assert 0 <= value < n
        return value


def unaware(n: int) -> dict[int, str | None]:
    return {broker: None for broker in range(n)}


def leader_counts(assignment: Assignment) -> Counter[int]:
    return Counter(replicas[0] for replicas in assignment.values())


def replica_counts(assignment: Assignment) -> Counter[int]:
    return Counter(broker for replicas in assignment.values() for broker in replicas)


def check_replica_distribution(assignment: Assignment, racks: Mapping[int, str],
                               partitions: int, replication_factor: int, *,
                               verify_rack_aware: bool = True,
                               verify_leader_distribution: bool = True,
                               verify_replicas_distribution: bool = True) -> None:
    """Kafka's RackAwareTest.checkReplicaDistribution."""
    assert len(assignment) == partitions
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas) == replication_factor
    brokers = len(racks)
    if verify_rack_aware:
        for replicas in assignment.values():
            assert len({racks[b] for b in replicas}) == replication_factor
    if verify_leader_distribution:
        leaders = leader_counts(assignment)
        assert [leaders[b] for b in racks] == [partitions // brokers] * brokers
    if verify_replicas_distribution:
        counts = replica_counts(assignment)
        per_broker = partitions * replication_factor // brokers
        assert [counts[b] for b in racks] == [per_broker] * brokers


# --- Kafka's exact assignments -------------------------------------------------------------------


KAFKA_UNAWARE_5_BROKERS = {
    0: [0, 1, 2],
    1: [1, 2, 3],
    2: [2, 3, 4],
    3: [3, 4, 0],
    4: [4, 0, 1],
    5: [0, 2, 3],
    6: [1, 3, 4],
    7: [2, 4, 0],
    8: [3, 0, 1],
    9: [4, 1, 2],
}


def test_replica_assignment_kafka() -> None:
    """AdminTest / AdminRackAwareTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3,
    fixed start index 0 (also the table in AdminUtils' Javadoc)."""
    brokers = [BrokerMetadata(b) for b in range(5)]
    assert assign_replicas(brokers, 10, 3, fixed_start_index=0) == KAFKA_UNAWARE_5_BROKERS
    assert assign_replicas(unaware(5), 10, 3, fixed_start_index=0) == KAFKA_UNAWARE_5_BROKERS
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 6)


def test_rack_alternated_broker_list_kafka() -> None:
    """AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers."""
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in racks.items() if b != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]
    assert assign_replicas(racks, 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_alternated_broker_list_javadoc() -> None:
    """The example of getRackAlternatedBrokerList's Javadoc; the order of the input is
    irrelevant (racks sorted, brokers of a rack by id)."""
    racks = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    reversed_racks = dict(reversed(list(racks.items())))
    assert rack_alternated_broker_list(reversed_racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    # a rack that runs out is skipped
    assert rack_alternated_broker_list({5: "b", 1: "a", 2: "a", 3: "a", 9: "c"}) == [
        1, 5, 9, 2, 3]


def test_rack_order_is_java_string_order() -> None:
    """Racks sort as Java Strings (UTF-16 code units): U+1F600 (surrogates D83D DE00) comes
    before U+FF21 in Java, after it by code point."""
    racks = {0: "\uff21", 1: "\U0001f600", 2: "\uff21", 3: "\U0001f600"}
    assert rack_alternated_broker_list(racks) == [1, 0, 3, 2]


def test_add_partitions_kafka() -> None:
    """AddPartitionsTest (ZooKeeper mode): AdminZkClient.addPartitions starts at the index of
    partition 0's leader with the existing partition count as start partition id.
    testReplicaPlacementAllServers: 4 brokers, [2, 3, 0, 1] grows to 7 partitions (Kafka checks
    leaders and replica sets; the exact orders are derived)."""
    assignment = assign_replicas(unaware(4), 6, 4, fixed_start_index=2, start_partition_id=1)
    expected_leaders_and_sets = {
        1: (3, {3, 2, 0, 1}),
        2: (0, {0, 3, 1, 2}),
        3: (1, {1, 0, 2, 3}),
        4: (2, {2, 3, 0, 1}),
        5: (3, {3, 0, 1, 2}),
        6: (0, {0, 1, 2, 3}),
    }
    assert {p: (r[0], set(r)) for p, r in assignment.items()} == expected_leaders_and_sets
    assert assignment == {  # derived
        1: [3, 2, 0, 1],
        2: [0, 3, 1, 2],
        3: [1, 0, 2, 3],
        4: [2, 3, 0, 1],
        5: [3, 0, 1, 2],
        6: [0, 1, 2, 3],
    }
    # testReplicaPlacementPartialServers: [1, 2] grows to 3 partitions
    partial = assign_replicas(unaware(4), 2, 2, fixed_start_index=1, start_partition_id=1)
    assert {p: (r[0], set(r)) for p, r in partial.items()} == {1: (2, {0, 2}), 2: (3, {1, 3})}


# --- AdminRackAwareTest's distribution checks ----------------------------------------------------


SIX_BROKERS_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def test_assignment_with_rack_aware() -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 3, fixed_start_index=2,
                                 start_partition_id=0)
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 3)
    assert assignment == {  # derived
        0: [3, 2, 0], 1: [5, 4, 1], 2: [2, 0, 3], 3: [4, 1, 5], 4: [0, 3, 2], 5: [1, 5, 4],
    }


@pytest.mark.parametrize("seed", range(50))
def test_assignment_with_rack_aware_with_random_start_index(seed: int) -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 3, rng=random.Random(seed))
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 6, 3)


def test_assignment_with_rack_aware_with_uneven_replicas() -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 13, 3, fixed_start_index=0,
                                 start_partition_id=0)
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 13, 3,
                               verify_leader_distribution=False,
                               verify_replicas_distribution=False)
    assert assignment == {  # derived
        0: [0, 1, 3], 1: [1, 3, 5], 2: [3, 5, 2], 3: [5, 2, 4], 4: [2, 4, 0], 5: [4, 0, 1],
        6: [0, 2, 4], 7: [1, 4, 0], 8: [3, 0, 1], 9: [5, 1, 3], 10: [2, 3, 5], 11: [4, 5, 2],
        12: [0, 3, 2],
    }


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_rack_aware_with_uneven_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas(racks, 12, 3, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 12, 3, verify_replicas_distribution=False)


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_2_replicas_rack_aware(seed: int) -> None:
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 12, 2, rng=random.Random(seed))
    check_replica_distribution(assignment, SIX_BROKERS_THREE_RACKS, 12, 2)


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_expansion(seed: int) -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas(racks, 12, 2, start_partition_id=12, rng=random.Random(seed))
    assert sorted(assignment) == list(range(12, 24))
    check_replica_distribution(assignment, racks, 12, 2)


def test_rack_aware_expansion_derived() -> None:
    """Random draws 3 (start index) and 1 (shift); derived."""
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assert assign_replicas(racks, 12, 2, start_partition_id=12, rng=Draws(3, 1)) == {
        12: [11, 10], 13: [8, 6], 14: [10, 7], 15: [6, 9], 16: [7, 11], 17: [9, 8],
        18: [11, 9], 19: [8, 11], 20: [10, 8], 21: [6, 10], 22: [7, 6], 23: [9, 7],
    }


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_2_replicas_rack_aware_with_6_partitions(seed: int) -> None:
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas(racks, 6, 2, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 6, 2)


@pytest.mark.parametrize("seed", range(20))
def test_assignment_with_2_replicas_rack_aware_with_3_brokers(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 4: "rack3"}
    assignment = assign_replicas(racks, 3, 2, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 3, 2)


@pytest.mark.parametrize("seed", range(20))
def test_large_number_partitions_assignment(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
             6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}
    assignment = assign_replicas(racks, 96, 3, rng=random.Random(seed))
    check_replica_distribution(assignment, racks, 96, 3)


@pytest.mark.parametrize("seed", range(20))
def test_more_replicas_than_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(racks, 6, 5, rng=random.Random(seed))
    assert [len(r) for r in assignment.values()] == [5] * 6
    for replicas in assignment.values():
        assert len(set(replicas)) == 5
        assert len({racks[b] for b in replicas}) == 3


@pytest.mark.parametrize("seed", range(20))
def test_less_replicas_than_racks(seed: int) -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(racks, 6, 2, rng=random.Random(seed))
    assert [len(r) for r in assignment.values()] == [2] * 6
    for replicas in assignment.values():
        assert len({racks[b] for b in replicas}) == 2


@pytest.mark.parametrize("seed", range(20))
def test_single_rack(seed: int) -> None:
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas(racks, 6, 3, rng=random.Random(seed))
    assert [len(r) for r in assignment.values()] == [3] * 6
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
    assert leader_counts(assignment) == dict.fromkeys(range(6), 1)


def test_skip_broker_with_replica_already_assigned() -> None:
    """Once every rack has a replica, brokers that already hold one are still skipped."""
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(racks, 6, 4, fixed_start_index=2)
    check_replica_distribution(assignment, racks, 6, 4, verify_rack_aware=False,
                               verify_leader_distribution=False,
                               verify_replicas_distribution=False)
    assert assignment == {  # derived
        0: [2, 0, 1, 3], 1: [3, 1, 2, 4], 2: [4, 2, 1, 3], 3: [0, 1, 2, 3], 4: [1, 4, 2, 3],
        5: [2, 4, 1, 3],
    }


# --- start index, shift and start partition id ---------------------------------------------------


def test_replica_index() -> None:
    assert [replica_index(0, 0, j, 5) for j in range(4)] == [1, 2, 3, 4]
    assert [replica_index(3, 1, j, 5) for j in range(4)] == [0, 1, 2, 4]
    assert [replica_index(4, 7, j, 5) for j in range(4)] == [3, 0, 1, 2]
    for first in range(6):
        for shift in range(12):
            assert first not in {replica_index(first, shift, j, 6) for j in range(5)}


def test_random_draws_start_index_then_shift() -> None:
    """Without a fixed start index the start index is drawn first, then the shift, each in
    [0, brokers) (hand-derived from the algorithm)."""
    rng = Draws(1, 3)
    assert assign_replicas(unaware(5), 2, 3, rng=rng) == {0: [1, 0, 2], 1: [2, 1, 3]}
    assert rng.bounds == [5, 5]
    assert assign_replicas(unaware(5), 2, 3, rng=Draws(3, 1)) == {0: [3, 0, 1], 1: [4, 1, 2]}


@pytest.mark.parametrize("brokers", [unaware(5), SIX_BROKERS_THREE_RACKS])
def test_fixed_start_index_is_start_and_shift(brokers: Mapping[int, str | None]) -> None:
    """A fixed start index k is the same as drawing k for both, and draws nothing."""
    for k in range(len(brokers)):
        rng = Draws()
        fixed = assign_replicas(brokers, 17, 3, fixed_start_index=k, rng=rng)
        assert rng.bounds == []
        assert assign_replicas(brokers, 17, 3, rng=Draws(k, k)) == fixed


def test_rack_aware_draws_over_arranged_list() -> None:
    rng = Draws(0, 0)
    assignment = assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 3, rng=rng)
    assert rng.bounds == [6, 6]
    assert assignment == assign_replicas(SIX_BROKERS_THREE_RACKS, 6, 3, fixed_start_index=0)


@pytest.mark.parametrize("brokers", [unaware(5), unaware(1), SIX_BROKERS_THREE_RACKS,
                                     {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}])
def test_start_partition_id_within_the_first_round(brokers: Mapping[int, str | None]) -> None:
    """Starting at a partition id up to the number of brokers gives what the same call from
    partition 0 gives from that id on (no multiple of the brokers is skipped)."""
    rf = min(3, len(brokers))
    full = assign_replicas(brokers, 23, rf, fixed_start_index=1)
    for start in range(len(brokers) + 1):
        tail = assign_replicas(brokers, 23 - start, rf, fixed_start_index=1,
                               start_partition_id=start)
        assert tail == {p: full[p] for p in range(start, 23)}


def test_start_partition_id_does_not_replay_the_shift() -> None:
    """Past the first round the shift is not advanced for the partitions before the start
    (hand-derived): from id 10 on 5 brokers the shift is 0 + 1 (the multiple 10), where a call
    from id 0 has 0 + 2 (5 and 10) there."""
    assert assign_replicas(unaware(5), 5, 3, fixed_start_index=0, start_partition_id=10) == {
        10: [0, 2, 3], 11: [1, 3, 4], 12: [2, 4, 0], 13: [3, 0, 1], 14: [4, 1, 2]}
    assert assign_replicas(unaware(5), 15, 3, fixed_start_index=0)[10] == [0, 3, 4]


def test_negative_start_partition_id_means_zero() -> None:
    assert assign_replicas(unaware(5), 10, 3, fixed_start_index=0, start_partition_id=-7) == (
        KAFKA_UNAWARE_5_BROKERS)


def test_any_negative_fixed_start_index_draws() -> None:
    rng = Draws(0, 0)
    assert assign_replicas(unaware(5), 10, 3, fixed_start_index=-5, rng=rng) == (
        KAFKA_UNAWARE_5_BROKERS)
    assert rng.bounds == [5, 5]


def test_fixed_start_index_beyond_brokers_wraps() -> None:
    """Kafka takes the start index modulo the brokers (and the shift modulo brokers - 1)."""
    assert assign_replicas(unaware(5), 10, 3, fixed_start_index=20) == (
        assign_replicas(unaware(5), 10, 3, rng=Draws(0, 0)))


def test_seeded_rng_is_reproducible() -> None:
    a = assign_replicas(SIX_BROKERS_THREE_RACKS, 30, 3, rng=random.Random(42))
    b = assign_replicas(SIX_BROKERS_THREE_RACKS, 30, 3, rng=random.Random(42))
    assert a == b
    check_replica_distribution(assign_replicas(SIX_BROKERS_THREE_RACKS, 30, 3),
                               SIX_BROKERS_THREE_RACKS, 30, 3)  # the module's own rng


def test_broker_list_order_is_kept_when_rack_unaware() -> None:
    """Kafka round-robins over the list as given (its callers sort it by id)."""
    assert assign_replicas({7: None, 3: None, 5: None}, 3, 2, fixed_start_index=0) == {
        0: [7, 3], 1: [3, 5], 2: [5, 7]}
    assert assign_replicas([BrokerMetadata(3), BrokerMetadata(5), BrokerMetadata(7)], 3, 2,
                           fixed_start_index=0) == {0: [3, 5], 1: [5, 7], 2: [7, 3]}


def test_rack_aware_ignores_broker_order() -> None:
    racks = dict(reversed(list(SIX_BROKERS_THREE_RACKS.items())))
    assert assign_replicas(racks, 13, 3, fixed_start_index=4) == assign_replicas(
        SIX_BROKERS_THREE_RACKS, 13, 3, fixed_start_index=4)


def test_one_broker() -> None:
    assert assign_replicas(unaware(1), 3, 1) == {0: [0], 1: [0], 2: [0]}
    assert assign_replicas({9: "r"}, 2, 1, start_partition_id=4) == {4: [9], 5: [9]}


def test_replication_factor_equal_to_brokers_uses_every_broker() -> None:
    for brokers in (unaware(4), SIX_BROKERS_THREE_RACKS):
        for replicas in assign_replicas(brokers, 20, len(brokers)).values():
            assert sorted(replicas) == sorted(brokers)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [0, -1, -10])
def test_partitions_must_be_positive(partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError) as info:
        assign_replicas(unaware(3), partitions, 1)
    assert str(info.value) == "Number of partitions must be larger than 0."
    assert info.value.code == ErrorCode.invalid_partitions
    assert isinstance(info.value, KafkaError)


@pytest.mark.parametrize("factor", [0, -1])
def test_replication_factor_must_be_positive(factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas(unaware(3), 3, factor)
    assert str(info.value) == "Replication factor must be larger than 0."
    assert info.value.code == ErrorCode.invalid_replication_factor


@pytest.mark.parametrize(("brokers", "factor"), [
    (unaware(5), 6),
    (unaware(3), 7),
    ({}, 1),
    (SIX_BROKERS_THREE_RACKS, 7),
])
def test_replication_factor_larger_than_brokers(brokers: Mapping[int, str | None],
                                                factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas(brokers, 10, factor)
    assert str(info.value) == (
        f"Replication factor: {factor} larger than available brokers: {len(brokers)}.")
    assert info.value.code == ErrorCode.invalid_replication_factor


@pytest.mark.parametrize("brokers", [
    {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: None},
    [BrokerMetadata(0), BrokerMetadata(1, "r")],
])
def test_some_brokers_without_rack(brokers: object) -> None:
    """AdminRackAwareTest.testAssignReplicasToBrokersWithInvalidParameters."""
    with pytest.raises(AdminOperationError) as info:
        assign_replicas(brokers, 10, 2)  # type: ignore[arg-type]
    assert str(info.value) == (
        "Not all brokers have rack information for replica rack aware assignment.")
    assert info.value.code == ErrorCode.unknown_server_error


def test_errors_in_kafkas_order() -> None:
    """AdminRackAwareTest.testAssignReplicasToBrokersWithInvalidParameters: partitions are
    checked first, then the replication factor, then the racks."""
    mixed = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: None}
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(mixed, 0, 0)
    with pytest.raises(InvalidReplicationFactorError, match="must be larger than 0"):
        assign_replicas(mixed, 10, 0)
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 5"):
        assign_replicas(mixed, 10, 6)
    with pytest.raises(AdminOperationError):
        assign_replicas(mixed, 10, 5)


def test_no_random_draw_before_the_checks() -> None:
    rng = Draws()
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(unaware(2), 1, 3, rng=rng)
    with pytest.raises(AdminOperationError):
        assign_replicas({0: "a", 1: None}, 1, 1, rng=rng)
    assert rng.bounds == []


def test_duplicate_broker_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="Broker 1 is listed more than once"):
        assign_replicas([BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(1)], 1, 1)


# --- properties ----------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[int, str | None], int, int, int, int]:
    """Brokers (rack-unaware or every broker with a rack), partitions, replication factor,
    fixed start index and start partition id."""
    ids = draw(st.lists(st.integers(0, 2000), min_size=1, max_size=14, unique=True))
    if draw(st.booleans()):
        brokers: dict[int, str | None] = dict.fromkeys(sorted(ids))
    else:
        names = draw(st.lists(st.text(min_size=0, max_size=3), min_size=1, max_size=5,
                              unique=True))
        brokers = {b: draw(st.sampled_from(names)) for b in sorted(ids)}
    partitions = draw(st.integers(1, 60))
    factor = draw(st.integers(1, len(brokers)))
    start = draw(st.integers(-1, 30))
    first_partition = draw(st.integers(-1, 100))
    return brokers, partitions, factor, start, first_partition


@settings(max_examples=400, deadline=None)
@given(clusters(), st.randoms(use_true_random=False))
def test_assignment_properties(cluster: tuple[dict[int, str | None], int, int, int, int],
                               rng: random.Random) -> None:
    brokers, partitions, factor, start, first_partition = cluster
    assignment = assign_replicas(brokers, partitions, factor, fixed_start_index=start,
                                 start_partition_id=first_partition, rng=rng)
    first = max(0, first_partition)
    assert list(assignment) == list(range(first, first + partitions))
    for replicas in assignment.values():
        assert len(replicas) == factor
        assert len(set(replicas)) == factor  # distinct
        assert set(replicas) <= set(brokers)
    # leaders are round-robin: no broker leads two partitions more than any other
    leaders = leader_counts(assignment)
    counts = [leaders[b] for b in brokers]
    assert max(counts) - min(counts) <= 1
    if all(rack is None for rack in brokers.values()):
        return
    racks = {b: rack for b, rack in brokers.items() if rack is not None}
    num_racks = len(set(racks.values()))
    for replicas in assignment.values():
        # on min(RF, racks) racks: no rack holds two replicas while another holds none
        assert len({racks[b] for b in replicas}) == min(factor, num_racks)


@st.composite
def full_rounds(draw: st.DrawFn) -> tuple[dict[int, str | None], int, int, int, int]:
    """Clusters where an even spread is possible: rack-unaware or racks of the same size,
    whole rounds of partitions (a multiple of the brokers) starting at a round."""
    num_racks = draw(st.integers(0, 4))
    per_rack = draw(st.integers(1, 4))
    n = per_rack * max(1, num_racks)
    ids = draw(st.lists(st.integers(0, 500), min_size=n, max_size=n, unique=True))
    rack_of = draw(st.permutations([i % max(1, num_racks) for i in range(n)]))
    brokers = {b: (f"rack{r}" if num_racks else None)
               for b, r in sorted(zip(ids, rack_of, strict=True))}
    partitions = n * draw(st.integers(1, 5))
    factor = draw(st.integers(1, n))
    start = draw(st.integers(-1, 2 * n))
    first_partition = n * draw(st.integers(0, 4))
    return brokers, partitions, factor, start, first_partition


@settings(max_examples=300, deadline=None)
@given(full_rounds(), st.randoms(use_true_random=False))
def test_replicas_spread_evenly_when_possible(
        cluster: tuple[dict[int, str | None], int, int, int, int], rng: random.Random) -> None:
    """Every broker leads the same number of partitions and holds the same number of replicas
    when the brokers fill whole rounds and racks (if any) are the same size."""
    brokers, partitions, factor, start, first_partition = cluster
    assignment = assign_replicas(brokers, partitions, factor, fixed_start_index=start,
                                 start_partition_id=first_partition, rng=rng)
    n = len(brokers)
    leaders = leader_counts(assignment)
    replicas = replica_counts(assignment)
    assert [leaders[b] for b in brokers] == [partitions // n] * n
    assert [replicas[b] for b in brokers] == [partitions * factor // n] * n
