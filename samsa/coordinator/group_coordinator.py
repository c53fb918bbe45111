"""Kafka's classic group coordinator: joins, syncs, heartbeats, leaves, committed offsets.

Every group and every committed offset is a record in ``__consumer_offsets`` (Kafka's record
formats, samsa/coordinator/records.py), in the partition ``partition_for(group)``; the broker
reads them back when it starts. Responses to JoinGroup and SyncGroup are futures completed when
the rebalance reaches them; timers (asyncio) end a rebalance at its timeout and remove members
whose session expired.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from samsa.config import BrokerConfig
from samsa.coordinator.group import Group, GroupState, Member
from samsa.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from samsa.coordinator.writer import PartitionWriter
from samsa.errors import CorruptRecordError, ErrorCode, KafkaError, error
from samsa.records.batch import read_header
from samsa.records.control import read_marker
from samsa.records.record import RecordInput, decode_records, encode_batch

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
UNKNOWN_MEMBER = "The coordinator is not aware of this member."
_EXPIRY_TICK_S = 0.25
Response = dict[str, Any]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, writer: PartitionWriter,
                 partition_exists: Callable[[str, int], bool]) -> None:
        """``writer`` reaches the __consumer_offsets partitions; ``partition_exists`` says
        whether the cluster has a partition offsets are committed for."""
        self.writer = writer
        self.partition_exists = partition_exists
        c = config
        self.num_partitions = c.get("offsets.topic.num.partitions")
        self.initial_delay_ms = c.get("group.initial.rebalance.delay.ms")
        self.min_session_ms = c.get("group.min.session.timeout.ms")
        self.max_session_ms = c.get("group.max.session.timeout.ms")
        self.max_size = c.get("group.max.size")
        self.metadata_max_bytes = c.get("offset.metadata.max.bytes")
        self.retention_ms = c.get("offsets.retention.minutes") * 60_000
        self.retention_check_s = c.get("offsets.retention.check.interval.ms") / 1000
        self.commit_timeout_s = c.get("offsets.commit.timeout.ms") / 1000
        self.groups: dict[str, Group] = {}
        # (__consumer_offsets partition, producer id) -> groups with offsets pending in that
        # producer's transaction (Kafka's openGroupsForProducer)
        self._txn_groups: dict[tuple[int, int], set[str]] = {}
        # while loading: the (group, key) pairs already read from the group's own partition
        self._loaded_at_home: set[tuple[str, object]] = set()
        self._loading: int | None = None
        self._task: asyncio.Task | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Load every group and offset from __consumer_offsets, start the expiry timer."""
        for index in self.writer.hosted():
            self._loading = index
            self._load_partition(index)
        self._loading = None
        self._loaded_at_home.clear()
        loop = asyncio.get_running_loop()
        for group in self.groups.values():
            for member in group.members.values():
                member.last_heartbeat = loop.time()
        self._task = loop.create_task(self._expire_loop())

    def _load_partition(self, index: int) -> None:
        for batch in self.writer.batches(index):
            header = read_header(batch)
            if header.is_control:
                marker = read_marker(batch)
                if marker is not None:
                    self.complete_txn_offsets(index, header.producer_id, marker.commit)
                continue
            pid = header.producer_id if header.is_transactional else None
            for record in decode_records(batch):
                if record.key is not None:
                    self._apply(record.key, record.value, record.offset, pid)

    def _apply(self, key_bytes: bytes, value: bytes | None, position: int,
               txn_pid: int | None = None) -> None:
        try:
            self._apply_record(key_bytes, value, position, txn_pid)
        except CorruptRecordError as exc:  # e.g. record types of newer Kafka versions
            log.warning("skipping a %s record samsa cannot read: %s", OFFSETS_TOPIC, exc)

    def _superseded(self, group: str, key: object) -> bool:
        """While loading: a record outside its group's own partition (written before samsa
        placed groups exactly as Kafka does) loses to what that partition holds."""
        if self._loading is None:
            return False
        if partition_for(group, self.num_partitions) == self._loading:
            self._loaded_at_home.add((group, key))
            return False
        return (group, key) in self._loaded_at_home

    def _apply_record(self, key_bytes: bytes, value: bytes | None, position: int,
                      txn_pid: int | None) -> None:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetKey):
            tp = (key.topic, key.partition)
            if self._superseded(key.group, tp):
                return
            group = self.groups.get(key.group) or self._new_group(key.group)
            committed = decode_offset_value(value)
            if txn_pid is not None:  # waits for its transaction's marker
                if committed is not None:
                    self._add_pending(group, txn_pid, {tp: (committed, position)})
            elif committed is None:
                group.drop_offset(tp)
            else:
                group.set_offset(tp, committed, position)
            return
        assert isinstance(key, GroupKey)
        if self._superseded(key.group, None):
            return
        stored = decode_group_value(value)
        if stored is None:
            self.groups.pop(key.group, None)
            return
        group = self.groups.get(key.group) or self._new_group(key.group)
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol
        group.generation = stored.generation
        group.leader_id = stored.leader
        group.members = {}
        group.static_members = {}
        for m in stored.members:
            group.members[m.member_id] = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms, stored.protocol_type,
                [(stored.protocol or "", m.subscription)], m.assignment,
            )
            if m.group_instance_id:
                group.static_members[m.group_instance_id] = m.member_id
        state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.restore(state, stored.current_state_timestamp)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for group in self.groups.values():
            for member in group.members.values():
                for waiter in (member.join_waiter, member.sync_waiter):
                    if waiter is not None and not waiter.done():
                        waiter.set_result({"error_code": ErrorCode.coordinator_not_available})

    # --- persistence -------------------------------------------------------------------------

    def ensure_offsets_topic(self) -> None:
        self.writer.ensure_topic()

    def load_partition(self, index: int) -> None:
        """Cluster mode: this broker became the leader of a __consumer_offsets partition:
        read the groups stored there. Their members' sessions start now (as Kafka schedules
        every loaded member's heartbeat expiration): they have been heartbeating to the
        previous coordinator, not to this one."""
        self._loading = index
        try:
            self._load_partition(index)
        finally:
            self._loading = None
            self._loaded_at_home.clear()
        now = asyncio.get_running_loop().time()
        for group_id, group in self.groups.items():
            if partition_for(group_id, self.num_partitions) == index:
                for member in group.members.values():
                    member.last_heartbeat = now

    def unload_partition(self, index: int) -> None:
        """Cluster mode: this broker stopped leading a __consumer_offsets partition. Its groups
        go (the new leader loads them); members waiting in a join or a sync are told
        NOT_COORDINATOR and find the new coordinator."""
        for group_id in [g for g in self.groups if partition_for(g, self.num_partitions) == index]:
            group = self.groups.pop(group_id)
            if group.rebalance_deadline is not None:
                group.rebalance_deadline.cancel()
            group.transition(GroupState.DEAD, now_ms())
            for member in group.members.values():
                if member.awaiting_join:
                    assert member.join_waiter is not None
                    member.join_waiter.set_result(
                        _join_error(ErrorCode.not_coordinator, member.member_id))
                if member.awaiting_sync:
                    assert member.sync_waiter is not None
                    member.sync_waiter.set_result({"error_code": ErrorCode.not_coordinator})

    def coordinates(self, group_id: str) -> bool:
        """Whether this broker coordinates the group: always on a single node; in cluster mode
        only while it leads the group's __consumer_offsets partition. Elsewhere a group
        request is answered NOT_COORDINATOR (the client finds the coordinator again), never
        from a state that another broker now owns or that this broker never loaded."""
        return self.writer.owns(partition_for(group_id, self.num_partitions))

    def _write(self, group_id: str, records: list[RecordInput]) -> int:
        """Append records to the group's __consumer_offsets partition (acks=all on one node);
        the offset of the first (-1 when there is none)."""
        if not records:
            return -1
        self.ensure_offsets_topic()
        index = partition_for(group_id, self.num_partitions)
        return self.writer.append(index, encode_batch(records, timestamp=now_ms()))

    async def wait_replicated(self, group_id: str) -> ErrorCode | None:
        """Cluster mode: wait until what was written for the group reached the ISR of its
        __consumer_offsets partition (Kafka's offsets.commit.required.acks=-1), at most
        offsets.commit.timeout.ms; None when it did, else the error the client should get
        (Kafka's: COORDINATOR_NOT_AVAILABLE on a timeout, NOT_COORDINATOR after a move)."""
        return await self.writer.wait_replicated(partition_for(group_id, self.num_partitions),
                                                 self.commit_timeout_s)

    def _group_record(self, group: Group) -> RecordInput:
        members = [
            MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms,
                        m.metadata(group.protocol_name), m.assignment)
            for m in group.members.values()
        ]
        value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name,
                           group.leader_id, group.state_timestamp, members)
        return RecordInput(encode_group_value(value), encode_group_key(GroupKey(group.group_id)))

    def _store_group(self, group: Group) -> None:
        self._write(group.group_id, [self._group_record(group)])

    # --- groups and members ------------------------------------------------------------------

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id)
        group.state_timestamp = now_ms()
        self.groups[group_id] = group
        return group

    def _check_member(
        self, group: Group | None, member_id: str, instance_id: str | None
    ) -> Member:
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

    async def join(
        self, *, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
        protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int, client_id: str,
        client_host: str, version: int,
    ) -> Response:
        if not group_id:
            return _join_error(ErrorCode.invalid_group_id, member_id)
        if not self.coordinates(group_id):
            return _join_error(ErrorCode.not_coordinator, member_id)
        if not self.min_session_ms <= session_ms <= self.max_session_ms:
            return _join_error(ErrorCode.invalid_session_timeout, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _join_error(ErrorCode.unknown_member_id, member_id)
            group = self._new_group(group_id)
        if group.state == GroupState.DEAD:
            return _join_error(ErrorCode.coordinator_not_available, member_id)
        names = {name for name, _ in protocols}
        if not protocols or not protocol_type or (group.members and (
            protocol_type != group.protocol_type or not names & group.supported_protocols()
        )):
            return _join_error(ErrorCode.inconsistent_group_protocol, member_id)
        loop = asyncio.get_running_loop()
        known_id = group.static_members.get(instance_id) if instance_id is not None else None
        static_restart = False
        if known_id is not None and known_id != member_id:
            if member_id:
                return _join_error(ErrorCode.fenced_instance_id, member_id)
            assert instance_id is not None
            restarted = self._replace_static_member(group, instance_id, client_id)
            if group.state == GroupState.STABLE:  # KIP-345: no rebalance for the others
                restarted.protocols = protocols
                restarted.session_timeout_ms = session_ms
                restarted.rebalance_timeout_ms = rebalance_ms
                self._store_group(group)
                return self._static_rejoin_result(group, restarted, known_id, version)
            member_id = restarted.member_id
            static_restart = True
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if instance_id is None and version >= 4:  # KIP-394: the id comes back in a rejoin
                group.pending_members[new_id] = (loop.time(), session_ms)
                return _join_error(ErrorCode.member_id_required, new_id)
            member_id = new_id
        elif member_id not in group.members and member_id not in group.pending_members:
            return _join_error(ErrorCode.unknown_member_id, member_id)

        member = group.members.get(member_id)
        if member is None:
            if len(group.members) >= self.max_size:
                return _join_error(ErrorCode.group_max_size_reached, member_id)
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
            return self._join_result(group, member)  # nothing changed: the current generation
        if group.state == GroupState.COMPLETING_REBALANCE and not changed:
            return self._join_result(group, member)
        waiter: asyncio.Future[Response] = loop.create_future()
        member.join_waiter = waiter
        if group.state != GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group)
        else:
            self._extend_initial_delay(group)
        self._try_complete_join(group)
        return await waiter

    def _replace_static_member(self, group: Group, instance_id: str, client_id: str) -> Member:
        """A static member restarted: it gets a new member id and keeps its assignment; the
        old id is fenced."""
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        for waiter in (old.join_waiter, old.sync_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(_join_error(ErrorCode.fenced_instance_id, old_id))
        new_id = f"{client_id}-{uuid.uuid4()}"
        member = Member(new_id, instance_id, client_id, old.client_host, old.rebalance_timeout_ms,
                        old.session_timeout_ms, old.protocol_type, old.protocols, old.assignment,
                        asyncio.get_running_loop().time())
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        return member

    def _static_rejoin_result(
        self, group: Group, member: Member, old_id: str, version: int
    ) -> Response:
        """A restarted static member of a Stable group: if it leads, it must not run a new
        assignment: v9+ says so (skip_assignment), older versions name the old leader id."""
        result = self._join_result(group, member)
        if member.member_id == group.leader_id:
            if version >= 9:
                result["skip_assignment"] = True
            else:
                result.update(leader=old_id, members=[])
        return result

    def _join_result(self, group: Group, member: Member) -> Response:
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

    def _prepare_rebalance(self, group: Group) -> None:
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

    def _extend_initial_delay(self, group: Group) -> None:
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

    def _try_complete_join(self, group: Group) -> None:
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
                self._remove_member(group, member)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol_name = group.leader_id = None
            group.transition(GroupState.EMPTY, now_ms())
            self._store_group(group)
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
                member.join_waiter.set_result(self._join_result(group, member))
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
            self._remove_member(group, member)
        if late:
            self._member_left(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        for waiter in (member.join_waiter, member.sync_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(_join_error(ErrorCode.unknown_member_id, member.member_id))

    def _member_left(self, group: Group) -> None:
        """After removals: rebalance the rest, or finish the rebalance in progress."""
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group)
            else:  # a rebalance with nobody to join it, as Kafka's ends at once
                group.generation += 1
                group.protocol_name = group.leader_id = None
                group.transition(GroupState.PREPARING_REBALANCE, now_ms())
                group.transition(GroupState.EMPTY, now_ms())
                self._store_group(group)
        elif group.state == GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    async def sync(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> Response:
        if not group_id:
            return {"error_code": ErrorCode.invalid_group_id, "assignment": b""}
        if not self.coordinates(group_id):
            return {"error_code": ErrorCode.not_coordinator, "assignment": b""}
        group = self.groups.get(group_id)
        try:
            member = self._check_member(group, member_id, instance_id)
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
            return self._sync_result(group, member)
        if group.state != GroupState.COMPLETING_REBALANCE:
            return {"error_code": ErrorCode.unknown_member_id, "assignment": b""}
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.transition(GroupState.STABLE, now_ms())
            self._store_group(group)
            for m in group.members.values():
                if m.awaiting_sync:
                    assert m.sync_waiter is not None
                    m.sync_waiter.set_result(self._sync_result(group, m))
        return await waiter

    @staticmethod
    def _sync_result(group: Group, member: Member) -> Response:
        return {"error_code": ErrorCode.none, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "assignment": member.assignment}

    def heartbeat(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        if not self.coordinates(group_id):
            return ErrorCode.not_coordinator
        group = self.groups.get(group_id)
        try:
            member = self._check_member(group, member_id, instance_id)
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
        if not self.coordinates(group_id):
            return [ErrorCode.not_coordinator] * len(members)
        group = self.groups.get(group_id)
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
                member = self._check_member(group, member_id, instance_id)
            except KafkaError as exc:
                results.append(exc.code)
                continue
            self._remove_member(group, member)
            removed = True
            results.append(ErrorCode.none)
        if group is not None and removed:
            self._member_left(group)
        return results

    async def _expire_loop(self) -> None:
        loop = asyncio.get_running_loop()
        last_retention = loop.time()
        while True:
            await asyncio.sleep(_EXPIRY_TICK_S)
            try:
                now = loop.time()
                for group in list(self.groups.values()):
                    self._expire_members(group, now)
                if now - last_retention >= self.retention_check_s:
                    last_retention = now
                    self.expire_offsets(now_ms())
            except Exception:
                log.exception("group expiry failed; retrying at the next tick")

    def _expire_members(self, group: Group, now: float) -> None:
        expired = [
            m for m in group.members.values()
            if not m.awaiting_join and not m.awaiting_sync
            and now - m.last_heartbeat > m.session_timeout_ms / 1000
        ]
        for member in expired:
            log.info("group %s: member %s's session expired", group.group_id, member.member_id)
            self._remove_member(group, member)
        stale = [mid for mid, (at, session_ms) in group.pending_members.items()
                 if now - at > session_ms / 1000]
        for member_id in stale:
            del group.pending_members[member_id]
        if expired or stale:
            self._member_left(group)

    # --- offsets -------------------------------------------------------------------------------

    def commit(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]], version: int,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Commit (topic, partition, offset, leader epoch, metadata) entries."""
        if not self.coordinates(group_id):
            return {(t, p): ErrorCode.not_coordinator for t, p, *_ in offsets}
        group = self.groups.get(group_id)
        failure = self._commit_check(group, generation, member_id, instance_id, version)
        if failure is not None:
            return {(t, p): failure for t, p, *_ in offsets}
        group = self.groups.get(group_id) or self._new_group(group_id)
        results, values, records = self._offset_records(group_id, offsets)
        first = self._write(group_id, records)
        for i, (tp, value) in enumerate(values.items()):
            group.set_offset(tp, value, first + i)
        return results

    def _offset_records(
        self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]]
    ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetValue],
               list[RecordInput]]:
        """Check each (topic, partition, offset, leader epoch, metadata): (error per partition,
        the values to store, their __consumer_offsets records)."""
        results: dict[tuple[str, int], ErrorCode] = {}
        values: dict[tuple[str, int], OffsetValue] = {}
        records = []
        stamp = now_ms()
        for topic, partition, offset, epoch, metadata in offsets:
            if not self.partition_exists(topic, partition):  # hosted here or not
                results[(topic, partition)] = ErrorCode.unknown_topic_or_partition
                continue
            if metadata is not None and len(metadata.encode()) > self.metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.offset_metadata_too_large
                continue
            values[(topic, partition)] = OffsetValue(offset, epoch, metadata or "", stamp)
            records.append(RecordInput(encode_offset_value(values[(topic, partition)]),
                                       encode_offset_key(OffsetKey(group_id, topic, partition))))
            results[(topic, partition)] = ErrorCode.none
        return results, values, records

    def _commit_check(
        self, group: Group | None, generation: int, member_id: str, instance_id: str | None,
        version: int,
    ) -> ErrorCode | None:
        if group is None or group.state == GroupState.DEAD:
            if generation < 0:
                return None
            return ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
        if generation < 0 and group.state == GroupState.EMPTY:
            return None  # a standalone consumer (assign, no group membership)
        try:
            member = self._check_member(group, member_id, instance_id)
        except KafkaError as exc:
            return exc.code
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        member.last_heartbeat = asyncio.get_running_loop().time()
        return None

    def txn_commit(
        self, *, group_id: str, producer_id: int, producer_epoch: int, generation: int,
        member_id: str, instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: offsets written with the producer's id and epoch as a transactional
        batch, applied when the transaction's marker reaches the group's partition."""
        if not self.coordinates(group_id):
            return {(t, p): ErrorCode.not_coordinator for t, p, *_ in offsets}
        group = self.groups.get(group_id) or self._new_group(group_id)
        failure = None  # Kafka's GroupCoordinator.doTxnCommitOffsets, in its order
        if group.state == GroupState.DEAD:
            failure = ErrorCode.coordinator_not_available
        elif member_id:
            try:
                self._check_member(group, member_id, instance_id)
            except KafkaError as exc:
                failure = exc.code
        if failure is None and generation >= 0 and generation != group.generation:
            failure = ErrorCode.illegal_generation
        if failure is not None:
            return {(t, p): failure for t, p, *_ in offsets}
        results, pending, records = self._offset_records(group_id, offsets)
        if records:
            self.ensure_offsets_topic()
            index = partition_for(group_id, self.num_partitions)
            batch = encode_batch(records, timestamp=now_ms(), producer_id=producer_id,
                                 producer_epoch=producer_epoch, transactional=True)
            try:
                first = self.writer.append(index, batch, internal=True)
            except KafkaError as exc:  # a fenced producer epoch
                return {tp: (exc.code if code == ErrorCode.none else code)
                        for tp, code in results.items()}
            self._add_pending(group, producer_id, {
                tp: (value, first + i) for i, (tp, value) in enumerate(pending.items())
            })
        return results

    def _add_pending(self, group: Group, producer_id: int,
                     offsets: dict[tuple[str, int], tuple[OffsetValue, int]]) -> None:
        group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        index = partition_for(group.group_id, self.num_partitions)
        self._txn_groups.setdefault((index, producer_id), set()).add(group.group_id)

    def complete_txn_offsets(self, index: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker reached __consumer_offsets partition ``index``: its pending
        offsets there become committed offsets (where nothing newer was committed since), or
        are dropped."""
        for group_id in self._txn_groups.pop((index, producer_id), ()):
            group = self.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, {})
            if not commit:
                continue
            for tp, (value, position) in pending.items():
                if group.offset_positions.get(tp, -1) < position:
                    group.set_offset(tp, value, position)

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with a transactional offset commit still pending (KIP-447)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OffsetValue | None]:
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found, {}
        if group.state != GroupState.EMPTY and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group, {}
        subscribed = group.subscribed_topics() if group.state != GroupState.EMPTY else set()
        results: dict[tuple[str, int], ErrorCode] = {}
        records = []
        for topic, partition in partitions:
            if not self.partition_exists(topic, partition):
                results[(topic, partition)] = ErrorCode.unknown_topic_or_partition
                continue
            if subscribed is None or topic in subscribed:
                results[(topic, partition)] = ErrorCode.group_subscribed_to_topic
                continue
            if group.drop_offset((topic, partition)) is not None:
                records.append(RecordInput(None, encode_offset_key(
                    OffsetKey(group_id, topic, partition))))
            results[(topic, partition)] = ErrorCode.none
        self._write(group_id, records)
        return ErrorCode.none, results

    def expire_offsets(self, at_ms: int) -> None:
        """offsets.retention.minutes: an empty group's offsets expire that long after it became
        empty; a stable consumer group's offsets of topics it no longer subscribes to expire
        that long after their commit (KIP-496)."""
        for group in list(self.groups.values()):
            if group.state == GroupState.EMPTY:
                base = group.state_timestamp
                doomed = [tp for tp, v in group.offsets.items()
                          if (base if base >= 0 else v.commit_timestamp) + self.retention_ms
                          < at_ms]
            elif group.state == GroupState.STABLE and (
                (subscribed := group.subscribed_topics()) is not None
            ):
                doomed = [tp for tp, v in group.offsets.items() if tp[0] not in subscribed
                          and v.commit_timestamp + self.retention_ms < at_ms]
            else:
                continue
            records = [RecordInput(None, encode_offset_key(OffsetKey(group.group_id, t, p)))
                       for t, p in doomed]
            for tp in doomed:
                group.drop_offset(tp)
            if (group.state == GroupState.EMPTY and not group.offsets
                    and not group.pending_txn_offsets):  # Kafka's hasOffsets counts pending
                records.append(RecordInput(None, encode_group_key(GroupKey(group.group_id))))
                group.transition(GroupState.DEAD, at_ms)
                del self.groups[group.group_id]
            self._write(group.group_id, records)

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if group.state != GroupState.EMPTY:
            return ErrorCode.non_empty_group
        records = [RecordInput(None, encode_offset_key(OffsetKey(group_id, t, p)))
                   for t, p in group.offsets]
        records.append(RecordInput(None, encode_group_key(GroupKey(group_id))))
        group.transition(GroupState.DEAD, now_ms())
        del self.groups[group_id]
        self._write(group_id, records)
        return ErrorCode.none


def _join_error(code: ErrorCode, member_id: str) -> Response:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": member_id, "members": []}
