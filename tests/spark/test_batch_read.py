"""Batch reads through ``spark.read.format("samsa")``: real PySpark (local mode), a real broker.

One broker for the module: the topics each test reads are created and filled once, and the
tests that change a log (DeleteRecords) use topics of their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import samsa
from samsa.spark import kafka_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BASE_TS = 1_700_000_000_000  # ms
PER_PARTITION = 20
PARTITIONS = 3
TIMEOUT = 15.0


def create_topics(admin: AdminClient, *names: str, partitions: int = PARTITIONS) -> None:
    futures = admin.create_topics([NewTopic(n, partitions) for n in names])
    for future in futures.values():
        future.result(timeout=TIMEOUT)


def produce(bootstrap: str, topic: str, count_per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count_per_partition * PARTITIONS):
        headers: list[tuple[str, bytes | None]] = [("i", str(i).encode()), ("empty", None)]
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"{topic}-v{i}".encode(),
            partition=i % PARTITIONS,
            timestamp=BASE_TS + i * 1000,
            headers=headers if i % 2 == 0 else None,
        )
    assert producer.flush(TIMEOUT) == 0


def expected_rows(topic: str, count_per_partition: int) -> list[tuple[Any, ...]]:
    """(key, value, topic, partition, offset, timestamp ms) of what :func:`produce` wrote."""
    rows = []
    for i in range(count_per_partition * PARTITIONS):
        p = i % PARTITIONS
        rows.append(
            (
                f"k{i}".encode(),
                f"{topic}-v{i}".encode(),
                topic,
                p,
                i // PARTITIONS,
                BASE_TS + i * 1000,
            )
        )
    return sorted(rows, key=lambda r: (r[2], r[3], r[4]))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("spark-broker") / "data"
    with samsa.Broker(data, num_partitions=PARTITIONS) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        create_topics(admin, "events", "events-b", "other")
        produce(b.bootstrap_servers, "events", PER_PARTITION)
        produce(b.bootstrap_servers, "events-b", 2)
        produce(b.bootstrap_servers, "other", 1)
        yield b


def reader(spark: SparkSession, broker: samsa.Broker, **options: str) -> Any:
    r = spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        r = r.option(key, value)
    return r


def rows_of(df: DataFrame) -> list[tuple[Any, ...]]:
    out = []
    for row in df.collect():
        # collect() gives naive local datetimes: .timestamp() reads them as local time
        millis = round(row.timestamp.timestamp() * 1000)
        out.append((bytes(row.key), bytes(row.value), row.topic, row.partition, row.offset, millis))
    return sorted(out, key=lambda r: (r[2], r[3], r[4]))


def test_schema_is_sparks_kafka_schema(spark: SparkSession, broker: samsa.Broker) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    expected = StructType(
        [
            StructField("key", BinaryType(), True),
            StructField("value", BinaryType(), True),
            StructField("topic", StringType(), True),
            StructField("partition", IntegerType(), True),
            StructField("offset", LongType(), True),
            StructField("timestamp", TimestampType(), True),
            StructField("timestampType", IntegerType(), True),
        ]
    )
    with_headers = StructType(
        [
            *expected.fields,
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [
                            StructField("key", StringType(), True),
                            StructField("value", BinaryType(), True),
                        ]
                    ),
                    True,
                ),
                True,
            ),
        ]
    )
    assert reader(spark, broker, subscribe="events").load().schema == expected
    headers_df = reader(spark, broker, subscribe="events", includeHeaders="true").load()
    assert headers_df.schema == with_headers
    assert kafka_schema() == expected and kafka_schema(True) == with_headers


def test_read_all_with_subscribe(spark: SparkSession, broker: samsa.Broker) -> None:
    df = reader(spark, broker, subscribe="events").load()
    assert rows_of(df) == expected_rows("events", PER_PARTITION)
    assert {r.timestampType for r in df.select("timestampType").collect()} == {0}


def test_kafka_group_id_is_used_but_nothing_is_committed(
    spark: SparkSession, broker: samsa.Broker
) -> None:
    """As Spark's connector: kafka.group.id names the consumers, which still assign and seek."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    df = reader(spark, broker, subscribe="events", **{"kafka.group.id": "spark-app"}).load()
    assert rows_of(df) == expected_rows("events", PER_PARTITION)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    request = ConsumerGroupTopicPartitions("spark-app", [TopicPartition("events", 0)])
    listed = admin.list_consumer_group_offsets([request])["spark-app"].result(timeout=10)
    assert [tp.offset for tp in listed.topic_partitions] == [-1001]  # no committed offset


def test_subscribe_several_topics(spark: SparkSession, broker: samsa.Broker) -> None:
    df = reader(spark, broker, subscribe="events-b, other").load()
    assert rows_of(df) == expected_rows("events-b", 2) + expected_rows("other", 1)


def test_assign(spark: SparkSession, broker: samsa.Broker) -> None:
    df = reader(spark, broker, assign=json.dumps({"events": [0, 2]})).load()
    assert rows_of(df) == [r for r in expected_rows("events", PER_PARTITION) if r[3] in (0, 2)]


def test_subscribe_pattern(spark: SparkSession, broker: samsa.Broker) -> None:
    df = reader(spark, broker, subscribePattern="events.*").load()
    assert rows_of(df) == expected_rows("events", PER_PARTITION) + expected_rows("events-b", 2)


def test_starting_and_ending_offsets_json(spark: SparkSession, broker: samsa.Broker) -> None:
    starting = {"events": {"0": 5, "1": -2, "2": 19}}
    ending = {"events": {"0": 7, "1": 3, "2": -1}}
    df = reader(
        spark,
        broker,
        subscribe="events",
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    ).load()
    got = [(r[3], r[4]) for r in rows_of(df)]
    assert got == [(0, 5), (0, 6), (1, 0), (1, 1), (1, 2), (2, 19)]


