"""``ClusterView``: what the console reads from (and changes in) a Kafka cluster.

A Kafka client: confluent-kafka's AdminClient and Producer (created once, shared by the web
server's threads), a short-lived Consumer per message read (``messages.py``), and samsa's own
wire client (``samsa.tools.wire``) for the APIs the admin client lacks (DescribeLogDirs for
sizes on disk, ListTransactions / DescribeTransactions, ListGroups with the exact states).

Every method is synchronous and bounded in time: a broker that is down is a ``ConsoleError``
within about ``timeout_s``, never a hang. Kafka's error names lead the messages
(``INVALID_CONFIG: ...``).

Listing is built for large clusters: ``topics()`` is one Metadata request, one batched
ListOffsets pair (earliest and latest of every partition) and one DescribeLogDirs per broker.
"""

from __future__ import annotations

import functools
import importlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, ParamSpec, TypeVar

import click
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBindingFilter,
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from confluent_kafka.admin import ConfigEntry as ClientConfigEntry
from confluent_kafka.admin import ResourceType as ClientResourceType
from kio.index import load_request_schema
from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i8, i32, i64

from samsa.console import messages
from samsa.console.model import (
    AclInfo,
    BrokerInfo,
    ConfigEntry,
    ConsoleError,
    GroupDetail,
    GroupOffset,
    GroupSummary,
    MemberInfo,
    Message,
    NotFound,
    OffsetReset,
    Overview,
    PartitionInfo,
    TopicDetail,
    TopicSummary,
    TransactionInfo,
)
from samsa.errors import ErrorCode, kafka_name
from samsa.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.tools.admin import source_name
from samsa.tools.common import check_reachable, client_config, describe_error
from samsa.tools.groups import SCENARIOS, GroupTool, ResetPlan, error_code, state_name
from samsa.tools.log_dirs import DESCRIBE_LOG_DIRS
from samsa.tools.transactions import (
    DESCRIBE_TRANSACTIONS,
    DescribeTransactionsResponse,
    list_transactions,
)
from samsa.tools.transactions import Cluster as TransactionsCluster
from samsa.tools.transactions import error_text as transaction_error_text
from samsa.tools.wire import Node, WirePool, WireSecurity, build_entity

P = ParamSpec("P")
R = TypeVar("R")
TP = tuple[str, int]

CLIENT_ID = "samsa-console"
# How long a successful connection to a bootstrap address spares the next calls their probe.
PROBE_TRUST_S = 5.0
LIST_OFFSETS, DESCRIBE_ACLS = 2, 29
# Kafka's internal topics (the admin client's metadata does not flag them; not imported from
# samsa.tools.topics, which imports broker code the console must not).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _console_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Client failures leave a method as one ConsoleError line (NotFound passes through)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            view = args[0]
            assert isinstance(view, ClusterView)
            view.probe()
            return method(*args, **kwargs)
        except ConsoleError:
            raise
        except KafkaException as exc:
            raise ConsoleError(describe_error(exc)) from exc
        except click.ClickException as exc:  # the tools' ToolError and UsageError
            raise ConsoleError(exc.format_message()) from exc
        except TimeoutError as exc:
            raise ConsoleError("REQUEST_TIMED_OUT: the cluster did not answer in time") from exc

    return wrapper


