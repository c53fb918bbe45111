"""kafka-python against samsa over loopback TCP (default settings unless a test says so).

Consumers have no group (group_id=None): the broker has no group coordinator yet.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import samsa
from samsa.records.batch import Compression, iter_headers

from .conftest import BASE_TIME_MS

with warnings.catch_warnings():
    # kafka-python loads its schemas with importlib.resources' deprecated API: not ours to fix.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = pytest.mark.timeout(60)

DEADLINE = 15.0


@pytest.fixture
def broker3(broker_factory) -> samsa.Broker:
    """Auto-created topics get three partitions."""
    return broker_factory(num_partitions=3)


@pytest.fixture
def make_producer(broker3: samsa.Broker) -> Iterator[Any]:
    made: list[KafkaProducer] = []

    def make(**conf: Any) -> KafkaProducer:
        conf.setdefault("max_block_ms", int(DEADLINE * 1000))
        producer = KafkaProducer(bootstrap_servers=broker3.bootstrap_servers, **conf)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close(timeout=5)


@pytest.fixture
def make_consumer(broker3: samsa.Broker) -> Iterator[Any]:
    made: list[KafkaConsumer] = []

    def make(**conf: Any) -> KafkaConsumer:
        conf.setdefault("enable_auto_commit", False)
        conf.setdefault("fetch_max_wait_ms", 100)
        consumer = KafkaConsumer(bootstrap_servers=broker3.bootstrap_servers,
                                 request_timeout_ms=int(DEADLINE * 1000), **conf)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close(autocommit=False)


def send_all(producer: KafkaProducer, topic: str, messages: list[dict[str, Any]]) -> list[Any]:
    """Send and wait for every message; returns the RecordMetadata list."""
    futures = [producer.send(topic, **m) for m in messages]
    producer.flush(timeout=DEADLINE)
    return [f.get(timeout=DEADLINE) for f in futures]


def poll_records(consumer: KafkaConsumer, count: int, timeout: float = DEADLINE) -> list[Any]:
    """Poll until at least ``count`` records came (a poll may return more)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
    assert len(got) >= count, f"got {len(got)} of {count} records in {timeout} s"
    return got


def batches_on_disk(broker: samsa.Broker, topic: str, partition: int) -> list[Any]:
    out = []
    for log_file in sorted((Path(broker.data_dir) / f"{topic}-{partition}").glob("*.log")):
        out.extend(h for _, h in iter_headers(log_file.read_bytes()))
    return out


def test_round_trip_default_settings(broker3, make_producer, make_consumer):
    producer = make_producer()
    messages = [{"value": b"v%d" % i, "partition": i % 3} for i in range(30)]
    metadata = send_all(producer, "rt", messages)
    assert sorted((m.partition, m.offset) for m in metadata) == sorted(
        (p, o) for p in range(3) for o in range(10)
    )
    # kafka-python's producer is idempotent by default: batches carry a producer id and
    # sequence numbers starting at 0 in every partition.
    for p in range(3):
        headers = batches_on_disk(broker3, "rt", p)
        assert headers and all(h.producer_id >= 0 for h in headers)
        assert headers[0].base_sequence == 0
    consumer = make_consumer()
    tps = [TopicPartition("rt", p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = poll_records(consumer, 30)
    for p in range(3):
        in_partition = [r for r in got if r.partition == p]
        assert [(r.offset, r.value) for r in in_partition] == [
            (i, b"v%d" % (3 * i + p)) for i in range(10)
        ]


def test_keys_and_headers(make_producer, make_consumer):
    producer = make_producer()
    messages = [
        {"key": b"k%d" % i, "value": b"v%d" % i,
         "headers": [("i", str(i).encode()), ("same", b"x")]}
        for i in range(10)
    ] + [{"key": b"tomb", "value": None, "headers": [("empty", b"")]}]
    metadata = send_all(producer, "kh", messages)
    # The default partitioner hashes keys: the same key always lands in the same partition.
    again = send_all(producer, "kh", [{"key": b"k3", "value": b"again"}])
    assert again[0].partition == metadata[3].partition
    consumer = make_consumer()
    consumer.assign([TopicPartition("kh", p) for p in range(3)])
    consumer.seek_to_beginning()
    got = poll_records(consumer, 12)
    by_value = {r.value: r for r in got}
    for i in range(10):
        record = by_value[b"v%d" % i]
        assert record.key == b"k%d" % i
        assert list(record.headers) == [("i", str(i).encode()), ("same", b"x")]
        assert (record.partition, record.offset) == (metadata[i].partition, metadata[i].offset)
    tombstone = by_value[None]
    assert tombstone.key == b"tomb"
    assert list(tombstone.headers) == [("empty", b"")]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(broker3, make_producer, make_consumer, codec):
    topic = f"c-{codec}"
    producer = make_producer(compression_type=codec, linger_ms=20)
    messages = [{"value": b"%d " % i + b"payload" * 40, "partition": 0} for i in range(100)]
    send_all(producer, topic, messages)
    headers = batches_on_disk(broker3, topic, 0)
    assert {h.compression for h in headers} == {Compression[codec.upper()]}
    consumer = make_consumer()
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = poll_records(consumer, 100)
    assert [(r.offset, r.value) for r in got] == [(i, m["value"]) for i, m in enumerate(messages)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_broker_compression_type_read_by_kafka_python(broker_factory, codec):
    """compression.type on the broker: kafka-python's uncompressed batches are stored in the
    broker's codec, and kafka-python's decoders read the batches the broker compressed."""
    broker = broker_factory(compression_type=codec)
    topic = f"stored-{codec}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=20,
                             max_block_ms=int(DEADLINE * 1000))
    messages = [{"key": b"k%d" % i, "value": b"%d " % i + b"payload" * 40,
                 "headers": [("n", b"%d" % i)], "partition": 0} for i in range(100)]
    try:
        send_all(producer, topic, messages)
    finally:
        producer.close(timeout=5)
    assert {h.compression for h in batches_on_disk(broker, topic, 0)} == {
        Compression[codec.upper()]}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                             enable_auto_commit=False, fetch_max_wait_ms=100,
                             request_timeout_ms=int(DEADLINE * 1000))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = poll_records(consumer, 100)
    finally:
        consumer.close(autocommit=False)
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in got] == [
        (i, m["key"], m["value"], m["headers"]) for i, m in enumerate(messages)]


