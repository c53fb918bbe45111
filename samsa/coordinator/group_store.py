"""The group table and its records in ``__consumer_offsets``.

Every group and every committed offset is a record (Kafka's formats, records.py and, for
consumer groups of KIP-848, consumer_records.py) in the partition ``partition_for(group)``.
``GroupStore`` holds the groups in memory, writes their records, replays a partition's records
into groups when this broker starts or comes to lead the partition, and lets a partition's
groups go. Offsets of a transaction not yet decided wait here, indexed by partition and
producer, until the transaction's marker reaches the partition.

A group id names a classic group or a consumer group. ``groups`` holds the classic ones and,
for every group id, its committed offsets (a consumer group's offsets sit in a classic ``Group``
without members, as Kafka keeps offsets apart from the group); ``consumer_groups`` holds the
consumer groups.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from samsa.coordinator.consumer_group import ConsumerGroup
from samsa.coordinator.consumer_records import (
    CONSUMER_RECORD_TYPES,
    GROUP_METADATA,
    decode_consumer_key,
    decode_consumer_value,
    key_type,
)
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
    partition_for,
)
from samsa.coordinator.writer import PartitionWriter
from samsa.errors import CorruptRecordError, ErrorCode
from samsa.records.batch import read_header
from samsa.records.control import read_marker
from samsa.records.record import RecordInput, decode_records, encode_batch

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupStore:
    def __init__(self, writer: PartitionWriter, num_partitions: int,
                 commit_timeout_s: float) -> None:
        self.writer = writer
        self.num_partitions = num_partitions
        self.commit_timeout_s = commit_timeout_s
        self.groups: dict[str, Group] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # (__consumer_offsets partition, producer id) -> groups with offsets pending in that
        # producer's transaction (Kafka's openGroupsForProducer)
        self._txn_groups: dict[tuple[int, int], set[str]] = {}
        # while loading: the (group, key) pairs already read from the group's own partition
        self._loaded_at_home: set[tuple[str, object]] = set()
        self._loading: int | None = None

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinates(self, group_id: str) -> bool:
        return self.writer.owns(self.partition_of(group_id))

    def groups_in(self, index: int) -> list[Group]:
        """The (classic) groups that partition ``index`` holds."""
        return [g for group_id, g in self.groups.items() if self.partition_of(group_id) == index]

    def consumer_groups_in(self, index: int) -> list[ConsumerGroup]:
        """The consumer groups that partition ``index`` holds."""
        return [g for group_id, g in self.consumer_groups.items()
                if self.partition_of(group_id) == index]

    def new_group(self, group_id: str) -> Group:
        group = Group(group_id)
        group.state_timestamp = now_ms()
        self.groups[group_id] = group
        return group

    # --- writing ---------------------------------------------------------------------------

    def ensure_topic(self) -> None:
        self.writer.ensure_topic()

    def write(self, group_id: str, records: list[RecordInput]) -> int:
        """Append records to the group's __consumer_offsets partition (acks=all on one node);
        the offset of the first (-1 when there is none)."""
        if not records:
            return -1
        self.ensure_topic()
        return self.writer.append(self.partition_of(group_id),
                                  encode_batch(records, timestamp=now_ms()))

    def write_transactional(self, group_id: str, records: list[RecordInput], producer_id: int,
                            producer_epoch: int) -> int:
        """Append records as a batch of the producer's transaction (the topic exists:
        ``ensure_topic``); the offset of the first. KafkaError where the producer's epoch is
        fenced."""
        batch = encode_batch(records, timestamp=now_ms(), producer_id=producer_id,
                             producer_epoch=producer_epoch, transactional=True)
        return self.writer.append(self.partition_of(group_id), batch, internal=True)

    def write_and_apply(self, group_id: str, records: list[RecordInput],
                        new_group: ConsumerGroup | None = None) -> None:
        """Append records, then replay them into the group table (as a coordinator loading the
        partition would). ``new_group``: the consumer group the records create, kept with the
        state no record holds. KafkaError NOT_COORDINATOR (nothing applied) where this broker
        no longer leads the partition."""
        first = self.write(group_id, records)
        if new_group is not None and group_id not in self.consumer_groups:
            self.consumer_groups[group_id] = new_group
        for i, r in enumerate(records):
            assert r.key is not None
            self._apply(r.key, r.value, first + i)

    async def wait_replicated(self, group_id: str) -> ErrorCode | None:
        return await self.writer.wait_replicated(self.partition_of(group_id),
                                                 self.commit_timeout_s)

    def store_group(self, group: Group) -> None:
        self.write(group.group_id, [group_record(group)])

    # --- offsets of undecided transactions -------------------------------------------------

    def add_pending(self, group: Group, producer_id: int,
                    offsets: dict[tuple[str, int], tuple[OffsetValue, int]]) -> None:
        group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        index = self.partition_of(group.group_id)
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

    # --- loading and unloading -------------------------------------------------------------

    def load(self, indexes: Iterable[int]) -> None:
        """Replay the records of __consumer_offsets partitions into the group table."""
        try:
            for index in indexes:
                self._loading = index
                self._load_partition(index)
        finally:
            self._loading = None
            self._loaded_at_home.clear()

    def unload(self, index: int) -> list[Group]:
        """Remove partition ``index``'s groups from the table (the partition's new leader loads
        them); the groups removed."""
        groups = self.groups_in(index)
        for group in groups:
            del self.groups[group.group_id]
        for consumer in self.consumer_groups_in(index):
            del self.consumer_groups[consumer.group_id]
        return groups

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
        if self.partition_of(group) == self._loading:
            self._loaded_at_home.add((group, key))
            return False
        return (group, key) in self._loaded_at_home

    def _apply_record(self, key_bytes: bytes, value: bytes | None, position: int,
                      txn_pid: int | None) -> None:
        if key_type(key_bytes) in CONSUMER_RECORD_TYPES:
            self._apply_consumer(key_bytes, value)
            return
        key = decode_key(key_bytes)
        if isinstance(key, OffsetKey):
            tp = (key.topic, key.partition)
            if self._superseded(key.group, tp):
                return
            committed = decode_offset_value(value)
            if committed is None and key.group not in self.groups and txn_pid is None:
                return  # the offset of a group already gone
            group = self.groups.get(key.group) or self.new_group(key.group)
            if txn_pid is not None:  # waits for its transaction's marker
                if committed is not None:
                    self.add_pending(group, txn_pid, {tp: (committed, position)})
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
            existing = self.groups.get(key.group)
            if existing is not None and (existing.offsets or existing.pending_txn_offsets):
                # the classic group goes (it became a consumer group); its offsets stay
                existing.members, existing.static_members = {}, {}
                existing.protocol_type = existing.protocol_name = existing.leader_id = None
                existing.generation = 0
                existing.restore(GroupState.EMPTY, existing.state_timestamp)
            else:
                self.groups.pop(key.group, None)
            return
        group = self.groups.get(key.group) or self.new_group(key.group)
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

    def _apply_consumer(self, key_bytes: bytes, value: bytes | None) -> None:
        key = decode_consumer_key(key_bytes)
        if self._superseded(key.group, (key.type, key.name)):
            return
        decoded = decode_consumer_value(key.type, value)
        group = self.consumer_groups.get(key.group)
        if decoded is None and key.type == GROUP_METADATA:
            self.consumer_groups.pop(key.group, None)
            holder = self.groups.get(key.group)
            if holder is not None and not (holder.offsets or holder.pending_txn_offsets
                                           or holder.members or holder.generation):
                del self.groups[key.group]  # it held the consumer group's offsets
            return
        if group is None:
            if decoded is None:
                return  # a tombstone of a group already gone
            group = self.consumer_groups[key.group] = ConsumerGroup(key.group)
        group.replay(key, decoded)


def group_record(group: Group) -> RecordInput:
    """The group's state (members, generation, protocol, leader) as its record."""
    members = [
        MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.metadata(group.protocol_name), m.assignment)
        for m in group.members.values()
    ]
    value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name,
                       group.leader_id, group.state_timestamp, members)
    return RecordInput(encode_group_value(value), encode_group_key(GroupKey(group.group_id)))
