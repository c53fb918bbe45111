"""ConsumerGroupHeartbeat (KIP-848): Kafka's GroupMetadataManager for consumer groups.

A heartbeat does three things, as Kafka's: (1) it creates or updates the member; a change of
its subscription, of the topics its regex resolves to, or of the subscribed topics' metadata
(their ids and partition counts, summed up in the group's metadata hash) bumps the group
epoch; (2) when the group epoch passed the target assignment's, the server-side assignor
computes a new target assignment (assignors.py); (3) the member reconciles towards its target
(consumer_reconciliation.py). Every change is a record (consumer_records.py) appended to the
group's ``__consumer_offsets`` partition and then replayed into the group
(consumer_group.py), so a coordinator that loads the partition gets the same group. The answer
waits until the records reached the partition's ISR.

A member leaves with epoch -1 (or -2: a static member that will come back, keeping its
partitions until its session ends); a member whose session (``group.consumer.session.timeout
.ms``) ends, or that does not revoke in its rebalance timeout, is fenced: removed, and the
group epoch bumped. Regular expressions (KIP-848: RE2 syntax, matched against whole topic
names, through the ``google-re2`` package as Kafka uses RE2/J) are resolved by the
coordinator, keeping the topics the heartbeating member may DESCRIBE, when one is new, and
again (at most every 10 s) when topics were created or deleted or
``group.consumer.regex.refresh.interval.ms`` passed.

Not here yet: classic-protocol members in consumer groups and the conversions between classic
and consumer groups (``group.consumer.migration.policy``); a non-empty classic group refuses
consumer heartbeats (GROUP_ID_NOT_FOUND), and an empty one becomes a consumer group.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import re2

from samsa.coordinator import assignors
from samsa.coordinator.consumer_classic import ClassicMembers
from samsa.coordinator.consumer_conversion import GroupConversion
from samsa.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    CurrentAssignment,
    MemberState,
    ResolvedRegex,
    Subscription,
)
from samsa.coordinator.consumer_reconciliation import Owned, reconcile
from samsa.coordinator.consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    ConsumerValue,
    GroupEpochValue,
    RegexValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    TopicPartitions,
    encode_consumer_key,
    encode_consumer_value,
)
from samsa.coordinator.group import Group
from samsa.coordinator.group_store import GroupStore, now_ms
from samsa.coordinator.records import GroupKey, encode_group_key
from samsa.errors import ErrorCode, KafkaError, error
from samsa.records.record import RecordInput

log = logging.getLogger(__name__)

Response = dict[str, Any]

# Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS: regexes are resolved again at most this often
REGEX_BATCH_REFRESH_S = 10.0

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad regex is the client's error, not the broker's log's


class TopicInfo(Protocol):
    name: str
    topic_id: uuid.UUID
    partitions: int


class TopicView(Protocol):
    """The cluster's topics as the coordinator sees them (the broker's TopicStore)."""

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = (assignors.UNIFORM, assignors.RANGE)
    regex_refresh_interval_ms: int = 600_000
    migration_policy: str = "bidirectional"
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgraded group must fit


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topic_names: tuple[str, ...] | None = None
    topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Owned = None


def compile_regex(regex: str) -> Any:
    """The RE2 pattern; KafkaError INVALID_REGULAR_EXPRESSION when it is not one."""
    try:
        return re2.compile(regex, options=_RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise error(ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
                    f"{reason}.") from None


def metadata_hash(metadata: Iterable[tuple[str, uuid.UUID, int]]) -> int:
    """The group's metadata hash over its subscribed topics (name, id, partitions), 0 for
    none. Kafka hashes with XXH3; any stable hash serves, as only this coordinator compares
    it (against what it stored before a failover)."""
    items = sorted(metadata)
    if not items:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name, topic_id, partitions in items:
        h.update(name.encode() + b"\0" + topic_id.bytes + struct.pack(">i", partitions))
    value = int.from_bytes(h.digest(), "big", signed=True)
    return value or 1


def record(kind: int, group_id: str, name: str = "",
           value: ConsumerValue | None = None) -> RecordInput:
    key = encode_consumer_key(ConsumerKey(kind, group_id, name))
    return RecordInput(None if value is None else encode_consumer_value(value), key)


def error_response(code: ErrorCode, message: str | None = None) -> Response:
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def assignment_field(parts: TopicPartitions) -> dict[str, Any]:
    return {"topic_partitions": [{"topic_id": t, "partitions": sorted(p)}
                                 for t, p in parts.items()]}


class ConsumerGroupManager:
    def __init__(self, store: GroupStore, config: ConsumerGroupConfig,
                 topics: Callable[[], TopicView | None]) -> None:
        self.store = store
        self.config = config
        self.topics = topics
        self.conversion = GroupConversion(self)
        self.classic = ClassicMembers(self)

    def can_upgrade(self, classic: Group) -> bool:
        return self.conversion.can_upgrade(classic)

    @property
    def default_assignor(self) -> str:
        return self.config.assignors[0]

    # --- the request --------------------------------------------------------------------------

    def validate(self, req: HeartbeatRequest, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST or
        UNSUPPORTED_ASSIGNOR."""
        def empty(value: str | None) -> bool:
            return value is not None and not value.strip()

        epoch = req.member_epoch
        if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and empty(
                req.member_id):
            raise error(ErrorCode.invalid_request, "MemberId can't be empty.")
        if empty(req.group_id):
            raise error(ErrorCode.invalid_request, "GroupId can't be empty.")
        if empty(req.instance_id):
            raise error(ErrorCode.invalid_request, "InstanceId can't be empty.")
        if empty(req.rack_id):
            raise error(ErrorCode.invalid_request, "RackId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise error(ErrorCode.invalid_request,
                            "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise error(ErrorCode.invalid_request,
                            "TopicPartitions must be empty when (re-)joining.")
            if req.topic_names is None and req.topic_regex is None:
                raise error(ErrorCode.invalid_request,
                            "Either SubscribedTopicNames or SubscribedTopicRegex must be "
                            "non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise error(ErrorCode.invalid_request, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise error(ErrorCode.invalid_request, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise error(ErrorCode.unsupported_assignor,
                        f"ServerAssignor {req.server_assignor} is not supported. Supported "
                        f"assignors: {', '.join(self.config.assignors)}.")

    async def heartbeat(self, req: HeartbeatRequest, *, version: int, client_id: str,
                        client_host: str,
                        describable: Callable[[set[str]], set[str]] | None = None
                        ) -> Response:
        """ConsumerGroupHeartbeat: the response's fields. ``describable`` keeps the topics the
        member's principal may DESCRIBE (its regex resolves to no others)."""
        try:
            self.validate(req, version)
            if not self.store.coordinates(req.group_id):
                return error_response(ErrorCode.not_coordinator)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response, records = self._leave(req)
            else:
                response, records = self._heartbeat(req, client_id, client_host, describable)
        except KafkaError as exc:
            return error_response(exc.code, str(exc) or None)
        except ValueError as exc:  # an id too long for a record key (an int16 length)
            return error_response(ErrorCode.invalid_request, str(exc))
        if records:
            failed = await self.store.wait_replicated(req.group_id)
            if failed is not None:
                return error_response(failed)
        return response

    # --- joining and heartbeating ---------------------------------------------------------------

    def _heartbeat(self, req: HeartbeatRequest, client_id: str, client_host: str,
                   describable: Callable[[set[str]], set[str]] | None
                   ) -> tuple[Response, list[RecordInput]]:
        group_id = req.group_id
        loop_now = asyncio.get_running_loop().time()
        records: list[RecordInput] = []
        joining = req.member_epoch == 0
        group = self.store.consumer_groups.get(group_id)
        register: ConsumerGroup | None = None
        upgraded: Group | None = None
        if group is None:
            if not joining:
                raise error(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
            classic = self.store.groups.get(group_id)
            if classic is not None and classic.members:
                if not self.can_upgrade(classic):
                    raise error(ErrorCode.group_id_not_found,
                                f"Group {group_id} is not a consumer group.")
                group = self.conversion.upgrade(classic, records)
                upgraded = classic
            else:
                if classic is not None:
                    # an empty classic group becomes a consumer group (its offsets stay)
                    records.append(RecordInput(None, encode_group_key(GroupKey(group_id))))
                group = register = ConsumerGroup(group_id)
        if len(group.members) >= self.config.max_size and (
                not req.member_id or req.member_id not in group.members):
            raise error(ErrorCode.group_max_size_reached,
                        f"The consumer group has reached its maximum capacity of "
                        f"{self.config.max_size} members.")
        member_id = req.member_id or str(uuid.uuid4())
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req)
        else:
            member = self._static_member(group, member_id, req, records)
        old = member.subscription
        new = Subscription(
            instance_id=req.instance_id if req.instance_id is not None else old.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else old.rack_id,
            client_id=client_id, client_host=client_host,
            topic_names=(tuple(req.topic_names) if req.topic_names is not None
                         else old.topic_names),
            topic_regex=req.topic_regex if req.topic_regex is not None else old.topic_regex,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else old.rebalance_timeout_ms),
            server_assignor=(req.server_assignor if req.server_assignor is not None
                             else old.server_assignor),
            classic=None)
        current, assigned_before = self.advance(group, member, new, req.owned, records,
                                                describable, loop_now, register)
        live = self.store.consumer_groups[group_id]
        live.members[member.member_id].session_deadline = loop_now + self._session_s()
        if upgraded is not None:
            self.conversion.upgraded(upgraded, live, loop_now)
        response: Response = {
            "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "member_id": member.member_id, "member_epoch": current.member_epoch,
            "heartbeat_interval": self.config.heartbeat_interval_ms, "assignment": None,
        }
        full = joining or (req.rebalance_timeout_ms != -1 and req.owned is not None and (
            req.topic_names is not None or req.topic_regex is not None))
        if full or current.assigned != assigned_before:
            response["assignment"] = assignment_field(current.assigned)
        return response, records

    def advance(self, group: ConsumerGroup, member: ConsumerMember, new: Subscription,
                owned: Owned, records: list[RecordInput],
                describable: Callable[[set[str]], set[str]] | None, loop_now: float,
                register: ConsumerGroup | None = None
                ) -> tuple[CurrentAssignment, TopicPartitions]:
        """The three steps of a heartbeat (or of a classic member's JoinGroup) once the member
        is known, with its new subscription: the group epoch, the target assignment, the
        member's reconciliation; the records written and replayed (``register``: the new
        group they create). The member's new current assignment and its assigned partitions
        before."""
        group_id = group.group_id
        old = member.subscription
        bump = group.group_epoch == 0
        if new != old:
            records.append(record(MEMBER_METADATA, group_id, member.member_id, new.value()))
            bump |= set(new.topic_names) != set(old.topic_names)
        updated = ConsumerMember(member.member_id, new, member.current)
        # the members as they will be: this one updated, a static member it replaces gone
        members = dict(group.members)
        replaced = group.static_members.get(new.instance_id) if new.instance_id else None
        if replaced is not None and replaced != member.member_id:
            members.pop(replaced, None)
        members[member.member_id] = updated
        regexes, regex_bump = self._update_regexes(group, old, new, members, records,
                                                   describable, loop_now)
        bump |= regex_bump
        bump |= self._assignor(group.members.values()) != self._assignor(members.values())
        # the subscription's metadata: a change bumps the group epoch
        view = self.topics()
        names = group.subscribed_topic_names(regexes, list(members.values()))
        topics = self._existing(view, names)
        new_hash = metadata_hash((t.name, t.topic_id, t.partitions) for t in topics.values())
        group_epoch = group.group_epoch
        if bump or new_hash != group.metadata_hash:
            group_epoch += 1
            records.append(record(GROUP_METADATA, group_id, value=GroupEpochValue(
                group_epoch, new_hash)))
            log.info("[GroupId %s] Bumped group epoch to %d.", group_id, group_epoch)
        # the target assignment
        if group_epoch > group.assignment_epoch:
            targets = self._assign(group, members, regexes, view, group_epoch, records,
                                   updated)
            target_epoch, target = group_epoch, targets.get(member.member_id, {})
        else:
            target_epoch = group.assignment_epoch
            target = group.target_of(member.member_id, new.instance_id)
        # the member's way towards it
        current = reconcile(member.current, target_epoch, target, group.partition_epoch, owned)
        reconciled = current != member.current
        assigned_before = member.current.assigned  # the replay below updates ``member``
        if reconciled:
            records.append(record(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id,
                                  current.value()))
        self.store.write_and_apply(group_id, records, register)
        live_member = self.store.consumer_groups[group_id].members[member.member_id]
        if reconciled and not new.classic:  # classic members revoke by rejoining
            if current.state == MemberState.UNREVOKED_PARTITIONS:
                live_member.revocation_deadline = (
                    loop_now + max(new.rebalance_timeout_ms, 0) / 1000, current.member_epoch)
            else:
                live_member.revocation_deadline = None
        return current, assigned_before

    def _dynamic_member(self, group: ConsumerGroup, member_id: str,
                        req: HeartbeatRequest) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            if req.member_epoch != 0:
                raise error(ErrorCode.unknown_member_id,
                            f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s joins the consumer group using the consumer "
                     "protocol.", group.group_id, member_id)
            return ConsumerMember(member_id)
        _check_epoch(member, req.member_epoch, req.owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest,
                       records: list[RecordInput]) -> ConsumerMember:
        assert req.instance_id is not None
        existing = group.static_member(req.instance_id)
        if req.member_epoch == 0:
            if existing is None:
                return group.members.get(member_id) or ConsumerMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise error(ErrorCode.unreleased_instance_id,
                            f"Static member {member_id} with instance id {req.instance_id} "
                            f"cannot join the group because the instance id is owned by "
                            f"{existing.member_id} member.")
            # the instance comes back: a new member id takes over the old one's partitions
            new = ConsumerMember(member_id, existing.subscription, replace(
                existing.current, member_epoch=0, previous_member_epoch=0))
            gid = group.group_id
            records += self.member_tombstones(gid, existing.member_id)
            records.append(record(MEMBER_METADATA, gid, member_id, new.subscription.value()))
            records.append(record(TARGET_ASSIGNMENT_MEMBER, gid, member_id,
                                  TargetAssignmentMemberValue(
                                      group.target.get(existing.member_id, {}))))
            records.append(record(CURRENT_MEMBER_ASSIGNMENT, gid, member_id,
                                  new.current.value()))
            log.info("[GroupId %s] Static member with instance id %s re-joins the consumer "
                     "group. Created a new member %s to replace the existing member %s.",
                     gid, req.instance_id, member_id, existing.member_id)
            return new
        if existing is None:
            raise error(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise error(ErrorCode.fenced_instance_id,
                        f"Static member {member_id} with instance id {req.instance_id} was "
                        f"fenced by member {existing.member_id}.")
        _check_epoch(existing, req.member_epoch, req.owned)
        return existing

    def _assignor(self, members: Iterable[ConsumerMember]) -> str:
        counts: dict[str, int] = {}
        for m in members:
            name = m.subscription.server_assignor
            if name:
                counts[name] = counts.get(name, 0) + 1
        return max(counts, key=lambda n: counts[n]) if counts else self.default_assignor

    def _existing(self, view: TopicView | None, names: Iterable[str]) -> dict[str, TopicInfo]:
        if view is None:
            return {}
        known = view.topics
        return {name: known[name] for name in names if name in known}

    def _assign(self, group: ConsumerGroup, members: dict[str, ConsumerMember],
                regexes: dict[str, ResolvedRegex], view: TopicView | None, epoch: int,
                records: list[RecordInput], updated: ConsumerMember
                ) -> dict[str, TopicPartitions]:
        specs = {}
        partitions: dict[uuid.UUID, int] = {}
        for member_id, m in members.items():
            names = group.subscribed_topic_names(regexes, [m])
            topics = self._existing(view, names)
            for t in topics.values():
                partitions[t.topic_id] = t.partitions
            current = group.target.get(member_id)
            if current is None and m is updated:
                current = group.target_of(member_id, m.instance_id)
            specs[member_id] = assignors.MemberSpec(
                m.instance_id, frozenset(t.topic_id for t in topics.values()), current or {})
        name = self._assignor(members.values())
        try:
            targets = assignors.assign(name, specs, partitions)
        except assignors.PartitionAssignorError as exc:
            raise error(ErrorCode.unknown_server_error,
                        f"Failed to compute a new target assignment for epoch {epoch}: "
                        f"{exc}") from None
        for member_id in members:
            new = targets.get(member_id, {})
            if group.target.get(member_id) != new:
                records.append(record(TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id,
                                      TargetAssignmentMemberValue(new)))
        records.append(record(TARGET_ASSIGNMENT_METADATA, group.group_id,
                              value=TargetAssignmentEpochValue(epoch, now_ms())))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' "
                 "assignor.", group.group_id, epoch, name)
        return targets

    # --- regular expressions --------------------------------------------------------------------

    def _update_regexes(self, group: ConsumerGroup, old: Subscription, new: Subscription,
                        members: dict[str, ConsumerMember], records: list[RecordInput],
                        describable: Callable[[set[str]], set[str]] | None, loop_now: float
                        ) -> tuple[dict[str, ResolvedRegex], bool]:
        """The group's resolved regexes once this heartbeat is applied, and whether they
        changed what the group subscribes to."""
        subscribed = group.regex_subscribers()
        regexes = dict(group.regexes)
        bump = False
        refresh = False
        if old.topic_regex != new.topic_regex:
            if old.topic_regex and subscribed.get(old.topic_regex, 0) == 1:
                records.append(record(REGULAR_EXPRESSION, group.group_id, old.topic_regex))
                regexes.pop(old.topic_regex, None)
            if new.topic_regex:
                if subscribed.get(new.topic_regex, 0) == 0:
                    compile_regex(new.topic_regex)
                    refresh = True
                else:
                    bump = new.topic_regex in regexes
        wanted = {m.subscription.topic_regex for m in members.values()
                  if m.subscription.topic_regex}
        if not wanted:
            return regexes, bump
        since = loop_now - group.regex_refreshed_at
        if not refresh and since < REGEX_BATCH_REFRESH_S:
            return regexes, bump  # the topics' names are not even looked at
        view = self.topics()
        names = frozenset(view.topics) if view is not None else frozenset()
        if not refresh:
            refresh = (any(r not in regexes for r in wanted) or names != group.regex_topic_names
                       or since * 1000 >= self.config.regex_refresh_interval_ms)
        if not refresh:
            return regexes, bump
        group.regex_refreshed_at, group.regex_topic_names = loop_now, names
        stamp = now_ms()
        for regex in sorted(wanted):
            try:
                pattern = compile_regex(regex)
            except KafkaError:
                log.error("[GroupId %s] Couldn't parse regular expression '%s'. Ignoring it.",
                          group.group_id, regex)
                continue
            matched = {name for name in names if pattern.fullmatch(name)}
            if describable is not None and matched:
                matched = describable(matched)
            resolved = ResolvedRegex(frozenset(matched), stamp, stamp)
            before = regexes.get(regex)
            if before is None or before.topics != resolved.topics:
                bump = True
            regexes[regex] = resolved
            records.append(record(REGULAR_EXPRESSION, group.group_id, regex, RegexValue(
                tuple(sorted(resolved.topics)), resolved.version, resolved.timestamp)))
        return regexes, bump

    # --- leaving and fencing --------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> tuple[Response, list[RecordInput]]:
        group = self.store.consumer_groups.get(req.group_id)
        if group is None:
            raise error(ErrorCode.group_id_not_found, f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise error(ErrorCode.unknown_member_id,
                            f"Member {req.member_id} is not a member of group {req.group_id}.")
        else:
            found = group.static_member(req.instance_id)
            if found is None:
                raise error(ErrorCode.unknown_member_id,
                            f"Instance id {req.instance_id} is unknown.")
            if found.member_id != req.member_id:
                raise error(ErrorCode.fenced_instance_id,
                            f"Static member {req.member_id} with instance id {req.instance_id} "
                            f"was fenced by member {found.member_id}.")
            member = found
        response = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
                    "member_id": member.member_id, "member_epoch": req.member_epoch,
                    "heartbeat_interval": 0, "assignment": None}
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("[GroupId %s] Static Member %s with instance id %s temporarily left the "
                     "consumer group.", group.group_id, member.member_id, req.instance_id)
            leaving = replace(member.current, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                              pending_revocation={})
            records = [record(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id,
                              leaving.value())]
            self.store.write_and_apply(group.group_id, records)
            return response, records
        log.info("[GroupId %s] Member %s left the consumer group.", group.group_id,
                 member.member_id)
        return response, self.fence(group, member)

    def fence(self, group: ConsumerGroup, member: ConsumerMember) -> list[RecordInput]:
        """Remove the member and bump the group epoch (Kafka's consumerGroupFenceMember), or
        turn the group into a classic group when only classic members stay and the migration
        policy allows it; the records written."""
        if self.conversion.can_downgrade(group, {member.member_id}):
            return self.conversion.downgrade(group, {member.member_id})
        return self.remove_members(group, [member])

    def remove_members(self, group: ConsumerGroup, leaving: list[ConsumerMember]
                       ) -> list[RecordInput]:
        """The members' records deleted, the group epoch bumped; the records written."""
        gid = group.group_id
        gone = {m.member_id for m in leaving}
        records = [r for m in leaving for r in self.member_tombstones(gid, m.member_id)]
        remaining = [m for m in group.members.values() if m.member_id not in gone]
        regexes = dict(group.regexes)
        counts = group.regex_subscribers()
        for m in leaving:
            regex = m.subscription.topic_regex
            if regex and regex in counts:
                counts[regex] -= 1
                if counts[regex] == 0:
                    records.append(record(REGULAR_EXPRESSION, gid, regex))
                    regexes.pop(regex, None)
        names = group.subscribed_topic_names(regexes, remaining)
        topics = self._existing(self.topics(), names)
        new_hash = metadata_hash((t.name, t.topic_id, t.partitions) for t in topics.values())
        records.append(record(GROUP_METADATA, gid, value=GroupEpochValue(
            group.group_epoch + 1, new_hash)))
        self.store.write_and_apply(gid, records)
        return records

    @staticmethod
    def member_tombstones(group_id: str, member_id: str) -> list[RecordInput]:
        """A member's records deleted, in Kafka's order."""
        return [record(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                record(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                record(MEMBER_METADATA, group_id, member_id)]

    def delete_records(self, group: ConsumerGroup) -> list[RecordInput]:
        """Every record of the group deleted (DeleteGroups, expiry), in Kafka's order."""
        gid = group.group_id
        records = [record(CURRENT_MEMBER_ASSIGNMENT, gid, m) for m in group.members]
        records += [record(TARGET_ASSIGNMENT_MEMBER, gid, m) for m in group.members]
        records.append(record(TARGET_ASSIGNMENT_METADATA, gid))
        records += [record(MEMBER_METADATA, gid, m) for m in group.members]
        records.append(record(PARTITION_METADATA, gid))
        records += [record(REGULAR_EXPRESSION, gid, r) for r in group.regexes]
        records.append(record(GROUP_METADATA, gid))
        return records

    # --- timers ---------------------------------------------------------------------------------

    def _session_s(self) -> float:
        return self.config.session_timeout_ms / 1000

    def start_sessions(self, groups: Iterable[ConsumerGroup]) -> None:
        """Loaded groups: every member's session starts now (Kafka's onLoaded), and members
        revoking get their rebalance timeout again."""
        now = asyncio.get_running_loop().time()
        for group in groups:
            for m in group.members.values():
                m.session_deadline = now + m.session_timeout_ms(
                    self.config.session_timeout_ms) / 1000
                if m.current.state == MemberState.UNREVOKED_PARTITIONS \
                        and not m.uses_classic_protocol:
                    m.revocation_deadline = (
                        now + max(m.subscription.rebalance_timeout_ms, 0) / 1000,
                        m.member_epoch)

    def expire(self, now: float) -> None:
        """Fence the members whose session ended, or that did not revoke in time, by loop
        time ``now``."""
        for group in list(self.store.consumer_groups.values()):
            if not self.store.coordinates(group.group_id):
                continue
            for member in list(group.members.values()):
                reason = None
                if now >= member.session_deadline:
                    reason = "the member session expired"
                elif member.join_deadline is not None and now >= member.join_deadline:
                    reason = "it did not rejoin within its rebalance timeout"
                elif member.sync_deadline is not None and now >= member.sync_deadline:
                    reason = "it did not sync within its rebalance timeout"
                elif (member.revocation_deadline is not None
                      and now >= member.revocation_deadline[0]):
                    if member.revocation_deadline[1] == member.member_epoch:
                        reason = (f"it failed to transition from epoch "
                                  f"{member.member_epoch} within "
                                  f"{member.subscription.rebalance_timeout_ms}ms")
                    else:
                        member.revocation_deadline = None
                if reason is None:
                    continue
                log.info("[GroupId %s] Member %s fenced from the group because %s.",
                         group.group_id, member.member_id, reason)
                try:
                    self.fence(group, member)
                except KafkaError as exc:  # the partition moved meanwhile
                    log.info("[GroupId %s] could not fence %s: %s", group.group_id,
                             member.member_id, exc)
                    return
                still = self.store.consumer_groups.get(group.group_id)
                if still is None:
                    break  # it became a classic group
                group = still

    # --- offsets of consumer groups -------------------------------------------------------------

    def commit_error(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                     epoch: int, version: int, transactional: bool) -> ErrorCode | None:
        """Whether a member may commit offsets (Kafka's ConsumerGroup.validateOffsetCommit);
        None, or the error it gets."""
        if epoch < 0 and not group.members:
            return None
        if transactional and epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if not transactional and not member.uses_classic_protocol and version < 9:
            return ErrorCode.unsupported_version
        if epoch != member.member_epoch:
            if member.uses_classic_protocol or transactional:
                return ErrorCode.illegal_generation
            return ErrorCode.stale_member_epoch
        return None

    def fetch_error(self, group: ConsumerGroup, member_id: str | None, epoch: int
                    ) -> ErrorCode | None:
        """Whether a member may fetch the group's offsets (Kafka's validateOffsetFetch)."""
        if member_id is None and epoch < 0:
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if epoch != member.member_epoch:
            return (ErrorCode.illegal_generation if member.uses_classic_protocol
                    else ErrorCode.stale_member_epoch)
        return None

    # --- ConsumerGroupDescribe -------------------------------------------------------------------

    def describe(self, group_id: str) -> Response:
        """One group of ConsumerGroupDescribe (without its authorized operations)."""
        group = self.store.consumer_groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group."
                       if group_id in self.store.groups and self.store.groups[group_id].members
                       else f"Group {group_id} not found.")
            return {"error_code": ErrorCode.group_id_not_found, "error_message": message,
                    "group_id": group_id, "group_state": "", "group_epoch": 0,
                    "assignment_epoch": 0, "assignor_name": "", "members": []}
        view = self.topics()
        by_id: dict[uuid.UUID, str] = {}
        if view is not None:
            by_id = {t.topic_id: t.name for t in view.topics.values()}

        def described(parts: TopicPartitions) -> dict[str, Any]:
            return {"topic_partitions": [
                {"topic_id": t, "topic_name": by_id.get(t, ""), "partitions": sorted(p)}
                for t, p in parts.items() if t in by_id]}

        return {
            "error_code": ErrorCode.none, "error_message": None, "group_id": group_id,
            "group_state": group.state.value, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.preferred_assignor() or self.default_assignor,
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id,
                "rack_id": m.subscription.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.subscription.client_id,
                "client_host": m.subscription.client_host,
                "subscribed_topic_names": list(m.subscription.topic_names),
                # Kafka's member keeps "" for "no regex"
                "subscribed_topic_regex": m.subscription.topic_regex or "",
                "assignment": described(m.current.assigned),
                "target_assignment": described(group.target.get(m.member_id, {})),
                "member_type": 0 if m.uses_classic_protocol else 1,
            } for m in group.members.values()],
        }


def _check_epoch(member: ConsumerMember, epoch: int, owned: Owned) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: FENCED_MEMBER_EPOCH unless the epoch
    is the member's, or its previous one with no partition beyond its assignment (the response
    that bumped it was lost); 0 rejoins."""
    if epoch == 0:
        return
    known = member.member_epoch
    if epoch > known:
        raise error(ErrorCode.fenced_member_epoch,
                    f"The consumer group member has a greater member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({known}). The member must abandon "
                    f"all its partitions and rejoin.")
    if epoch < known and (epoch != member.current.previous_member_epoch
                          or not _is_subset(owned, member.current.assigned)):
        raise error(ErrorCode.fenced_member_epoch,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({known}). The member must abandon "
                    f"all its partitions and rejoin.")


def _is_subset(owned: Owned, assigned: TopicPartitions) -> bool:
    if owned is None:
        return False
    return all(topic_id in assigned and set(ps) <= assigned[topic_id]
               for topic_id, ps in owned.items())