def test_seek_to_beginning_and_end(make_producer, make_consumer):
    producer = make_producer()
    send_all(producer, "seek", [{"value": b"%d" % i, "partition": 1} for i in range(10)])
    tp = TopicPartition("seek", 1)
    consumer = make_consumer()
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    assert consumer.position(tp, timeout_ms=int(DEADLINE * 1000)) == 10
    assert consumer.poll(timeout_ms=300) == {}
    send_all(producer, "seek", [{"value": b"late", "partition": 1}])
    (record,) = poll_records(consumer, 1)
    assert (record.offset, record.value) == (10, b"late")
    consumer.seek_to_beginning(tp)
    assert [r.value for r in poll_records(consumer, 11)] == [b"%d" % i for i in range(10)] + [
        b"late"
    ]
    consumer.seek(tp, 4)
    assert [r.offset for r in poll_records(consumer, 3)][:3] == [4, 5, 6]


def test_auto_offset_reset_earliest_and_latest(make_producer, make_consumer):
    producer = make_producer()
    send_all(producer, "reset", [{"value": b"%d" % i, "partition": 0} for i in range(3)])
    tp = TopicPartition("reset", 0)
    earliest = make_consumer(auto_offset_reset="earliest")
    earliest.assign([tp])
    assert [r.value for r in poll_records(earliest, 3)] == [b"0", b"1", b"2"]
    latest = make_consumer(auto_offset_reset="latest")
    latest.assign([tp])
    assert latest.position(tp, timeout_ms=int(DEADLINE * 1000)) == 3


def test_offsets_for_times(make_producer, make_consumer):
    producer = make_producer(linger_ms=50)
    stamps = [BASE_TIME_MS + 100 * i for i in range(10)]
    send_all(producer, "times", [
        {"value": b"%d" % i, "partition": 2, "timestamp_ms": ts} for i, ts in enumerate(stamps)
    ])
    tp = TopicPartition("times", 2)
    consumer = make_consumer()
    found = consumer.offsets_for_times({tp: BASE_TIME_MS + 250}, timeout_ms=int(DEADLINE * 1000))
    assert (found[tp].offset, found[tp].timestamp) == (3, BASE_TIME_MS + 300)
    assert consumer.offsets_for_times({tp: BASE_TIME_MS})[tp].offset == 0
    assert consumer.offsets_for_times({tp: stamps[-1] + 1})[tp] is None
    consumer.assign([tp])
    consumer.seek(tp, found[tp].offset)
    got = poll_records(consumer, 7)
    assert [(r.offset, r.timestamp) for r in got] == list(zip(range(3, 10), stamps[3:],
                                                              strict=True))


def test_beginning_and_end_offsets(make_producer, make_consumer):
    producer = make_producer()
    send_all(producer, "be", [{"value": b"x", "partition": p} for p in (0, 0, 0, 2)])
    consumer = make_consumer()
    tps = [TopicPartition("be", p) for p in range(3)]
    timeout_ms = int(DEADLINE * 1000)
    assert consumer.end_offsets(tps, timeout_ms) == dict(zip(tps, [3, 0, 1], strict=True))
    assert consumer.beginning_offsets(tps, timeout_ms) == dict.fromkeys(tps, 0)
    assert consumer.partitions_for_topic("be") == {0, 1, 2}


def test_producer_without_idempotence_acks_1(make_producer, make_consumer):
    producer = make_producer(enable_idempotence=False, acks=1)
    metadata = send_all(producer, "plain", [{"value": b"%d" % i, "partition": 0}
                                            for i in range(5)])
    assert [m.offset for m in metadata] == list(range(5))
    consumer = make_consumer()
    consumer.assign([TopicPartition("plain", 0)])
    consumer.seek_to_beginning()
    assert [r.value for r in poll_records(consumer, 5)] == [b"%d" % i for i in range(5)]


def test_producer_acks_0(make_producer, make_consumer):
    producer = make_producer(enable_idempotence=False, acks=0)
    send_all(producer, "a0", [{"value": b"%d" % i, "partition": 0} for i in range(5)])
    consumer = make_consumer()
    consumer.assign([TopicPartition("a0", 0)])
    consumer.seek_to_beginning()
    assert [r.value for r in poll_records(consumer, 5)] == [b"%d" % i for i in range(5)]

