"""A ``PartitionWriter`` in memory (Kafka's InMemoryPartitionWriter): a coordinator's internal
partitions as lists of batches, stamped with offsets as a log would, so that a coordinator can
be run, stopped and loaded again without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from samsa.errors import ErrorCode, KafkaError
from samsa.records.batch import read_header, stamp


class InMemoryPartitionWriter:
    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] = {}
        self.owned: set[int] | None = None  # None: every partition (a single node)
        self.replication_error: ErrorCode | None = None  # what wait_replicated answers
        # set: wait_replicated waits for it (the followers have not fetched yet)
        self.replicated: asyncio.Event | None = None
        self.waiting = 0  # wait_replicated calls waiting for ``replicated``
        self.topic_created = False
        self.epoch = 0

    def ensure_topic(self) -> None:
        self.topic_created = True

    def owns(self, index: int) -> bool:
        return self.owned is None or index in self.owned

    def append(self, index: int, batch: bytes, internal: bool = False) -> int:
        if not self.owns(index):
            raise KafkaError(f"not the leader of partition {index}", ErrorCode.not_coordinator)
        log = self.partitions.setdefault(index, [])
        base = 0
        if log:
            last = read_header(log[-1])
            base = last.base_offset + last.last_offset_delta + 1
        stamped = bytearray(batch)
        stamp(stamped, 0, base, 0)
        log.append(bytes(stamped))
        return base

    async def wait_replicated(self, index: int, timeout_s: float) -> ErrorCode | None:
        if self.replicated is not None:
            self.waiting += 1
            try:
                await self.replicated.wait()
            finally:
                self.waiting -= 1
        return self.replication_error

    def batches(self, index: int) -> Iterator[memoryview]:
        for batch in self.partitions.get(index, []):
            yield memoryview(batch)

    def hosted(self) -> list[int]:
        return sorted(self.partitions)

    def leader_epoch(self, index: int) -> int:
        return self.epoch

    def records(self) -> int:
        return sum(read_header(b).last_offset_delta + 1 for log in self.partitions.values()
                   for b in log)
