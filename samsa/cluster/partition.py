"""A partition as the broker serves it: its log, leader epoch, high watermark and the fetches
waiting for new data.

On a single node this broker leads every partition and the high watermark is the log end
offset; cluster mode adds followers, the ISR and a high watermark that trails them.
"""

from __future__ import annotations

import asyncio

from samsa.storage.log import AppendInfo, Log


class Partition:
    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """read_committed consumers stop here: before the oldest open transaction."""
        unstable = self.log.first_unstable_offset
        high_watermark = self.high_watermark
        if unstable is None:
            return high_watermark
        # an open transaction's start may be gone with DeleteRecords or retention
        return max(min(unstable, high_watermark), self.log.log_start_offset)

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> None:
        self.log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                               leader_epoch=self.leader_epoch)
        self.wake_waiters()

    def append(self, records: bytes | memoryview, *, internal: bool = False) -> AppendInfo:
        info = self.log.append(records, leader_epoch=self.leader_epoch, internal=internal)
        self.wake_waiters()
        return info

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake_waiters(self) -> None:
        if self._waiters:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters.clear()
