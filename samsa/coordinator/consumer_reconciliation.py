"""A member's way from its current assignment to its target (Kafka's CurrentAssignmentBuilder).

A member first gives up (revokes) the partitions its target no longer has, staying in its
epoch (UNREVOKED_PARTITIONS) until its heartbeat no longer reports them; then it moves to the
target's epoch and gets the target's partitions that no other member holds any more (a
partition another member still holds or revokes is unreleased: the member waits for it in
UNRELEASED_PARTITIONS). So no partition is ever owned by two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

from samsa.coordinator.consumer_group import CurrentAssignment, MemberState, with_epoch
from samsa.coordinator.consumer_records import TopicPartitions
from samsa.errors import ErrorCode, error

# topic id -> the partitions a member's heartbeat says it owns (None: not sent, unchanged)
Owned = dict[uuid.UUID, list[int]] | None


def owns_any(owned: Owned, partitions: TopicPartitions) -> bool:
    """Whether the member still owns one of ``partitions``; a heartbeat that did not report
    its partitions still owns them all."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned.items() for p in ps)


def reconcile(current: CurrentAssignment, target_epoch: int, target: TopicPartitions,
              partition_epoch: Callable[[uuid.UUID, int], int], owned: Owned
              ) -> CurrentAssignment:
    """The member's next current assignment towards ``target`` (of ``target_epoch``)."""
    state = current.state
    if state == MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current, current.member_epoch, target_epoch, target, partition_epoch, owned)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, current.pending_revocation):
            return current
        return _next(current, current.member_epoch + 1, target_epoch, target, partition_epoch,
                     owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(current, current.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: a state of a newer Kafka; the member starts over without partitions
    if owned is None or any(owned.values()):
        raise error(ErrorCode.fenced_member_epoch,
                    "The consumer group member is in a unknown state. The member must abandon "
                    "all its partitions and rejoin.")
    return _next(current, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(current: CurrentAssignment, member_epoch: int, target_epoch: int,
          target: TopicPartitions, partition_epoch: Callable[[uuid.UUID, int], int],
          owned: Owned) -> CurrentAssignment:
    unreleased = False
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: TopicPartitions = {}
    to_assign: dict[uuid.UUID, set[int]] = {}
    for topic_id in set(target) | set(current.assigned):
        wanted = target.get(topic_id, frozenset())
        have = current.assigned.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            assigned[topic_id] = set(keep)
        if have - keep:
            revoking[topic_id] = frozenset(have - keep)
        new = set()
        for p in wanted - keep:
            if partition_epoch(topic_id, p) != -1:
                unreleased = True
            else:
                new.add(p)
        if new:
            to_assign[topic_id] = new
    if revoking and owns_any(owned, revoking):
        # first the member revokes, in its current epoch
        return replace(with_epoch(current, member_epoch), state=MemberState.UNREVOKED_PARTITIONS,
                       assigned=_frozen(assigned), pending_revocation=revoking)
    for topic_id, ps in to_assign.items():
        assigned.setdefault(topic_id, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(with_epoch(current, target_epoch), state=state, assigned=_frozen(assigned),
                   pending_revocation={})


def _frozen(parts: dict[uuid.UUID, set[int]]) -> TopicPartitions:
    return {topic_id: frozenset(ps) for topic_id, ps in parts.items() if ps}
