"""Kafka transactions (KIP-98, KIP-447) with confluent-kafka (librdkafka) against samsa.

Transactional producers commit and abort across partitions and topics; read_committed consumers
see exactly the committed records and stop at the last stable offset (LSO) while a transaction
is open; fencing, broker-side timeouts, offsets committed in a transaction and a broker restart
with transactions in every state. Every wait is bounded by a deadline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from waiting import wait_for

import samsa

pytestmark = pytest.mark.timeout(60)

DEADLINE = 15.0
COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"
FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}

TP = tuple[str, int]
Read = dict[TP, list[tuple[int, bytes]]]


# --- helpers ------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create each topic with its number of partitions and wait until it exists."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=n, replication_factor=1) for name, n in topics.items()],
        operation_timeout=10, request_timeout=10)
    for future in futures.values():
        future.result(timeout=DEADLINE)


def consumer(bootstrap: str, isolation: str, **extra: Any) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": unique("reader"),
            "isolation.level": isolation, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "enable.partition.eof": True,
            "fetch.wait.max.ms": 50, **extra}
    return Consumer(conf)


class Deliveries(list):
    """The delivery-report callback: (error, topic, partition, offset) per message."""

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.append((err, msg.topic(), msg.partition(), msg.offset()))

    @property
    def errors(self) -> list[KafkaError]:
        return [err for err, *_ in self if err is not None]


def txn_producer(bootstrap: str, txn_id: str, init: bool = True, **extra: Any) -> Producer:
    """A transactional producer, initialised (InitProducerId) unless ``init`` is False."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, **extra})
    if init:
        producer.init_transactions(DEADLINE)
    return producer


def produce_txn(producer: Producer, records: Iterable[tuple[str, int, bytes]],
                end: str | None) -> Deliveries:
    """Begin a transaction, produce ``records`` (topic, partition, value), flush (every record
    is in the log) and then commit, abort or (``end`` None) leave the transaction open."""
    deliveries = Deliveries()
    producer.begin_transaction()
    for topic, partition, value in records:
        producer.produce(topic, value=value, partition=partition, on_delivery=deliveries)
        producer.poll(0)
    assert producer.flush(DEADLINE) == 0, "records still in flight after the flush deadline"
    assert not deliveries.errors, deliveries.errors
    if end == "commit":
        producer.commit_transaction(DEADLINE)
    elif end == "abort":
        producer.abort_transaction(DEADLINE)
    else:
        assert end is None, end
    return deliveries


def values(prefix: str, topics: dict[str, int], count: int) -> list[tuple[str, int, bytes]]:
    """``count`` records for every partition of ``topics``, values ``prefix/topic/p/i``."""
    return [(t, p, f"{prefix}/{t}/{p}/{i}".encode())
            for i in range(count) for t, n in topics.items() for p in range(n)]


def by_partition(records: Iterable[tuple[str, int, bytes]]) -> dict[TP, list[bytes]]:
    out: dict[TP, list[bytes]] = {}
    for topic, partition, value in records:
        out.setdefault((topic, partition), []).append(value)
    return out


def watermarks(bootstrap: str, isolation: str, topic: str, partition: int = 0
               ) -> tuple[int, int]:
    """(low, high) from ListOffsets as a consumer with ``isolation`` asks for it: the high
    watermark for read_uncommitted, the last stable offset for read_committed."""
    with consumer(bootstrap, isolation) as c:
        result = c.get_watermark_offsets(TopicPartition(topic, partition), DEADLINE,
                                         cached=False)
    assert result is not None, "ListOffsets timed out"
    return result


