"""The samsa Spark source with ``kafka.isolation.level=read_committed``: real PySpark (local
mode), a real broker, transactions written by confluent-kafka's transactional producer.

A topic of 2 partitions holds plain records, committed and aborted transactions (two of them
interleaved in the log), transactions on one partition only, and at the end a transaction left
open (plus a plain record after its start). read_committed must return exactly the committed and
plain records below the last stable offset (LSO), with their offsets, and terminate although the
last offsets before the LSO are control markers or aborted records; read_uncommitted returns
every record. A streaming query (available-now) with read_committed sees the open transaction's
records only once it is committed, exactly once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.timeout(300)

TIMEOUT = 15.0  # admin calls, flushes, transaction calls
QUERY_TIMEOUT = 60.0  # one available-now run
#: A task that waits for an offset that never comes fails after this long (failOnDataLoss=true)
#: instead of the default 60 s: a correct source finishes well within it.
POLL_TIMEOUT_MS = "20000"
#: the open transaction must outlive the module (the broker aborts timed-out transactions)
TXN_TIMEOUT_MS = 600_000
COMMITTED = "read_committed"

Row = tuple[int, int, bytes]  # (partition, offset, value)


# --- writing ------------------------------------------------------------------------------------


@dataclass
class Written:
    """What was written to a topic, by kind, as (partition, offset, value) from the delivery
    reports."""

    plain: list[Row] = field(default_factory=list)
    committed: list[Row] = field(default_factory=list)
    aborted: list[Row] = field(default_factory=list)
    open: list[Row] = field(default_factory=list)  # the transaction still open
    after_open: list[Row] = field(default_factory=list)  # plain, after the open txn's start

    def visible_committed(self) -> list[Row]:
        return sorted(self.plain + self.committed)

    def everything(self) -> list[Row]:
        return sorted(self.plain + self.committed + self.aborted + self.open + self.after_open)


class Deliveries:
    """Delivery-report callback collecting (partition, offset, value); errors fail the test."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.errors: list[KafkaError] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            value = msg.value()
            assert value is not None
            self.rows.append((msg.partition(), msg.offset(), value))


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor=1)])
    for future in futures.values():
        future.result(timeout=TIMEOUT)


def txn_producer(bootstrap: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"spark-rc-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(TIMEOUT)
    return producer


def send(producer: Producer, topic: str, records: Iterable[tuple[int, str]]) -> list[Row]:
    """Produce (partition, value) records and flush: they are in the log when this returns."""
    deliveries = Deliveries()
    for partition, value in records:
        producer.produce(topic, value=value.encode(), partition=partition,
                         on_delivery=deliveries)
    assert producer.flush(TIMEOUT) == 0, "records still in flight after the flush deadline"
    assert not deliveries.errors, deliveries.errors
    return deliveries.rows


def fill_topic(bootstrap: str, topic: str) -> tuple[Written, Producer]:
    """Write the layout the module docstring describes; returns what was written and the
    producer whose transaction is left open (the caller commits it or leaves it)."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    t1, t2, t3, t_open = (txn_producer(bootstrap) for _ in range(4))
    w = Written()
    both = (0, 1)

    w.plain += send(plain, topic, [(p, f"plain-a/{p}/{i}") for i in range(2) for p in both])

    t1.begin_transaction()
    w.committed += send(t1, topic, [(p, f"c1/{p}/{i}") for i in range(2) for p in both])
    t1.commit_transaction(TIMEOUT)

    t1.begin_transaction()
    w.aborted += send(t1, topic, [(p, f"a1/{p}/{i}") for i in range(3) for p in both])
    t1.abort_transaction(TIMEOUT)

    # two transactions interleaved record by record: one aborts, one commits, with a plain
    # record between their markers
    t2.begin_transaction()
    t3.begin_transaction()
    for i in range(3):
        w.committed += send(t2, topic, [(p, f"c2/{p}/{i}") for p in both])
        w.aborted += send(t3, topic, [(p, f"a3/{p}/{i}") for p in both])
    t3.abort_transaction(TIMEOUT)
    w.plain += send(plain, topic, [(p, f"plain-b/{p}") for p in both])
    t2.commit_transaction(TIMEOUT)

    # one partition each: p0 ends in a commit marker, p1 in an aborted record and its marker
    t1.begin_transaction()
    w.committed += send(t1, topic, [(0, f"c4/0/{i}") for i in range(2)])
    t1.commit_transaction(TIMEOUT)
    t1.begin_transaction()
    w.aborted += send(t1, topic, [(1, "a5/1/0")])
    t1.abort_transaction(TIMEOUT)

    # left open: the LSO of both partitions stays at its first offset
    t_open.begin_transaction()
    w.open += send(t_open, topic, [(p, f"open/{p}/{i}") for i in range(2) for p in both])
    w.after_open += send(plain, topic, [(0, "plain-after-open/0")])

    for producer in (t1, t2, t3):
        producer.flush(TIMEOUT)
    return w, t_open


# --- reading ------------------------------------------------------------------------------------


def rows_of(df: DataFrame) -> list[Row]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def batch_reader(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def first_offsets(rows: Iterable[Row]) -> dict[int, int]:
    out: dict[int, int] = {}
    for partition, offset, _ in rows:
        out[partition] = min(offset, out.get(partition, offset))
    return out


def end_offsets(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """ListOffsets latest per partition with ``isolation`` (the LSO for read_committed)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"q-{uuid.uuid4()}",
                         "isolation.level": isolation})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT,
                                              cached=False)[1]
            for p in (0, 1)
        }
    finally:
        consumer.close()


