"""confluent-kafka (librdkafka) against samsa over loopback TCP.

The broker has no group coordinator yet: consumers carry a group.id (confluent-kafka insists)
but never commit, and are always assigned explicit offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

import samsa
from samsa.records.batch import Compression, iter_headers

from .conftest import BASE_TIME_MS

pytestmark = pytest.mark.timeout(60)

DEADLINE = 15.0


def producer_conf(broker: samsa.Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
            "message.timeout.ms": 10000, **extra}


def consumer_conf(broker: samsa.Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "group.id": "samsa-tests",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100, **extra}


class Deliveries(list):
    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.append((err, msg.partition(), msg.offset()))

    @property
    def errors(self) -> list[KafkaError]:
        return [err for err, _, _ in self if err is not None]


def produce(broker: samsa.Broker, topic: str, messages: Sequence[dict[str, Any]],
            **conf: Any) -> Deliveries:
    """Produce ``messages`` (kwargs of Producer.produce), flush, return the delivery reports."""
    deliveries = Deliveries()
    producer = Producer(producer_conf(broker, **conf))
    for m in messages:
        producer.produce(topic, on_delivery=deliveries, **m)
        producer.poll(0)
    assert producer.flush(DEADLINE) == 0, "messages still in flight after the flush deadline"
    assert len(deliveries) == len(messages)
    return deliveries


def consume(broker: samsa.Broker, topic: str, count: int, offset: int = 0, partition: int = 0,
            **conf: Any) -> list[Message]:
    """``count`` messages from ``offset``, failing on any consumer error or after DEADLINE."""
    consumer = Consumer(consumer_conf(broker, **conf))
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        return poll_messages(consumer, count)
    finally:
        consumer.close()


def poll_messages(consumer: Consumer, count: int, timeout: float = DEADLINE) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"consumer error: {msg.error()}")
        got.append(msg)
    assert len(got) == count, f"got {len(got)} of {count} messages in {timeout} s"
    return got


def batches_on_disk(broker: samsa.Broker, topic: str, partition: int = 0) -> list[Any]:
    segment_dir = Path(broker.data_dir) / f"{topic}-{partition}"
    out = []
    for log_file in sorted(segment_dir.glob("*.log")):
        out.extend(h for _, h in iter_headers(log_file.read_bytes()))
    return out


@pytest.fixture
def admin(broker: samsa.Broker) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap_servers})


# --- produce ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs_round_trip(broker, codec):
    topic = f"codec-{codec}"
    messages = [
        {"key": b"key-%d" % (i % 3), "value": b"value %d " % i + b"abc" * 50,
         "headers": [("n", str(i).encode()), ("codec", codec.encode())]}
        for i in range(200)
    ]
    deliveries = produce(broker, topic, messages, **{"compression.type": codec,
                                                    "linger.ms": 50})
    assert deliveries.errors == []
    assert sorted(offset for _, _, offset in deliveries) == list(range(200))
    # librdkafka's batches are stored as sent: the codec is the one the producer used.
    headers = batches_on_disk(broker, topic)
    assert {h.compression for h in headers} == {Compression[codec.upper()]}
    assert sum(h.records_count for h in headers) == 200
    got = consume(broker, topic, 200)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == [
        (i, m["key"], m["value"], m["headers"]) for i, m in enumerate(messages)
    ]


@pytest.mark.parametrize(
    ("acks", "idempotence"),
    [("0", False), ("1", False), ("all", False), ("all", True), ("-1", True)],
)
def test_acks_and_idempotence(broker, acks, idempotence):
    topic = f"acks-{acks}-{idempotence}".replace("-1", "m1")
    messages = [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(30)]
    deliveries = produce(broker, topic, messages, acks=acks,
                         **{"enable.idempotence": idempotence})
    assert deliveries.errors == []
    if acks != "0":
        assert [offset for _, _, offset in deliveries] == list(range(30))
    got = consume(broker, topic, 30)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(30)
    ]
    if idempotence:
        headers = batches_on_disk(broker, topic)
        assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
        assert headers[0].base_sequence == 0


def test_keys_values_and_headers_edge_cases(broker):
    topic = "edge"
    messages = [
        {"key": None, "value": b"no key"},
        {"key": b"tombstone", "value": None},
        {"key": b"", "value": b""},
        {"key": bytes(range(256)), "value": bytes(range(255, -1, -1))},
        {"key": b"h", "value": b"h", "headers": [("dup", b"1"), ("dup", b"2"), ("null", None),
                                                ("unicode \u00e9", b"\x00\xff")]},
        {"key": b"big", "value": b"\x01" * 200_000},
    ]
    assert produce(broker, topic, messages).errors == []
    got = consume(broker, topic, len(messages))
    assert [m.key() for m in got] == [m["key"] for m in messages]
    assert [m.value() for m in got] == [m["value"] for m in messages]
    assert got[4].headers() == [("dup", b"1"), ("dup", b"2"), ("null", None),
                                ("unicode \u00e9", b"\x00\xff")]
    assert got[0].headers() is None


def test_message_too_large(broker_factory):
    broker = broker_factory(message_max_bytes=2000)
    deliveries = produce(
        broker, "large", [{"value": b"x" * 5000}],
        **{"message.max.bytes": 100_000, "compression.type": "none", "retries": 0},
    )
    (err,) = deliveries.errors
    assert err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    small = produce(broker, "large", [{"value": b"small"}])
    assert small.errors == []
    got = consume(broker, "large", 1)
    assert (got[0].offset(), got[0].value()) == (0, b"small")


def test_produce_to_several_partitions(broker_factory):
    broker = broker_factory(num_partitions=3)
    messages = [{"value": b"p%d-%d" % (p, i), "partition": p} for i in range(5) for p in range(3)]
    deliveries = produce(broker, "multi", messages)
    assert deliveries.errors == []
    assert sorted({p for _, p, _ in deliveries}) == [0, 1, 2]
    for p in range(3):
        got = consume(broker, "multi", 5, partition=p)
        assert [m.value() for m in got] == [b"p%d-%d" % (p, i) for i in range(5)]


# --- consume ------------------------------------------------------------------------------------


def test_assign_and_seek(broker):
    topic = "seek"
    assert produce(broker, topic, [{"value": b"%d" % i} for i in range(20)]).errors == []
    assert [m.offset() for m in consume(broker, topic, 5, offset=12)] == [12, 13, 14, 15, 16]
    consumer = Consumer(consumer_conf(broker))
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert [m.value() for m in poll_messages(consumer, 3)] == [b"0", b"1", b"2"]
        consumer.seek(TopicPartition(topic, 0, 17))
        assert [m.offset() for m in poll_messages(consumer, 3)] == [17, 18, 19]
        consumer.seek(TopicPartition(topic, 0, 2))
        assert [m.value() for m in poll_messages(consumer, 2)] == [b"2", b"3"]
        # Nothing past the end: a poll at the end yields no messages.
        consumer.seek(TopicPartition(topic, 0, 20))
        assert consumer.poll(0.5) is None
    finally:
        consumer.close()


def test_assign_at_end_sees_only_new_messages(broker):
    topic = "tail"
    assert produce(broker, topic, [{"value": b"old"}]).errors == []
    consumer = Consumer(consumer_conf(broker))
    producer = Producer(producer_conf(broker))
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        # The consumer resolves OFFSET_END at some point after assign: keep producing until
        # a message arrives. Whatever arrives first must be new, never the old one.
        deadline = time.monotonic() + DEADLINE
        msg, sent = None, 0
        while msg is None and time.monotonic() < deadline:
            producer.produce(topic, b"new-%d" % sent)
            sent += 1
            producer.flush(DEADLINE)
            msg = consumer.poll(0.3)
        assert msg is not None and msg.error() is None, msg and msg.error()
        assert msg.offset() >= 1
        assert msg.value().startswith(b"new-")
        assert msg.value() == b"new-%d" % (msg.offset() - 1)
    finally:
        consumer.close()
        producer.flush(DEADLINE)


def test_offsets_for_times_and_record_timestamps(broker):
    topic = "times"
    stamps = [BASE_TIME_MS + 1000 * i for i in range(10)]
    messages = [{"value": b"%d" % i, "timestamp": ts} for i, ts in enumerate(stamps)]
    # linger so several records share a batch: the lookup must look inside batches.
    assert produce(broker, topic, messages, **{"linger.ms": 100}).errors == []
    got = consume(broker, topic, 10)
    assert [m.timestamp() for m in got] == [(TIMESTAMP_CREATE_TIME, ts) for ts in stamps]
    consumer = Consumer(consumer_conf(broker))
    try:
        queries = [BASE_TIME_MS - 5, BASE_TIME_MS, BASE_TIME_MS + 2500, stamps[-1],
                   stamps[-1] + 1]
        found = [
            consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=DEADLINE)[0]
            for ts in queries
        ]
        assert [tp.error for tp in found] == [None] * 5
        assert [tp.offset for tp in found] == [0, 0, 3, 9, OFFSET_END]
        consumer.assign(found[2:3])
        assert [m.value() for m in poll_messages(consumer, 2)] == [b"3", b"4"]
    finally:
        consumer.close()


def test_get_watermark_offsets(broker, admin):
    topic = "wm"
    assert admin.list_topics(topic, timeout=DEADLINE).topics[topic].error is None
    consumer = Consumer(consumer_conf(broker))
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(tp, timeout=DEADLINE) == (0, 0)
        assert produce(broker, topic, [{"value": b"x"}] * 7).errors == []
        assert consumer.get_watermark_offsets(tp, timeout=DEADLINE) == (0, 7)
    finally:
        consumer.close()


# --- admin --------------------------------------------------------------------------------------


def test_list_topics(broker_factory):
    broker = broker_factory(num_partitions=2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for topic in ("lt-a", "lt-b"):
        assert produce(broker, topic, [{"value": b"x", "partition": 1}]).errors == []
    md = admin.list_topics(timeout=DEADLINE)
    assert {"lt-a", "lt-b"} <= set(md.topics)
    assert sorted(md.topics["lt-a"].partitions) == [0, 1]
    (node,) = md.brokers.values()
    assert f"{node.host}:{node.port}" == broker.bootstrap_servers
    assert md.controller_id == node.id
    for partition in md.topics["lt-b"].partitions.values():
        assert (partition.leader, partition.replicas, partition.isrs) == (
            node.id, [node.id], [node.id]
        )
    one = admin.list_topics("lt-a", timeout=DEADLINE)
    assert set(one.topics) == {"lt-a"}


def test_delete_records(broker, admin):
    topic = "dr"
    assert produce(broker, topic, [{"value": b"%d" % i} for i in range(10)]).errors == []
    futures = admin.delete_records([TopicPartition(topic, 0, 6)], request_timeout=DEADLINE)
    (future,) = futures.values()
    assert future.result(DEADLINE).low_watermark == 6
    consumer = Consumer(consumer_conf(broker))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE) == (
            6, 10
        )
    finally:
        consumer.close()
    # Offset 0 is gone: auto.offset.reset=earliest starts again from the new log start.
    got = consume(broker, topic, 4, offset=0, **{"auto.offset.reset": "earliest"})
    assert [(m.offset(), m.value()) for m in got] == [(i, b"%d" % i) for i in range(6, 10)]
    # With auto.offset.reset=error the consumer reports the out-of-range offset.
    consumer = Consumer(consumer_conf(broker, **{"auto.offset.reset": "error"}))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + DEADLINE
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error(), f"unexpected message at offset {msg.offset()}"
                error = msg.error()
        assert error is not None
        assert error.code() == KafkaError._AUTO_OFFSET_RESET
        assert "out of range" in error.str().lower() or "OFFSET_OUT_OF_RANGE" in error.str()
    finally:
        consumer.close()


def test_delete_records_to_high_watermark(broker, admin):
    topic = "dr-all"
    assert produce(broker, topic, [{"value": b"x"}] * 5).errors == []
    (future,) = admin.delete_records([TopicPartition(topic, 0, OFFSET_END)]).values()
    assert future.result(DEADLINE).low_watermark == 5
    result = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    assert next(iter(result.values())).result(DEADLINE).offset == 5


def test_list_offsets(broker, admin):
    topic = "lo"
    stamps = [BASE_TIME_MS + 10, BASE_TIME_MS + 30, BASE_TIME_MS + 20, BASE_TIME_MS + 40,
              BASE_TIME_MS + 5]
    messages = [{"value": b"%d" % i, "timestamp": ts} for i, ts in enumerate(stamps)]
    assert produce(broker, topic, messages).errors == []
    tp = TopicPartition(topic, 0)

    def query(spec: OffsetSpec) -> Any:
        (future,) = admin.list_offsets({tp: spec}, request_timeout=DEADLINE).values()
        return future.result(DEADLINE)

    assert query(OffsetSpec.earliest()).offset == 0
    assert query(OffsetSpec.latest()).offset == 5
    top = query(OffsetSpec.max_timestamp())
    assert (top.offset, top.timestamp) == (3, BASE_TIME_MS + 40)
    at = query(OffsetSpec.for_timestamp(BASE_TIME_MS + 25))
    assert (at.offset, at.timestamp) == (1, BASE_TIME_MS + 30)
    assert query(OffsetSpec.for_timestamp(BASE_TIME_MS + 41)).offset == -1