def admin_latest(bootstrap: str, isolation: IsolationLevel, topic: str, partition: int = 0
                 ) -> int:
    """The latest offset from the AdminClient's ListOffsets with ``isolation``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, partition)
    futures = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation,
                                 request_timeout=10)
    return futures[tp].result(timeout=DEADLINE).offset


def drain(bootstrap: str, isolation: str, ends: dict[TP, int], settle: float = 0.3,
          timeout: float = DEADLINE) -> Read:
    """Read every partition of ``ends`` from the beginning with ``isolation`` until its
    end-of-partition event is at or past its end offset, then ``settle`` seconds more (to
    catch anything delivered late); (offset, value) per partition. Fails on consumer errors."""
    got: Read = {tp: [] for tp in ends}
    at_end: set[TP] = set()
    eofs: dict[TP, int] = {}
    with consumer(bootstrap, isolation) as c:
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in ends])
        deadline = time.monotonic() + timeout
        settle_until: float | None = None
        while True:
            now = time.monotonic()
            if settle_until is None and at_end == set(ends):
                settle_until = now + settle
            if settle_until is not None and now > settle_until:
                break
            assert now < deadline, (
                f"{isolation} consumer did not reach {ends} in {timeout} s: last EOFs {eofs}, "
                f"got {got}")
            msg = c.poll(0.05)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                eofs[tp] = msg.offset()
                if msg.offset() >= ends[tp]:
                    at_end.add(tp)
                continue
            assert tp in got, tp
            got[tp].append((msg.offset(), msg.value()))
    return got


def drain_values(bootstrap: str, isolation: str, ends: dict[TP, int], **kw: Any
                 ) -> dict[TP, list[bytes]]:
    return {tp: [v for _, v in recs] for tp, recs in drain(bootstrap, isolation, ends,
                                                           **kw).items()}


def high_watermarks(bootstrap: str, tps: Iterable[TP]) -> dict[TP, int]:
    return {(t, p): watermarks(bootstrap, UNCOMMITTED, t, p)[1] for t, p in tps}


@pytest.fixture
def bootstrap(samsa_broker: samsa.Broker) -> str:
    return samsa_broker.bootstrap_servers


# --- 1. commit and abort across partitions and topics -------------------------------------------


def test_commit_abort_commit_across_partitions_and_topics(bootstrap: str) -> None:
    """Three transactions over 3 + 1 partitions of two topics (commit, abort, commit): a
    read_committed consumer gets exactly the committed records in order per partition, a
    read_uncommitted one gets all of them; neither ever gets a control record (one commit or
    abort marker per partition per transaction, at the offset after the transaction's data)."""
    topics = {unique("txn-a"): 3, unique("txn-b"): 1}
    create_topics(bootstrap, topics)
    producer = txn_producer(bootstrap, unique("tid"))
    txns = [values(f"t{i}", topics, 5) for i in range(3)]
    produce_txn(producer, txns[0], "commit")
    produce_txn(producer, txns[1], "abort")
    produce_txn(producer, txns[2], "commit")

    tps = [(t, p) for t, n in topics.items() for p in range(n)]
    ends = high_watermarks(bootstrap, tps)
    assert ends == dict.fromkeys(tps, 18), "3 x (5 records + 1 marker) per partition"
    for tp in tps:
        assert watermarks(bootstrap, COMMITTED, *tp)[1] == 18, f"LSO of {tp} after all txns"

    t0, t1, t2 = (by_partition(txn) for txn in txns)
    committed = drain(bootstrap, COMMITTED, ends)
    uncommitted = drain(bootstrap, UNCOMMITTED, ends)
    for tp in tps:
        assert [v for _, v in committed[tp]] == t0[tp] + t2[tp], tp
        assert [o for o, _ in committed[tp]] == [*range(0, 5), *range(12, 17)], tp
        assert [v for _, v in uncommitted[tp]] == t0[tp] + t1[tp] + t2[tp], tp
        assert [o for o, _ in uncommitted[tp]] == [*range(0, 5), *range(6, 11),
                                                    *range(12, 17)], tp


# --- 2. read_committed stops at the last stable offset ------------------------------------------


def test_read_committed_stops_at_last_stable_offset(bootstrap: str) -> None:
    """While a transaction is open (records flushed, not committed), ListOffsets with
    read_committed returns the LSO (the open transaction's first offset) and read_uncommitted
    the high watermark; a read_committed consumer gets nothing of the open transaction until
    it commits, then gets it (the same consumer, still polling)."""
    topic = unique("lso")
    create_topics(bootstrap, {topic: 1})
    tp = (topic, 0)
    producer = txn_producer(bootstrap, unique("tid"))
    first = produce_txn(producer, [(topic, 0, b"first-%d" % i) for i in range(3)], "commit")
    assert [o for *_, o in first] == [0, 1, 2]
    open_values = [b"open-%d" % i for i in range(4)]
    produce_txn(producer, [(topic, 0, v) for v in open_values], None)  # offsets 4..7

    assert watermarks(bootstrap, UNCOMMITTED, topic) == (0, 8)
    assert watermarks(bootstrap, COMMITTED, topic) == (0, 4)
    assert admin_latest(bootstrap, IsolationLevel.READ_UNCOMMITTED, topic) == 8
    assert admin_latest(bootstrap, IsolationLevel.READ_COMMITTED, topic) == 4

    with consumer(bootstrap, COMMITTED) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = poll_until_eof(c, 4)
        assert got == [(0, b"first-0"), (1, b"first-1"), (2, b"first-2")]
        assert poll_for(c, 0.5) == [], "read_committed got records of an open transaction"
        producer.commit_transaction(DEADLINE)
        got = poll_until_eof(c, 9)
        assert got == [(4 + i, v) for i, v in enumerate(open_values)]

    assert watermarks(bootstrap, COMMITTED, topic) == (0, 9)
    assert drain_values(bootstrap, UNCOMMITTED, {tp: 9})[tp] == [
        b"first-0", b"first-1", b"first-2", *open_values]


def poll_until_eof(c: Consumer, end: int, timeout: float = DEADLINE) -> list[tuple[int, bytes]]:
    """Poll one assigned partition until an end-of-partition event at offset >= ``end``;
    the (offset, value) of the records received on the way."""
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = c.poll(0.05)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            if msg.offset() >= end:
                return got
            continue
        got.append((msg.offset(), msg.value()))
    raise AssertionError(f"no end of partition at {end} in {timeout} s; got {got}")


def poll_for(c: Consumer, seconds: float) -> list[tuple[int, bytes]]:
    """Whatever records arrive within ``seconds`` (end-of-partition events are skipped)."""
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        msg = c.poll(0.05)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            continue
        got.append((msg.offset(), msg.value()))
    return got


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_open_transaction_blocks_later_plain_records(bootstrap: str, end: str) -> None:
    """A non-transactional producer writes to the partition while a transaction is open: a
    read_committed consumer sees none of those records either (the LSO blocks them) until the
    transaction ends, then everything visible in offset order (the transaction's records only
    if it committed)."""
    topic = unique("interleave")
    create_topics(bootstrap, {topic: 1})
    tp = (topic, 0)
    producer = txn_producer(bootstrap, unique("tid"))
    txn_values = [b"txn-%d" % i for i in range(3)]
    produce_txn(producer, [(topic, 0, v) for v in txn_values], None)  # offsets 0..2

    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    plain_values = [b"plain-%d" % i for i in range(3)]
    deliveries = Deliveries()
    for v in plain_values:
        plain.produce(topic, value=v, partition=0, on_delivery=deliveries)
    assert plain.flush(DEADLINE) == 0
    assert not deliveries.errors and [o for *_, o in deliveries] == [3, 4, 5]

    assert watermarks(bootstrap, UNCOMMITTED, topic) == (0, 6)
    assert watermarks(bootstrap, COMMITTED, topic) == (0, 0)
    with consumer(bootstrap, COMMITTED) as c:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert poll_until_eof(c, 0) == []
        assert poll_for(c, 0.5) == [], "read_committed read past the LSO"
        if end == "commit":
            producer.commit_transaction(DEADLINE)
        else:
            producer.abort_transaction(DEADLINE)
        got = poll_until_eof(c, 7)  # the marker is at offset 6
    expected = list(enumerate(txn_values)) if end == "commit" else []
    expected += [(3 + i, v) for i, v in enumerate(plain_values)]
    assert got == expected
    assert drain_values(bootstrap, UNCOMMITTED, {tp: 7})[tp] == txn_values + plain_values


# --- 3. fencing ---------------------------------------------------------------------------------


def test_second_producer_with_same_id_fences_the_first(bootstrap: str) -> None:
    """init_transactions by a second producer with the same transactional.id aborts the first
    producer's open transaction and fences it: its next produce/commit fails fatally
    (fenced); read_committed never sees its records; the second producer commits."""
    topic = unique("fence")
    create_topics(bootstrap, {topic: 1})
    tp = (topic, 0)
    txn_id = unique("tid")
    first = txn_producer(bootstrap, txn_id)
    produce_txn(first, [(topic, 0, b"zombie-%d" % i) for i in range(3)], None)  # offsets 0..2

    second = txn_producer(bootstrap, txn_id)
    # The open transaction was aborted (marker at offset 3) before init_transactions returned.
    assert watermarks(bootstrap, COMMITTED, topic) == (0, 4)

    # The fenced Produce raises from flush (librdkafka's fatal error), else commit raises.
    with pytest.raises(KafkaException) as info:
        first.produce(topic, value=b"zombie-late", partition=0)
        first.flush(DEADLINE)
        first.commit_transaction(DEADLINE)
    error = info.value.args[0]
    assert error.fatal() or error.code() in FENCED_CODES, error

    produce_txn(second, [(topic, 0, b"second-%d" % i) for i in range(3)], "commit")
    ends = high_watermarks(bootstrap, [tp])
    assert ends[tp] == 8, "3 aborted + marker + 3 committed + marker"
    assert drain_values(bootstrap, COMMITTED, ends)[tp] == [b"second-%d" % i for i in range(3)]
    # zombie-late (old epoch) was refused: it is not in the log at all.
    assert drain_values(bootstrap, UNCOMMITTED, ends)[tp] == (
        [b"zombie-%d" % i for i in range(3)] + [b"second-%d" % i for i in range(3)])


# --- 4. timeouts --------------------------------------------------------------------------------


def test_broker_aborts_timed_out_transaction(tmp_path: Path) -> None:
    """A transaction open longer than its transaction.timeout.ms (1 s) is aborted by the
    broker: the LSO moves past it, read_committed sees none of it, read_uncommitted all; the
    producer's later commit_transaction fails."""
    with samsa.Broker(tmp_path / "data",
                      transaction_abort_timed_out_transaction_cleanup_interval_ms=200) as broker:
        bootstrap = broker.bootstrap_servers
        topic = unique("timeout")
        create_topics(bootstrap, {topic: 1})
        tp = (topic, 0)
        producer = txn_producer(bootstrap, unique("tid"), **{"transaction.timeout.ms": 1000})
        values_ = [b"slow-%d" % i for i in range(3)]
        started = time.monotonic()
        produce_txn(producer, [(topic, 0, v) for v in values_], None)
        assert watermarks(bootstrap, COMMITTED, topic) == (0, 0)
        wait_for(lambda: watermarks(bootstrap, COMMITTED, topic)[1] == 4, 10,
                 "the broker to abort the timed-out transaction (LSO 4)", interval=0.1)
        assert time.monotonic() - started > 0.9, "aborted before its timeout"
        time.sleep(max(0.0, started + 3.0 - time.monotonic()))

        ends = high_watermarks(bootstrap, [tp])
        assert ends[tp] == 4
        assert drain_values(bootstrap, COMMITTED, ends)[tp] == []
        assert drain_values(bootstrap, UNCOMMITTED, ends)[tp] == values_
        with pytest.raises(KafkaException):
            producer.commit_transaction(DEADLINE)
        assert high_watermarks(bootstrap, [tp])[tp] == 4, "a failed commit wrote a marker"


def test_transaction_timeout_above_broker_maximum_is_refused(tmp_path: Path) -> None:
    """transaction.timeout.ms (10 s) above the broker's transaction.max.timeout.ms (5 s):
    init_transactions fails with INVALID_TRANSACTION_TIMEOUT; at the maximum it succeeds."""
    with samsa.Broker(tmp_path / "data", transaction_max_timeout_ms=5000) as broker:
        bootstrap = broker.bootstrap_servers
        producer = txn_producer(bootstrap, unique("tid"), init=False,
                                **{"transaction.timeout.ms": 10000})
        with pytest.raises(KafkaException) as info:
            producer.init_transactions(DEADLINE)
        assert info.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, (
            info.value.args[0])
        txn_producer(bootstrap, unique("tid"), **{"transaction.timeout.ms": 5000})


# --- 5. offsets in a transaction ----------------------------------------------------------------


def committed_offsets(bootstrap: str, group: str, tps: list[TopicPartition]
                      ) -> dict[TP, int]:
    """The group's committed offsets (OFFSET_INVALID where none) from the AdminClient."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(t.topic, t.partition)
                                              for t in tps])],
        require_stable=True, request_timeout=10)
    result = futures[group].result(timeout=DEADLINE)
    out = {}
    for t in result.topic_partitions:
        assert t.error is None, t.error
        out[(t.topic, t.partition)] = t.offset
    return out


def test_send_offsets_to_transaction_commit_and_abort(bootstrap: str) -> None:
    """A consume-transform-produce loop (KIP-447, group metadata from a subscribed member):
    offsets sent in an aborted transaction are never committed (nor its output visible);
    sent in a committed transaction they become the group's committed offsets."""
    source, sink, group = unique("input"), unique("output"), unique("group")
    create_topics(bootstrap, {source: 2, sink: 1})
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(10):
        plain.produce(source, value=b"in-%d" % i, partition=i % 2)
    assert plain.flush(DEADLINE) == 0
    tps = [TopicPartition(source, p) for p in range(2)]

    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False, "isolation.level": COMMITTED,
                       "auto.offset.reset": "earliest", "enable.partition.eof": True,
                       "fetch.wait.max.ms": 50})
    with member:
        member.subscribe([source])
        inputs: list[bytes] = []
        deadline = time.monotonic() + DEADLINE
        while len(inputs) < 10:
            assert time.monotonic() < deadline, f"member consumed only {inputs}"
            msg = member.poll(0.1)
            if msg is not None and not msg.error():
                inputs.append(msg.value())
        positions = member.position(member.assignment())
        assert sorted((t.partition, t.offset) for t in positions) == [(0, 5), (1, 5)]

        producer = txn_producer(bootstrap, unique("tid"))
        metadata = member.consumer_group_metadata()
        unset = {(source, 0): OFFSET_INVALID, (source, 1): OFFSET_INVALID}
        produce_txn(producer, [(sink, 0, b"out-0-" + v) for v in inputs], None)
        producer.send_offsets_to_transaction(positions, metadata, DEADLINE)
        producer.abort_transaction(DEADLINE)
        time.sleep(0.3)
        assert committed_offsets(bootstrap, group, tps) == unset
        assert all(t.offset == OFFSET_INVALID for t in member.committed(tps, DEADLINE))

        produce_txn(producer, [(sink, 0, b"out-1-" + v) for v in inputs], None)
        producer.send_offsets_to_transaction(positions, metadata, DEADLINE)
        producer.commit_transaction(DEADLINE)
        wanted = {(source, 0): 5, (source, 1): 5}
        wait_for(lambda: committed_offsets(bootstrap, group, tps) == wanted, 10,
                 f"committed offsets {wanted}",
                 details=lambda: str(committed_offsets(bootstrap, group, tps)))
        assert sorted((t.partition, t.offset)
                      for t in member.committed(tps, DEADLINE)) == [(0, 5), (1, 5)]

    ends = high_watermarks(bootstrap, [(sink, 0)])
    assert ends[(sink, 0)] == 22, "2 x (10 records + 1 marker)"
    assert drain_values(bootstrap, COMMITTED, ends)[(sink, 0)] == [b"out-1-" + v
                                                                   for v in inputs]


