"""kafka-python 3.0.12's transactional producer against samsa over loopback TCP (KIP-98/447).

Commit and abort across partitions, the read_committed / read_uncommitted views of kafka-python's
consumer (and of a confluent-kafka consumer), the last stable offset while a transaction is open,
fencing by a second producer with the same transactional.id, and consumer offsets sent to a
transaction (``send_offsets_to_transaction``), which count only when it commits.

kafka-python's ``commit_transaction``, ``abort_transaction`` and ``send_offsets_to_transaction``
wait without a timeout of their own: the tests run them through ``bounded``. A commit or abort
marker takes one offset of each partition in the transaction, so the offsets asserted here leave
a gap of one after every transaction.
"""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

with warnings.catch_warnings():
    # kafka-python loads its schemas with importlib.resources' deprecated API: not ours to fix.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import CommitFailedError, KafkaError, ProducerFencedError
    from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.timeout(60)

DEADLINE = 15.0
T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def bounded(call: Callable[[], T], what: str, timeout: float = DEADLINE) -> T:
    """``call()`` on a daemon thread; its result or exception, or a failure after ``timeout``
    (for kafka-python calls that wait without a timeout of their own)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name=what, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"{what} did not return within {timeout} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")  # type: ignore[return-value]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    futures[topic].result(timeout=DEADLINE)


@pytest.fixture
def broker(samsa_broker: samsa.Broker) -> samsa.Broker:
    return samsa_broker


@pytest.fixture
def make_producer(broker: samsa.Broker) -> Iterator[Callable[..., KafkaProducer]]:
    """``make_producer(transactional_id, **conf)``: a transactional KafkaProducer with
    ``init_transactions()`` done; all are closed at the end of the test."""
    made: list[KafkaProducer] = []

    def make(transactional_id: str, init: bool = True, **conf: Any) -> KafkaProducer:
        conf.setdefault("max_block_ms", int(DEADLINE * 1000))
        conf.setdefault("request_timeout_ms", int(DEADLINE * 1000))
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                 transactional_id=transactional_id, **conf)
        made.append(producer)
        if init:
            producer.init_transactions()
        return producer

    yield make
    for producer in made:
        producer.close(timeout=5)


@pytest.fixture
def make_consumer(broker: samsa.Broker) -> Iterator[Callable[..., KafkaConsumer]]:
    """``make_consumer(isolation_level, **conf)``: a KafkaConsumer (no group unless given)."""
    made: list[KafkaConsumer] = []

    def make(isolation_level: str, **conf: Any) -> KafkaConsumer:
        conf.setdefault("enable_auto_commit", False)
        conf.setdefault("fetch_max_wait_ms", 100)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                 isolation_level=isolation_level,
                                 request_timeout_ms=int(DEADLINE * 1000), **conf)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close(autocommit=False)


def send_txn(producer: KafkaProducer, topic: str, values: list[tuple[int, bytes]]) -> None:
    """Send ``(partition, value)`` pairs inside the current transaction and flush them to the
    broker (so an abort that follows has records on disk to hide)."""
    futures = [producer.send(topic, value=v, partition=p) for p, v in values]
    producer.flush(timeout=DEADLINE)
    for f in futures:
        f.get(timeout=DEADLINE)


def commit(producer: KafkaProducer) -> None:
    bounded(producer.commit_transaction, "commit_transaction")


def abort(producer: KafkaProducer) -> None:
    bounded(producer.abort_transaction, "abort_transaction")


def read_to_end(consumer: KafkaConsumer, tps: list[TopicPartition], timeout: float = DEADLINE
                ) -> dict[int, list[tuple[int, bytes]]]:
    """Assign ``tps``, read from the beginning until the consumer's position reaches the end
    offset of each (for read_committed: the last stable offset); partition -> [(offset,
    value)]. Everything the consumer may see below that offset is in the result."""
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    end = consumer.end_offsets(tps, timeout_ms=int(timeout * 1000))
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    deadline = time.monotonic() + timeout
    while any(consumer.position(tp, timeout_ms=int(timeout * 1000)) < end[tp] for tp in tps):
        if time.monotonic() > deadline:
            positions = {tp.partition: consumer.position(tp) for tp in tps}
            raise AssertionError(f"positions {positions} did not reach the end offsets "
                                 f"{ {tp.partition: o for tp, o in end.items()} } in {timeout} s")
        for tp, records in consumer.poll(timeout_ms=200).items():
            got[tp.partition].extend((r.offset, r.value) for r in records)
    return dict(got)


def per_partition(values: list[tuple[int, bytes]], first_offset: int
                  ) -> dict[int, list[tuple[int, bytes]]]:
    """The (offset, value) each partition holds for ``(partition, value)`` pairs written in
    order from ``first_offset`` on (the same first offset in every partition)."""
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for p, v in values:
        out[p].append((first_offset + len(out[p]), v))
    return dict(out)


def merged(*parts: dict[int, list[tuple[int, bytes]]]) -> dict[int, list[tuple[int, bytes]]]:
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for part in parts:
        for p, records in part.items():
            out[p].extend(records)
    return dict(out)


def three_transactions(producer: KafkaProducer, topic: str, partitions: int, per: int
                       ) -> tuple[list[tuple[int, bytes]], ...]:
    """Commit ``a``, abort ``b``, commit ``c``: ``per`` records per partition each."""
    batches = tuple(
        [(i % partitions, b"%s%d" % (tag, i)) for i in range(per * partitions)]
        for tag in (b"a", b"b", b"c")
    )
    for values, finish in zip(batches, (commit, abort, commit), strict=True):
        producer.begin_transaction()
        send_txn(producer, topic, values)
        finish(producer)
    return batches


# --- tests ---------------------------------------------------------------------------------------


def test_commit_and_abort_across_partitions(broker, make_producer, make_consumer):
    """A committed transaction is visible to read_committed, an aborted one is not; both are to
    read_uncommitted. Each transaction's marker takes one offset per partition, and the end
    offset is the same (the LSO equals the high watermark) once no transaction is open."""
    topic = unique("txn")
    create_topic(broker.bootstrap_servers, topic, 3)
    producer = make_producer(unique("tid"))
    a, b, c = three_transactions(producer, topic, 3, 10)
    tps = [TopicPartition(topic, p) for p in range(3)]
    # per partition: a at 0-9, marker 10, b at 11-20, marker 21, c at 22-31, marker 32
    committed = merged(per_partition(a, 0), per_partition(c, 22))
    everything = merged(per_partition(a, 0), per_partition(b, 11), per_partition(c, 22))
    rc = make_consumer("read_committed")
    assert read_to_end(rc, tps) == committed
    assert rc.end_offsets(tps) == {tp: 33 for tp in tps}
    ru = make_consumer("read_uncommitted")
    assert read_to_end(ru, tps) == everything
    assert ru.end_offsets(tps) == {tp: 33 for tp in tps}


def test_open_transaction_holds_back_read_committed(broker, make_producer, make_consumer):
    """While a transaction is open, read_committed stops at its first offset (the last stable
    offset), even for records other producers append after it; read_uncommitted reads on.
    Once it commits, read_committed gets everything in offset order."""
    topic = unique("lso")
    create_topic(broker.bootstrap_servers, topic, 1)
    tp = TopicPartition(topic, 0)
    producer = make_producer(unique("tid"))
    producer.begin_transaction()
    send_txn(producer, topic, [(0, b"t0"), (0, b"t1")])
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                          max_block_ms=int(DEADLINE * 1000))
    try:
        plain.send(topic, value=b"plain", partition=0).get(timeout=DEADLINE)
    finally:
        plain.close(timeout=5)
    rc = make_consumer("read_committed")
    assert rc.end_offsets([tp]) == {tp: 0}
    assert read_to_end(rc, [tp]) == {}
    for records in rc.poll(timeout_ms=500).values():
        raise AssertionError(f"read_committed got {records} while the transaction is open")
    ru = make_consumer("read_uncommitted")
    assert read_to_end(ru, [tp]) == {0: [(0, b"t0"), (1, b"t1"), (2, b"plain")]}
    commit(producer)
    rc2 = make_consumer("read_committed")
    assert read_to_end(rc2, [tp]) == {0: [(0, b"t0"), (1, b"t1"), (2, b"plain")]}
    assert rc2.end_offsets([tp]) == {tp: 4}


def test_fencing_aborts_the_open_transaction(broker, make_producer, make_consumer):
    """A second producer with the same transactional.id fences the first: the first's open
    transaction is aborted, its commit fails with ProducerFencedError, and only the second
    producer's transaction is visible to read_committed."""
    topic = unique("fence")
    create_topic(broker.bootstrap_servers, topic, 2)
    tid = unique("tid")
    first = make_producer(tid)
    first.begin_transaction()
    send_txn(first, topic, [(0, b"old0"), (1, b"old1")])
    second = make_producer(tid)  # init_transactions: aborts first's transaction, bumps epoch
    second.begin_transaction()
    send_txn(second, topic, [(0, b"new0"), (1, b"new1")])
    commit(second)
    with pytest.raises(ProducerFencedError):
        commit(first)
    tps = [TopicPartition(topic, p) for p in range(2)]
    # per partition: old at 0, abort marker 1, new at 2, commit marker 3
    assert read_to_end(make_consumer("read_committed"), tps) == {
        0: [(2, b"new0")], 1: [(2, b"new1")]}
    assert read_to_end(make_consumer("read_uncommitted"), tps) == {
        0: [(0, b"old0"), (2, b"new0")], 1: [(0, b"old1"), (2, b"new1")]}