# --- fixtures -----------------------------------------------------------------------------------


@dataclass
class Filled:
    bootstrap: str
    topic: str
    written: Written


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("spark-rc-broker") / "data"
    with samsa.Broker(data) as b:
        yield b


@pytest.fixture(scope="module")
def filled(broker: samsa.Broker) -> Iterator[Filled]:
    """The batch tests' topic; its last transaction stays open for the whole module."""
    topic = "rc-batch"
    create_topic(broker.bootstrap_servers, topic, 2)
    written, open_producer = fill_topic(broker.bootstrap_servers, topic)
    yield Filled(broker.bootstrap_servers, topic, written)
    open_producer.abort_transaction(TIMEOUT)


# --- batch reads --------------------------------------------------------------------------------


def test_layout_as_intended(filled: Filled) -> None:
    """The topic is what the other tests assume: the LSO of each partition is the open
    transaction's first offset, and the offset before it is not a data record (a marker)."""
    w = filled.written
    lso = end_offsets(filled.bootstrap, filled.topic, COMMITTED)
    assert lso == first_offsets(w.open)
    data = {(p, o) for p, o, _ in w.everything()}
    for p in (0, 1):
        assert (p, lso[p] - 1) not in data  # the abort / commit marker just before the LSO
    high = end_offsets(filled.bootstrap, filled.topic, "read_uncommitted")
    assert high == {p: max(o for q, o, _ in w.everything() if q == p) + 1 for p in (0, 1)}


def test_read_committed_batch_returns_exactly_the_committed_and_plain_records(
    spark: SparkSession, filled: Filled
) -> None:
    """read_committed: committed and plain records below the LSO, with their offsets; nothing
    aborted, nothing of the open transaction or after it; the query terminates although each
    range ends on a control marker."""
    df = batch_reader(spark, filled.bootstrap, filled.topic,
                      **{"kafka.isolation.level": COMMITTED}).load()
    # a task waiting for an offset that never comes fails after POLL_TIMEOUT_MS
    assert rows_of(df) == filled.written.visible_committed()


def test_read_uncommitted_is_the_default_and_returns_everything(
    spark: SparkSession, filled: Filled
) -> None:
    """With read_uncommitted spelled out, and without the option (Spark's Kafka source reads
    uncommitted by default, as the Java consumer; librdkafka's own default is read_committed),
    every record is returned: aborted ones, the open transaction's and the plain record after
    it too."""
    explicit = rows_of(batch_reader(spark, filled.bootstrap, filled.topic,
                                    **{"kafka.isolation.level": "read_uncommitted"}).load())
    assert explicit == filled.written.everything()
    default = rows_of(batch_reader(spark, filled.bootstrap, filled.topic).load())
    assert default == filled.written.everything(), "the default isolation is not uncommitted"


def test_read_committed_with_ranges_ending_anywhere(spark: SparkSession, filled: Filled) -> None:
    """Split into many small ranges (minPartitions), ranges end on aborted records and markers
    and some hold no committed record at all: still exactly the committed records, and no task
    waits for an offset that never comes."""
    df = batch_reader(spark, filled.bootstrap, filled.topic, minPartitions="16",
                      **{"kafka.isolation.level": COMMITTED}).load()
    assert df.rdd.getNumPartitions() >= 16
    assert rows_of(df) == filled.written.visible_committed()


