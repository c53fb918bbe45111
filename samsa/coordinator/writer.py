"""Where a coordinator keeps its state: the partitions of its internal topic, reached through
``PartitionWriter``, a narrow port (Kafka's coordinator runtime has the same one). The broker
gives the coordinators one over its logs (``samsa.cluster.partition_writer``); tests give them
one in memory, so a coordinator runs without a broker or a socket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from samsa.errors import ErrorCode


class PartitionWriter(Protocol):
    def ensure_topic(self) -> None:
        """Create the internal topic on first use."""

    def owns(self, index: int) -> bool:
        """Whether this broker coordinates what lives in partition ``index`` (it leads it;
        always on a single node)."""

    def append(self, index: int, batch: bytes, internal: bool = False) -> int:
        """Append one record batch; its first offset. KafkaError NOT_COORDINATOR where this
        broker does not lead the partition."""

    async def wait_replicated(self, index: int, timeout_s: float) -> ErrorCode | None:
        """Until what was appended reached the in-sync replicas: None, or the error a client
        should get (NOT_COORDINATOR after a move, COORDINATOR_NOT_AVAILABLE on a timeout)."""

    def batches(self, index: int) -> Iterator[memoryview]:
        """The partition's whole batches, from its start (to load a coordinator's state)."""

    def hosted(self) -> list[int]:
        """The partitions with a replica here (loaded at start on a single node)."""

    def leader_epoch(self, index: int) -> int:
        """The partition's leader epoch (0 on a single node): the coordinator epoch that
        transaction markers carry."""
