"""The mirror's metrics endpoint (``samsa mirror --metrics-listener http://HOST:PORT``), in
Prometheus' text format, under the names Kafka's MM2 metrics get from the JMX exporter
(``kafka.connect.mirror:type=MirrorSourceConnector`` ->
``kafka_connect_mirror_mirrorsourceconnector_record_count``), per flow (labels ``source``,
``target``) rather than per partition; the lag and the checkpoints emitted, which MM2 has no
metric for, are ``samsa_mirror_*``."""

from __future__ import annotations

from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from samsa.mirror.metrics import Progress

SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"


class MirrorCollector(Collector):
    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            "record_count": (SOURCE + "record_count", "Records replicated to the target."),
            "byte_count": (SOURCE + "byte_count", "Bytes (keys and values) replicated."),
            "record_age_ms": (SOURCE + "record_age_ms",
                              "Age of the last record replicated: its ack by the target minus "
                              "its timestamp."),
            "replication_latency_ms": (SOURCE + "replication_latency_ms",
                                       "Time from consuming the last record to its ack."),
            "lag": ("samsa_mirror_records_lag", "Records behind the source's end."),
            "partitions": ("samsa_mirror_partitions", "Source partitions this worker copies."),
            "checkpoints": ("samsa_mirror_checkpoints_emitted", "Checkpoints written."),
        }
        totals = self.progress.totals()
        for attribute, (name, documentation) in families.items():
            family = GaugeMetricFamily(name, documentation, labels=["source", "target"])
            for m in totals:
                source, _, target = m.flow.partition("->")
                family.add_metric([source, target], float(getattr(m, attribute)))
            yield family


def serve(progress: Progress, host: str, port: int) -> WSGIServer:
    """Serve the metrics in a thread; the server (``server_address`` has the bound port)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MirrorCollector(progress))
    server, _ = start_http_server(port, host, registry)
    return server