def test_starting_and_ending_timestamps(spark: SparkSession, broker: samsa.Broker) -> None:
    # record i has timestamp BASE_TS + i s; from i=30 (offset 10 everywhere) to i=45 exclusive
    df = reader(
        spark,
        broker,
        subscribe="events",
        startingTimestamp=str(BASE_TS + 30_000),
        endingTimestamp=str(BASE_TS + 45_000),
    ).load()
    assert [(r[3], r[4]) for r in rows_of(df)] == [
        (p, o) for p in range(PARTITIONS) for o in range(10, 15)
    ]


def test_ending_offset_past_the_high_watermark_stops_there(
    spark: SparkSession, broker: samsa.Broker
) -> None:
    ending = json.dumps({"events-b": {"0": 1000, "1": 1, "2": -1}})
    df = reader(spark, broker, subscribe="events-b", endingOffsets=ending).load()
    assert [(r[3], r[4]) for r in rows_of(df)] == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]


def test_log_append_time(spark: SparkSession, broker: samsa.Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic("appended", 1, config={"message.timestamp.type": "LogAppendTime"})]
    )
    for future in futures.values():
        future.result(timeout=TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("appended", value=b"x", timestamp=BASE_TS)
    assert producer.flush(TIMEOUT) == 0
    (row,) = reader(spark, broker, subscribe="appended").load().collect()
    assert row.timestampType == 1
    assert row.timestamp.timestamp() * 1000 > BASE_TS + 10**9  # the broker's clock, not ours


def test_min_partitions_splits_without_changing_rows(
    spark: SparkSession, broker: samsa.Broker
) -> None:
    # 3 equal partitions, 7 wanted: Spark's KafkaOffsetRangeCalculator rounds each one's share
    # (7/3 -> 2), so 6 tasks, as Spark's connector makes ("minPartitions" is a hint)
    df = reader(spark, broker, subscribe="events", minPartitions="7").load()
    assert df.rdd.getNumPartitions() == 6
    assert rows_of(df) == expected_rows("events", PER_PARTITION)
    assert reader(spark, broker, subscribe="events").load().rdd.getNumPartitions() == PARTITIONS


def test_include_headers(spark: SparkSession, broker: samsa.Broker) -> None:
    df = reader(spark, broker, assign=json.dumps({"events": [1]}), includeHeaders="true").load()
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert len(rows) == PER_PARTITION
    for row in rows:
        i = row.offset * PARTITIONS + 1
        if i % 2 == 0:
            assert [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers] == [
                ("i", str(i).encode()),
                ("empty", None),
            ]
        else:
            assert row.headers is None


def test_fail_on_data_loss(spark: SparkSession, broker: samsa.Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    create_topics(admin, "trimmed")
    produce(broker.bootstrap_servers, "trimmed", 10)
    futures = admin.delete_records([TopicPartition("trimmed", 1, 4)])
    for future in futures.values():
        future.result(timeout=TIMEOUT)
    starting = json.dumps({"trimmed": {"0": 0, "1": 2, "2": 0}})

    with pytest.raises(Exception, match=r"trimmed-1.*starting offset 2.*log start offset 4"):
        reader(spark, broker, subscribe="trimmed", startingOffsets=starting).load().collect()

    df = reader(
        spark, broker, subscribe="trimmed", startingOffsets=starting, failOnDataLoss="false"
    ).load()
    expected = [r for r in expected_rows("trimmed", 10) if not (r[3] == 1 and r[4] < 4)]
    assert rows_of(df) == expected
    # "earliest" is never data loss: it is the log start offset
    assert rows_of(reader(spark, broker, subscribe="trimmed").load()) == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "events", "kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
        ({}, "subscribe"),
        ({"subscribe": "events", "assign": '{"events": [0]}'}, "assign"),
        ({"subscribe": "no-such-topic"}, "unknown topic 'no-such-topic'"),
        ({"assign": '{"no-such-topic": [0]}'}, "unknown topic 'no-such-topic'"),
        ({"assign": "[0, 1]"}, "assign"),
        ({"subscribe": "events", "startingOffsets": '{"events": {"0": 1'}, "startingOffsets"),
        ({"subscribe": "events", "endingOffsets": '{"events": [1]}'}, "endingOffsets"),
        ({"subscribe": "events", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "events", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "events", "kafka.group.instance.id": "g"}, "kafka.group.instance.id"),
    ],
)
def test_bad_input_gives_a_clear_error(
    spark: SparkSession, broker: samsa.Broker, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        reader(spark, broker, **options).load().collect()


def test_missing_bootstrap_servers(spark: SparkSession) -> None:
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("samsa").option("subscribe", "events").load().collect()


def test_records_deleted_after_planning(broker: samsa.Broker) -> None:
    """A task whose range was deleted after the driver planned it: the task itself decides."""
    from samsa.spark.source import OffsetRange, SamsaSourceError, read_range

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    create_topics(admin, "trimmed-late")
    produce(broker.bootstrap_servers, "trimmed-late", 10)
    planned = OffsetRange("trimmed-late", 2, 0, 10)  # as the driver saw it
    for future in admin.delete_records([TopicPartition("trimmed-late", 2, 6)]).values():
        future.result(timeout=TIMEOUT)
    params = {"bootstrap.servers": broker.bootstrap_servers}

    with pytest.raises(SamsaSourceError, match=r"data loss in trimmed-late-2"):
        list(read_range(planned, params, include_headers=False, fail_on_data_loss=True))
    batches = list(read_range(planned, params, include_headers=True, fail_on_data_loss=False))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [6, 7, 8, 9]
