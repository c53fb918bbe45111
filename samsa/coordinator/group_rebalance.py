"""Rebalances of the classic group protocol, and the JoinGroup and SyncGroup responses.

A rebalance takes a group to PreparingRebalance, where members rejoin; it completes when all
have (or at the rebalance timeout, or after an empty group's initial delay) with a new
generation in CompletingRebalance, whose leader's SyncGroup assigns the partitions. Members that
do not rejoin, or do not sync in time, are removed. Timers are the event loop's (``call_later``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from samsa.coordinator.group import Group, GroupState, Member
from samsa.coordinator.group_store import GroupStore, now_ms
from samsa.errors import ErrorCode

log = logging.getLogger(__name__)

Response = dict[str, Any]


class Rebalancer:
    def __init__(self, store: GroupStore, initial_delay_ms: int) -> None:
        self.store = store
        self.initial_delay_ms = initial_delay_ms

    def prepare(self, group: Group) -> None:
        loop = asyncio.get_running_loop()
        for member in group.members.values():  # a sync in flight will not complete now
            if member.awaiting_sync:
                assert member.sync_waiter is not None
                member.sync_waiter.set_result({"error_code": ErrorCode.rebalance_in_progress})
        was_empty = group.state == GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        timeout = group.max_rebalance_timeout_ms() / 1000
        if was_empty and self.initial_delay_ms > 0:
            group.initial_join_until = loop.time() + min(self.initial_delay_ms / 1000, timeout)
            delay = group.initial_join_until - loop.time()
        else:
            group.initial_join_until = 0.0
            delay = timeout
        self._schedule_deadline(group, delay)

    def extend_initial_delay(self, group: Group) -> None:
        """New members during an empty group's first join push it back, up to the timeout."""
        loop = asyncio.get_running_loop()
        if group.initial_join_until > loop.time():
            group.initial_join_until = loop.time() + self.initial_delay_ms / 1000
            self._schedule_deadline(group, self.initial_delay_ms / 1000)

    def _schedule_deadline(self, group: Group, delay: float) -> None:
        if group.rebalance_deadline is not None:
            group.rebalance_deadline.cancel()
        group.rebalance_deadline = asyncio.get_running_loop().call_later(
            max(0.0, delay), self._rebalance_deadline, group
        )

    def _rebalance_deadline(self, group: Group) -> None:
        group.rebalance_deadline = None
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        loop = asyncio.get_running_loop()
        if group.initial_join_until > loop.time():
            return
        group.initial_join_until = 0.0
        self._complete_join(group)

    def try_complete_join(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if group.initial_join_until > asyncio.get_running_loop().time():
            return
        if all(m.awaiting_join for m in group.members.values()) and not group.pending_members:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_deadline is not None:
            group.rebalance_deadline.cancel()
            group.rebalance_deadline = None
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            if member.group_instance_id is None:  # static members stay until their session ends
                remove_member(group, member)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol_name = group.leader_id = None
            group.transition(GroupState.EMPTY, now_ms())
            self.store.store_group(group)
            return
        group.protocol_name = group.select_protocol()
        joined = [m.member_id for m in group.members.values() if m.awaiting_join]
        if group.leader_id not in joined:  # the leader must be one that rejoined
            group.leader_id = joined[0] if joined else next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms())
        loop = asyncio.get_running_loop()
        for member in group.members.values():
            member.assignment = b""
            member.last_heartbeat = loop.time()
            if member.awaiting_join:
                assert member.join_waiter is not None
                member.join_waiter.set_result(join_result(group, member))
        group.pending_sync = set(group.members)
        loop.call_later(group.max_rebalance_timeout_ms() / 1000, self._sync_deadline, group,
                        group.generation)
        log.info("group %s: generation %d with %d member(s), protocol %s", group.group_id,
                 group.generation, len(group.members), group.protocol_name)

    def _sync_deadline(self, group: Group, generation: int) -> None:
        """Members that did not send SyncGroup within the rebalance timeout are removed."""
        if group.generation != generation or not group.pending_sync:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        late = [group.members[m] for m in group.pending_sync if m in group.members]
        group.pending_sync.clear()
        for member in late:
            log.info("group %s: member %s did not sync in time", group.group_id, member.member_id)
            remove_member(group, member)
        if late:
            self.member_left(group)

    def member_left(self, group: Group) -> None:
        """After removals: rebalance the rest, or finish the rebalance in progress."""
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self.prepare(group)
            else:  # a rebalance with nobody to join it, as Kafka's ends at once
                group.generation += 1
                group.protocol_name = group.leader_id = None
                group.transition(GroupState.PREPARING_REBALANCE, now_ms())
                group.transition(GroupState.EMPTY, now_ms())
                self.store.store_group(group)
        elif group.state == GroupState.PREPARING_REBALANCE:
            self.try_complete_join(group)


def remove_member(group: Group, member: Member) -> None:
    """Remove the member; a join or sync it waits in is answered UNKNOWN_MEMBER_ID."""
    group.members.pop(member.member_id, None)
    if member.group_instance_id is not None:
        group.static_members.pop(member.group_instance_id, None)
    for waiter in (member.join_waiter, member.sync_waiter):
        if waiter is not None and not waiter.done():
            waiter.set_result(join_error(ErrorCode.unknown_member_id, member.member_id))


def join_result(group: Group, member: Member) -> Response:
    leader = member.member_id == group.leader_id
    return {
        "error_code": ErrorCode.none,
        "generation_id": group.generation,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "leader": group.leader_id or "",
        "skip_assignment": False,
        "member_id": member.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "metadata": m.metadata(group.protocol_name)}
            for m in group.members.values()
        ] if leader else [],
    }


def join_error(code: ErrorCode, member_id: str) -> Response:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": member_id, "members": []}


def sync_result(group: Group, member: Member) -> Response:
    return {"error_code": ErrorCode.none, "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name, "assignment": member.assignment}