def test_read_committed_offsets_inside_transactions(spark: SparkSession, filled: Filled) -> None:
    """startingOffsets and endingOffsets inside transactions: p0 from the middle of an aborted
    transaction to just after its last record, p1 from the middle of the interleaved committed
    / aborted transactions to the middle of them: the committed records in each range, no
    others."""
    w = filled.written

    def offsets(partition: int, prefix: bytes, rows: list[Row]) -> list[int]:
        return sorted(o for p, o, v in rows if p == partition and v.startswith(prefix))

    starts = {0: offsets(0, b"a1/", w.aborted)[1], 1: offsets(1, b"c2/", w.committed)[0] + 1}
    ends = {0: offsets(0, b"a1/", w.aborted)[-1] + 1, 1: offsets(1, b"a3/", w.aborted)[1] + 1}
    df = batch_reader(
        spark, filled.bootstrap, filled.topic,
        startingOffsets=json.dumps({filled.topic: {str(p): o for p, o in starts.items()}}),
        endingOffsets=json.dumps({filled.topic: {str(p): o for p, o in ends.items()}}),
        **{"kafka.isolation.level": COMMITTED},
    ).load()
    want = [r for r in w.visible_committed() if starts[r[0]] <= r[1] < ends[r[0]]]
    assert [r[2] for r in want] == [b"c2/1/1"]  # p0's range holds aborted records only
    assert rows_of(df) == want


# --- streaming ------------------------------------------------------------------------------------


class Collected:
    """foreachBatch target: (batch id, rows) of every non-empty micro-batch."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[Row]]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = rows_of(df)
        if rows:
            self.batches.append((batch_id, rows))

    def rows(self) -> list[Row]:
        return sorted(r for _, rows in self.batches for r in rows)


def run_available_now(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    checkpoint: Path,
    sink: Collected,
    isolation: str | None = COMMITTED,
) -> None:
    """One available-now run of a stream (read_committed unless told otherwise; None: the
    default) into ``sink``; bounded wait."""
    reader = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
    )
    if isolation is not None:
        reader = reader.option("kafka.isolation.level", isolation)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT)
    finally:
        if query.isActive:
            query.stop()
    assert finished, "the available-now query did not finish in time"
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")


def test_stream_sees_an_open_transaction_only_once_committed(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    """read_committed stream: the first run stops at the LSO (the open transaction's start); a
    run while it is still open adds nothing; after the commit the next run adds exactly the
    open transaction's records and the plain record behind it, once."""
    bootstrap, topic = broker.bootstrap_servers, "rc-stream"
    create_topic(bootstrap, topic, 2)
    written, open_producer = fill_topic(bootstrap, topic)
    checkpoint = tmp_path / "ckpt"

    first = Collected()
    run_available_now(spark, bootstrap, topic, checkpoint, first)
    assert first.rows() == written.visible_committed()

    still_open = Collected()
    run_available_now(spark, bootstrap, topic, checkpoint, still_open)
    assert still_open.batches == []

    open_producer.commit_transaction(TIMEOUT)
    after = Collected()
    run_available_now(spark, bootstrap, topic, checkpoint, after)
    assert after.rows() == sorted(written.open + written.after_open)
    assert sorted(first.rows() + after.rows()) == sorted(
        written.visible_committed() + written.open + written.after_open
    )

    nothing_new = Collected()
    run_available_now(spark, bootstrap, topic, checkpoint, nothing_new)
    assert nothing_new.batches == []


def test_stream_after_a_commit_ending_in_a_marker(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    """A micro-batch whose ranges end on commit markers (p1) and on an abort marker (p0, a
    transaction aborted after the committed one): the run ends and returns the committed
    records once."""
    bootstrap, topic = broker.bootstrap_servers, "rc-stream-markers"
    create_topic(bootstrap, topic, 2)
    checkpoint = tmp_path / "ckpt"
    producer = txn_producer(bootstrap)
    producer.begin_transaction()
    committed = send(producer, topic, [(p, f"c/{p}/{i}") for i in range(3) for p in (0, 1)])
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    send(producer, topic, [(0, "aborted/0")])
    producer.abort_transaction(TIMEOUT)

    sink = Collected()
    run_available_now(spark, bootstrap, topic, checkpoint, sink)
    assert sink.rows() == sorted(committed)

    producer.begin_transaction()
    more = send(producer, topic, [(p, f"d/{p}") for p in (0, 1)])
    producer.commit_transaction(TIMEOUT)
    again = Collected()
    run_available_now(spark, bootstrap, topic, checkpoint, again)
    assert again.rows() == sorted(more)


def test_stream_default_reads_uncommitted(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    """Without kafka.isolation.level a stream reads uncommitted, as Spark's Kafka source: the
    aborted records and those of the open transaction too."""
    bootstrap, topic = broker.bootstrap_servers, "rc-stream-default"
    create_topic(bootstrap, topic, 2)
    written, open_producer = fill_topic(bootstrap, topic)
    sink = Collected()
    run_available_now(spark, bootstrap, topic, tmp_path / "ckpt", sink, isolation=None)
    open_producer.abort_transaction(TIMEOUT)
    assert sink.rows() == written.everything()
