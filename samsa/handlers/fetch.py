"""Fetch (1): file regions of whole batches, sent with sendfile; long-poll woken by appends.

Consumers read up to the high watermark (read_committed: the last stable offset); a follower
(replica id >= 0) reads up to the log end offset and its fetch offset tells the leader how far
its log reaches (``Partition.record_follower_fetch``).

Limits follow KIP-74: ``max_bytes`` and ``partition_max_bytes`` are soft, the first batch of the
first partition with data always goes out whole. A fetch that has fewer than ``min_bytes`` waits
up to ``max_wait`` for an append to any of its partitions (never by polling), then reads again.
Fetch sessions are refused the way Kafka allows (session id 0), so clients send full fetches.

A follower's fetch of a partition its topic's ``leader.replication.throttled.replicas`` names
for this broker gets no records while the follower is out of the ISR and the leader's
replication throttle is over ``leader.replication.throttled.rate``; the bytes sent to
followers of such partitions are recorded against it (``samsa.cluster.replication_quota``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, cast

from samsa.cluster.partition import Partition
from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.authz import authorize_cluster, authorized
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.fetch.v12.request import FetchTopic as NamedFetchTopic
    from kio.schema.fetch.v16.request import FetchPartition, FetchRequest

    from samsa.metrics import BrokerMetrics

READ_COMMITTED = 1

# A topic as the request names it: by id from v13 on, by name before.
TopicKey = uuid.UUID | str | None


_UNKNOWN = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id})


def _empty(index: int, error: ErrorCode, partition: Partition | None = None) -> dict[str, Any]:
    """A partition's answer without records; without a partition, Kafka's answer for an
    error (offsets -1)."""
    return {
        "partition_index": index,
        "error_code": error,
        "high_watermark": partition.high_watermark if partition else -1,
        "last_stable_offset": partition.last_stable_offset if partition else -1,
        "log_start_offset": partition.log.log_start_offset if partition else -1,
        # Kafka's KafkaApis answers a partition it does not know with an empty list
        "aborted_transactions": [] if error in _UNKNOWN else None,
        "preferred_read_replica": -1,
        "records": b"",
    }


class _FetchPlan:
    """The partitions of one request, resolved once; read() may run several times."""

    def __init__(self, ctx: RequestContext, request: FetchRequest) -> None:
        server = ctx.server
        store = server.topics
        assert store is not None
        self.by_id = ctx.version >= 13
        self.read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        state = getattr(request, "replica_state", None)  # v15+ moved replica_id there
        self.replica_id = state.replica_id if state is not None else getattr(
            request, "replica_id", -1)
        self.max_bytes: int = request.max_bytes
        # a follower's: the leader's replication throttle, checked once per read
        self.quota = server.replicas.quotas.leader if self.replica_id >= 0 else None
        self.broker_id = server.broker_id
        self.throttled_bytes = 0  # records of throttled partitions in the last read
        self._over_quota: bool | None = None
        self.topics: list[
            tuple[TopicKey, list[tuple[FetchPartition, Partition | None, ErrorCode | None]]]
        ] = []
        readable = None  # the topics the principal may read (None: all)
        if server.authorizer is not None:
            readable = self._readable(ctx, request)
        for topic in request.topics or ():
            key: TopicKey
            if self.by_id:
                meta = store.by_id(topic.topic_id) if topic.topic_id else None
                key = topic.topic_id
            else:  # v4-v12 name the topic: v12's FetchTopic (its partitions have v16's fields)
                key = cast("NamedFetchTopic", topic).topic
                meta = store.get(key)
            # an unknown topic id is UNKNOWN_TOPIC_ID before authorization; a name is not
            name = meta.name if meta is not None else None if self.by_id else key
            denied = readable is not None and name is not None and name not in readable
            parts: list[tuple[FetchPartition, Partition | None, ErrorCode | None]] = []
            for p in topic.partitions or ():
                if denied:
                    parts.append((p, None, ErrorCode.topic_authorization_failed))
                    continue
                if meta is None:
                    parts.append((p, None, ErrorCode.unknown_topic_id if self.by_id
                                  else ErrorCode.unknown_topic_or_partition))
                    continue
                partition, error = server.replicas.leader_partition(
                    meta.name, p.partition, getattr(p, "current_leader_epoch", -1))
                parts.append((p, partition, error))
            self.topics.append((key, parts))

    def _readable(self, ctx: RequestContext, request: FetchRequest) -> set[str]:
        """Kafka's checks: a follower needs CLUSTER_ACTION on the cluster (else every
        partition is refused), a consumer READ on each topic (a topic id the broker does not
        know answers UNKNOWN_TOPIC_ID first)."""
        store = ctx.server.topics
        assert store is not None
        names: list[str] = []
        for topic in request.topics or ():
            if self.by_id:
                meta = store.by_id(topic.topic_id) if topic.topic_id else None
                if meta is not None:
                    names.append(meta.name)
            else:
                names.append(cast("NamedFetchTopic", topic).topic)
        if self.replica_id >= 0:
            return set(names) if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else set()
        return authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names)

    @property
    def partitions(self) -> list[Partition]:
        return [part for _, parts in self.topics for _, part, err in parts if part and not err]

    def read(self) -> tuple[list[dict[str, Any]], int, bool]:
        """(response topics, bytes of records, whether any partition has an error)."""
        remaining = self.max_bytes
        total, errors, first = 0, False, True
        self.throttled_bytes, self._over_quota = 0, None
        responses = []
        for key, parts in self.topics:
            results = []
            for p, partition, error in parts:
                if partition is not None and partition.closed:  # deleted while we waited
                    error = (ErrorCode.kafka_storage_error if partition.offline
                             else ErrorCode.not_leader_or_follower if partition.replicated
                             else ErrorCode.unknown_topic_or_partition)
                    partition = None
                if partition is not None and error is None:  # the leader moved on meanwhile
                    error = partition.leader_error(getattr(p, "current_leader_epoch", -1))
                if partition is None or error is not None:
                    results.append(_empty(p.partition, error or ErrorCode.none))
                    errors = True
                    continue
                result = self._read_partition(p, partition, remaining, first)
                size = len(result["records"])
                if result["error_code"]:
                    errors = True
                if size:
                    first = False
                    total += size
                    remaining -= size
                results.append(result)
            field = "topic_id" if self.by_id else "topic"
            responses.append({field: key, "partitions": results})
        return responses, total, errors

    def _read_partition(
        self, p: FetchPartition, partition: Partition, remaining: int, first: bool
    ) -> dict[str, Any]:
        log = partition.log
        result = _empty(p.partition, ErrorCode.none, partition)
        if self.read_committed:
            result["aborted_transactions"] = []
        diverging = self._diverging_epoch(p, partition)
        if diverging is not None:
            result["diverging_epoch"] = diverging
            return result
        throttled = False
        if self.replica_id >= 0:  # a follower: its fetch offset is its log end offset
            partition.record_follower_fetch(self.replica_id, p.fetch_offset)
            result["high_watermark"] = partition.high_watermark
            upper = partition.log.log_end_offset
            throttled = log.config.leader_throttled(partition.index, self.broker_id)
            if throttled and self.replica_id not in partition.isr and self._throttle():
                return result  # Kafka's shouldLeaderThrottle: no records this time
        elif self.read_committed:
            upper = partition.last_stable_offset
        else:
            upper = partition.high_watermark
        try:
            region = log.read(
                p.fetch_offset, max(0, min(p.partition_max_bytes, remaining)),
                max_offset=upper, min_one_batch=first,
            )
        except KafkaError as exc:  # OFFSET_OUT_OF_RANGE, say: Kafka's offsets are -1 then
            return {**_empty(p.partition, exc.code),
                    "aborted_transactions": result["aborted_transactions"]}
        if region is not None:
            result["records"] = region
            if throttled:
                self.throttled_bytes += len(region)
            if self.read_committed:
                # the aborted transactions overlapping the batches returned
                result["aborted_transactions"] = [
                    {"producer_id": t.producer_id, "first_offset": t.first_offset}
                    for t in log.collect_aborted_txns(p.fetch_offset, log.offset_after(region))
                ]
        return result

    def _throttle(self) -> bool:
        """Whether the leader's replication throttle is over its rate (once per read)."""
        if self._over_quota is None:
            self._over_quota = self.quota is not None and self.quota.exceeded()
        return self._over_quota

    @staticmethod
    def _diverging_epoch(p: FetchPartition, partition: Partition) -> dict[str, int] | None:
        last_fetched = getattr(p, "last_fetched_epoch", -1)
        if last_fetched < 0:
            return None
        epoch, end_offset = partition.log.end_offset_for_epoch(last_fetched)
        if epoch < 0 or (epoch == last_fetched and end_offset >= p.fetch_offset):
            return None
        return {"epoch": epoch, "end_offset": end_offset}


