"""The replication and controller metrics of two brokers on a real ZooKeeper, scraped over
HTTP: one active controller between them, no under-replicated partition and no follower lag
once the followers caught up; with a broker gone, the survivor leads every partition, counts
them under-replicated, and its controller counted the leader elections."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

import samsa
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(180)

TOPIC = "watched"
QUIET = {"log_level": 0, "logger": lambda *_: None}


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[list[samsa.Broker]]:
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        started: list[samsa.Broker] = []
        try:
            for i in (1, 2):
                broker = samsa.Broker(tmp_path / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    "zookeeper.session.timeout.ms": 6000,
                    "offsets.topic.replication.factor": 1,
                    "prometheus.listener": "http://127.0.0.1:0"})
                broker.start()
                started.append(broker)
            for b in started:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 2,
                         what="both brokers to see each other")
            yield started
        finally:
            for b in started:
                b.stop()


def scrape(broker: samsa.Broker) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert broker.metrics_url is not None
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def gauge(broker: samsa.Broker, name: str, **labels: str) -> float:
    return scrape(broker)[(name, tuple(sorted(labels.items())))]


def test_replication_and_controller_metrics(brokers: list[samsa.Broker]) -> None:
    first = brokers[0]
    admin = AdminClient({"bootstrap.servers": first.bootstrap_servers, **QUIET})
    admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": first.bootstrap_servers, "acks": "all", **QUIET})
    for i in range(200):
        producer.produce(TOPIC, value=b"x" * 50, partition=i % 2)
    assert producer.flush(30) == 0

    wait_for(lambda: sum(gauge(b, "kafka_controller_kafkacontroller_activecontrollercount")
                         for b in brokers) == 1, what="exactly one active controller")
    for b in brokers:
        wait_for(lambda b=b: gauge(b, "kafka_server_replicamanager_underreplicatedpartitions")
                 == 0, what="no under-replicated partition")
        assert gauge(b, "kafka_server_replicamanager_partitioncount") >= 2
    assert sum(gauge(b, "kafka_server_replicamanager_leadercount") for b in brokers) >= 2
    # each partition has one follower, on the other broker; both caught up
    for b in brokers:
        samples = scrape(b)
        follower_lags = [v for (name, labels), v in samples.items()
                         if name == "kafka_server_fetcherlagmetrics_consumerlag"
                         and ("topic", TOPIC) in labels]
        leader_views = [v for (name, labels), v in samples.items()
                        if name == "kafka_server_replicamanager_followerlag"
                        and ("topic", TOPIC) in labels]
        assert len(follower_lags) + len(leader_views) == 2
    for b in brokers:
        wait_for(lambda b=b: gauge(b, "kafka_server_replicafetchermanager_maxlag",
                                   clientid="Replica") == 0, what="the followers caught up")
    # what one broker's followers fetched is what the other's leaders sent them
    wait_for(lambda: sum(gauge(b, "kafka_server_brokertopicmetrics_replicationbytesin_total")
                         for b in brokers) >= 200 * 50, what="the replicated bytes counted")
    assert sum(gauge(b, "kafka_server_brokertopicmetrics_replicationbytesout_total")
               for b in brokers) >= 200 * 50

    controller = next(b for b in brokers
                      if gauge(b, "kafka_controller_kafkacontroller_activecontrollercount"))
    other = next(b for b in brokers if b is not controller)
    led_by_other = gauge(other, "kafka_server_replicamanager_leadercount")
    elections_before = gauge(
        controller, "kafka_controller_controllerstats_leaderelectionrateandtimems_count")
    other.stop()
    brokers.remove(other)

    def survivor_leads_all() -> bool:
        samples = scrape(controller)
        led = [v for (name, labels), v in samples.items()
               if name == "kafka_log_log_logendoffset" and ("topic", TOPIC) in labels]
        return (len(led) == 2 and samples[("kafka_server_replicamanager_underreplicatedpartitions",
                                           ())] >= 2)

    wait_for(survivor_leads_all, timeout=60, what="the survivor leading, under-replicated")
    assert gauge(controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    if led_by_other:
        assert gauge(controller,
                     "kafka_controller_controllerstats_leaderelectionrateandtimems_count") > (
            elections_before)
