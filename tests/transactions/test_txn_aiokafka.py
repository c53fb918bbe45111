"""aiokafka 0.14's transactional producer and read_committed consumer against samsa (KIP-98).

``async with producer.transaction():`` commits on a normal exit and aborts when the block
raises; AIOKafkaConsumer(isolation_level="read_committed") must see committed records only, in
order, and stop at the last stable offset while a transaction is open; a second producer with
the same transactional.id fences the first (``ProducerFenced``); offsets sent with
``send_offsets_to_transaction`` count only when the transaction commits.

aiokafka speaks the oldest versions of the transaction APIs (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit v0), so a fenced producer must get
INVALID_PRODUCER_EPOCH there (PRODUCER_FENCED exists from v2 on only). Its
``send_offsets_to_transaction`` takes a bare group id, not the consumer's group metadata: no
KIP-447 member/generation fencing is tested here (see test_txn_kafka_python.py for that).

The broker runs in its own thread (``samsa_broker``); the clients in pytest-asyncio's loop, as in
tests/clients/test_aiokafka.py. Every await on the network is bounded by ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

pytestmark = [pytest.mark.timeout(60), pytest.mark.asyncio]

DEADLINE = 15.0
T = TypeVar("T")
Records = dict[int, list[tuple[int, bytes]]]


class Boom(Exception):
    """Raised inside ``producer.transaction()`` to make it abort."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def within(awaitable: Awaitable[T], what: str, timeout: float = DEADLINE) -> T:
    """``await awaitable``, failing (not hanging) after ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        raise AssertionError(f"{what} took more than {timeout} s") from None


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic (blocking: called before the test's clients start)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    futures[topic].result(timeout=DEADLINE)


@pytest.fixture
def broker(samsa_broker: samsa.Broker) -> samsa.Broker:
    return samsa_broker


@pytest_asyncio.fixture
async def clients(broker: samsa.Broker) -> AsyncIterator[Any]:
    """``clients.producer(transactional_id=..., **conf)`` / ``clients.consumer(isolation_level,
    **conf)``: started, stopped at the end of the test."""
    started: list[Any] = []

    class Clients:
        @staticmethod
        async def producer(**conf: Any) -> AIOKafkaProducer:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                        request_timeout_ms=int(DEADLINE * 1000), **conf)
            started.append(producer)
            await within(producer.start(), "producer start")
            return producer

        @staticmethod
        async def consumer(isolation_level: str, **conf: Any) -> AIOKafkaConsumer:
            conf.setdefault("enable_auto_commit", False)
            conf.setdefault("fetch_max_wait_ms", 100)
            consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                        isolation_level=isolation_level,
                                        request_timeout_ms=int(DEADLINE * 1000), **conf)
            started.append(consumer)
            await within(consumer.start(), "consumer start")
            return consumer

    yield Clients
    for client in reversed(started):
        try:
            await asyncio.wait_for(client.stop(), DEADLINE)
        except ProducerFenced:  # a fenced producer reports its fatal error again on stop
            pass


async def send_all(producer: AIOKafkaProducer, topic: str, values: list[tuple[int, bytes]]
                   ) -> None:
    """Send ``(partition, value)`` pairs in the current transaction and wait until the broker
    has them all (so an abort that follows has records on disk to hide)."""
    futures = [await within(producer.send(topic, value=v, partition=p), "send")
               for p, v in values]
    await within(asyncio.gather(*futures), "the produce acknowledgements")


async def read_to_end(consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> Records:
    """Assign ``tps`` and read from the beginning until the position reaches the end offset of
    each (for read_committed: the last stable offset); partition -> [(offset, value)]."""
    consumer.assign(tps)
    await within(consumer.seek_to_beginning(*tps), "seek_to_beginning")
    end = await within(consumer.end_offsets(tps), "end_offsets")
    got: Records = defaultdict(list)

    async def loop() -> None:
        while True:
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= end[tp] for pos, tp in zip(positions, tps, strict=True)):
                return
            for tp, records in (await consumer.getmany(*tps, timeout_ms=200)).items():
                got[tp.partition].extend((r.offset, r.value) for r in records)

    await within(loop(), f"reading to the end offsets {end} (got {dict(got)})")
    return dict(got)


def per_partition(values: list[tuple[int, bytes]], first_offset: int) -> Records:
    """partition -> [(offset, value)] for ``(partition, value)`` pairs written in order from
    ``first_offset`` on (the same in every partition)."""
    out: Records = defaultdict(list)
    for p, v in values:
        out[p].append((first_offset + len(out[p]), v))
    return dict(out)


def merged(*parts: Records) -> Records:
    out: Records = defaultdict(list)
    for part in parts:
        for p, records in part.items():
            out[p].extend(records)
    return dict(out)


async def committed_offset(clients: Any, group: str, tp: TopicPartition) -> int | None:
    consumer = await clients.consumer("read_committed", group_id=group)
    return await within(consumer.committed(tp), "committed")


# --- tests ---------------------------------------------------------------------------------------


async def test_commit_and_abort_across_partitions(broker, clients):
    """``async with transaction()`` commits; raising inside aborts. read_committed sees the
    committed records only, read_uncommitted all of them; each marker takes one offset per
    partition and the end offset is the same for both once nothing is open."""
    topic = unique("txn")
    create_topic(broker.bootstrap_servers, topic, 3)
    producer = await clients.producer(transactional_id=unique("tid"))
    a, b, c = (
        [(i % 3, b"%s%d" % (tag, i)) for i in range(30)] for tag in (b"a", b"b", b"c")
    )
    async with producer.transaction():
        await send_all(producer, topic, a)
    with pytest.raises(Boom):
        async with producer.transaction():
            await send_all(producer, topic, b)
            raise Boom
    async with producer.transaction():
        await send_all(producer, topic, c)
    tps = [TopicPartition(topic, p) for p in range(3)]
    # per partition: a at 0-9, marker 10, b at 11-20, marker 21, c at 22-31, marker 32
    rc = await clients.consumer("read_committed")
    assert await read_to_end(rc, tps) == merged(per_partition(a, 0), per_partition(c, 22))
    assert await within(rc.end_offsets(tps), "end_offsets") == {tp: 33 for tp in tps}
    ru = await clients.consumer("read_uncommitted")
    assert await read_to_end(ru, tps) == merged(
        per_partition(a, 0), per_partition(b, 11), per_partition(c, 22))
    assert await within(ru.end_offsets(tps), "end_offsets") == {tp: 33 for tp in tps}


async def test_open_transaction_holds_back_read_committed(broker, clients):
    """While a transaction is open, read_committed stops at its first offset (the LSO), also
    for a non-transactional record appended after it; read_uncommitted reads on. After the
    commit read_committed gets all three in offset order."""
    topic = unique("lso")
    create_topic(broker.bootstrap_servers, topic, 1)
    tp = TopicPartition(topic, 0)
    producer = await clients.producer(transactional_id=unique("tid"))
    await within(producer.begin_transaction(), "begin_transaction")
    await send_all(producer, topic, [(0, b"t0"), (0, b"t1")])
    plain = await clients.producer()
    await within(plain.send_and_wait(topic, b"plain", partition=0), "plain send")
    rc = await clients.consumer("read_committed")
    assert await within(rc.end_offsets([tp]), "end_offsets") == {tp: 0}
    assert await read_to_end(rc, [tp]) == {}
    assert await within(rc.getmany(tp, timeout_ms=500), "getmany") == {}
    ru = await clients.consumer("read_uncommitted")
    assert await read_to_end(ru, [tp]) == {0: [(0, b"t0"), (1, b"t1"), (2, b"plain")]}
    await within(producer.commit_transaction(), "commit_transaction")
    rc2 = await clients.consumer("read_committed")
    assert await read_to_end(rc2, [tp]) == {0: [(0, b"t0"), (1, b"t1"), (2, b"plain")]}
    assert await within(rc2.end_offsets([tp]), "end_offsets") == {tp: 4}


async def test_fencing_aborts_the_open_transaction(broker, clients):
    """A second producer with the same transactional.id aborts the first's open transaction
    (InitProducerId bumps the epoch); the first's commit fails with ProducerFenced, and
    read_committed sees the second's records only."""
    topic = unique("fence")
    create_topic(broker.bootstrap_servers, topic, 2)
    tid = unique("tid")
    first = await clients.producer(transactional_id=tid)
    await within(first.begin_transaction(), "begin_transaction")
    await send_all(first, topic, [(0, b"old0"), (1, b"old1")])
    second = await clients.producer(transactional_id=tid)
    async with second.transaction():  # begin waits for second's InitProducerId
        await send_all(second, topic, [(0, b"new0"), (1, b"new1")])
    with pytest.raises(ProducerFenced):
        await within(first.commit_transaction(), "the fenced commit")
    tps = [TopicPartition(topic, p) for p in range(2)]
    # per partition: old at 0, abort marker 1, new at 2, commit marker 3
    assert await read_to_end(await clients.consumer("read_committed"), tps) == {
        0: [(2, b"new0")], 1: [(2, b"new1")]}
    assert await read_to_end(await clients.consumer("read_uncommitted"), tps) == {
        0: [(0, b"old0"), (2, b"new0")], 1: [(0, b"old1"), (2, b"new1")]}


