"""Committed offsets of the groups: OffsetCommit, TxnOffsetCommit (pending until the
transaction's marker), OffsetFetch, OffsetDelete, offsets.retention.minutes, and DeleteGroups
(an empty group and its offsets). Each change is written to the group's ``__consumer_offsets``
partition through ``GroupStore``. A consumer group's members commit with their member epoch
(checked by consumer_heartbeat.py); its offsets live beside the classic groups' (group_store.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from samsa.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from samsa.coordinator.consumer_heartbeat import ConsumerGroupConfig, ConsumerGroupManager
from samsa.coordinator.group import Group, GroupState
from samsa.coordinator.group_membership import check_member
from samsa.coordinator.group_store import GroupStore, now_ms
from samsa.coordinator.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from samsa.errors import ErrorCode, KafkaError
from samsa.records.record import RecordInput

TopicPartition = tuple[str, int]
# (topic, partition, offset, leader epoch, metadata)
OffsetEntry = tuple[str, int, int, int, str | None]


class OffsetStore:
    def __init__(self, store: GroupStore, partition_exists: Callable[[str, int], bool], *,
                 metadata_max_bytes: int, retention_ms: int,
                 consumer: ConsumerGroupManager | None = None) -> None:
        """``consumer``: the consumer groups' manager (their members commit with their
        epochs)."""
        self.store = store
        self.consumer = consumer or ConsumerGroupManager(store, ConsumerGroupConfig(),
                                                         lambda: None)
        self.partition_exists = partition_exists
        self.metadata_max_bytes = metadata_max_bytes
        self.retention_ms = retention_ms

    def commit(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
        offsets: list[OffsetEntry], version: int,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: an error code per partition."""
        if not self.store.coordinates(group_id):
            return {(t, p): ErrorCode.not_coordinator for t, p, *_ in offsets}
        consumer = self.store.consumer_groups.get(group_id)
        group = self.store.groups.get(group_id)
        if consumer is not None:
            failure = self.consumer.commit_error(consumer, member_id, instance_id, generation,
                                                 version, transactional=False)
        else:
            failure = _commit_check(group, generation, member_id, instance_id, version)
        if failure is not None:
            return {(t, p): failure for t, p, *_ in offsets}
        group = self.store.groups.get(group_id) or self.store.new_group(group_id)
        results, values, records = self._offset_records(group_id, offsets)
        first = self.store.write(group_id, records)
        for i, (tp, value) in enumerate(values.items()):
            group.set_offset(tp, value, first + i)
        return results

    def _offset_records(
        self, group_id: str, offsets: list[OffsetEntry]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetValue],
               list[RecordInput]]:
        """Check each entry: (error per partition, the values to store, their
        __consumer_offsets records)."""
        results: dict[TopicPartition, ErrorCode] = {}
        values: dict[TopicPartition, OffsetValue] = {}
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

    def txn_commit(
        self, *, group_id: str, producer_id: int, producer_epoch: int, generation: int,
        member_id: str, instance_id: str | None, offsets: list[OffsetEntry],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: offsets written with the producer's id and epoch as a transactional
        batch, applied when the transaction's marker reaches the group's partition."""
        if not self.store.coordinates(group_id):
            return {(t, p): ErrorCode.not_coordinator for t, p, *_ in offsets}
        consumer = self.store.consumer_groups.get(group_id)
        group = self.store.groups.get(group_id) or self.store.new_group(group_id)
        failure = None  # Kafka's GroupCoordinator.doTxnCommitOffsets, in its order
        if consumer is not None:
            failure = self.consumer.commit_error(consumer, member_id, instance_id, generation,
                                                 0, transactional=True)
        elif group.state == GroupState.DEAD:
            failure = ErrorCode.coordinator_not_available
        elif member_id:
            try:
                check_member(group, member_id, instance_id)
            except KafkaError as exc:
                failure = exc.code
        if (failure is None and consumer is None and generation >= 0
                and generation != group.generation):
            failure = ErrorCode.illegal_generation
        if failure is not None:
            return {(t, p): failure for t, p, *_ in offsets}
        results, pending, records = self._offset_records(group_id, offsets)
        if records:
            self.store.ensure_topic()
            try:
                first = self.store.write_transactional(group_id, records, producer_id,
                                                       producer_epoch)
            except KafkaError as exc:  # a fenced producer epoch
                return {tp: (exc.code if code == ErrorCode.none else code)
                        for tp, code in results.items()}
            self.store.add_pending(group, producer_id, {
                tp: (value, first + i) for i, (tp, value) in enumerate(pending.items())
            })
        return results

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions with a transactional offset commit still pending (KIP-447)."""
        group = self.store.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetValue | None]:
        group = self.store.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        group = self.store.groups.get(group_id)
        consumer = self.store.consumer_groups.get(group_id)
        subscribed: set[str] | None
        if consumer is not None:  # a consumer group's offsets of topics it reads stay
            group = group or self.store.new_group(group_id)
            subscribed = consumer.subscribed_topic_names()
        elif group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found, {}
        elif group.state != GroupState.EMPTY and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group, {}
        else:
            subscribed = group.subscribed_topics() if group.state != GroupState.EMPTY else set()
        results: dict[TopicPartition, ErrorCode] = {}
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
        self.store.write(group_id, records)
        return ErrorCode.none, results

    def expire_offsets(self, at_ms: int) -> None:
        """offsets.retention.minutes: an empty group's offsets expire that long after it became
        empty; a stable consumer group's offsets of topics it no longer subscribes to expire
        that long after their commit (KIP-496)."""
        for consumer in list(self.store.consumer_groups.values()):
            self._expire_consumer_group(consumer, at_ms)
        for group in list(self.store.groups.values()):
            if group.group_id in self.store.consumer_groups:
                continue
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
                del self.store.groups[group.group_id]
            self.store.write(group.group_id, records)

    def _expire_consumer_group(self, consumer: ConsumerGroup, at_ms: int) -> None:
        """A consumer group's offsets expire that long after their commit unless the group
        subscribes to their topic (Kafka's OffsetExpirationConditionImpl on the commit time);
        an empty group without offsets goes."""
        if not self.store.coordinates(consumer.group_id):
            return
        group = self.store.groups.get(consumer.group_id)
        subscribed = consumer.subscribed_topic_names()
        doomed = [] if group is None else [
            tp for tp, v in group.offsets.items()
            if tp[0] not in subscribed and v.commit_timestamp + self.retention_ms < at_ms]
        records = [RecordInput(None, encode_offset_key(OffsetKey(consumer.group_id, t, p)))
                   for t, p in doomed]
        if group is not None:
            for tp in doomed:
                group.drop_offset(tp)
        empty = group is None or (not group.offsets and not group.pending_txn_offsets)
        delete = consumer.state == ConsumerGroupState.EMPTY and empty
        if delete:
            records += self.consumer.delete_records(consumer)
        if records:
            self.store.write_and_apply(consumer.group_id, records)
        if delete:
            self.store.groups.pop(consumer.group_id, None)

    def delete_group(self, group_id: str) -> ErrorCode:
        consumer = self.store.consumer_groups.get(group_id)
        if consumer is not None:
            if consumer.state != ConsumerGroupState.EMPTY:
                return ErrorCode.non_empty_group
            offsets = self.store.groups.get(group_id)
            records = [RecordInput(None, encode_offset_key(OffsetKey(group_id, t, p)))
                       for t, p in (offsets.offsets if offsets is not None else {})]
            self.store.write_and_apply(group_id, records + self.consumer.delete_records(consumer))
            self.store.groups.pop(group_id, None)
            return ErrorCode.none
        group = self.store.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if group.state != GroupState.EMPTY:
            return ErrorCode.non_empty_group
        records = [RecordInput(None, encode_offset_key(OffsetKey(group_id, t, p)))
                   for t, p in group.offsets]
        records.append(RecordInput(None, encode_group_key(GroupKey(group_id))))
        group.transition(GroupState.DEAD, now_ms())
        del self.store.groups[group_id]
        self.store.write(group_id, records)
        return ErrorCode.none


def _commit_check(
    group: Group | None, generation: int, member_id: str, instance_id: str | None, version: int,
) -> ErrorCode | None:
    """Whether a member (or a standalone consumer) may commit: None, or the error it gets."""
    if group is None or group.state == GroupState.DEAD:
        if generation < 0:
            return None
        return ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
    if generation < 0 and group.state == GroupState.EMPTY:
        return None  # a standalone consumer (assign, no group membership)
    try:
        member = check_member(group, member_id, instance_id)
    except KafkaError as exc:
        return exc.code
    if generation != group.generation:
        return ErrorCode.illegal_generation
    if group.state == GroupState.COMPLETING_REBALANCE:
        return ErrorCode.rebalance_in_progress
    member.last_heartbeat = asyncio.get_running_loop().time()
    return None
