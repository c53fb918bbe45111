"""The coordinators' ``PartitionWriter`` over this broker's logs: a coordinator's internal topic
(``__consumer_offsets``, ``__transaction_state``) as the hosted partitions have it."""

from __future__ import annotations

from collections.abc import Iterator

from samsa.cluster.replicas import Replicas
from samsa.cluster.topic_admin import TopicAdmin
from samsa.errors import ErrorCode, KafkaError, KafkaStorageError
from samsa.records.batch import iter_headers


class LogPartitionWriter:
    def __init__(self, replicas: Replicas, topic_admin: TopicAdmin, topic: str,
                 partitions: int, segment_bytes: int, replication_factor: int,
                 single_node: bool, compression_type: str = "producer") -> None:
        self.replicas = replicas
        self.topic_admin = topic_admin
        self.topic = topic
        self.partitions = partitions
        self.segment_bytes = segment_bytes
        self.replication_factor = replication_factor
        self.compression_type = compression_type  # the topic's, when it is created
        # a single node coordinates everything; a cluster's broker what it leads
        self.single_node = single_node

    def ensure_topic(self) -> None:
        self.topic_admin.ensure_internal_topic(self.topic, self.partitions, self.segment_bytes,
                                               self.replication_factor, self.compression_type)

    def owns(self, index: int) -> bool:
        if self.single_node:
            return True
        partition = self.replicas.partition(self.topic, index)
        return partition is not None and partition.replicated and partition.is_leader

    def append(self, index: int, batch: bytes, internal: bool = False) -> int:
        partition = self.replicas.coordinator_partition(self.topic, index)
        try:
            return partition.append(batch, internal=internal).first_offset
        except KafkaStorageError as exc:  # Kafka's coordinators answer NOT_COORDINATOR
            raise KafkaError(f"{self.topic}-{index}: {exc}", ErrorCode.not_coordinator
                             ) from exc

    async def wait_replicated(self, index: int, timeout_s: float) -> ErrorCode | None:
        partition = self.replicas.partition(self.topic, index)
        if partition is None or not partition.replicated:
            return None
        if await partition.wait_replicated(partition.log.log_end_offset, timeout_s):
            return None
        if partition.closed or not partition.is_leader:
            return ErrorCode.not_coordinator
        return ErrorCode.coordinator_not_available

    def batches(self, index: int) -> Iterator[memoryview]:
        partition = self.replicas.partition(self.topic, index)
        if partition is None:
            return
        offset = partition.log.log_start_offset
        while offset < partition.log.log_end_offset:
            # the log is looked up again each time: a move to another log directory may have
            # replaced it while the caller was away
            region = partition.log.read(offset, 1 << 20)
            if region is None:
                return
            data = memoryview(region.read())
            for pos, header in iter_headers(data):
                offset = header.next_offset
                yield data[pos : pos + header.size]

    def hosted(self) -> list[int]:
        return [i for i in range(self.partitions)
                if self.replicas.partition(self.topic, i) is not None]

    def leader_epoch(self, index: int) -> int:
        """The partition's leader epoch (0 on a single node): transaction markers carry it."""
        partition = self.replicas.partition(self.topic, index)
        return partition.leader_epoch if partition is not None and partition.replicated else 0