def _count(metrics: BrokerMetrics, plan: _FetchPlan, responses: list[dict[str, Any]],
           total: int) -> None:
    """Kafka's BytesOutPerSec and fetch request counts per topic (a consumer's fetch), or its
    ReplicationBytesOutPerSec (a follower's)."""
    if plan.replica_id >= 0:
        metrics.topics.replication_bytes_out += total
        return
    stats = metrics.topics
    for (key, parts), response in zip(plan.topics, responses, strict=True):
        name = key if isinstance(key, str) else next(
            (part.topic for _, part, _ in parts if part is not None), None)
        if name is None:
            continue
        nbytes, failed = 0, False
        for result in response["partitions"]:
            nbytes += len(result["records"])
            failed = failed or bool(result["error_code"])
        stats.fetched(name, nbytes, failed)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@api(1, "Fetch", 4, 16)
async def fetch(ctx: RequestContext, request: FetchRequest) -> dict[str, Any]:
    session_id = getattr(request, "session_id", 0)
    if session_id != 0:
        return {"throttle_time": 0, "error_code": ErrorCode.fetch_session_id_not_found,
                "session_id": 0, "responses": []}
    plan = _FetchPlan(ctx, request)
    responses, total, errors = plan.read()
    wait = request.max_wait.total_seconds()
    metrics = ctx.server.metrics
    if metrics is not None:  # Kafka's request metrics tell the two kinds of fetch apart
        ctx.metric_name = "FetchFollower" if plan.replica_id >= 0 else "FetchConsumer"
    if total < request.min_bytes and not errors and wait > 0 and plan.partitions:
        if metrics is not None:
            metrics.delayed_fetch += 1
            waited = time.monotonic()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        follower = plan.replica_id >= 0
        while total < request.min_bytes:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            waiter: asyncio.Future[None] = loop.create_future()
            for partition in plan.partitions:
                partition.add_waiter(waiter, log_end=follower)
            timer = loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                for partition in plan.partitions:
                    partition.remove_waiter(waiter)
            responses, total, errors = plan.read()
            if errors or not ctx.server.started:  # a stopping broker answers at once
                break
        if metrics is not None:
            metrics.delayed_fetch -= 1
            ctx.remote_s += time.monotonic() - waited
    if metrics is not None:
        _count(metrics, plan, responses, total)
    if plan.quota is not None:  # both in-sync and lagging followers' bytes count, as Kafka's
        plan.quota.record(plan.throttled_bytes)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
            "responses": responses}