# --- 6. durability across a restart -------------------------------------------------------------


def init_with_retry(producer: Producer, timeout: float = DEADLINE) -> None:
    """init_transactions, retried while librdkafka calls the error retriable (the coordinator
    may still be loading its state or aborting a transaction)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            producer.init_transactions(5)
            return
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise


def test_transactions_survive_broker_restart(tmp_path: Path) -> None:
    """Commit one transaction, abort one, leave one open; restart the broker on the same data:
    read_committed sees exactly the committed records, the open transaction still holds the
    LSO until its timeout (5 s) and is then aborted by the broker; a new producer with the
    same transactional.id initialises and commits."""
    data = tmp_path / "data"
    timeout_s = 5.0  # the open transaction's transaction.timeout.ms, in s
    config = {"transaction_abort_timed_out_transaction_cleanup_interval_ms": 200}
    topic, txn_id = unique("restart"), unique("tid")
    tp = (topic, 0)
    committed = [b"committed-%d" % i for i in range(3)]
    aborted = [b"aborted-%d" % i for i in range(3)]
    pending = [b"pending-%d" % i for i in range(3)]
    with samsa.Broker(data, **config) as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, {topic: 1})
        producer = txn_producer(bootstrap, txn_id,
                                **{"transaction.timeout.ms": int(timeout_s * 1000)})
        produce_txn(producer, [(topic, 0, v) for v in committed], "commit")  # 0..2, marker 3
        produce_txn(producer, [(topic, 0, v) for v in aborted], "abort")  # 4..6, marker 7
        opened = time.monotonic()
        produce_txn(producer, [(topic, 0, v) for v in pending], None)  # 8..10
        assert watermarks(bootstrap, COMMITTED, topic) == (0, 8)

    with samsa.Broker(data, **config) as broker:
        bootstrap = broker.bootstrap_servers
        assert watermarks(bootstrap, UNCOMMITTED, topic) == (0, 11)
        lso = watermarks(bootstrap, COMMITTED, topic)
        held = drain_values(bootstrap, COMMITTED, {tp: 8}, settle=0.1)[tp]
        assert time.monotonic() - opened < timeout_s, (
            "the restart took longer than the open transaction's timeout: nothing to check")
        assert lso == (0, 8), "the open transaction no longer holds the LSO after the restart"
        assert held == committed

        wait_for(lambda: watermarks(bootstrap, COMMITTED, topic)[1] == 12, 12,
                 "the broker to abort the open transaction after its timeout", interval=0.1)
        assert time.monotonic() - opened > timeout_s - 0.1, "aborted before its timeout"
        assert drain_values(bootstrap, COMMITTED, {tp: 12})[tp] == committed
        assert drain_values(bootstrap, UNCOMMITTED, {tp: 12})[tp] == (
            committed + aborted + pending)

        again = txn_producer(bootstrap, txn_id, init=False)
        init_with_retry(again)
        final = [b"final-%d" % i for i in range(3)]
        produce_txn(again, [(topic, 0, v) for v in final], "commit")  # 12..14, marker 15
        assert high_watermarks(bootstrap, [tp])[tp] == 16
        assert drain_values(bootstrap, COMMITTED, {tp: 16})[tp] == committed + final


# --- 7. many transactions -----------------------------------------------------------------------


def test_many_small_transactions(bootstrap: str) -> None:
    """50 transactions of 10 records over 2 partitions, alternately committed and aborted:
    read_committed gets exactly the committed 250, in order; read_uncommitted all 500."""
    topic = unique("many")
    create_topics(bootstrap, {topic: 2})
    producer = txn_producer(bootstrap, unique("tid"))
    expected: dict[TP, list[bytes]] = {(topic, 0): [], (topic, 1): []}
    everything: dict[TP, list[bytes]] = {(topic, 0): [], (topic, 1): []}
    for n in range(50):
        records = [(topic, i % 2, b"%d-%d" % (n, i)) for i in range(10)]
        end = "commit" if n % 2 == 0 else "abort"
        produce_txn(producer, records, end)
        for t, p, v in records:
            everything[(t, p)].append(v)
            if end == "commit":
                expected[(t, p)].append(v)
    ends = high_watermarks(bootstrap, expected)
    assert ends == {(topic, 0): 300, (topic, 1): 300}, "50 x (5 records + 1 marker)"
    assert drain_values(bootstrap, COMMITTED, ends) == expected
    assert drain_values(bootstrap, UNCOMMITTED, ends) == everything
