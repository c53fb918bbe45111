"""The broker's metrics for Prometheus: Kafka's metric names as the Prometheus JMX exporter
rules that Kafka deployments use (Strimzi's ``kafka-metrics.yaml``: lower-case names and
label names, ``PerSec`` meters as ``_total`` counters, histograms as quantile gauges with a
``_count``) name them, so an existing Kafka dashboard works unchanged; consumer group lag as
kafka-exporter names it (``kafka_consumergroup_lag``).

The counters come from ``samsa.metrics.BrokerMetrics`` (kept by the request, produce and fetch
paths); the gauges are read from the broker's state when scraped, on the event loop, so they see
a consistent broker. Served by ``PrometheusEndpoint`` at ``/metrics`` on ``prometheus.listener``;
the exposition is prometheus-client's.

Kafka's request handler and network processor idle ratios have no thread pool to measure here:
one event loop does both, so both report the share of wall time the loop's thread did not spend
on the CPU since the previous scrape (waiting in the selector, or on disk I/O).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.samples import Sample

from samsa.coordinator.group import GroupState
from samsa.metrics import STAGES, BrokerMetrics, Histogram, RequestStats, stage_histogram

if TYPE_CHECKING:
    from samsa.server.kafka_server import KafkaServer

log = logging.getLogger(__name__)

_MAX_REQUEST_HEAD = 8192
_READ_TIMEOUT_S = 10.0
_REQUEST_TIMERS = tuple(stage.lower() for stage in STAGES)
_TOPIC_COUNTERS = (("messagesin", "messages_in"), ("bytesin", "bytes_in"),
                   ("bytesout", "bytes_out"), ("bytesrejected", "bytes_rejected"),
                   ("totalproducerequests", "total_produce_requests"),
                   ("totalfetchrequests", "total_fetch_requests"),
                   ("failedproducerequests", "failed_produce_requests"),
                   ("failedfetchrequests", "failed_fetch_requests"))
_GROUP_STATES = (("numgroupsstable", GroupState.STABLE),
                 ("numgroupspreparingrebalance", GroupState.PREPARING_REBALANCE),
                 ("numgroupscompletingrebalance", GroupState.COMPLETING_REBALANCE),
                 ("numgroupsempty", GroupState.EMPTY), ("numgroupsdead", GroupState.DEAD))


def _timer(name: str, doc: str, labels: dict[str, str], histogram: Histogram,
           family: SummaryMetricFamily | None = None) -> SummaryMetricFamily:
    """A Kafka histogram as the exporter shows it: ``name{quantile="0.99"}``, ``name_count``
    (and ``name_sum``, which the JMX exporter cannot give)."""
    if family is None:
        family = SummaryMetricFamily(name, doc, labels=list(labels))
    for quantile, value in histogram.quantiles():
        family.samples.append(Sample(name, {**labels, "quantile": quantile}, value))
    family.samples.append(Sample(name + "_count", labels, histogram.count))
    family.samples.append(Sample(name + "_sum", labels, histogram.total))
    return family


class BrokerCollector:
    """prometheus-client's collector over one broker."""

    def __init__(self, server: KafkaServer, metrics: BrokerMetrics) -> None:
        self.server = server
        self.metrics = metrics
        self._last_wall = time.monotonic()
        self._last_cpu = time.thread_time()

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._replica_metrics()
        yield from self._log_metrics()
        yield from self._controller_metrics()
        yield from self._group_metrics()
        yield from self._server_metrics()

    # --- kafka.server BrokerTopicMetrics --------------------------------------------------------

    def _topic_metrics(self) -> Iterator[Metric]:
        stats = self.metrics.topics
        for name, attribute in _TOPIC_COUNTERS:
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                         f"Kafka's BrokerTopicMetrics {name}", labels=["topic"])
            family.samples.append(Sample(family.name + "_total", {},
                                         getattr(stats.all, attribute)))
            for topic, per_topic in stats.topics.items():
                family.add_metric([topic], getattr(per_topic, attribute))
            yield family
        for name, value in (("replicationbytesin", stats.replication_bytes_in),
                            ("replicationbytesout", stats.replication_bytes_out)):
            yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                      f"Kafka's BrokerTopicMetrics {name}", value=value)

    # --- kafka.network RequestMetrics -----------------------------------------------------------

    def _request_metrics(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests handled, per request name and version",
                                       labels=["request", "version"])
        timers = {name: SummaryMetricFamily(f"kafka_network_requestmetrics_{name}",
                                            f"Kafka's RequestMetrics {name}",
                                            labels=["request"])
                  for name in _REQUEST_TIMERS}
        by_name: dict[str, list[RequestStats]] = {}
        for (request, version), stats in sorted(self.metrics.requests.items()):
            requests.add_metric([request, str(version)], stats.count)
            by_name.setdefault(request, []).append(stats)
        for request, versions in by_name.items():
            for index, name in enumerate(_REQUEST_TIMERS):
                _timer(timers[name].name, "", {"request": request},
                       stage_histogram(versions, index), timers[name])
        yield requests
        yield from timers.values()
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests waiting in a purgatory",
                                      labels=["delayedoperation"])
        purgatory.add_metric(["Produce"], self.metrics.delayed_produce)
        purgatory.add_metric(["Fetch"], self.metrics.delayed_fetch)
        yield purgatory

    # --- kafka.server ReplicaManager, ReplicaFetcherManager, FetcherLagMetrics --------------------

    def _replica_metrics(self) -> Iterator[Metric]:
        server = self.server
        partitions = list(server.replicas.partitions.values())
        broker_id = server.broker_id
        leaders = [p for p in partitions if p.is_leader and not p.closed]
        under = sum(1 for p in leaders if p.replicated and len(p.isr) < len(p.replicas))
        under_min = sum(1 for p in leaders if p.replicated
                        and len(p.isr) < p.log.config.min_insync_replicas)
        at_min = sum(1 for p in leaders if p.replicated
                     and len(p.isr) == p.log.config.min_insync_replicas)
        gauges = (("partitioncount", len(partitions)), ("leadercount", len(leaders)),
                  ("underreplicatedpartitions", under),
                  ("underminisrpartitioncount", under_min),
                  ("atminisrpartitioncount", at_min),
                  ("offlinereplicacount", sum(1 for p in partitions if p.offline)))
        for name, value in gauges:
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}",
                                    f"Kafka's ReplicaManager {name}", value=value)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks", value=self.metrics.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions", value=self.metrics.isr_expands)
        # this broker's lag as a follower: the leader's high watermark in its last fetch response
        # past this log's end (Kafka's FetcherLagMetrics)
        lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag",
                                "Messages this follower is behind its leader",
                                labels=["clientid", "topic", "partition"])
        max_lag = 0
        for p in partitions:
            if p.replicated and not p.is_leader and p.leader_id >= 0 and not p.closed:
                behind = max(0, p.leader_high_watermark - p.log.log_end_offset)
                max_lag = max(max_lag, behind)
                lag.add_metric([f"ReplicaFetcherThread-0-{p.leader_id}", p.topic,
                                str(p.index)], behind)
        yield lag
        most = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                 "The largest lag of this broker's replicas behind their leaders",
                                 labels=["clientid"])
        most.add_metric(["Replica"], max_lag)
        yield most
        # the leader's view of each follower (how far its last fetch was behind the log end)
        follower = GaugeMetricFamily("kafka_server_replicamanager_followerlag",
                                     "Messages each follower was behind at its last fetch",
                                     labels=["topic", "partition", "replica"])
        for p in leaders:
            for replica, state in p.followers.items():
                if replica != broker_id:
                    follower.add_metric([p.topic, str(p.index), str(replica)],
                                        max(0, p.log.log_end_offset - state.log_end_offset))
        yield follower

    # --- kafka.log Log, LogFlushStats ----------------------------------------------------------

    def _log_metrics(self) -> Iterator[Metric]:
        families = {name: GaugeMetricFamily(f"kafka_log_log_{name}", f"Kafka's Log {name}",
                                            labels=["topic", "partition"])
                    for name in ("size", "logstartoffset", "logendoffset", "numlogsegments")}
        for (topic, index), partition in sorted(self.server.replicas.partitions.items()):
            if partition.closed:
                continue
            log_ = partition.log
            labels = [topic, str(index)]
            families["size"].add_metric(labels, log_.size)
            families["logstartoffset"].add_metric(labels, log_.log_start_offset)
            families["logendoffset"].add_metric(labels, log_.log_end_offset)
            families["numlogsegments"].add_metric(labels, len(log_.segments))
        yield from families.values()
        yield _timer("kafka_log_logflushstats_logflushrateandtimems", "Log flushes (ms)", {},
                     self.metrics.log_flush)

    # --- kafka.controller -----------------------------------------------------------------------

    def _controller_metrics(self) -> Iterator[Metric]:
        controller = self.server.controller
        single = controller is None
        active = single or controller.active  # a single node is its own controller
        if single:
            offline = sum(1 for p in self.server.replicas.partitions.values() if p.offline)
            elections, unclean = Histogram(), 0
        else:
            offline = len(controller.offline) if active else 0
            elections, unclean = controller.elections, controller.unclean_elections
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller", value=int(active))
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader (on the active controller)",
                                value=offline)
        yield _timer("kafka_controller_controllerstats_leaderelectionrateandtimems",
                     "Leader elections (ms)", {}, elections)
        yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                  "Unclean leader elections", value=unclean)

    # --- the group coordinator and consumer lag (kafka-exporter's names) ------------------------

    def _group_metrics(self) -> Iterator[Metric]:
        coordinator = self.server.group_coordinator
        groups = {} if coordinator is None else coordinator.groups
        yield GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                "Groups this broker coordinates", value=len(groups))
        for name, state in _GROUP_STATES:
            yield GaugeMetricFamily(
                f"kafka_coordinator_group_groupmetadatamanager_{name}",
                f"Groups in state {state.value}",
                value=sum(1 for g in groups.values() if g.state is state))
        yield GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numoffsets",
                                "Committed offsets this broker keeps",
                                value=sum(len(g.offsets) for g in groups.values()))
        partitions = self.server.replicas.partitions
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "A group's committed offset",
                                    labels=["consumergroup", "topic", "partition"])
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "Records between a group's committed offset and the end",
                                labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag on a topic",
                                    labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members", "A group's members",
                                    labels=["consumergroup"])
        for group_id, group in sorted(groups.items()):
            members.add_metric([group_id], len(group.members))
            sums: dict[str, int] = {}
            for (topic, index), value in sorted(group.offsets.items()):
                labels = [group_id, topic, str(index)]
                current.add_metric(labels, value.offset)
                partition = partitions.get((topic, index))
                if partition is None or partition.closed:
                    continue  # hosted elsewhere: this broker does not know its end
                behind = max(0, partition.high_watermark - value.offset)
                lag.add_metric(labels, behind)
                sums[topic] = sums.get(topic, 0) + behind
            for topic, total in sorted(sums.items()):
                lag_sum.add_metric([group_id, topic], total)
        yield from (current, lag, lag_sum, members)
        offsets = {name: GaugeMetricFamily(f"kafka_topic_partition_{name}",
                                           f"kafka-exporter's {name}",
                                           labels=["topic", "partition"])
                   for name in ("current_offset", "oldest_offset")}
        for (topic, index), partition in sorted(partitions.items()):
            if partition.is_leader and not partition.closed:
                offsets["current_offset"].add_metric([topic, str(index)],
                                                     partition.high_watermark)
                offsets["oldest_offset"].add_metric([topic, str(index)],
                                                    partition.log.log_start_offset)
        yield from offsets.values()

    # --- the loop, the connections --------------------------------------------------------------

    def _server_metrics(self) -> Iterator[Metric]:
        now, cpu = time.monotonic(), time.thread_time()
        wall = now - self._last_wall
        idle = 1.0 if wall <= 0 else min(1.0, max(0.0, 1.0 - (cpu - self._last_cpu) / wall))
        self._last_wall, self._last_cpu = now, cpu
        yield GaugeMetricFamily(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "Share of time the event loop was idle since the last scrape", value=idle)
        yield GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidle_percent",
                                "Share of time the event loop was idle since the last scrape",
                                value=idle)
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client connections per listener",
                                        labels=["listener", "networkprocessor"])
        counts: dict[str, int] = {}
        for connection in list(self.server.connections):
            counts[connection.listener_name] = counts.get(connection.listener_name, 0) + 1
        for endpoint in self.server.bound:
            connections.add_metric([endpoint.listener_name, "0"],
                                   counts.get(endpoint.listener_name, 0))
        yield connections
        yield GaugeMetricFamily("kafka_server_kafkaserver_brokerstate",
                                "3 while running (Kafka's RUNNING)",
                                value=3 if self.server.started else 0)


class PrometheusEndpoint:
    """``GET /metrics`` over HTTP/1.x on the event loop; anything else gets 404 or 400 and
    the connection closes."""

    def __init__(self, collector: BrokerCollector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host or None, port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            status, body, content_type = self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            status, body, content_type = "400 Bad Request", b"bad request\n", "text/plain"
        try:
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                         + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        parts = head[:_MAX_REQUEST_HEAD].split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return "400 Bad Request", b"bad request\n", "text/plain"
        if parts[0] not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", b"use GET\n", "text/plain"
        if parts[1].split(b"?", 1)[0] not in (b"/metrics", b"/metrics/"):
            return "404 Not Found", b"metrics are at /metrics\n", "text/plain"
        body = generate_latest(self.registry)
        return "200 OK", b"" if parts[0] == b"HEAD" else body, CONTENT_TYPE_LATEST
