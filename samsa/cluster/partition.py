"""A partition as the broker serves it: its log, leader epoch, high watermark and the fetches
waiting for new data.

On a single node this broker leads every partition and the high watermark is the log end
offset. A replicated partition (cluster mode) has a role:

* leader (``make_leader``): followers fetch with their replica id; each fetch offset is that
  follower's log end offset. The high watermark is the smallest log end offset in the ISR (the
  leader's own included) and only moves forward; a follower joins the ISR once it has reached
  the high watermark and leaves it when it has not caught up with the leader's log end for
  ``replica.lag.time.max.ms`` (``shrink_isr``). A follower leaving still counts for the high
  watermark until the smaller ISR is written to ZooKeeper (``isr_written``), as Kafka's
  "maximal ISR" does: a deposed leader, whose write is refused, never acknowledges records
  that only it has. acks=all produce waits (``wait_replicated``) until the high watermark
  passes its records; ``min.insync.replicas`` is checked first.
* follower (``make_follower``): the replica fetcher appends the leader's batches and passes on
  the leader's high watermark (``set_follower_high_watermark``).

A replica opened in cluster mode starts from its checkpointed high watermark
(``replication-offset-checkpoint``, at most its log end), not from its log end: records beyond
it may be on no other replica. It knows its replicas but no leader until the controller's state
for it arrives: until then it is neither, and every leader request gets NOT_LEADER_OR_FOLLOWER
(``leader_error``). A broker never acts as a leader it has not been told it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from samsa.errors import ErrorCode
from samsa.metrics import BrokerMetrics
from samsa.storage.log import AppendInfo, Log

NO_LEADER = -1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _time_out(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


@dataclass
class FollowerState:
    """What the leader knows of one follower."""

    log_end_offset: int = -1  # unknown until its first fetch
    last_caught_up_ms: int = 0  # when it last fetched from at or past the leader's log end
    last_fetch_ms: int = 0
    last_fetch_leader_end: int = -1  # the leader's log end when it fetched last


class Partition:
    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int = 0,
                 broker_id: int = -1, replicas: tuple[int, ...] = (),
                 high_watermark: int | None = None) -> None:
        """``high_watermark``: a replicated partition's checkpointed one (None: none)."""
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.broker_id = broker_id
        # empty: not replicated (a single node), which leads it from the start
        self.replicas: tuple[int, ...] = tuple(replicas)
        self.isr: set[int] = set()
        self._leaving: set[int] = set()  # out of the ISR once the store has it so
        self.followers: dict[int, FollowerState] = {}
        self.leader_id = NO_LEADER if replicas else broker_id
        self._high_watermark: int | None = None  # None: the log end offset (not replicated)
        if replicas:
            # What of its log was committed, a replica knows only from its checkpoint; without
            # one, Kafka takes 0, raised to the log start offset: nothing is exposed until the
            # ISR has fetched it (a leader) or the leader tells (a follower). Never past the
            # log end: a crash may have cut records the checkpoint counted.
            self._high_watermark = max(log.log_start_offset,
                                       min(high_watermark or 0, log.log_end_offset))
        self._waiters: set[asyncio.Future[None]] = set()
        # followers' fetches: woken when the log grows or the partition changes, not when
        # only the high watermark moves (Kafka's DelayedFetch reads a follower's to the log end)
        self._log_waiters: set[asyncio.Future[None]] = set()
        self._replication_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self.closed = False  # its log was deleted (topic deleted, replica moved away)
        self.offline = False  # closed because its log directory failed (KAFKA_STORAGE_ERROR)
        # cluster mode: told when this leader's ISR changes, to write it to ZooKeeper
        self.on_isr_change: Callable[[Partition], None] | None = None
        self.metrics: BrokerMetrics | None = None  # the broker's, for IsrExpandsPerSec
        # a follower: the leader's high watermark in its last fetch response (the lag metric)
        self.leader_high_watermark = -1

    # --- roles ---------------------------------------------------------------------------------

    @property
    def replicated(self) -> bool:
        return bool(self.replicas)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def leader_error(self, current_leader_epoch: int = -1, require_leader: bool = True
                     ) -> ErrorCode | None:
        """Why this replica cannot answer a request meant for the partition's leader (None: it
        can): the leader epoch the client asks for (-1: none) is checked first, as Kafka's
        Partition checks it. ``require_leader=False`` (a debugging ListOffsets) lets any
        replica whose state has arrived answer."""
        if current_leader_epoch < 0 and self.leader_id == self.broker_id != NO_LEADER:
            return None  # the common case, first: this broker leads and no epoch is asked
        if self.replicated and self.leader_id == NO_LEADER:
            return ErrorCode.not_leader_or_follower  # its state has not arrived yet
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            return (ErrorCode.fenced_leader_epoch if current_leader_epoch < self.leader_epoch
                    else ErrorCode.unknown_leader_epoch)
        if require_leader and not self.is_leader:
            return ErrorCode.not_leader_or_follower
        return None

    def make_leader(self, replicas: tuple[int, ...], isr: set[int], leader_epoch: int) -> None:
        """Lead with these replicas; the high watermark starts where it was (it never moves
        back) and waits for the followers' fetches. KafkaStorageError, with nothing changed,
        when the epoch cannot be written (its log directory failed)."""
        self.log.assign_leader_epoch(leader_epoch)
        hw = self.high_watermark
        self.replicas, self.isr = tuple(replicas), set(isr) | {self.broker_id}
        self._leaving = set()
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        now = _now_ms()
        self.followers = {r: FollowerState(last_caught_up_ms=now if r in isr else 0)
                          for r in replicas if r != self.broker_id}
        self._high_watermark = min(hw, self.log.log_end_offset)
        self._advance_high_watermark()
        self.wake_waiters()  # fetches waiting with the previous epoch are answered now

    def update_replicas(self, replicas: tuple[int, ...]) -> None:
        """A leader's replica set changed (a reassignment): new followers start out of sync,
        removed ones leave the followers and the ISR."""
        if not self.is_leader or tuple(replicas) == self.replicas:
            return
        self.replicas = tuple(replicas)
        self.followers = {r: self.followers.get(r, FollowerState())
                          for r in replicas if r != self.broker_id}
        isr = {r for r in self.isr if r == self.broker_id or r in self.followers}
        self._leaving &= isr
        if isr != self.isr:
            self.isr = isr
            self._advance_high_watermark()
            if self.on_isr_change is not None:
                self.on_isr_change(self)

    def make_follower(self, leader_id: int, replicas: tuple[int, ...], leader_epoch: int) -> None:
        self.replicas, self.leader_id, self.leader_epoch = tuple(replicas), leader_id, leader_epoch
        self.isr, self.followers, self._leaving = set(), {}, set()
        self._high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._fail_replication_waiters()
        self.wake_waiters()  # consumers long-polling a former leader are told at once

    @property
    def high_watermark(self) -> int:
        if self._high_watermark is None:
            return self.log.log_end_offset
        return min(self._high_watermark, self.log.log_end_offset)

    def set_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's high watermark: the leader's, as far as this log reaches."""
        self.leader_high_watermark = leader_high_watermark
        self._high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        self.wake_waiters()

    # --- the leader's view of its followers ----------------------------------------------------

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from ``fetch_offset`` (so its log ends there). False when it is
        not a replica of this partition."""
        state = self.followers.get(replica_id)
        if state is None:
            return False
        now = _now_ms()
        leader_end = self.log.log_end_offset
        # as Kafka's Replica.updateFetchState: a follower that reached the log end the leader
        # had at its previous fetch was caught up then, though a producer has appended since
        # (under a steady load and a slow link it never reaches the current end)
        caught_up_at = now if fetch_offset >= leader_end else (
            state.last_fetch_ms if 0 <= state.last_fetch_leader_end <= fetch_offset else None)
        if caught_up_at is not None:
            state.last_caught_up_ms = max(state.last_caught_up_ms, caught_up_at)
            self._leaving.discard(replica_id)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now
        state.last_fetch_leader_end = leader_end
        if replica_id not in self.isr and fetch_offset >= self.high_watermark:
            self.isr.add(replica_id)  # caught up: back in sync
            if self.metrics is not None:
                self.metrics.isr_expands += 1
            if self.on_isr_change is not None:
                self.on_isr_change(self)
        self._advance_high_watermark()
        return True

    def shrink_isr(self, lag_time_max_ms: int) -> set[int]:
        """Followers that have not caught up for ``lag_time_max_ms`` leave the ISR; returns
        them. With a store to write the ISR to (``on_isr_change``) they leave once it is
        written (``isr_written``); only then may the high watermark move on without them."""
        now = _now_ms()
        out = {r for r in self.isr - self._leaving if r != self.broker_id and (
            (f := self.followers.get(r)) is None or now - f.last_caught_up_ms > lag_time_max_ms)}
        if not out:
            return out
        if self.on_isr_change is None:
            self.isr -= out
            self._advance_high_watermark()
        else:
            self._leaving |= out
            self.on_isr_change(self)
        return out

    @property
    def wanted_isr(self) -> set[int]:
        """The ISR this leader asks the store for: without the followers leaving it."""
        return self.isr - self._leaving

    def isr_written(self, isr: set[int]) -> None:
        """The store took this ISR: the followers it leaves out are out."""
        gone = self._leaving - isr
        self.isr -= gone
        self._leaving -= gone
        self._advance_high_watermark()

    def _advance_high_watermark(self) -> None:
        if self._high_watermark is None or not self.is_leader:
            return
        ends = [self.log.log_end_offset] + [
            self.followers[r].log_end_offset for r in self.isr if r in self.followers]
        new = min(ends)
        if new > self._high_watermark:
            self._high_watermark = new
            self._wake(self._waiters)
            still = []
            for offset, waiter in self._replication_waiters:
                if offset <= new:
                    if not waiter.done():
                        waiter.set_result(True)
                else:
                    still.append((offset, waiter))
            self._replication_waiters = still

    async def wait_replicated(self, offset: int, timeout: float) -> bool:
        """acks=all: wait until the high watermark reaches ``offset``; False on timeout or
        when this broker stopped leading."""
        if self.high_watermark >= offset:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._replication_waiters.append((offset, waiter))
        timer = loop.call_later(timeout, _time_out, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()
            if waiter.cancelled() or not waiter.result():  # timed out or cancelled: listed
                self._replication_waiters = [(o, w) for o, w in self._replication_waiters
                                             if w is not waiter]

    def _fail_replication_waiters(self) -> None:
        for _, waiter in self._replication_waiters:
            if not waiter.done():
                waiter.set_result(False)
        self._replication_waiters = []

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
        self._advance_high_watermark()
        self.wake_waiters()

    def append(self, records: bytes | memoryview, *, internal: bool = False) -> AppendInfo:
        info = self.log.append(records, leader_epoch=self.leader_epoch, internal=internal)
        self._advance_high_watermark()  # an ISR of the leader alone moves with its log
        self.wake_waiters()
        return info

    def close(self) -> None:
        """Its log is going away: waiting fetches answer, acks=all produces fail."""
        self.closed = True
        self._fail_replication_waiters()
        self.wake_waiters()

    def go_offline(self) -> None:
        """Its log directory failed: closed, and requests about it answer
        KAFKA_STORAGE_ERROR."""
        self.offline = True
        self.close()

    def add_waiter(self, waiter: asyncio.Future[None], *, log_end: bool = False) -> None:
        """``waiter`` is done at the next change; with ``log_end`` (a follower's fetch, which
        reads to the log end) not when only the high watermark moves."""
        (self._log_waiters if log_end else self._waiters).add(waiter)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)
        self._log_waiters.discard(waiter)

    def wake_waiters(self) -> None:
        """Data was appended or the partition changed: every waiting fetch reads again."""
        self._wake(self._waiters)
        self._wake(self._log_waiters)

    @staticmethod
    def _wake(waiters: set[asyncio.Future[None]]) -> None:
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            waiters.clear()