def test_fencing_an_idle_producer(broker, make_producer, make_consumer):
    """A producer fenced between transactions fails on its next transaction (its partitions
    cannot be added with the old epoch): ProducerFencedError, and nothing of it is visible."""
    topic = unique("idle")
    create_topic(broker.bootstrap_servers, topic, 1)
    tid = unique("tid")
    first = make_producer(tid)
    first.begin_transaction()
    send_txn(first, topic, [(0, b"before")])
    commit(first)
    make_producer(tid)  # fences first
    first.begin_transaction()
    future = first.send(topic, value=b"fenced", partition=0)
    with pytest.raises(ProducerFencedError):  # AddPartitionsToTxn failed: never produced
        future.get(timeout=DEADLINE)
    # kafka-python wraps the fatal error it already has: "... in an error state: [Error 90]"
    with pytest.raises(KafkaError, match="ProducerFenced"):
        commit(first)
    tp = TopicPartition(topic, 0)
    assert read_to_end(make_consumer("read_committed"), [tp]) == {0: [(0, b"before")]}
    assert read_to_end(make_consumer("read_uncommitted"), [tp]) == {0: [(0, b"before")]}


def test_send_offsets_count_only_on_commit(broker, make_producer, make_consumer):
    """Offsets sent to a transaction (TxnOffsetCommit, with a bare group id) are not the
    group's committed offsets while it is open, are dropped when it aborts, and become the
    committed offsets, with their metadata, when it commits."""
    source, sink = unique("in"), unique("out")
    create_topic(broker.bootstrap_servers, source, 1)
    create_topic(broker.bootstrap_servers, sink, 1)
    group = unique("group")
    tp = TopicPartition(source, 0)
    producer = make_producer(unique("tid"))

    def committed(isolation_level: str) -> Any:
        consumer = make_consumer(isolation_level, group_id=group)
        return consumer.committed(tp, metadata=True, timeout_ms=int(DEADLINE * 1000))

    producer.begin_transaction()
    send_txn(producer, sink, [(0, b"aborted")])
    bounded(lambda: producer.send_offsets_to_transaction(
        {tp: OffsetAndMetadata(5, "five", -1)}, group), "send_offsets_to_transaction")
    # OffsetFetch without require_stable (read_uncommitted): the pending offset is not there
    assert committed("read_uncommitted") is None
    abort(producer)
    assert committed("read_committed") is None

    producer.begin_transaction()
    send_txn(producer, sink, [(0, b"committed")])
    bounded(lambda: producer.send_offsets_to_transaction(
        {tp: OffsetAndMetadata(7, "seven", -1)}, group), "send_offsets_to_transaction")
    commit(producer)
    # OffsetFetch with require_stable (read_committed): nothing pending any more
    stable = committed("read_committed")
    assert (stable.offset, stable.metadata) == (7, "seven")
    assert read_to_end(make_consumer("read_committed"), [TopicPartition(sink, 0)]) == {
        0: [(2, b"committed")]}


