"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10, pinned in
``connector/pom.xml``) against samsa, beside samsa's ``format("samsa")``: real PySpark, a real
broker.

What one source writes the other reads; the two readers give the same rows (topic, partition,
offset, timestamp, key, value, headers); Spark's connector streams from samsa (checkpointed
offsets, records arriving between triggers) and into it (``writeStream``), and reads only
committed records with ``kafka.isolation.level=read_committed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PARTITIONS = 3
TIMEOUT = 30.0
QUERY_TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("spark-kafka-connector") / "data"
    with samsa.Broker(data, num_partitions=PARTITIONS) as b:
        yield b


_topics = 0


@pytest.fixture
def topic(broker: samsa.Broker) -> str:
    global _topics
    _topics += 1
    name = f"connector-{_topics}"
    create_topics(broker, name)
    return name


def create_topics(broker: samsa.Broker, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(n, PARTITIONS) for n in names]).values():
        future.result(timeout=TIMEOUT)


def read(spark: SparkSession, fmt: str, broker: samsa.Broker, topic: str,
         **options: str) -> list[tuple[Any, ...]]:
    """Every record of ``topic`` through format ``fmt``, as sorted plain tuples."""
    reader = (spark.read.format(fmt)
              .option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("includeHeaders", "true"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(plain(r) for r in reader.load().collect())


def plain(row: Any) -> tuple[Any, ...]:
    def b(x: Any) -> bytes | None:
        return None if x is None else bytes(x)

    headers = tuple((h.key, b(h.value)) for h in row.headers or ())
    return (row.topic, row.partition, row.offset, row.timestamp, row.timestampType,
            b(row.key), b(row.value), headers)


def written(df: DataFrame, fmt: str, broker: samsa.Broker, topic: str) -> None:
    (df.write.format(fmt).mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).save())


def rows(n: int, tag: str) -> list[tuple[str, str, int, list[tuple[str, bytes]]]]:
    return [(f"k{i}", f"{tag}-{i}", i % PARTITIONS, [("n", str(i).encode())]) for i in range(n)]


SCHEMA = "key string, value string, partition int, headers array<struct<key string, value binary>>"


def test_spark_kafka_writes_what_samsa_reads(spark: SparkSession, broker: samsa.Broker,
                                             topic: str) -> None:
    written(spark.createDataFrame(rows(30, "spark"), SCHEMA), "kafka", broker, topic)
    by_samsa = read(spark, "samsa", broker, topic)
    by_kafka = read(spark, "kafka", broker, topic)
    assert by_samsa == by_kafka
    assert len(by_samsa) == 30
    got = {(r[5], r[6], r[1], r[7]) for r in by_samsa}
    assert got == {(f"k{i}".encode(), f"spark-{i}".encode(), i % PARTITIONS,
                    (("n", str(i).encode()),)) for i in range(30)}
    offsets = sorted((r[1], r[2]) for r in by_samsa)
    assert offsets == sorted((p, o) for p in range(PARTITIONS) for o in range(10))


def test_samsa_writes_what_spark_kafka_reads(spark: SparkSession, broker: samsa.Broker,
                                             topic: str) -> None:
    written(spark.createDataFrame(rows(12, "samsa"), SCHEMA), "samsa", broker, topic)
    by_kafka = read(spark, "kafka", broker, topic)
    assert by_kafka == read(spark, "samsa", broker, topic)
    assert sorted((r[1], r[5], r[6]) for r in by_kafka) == sorted(
        (i % PARTITIONS, f"k{i}".encode(), f"samsa-{i}".encode()) for i in range(12))


def test_offsets_and_assign_options_agree(spark: SparkSession, broker: samsa.Broker,
                                          topic: str) -> None:
    written(spark.createDataFrame(rows(30, "o"), SCHEMA), "kafka", broker, topic)
    options = {"startingOffsets": f'{{"{topic}":{{"0":2,"1":-2,"2":9}}}}',
               "endingOffsets": f'{{"{topic}":{{"0":5,"1":3,"2":-1}}}}'}
    by_kafka = read(spark, "kafka", broker, topic, **options)
    assert by_kafka == read(spark, "samsa", broker, topic, **options)
    assert sorted((r[1], r[2]) for r in by_kafka) == [(0, 2), (0, 3), (0, 4), (1, 0), (1, 1),
                                                     (1, 2), (2, 9)]


def test_spark_kafka_streams_from_samsa_and_into_it(spark: SparkSession, broker: samsa.Broker,
                                                    tmp_path: Path) -> None:
    source, sink = "stream-in", "stream-out"
    create_topics(broker, source, sink)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             partition=i % PARTITIONS)
        assert producer.flush(TIMEOUT) == 0

    produce(0, 20)
    query = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "7").load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("kafka")
             .option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        produce(20, 10)  # arrives between triggers
        query.processAllAvailable()
        assert query.exception() is None
        progress = query.recentProgress
    finally:
        query.stop()
    assert sum(p["numInputRows"] for p in progress) == 30
    assert max(p["numInputRows"] for p in progress) <= 7  # maxOffsetsPerTrigger held
    out = read(spark, "samsa", broker, sink)
    assert sorted((r[5], r[6]) for r in out) == sorted(
        (f"k{i}".encode(), f"V{i}".encode()) for i in range(30))


def test_spark_kafka_reads_only_committed_records(spark: SparkSession, broker: samsa.Broker,
                                                  topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": f"spark-{topic}"})
    producer.init_transactions(TIMEOUT)
    for commit in (True, False, True):
        producer.begin_transaction()
        producer.produce(topic, value=b"committed" if commit else b"aborted", partition=0)
        assert producer.flush(TIMEOUT) == 0  # written before the abort (which drops unsent)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
    committed = read(spark, "kafka", broker, topic, **{"kafka.isolation.level": "read_committed"})
    assert [r[6] for r in committed] == [b"committed", b"committed"]
    assert committed == read(spark, "samsa", broker, topic,
                             **{"kafka.isolation.level": "read_committed"})
    everything = read(spark, "kafka", broker, topic)
    assert sorted(r[6] for r in everything) == [b"aborted", b"committed", b"committed"]
