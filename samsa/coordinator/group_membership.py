"""The member requests of the classic group protocol: JoinGroup (static members, KIP-345; member
ids handed out before the join, KIP-394), SyncGroup, Heartbeat and LeaveGroup, and the members
whose session expired. Responses to JoinGroup and SyncGroup are futures completed when the
rebalance (group_rebalance.py) reaches them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable

from samsa.coordinator.group import Group, GroupState, Member
from samsa.coordinator.group_rebalance import (
    Rebalancer,
    Response,
    join_error,
    join_result,
    remove_member,
    sync_result,
)
from samsa.coordinator.group_store import GroupStore, now_ms
from samsa.errors import ErrorCode, KafkaError, error, kafka_name

log = logging.getLogger(__name__)

UNKNOWN_MEMBER = "The coordinator is not aware of this member."


def check_member(group: Group | None, member_id: str, instance_id: str | None) -> Member:
    """The group's member with this id (and instance id, if static); KafkaError
    UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID otherwise."""
    if group is None or group.state == GroupState.DEAD:
        raise error(ErrorCode.unknown_member_id, UNKNOWN_MEMBER)
    known = group.static_members.get(instance_id, member_id) if instance_id else member_id
    if known != member_id:
        raise error(ErrorCode.fenced_instance_id,
                    f"Another member with group.instance.id {instance_id} joined the group.")
    member = group.members.get(member_id)
    if member is None:
        raise error(ErrorCode.unknown_member_id, UNKNOWN_MEMBER)
    return member


class GroupMembership:
    def __init__(self, store: GroupStore, *, initial_delay_ms: int, min_session_ms: int,
                 max_session_ms: int, max_size: int) -> None:
        self.store = store
        self.rebalance = Rebalancer(store, initial_delay_ms)
        self.min_session_ms = min_session_ms
        self.max_session_ms = max_session_ms
        self.max_size = max_size

    async def join(
        self, *, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
        protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int, client_id: str,
        client_host: str, version: int,
    ) -> Response:
        if not group_id:
            return join_error(ErrorCode.invalid_group_id, member_id)
        if not self.store.coordinates(group_id):
            return join_error(ErrorCode.not_coordinator, member_id)
        if not self.min_session_ms <= session_ms <= self.max_session_ms:
            return join_error(ErrorCode.invalid_session_timeout, member_id)
        group = self.store.groups.get(group_id)
        if group is None:
            if member_id:
                return join_error(ErrorCode.unknown_member_id, member_id)
            group = self.store.new_group(group_id)
        if group.state == GroupState.DEAD:
            return join_error(ErrorCode.coordinator_not_available, member_id)
        names = {name for name, _ in protocols}
        if not protocols or not protocol_type or (group.members and (
            protocol_type != group.protocol_type or not names & group.supported_protocols()
        )):
            return join_error(ErrorCode.inconsistent_group_protocol, member_id)
        loop = asyncio.get_running_loop()
        known_id = group.static_members.get(instance_id) if instance_id is not None else None
        static_restart = False
        if known_id is not None and known_id != member_id:
            if member_id:
                return join_error(ErrorCode.fenced_instance_id, member_id)
            assert instance_id is not None
            restarted = self._replace_static_member(group, instance_id, client_id)
            if group.state == GroupState.STABLE:  # KIP-345: no rebalance for the others
                restarted.protocols = protocols
                restarted.session_timeout_ms = session_ms
                restarted.rebalance_timeout_ms = rebalance_ms
                self.store.store_group(group)
                return _static_rejoin_result(group, restarted, known_id, version)
            member_id = restarted.member_id
            static_restart = True
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if instance_id is None and version >= 4:  # KIP-394: the id comes back in a rejoin
                group.pending_members[new_id] = (loop.time(), session_ms)
                return join_error(ErrorCode.member_id_required, new_id)
            member_id = new_id
        elif member_id not in group.members and member_id not in group.pending_members:
            return join_error(ErrorCode.unknown_member_id, member_id)

        member = group.members.get(member_id)
        if member is None:
            if len(group.members) >= self.max_size:
                return join_error(ErrorCode.group_max_size_reached, member_id)
            group.pending_members.pop(member_id, None)
            member = Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                            session_ms, protocol_type, protocols)
            group.members[member_id] = member
            if instance_id is not None:
                group.static_members[instance_id] = member_id
            if group.protocol_type is None or len(group.members) == 1:
                group.protocol_type = protocol_type
            changed = True
        else:
            changed = (member.protocols != protocols or group.state == GroupState.EMPTY
                       or static_restart)
            member.protocols = protocols
            member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_ms, session_ms
        member.last_heartbeat = loop.time()

        if group.state == GroupState.STABLE and not changed and member_id != group.leader_id:
            return join_result(group, member)  # nothing changed: the current generation
        if group.state == GroupState.COMPLETING_REBALANCE and not changed:
            return join_result(group, member)
        waiter: asyncio.Future[Response] = loop.create_future()
        member.join_waiter = waiter
        if group.state != GroupState.PREPARING_REBALANCE:
            self.rebalance.prepare(group)
        else:
            self.rebalance.extend_initial_delay(group)
        self.rebalance.try_complete_join(group)
        return await waiter

    def _replace_static_member(self, group: Group, instance_id: str, client_id: str) -> Member:
        """A static member restarted: it gets a new member id and keeps its assignment; the
        old id is fenced."""
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        for waiter in (old.join_waiter, old.sync_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(join_error(ErrorCode.fenced_instance_id, old_id))
        new_id = f"{client_id}-{uuid.uuid4()}"
        member = Member(new_id, instance_id, client_id, old.client_host, old.rebalance_timeout_ms,
                        old.session_timeout_ms, old.protocol_type, old.protocols, old.assignment,
                        asyncio.get_running_loop().time())
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        return member

    async def sync(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> Response:
        if not group_id:
            return {"error_code": ErrorCode.invalid_group_id, "assignment": b""}
        if not self.store.coordinates(group_id):
            return {"error_code": ErrorCode.not_coordinator, "assignment": b""}
        group = self.store.groups.get(group_id)
        try:
            member = check_member(group, member_id, instance_id)
        except KafkaError as exc:
            return {"error_code": exc.code, "assignment": b""}
        assert group is not None
        if generation != group.generation:
            return {"error_code": ErrorCode.illegal_generation, "assignment": b""}
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return {"error_code": ErrorCode.inconsistent_group_protocol, "assignment": b""}
        member.last_heartbeat = asyncio.get_running_loop().time()
        if group.state == GroupState.PREPARING_REBALANCE:
            return {"error_code": ErrorCode.rebalance_in_progress, "assignment": b""}
        group.pending_sync.discard(member_id)
        if group.state == GroupState.STABLE:
            return sync_result(group, member)
        if group.state != GroupState.COMPLETING_REBALANCE:
            return {"error_code": ErrorCode.unknown_member_id, "assignment": b""}
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            self.store.store_group(group)
            # As Kafka's: the assignment is given out once the group's record has reached the
            # ISR; the group stays CompletingRebalance meanwhile (a rebalance may start).
            failed = await self.store.wait_replicated(group_id)
            if group.state == GroupState.COMPLETING_REBALANCE and group.generation == generation:
                self._assignment_stored(group, failed)
        return await waiter

    def _assignment_stored(self, group: Group, failed: ErrorCode | None) -> None:
        """The leader's assignment was stored: the group is Stable and every member waiting
        gets its part; or not (``failed``): they get the error, and the group rebalances."""
        if failed is None:
            group.transition(GroupState.STABLE, now_ms())
        for m in group.members.values():
            if failed is not None:
                m.assignment = b""
            if m.awaiting_sync:
                assert m.sync_waiter is not None
                m.sync_waiter.set_result(sync_result(group, m) if failed is None else
                                         {"error_code": failed, "assignment": b""})
        if failed is not None:
            log.info("group %s: the assignment of generation %d was not stored (%s): "
                     "rebalancing", group.group_id, group.generation, kafka_name(failed))
            self.rebalance.prepare(group)

    def heartbeat(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        if not self.store.coordinates(group_id):
            return ErrorCode.not_coordinator
        group = self.store.groups.get(group_id)
        try:
            member = check_member(group, member_id, instance_id)
        except KafkaError as exc:
            return exc.code
        assert group is not None
        if generation != group.generation:
            return ErrorCode.illegal_generation
        member.last_heartbeat = asyncio.get_running_loop().time()
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Remove each (member id, instance id); one error code per member."""
        if not group_id:
            return [ErrorCode.invalid_group_id] * len(members)
        if not self.store.coordinates(group_id):
            return [ErrorCode.not_coordinator] * len(members)
        group = self.store.groups.get(group_id)
        results = []
        removed = False
        for member_id, instance_id in members:
            if group is None:
                results.append(ErrorCode.unknown_member_id)
                continue
            if member_id in group.pending_members:  # got MEMBER_ID_REQUIRED, leaves instead
                del group.pending_members[member_id]
                removed = True
                results.append(ErrorCode.none)
                continue
            if instance_id is not None and not member_id:
                member_id = group.static_members.get(instance_id, "")
            try:
                member = check_member(group, member_id, instance_id)
            except KafkaError as exc:
                results.append(exc.code)
                continue
            remove_member(group, member)
            removed = True
            results.append(ErrorCode.none)
        if group is not None and removed:
            self.rebalance.member_left(group)
        return results

    # --- sessions ------------------------------------------------------------------------------

    def start_sessions(self, groups: Iterable[Group]) -> None:
        """Loaded groups: their members' sessions start now (as Kafka schedules every loaded
        member's heartbeat expiration), not at their last heartbeat to another coordinator."""
        now = asyncio.get_running_loop().time()
        for group in groups:
            for member in group.members.values():
                member.last_heartbeat = now

    def expire_sessions(self, now: float) -> None:
        """Remove the members (and the member ids handed out) whose session ended by loop
        time ``now``."""
        for group in list(self.store.groups.values()):
            self._expire_members(group, now)

    def _expire_members(self, group: Group, now: float) -> None:
        expired = [
            m for m in group.members.values()
            if not m.awaiting_join and not m.awaiting_sync
            and now - m.last_heartbeat > m.session_timeout_ms / 1000
        ]
        for member in expired:
            log.info("group %s: member %s's session expired", group.group_id, member.member_id)
            remove_member(group, member)
        stale = [mid for mid, (at, session_ms) in group.pending_members.items()
                 if now - at > session_ms / 1000]
        for member_id in stale:
            del group.pending_members[member_id]
        if expired or stale:
            self.rebalance.member_left(group)

    # --- letting groups go ---------------------------------------------------------------------

    def release(self, group: Group) -> None:
        """The group moved to another coordinator: its timers stop; members waiting in a join
        or a sync are told NOT_COORDINATOR and find the new coordinator."""
        if group.rebalance_deadline is not None:
            group.rebalance_deadline.cancel()
        group.transition(GroupState.DEAD, now_ms())
        for member in group.members.values():
            if member.awaiting_join:
                assert member.join_waiter is not None
                member.join_waiter.set_result(
                    join_error(ErrorCode.not_coordinator, member.member_id))
            if member.awaiting_sync:
                assert member.sync_waiter is not None
                member.sync_waiter.set_result({"error_code": ErrorCode.not_coordinator})

    def abort_waiters(self) -> None:
        """The coordinator stops: joins and syncs in flight get COORDINATOR_NOT_AVAILABLE."""
        for group in self.store.groups.values():
            for member in group.members.values():
                for waiter in (member.join_waiter, member.sync_waiter):
                    if waiter is not None and not waiter.done():
                        waiter.set_result({"error_code": ErrorCode.coordinator_not_available})


def _static_rejoin_result(group: Group, member: Member, old_id: str, version: int) -> Response:
    """A restarted static member of a Stable group: if it leads, it must not run a new
    assignment: v9+ says so (skip_assignment), older versions name the old leader id."""
    result = join_result(group, member)
    if member.member_id == group.leader_id:
        if version >= 9:
            result["skip_assignment"] = True
        else:
            result.update(leader=old_id, members=[])
    return result