def test_consume_transform_produce_with_group_metadata(broker, make_producer, make_consumer):
    """The exactly-once loop of KIP-447: a group member reads, a transaction writes the results
    and commits the member's offsets with its group metadata (generation, member id); a new
    member of the group resumes after them and the output holds each result once."""
    source, sink = unique("in"), unique("out")
    create_topic(broker.bootstrap_servers, source, 1)
    create_topic(broker.bootstrap_servers, sink, 1)
    group = unique("group")
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                          max_block_ms=int(DEADLINE * 1000))
    try:
        for i in range(10):
            plain.send(source, value=b"%d" % i, partition=0)
        plain.flush(timeout=DEADLINE)
    finally:
        plain.close(timeout=5)
    producer = make_producer(unique("tid"))
    member = make_consumer("read_committed", group_id=group, auto_offset_reset="earliest")
    # The topic's metadata first, and poll()s of 1 s: kafka-python 3.0.12 loses a rebalance when
    # a metadata-triggered rejoin's SyncGroup answer arrives after poll()'s timer ran out (see
    # KAFKA_PYTHON_POLL_MS in bench/group_bench.py).
    assert member.partitions_for_topic(source) == {0}
    member.subscribe([source])
    got: list[Any] = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < 6:
        assert time.monotonic() < deadline, f"the member got {len(got)} of 6 records"
        for records in member.poll(timeout_ms=1000, max_records=6 - len(got)).values():
            got.extend(records)
    metadata = member.group_metadata()
    assert metadata.generation_id >= 1 and metadata.member_id, metadata
    producer.begin_transaction()
    send_txn(producer, sink, [(0, b"x" + r.value) for r in got])
    bounded(lambda: producer.send_offsets_to_transaction(
        {TopicPartition(source, 0): OffsetAndMetadata(got[-1].offset + 1, "", -1)}, metadata),
        "send_offsets_to_transaction")
    commit(producer)
    member.close(autocommit=False)
    resumed = make_consumer("read_committed", group_id=group)
    assert resumed.committed(TopicPartition(source, 0),
                             timeout_ms=int(DEADLINE * 1000)) == 6
    output = read_to_end(make_consumer("read_committed"), [TopicPartition(sink, 0)])
    assert output == {0: [(i, b"x%d" % i) for i in range(6)]}


