"""aiokafka against samsa over loopback TCP. aiokafka is the strictest of the three clients
about versions: it sends ApiVersions v0 first and uses only non-flexible versions.

The broker runs in its own thread (``broker_factory``); the clients in pytest-asyncio's loop.
Consumers have no group (group_id=None): the broker has no group coordinator yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

import samsa
from samsa.records.batch import Compression, iter_headers

from .conftest import BASE_TIME_MS

pytestmark = [pytest.mark.timeout(60), pytest.mark.asyncio]

DEADLINE = 15.0


@pytest.fixture
def broker3(broker_factory) -> samsa.Broker:
    """Auto-created topics get three partitions."""
    return broker_factory(num_partitions=3)


@pytest_asyncio.fixture
async def clients(broker3: samsa.Broker) -> AsyncIterator[Any]:
    """``clients.producer(**conf)`` / ``clients.consumer(**conf)``: started, stopped at the end."""
    started: list[Any] = []

    class Clients:
        @staticmethod
        async def producer(**conf: Any) -> AIOKafkaProducer:
            producer = AIOKafkaProducer(bootstrap_servers=broker3.bootstrap_servers,
                                        request_timeout_ms=int(DEADLINE * 1000), **conf)
            await asyncio.wait_for(producer.start(), DEADLINE)
            started.append(producer)
            return producer

        @staticmethod
        async def consumer(**conf: Any) -> AIOKafkaConsumer:
            conf.setdefault("enable_auto_commit", False)
            conf.setdefault("fetch_max_wait_ms", 100)
            consumer = AIOKafkaConsumer(bootstrap_servers=broker3.bootstrap_servers,
                                        request_timeout_ms=int(DEADLINE * 1000), **conf)
            await asyncio.wait_for(consumer.start(), DEADLINE)
            started.append(consumer)
            return consumer

    yield Clients
    for client in reversed(started):
        await asyncio.wait_for(client.stop(), DEADLINE)


async def send_all(producer: AIOKafkaProducer, topic: str, messages: list[dict[str, Any]]
                   ) -> list[Any]:
    futures = [await producer.send(topic, **m) for m in messages]
    return await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)


async def fetch_records(consumer: AIOKafkaConsumer, count: int) -> list[Any]:
    """At least ``count`` records (getmany may return more), or fail after DEADLINE."""
    got: list[Any] = []

    async def loop() -> None:
        while len(got) < count:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(records)

    try:
        await asyncio.wait_for(loop(), DEADLINE)
    except TimeoutError:
        raise AssertionError(f"got {len(got)} of {count} records in {DEADLINE} s") from None
    return got


def batches_on_disk(broker: samsa.Broker, topic: str, partition: int) -> list[Any]:
    out = []
    for log_file in sorted((Path(broker.data_dir) / f"{topic}-{partition}").glob("*.log")):
        out.extend(h for _, h in iter_headers(log_file.read_bytes()))
    return out


async def test_round_trip_multiple_partitions(clients):
    producer = await clients.producer()
    messages = [{"value": b"v%d" % i, "partition": i % 3} for i in range(30)]
    metadata = await send_all(producer, "rt", messages)
    assert sorted((m.partition, m.offset) for m in metadata) == sorted(
        (p, o) for p in range(3) for o in range(10)
    )
    assert await producer.partitions_for("rt") == {0, 1, 2}
    consumer = await clients.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition("rt", p) for p in range(3)])
    got = await fetch_records(consumer, 30)
    assert len(got) == 30
    for p in range(3):
        assert [(r.offset, r.value) for r in got if r.partition == p] == [
            (i, b"v%d" % (3 * i + p)) for i in range(10)
        ]


async def test_keys_and_headers(clients):
    producer = await clients.producer()
    messages = [
        {"key": b"k%d" % i, "value": b"v%d" % i, "headers": [("i", b"%d" % i), ("x", b"")]}
        for i in range(12)
    ] + [{"key": b"tomb", "value": None}]
    metadata = await send_all(producer, "kh", messages)
    consumer = await clients.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition("kh", p) for p in range(3)])
    got = await fetch_records(consumer, 13)
    assert len(got) == 13
    by_key = {r.key: r for r in got}
    for i in range(12):
        record = by_key[b"k%d" % i]
        assert record.value == b"v%d" % i
        assert list(record.headers) == [("i", b"%d" % i), ("x", b"")]
        assert (record.partition, record.offset) == (metadata[i].partition, metadata[i].offset)
    assert by_key[b"tomb"].value is None


async def test_idempotent_producer(broker3, clients):
    producer = await clients.producer(enable_idempotence=True)
    await send_all(producer, "idem", [{"value": b"%d" % i, "partition": 0} for i in range(10)])
    headers = batches_on_disk(broker3, "idem", 0)
    assert headers and all(h.producer_id >= 0 for h in headers)
    assert headers[0].base_sequence == 0
    consumer = await clients.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition("idem", 0)])
    assert [r.value for r in await fetch_records(consumer, 10)] == [b"%d" % i for i in range(10)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compression(broker3, clients, codec):
    topic = f"c-{codec}"
    producer = await clients.producer(compression_type=codec, linger_ms=20)
    messages = [{"value": b"%d " % i + b"payload" * 40, "partition": 1} for i in range(100)]
    await send_all(producer, topic, messages)
    headers = batches_on_disk(broker3, topic, 1)
    assert {h.compression for h in headers} == {Compression[codec.upper()]}
    consumer = await clients.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 1)])
    got = await fetch_records(consumer, 100)
    assert [(r.offset, r.value) for r in got] == [(i, m["value"]) for i, m in enumerate(messages)]


async def test_seek_to_beginning_end_and_offset(clients):
    producer = await clients.producer()
    await send_all(producer, "seek", [{"value": b"%d" % i, "partition": 2} for i in range(10)])
    tp = TopicPartition("seek", 2)
    consumer = await clients.consumer()
    consumer.assign([tp])
    await consumer.seek_to_end(tp)
    assert await consumer.position(tp) == 10
    assert await consumer.getmany(timeout_ms=300) == {}
    await send_all(producer, "seek", [{"value": b"late", "partition": 2}])
    (record,) = await fetch_records(consumer, 1)
    assert (record.offset, record.value) == (10, b"late")
    await consumer.seek_to_beginning(tp)
    got = await fetch_records(consumer, 11)
    assert [r.value for r in got] == [b"%d" % i for i in range(10)] + [b"late"]
    consumer.seek(tp, 7)
    assert [r.offset for r in await fetch_records(consumer, 4)] == [7, 8, 9, 10]


async def test_offsets_for_times(clients):
    producer = await clients.producer(linger_ms=50)
    stamps = [BASE_TIME_MS + 100 * i for i in range(10)]
    await send_all(producer, "times", [
        {"value": b"%d" % i, "partition": 0, "timestamp_ms": ts} for i, ts in enumerate(stamps)
    ])
    tp = TopicPartition("times", 0)
    consumer = await clients.consumer()
    found = await consumer.offsets_for_times({tp: BASE_TIME_MS + 450})
    assert (found[tp].offset, found[tp].timestamp) == (5, BASE_TIME_MS + 500)
    assert (await consumer.offsets_for_times({tp: 0}))[tp].offset == 0
    assert (await consumer.offsets_for_times({tp: stamps[-1] + 1}))[tp] is None
    consumer.assign([tp])
    consumer.seek(tp, found[tp].offset)
    got = await fetch_records(consumer, 5)
    assert [(r.offset, r.timestamp) for r in got] == list(zip(range(5, 10), stamps[5:],
                                                              strict=True))


async def test_beginning_and_end_offsets(clients):
    producer = await clients.producer()
    await send_all(producer, "be", [{"value": b"x", "partition": p} for p in (1, 1, 2)])
    consumer = await clients.consumer()
    tps = [TopicPartition("be", p) for p in range(3)]
    assert await consumer.end_offsets(tps) == dict(zip(tps, [0, 2, 1], strict=True))
    assert await consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)


async def test_acks_0_and_1(clients):
    for acks in (0, 1):
        producer = await clients.producer(acks=acks)
        await send_all(producer, f"acks{acks}", [{"value": b"%d" % i, "partition": 0}
                                                 for i in range(5)])
    consumer = await clients.consumer(auto_offset_reset="earliest")
    consumer.assign([TopicPartition("acks0", 0), TopicPartition("acks1", 0)])
    got = await fetch_records(consumer, 10)
    for topic in ("acks0", "acks1"):
        assert [r.value for r in got if r.topic == topic] == [b"%d" % i for i in range(5)]


async def test_long_poll_consumer_wakes_on_new_data(clients):
    consumer = await clients.consumer(fetch_max_wait_ms=5000)
    producer = await clients.producer()
    await send_all(producer, "wake", [{"value": b"first", "partition": 0}])
    tp = TopicPartition("wake", 0)
    consumer.assign([tp])
    await consumer.seek_to_end(tp)
    assert await consumer.position(tp) == 1
    getter: Awaitable[Any] = asyncio.ensure_future(consumer.getone())
    await asyncio.sleep(0.3)
    loop = asyncio.get_running_loop()
    produced = loop.time()
    await send_all(producer, "wake", [{"value": b"second", "partition": 0}])
    record = await asyncio.wait_for(getter, DEADLINE)
    assert loop.time() - produced < 2.0
    assert (record.offset, record.value) == (1, b"second")


