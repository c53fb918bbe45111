"""The server-side assignors of consumer groups (KIP-848): ``uniform`` and ``range``, Kafka's
built-in ones (``group.consumer.assignors``; a member names one with ``group.remote.assignor``,
else the group uses the first configured).

An assignor gets every member's subscribed topics (by id, only those that exist) and its
current target assignment, and the partition count of each topic; it returns each member's
new target. ``uniform`` is sticky and balanced (no two members' counts differ by more than
one where their subscriptions allow it); ``range`` gives each member contiguous ranges of
every topic it subscribes to, co-partitioned when all members subscribe to the same topics
(Kafka's RangeAssignor). With identical subscriptions (homogeneous) ``uniform`` follows
Kafka's UniformHomogeneousAssignmentBuilder; with different ones it keeps what each member
has where balance allows and moves single partitions from the most to the least loaded
subscriber until no move helps (Kafka's heterogeneous builder reaches the same properties by
its own route).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TopicPartitions = dict[uuid.UUID, frozenset[int]]

UNIFORM = "uniform"
RANGE = "range"
# Kafka's class names of its built-in assignors, which group.consumer.assignors also accepts
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    instance_id: str | None
    topics: frozenset[uuid.UUID]  # subscribed topics that exist
    assignment: TopicPartitions  # the member's current target assignment


def assignor_name(configured: str) -> str | None:
    """The built-in assignor a ``group.consumer.assignors`` entry names, None if none."""
    if configured in (UNIFORM, RANGE):
        return configured
    return CLASS_NAMES.get(configured)


def assign(name: str, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
           ) -> dict[str, TopicPartitions]:
    """Every member's new target assignment by the assignor ``name``."""
    if not members:
        return {}
    for spec in members.values():
        for topic in spec.topics:
            if topic not in partitions:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {topic} which doesn't exist in the "
                    "topic metadata.")
    topic_sets = {spec.topics for spec in members.values()}
    homogeneous = len(topic_sets) == 1
    builders: dict[tuple[str, bool], Callable[[Mapping[str, MemberSpec],
                                               Mapping[uuid.UUID, int]],
                                              dict[str, TopicPartitions]]] = {
        (UNIFORM, True): _uniform_homogeneous,
        (UNIFORM, False): _uniform_heterogeneous,
        (RANGE, True): _range,
        (RANGE, False): _range,
    }
    builder = builders.get((name, homogeneous))
    if builder is None:
        raise PartitionAssignorError(f"unknown assignor {name}")
    result = builder(members, partitions)
    return {member_id: {t: p for t, p in parts.items() if p}
            for member_id, parts in result.items()}


def _uniform_homogeneous(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
                         ) -> dict[str, TopicPartitions]:
    topics = next(iter(members.values())).topics
    if not topics:
        return {member_id: {} for member_id in members}
    total = sum(partitions[t] for t in topics)
    minimum, extra = divmod(total, len(members))
    owned = {(t, p) for spec in members.values() for t, parts in spec.assignment.items()
             if t in topics for p in parts}
    unassigned = [(t, p) for t in sorted(topics) for p in range(partitions[t])
                  if (t, p) not in owned]
    result: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for member_id in sorted(members):
        quota = minimum
        if extra > 0:
            quota += 1
            extra -= 1
        kept: dict[uuid.UUID, set[int]] = {}
        for topic, parts in sorted(members[member_id].assignment.items()):
            if topic not in topics:
                continue
            for p in sorted(parts):
                if p >= partitions[topic]:
                    continue
                if quota > 0:
                    kept.setdefault(topic, set()).add(p)
                    quota -= 1
                else:
                    unassigned.append((topic, p))
        result[member_id] = kept
        if quota > 0:
            unfilled.append((member_id, quota))
    queue = iter(unassigned)
    for member_id, quota in unfilled:
        for _ in range(quota):
            nxt = next(queue, None)
            if nxt is None:
                break
            result[member_id].setdefault(nxt[0], set()).add(nxt[1])
    if next(queue, None) is not None:
        raise PartitionAssignorError("Partitions were left unassigned")
    return {m: {t: frozenset(p) for t, p in parts.items()} for m, parts in result.items()}


def _uniform_heterogeneous(members: Mapping[str, MemberSpec],
                           partitions: Mapping[uuid.UUID, int]) -> dict[str, TopicPartitions]:
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = dict.fromkeys(members, 0)
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for topic in members[member_id].topics:
            subscribers.setdefault(topic, []).append(member_id)
    # stickiness: every member keeps what it has of the topics it still subscribes to
    for member_id in sorted(members):
        spec = members[member_id]
        for topic, parts in spec.assignment.items():
            if topic not in spec.topics:
                continue
            for p in parts:
                if p < partitions[topic] and (topic, p) not in owner:
                    owner[(topic, p)] = member_id
                    load[member_id] += 1
    # the rest go to the least loaded subscriber; topics with the fewest subscribers first
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), str(t))):
        for p in range(partitions[topic]):
            if (topic, p) not in owner:
                target = min(subscribers[topic], key=lambda m: (load[m], m))
                owner[(topic, p)] = target
                load[target] += 1
    # balance: move a partition from a subscriber with two or more more than another
    by_member: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    for tp, member_id in owner.items():
        by_member[member_id].add(tp)
    moved = True
    rounds = 0
    while moved and rounds < 10_000:
        moved = False
        rounds += 1
        for donor in sorted(members, key=lambda m: (-load[m], m)):
            for tp in sorted(by_member[donor], key=lambda x: (str(x[0]), x[1])):
                taker = min(subscribers[tp[0]], key=lambda m: (load[m], m))
                if load[donor] - load[taker] > 1:
                    by_member[donor].discard(tp)
                    by_member[taker].add(tp)
                    load[donor] -= 1
                    load[taker] += 1
                    moved = True
                    break
            if moved:
                break
    result: dict[str, TopicPartitions] = {}
    for member_id, tps in by_member.items():
        grouped: dict[uuid.UUID, set[int]] = {}
        for topic, p in tps:
            grouped.setdefault(topic, set()).add(p)
        result[member_id] = {t: frozenset(p) for t, p in grouped.items()}
    return result


def _range(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
           ) -> dict[str, TopicPartitions]:
    # static members first, by instance id, then the others by member id (Kafka's order)
    order = sorted(members, key=lambda m: (members[m].instance_id is None,
                                           members[m].instance_id or m))
    subscribers: dict[uuid.UUID, int] = {}
    for member_id in order:
        for topic in members[member_id].topics:
            subscribers[topic] = subscribers.get(topic, 0) + 1
    next_start: dict[uuid.UUID, int] = dict.fromkeys(subscribers, 0)
    extra = {t: partitions[t] % n for t, n in subscribers.items()}
    result: dict[str, TopicPartitions] = {}
    for member_id in order:
        assigned: TopicPartitions = {}
        for topic in sorted(members[member_id].topics):
            quota = partitions[topic] // subscribers[topic]
            if extra[topic] > 0:
                quota += 1
                extra[topic] -= 1
            start = next_start[topic]
            end = min(start + quota, partitions[topic])
            next_start[topic] = end
            if start < end:
                assigned[topic] = frozenset(range(start, end))
        result[member_id] = assigned
    return result