async def test_fencing_an_idle_producer(broker, clients):
    """A producer fenced between transactions fails on its next one: adding the partition
    with the old epoch fails, the send raises ProducerFenced and nothing of it is written."""
    topic = unique("idle")
    create_topic(broker.bootstrap_servers, topic, 1)
    tid = unique("tid")
    first = await clients.producer(transactional_id=tid)
    async with first.transaction():
        await send_all(first, topic, [(0, b"before")])
    second = await clients.producer(transactional_id=tid)
    await within(second.begin_transaction(), "begin_transaction")  # InitProducerId: fences
    await within(second.abort_transaction(), "abort_transaction")
    with pytest.raises(ProducerFenced):
        async with first.transaction():
            await send_all(first, topic, [(0, b"fenced")])
    tp = TopicPartition(topic, 0)
    assert await read_to_end(await clients.consumer("read_committed"), [tp]) == {
        0: [(0, b"before")]}
    assert await read_to_end(await clients.consumer("read_uncommitted"), [tp]) == {
        0: [(0, b"before")]}


async def test_send_offsets_count_only_on_commit(broker, clients):
    """Offsets sent to a transaction are not the group's committed offsets while it is open,
    are dropped when it aborts, and are committed when it commits."""
    source, sink = unique("in"), unique("out")
    create_topic(broker.bootstrap_servers, source, 1)
    create_topic(broker.bootstrap_servers, sink, 1)
    group = unique("group")
    tp = TopicPartition(source, 0)
    producer = await clients.producer(transactional_id=unique("tid"))
    with pytest.raises(Boom):
        async with producer.transaction():
            await send_all(producer, sink, [(0, b"aborted")])
            await within(producer.send_offsets_to_transaction({tp: (5, "five")}, group),
                         "send_offsets_to_transaction")
            assert await committed_offset(clients, group, tp) is None
            raise Boom
    assert await committed_offset(clients, group, tp) is None
    async with producer.transaction():
        await send_all(producer, sink, [(0, b"committed")])
        await within(producer.send_offsets_to_transaction({tp: (7, "seven")}, group),
                     "send_offsets_to_transaction")
    assert await committed_offset(clients, group, tp) == 7
    assert await read_to_end(await clients.consumer("read_committed"),
                             [TopicPartition(sink, 0)]) == {0: [(2, b"committed")]}