def joined_member(make_consumer: Callable[..., KafkaConsumer], group: str, topic: str
                  ) -> KafkaConsumer:
    """A read_committed member of ``group`` subscribed to ``topic``, polled until it has an
    assignment (its group metadata then carries its member id and generation)."""
    member = make_consumer("read_committed", group_id=group, auto_offset_reset="earliest")
    assert member.partitions_for_topic(topic) == {0}  # see the comment on poll() above
    member.subscribe([topic])
    deadline = time.monotonic() + DEADLINE
    while not member.assignment():
        assert time.monotonic() < deadline, f"no assignment for {group} in {DEADLINE} s"
        member.poll(timeout_ms=1000, max_records=1)
    return member


def test_stale_group_metadata_is_fenced(broker, make_producer, make_consumer):
    """KIP-447: offsets sent with the group metadata of a member that has left (TxnOffsetCommit
    v3 with its member id and generation) are refused (UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION:
    kafka-python's CommitFailedError), the transaction can only abort, and the producer then
    commits the same offsets with the current member's metadata."""
    source = unique("in")
    create_topic(broker.bootstrap_servers, source, 1)
    group = unique("group")
    tp = TopicPartition(source, 0)
    old = joined_member(make_consumer, group, source)
    stale = old.group_metadata()
    old.close(autocommit=False)  # LeaveGroup
    new = joined_member(make_consumer, group, source)
    current = new.group_metadata()
    assert current.member_id != stale.member_id
    assert current.generation_id > stale.generation_id, (stale, current)
    producer = make_producer(unique("tid"))
    producer.begin_transaction()
    with pytest.raises(CommitFailedError):
        bounded(lambda: producer.send_offsets_to_transaction(
            {tp: OffsetAndMetadata(3, "", -1)}, stale), "send_offsets_to_transaction")
    abort(producer)
    producer.begin_transaction()
    bounded(lambda: producer.send_offsets_to_transaction(
        {tp: OffsetAndMetadata(3, "", -1)}, current), "send_offsets_to_transaction")
    commit(producer)
    assert new.committed(tp, timeout_ms=int(DEADLINE * 1000)) == 3


def test_confluent_read_committed_consumer_reads_kafka_python_transactions(
        broker, make_producer):
    """Cross-client: transactions written by kafka-python, read by librdkafka. read_committed
    gets the committed records only, in offset order, and nothing else in the next second;
    read_uncommitted gets every record."""
    topic = unique("cross")
    create_topic(broker.bootstrap_servers, topic, 2)
    producer = make_producer(unique("tid"))
    a, b, c = three_transactions(producer, topic, 2, 5)
    # per partition: a at 0-4, marker 5, b at 6-10, marker 11, c at 12-16, marker 17
    committed = merged(per_partition(a, 0), per_partition(c, 12))
    everything = merged(per_partition(a, 0), per_partition(b, 6), per_partition(c, 12))
    for isolation, expected in (("read_committed", committed), ("read_uncommitted", everything)):
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": unique("g"),
            "isolation.level": isolation, "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        })
        try:
            consumer.assign([CTopicPartition(topic, p, 0) for p in range(2)])
            want = sum(len(v) for v in expected.values())
            got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
            deadline = time.monotonic() + DEADLINE
            quiet_until = None
            while quiet_until is None or time.monotonic() < quiet_until:
                assert time.monotonic() < deadline, f"{isolation}: got {dict(got)}"
                msg = consumer.poll(0.1)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got[msg.partition()].append((msg.offset(), msg.value()))
                if quiet_until is None and sum(len(v) for v in got.values()) >= want:
                    quiet_until = time.monotonic() + 1.0  # anything more would be an error
            assert dict(got) == expected, isolation
        finally:
            consumer.close()
