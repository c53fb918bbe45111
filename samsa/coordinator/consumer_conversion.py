"""Online conversion between classic and consumer groups (KIP-848's migration, as
``group.consumer.migration.policy`` allows: upgrade, downgrade, bidirectional, disabled).

Upgrade: the first ConsumerGroupHeartbeat to a classic group of consumers turns it into a
consumer group in place. Its members keep their member ids and assignments (as their target
and current assignment, at the classic generation as their epoch) and go on as classic
members of the consumer group (consumer_classic.py); their JoinGroup and SyncGroup waiting in a
rebalance are answered REBALANCE_IN_PROGRESS, so they rejoin the new group.

Downgrade: when the last member of the consumer protocol leaves a group whose other members
use the classic protocol, the group becomes a classic group again: its members keep their ids
and their target assignments (as classic assignments, in their own protocol version), and a
classic rebalance starts.

Both are records in the group's ``__consumer_offsets`` partition (the old kind's tombstones,
then the new kind's records), written and replayed as every change of a group is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.coordinator.consumer_group import (
    ConsumerGroup,
    CurrentAssignment,
    MemberState,
    Subscription,
)
from samsa.coordinator.consumer_protocol import (
    encode_assignment,
    parse_assignment,
    parse_subscription,
    subscription_version,
)
from samsa.coordinator.consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ClassicMemberMetadata,
    GroupEpochValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    TopicPartitions,
    decode_consumer_key,
    decode_consumer_value,
)
from samsa.coordinator.group import Group, GroupState, Member
from samsa.coordinator.group_rebalance import join_error
from samsa.coordinator.group_store import group_record, now_ms
from samsa.coordinator.records import GroupKey, encode_group_key
from samsa.errors import CorruptRecordError, ErrorCode, error
from samsa.records.record import RecordInput

if TYPE_CHECKING:
    from samsa.coordinator.consumer_heartbeat import ConsumerGroupManager

log = logging.getLogger(__name__)

UPGRADE_POLICIES = ("upgrade", "bidirectional")
DOWNGRADE_POLICIES = ("downgrade", "bidirectional")


class GroupConversion:
    def __init__(self, manager: ConsumerGroupManager) -> None:
        self.manager = manager
        # the classic coordinator's part of a downgrade: the members' sessions and a rebalance
        self.on_downgrade: Callable[[Group], None] | None = None

    @property
    def policy(self) -> str:
        return self.manager.config.migration_policy.lower()

    # --- classic -> consumer ------------------------------------------------------------------

    def can_upgrade(self, classic: Group) -> bool:
        """Kafka's validateOnlineUpgrade."""
        gid = classic.group_id
        if self.policy not in UPGRADE_POLICIES:
            log.info("Cannot upgrade classic group %s to consumer group because the online "
                     "upgrade is disabled.", gid)
            return False
        if classic.protocol_type != "consumer":
            log.info("Cannot upgrade classic group %s to consumer group because the group "
                     "does not use the consumer embedded protocol.", gid)
            return False
        if len(classic.members) > self.manager.config.max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group "
                     "size exceeds the consumer group maximum size.", gid)
            return False
        return True

    def upgrade(self, classic: Group, records: list[RecordInput]) -> ConsumerGroup:
        """The records that turn the classic group into a consumer group (appended to
        ``records``), and that group as they make it (not in the table yet)."""
        from samsa.coordinator.consumer_heartbeat import record

        gid = classic.group_id
        epoch = classic.generation
        view = self.manager.topics()
        ids = {t.name: t.topic_id for t in view.topics.values()} if view is not None else {}
        converted: list[tuple[str, Subscription, TopicPartitions]] = []
        for m in classic.members.values():
            try:
                sub = parse_subscription(m.metadata(classic.protocol_name))
                assigned = parse_assignment(m.assignment)
            except CorruptRecordError:
                raise error(ErrorCode.group_id_not_found,
                            f"Cannot upgrade the classic group {gid} to consumer group because "
                            "the embedded consumer protocol is malformed.") from None
            subscription = Subscription(
                instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id,
                client_host=m.client_host, topic_names=sub.topics,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)))
            parts = {ids[t]: frozenset(ps) for t, ps in assigned.items() if t in ids}
            converted.append((m.member_id, subscription, parts))
        new: list[RecordInput] = [RecordInput(None, encode_group_key(GroupKey(gid)))]
        new += [record(MEMBER_METADATA, gid, mid, sub.value()) for mid, sub, _ in converted]
        new.append(record(GROUP_METADATA, gid, value=GroupEpochValue(epoch)))
        new += [record(TARGET_ASSIGNMENT_MEMBER, gid, mid, TargetAssignmentMemberValue(parts))
                for mid, _, parts in converted]
        new.append(record(TARGET_ASSIGNMENT_METADATA, gid,
                          value=TargetAssignmentEpochValue(epoch, now_ms())))
        new += [record(CURRENT_MEMBER_ASSIGNMENT, gid, mid, CurrentAssignment(
            epoch, epoch, MemberState.STABLE, parts).value()) for mid, _, parts in converted]
        group = ConsumerGroup(gid)
        for r in new[1:]:
            assert r.key is not None
            key = decode_consumer_key(r.key)
            group.replay(key, decode_consumer_value(key.type, r.value))
        records += new
        log.info("[GroupId %s] Upgrading the classic group (generation %d, %d member(s)) to a "
                 "consumer group.", gid, epoch, len(converted))
        return group

    def upgraded(self, classic: Group, live: ConsumerGroup, loop_now: float) -> None:
        """After an upgrade was written: the classic members waiting in a join or a sync rejoin
        (REBALANCE_IN_PROGRESS); the classic group's timers do nothing any more; every
        converted member's session starts now."""
        waiting = list(classic.members.values())
        for member in waiting:
            if member.awaiting_join:
                assert member.join_waiter is not None
                member.join_waiter.set_result(
                    join_error(ErrorCode.rebalance_in_progress, member.member_id))
            if member.awaiting_sync:
                assert member.sync_waiter is not None
                member.sync_waiter.set_result({"error_code": ErrorCode.rebalance_in_progress,
                                               "assignment": b""})
        _quiesce(classic)
        if self.manager.store.groups.get(classic.group_id) is not classic:
            classic.members = {}
            classic.state = GroupState.DEAD
        for m in live.members.values():
            if m.uses_classic_protocol:
                m.session_deadline = loop_now + m.session_timeout_ms(0) / 1000

    # --- consumer -> classic ------------------------------------------------------------------

    def can_downgrade(self, group: ConsumerGroup, leaving: set[str]) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers: the members that stay all use
        the classic protocol (and at least one does), the policy allows it, and they fit in a
        classic group."""
        staying = [m for mid, m in group.members.items() if mid not in leaving]
        if not staying or not all(m.uses_classic_protocol for m in staying):
            return False
        if any(group.members[mid].uses_classic_protocol for mid in leaving
               if mid in group.members):
            return False
        if self.policy not in DOWNGRADE_POLICIES:
            log.info("Cannot downgrade consumer group %s to classic group because the online "
                     "downgrade is disabled.", group.group_id)
            return False
        if len(staying) > self.manager.config.classic_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group "
                     "size is greater than classic group max size.", group.group_id)
            return False
        return True

    def downgrade(self, group: ConsumerGroup, leaving: set[str]) -> list[RecordInput]:
        """Turn the consumer group into a classic group of the members that stay, and start a
        classic rebalance; the records written."""
        gid = group.group_id
        view = self.manager.topics()
        names = {t.topic_id: t.name for t in view.topics.values()} if view is not None else {}
        classic = Group(gid, protocol_type="consumer", generation=group.group_epoch)
        classic.state_timestamp = now_ms()
        for mid, m in group.members.items():
            if mid in leaving:
                continue
            meta = m.subscription.classic
            assert meta is not None
            classic.members[mid] = Member(
                mid, m.instance_id, m.subscription.client_id, m.subscription.client_host,
                m.subscription.rebalance_timeout_ms, meta.session_timeout_ms, "consumer",
                list(meta.protocols))
            if m.instance_id is not None:
                classic.static_members[m.instance_id] = mid
            if classic.leader_id is None:
                classic.leader_id = mid
        classic.protocol_name = classic.select_protocol()
        for mid, member in classic.members.items():
            target = group.target.get(mid, {})
            by_name = {names[t]: sorted(ps) for t, ps in target.items() if t in names}
            metadata = member.metadata(classic.protocol_name)
            version = subscription_version(metadata) if metadata else 0
            member.assignment = encode_assignment(by_name, version)
        classic.restore(GroupState.STABLE, classic.state_timestamp)
        records = self.manager.delete_records(group) + [group_record(classic)]
        self.manager.store.write_and_apply(gid, records)
        live = self.manager.store.groups[gid]
        log.info("[GroupId %s] Downgraded the consumer group to a classic group (generation %d,"
                 " %d member(s)).", gid, live.generation, len(live.members))
        if self.on_downgrade is not None:
            self.on_downgrade(live)
        return records


def _quiesce(group: Group) -> None:
    """A classic group that is no longer one: its rebalance timers and pending syncs go."""
    if group.rebalance_deadline is not None:
        group.rebalance_deadline.cancel()
        group.rebalance_deadline = None
    group.pending_sync.clear()
    group.pending_members.clear()

