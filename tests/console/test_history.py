"""``History``: two sampling rounds with data produced between them, against an embedded
broker serving its Prometheus endpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from waiting import wait_for

from samsa.console.cluster_view import ClusterView
from samsa.console.history import History
from samsa.embedded import Broker

pytestmark = pytest.mark.timeout(120)

WAIT_S = 30.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path / "data", config={"prometheus.listener": "http://127.0.0.1:0"}) as b:
        yield b


def produce(broker: Broker, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(count):
        producer.produce(topic, value=b"x" * 100, partition=i % 2)
    assert producer.flush(WAIT_S) == 0


def test_rates_and_series(broker: Broker) -> None:
    view = ClusterView(broker.bootstrap_servers)
    history = History(view, broker.metrics_url, interval_s=60.0)
    try:
        view.create_topic("fast", partitions=2)
        view.create_topic("idle")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("fast", 0, 0)], asynchronous=False)
        consumer.close()

        history.sample()
        assert history.topic_rates() == {}  # one round: no rate yet
        assert history.series("messages_in") == []
        first = time.time()
        produce(broker, "fast", 40)
        history.sample()
        elapsed = time.time() - first

        rates = history.topic_rates()
        assert rates["idle"] == 0
        assert rates["fast"] > 40 / (elapsed + 1)
        ((at, total),) = history.series("messages_in")
        assert total == pytest.approx(sum(rates.values()))
        assert abs(at - time.time()) < 5
        assert history.series("topic:fast") == [(at, rates["fast"])]
        ((_, bytes_in),) = history.series("bytes_in")
        assert bytes_in > 0  # 4,000 bytes of values and more, over the interval
        assert history.series("bytes_out") != []
        assert [lag for _, lag in history.series("lag:g")] == [0.0, 20.0]
        assert history.last_error is None
    finally:
        history.stop()
        view.close()


def test_the_last_rounds_topics_serve_the_topics_page_while_fresh(broker: Broker) -> None:
    view = ClusterView(broker.bootstrap_servers)
    history = History(view, interval_s=60.0)
    try:
        assert history.recent_topics() is None  # no round yet: the page reads them itself
        view.create_topic("kept", partitions=2)
        produce(broker, "kept", 10)
        history.sample()
        recent = history.recent_topics()
        assert recent is not None
        (kept,) = [t for t in recent if t.name == "kept"]
        assert (kept.partitions, kept.messages, kept.end_offsets) == (2, 10, 10)
        history.forget_topics()  # a change through the console
        assert history.recent_topics() is None
        stale = History(view, interval_s=0.05)
        stale.sample()
        wait_for(lambda: stale.recent_topics() is None, WAIT_S, "the round to grow stale")
    finally:
        history.stop()
        view.close()


def test_the_background_thread_and_a_metrics_endpoint_that_is_down(broker: Broker) -> None:
    view = ClusterView(broker.bootstrap_servers)
    history = History(view, "http://127.0.0.1:9/metrics", interval_s=0.1, keep=3)
    try:
        history.start()
        wait_for(lambda: len(history.series("messages_in")) >= 3, WAIT_S, "three rounds")
        assert len(history.series("messages_in")) == 3  # keep: the last 3 points
        assert history.series("bytes_in") == []
        assert history.last_error and history.last_error.startswith(
            "metrics http://127.0.0.1:9/metrics")
    finally:
        started = time.monotonic()
        history.stop()
        assert time.monotonic() - started < 20
        view.close()
