"""The follower side of replication: Kafka's ``ReplicaFetcherThread`` as an asyncio task.

One ``ReplicaFetcher`` runs per (follower broker, leader broker) pair. It keeps a connection to
the leader and sends Fetch v12 requests for every partition it follows, as Kafka's followers
do: ``replica_id`` is this broker's id, ``fetch_offset`` the local log end offset,
``current_leader_epoch`` the leader epoch the follower knows, ``last_fetched_epoch`` the epoch
of the local log's last batch (KIP-320: the leader answers a diverging epoch when the follower's
log left its own). For each partition of the answer:

* records are appended as the leader wrote them (``Log.append(records, assign_offsets=False)``:
  offsets, epochs, control batches and producer state come from the batches), the log start
  offset follows the leader's, and the follower's high watermark becomes the leader's (capped by
  the local log end offset); fetches waiting on the partition are woken;
* a diverging epoch truncates the local log where it left the leader's (Kafka's
  ``getOffsetTruncationState``), and the next fetch goes on from there;
* OFFSET_OUT_OF_RANGE asks the leader for its log end and start offsets (ListOffsets): a
  leader that ends below the follower truncates the follower there, a leader whose log starts
  above the follower's end (retention, DeleteRecords) makes the follower start anew at it;
* other partition errors (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
  ...) and corrupt records delay the partition by ``replica.fetch.backoff.ms``; a broken
  connection is reopened after the same back-off. A storage error or anything unexpected marks
  the partition failed (no longer fetched, as Kafka's ``failedPartitions``) and the others go
  on. Nothing ends the loop but ``stop()``.

A fetch waits at the leader up to ``replica.fetch.wait.max.ms`` for data, so that partitions
that are not in it do not wait for it: one added meanwhile (a leadership change) abandons it
(its connection is closed and a new fetch goes out at once), and a fetch waits no longer than
the earliest back-off of a partition left out.

A partition its topic's ``follower.replication.throttled.replicas`` names for this broker is
left out of the fetches while its log has not caught up with the leader's high watermark and
the follower's replication throttle (``quota``) is over its rate, as Kafka's follower leaves it
out of its fetch requests; with nothing else to fetch the fetcher waits
``replica.fetch.backoff.ms``. The bytes fetched of every such partition are recorded against
the throttle.

Everything runs on the event loop that owns the partitions (the broker's): appends and
truncations happen between two awaits, as a produce does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

from samsa.cluster.partition import Partition
from samsa.cluster.replication_quota import ReplicationQuota
from samsa.errors import ErrorCode, KafkaError, KafkaStorageError, kafka_name
from samsa.protocol.connection import BrokerConnection, BrokerConnectionError
from samsa.protocol.replica_fetch import (
    FetchResponse,
    FetchResponseError,
    FetchTopics,
    PartitionData,
    decode_fetch_response,
    encode_fetch_request,
)
from samsa.records.batch import BatchHeader, iter_headers
from samsa.security.sasl.listener import SaslClientSettings
from samsa.storage.log import Log

log = logging.getLogger(__name__)

FETCH, LIST_OFFSETS = 1, 2
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2

# Kafka's defaults for the replica.* broker keys.
DEFAULT_FETCH_MAX_BYTES = 1048576  # replica.fetch.max.bytes (per partition)
DEFAULT_FETCH_RESPONSE_MAX_BYTES = 10485760  # replica.fetch.response.max.bytes
DEFAULT_FETCH_WAIT_MAX_MS = 500  # replica.fetch.wait.max.ms
DEFAULT_FETCH_MIN_BYTES = 1  # replica.fetch.min.bytes
DEFAULT_FETCH_BACKOFF_MS = 1000  # replica.fetch.backoff.ms
DEFAULT_SOCKET_TIMEOUT_MS = 30000  # replica.socket.timeout.ms

TP = tuple[str, int]


class _UnexpectedAppendOffset(KafkaError):
    """The leader sent batches that start below the local log end offset."""


@dataclass(frozen=True)
class FetchStatus:
    """What the fetcher knows about one partition it follows (tests, tools, metrics)."""

    topic: str
    partition: int
    leader_epoch: int
    fetch_offset: int  # the local log end offset: where the next fetch starts
    leader_high_watermark: int  # as the leader last reported it (-1: no answer yet)
    leader_log_start_offset: int
    last_error: ErrorCode  # the last partition error the leader answered (none after success)
    delayed: bool  # backing off after an error
    failed: str | None  # why the partition is no longer fetched, or None
    fetches: int  # answers processed for this partition
    truncations: int  # times the local log was truncated (divergence or out of range)


class _State:
    """One followed partition."""

    def __init__(self, partition: Partition, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.delayed_until = 0.0  # loop time
        self.failed: str | None = None
        self.last_error = ErrorCode.none
        self.leader_high_watermark = -1
        self.leader_log_start_offset = -1
        self.fetches = 0
        self.truncations = 0

    @property
    def log(self) -> Log:
        return self.partition.log


def offset_to_truncate_to(log_: Log, leader_epoch: int, leader_end_offset: int) -> int:
    """Where a follower truncates when the leader says its log diverged: the leader's largest
    epoch at or below the follower's last fetched epoch is ``leader_epoch`` and ends at
    ``leader_end_offset`` (Kafka's ``AbstractFetcherThread.getOffsetTruncationState``).

    * the follower does not know that epoch: the end of the follower's largest epoch below it
      (the next fetch then tells where that one diverged, if it did);
    * it does: the smaller of the two ends of that epoch;
    * the follower has no epochs that old: the leader's end offset.

    Never above the local log end offset."""
    end = log_.log_end_offset
    if leader_end_offset < 0:
        return end
    if leader_epoch < 0:
        return min(leader_end_offset, end)
    local_epoch, local_end = log_.end_offset_for_epoch(leader_epoch)
    if local_end < 0:
        return min(leader_end_offset, end)
    if local_epoch != leader_epoch:
        return min(local_end, end)
    return min(local_end, leader_end_offset, end)


def _whole_batches(records: bytes | memoryview) -> tuple[memoryview, BatchHeader | None]:
    """``records`` without a partial batch at its end (a leader may cut the last one), and
    the first batch's header (None: not one whole batch)."""
    view = memoryview(records)
    end = 0
    first = None
    for pos, header in iter_headers(view):
        if first is None:
            first = header
        end = pos + header.size
    return view[:end], first


def _chunks(view: memoryview, limit: int) -> Iterable[memoryview]:
    """Runs of whole batches of at most ``limit`` bytes each (one batch may be larger): a
    follower copies what the leader appended in many produces, which may together exceed
    ``segment.bytes``, the most one append takes."""
    start = end = 0
    for pos, header in iter_headers(view):
        if pos > start and pos + header.size - start > limit:
            yield view[start:end]
            start = pos
        end = pos + header.size
    if end > start:
        yield view[start:end]


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader and appends them locally.

    ``start()`` on the event loop that owns the partitions, ``await stop()`` to end.
    ``add_partition`` / ``remove_partition`` change what is followed while it runs.
    """

    def __init__(
        self,
        broker_id: int,
        leader: tuple[str, int],
        partitions: Iterable[tuple[Partition, int]] = (),
        *,
        leader_id: int = -1,
        fetcher_id: int = 0,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        fetch_response_max_bytes: int = DEFAULT_FETCH_RESPONSE_MAX_BYTES,
        fetch_wait_max_ms: int = DEFAULT_FETCH_WAIT_MAX_MS,
        fetch_min_bytes: int = DEFAULT_FETCH_MIN_BYTES,
        fetch_backoff_ms: int = DEFAULT_FETCH_BACKOFF_MS,
        socket_timeout_ms: int = DEFAULT_SOCKET_TIMEOUT_MS,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslClientSettings | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        """``partitions``: (local partition, leader epoch) pairs to follow from the start.
        The keyword arguments are Kafka's ``replica.fetch.max.bytes``,
        ``replica.fetch.response.max.bytes``, ``replica.fetch.wait.max.ms``,
        ``replica.fetch.min.bytes``, ``replica.fetch.backoff.ms`` and
        ``replica.socket.timeout.ms`` (each request's deadline, connecting included);
        ``ssl_context``: TLS to the leader (the inter-broker listener is SSL or SASL_SSL);
        ``sasl``: how to authenticate to it (SASL_PLAINTEXT, SASL_SSL); ``quota``: the
        follower's replication throttle (None: none)."""
        if socket_timeout_ms < fetch_wait_max_ms:  # Kafka's rule (KafkaConfig)
            raise ValueError(
                "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                f"({socket_timeout_ms} < {fetch_wait_max_ms})"
            )
        self.broker_id = broker_id
        self.leader = leader
        self.leader_id = leader_id
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_response_max_bytes = fetch_response_max_bytes
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_backoff_ms = fetch_backoff_ms
        self.socket_timeout_ms = socket_timeout_ms
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.quota = quota
        self._held_back = False  # the last _fetchable left a throttled partition out
        self.client_id = f"broker-{broker_id}-fetcher-{fetcher_id}"
        self.name = f"ReplicaFetcher-{fetcher_id}-{leader_id}"
        self.connection_failures = 0  # connections lost or refused since start
        self._states: dict[TP, _State] = {}
        self._connection: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._fetching: BrokerConnection | None = None  # a fetch is in flight on it
        self._progress: set[asyncio.Future[None]] = set()
        self._stopping = False
        self._failing = False  # the last connection attempt or request failed
        for partition, epoch in partitions:
            self.add_partition(partition, epoch)

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the fetch loop on the running event loop."""
        if self._task is not None:
            raise RuntimeError(f"{self.name} already started")
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """End the loop (a fetch in flight is abandoned: nothing is half-applied) and close
        the connection. Idempotent."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._close_connection()
        self._notify_progress()

    # --- partitions -------------------------------------------------------------------------------

    def add_partition(self, partition: Partition, leader_epoch: int) -> None:
        """Follow ``partition`` from its log end offset. For a partition already followed at
        this epoch nothing changes; a new epoch (or a new Partition object, or a failed one)
        starts it afresh, without back-off."""
        key = (partition.topic, partition.index)
        current = self._states.get(key)
        if (current is not None and current.partition is partition
                and current.leader_epoch == leader_epoch and current.failed is None):
            return
        self._states[key] = _State(partition, leader_epoch)
        self._wake.set()
        if self._fetching is not None:
            self._fetching.abandon()

    def remove_partition(self, topic: str, index: int) -> Partition | None:
        """Stop following a partition; an answer in flight for it is ignored. Returns it."""
        state = self._states.pop((topic, index), None)
        return None if state is None else state.partition

    @property
    def partitions(self) -> list[TP]:
        return list(self._states)

    def status(self, topic: str, index: int) -> FetchStatus | None:
        """The fetch state of a followed partition (None if not followed); on the fetcher's
        event loop."""
        state = self._states.get((topic, index))
        if state is None:
            return None
        loop_time = asyncio.get_running_loop().time()
        return FetchStatus(
            topic, index, state.leader_epoch, state.log.log_end_offset,
            state.leader_high_watermark, state.leader_log_start_offset, state.last_error,
            state.delayed_until > loop_time, state.failed, state.fetches, state.truncations,
        )

    def failed_partitions(self) -> dict[TP, str]:
        """The partitions no longer fetched after a storage or unexpected error, and why."""
        return {key: s.failed for key, s in self._states.items() if s.failed is not None}

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds, checked after every answer the fetcher handles (and
        every failure); False after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._progress.add(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return predicate()
            finally:
                self._progress.discard(waiter)
        return True

    async def wait_caught_up(self, topic: str, index: int, offset: int, timeout: float) -> bool:
        """Wait until the local log of a followed partition ends at ``offset`` or beyond."""
        def caught_up() -> bool:
            state = self._states.get((topic, index))
            return state is not None and state.log.log_end_offset >= offset

        return await self.wait_for(caught_up, timeout)

    def _notify_progress(self) -> None:
        waiters, self._progress = self._progress, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # --- the loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        log.info("%s: following %s:%d", self.name, *self.leader)
        backoff = self.fetch_backoff_ms / 1000
        while not self._stopping:
            fetchable = self._fetchable()
            if not fetchable:
                await self._idle()
                continue
            try:
                connection = self._connection
                if connection is None:
                    connection = await self._connect()
                    fetchable = self._fetchable()  # with the partitions added meanwhile
                    if not fetchable:
                        continue
                response = await self._fetch(connection, fetchable)
                if response is None:
                    await self._close_connection()
                    continue
                await self._handle_response(connection, fetchable, response)
            except BrokerConnectionError as exc:
                self.connection_failures += 1
                # the first failure of a run is a warning, the retries after it are not
                level = logging.DEBUG if self._failing else logging.WARNING
                self._failing = True
                log.log(level, "%s: %s; retrying in %g s", self.name, exc, backoff)
                await self._close_connection()
                self._notify_progress()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("%s: fetching from %s:%d failed; retrying in %g s",
                              self.name, *self.leader, backoff)
                await self._close_connection()
                self._notify_progress()
                await asyncio.sleep(backoff)

    def _fetchable(self) -> dict[TP, tuple[_State, int]]:
        """(state, fetch offset) of the partitions to fetch now."""
        now = asyncio.get_running_loop().time()
        out = {}
        over_quota: bool | None = None
        self._held_back = False
        for key, state in self._states.items():
            if state.failed is None and state.log.deleted:
                state.failed = "the local log was deleted"
                log.error("%s: %s-%d: %s; no longer fetched", self.name, *key, state.failed)
            if state.failed is None and state.delayed_until <= now:
                if self._throttled(key, state) and not self._in_sync(state):
                    if over_quota is None:
                        over_quota = self.quota is not None and self.quota.exceeded()
                    if over_quota:  # Kafka's shouldFollowerThrottle
                        self._held_back = True
                        continue
                out[key] = (state, state.log.log_end_offset)
        return out

    def _throttled(self, key: TP, state: _State) -> bool:
        """Whether this broker throttles its fetches of the partition
        (follower.replication.throttled.replicas)."""
        return self.quota is not None and state.log.config.follower_throttled(key[1],
                                                                             self.broker_id)

    @staticmethod
    def _in_sync(state: _State) -> bool:
        """Caught up with the leader's high watermark (Kafka's isReplicaInSync: no lag)."""
        return 0 <= state.leader_high_watermark <= state.log.log_end_offset

    def _next_retry(self) -> float | None:
        """Seconds until the first partition backing off may be fetched again (None: none)."""
        now = asyncio.get_running_loop().time()
        delays = [s.delayed_until - now for s in self._states.values()
                  if s.failed is None and s.delayed_until > now]
        return min(delays) if delays else None

    async def _idle(self) -> None:
        """Nothing to fetch: wait for a partition to be added or a back-off to end (with a
        partition held back by the throttle, at most replica.fetch.backoff.ms)."""
        self._wake.clear()
        timeout = self._next_retry()
        if self._held_back:
            backoff = self.fetch_backoff_ms / 1000
            timeout = backoff if timeout is None else min(timeout, backoff)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _fetch(self, connection: BrokerConnection,
                     fetchable: dict[TP, tuple[_State, int]]) -> FetchResponse | None:
        """The leader's answer; None when a partition to follow was added (or added again at
        a new epoch) before it came. A fetch that does not name that partition may wait at the
        leader for all of replica.fetch.wait.max.ms, and acks=all produces to it with it:
        such a fetch is abandoned (the caller closes its connection) for one that names it.
        The records in the answer are views of the connection's buffer: they are appended
        before the connection sends anything else."""
        correlation = connection.next_correlation_id()
        frame = self._fetch_request(correlation, fetchable)
        self._fetching = connection
        try:
            answer = await connection.request_frame(frame, FETCH,
                                                    self.socket_timeout_ms / 1000)
        finally:
            self._fetching = None
        if answer is None:
            return None
        try:
            return decode_fetch_response(answer, correlation)
        except FetchResponseError as exc:
            raise BrokerConnectionError(f"{connection.address}: {exc}") from None

    async def _connect(self) -> BrokerConnection:
        if self._connection is None:
            host, port = self.leader
            self._connection = await BrokerConnection.open(
                host, port, self.client_id, self.socket_timeout_ms / 1000,
                require=((FETCH, FETCH_VERSION, "Fetch"),
                         (LIST_OFFSETS, LIST_OFFSETS_VERSION, "ListOffsets")),
                ssl_context=self.ssl_context, sasl=self.sasl,
            )
            if self._failing:
                log.info("%s: connected to %s:%d again", self.name, host, port)
                self._failing = False
        return self._connection

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    def _fetch_request(self, correlation_id: int,
                       fetchable: dict[TP, tuple[_State, int]]) -> bytes:
        """The Fetch v12 frame (Kafka's follower fetch: read uncommitted, no session)."""
        topics: dict[str, list[tuple[int, int, int, int, int, int]]] = {}
        for (topic, index), (state, offset) in fetchable.items():
            log_ = state.log
            topics.setdefault(topic, []).append((
                index, state.leader_epoch, offset, log_.epochs.latest_epoch,
                log_.log_start_offset, self.fetch_max_bytes))
        # a partition backing off is fetched again when its back-off ends, not when a long
        # poll for the others does
        wait_ms = self.fetch_wait_max_ms
        if (retry := self._next_retry()) is not None:
            wait_ms = min(wait_ms, math.ceil(retry * 1000))
        named: FetchTopics = list(topics.items())
        return encode_fetch_request(
            correlation_id, self.client_id, self.broker_id, wait_ms, self.fetch_min_bytes,
            self.fetch_response_max_bytes, named)

    async def _handle_response(
        self, connection: BrokerConnection, fetched: dict[TP, tuple[_State, int]],
        response: FetchResponse,
    ) -> None:
        if response.error_code != ErrorCode.none:
            log.warning("%s: the leader answered the fetch with %s; backing off", self.name,
                        kafka_name(response.error_code))
            for state, _ in fetched.values():
                self._delay(state, response.error_code)
            self._notify_progress()
            return
        # OFFSET_OUT_OF_RANGE asks the leader, and the next request on the connection reuses
        # the buffer the other partitions' records are in: those are appended first
        out_of_range: list[tuple[TP, _State, int]] = []
        for topic in response.responses:
            for data in topic.partitions:
                key = (topic.topic, data.partition_index)
                sent = fetched.get(key)
                if sent is None:
                    continue
                state, offset = sent
                if not self._unchanged(key, state, offset):
                    continue
                state.fetches += 1
                if data.error_code == ErrorCode.offset_out_of_range:
                    state.last_error = data.error_code
                    out_of_range.append((key, state, offset))
                    continue
                try:
                    self._handle_partition(key, state, data)
                except Exception as exc:
                    self._handle_failure(key, state, offset, exc)
        for key, state, offset in out_of_range:
            if not self._unchanged(key, state, offset):
                continue
            try:
                await self._handle_out_of_range(connection, key, state)
            except Exception as exc:
                self._handle_failure(key, state, offset, exc)
        self._notify_progress()

    def _handle_failure(self, key: TP, state: _State, offset: int, exc: Exception) -> None:
        if isinstance(exc, BrokerConnectionError):
            raise exc
        if isinstance(exc, (_UnexpectedAppendOffset, OSError, KafkaStorageError)):
            self._fail(key, state, repr(exc))  # a storage error: its dir is offline
        elif isinstance(exc, KafkaError):  # corrupt or invalid records: retry after a while
            log.error("%s: %s-%d: cannot append what the leader sent at offset %d: %s",
                      self.name, *key, offset, exc)
            self._delay(state, exc.code)
        else:
            log.error("%s: %s-%d: unexpected failure", self.name, *key, exc_info=exc)
            self._fail(key, state, repr(exc))

    def _handle_partition(self, key: TP, state: _State, data: PartitionData) -> None:
        error = data.error_code
        if error == ErrorCode.none:
            state.last_error = ErrorCode.none
            state.leader_high_watermark = data.high_watermark
            state.leader_log_start_offset = data.log_start_offset
            diverging = data.diverging_epoch
            if diverging.epoch >= 0:
                # no records come with a diverging epoch; the next answer moves the watermark
                self._truncate_on_divergence(key, state, diverging.epoch, diverging.end_offset)
            else:
                self._append(state, data)
        else:
            if error != state.last_error:
                log.info("%s: %s-%d: the leader answered %s; retrying in %g s", self.name,
                         *key, kafka_name(error), self.fetch_backoff_ms / 1000)
            self._delay(state, error)

    def _append(self, state: _State, data: PartitionData) -> None:
        partition, log_ = state.partition, state.log
        appended = False
        records = data.records
        if records:
            view, first = _whole_batches(records)
            if first is not None:
                end = log_.log_end_offset
                if first.base_offset < end:
                    if end == log_.log_start_offset and first.last_offset >= end:
                        # Kafka's case: the leader's log start (DeleteRecords) is inside the
                        # first batch of an empty follower log: start at that batch instead
                        log.info("%s: %s-%d: the leader's first batch starts at %d, below the "
                                 "empty log's start %d: starting the log there", self.name,
                                 partition.topic, partition.index, first.base_offset, end)
                        log_.truncate_fully_and_start_at(first.base_offset)
                    else:
                        raise _UnexpectedAppendOffset(
                            f"the leader's batches start at {first.base_offset}, below the "
                            f"log end offset {end}"
                        )
                if len(view) <= log_.config.segment_bytes:
                    log_.append(view, assign_offsets=False)
                else:
                    for chunk in _chunks(view, log_.config.segment_bytes):
                        log_.append(chunk, assign_offsets=False)
                appended = True
                if partition.metrics is not None:  # Kafka's ReplicationBytesInPerSec
                    partition.metrics.topics.replication_bytes_in += len(view)
            if self.quota is not None and self._throttled((partition.topic, partition.index),
                                                          state):
                self.quota.record(len(records))
        leader_start = data.log_start_offset
        if leader_start > log_.log_start_offset:
            log_.delete_records_before(min(leader_start, log_.log_end_offset))
        moved = self._set_high_watermark(partition, data.high_watermark)
        if appended or moved:
            partition.wake_waiters()

    @staticmethod
    def _set_high_watermark(partition: Partition, leader_high_watermark: int) -> bool:
        """The follower's high watermark: the leader's, within the local log. True if it
        moved. (A Partition without ``set_follower_high_watermark`` keeps its own.)"""
        setter = getattr(partition, "set_follower_high_watermark", None)
        if setter is None:
            return False
        log_ = partition.log
        before = partition.high_watermark
        value = max(min(leader_high_watermark, log_.log_end_offset), log_.log_start_offset)
        setter(value)
        return partition.high_watermark != before

    def _truncate_on_divergence(
        self, key: TP, state: _State, epoch: int, end_offset: int
    ) -> None:
        log_ = state.log
        end = log_.log_end_offset
        target = offset_to_truncate_to(log_, epoch, end_offset)
        if target >= end and log_.epochs.latest_epoch <= epoch:
            # nothing to cut: do not ask again at once with the same epoch
            log.warning("%s: %s-%d: the leader reports a divergence at epoch %d, offset %d, "
                        "but the log ending at %d has nothing to truncate; backing off",
                        self.name, *key, epoch, end_offset, end)
            self._delay(state, ErrorCode.none)
            return
        log.info("%s: %s-%d: the log diverged from the leader's (leader epoch %d ends at %d): "
                 "truncating from %d to %d", self.name, *key, epoch, end_offset, end, target)
        self._truncate(state, target)

    def _truncate(self, state: _State, offset: int) -> None:
        log_ = state.log
        if offset < log_.log_start_offset:
            log_.truncate_fully_and_start_at(offset)
        else:
            log_.truncate_to(offset)
        state.truncations += 1
        self._set_high_watermark(state.partition, state.partition.high_watermark)

    async def _handle_out_of_range(
        self, connection: BrokerConnection, key: TP, state: _State
    ) -> None:
        """Kafka's ``fetchOffsetAndTruncate``: the leader's end first, then its start."""
        end = state.log.log_end_offset
        leader_end = await self._list_offset(connection, key, state, LATEST_TIMESTAMP)
        if leader_end is None or not self._unchanged(key, state, end):
            return
        if leader_end < end:
            log.warning("%s: %s-%d: the leader's log ends at %d, below the local end %d: "
                        "truncating to it", self.name, *key, leader_end, end)
            self._truncate(state, leader_end)
            return
        leader_start = await self._list_offset(connection, key, state, EARLIEST_TIMESTAMP)
        if leader_start is None or not self._unchanged(key, state, end):
            return
        if leader_start > end:
            log.warning("%s: %s-%d: the leader's log starts at %d, beyond the local end %d: "
                        "starting the log there", self.name, *key, leader_start, end)
            state.log.truncate_fully_and_start_at(leader_start)
            state.truncations += 1
            self._set_high_watermark(state.partition, leader_start)
            return
        # within the leader's range after all (its log moved meanwhile): try again later
        self._delay(state, ErrorCode.offset_out_of_range)

    async def _list_offset(
        self, connection: BrokerConnection, key: TP, state: _State, timestamp: int
    ) -> int | None:
        """The leader's offset for ``timestamp`` (latest or earliest); None, with the partition
        delayed, when the leader answers an error."""
        topic, index = key
        request = ListOffsetsRequest(
            replica_id=self.broker_id, isolation_level=0, topics=(ListOffsetsTopic(
                name=topic, partitions=(ListOffsetsPartition(
                    partition_index=index, current_leader_epoch=state.leader_epoch,
                    timestamp=timestamp,
                ),),
            ),),
        )
        response = await connection.request(
            LIST_OFFSETS, LIST_OFFSETS_VERSION, request, self.socket_timeout_ms / 1000
        )
        for t in response.topics or ():
            for p in t.partitions or ():
                if t.name == topic and p.partition_index == index:
                    if p.error_code != ErrorCode.none:
                        self._delay(state, p.error_code)
                        return None
                    return p.offset
        self._delay(state, ErrorCode.unknown_topic_or_partition)
        return None

    def _unchanged(self, key: TP, state: _State, offset: int) -> bool:
        """Whether the partition is still followed as it was when a request about it went out
        (not removed, re-added, failed, or its log changed meanwhile: then fetch again)."""
        return (self._states.get(key) is state and state.failed is None
                and not state.log.deleted and state.log.log_end_offset == offset)

    def _delay(self, state: _State, error: ErrorCode) -> None:
        if error != ErrorCode.none:
            state.last_error = error
        state.delayed_until = asyncio.get_running_loop().time() + self.fetch_backoff_ms / 1000

    def _fail(self, key: TP, state: _State, reason: str) -> None:
        state.failed = reason
        log.error("%s: %s-%d: no longer fetched: %s", self.name, *key, reason)