async def test_consume_transform_produce(broker, clients):
    """A group member reads six records, one transaction writes the results and commits the
    member's position for its group; a new member of the group resumes at offset 6 and the
    output holds each result once."""
    source, sink = unique("in"), unique("out")
    create_topic(broker.bootstrap_servers, source, 1)
    create_topic(broker.bootstrap_servers, sink, 1)
    group = unique("group")
    plain = await clients.producer()
    for i in range(10):
        await within(plain.send_and_wait(source, b"%d" % i, partition=0), "plain send")
    producer = await clients.producer(transactional_id=unique("tid"))
    member = await clients.consumer("read_committed", group_id=group,
                                    auto_offset_reset="earliest")
    member.subscribe([source])
    got: list[Any] = []

    async def take_six() -> None:
        while len(got) < 6:
            batches = await member.getmany(timeout_ms=200, max_records=6 - len(got))
            for records in batches.values():
                got.extend(records)

    await within(take_six(), "the member's first six records")
    tp = TopicPartition(source, 0)
    async with producer.transaction():
        await send_all(producer, sink, [(0, b"x" + r.value) for r in got])
        await within(producer.send_offsets_to_transaction({tp: got[-1].offset + 1}, group),
                     "send_offsets_to_transaction")
    await within(member.stop(), "member stop")
    resumed = await clients.consumer("read_committed", group_id=group)
    resumed.subscribe([source])
    again: list[Any] = []

    async def take_rest() -> None:
        while len(again) < 4:
            for records in (await resumed.getmany(timeout_ms=200)).values():
                again.extend(records)

    await within(take_rest(), "the resumed member's records")
    assert [(r.offset, r.value) for r in again] == [(i, b"%d" % i) for i in range(6, 10)]
    assert await read_to_end(await clients.consumer("read_committed"),
                             [TopicPartition(sink, 0)]) == {
        0: [(i, b"x%d" % i) for i in range(6)]}
