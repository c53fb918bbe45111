"""Members of the classic protocol in a consumer group (KIP-848's migration path, Kafka's
classicGroupJoinToConsumerGroup and its siblings): JoinGroup, SyncGroup, Heartbeat and
LeaveGroup of a consumer group.

A classic member is a member of the consumer group like the others: its JoinGroup carries its
subscription and the partitions it owns (the embedded ConsumerProtocolSubscription), which the
coordinator reconciles as a heartbeat's (consumer_heartbeat.py ``advance``); the join is
answered at once with the member's epoch as the generation, and its SyncGroup with its assigned
partitions (a ConsumerProtocolAssignment). Its Heartbeat is answered REBALANCE_IN_PROGRESS
whenever it should rejoin: the group epoch moved past its own, it has partitions to revoke, or
partitions it waited for were released. A classic member has its own session timeout, must
rejoin within its rebalance timeout once told to, and must sync within it after a join.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from samsa.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Subscription,
)
from samsa.coordinator.consumer_protocol import (
    encode_assignment,
    parse_subscription,
    subscription_version,
)
from samsa.coordinator.consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    ClassicMemberMetadata,
    TargetAssignmentMemberValue,
)
from samsa.coordinator.group_rebalance import join_error
from samsa.errors import CorruptRecordError, ErrorCode, KafkaError, error
from samsa.records.record import RecordInput

if TYPE_CHECKING:
    from samsa.coordinator.consumer_heartbeat import ConsumerGroupManager

log = logging.getLogger(__name__)

Response = dict[str, Any]
CONSUMER = "consumer"


class ClassicMembers:
    def __init__(self, manager: ConsumerGroupManager) -> None:
        self.manager = manager

    # --- JoinGroup ----------------------------------------------------------------------------

    async def join(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None,
                   protocol_type: str, protocols: list[tuple[str, bytes]], session_ms: int,
                   rebalance_ms: int, client_id: str, client_host: str, version: int
                   ) -> Response:
        try:
            response, records = self._join(group, member_id, instance_id, protocol_type,
                                           protocols, session_ms, rebalance_ms, client_id,
                                           client_host, version)
        except KafkaError as exc:
            return join_error(exc.code, member_id)
        if records:
            failed = await self.manager.store.wait_replicated(group.group_id)
            if failed is not None:
                return join_error(failed, response["member_id"])
        return response

    def _join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
              protocol_type: str, protocols: list[tuple[str, bytes]], session_ms: int,
              rebalance_ms: int, client_id: str, client_host: str, version: int
              ) -> tuple[Response, list[RecordInput]]:
        gid = group.group_id
        if self.manager.config.migration_policy.lower() == "disabled":
            raise error(ErrorCode.inconsistent_group_protocol,
                        f"Cannot join the consumer group {gid} with the classic protocol "
                        "because the group migration is disabled.")
        unknown = member_id == ""
        if unknown:
            member_id = str(uuid.uuid4())
        max_size = self.manager.config.max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise error(ErrorCode.group_max_size_reached,
                        f"The consumer group has reached its maximum capacity of {max_size} "
                        "members.")
        if not _supports(group, protocol_type, protocols):
            raise error(ErrorCode.inconsistent_group_protocol,
                        f"Member {member_id}'s protocols are not supported.")
        if unknown and instance_id is None and version >= 4:
            # KIP-394: the member id comes back in the next JoinGroup
            return join_error(ErrorCode.member_id_required, member_id), []
        try:
            sub = parse_subscription(protocols[0][1])
        except CorruptRecordError:
            raise error(ErrorCode.inconsistent_group_protocol,
                        f"Member {member_id}'s subscription is malformed.") from None
        records: list[RecordInput] = []
        member = self._member(group, member_id, instance_id, unknown, records)
        old = member.subscription
        new = Subscription(
            instance_id=instance_id if instance_id is not None else old.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else old.rack_id,
            client_id=client_id, client_host=client_host, topic_names=sub.topics,
            topic_regex=old.topic_regex,
            rebalance_timeout_ms=rebalance_ms if rebalance_ms != -1 else old.rebalance_timeout_ms,
            server_assignor=old.server_assignor,
            classic=ClassicMemberMetadata(session_ms, tuple(protocols)))
        view = self.manager.topics()
        ids = {t.name: t.topic_id for t in view.topics.values()} if view is not None else {}
        owned = {ids[t]: list(ps) for t, ps in sub.owned if t in ids}
        loop_now = asyncio.get_running_loop().time()
        current, _ = self.manager.advance(group, member, new, owned, records, None, loop_now)
        live = self.manager.store.consumer_groups[gid].members[member.member_id]
        live.session_deadline = loop_now + session_ms / 1000
        live.sync_deadline = loop_now + max(rebalance_ms, 0) / 1000
        live.join_deadline = None
        return {"error_code": ErrorCode.none, "generation_id": current.member_epoch,
                "protocol_type": CONSUMER, "protocol_name": protocols[0][0], "leader": "",
                "skip_assignment": False, "member_id": member.member_id, "members": []}, records

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                unknown: bool, records: list[RecordInput]) -> ConsumerMember:
        if instance_id is None:
            found = group.members.get(member_id)
            if found is None:
                log.info("[GroupId %s] Member %s joins the consumer group using the classic "
                         "protocol.", group.group_id, member_id)
            return found or ConsumerMember(member_id)
        existing = group.static_member(instance_id)
        if not unknown:
            if existing is None:
                raise error(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
            _check_fenced(existing, member_id, instance_id)
            return existing
        if existing is None:
            return ConsumerMember(member_id)
        # a static member comes back under a new member id with the old one's partitions
        from samsa.coordinator.consumer_heartbeat import record

        gid = group.group_id
        new = ConsumerMember(member_id, existing.subscription, replace(
            existing.current, member_epoch=0, previous_member_epoch=0))
        records += self.manager.member_tombstones(gid, existing.member_id)
        records.append(record(MEMBER_METADATA, gid, member_id, new.subscription.value()))
        records.append(record(TARGET_ASSIGNMENT_MEMBER, gid, member_id,
                              TargetAssignmentMemberValue(group.target.get(existing.member_id,
                                                                           {}))))
        records.append(record(CURRENT_MEMBER_ASSIGNMENT, gid, member_id, new.current.value()))
        return new

    # --- SyncGroup, Heartbeat -----------------------------------------------------------------

    def sync(self, group: ConsumerGroup, *, generation: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None
             ) -> Response:
        try:
            member = self._check(group, member_id, instance_id, generation)
            meta = member.subscription.classic
            assert meta is not None
            name = meta.protocols[0][0] if meta.protocols else ""
            if protocol_type is not None and protocol_type != CONSUMER or (
                    protocol_name is not None and protocol_name != name):
                raise error(ErrorCode.inconsistent_group_protocol,
                            "The protocol does not match the one of the join response.")
            self._rebalance_check(group, member)
        except KafkaError as exc:
            return {"error_code": exc.code, "assignment": b""}
        loop_now = asyncio.get_running_loop().time()
        member.sync_deadline = None
        member.session_deadline = loop_now + meta.session_timeout_ms / 1000
        view = self.manager.topics()
        names = {t.topic_id: t.name for t in view.topics.values()} if view is not None else {}
        by_name = {names[t]: sorted(ps) for t, ps in member.current.assigned.items()
                   if t in names}
        version = subscription_version(meta.protocols[0][1]) if meta.protocols else 0
        return {"error_code": ErrorCode.none, "protocol_type": protocol_type,
                "protocol_name": protocol_name,
                "assignment": encode_assignment(by_name, version)}

    def heartbeat(self, group: ConsumerGroup, *, generation: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        try:
            member = self._check(group, member_id, instance_id, generation)
        except KafkaError as exc:
            return exc.code
        loop_now = asyncio.get_running_loop().time()
        member.session_deadline = loop_now + member.session_timeout_ms(0) / 1000
        state = member.current.state
        if (member.member_epoch < group.group_epoch
                or state == MemberState.UNREVOKED_PARTITIONS
                or (state == MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member))):
            self._must_rejoin(member, loop_now)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _rebalance_check(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Kafka's throwIfRebalanceInProgress: the group moved on and the member is not in the
        middle of revoking (which it finishes first): it must rejoin."""
        if (group.group_epoch > member.member_epoch
                and member.current.state != MemberState.UNREVOKED_PARTITIONS):
            self._must_rejoin(member, asyncio.get_running_loop().time())
            raise error(ErrorCode.rebalance_in_progress,
                        f"A new rebalance is triggered in group {group.group_id} and member "
                        f"{member.member_id} should rejoin to catch up.")

    @staticmethod
    def _must_rejoin(member: ConsumerMember, loop_now: float) -> None:
        if member.join_deadline is None:
            member.join_deadline = loop_now + max(member.subscription.rebalance_timeout_ms,
                                                  0) / 1000

    def _check(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
               generation: int) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember, the classic protocol and the generation."""
        if instance_id is None:
            found = group.members.get(member_id)
            if found is None:
                raise error(ErrorCode.unknown_member_id,
                            f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise error(ErrorCode.unknown_member_id,
                            f"Member with instance id {instance_id} is not a member of group "
                            f"{group.group_id}.")
            _check_fenced(found, member_id, instance_id)
        if not found.uses_classic_protocol:
            raise error(ErrorCode.unknown_member_id,
                        f"Member {found.member_id} does not use the classic protocol.")
        if generation != found.member_epoch:
            raise error(ErrorCode.illegal_generation,
                        f"The request generation id {generation} is not equal to the member "
                        f"epoch {found.member_epoch} of member {found.member_id}.")
        return found

    # --- LeaveGroup ---------------------------------------------------------------------------

    def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]
              ) -> list[ErrorCode]:
        codes: list[ErrorCode] = []
        leaving: list[ConsumerMember] = []
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    found = group.members.get(member_id)
                    if found is None:
                        raise error(ErrorCode.unknown_member_id, "unknown member")
                else:
                    found = group.static_member(instance_id)
                    if found is None:
                        raise error(ErrorCode.unknown_member_id, "unknown instance")
                    if member_id:  # an admin removes members by instance id alone
                        _check_fenced(found, member_id, instance_id)
                if not found.uses_classic_protocol:
                    raise error(ErrorCode.unknown_member_id, "not a classic member")
            except KafkaError as exc:
                codes.append(exc.code)
                continue
            if found not in leaving:
                leaving.append(found)
            log.info("[GroupId %s] Member %s has left group through explicit `LeaveGroup` "
                     "request.", group.group_id, found.member_id)
            codes.append(ErrorCode.none)
        if leaving:
            self.manager.remove_members(group, leaving)
        return codes


def _supports(group: ConsumerGroup, protocol_type: str,
              protocols: list[tuple[str, bytes]]) -> bool:
    """Kafka's supportsClassicProtocols: the consumer protocol type, and (in a group with
    members) a protocol name every classic member supports."""
    if protocol_type != CONSUMER or not protocols:
        return False
    classic = [m.subscription.classic for m in group.members.values()
               if m.subscription.classic is not None]
    if not group.members or not classic:
        return True
    return any(all(name in {n for n, _ in c.protocols} for c in classic)
               for name, _ in protocols)


def _check_fenced(member: ConsumerMember, member_id: str, instance_id: str) -> None:
    if member.member_id != member_id:
        raise error(ErrorCode.fenced_instance_id,
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    f"member {member.member_id}.")
