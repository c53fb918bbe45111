"""What the mirror tests share: clusters as embedded brokers, mm2.properties text, a mirror
running in this process, and reading topics to their end."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from samsa.embedded import Broker
from samsa.mirror.config import MirrorMakerConfig
from samsa.mirror.runner import MirrorMaker

# quick intervals, one-broker replication factors
FAST = {
    "replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "refresh.topics.interval.seconds": "1",
    "sync.topic.configs.interval.seconds": "1",
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.interval.seconds": "1",
    "offset.flush.interval.ms": "500",
}


def mm2_properties(clusters: dict[str, Broker], flows: list[str],
                   extra: dict[str, str] | None = None) -> dict[str, str]:
    props = {"clusters": ", ".join(clusters)}
    for alias, broker in clusters.items():
        props[f"{alias}.bootstrap.servers"] = broker.bootstrap_servers
    for flow in flows:
        props[f"{flow}.enabled"] = "true"
    props.update(FAST)
    props.update(extra or {})
    return props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


@contextmanager
def running_mirror(props: dict[str, str], worker_id: str | None = None) -> Iterator[MirrorMaker]:
    maker = MirrorMaker(MirrorMakerConfig(props), worker_id=worker_id)
    maker.start()
    try:
        assert maker.wait_ready(60), maker.failure()
        yield maker
    finally:
        maker.stop()
    assert maker.failure() is None, maker.failure()


def create_topic(broker: Broker, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def topics(broker: Broker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return set(admin.list_topics(timeout=30).topics)


def produce(broker: Broker, topic: str, records: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for r in records:
        producer.produce(topic, **r)
    assert producer.flush(30) == 0


def read_all(broker: Broker, topic: str, expected: int | None = None, timeout: float = 30.0,
             isolation: str = "read_uncommitted") -> list[Any]:
    """Every record of every partition of ``topic`` (waits until at least ``expected``)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": f"reader-{uuid.uuid4()}", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    try:
        md = consumer.list_topics(topic, timeout=30).topics[topic]
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions])
        found: list[Any] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(msg.partition())
                    continue
                eof.discard(msg.partition())
                found.append(msg)
            if len(eof) == len(md.partitions) and (expected is None or len(found) >= expected):
                break
        return found
    finally:
        consumer.close()


def wait_topic(broker: Broker, topic: str, timeout: float = 30.0) -> None:
    wait_for(lambda: topic in topics(broker), timeout, f"topic {topic}")
