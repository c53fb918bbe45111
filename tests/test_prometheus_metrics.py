"""The Prometheus endpoint (``prometheus.listener``), scraped over HTTP and read with
prometheus-client's text parser while real clients produce and consume: the counts equal what
was produced, the lag what was left unread, the log sizes what is on disk; a long-poll shows in
the fetch purgatory; bad HTTP gets 400 and the endpoint lives on; without the key nothing is
served or counted."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

import samsa
from samsa.config import ConfigError

pytestmark = pytest.mark.timeout(180)

QUIET = {"log_level": 0, "logger": lambda *_: None}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("metrics"),
                      config={"prometheus.listener": "http://127.0.0.1:0"}) as b:
        yield b


def scrape(broker: samsa.Broker) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, by name and sorted labels."""
    assert broker.metrics_url is not None
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def requests(samples: dict, request: str) -> float:
    """RequestsPerSec's count for one request name, all versions."""
    return sum(v for (name, labels), v in samples.items()
               if name == "kafka_network_requestmetrics_requests_total"
               and ("request", request) in labels)


def make_topic(broker: samsa.Broker, partitions: int = 1) -> str:
    name = f"m-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(broker: samsa.Broker, topic: str, count: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
                         **QUIET})
    failed = []
    for i in range(count):
        producer.produce(topic, value=b"v" * size, key=str(i).encode(), partition=i % 2,
                         on_delivery=lambda err, _msg: err and failed.append(err))
    assert producer.flush(30) == 0 and not failed


def test_counts_equal_what_was_produced_and_read(broker: samsa.Broker) -> None:
    a, b = make_topic(broker, 2), make_topic(broker, 2)
    before = scrape(broker)
    produce(broker, a, 300, 100)
    produce(broker, b, 50, 1000)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-all",
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.assign([TopicPartition(a, 0), TopicPartition(a, 1)])
    read = 0
    for _ in range(200):
        if read == 300:
            break
        for message in consumer.consume(300, timeout=1):
            assert not message.error()
            read += 1
    consumer.close()
    assert read == 300

    def settled() -> dict | None:
        samples = scrape(broker)
        done = value(samples, "kafka_network_requestmetrics_totaltimems_count",
                     request="Produce")
        return samples if done == requests(samples, "Produce") else None

    samples = wait_for(settled, timeout=30, what="the produce timings recorded")
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(samples, messages, topic=a) == 300
    assert value(samples, messages, topic=b) == 50
    assert value(samples, messages) - value(before, messages) == 350
    bytes_in = value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=b)
    assert 50 * 1000 < bytes_in < 50 * 1000 * 1.5  # the batches: records plus their framing
    bytes_out = value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=a)
    assert bytes_out >= 300 * 100
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic=a) == 0
    # Kafka's request names and the time breakdown
    assert requests(samples, "FetchConsumer") > 0
    for timer in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems",
                  "responsesendtimems"):
        name = f"kafka_network_requestmetrics_{timer}"
        assert value(samples, name + "_count", request="FetchConsumer") > 0
        assert value(samples, name, request="Produce", quantile="0.99") >= 0
    total = value(samples, "kafka_network_requestmetrics_totaltimems_sum", request="Produce")
    parts = sum(value(samples, f"kafka_network_requestmetrics_{t}_sum", request="Produce")
                for t in ("requestqueuetimems", "localtimems", "remotetimems",
                          "responsesendtimems"))
    assert parts == pytest.approx(total, rel=1e-6)
    # the partitions: one log each, led here
    assert value(samples, "kafka_server_replicamanager_partitioncount") >= 4
    assert value(samples, "kafka_server_replicamanager_leadercount") >= 4
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_server_kafkaserver_brokerstate") == 3
    idle = value(samples, "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent")
    assert 0.0 <= idle <= 1.0


def test_log_size_is_what_is_on_disk(broker: samsa.Broker, tmp_path_factory) -> None:
    topic = make_topic(broker, 2)
    produce(broker, topic, 100, 200)
    samples = scrape(broker)
    for index in (0, 1):
        directory = next(Path(d) / f"{topic}-{index}" for d in broker.server.config.log_dirs
                         if (Path(d) / f"{topic}-{index}").is_dir())
        on_disk = sum(f.stat().st_size for f in directory.glob("*.log"))
        assert value(samples, "kafka_log_log_size", topic=topic, partition=str(index)) == on_disk
        assert value(samples, "kafka_log_log_logendoffset", topic=topic,
                     partition=str(index)) == 50
        assert value(samples, "kafka_topic_partition_current_offset", topic=topic,
                     partition=str(index)) == 50


def test_lag_is_what_the_group_left_unread(broker: samsa.Broker) -> None:
    topic = make_topic(broker, 2)
    produce(broker, topic, 100, 10)  # 50 in each partition
    group = f"lag-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, **QUIET})
    consumer.commit(offsets=[TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 45)],
                    asynchronous=False)
    consumer.close()
    samples = scrape(broker)
    labels = {"consumergroup": group, "topic": topic}
    assert value(samples, "kafka_consumergroup_current_offset", partition="0", **labels) == 20
    assert value(samples, "kafka_consumergroup_lag", partition="0", **labels) == 30
    assert value(samples, "kafka_consumergroup_lag", partition="1", **labels) == 5
    assert value(samples, "kafka_consumergroup_lag_sum", **labels) == 35
    assert value(samples, "kafka_consumergroup_members", consumergroup=group) == 0
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


def test_a_long_poll_waits_in_the_fetch_purgatory(broker: samsa.Broker) -> None:
    topic = make_topic(broker, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "idle",
                         "fetch.wait.max.ms": 60_000, "auto.offset.reset": "earliest",
                         **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        def waiting() -> bool:
            consumer.poll(0.1)
            return value(scrape(broker), "kafka_server_delayedoperationpurgatory_purgatorysize",
                         delayedoperation="Fetch") >= 1
        wait_for(waiting, timeout=30, what="a fetch waiting in the purgatory")
    finally:
        consumer.close()


def test_bad_http_gets_an_answer_and_the_endpoint_lives_on(broker: samsa.Broker) -> None:
    assert broker.metrics_url is not None
    host, port = broker.metrics_url.split("//")[1].split("/")[0].rsplit(":", 1)
    for garbage in (b"\x00\x01\x02\r\n\r\n", b"GET\r\n\r\n", b"POST /metrics HTTP/1.1\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(garbage)
            answer = sock.recv(1024)
            assert answer.split(b" ")[1] in (b"400", b"405"), answer
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # and then nothing: closed by the client
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(broker.metrics_url.replace("/metrics", "/nothing"), timeout=10)
    assert error.value.code == 404
    assert value(scrape(broker), "kafka_server_kafkaserver_brokerstate") == 3


def test_without_the_key_nothing_is_served_or_counted(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path) as plain:
        assert plain.metrics_url is None
        assert plain.server.metrics is None


def test_a_malformed_listener_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="prometheus.listener"):
        samsa.Broker(tmp_path, config={"prometheus.listener": "127.0.0.1:9404"}).start()
