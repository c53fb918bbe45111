"""The server-side assignors of consumer groups: ``uniform`` balances and keeps what members
have, with the same or with different subscriptions; ``range`` gives contiguous ranges,
co-partitioned when every member subscribes to the same topics, static members first."""

from __future__ import annotations

import random
import uuid

import pytest

from samsa.coordinator.assignors import (
    RANGE,
    UNIFORM,
    MemberSpec,
    PartitionAssignorError,
    assign,
    assignor_name,
)

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def spec(*topics: uuid.UUID, have: dict[uuid.UUID, set[int]] | None = None,
         instance: str | None = None) -> MemberSpec:
    return MemberSpec(instance, frozenset(topics),
                      {t: frozenset(p) for t, p in (have or {}).items()})


def counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in parts.values()) for m, parts in result.items()}


def every_partition_once(result: dict[str, dict[uuid.UUID, frozenset[int]]],
                         partitions: dict[uuid.UUID, int]) -> bool:
    seen = [(t, p) for parts in result.values() for t, ps in parts.items() for p in ps]
    return sorted(seen) == sorted((t, p) for t, n in partitions.items() for p in range(n))


def test_uniform_spreads_evenly_and_keeps_what_members_have() -> None:
    partitions = {A: 7, B: 3}
    first = assign(UNIFORM, {"m1": spec(A, B), "m2": spec(A, B)}, partitions)
    assert every_partition_once(first, partitions)
    assert sorted(counts(first).values()) == [5, 5]
    # a third member: the others keep all they can, each gives up what is over its share
    members = {m: spec(A, B, have={t: set(p) for t, p in parts.items()})
               for m, parts in first.items()}
    members["m3"] = spec(A, B)
    second = assign(UNIFORM, members, partitions)
    assert every_partition_once(second, partitions)
    assert sorted(counts(second).values()) == [3, 3, 4]
    for m in ("m1", "m2"):
        kept = {(t, p) for t, ps in second[m].items() for p in ps}
        had = {(t, p) for t, ps in first[m].items() for p in ps}
        assert kept <= had


def test_uniform_with_different_subscriptions_balances_where_it_can() -> None:
    partitions = {A: 6, B: 6, C: 1}
    members = {"m1": spec(A), "m2": spec(A, B), "m3": spec(B, C)}
    result = assign(UNIFORM, members, partitions)
    assert every_partition_once(result, partitions)
    assert max(counts(result).values()) - min(counts(result).values()) <= 1
    for m, parts in result.items():
        assert set(parts) <= members[m].topics


def test_uniform_moves_little_when_subscriptions_differ() -> None:
    partitions = {A: 4, B: 4}
    before = {"m1": {A: {0, 1, 2, 3}}, "m2": {B: {0, 1, 2, 3}}}
    members = {"m1": spec(A, B, have=before["m1"]), "m2": spec(B, have=before["m2"])}
    result = assign(UNIFORM, members, partitions)
    assert result == {"m1": {A: frozenset({0, 1, 2, 3})}, "m2": {B: frozenset({0, 1, 2, 3})}}


def test_uniform_randomized_properties() -> None:
    rng = random.Random(848)
    topics = [uuid.UUID(int=i) for i in range(1, 6)]
    for _ in range(200):
        partitions = {t: rng.randint(1, 8) for t in topics}
        members = {f"m{i}": spec(*rng.sample(topics, rng.randint(1, len(topics))))
                   for i in range(rng.randint(1, 6))}
        result = assign(UNIFORM, members, partitions)
        subscribed = {t for s in members.values() for t in s.topics}
        assert every_partition_once(result, {t: partitions[t] for t in subscribed})
        for m, parts in result.items():
            assert set(parts) <= members[m].topics
        again = assign(UNIFORM, {m: spec(*s.topics, have={t: set(p) for t, p in
                                                       result[m].items()})
                                 for m, s in members.items()}, partitions)
        assert again == result  # a balanced assignment stays as it is


def test_range_is_co_partitioned_with_the_same_subscriptions() -> None:
    result = assign(RANGE, {"b": spec(A, B), "a": spec(A, B)}, {A: 3, B: 3})
    assert result == {"a": {A: frozenset({0, 1}), B: frozenset({0, 1})},
                      "b": {A: frozenset({2}), B: frozenset({2})}}


def test_range_puts_static_members_first_by_instance_id() -> None:
    result = assign(RANGE, {"x": spec(A), "y": spec(A, instance="i2"),
                            "z": spec(A, instance="i1")}, {A: 3})
    assert result == {"z": {A: frozenset({0})}, "y": {A: frozenset({1})},
                      "x": {A: frozenset({2})}}


def test_range_with_different_subscriptions() -> None:
    result = assign(RANGE, {"a": spec(A), "b": spec(A, B), "c": spec(B)}, {A: 4, B: 1})
    assert result == {"a": {A: frozenset({0, 1})}, "b": {A: frozenset({2, 3}), B: frozenset({0})},
                      "c": {}}


def test_a_topic_without_metadata_fails_the_assignment() -> None:
    with pytest.raises(PartitionAssignorError):
        assign(UNIFORM, {"m": spec(A)}, {})


def test_names_kafka_accepts_for_the_builtin_assignors() -> None:
    assert assignor_name("uniform") == UNIFORM
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == RANGE
    assert assignor_name("sticky") is None