class ClusterView:
    """A Kafka cluster as the console shows it; thread-safe."""

    def __init__(self, bootstrap_servers: str, client_config: dict[str, str] | None = None,
                 timeout_s: float = 10.0) -> None:
        self.bootstrap = bootstrap_servers
        self.extra: dict[str, str] = dict(client_config or {})
        self.timeout = timeout_s
        try:
            self.admin = AdminClient(self._config({}))
        except (KafkaException, click.ClickException, ValueError) as exc:
            raise ConsoleError(f"cannot build a client for {bootstrap_servers}: "
                               f"{_text(exc)}") from exc
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._reached_at = -PROBE_TRUST_S  # when a bootstrap address last took a connection
        try:
            self.security: WireSecurity | None = WireSecurity.from_properties(
                self.extra, "samsa ui")
        except click.ClickException:
            # settings only confluent-kafka honours: no wire requests (no sizes, no
            # transactions, groups without the exact consumer-group states)
            self.security = None

    def probe(self) -> None:
        """Fail at once when no bootstrap address accepts a connection (librdkafka would
        retry until its timeouts run out: a page then waited 10 s and more to say so);
        a probe that succeeded is trusted for PROBE_TRUST_S."""
        if time.monotonic() - self._reached_at < PROBE_TRUST_S:
            return
        check_reachable(self.bootstrap)
        self._reached_at = time.monotonic()

    def _config(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        ms = int(self.timeout * 1000)
        return client_config(self.bootstrap, CLIENT_ID, {
            "socket.timeout.ms": ms, "socket.connection.setup.timeout.ms": ms,
            **self.extra, **extra})

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.flush(min(self.timeout, 5.0))
                self._producer = None

    # --- shared pieces -----------------------------------------------------------------------

    def _wait(self, future: Future[Any]) -> Any:
        return future.result(timeout=self.timeout + 1)

    def _metadata(self) -> ClusterMetadata:
        return self.admin.list_topics(timeout=self.timeout)

    def _pool(self) -> WirePool:
        if self.security is None:
            raise ConsoleError("the console's client settings allow only confluent-kafka's "
                               "requests here")
        return WirePool(self.bootstrap, self.timeout, CLIENT_ID, self.security)

    def _group_tool(self, metadata: ClusterMetadata | None = None) -> GroupTool:
        factory = None if self.security is None else self._pool
        return GroupTool(self.admin, metadata or self._metadata(), self.timeout, factory)

    def _offsets(self, partitions: Iterable[TP], spec: OffsetSpec) -> dict[TP, int]:
        """ListOffsets for every partition in one batch (the client groups them by leader);
        partitions that failed (no leader) are left out."""
        futures = self._offset_futures(partitions, spec)
        return self._offset_results(futures)

    def _offset_futures(self, partitions: Iterable[TP], spec: OffsetSpec
                        ) -> dict[TopicPartition, Future[Any]]:
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        return self.admin.list_offsets(request, request_timeout=self.timeout)  # type: ignore

    def _offset_results(self, futures: Mapping[TopicPartition, Future[Any]]) -> dict[TP, int]:
        found: dict[TP, int] = {}
        deadline = time.monotonic() + self.timeout + 1
        for tp, future in futures.items():
            try:
                found[(tp.topic, tp.partition)] = future.result(
                    timeout=max(0.0, deadline - time.monotonic())).offset
            except KafkaException:
                continue
        return found

    def _leader_offsets(self, metadata: ClusterMetadata, partitions: Iterable[TP],
                        timestamps: tuple[int, ...]) -> list[dict[TP, int]]:
        """The offsets at each of ``timestamps`` (-2: log start, -1: high watermark) of the
        partitions: one ListOffsets per leader and timestamp over samsa's wire client (the
        admin client's per-partition futures cost seconds for 10,000 partitions), else the
        admin client. Partitions whose answer failed are left out."""
        by_leader: dict[int, list[TP]] = {}
        for topic, partition in partitions:
            leader = metadata.topics[topic].partitions[partition].leader
            if leader >= 0:
                by_leader.setdefault(leader, []).append((topic, partition))
        brokers = {n.node_id: n for n in _nodes(metadata)}
        if self.security is not None and set(by_leader) <= set(brokers):
            try:
                return self._wire_offsets(by_leader, brokers, timestamps)
            except click.ClickException:
                pass  # e.g. a version this client cannot build: the admin client's way
        keys = [tp for tps in by_leader.values() for tp in tps]
        futures = [self._offset_futures(keys, OffsetSpec.earliest() if ts == -2 else
                                        OffsetSpec.latest() if ts == -1 else
                                        OffsetSpec.for_timestamp(ts)) for ts in timestamps]
        return [self._offset_results(f) for f in futures]

    def _wire_offsets(self, by_leader: Mapping[int, list[TP]], brokers: Mapping[int, Node],
                      timestamps: tuple[int, ...]) -> list[dict[TP, int]]:
        found: list[dict[TP, int]] = [{} for _ in timestamps]
        with self._pool() as pool:
            for leader, tps in sorted(by_leader.items()):
                wire = pool.node(brokers[leader])
                version = wire.version(LIST_OFFSETS, 1, 7, "ListOffsets")
                schema = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
                grouped: dict[str, list[int]] = {}
                for topic, partition in tps:
                    grouped.setdefault(topic, []).append(partition)
                for index, timestamp in enumerate(timestamps):
                    request = build_entity(
                        schema.ListOffsetsRequest, replica_id=i32(-1), isolation_level=i8(0),
                        topics=tuple(schema.ListOffsetsTopic(name=TopicName(t), partitions=tuple(
                            build_entity(schema.ListOffsetsPartition, partition_index=i32(p),
                                         timestamp=i64(timestamp)) for p in ps))
                            for t, ps in grouped.items()))
                    response = wire.request(LIST_OFFSETS, version, request)
                    for topic in response.topics:
                        for p in topic.partitions:
                            if p.error_code == ErrorCode.none and p.offset >= 0:
                                found[index][(topic.name, p.partition_index)] = int(p.offset)
        return found

    def _log_dir_sizes(self, brokers: Iterable[Node], topics: dict[str, list[int]] | None = None
                       ) -> dict[TP, dict[int, int]] | None:
        """partition -> broker id -> size of its replica there, from DescribeLogDirs at every
        broker (of ``topics`` only, when given); None when the cluster (or these client
        settings) cannot tell."""
        if self.security is None:
            return None
        request = DescribeLogDirsRequest(topics=None if topics is None else tuple(
            DescribableLogDirTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in topics.items()))
        sizes: dict[TP, dict[int, int]] = {}
        try:
            with self._pool() as pool:
                for node in brokers:
                    wire = pool.node(node)
                    version = wire.version(DESCRIBE_LOG_DIRS, 1, 4, "DescribeLogDirs")
                    answer = wire.request(DESCRIBE_LOG_DIRS, version, request)
                    if getattr(answer, "error_code", ErrorCode.none) != ErrorCode.none:
                        continue
                    for result in answer.results:
                        for topic in result.topics:
                            for p in topic.partitions:
                                if not p.is_future_key:  # a replica moving between dirs
                                    sizes.setdefault((topic.name, p.partition_index), {})[
                                        node.node_id] = p.partition_size
        except click.ClickException:
            return None
        return sizes

    # --- overview ------------------------------------------------------------------------------

    @_console_errors
    def overview(self) -> Overview:
        described = self.admin.describe_cluster(request_timeout=self.timeout)
        metadata = self._metadata()
        cluster = self._wait(described)
        controller = cluster.controller.id if cluster.controller is not None else None
        brokers = sorted(
            (BrokerInfo(n.id, n.host, n.port, n.rack or None, n.id == controller)
             for n in cluster.nodes), key=lambda b: b.id)
        partitions = offline = under = 0
        for topic in metadata.topics.values():
            for p in topic.partitions.values():
                partitions += 1
                offline += p.leader < 0
                under += len(p.isrs) < len(p.replicas)
        return Overview(cluster.cluster_id or metadata.cluster_id, controller, brokers,
                        len(metadata.topics), partitions, offline, under)

    # --- topics --------------------------------------------------------------------------------

    @_console_errors
    def topics(self, include_internal: bool = True) -> list[TopicSummary]:
        metadata = self._metadata()
        names = sorted(t for t in metadata.topics
                       if include_internal or t not in INTERNAL_TOPICS)
        partitions = [(t, p) for t in names for p in metadata.topics[t].partitions
                      if metadata.topics[t].partitions[p].leader >= 0]
        starts, ends = self._leader_offsets(metadata, partitions, (-2, -1))
        sizes = self._log_dir_sizes(_nodes(metadata))
        summaries = []
        for name in names:
            topic = metadata.topics[name]
            if topic.error is not None:
                continue
            infos = list(topic.partitions.values())
            messages_total: int | None = 0
            end_total = 0
            size: int | None = 0 if sizes is not None else None
            for p in infos:
                key = (name, p.id)
                end_total += ends.get(key, 0)
                if messages_total is not None:
                    if key in starts and key in ends:
                        messages_total += ends[key] - starts[key]
                    else:
                        messages_total = None
                if size is not None and sizes is not None:
                    size += sum(sizes.get(key, {}).values())
            summaries.append(TopicSummary(
                name=name, internal=name in INTERNAL_TOPICS, partitions=len(infos),
                replication=max((len(p.replicas) for p in infos), default=0),
                offline=sum(p.leader < 0 for p in infos),
                under_replicated=sum(len(p.isrs) < len(p.replicas) for p in infos),
                size_bytes=size, messages=messages_total, end_offsets=end_total))
        return summaries

    @_console_errors
    def topic(self, name: str) -> TopicDetail:
        futures = self.admin.describe_topics(TopicCollection([name]),
                                             request_timeout=self.timeout)
        resource = ConfigResource(ClientResourceType.TOPIC, name)
        configs_future = self.admin.describe_configs([resource], request_timeout=self.timeout)
        missing = f"topic '{name}' does not exist"
        described = self._not_found_as(lambda: self._wait(futures[name]), missing)
        keys = [(name, p.id) for p in described.partitions if p.leader is not None]
        earliest = self._offset_futures(keys, OffsetSpec.earliest())
        latest = self._offset_futures(keys, OffsetSpec.latest())
        nodes = {n.id: Node(n.id, n.host, n.port) for p in described.partitions
                 for n in [*p.replicas, *([p.leader] if p.leader else [])]}
        sizes = self._log_dir_sizes(sorted(nodes.values()),
                                    {name: [p.id for p in described.partitions]})
        starts, ends = self._offset_results(earliest), self._offset_results(latest)
        partitions = []
        for p in sorted(described.partitions, key=lambda p: p.id):
            leader = p.leader.id if p.leader is not None else -1
            size = None if sizes is None else sizes.get((name, p.id), {}).get(leader)
            partitions.append(PartitionInfo(
                p.id, leader, [r.id for r in p.replicas], [r.id for r in p.isr],
                starts.get((name, p.id)), ends.get((name, p.id)), size))
        entries = self._not_found_as(lambda: self._wait(configs_future[resource]), missing)
        configs = [ConfigEntry(e.name, e.value, source_name(e.source), bool(e.is_default),
                               bool(e.is_read_only), bool(e.is_sensitive))
                   for e in sorted(entries.values(), key=lambda e: e.name)]
        topic_id = str(described.topic_id) if described.topic_id is not None else None
        return TopicDetail(name, bool(described.is_internal) or name in INTERNAL_TOPICS,
                           topic_id, partitions, configs)

    @_console_errors
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None) -> None:
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                       config=dict(configs or {}))
        futures = self.admin.create_topics([new], request_timeout=self.timeout,
                                           operation_timeout=self.timeout)
        self._wait(futures[name])

    @_console_errors
    def delete_topic(self, name: str) -> None:
        futures = self.admin.delete_topics([name], request_timeout=self.timeout,
                                           operation_timeout=self.timeout)
        self._not_found_as(lambda: self._wait(futures[name]), f"topic '{name}' does not exist")

    @_console_errors
    def add_partitions(self, name: str, total: int) -> None:
        futures = self.admin.create_partitions([NewPartitions(name, total)],
                                               request_timeout=self.timeout,
                                               operation_timeout=self.timeout)
        self._not_found_as(lambda: self._wait(futures[name]), f"topic '{name}' does not exist")

    @_console_errors
    def delete_records(self, name: str, before: dict[int, int] | None = None
                       ) -> dict[int, int]:
        if before is None:
            metadata = self.admin.list_topics(topic=name, timeout=self.timeout)
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: topic '{name}' does not exist")
            before = dict.fromkeys(topic.partitions, -1)  # -1: up to the high watermark
        if not before:
            return {}
        futures = self.admin.delete_records(
            [TopicPartition(name, p, o) for p, o in sorted(before.items())],
            request_timeout=self.timeout, operation_timeout=self.timeout)
        result: dict[int, int] = {}
        errors: list[str] = []
        for tp, future in futures.items():
            try:
                result[tp.partition] = self._wait(future).low_watermark
            except KafkaException as exc:
                errors.append(f"{describe_error(exc)} (partition {tp.partition})")
        if errors:
            raise ConsoleError("; ".join(errors))
        return result

    @_console_errors
    def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None:
        entries = [ClientConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_.items()]
        entries += [ClientConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in delete]
        if not entries:
            return
        resource = ConfigResource(ClientResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource], request_timeout=self.timeout)
        self._not_found_as(lambda: self._wait(futures[resource]),
                           f"topic '{name}' does not exist")

    @staticmethod
    def _not_found_as(call: Callable[[], Any], what: str) -> Any:
        try:
            return call()
        except KafkaException as exc:
            if error_code(exc) == ErrorCode.unknown_topic_or_partition:
                raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: {what}") from exc
            raise

    # --- messages ------------------------------------------------------------------------------

    def _partitions_of(self, topic: str, partition: int | None) -> list[int]:
        """The topic's partitions (or the one asked for); NotFound when it does not exist."""
        futures = self.admin.describe_topics(TopicCollection([topic]),
                                             request_timeout=self.timeout)
        described = self._not_found_as(lambda: self._wait(futures[topic]),
                                       f"topic '{topic}' does not exist")
        ids = sorted(p.id for p in described.partitions)
        if partition is None:
            return ids
        if partition not in ids:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: topic '{topic}' has no partition "
                           f"{partition}")
        return [partition]

    def _reader(self) -> messages.Reader:
        return messages.Reader(self._config, self.timeout)

    @_console_errors
    def end_offsets(self, topic: str, partition: int | None = None) -> dict[int, int]:
        """partition -> high watermark (where a live tail starts)."""
        ids = self._partitions_of(topic, partition)
        ends = self._offsets([(topic, p) for p in ids], OffsetSpec.latest())
        return {p: o for (_, p), o in ends.items()}

    @_console_errors
    def read_messages(self, topic: str, partition: int | None, start: str,
                      value: int | None = None, limit: int = 50) -> list[Message]:
        if start not in messages.STARTS:
            raise ConsoleError(f"start takes one of {', '.join(messages.STARTS)}, got {start!r}")
        if start in ("offset", "timestamp") and value is None:
            raise ConsoleError(f"a start at an {start} needs a value")
        if limit <= 0:
            return []
        ids = self._partitions_of(topic, partition)
        keys = [(topic, p) for p in ids]
        earliest = self._offset_futures(keys, OffsetSpec.earliest())
        latest = self._offset_futures(keys, OffsetSpec.latest())
        at_time = (self._offset_futures(keys, OffsetSpec.for_timestamp(value))
                   if start == "timestamp" and value is not None else {})
        starts, ends = self._offset_results(earliest), self._offset_results(latest)
        found = self._offset_results(at_time)
        ranges: dict[int, tuple[int, int]] = {}  # partition -> (first offset, stop offset)
        for p in ids:
            low, high = starts.get((topic, p)), ends.get((topic, p))
            if low is None or high is None:
                continue  # no leader: nothing to read there now
            if start == "beginning":
                first = low
            elif start == "end":
                first = max(low, high - limit)
            elif start == "offset":
                assert value is not None
                first = min(max(value, low), high)
            else:
                at = found.get((topic, p), -1)
                first = high if at < 0 else max(at, low)
            if first < high:
                ranges[p] = (first, high)
        read = self._reader().read(topic, ranges, limit)
        read.sort(key=lambda m: (m.timestamp_ms, m.partition, m.offset))
        return read[-limit:] if start == "end" else read[:limit]

    @_console_errors
    def tail(self, topic: str, partition: int | None, after: dict[int, int],
             limit: int = 100, wait_s: float = 1.0) -> list[Message]:
        ids = self._partitions_of(topic, partition)
        missing = [p for p in ids if p not in after]
        positions = {p: o for p, o in after.items() if p in ids}
        if missing:
            ends = self._offsets([(topic, p) for p in missing], OffsetSpec.latest())
            positions.update({p: o for (_, p), o in ends.items()})
        wait = max(0.0, min(wait_s, self.timeout))
        read = self._reader().tail(topic, positions, limit, wait)
        read.sort(key=lambda m: (m.timestamp_ms, m.partition, m.offset))
        return read[:limit]

    def _producer_client(self) -> Producer:
        with self._lock:
            if self._producer is None:
                ms = int(self.timeout * 1000)
                self._producer = Producer(self._config({
                    "message.timeout.ms": ms, "delivery.timeout.ms": ms,
                    "request.timeout.ms": ms, "linger.ms": 0}))
            return self._producer

    @_console_errors
    def produce(self, topic: str, partition: int | None, key: bytes | None,
                value: bytes | None, headers: list[tuple[str, bytes]]) -> tuple[int, int]:
        self._partitions_of(topic, partition)  # NotFound before the producer waits on it
        producer = self._producer_client()
        done = threading.Event()
        outcome: list[Any] = []

        def delivered(err: Any, msg: Any) -> None:
            outcome.append((err, msg))
            done.set()

        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": list(headers),
                                  "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        deadline = time.monotonic() + self.timeout + 1
        while not done.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConsoleError("REQUEST_TIMED_OUT: the message was not acknowledged in "
                                   f"{self.timeout:g} s")
            producer.poll(min(0.1, remaining))
        err, msg = outcome[0]
        if err is not None:
            raise ConsoleError(describe_error(err))
        return msg.partition(), msg.offset()

    # --- consumer groups ---------------------------------------------------------------------

    def _committed_many(self, group_ids: list[str]) -> dict[str, dict[TP, int]]:
        """Each group's committed offsets (OffsetFetch per group, all in flight at once)."""
        futures = {
            g: self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g)], request_timeout=self.timeout)[g]
            for g in group_ids}
        committed: dict[str, dict[TP, int]] = {}
        for group_id, future in futures.items():
            try:
                result = self._wait(future)
            except KafkaException as exc:
                if error_code(exc) == ErrorCode.group_id_not_found:
                    committed[group_id] = {}
                    continue
                raise
            committed[group_id] = {(tp.topic, tp.partition): tp.offset
                                   for tp in result.topic_partitions or []
                                   if tp.error is None and tp.offset >= 0}
        return committed

    def _lags(self, committed: Mapping[str, Mapping[TP, int]]
              ) -> tuple[dict[str, int | None], dict[TP, int]]:
        partitions = {tp for offsets in committed.values() for tp in offsets}
        ends = self._offsets(sorted(partitions), OffsetSpec.latest())
        lags: dict[str, int | None] = {}
        for group_id, offsets in committed.items():
            known = [max(0, ends[tp] - o) for tp, o in offsets.items() if tp in ends]
            lags[group_id] = sum(known) if known or not offsets else None
        return lags, ends

    @_console_errors
    def groups(self) -> list[GroupSummary]:
        tool = self._group_tool()
        listed = tool.list_groups()
        ids = [g.group_id for g in listed]
        described = tool.describe_groups(ids) if ids else {}
        lags, _ = self._lags(self._committed_many(ids))
        summaries = []
        for g in listed:
            description = described.get(g.group_id)
            members = len(description.members) if description is not None else 0
            summaries.append(GroupSummary(g.group_id, g.state, g.type.capitalize(),
                                          g.protocol_type, members, lags.get(g.group_id)))
        return summaries

    @_console_errors
    def group(self, group_id: str) -> GroupDetail:
        tool = self._group_tool()
        description = tool.describe_groups([group_id])[group_id]
        committed = self._committed_many([group_id])[group_id]
        if description is None and not committed:
            raise NotFound(f"GROUP_ID_NOT_FOUND: consumer group '{group_id}' does not exist")
        details = tool.consumer_details({group_id: description})
        detail = details.get(group_id)
        members = []
        assigned: dict[TP, str] = {}
        for m in description.members if description is not None else []:
            tps = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
            members.append(MemberInfo(m.member_id, m.client_id, m.host, tps))
            assigned.update(dict.fromkeys(tps, m.member_id))
        partitions = sorted(set(committed) | set(assigned))
        ends = self._offsets(partitions, OffsetSpec.latest())
        offsets = [GroupOffset(t, p, committed.get((t, p)), ends.get((t, p)),
                               assigned.get((t, p))) for t, p in partitions]
        if description is None:
            return GroupDetail(group_id, "Empty", "Classic", "", "", None, [], offsets)
        kind = getattr(description, "type", None)
        type_name = "Consumer" if getattr(kind, "name", "") == "CONSUMER" else "Classic"
        state = detail.state if detail is not None else state_name(description.state)
        coordinator = description.coordinator.id if description.coordinator else None
        protocol_type = "" if description.is_simple_consumer_group else "consumer"
        return GroupDetail(group_id, state, type_name, protocol_type,
                           description.partition_assignor or "", coordinator, members, offsets)

    @_console_errors
    def reset_offsets(self, group_id: str, topic: str | None, mode: str, value: str | None,
                      execute: bool) -> list[OffsetReset]:
        scenario = mode.replace("-", "_")
        if scenario not in SCENARIOS:
            raise ConsoleError(f"reset mode takes one of "
                               f"{', '.join(s.replace('_', '-') for s in SCENARIOS)}, "
                               f"got {mode!r}")
        plan = ResetPlan.of(scenario, value, () if topic is None else ((topic, None),),
                            all_topics=topic is None, execute=execute)
        tool = self._group_tool()
        current = tool.committed(group_id)
        planned = tool.reset_plan([group_id], plan)[group_id]
        return [OffsetReset(t, p, current[(t, p)].offset if (t, p) in current else None, new)
                for (t, p), new in sorted(planned.items())]

    @_console_errors
    def delete_group(self, group_id: str) -> None:
        futures = self.admin.delete_consumer_groups([group_id], request_timeout=self.timeout)
        try:
            self._wait(futures[group_id])
        except KafkaException as exc:
            if error_code(exc) == ErrorCode.group_id_not_found:
                raise NotFound(f"GROUP_ID_NOT_FOUND: consumer group '{group_id}' does not "
                               "exist") from exc
            raise

    @_console_errors
    def lags(self) -> dict[str, int]:
        listed = self._group_tool().list_groups()
        lags, _ = self._lags(self._committed_many([g.group_id for g in listed]))
        return {g: lag for g, lag in lags.items() if lag is not None}

    # --- transactions and ACLs -----------------------------------------------------------------

    @_console_errors
    def transactions(self) -> list[TransactionInfo]:
        if self.security is None:
            raise ConsoleError("transactions are not shown with these client settings")
        cluster = TransactionsCluster(self.bootstrap, self.timeout, self.security)
        try:
            try:
                rows, _ = list_transactions(cluster, [], [], -1)
            except click.ClickException as exc:
                message = exc.format_message()
                if message.startswith("UNSUPPORTED_VERSION"):
                    raise ConsoleError(f"transactions are not supported by this cluster "
                                       f"({message})") from exc
                raise
            # ListTransactions at a broker lists the ids it coordinates
            by_coordinator: dict[int, list[str]] = {}
            for transactional_id, broker, _, _ in rows:
                by_coordinator.setdefault(int(broker), []).append(transactional_id)
            nodes = {n.node_id: n for n in cluster.brokers()}
            found: list[TransactionInfo] = []
            for broker_id, ids in sorted(by_coordinator.items()):
                found += self._describe_transactions(cluster, nodes[broker_id], ids)
        finally:
            cluster.close()
        return sorted(found, key=lambda t: t.transactional_id)

    def _describe_transactions(self, cluster: TransactionsCluster, node: Node,
                               ids: list[str]) -> list[TransactionInfo]:
        wire = cluster.node(node)
        version = wire.version(DESCRIBE_TRANSACTIONS, 0, 0, "DescribeTransactions")
        response = wire.request(DESCRIBE_TRANSACTIONS, version,
                                DescribeTransactionsRequest(
                                    transactional_ids=tuple(TransactionalId(i) for i in ids)),
                                DescribeTransactionsResponse)
        found = []
        for state in response.transaction_states:
            if state.error_code != ErrorCode.none:
                if state.error_code == ErrorCode.transactional_id_not_found:
                    continue  # expired between the list and the describe
                raise ConsoleError(transaction_error_text(
                    state.error_code, f"describing transactional id {state.transactional_id}"))
            timeout_ms = state.transaction_timeout
            if not isinstance(timeout_ms, int):  # kio reads timedelta_i32 as a timedelta
                timeout_ms = int(timeout_ms.total_seconds() * 1000)
            found.append(TransactionInfo(
                state.transactional_id, int(state.producer_id), int(state.producer_epoch),
                state.transaction_state, timeout_ms, node.node_id,
                sorted((t.topic, int(p)) for t in state.topics for p in t.partitions)))
        return found

    @_console_errors
    def acls(self) -> list[AclInfo]:
        """Every ACL (DescribeAcls with a filter matching all). Sent over samsa's wire
        client: librdkafka hands back an empty list where the broker answers
        SECURITY_DISABLED (no authorizer)."""
        if self.security is None:
            return self._client_acls()
        with self._pool() as pool:
            wire = pool.bootstrap()
            version = wire.version(DESCRIBE_ACLS, 1, 3, "DescribeAcls")
            request = build_entity(
                load_request_schema(DESCRIBE_ACLS, version),
                resource_type_filter=int(ResourceType.ANY), resource_name_filter=None,
                pattern_type_filter=int(PatternType.ANY), principal_filter=None,
                host_filter=None, operation=int(AclOperation.ANY),
                permission_type=int(AclPermissionType.ANY))
            response = wire.request(DESCRIBE_ACLS, version, request)
        code = response.error_code
        if code == ErrorCode.security_disabled:
            raise ConsoleError("no authorizer is enabled on this cluster (SECURITY_DISABLED: "
                               f"{response.error_message or 'Security features are disabled.'})")
        if code != ErrorCode.none:
            raise ConsoleError(f"{kafka_name(code)}: {response.error_message or ''}"
                               .rstrip(": "))
        return _sorted_acls(
            AclInfo(a.principal, a.host, AclOperation.from_code(a.operation).name,
                    AclPermissionType.from_code(a.permission_type).name,
                    ResourceType.from_code(r.resource_type).name, r.resource_name,
                    PatternType.from_code(getattr(r, "pattern_type", 3)).name)
            for r in response.resources for a in r.acls)

    def _client_acls(self) -> list[AclInfo]:
        any_filter = AclBindingFilter(
            int(ResourceType.ANY), None, int(PatternType.ANY), None,  # type: ignore[arg-type]
            None, int(AclOperation.ANY), int(AclPermissionType.ANY))  # type: ignore[arg-type]
        bindings = self._wait(self.admin.describe_acls(any_filter,
                                                       request_timeout=self.timeout))
        return _sorted_acls(
            AclInfo(b.principal, b.host, AclOperation.from_code(_code(b.operation)).name,
                    AclPermissionType.from_code(_code(b.permission_type)).name,
                    ResourceType.from_code(_code(b.restype)).name, b.name,
                    PatternType.from_code(_code(b.resource_pattern_type)).name)
            for b in bindings)


def _sorted_acls(acls: Iterable[AclInfo]) -> list[AclInfo]:
    return sorted(acls, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type,
                                       a.principal, a.host, a.operation, a.permission))


def _nodes(metadata: ClusterMetadata) -> list[Node]:
    return sorted(Node(b.id, str(b.host), b.port) for b in metadata.brokers.values())


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


def _text(exc: BaseException) -> str:
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    return describe_error(exc)

