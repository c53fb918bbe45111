"""Streaming reads (``spark.readStream``) with the samsa stream reader: real PySpark (local mode),
a real broker.

Every query runs with ``trigger(availableNow=True)`` and a bounded wait.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import samsa
from samsa.spark.source import SamsaSourceError, kafka_schema
from samsa.spark.stream import SamsaStreamReader, cap_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

FORMAT = "samsa"
TIMEOUT = 15.0
QUERY_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def stream_spark(spark: SparkSession) -> SparkSession:
    return spark  # the session-wide SparkSession, with format("samsa") registered


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("spark-stream-broker") / "data"
    with samsa.Broker(data, num_partitions=3) as b:
        yield b


def admin_of(broker: samsa.Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(broker: samsa.Broker, name: str, partitions: int) -> None:
    admin = admin_of(broker)  # kept alive until the futures are done
    for future in admin.create_topics([NewTopic(name, partitions)]).values():
        future.result(timeout=TIMEOUT)


def produce(broker: samsa.Broker, topic: str, per_partition: int, partitions: list[int]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for p in partitions:
        for i in range(per_partition):
            producer.produce(
                topic, key=f"k{p}-{i}".encode(), value=f"{topic}/{p}".encode(), partition=p
            )
    assert producer.flush(TIMEOUT) == 0


def run_available_now(
    spark: SparkSession,
    broker: samsa.Broker,
    out: Path,
    checkpoint: Path,
    **options: str,
) -> StreamingQuery:
    """One available-now run appending to parquet at ``out``; waits (bounded) for its end."""
    reader = spark.readStream.format(FORMAT).option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
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
    return query


def rows(spark: SparkSession, out: Path) -> list[tuple[str, int, int]]:
    df = spark.read.parquet(str(out))
    return sorted((r.topic, r.partition, r.offset) for r in df.collect())


def expected(topic: str, counts: dict[int, int]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, n in counts.items() for o in range(n))


# --- with Spark -----------------------------------------------------------------------------------


def test_restart_resumes_exactly_where_it_stopped(
    stream_spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    create_topic(broker, "resume", 3)
    produce(broker, "resume", 10, [0, 1, 2])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    opts = {"subscribe": "resume", "startingOffsets": "earliest"}
    run_available_now(stream_spark, broker, out, ckpt, **opts)
    assert rows(stream_spark, out) == expected("resume", {0: 10, 1: 10, 2: 10})

    produce(broker, "resume", 5, [0, 2])
    query = run_available_now(stream_spark, broker, out, ckpt, **opts)
    got = rows(stream_spark, out)
    assert got == expected("resume", {0: 15, 1: 10, 2: 15})  # nothing lost, nothing twice
    assert sum(p["numInputRows"] for p in query.recentProgress) == 10
    end = query.lastProgress["sources"][0]["endOffset"]
    if isinstance(end, str):  # the checkpoint's JSON, as Spark reports it
        end = json.loads(end)
    assert end == {"resume": {"0": 15, "1": 10, "2": 15}}


def test_default_starting_offsets_is_latest(
    stream_spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    create_topic(broker, "from-latest", 2)
    produce(broker, "from-latest", 4, [0, 1])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    run_available_now(stream_spark, broker, out, ckpt, subscribe="from-latest")
    produce(broker, "from-latest", 3, [1])
    run_available_now(stream_spark, broker, out, ckpt, subscribe="from-latest")
    assert rows(stream_spark, out) == [("from-latest", 1, o) for o in (4, 5, 6)]


def test_max_offsets_per_trigger_caps_each_micro_batch(
    stream_spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    create_topic(broker, "capped", 3)
    produce(broker, "capped", 10, [0, 1, 2])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = run_available_now(
        stream_spark,
        broker,
        out,
        ckpt,
        subscribe="capped",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="7",
    )
    counts = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    assert sum(counts) == 30
    assert max(counts) <= 7
    assert len(counts) >= 5
    assert query.lastProgress["numInputRows"] <= 7
    assert rows(stream_spark, out) == expected("capped", {0: 10, 1: 10, 2: 10})


def test_new_partitions_and_topics_are_read_from_their_beginning(
    stream_spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    create_topic(broker, "grow-a", 2)
    produce(broker, "grow-a", 3, [0, 1])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    opts = {"subscribePattern": "grow-.*", "startingOffsets": "latest"}
    run_available_now(stream_spark, broker, out, ckpt, **opts)  # starts at the end: no rows

    admin = admin_of(broker)
    for future in admin.create_partitions([NewPartitions("grow-a", 4)]).values():
        future.result(timeout=TIMEOUT)
    create_topic(broker, "grow-b", 1)
    produce(broker, "grow-a", 2, [0, 2, 3])
    produce(broker, "grow-b", 4, [0])
    run_available_now(stream_spark, broker, out, ckpt, **opts)
    want = [("grow-a", 0, 3), ("grow-a", 0, 4)]
    want += expected("grow-a", {2: 2, 3: 2}) + expected("grow-b", {0: 4})
    assert rows(stream_spark, out) == sorted(want)


# --- the reader on its own (the driver's calls, no Spark) -----------------------------------------


def stream_reader(broker: samsa.Broker, **options: str) -> SamsaStreamReader:
    opts = {"kafka.bootstrap.servers": broker.bootstrap_servers, **options}
    return SamsaStreamReader(opts, kafka_schema())


def read_all(reader: SamsaStreamReader, start: dict, end: dict) -> list[tuple[str, int, int]]:
    out = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            d: dict[str, Any] = batch.to_pydict()
            out += zip(d["topic"], d["partition"], d["offset"], strict=True)
    return sorted(out)


def test_offsets_and_read_limit(broker: samsa.Broker) -> None:
    create_topic(broker, "direct", 2)
    produce(broker, "direct", 6, [0])
    produce(broker, "direct", 2, [1])
    reader = stream_reader(
        broker, subscribe="direct", startingOffsets="earliest", maxOffsetsPerTrigger="5"
    )
    start = reader.initialOffset()
    assert start == {"direct": {"0": 0, "1": 0}}
    assert reader.getDefaultReadLimit() == ReadMaxRows(5)
    end = reader.latestOffset(start, ReadMaxRows(5))
    assert sum(end["direct"].values()) == 5
    assert read_all(reader, start, end) == sorted(
        ("direct", int(p), o) for p, n in end["direct"].items() for o in range(n)
    )
    assert reader.latestOffset(start, ReadAllAvailable()) == {"direct": {"0": 6, "1": 2}}
    assert reader.partitions(end, end) == []
    assert reader.reportLatestOffset() == {"direct": {"0": 6, "1": 2}}

    latest = stream_reader(broker, subscribe="direct")
    assert latest.initialOffset() == {"direct": {"0": 6, "1": 2}}
    specific = stream_reader(
        broker, subscribe="direct", startingOffsets='{"direct": {"0": 4, "1": -2}}'
    )
    assert specific.initialOffset() == {"direct": {"0": 4, "1": 0}}


def test_available_now_target_is_fixed(broker: samsa.Broker) -> None:
    create_topic(broker, "target", 1)
    produce(broker, "target", 3, [0])
    reader = stream_reader(broker, subscribe="target", startingOffsets="earliest")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    produce(broker, "target", 3, [0])
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"target": {"0": 3}}
    assert reader.latestOffset(end, ReadAllAvailable()) == end


def test_cap_rows_never_exceeds_the_limit() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    latest = {("t", 0): 1, ("t", 1): 1, ("t", 2): 100}
    capped = cap_rows(start, latest, 2)
    assert sum(capped.values()) == 2
    assert cap_rows(start, latest, 500) == latest
    assert sum(cap_rows(start, {k: 1 for k in start}, 1).values()) == 1


def test_fail_on_data_loss(broker: samsa.Broker) -> None:
    create_topic(broker, "lossy", 1)
    produce(broker, "lossy", 10, [0])
    strict = stream_reader(broker, subscribe="lossy", startingOffsets="earliest")
    start = strict.initialOffset()
    checkpointed = {"lossy": {"0": 2}}
    admin = admin_of(broker)
    for future in admin.delete_records([TopicPartition("lossy", 0, 6)]).values():
        future.result(timeout=TIMEOUT)
    end = strict.latestOffset(checkpointed, ReadAllAvailable())
    assert end == {"lossy": {"0": 10}}
    with pytest.raises(SamsaSourceError, match=r"lossy-0.*below the log start offset 6"):
        strict.partitions(checkpointed, end)

    lenient = stream_reader(broker, subscribe="lossy", failOnDataLoss="false")
    assert read_all(lenient, checkpointed, end) == [("lossy", 0, o) for o in range(6, 10)]
    assert start == {"lossy": {"0": 0}}


def test_bad_options(broker: samsa.Broker) -> None:
    with pytest.raises(SamsaSourceError, match="endingOffsets"):
        stream_reader(broker, subscribe="x", endingOffsets="latest")
    with pytest.raises(SamsaSourceError, match="maxOffsetsPerTrigger"):
        stream_reader(broker, subscribe="x", maxOffsetsPerTrigger="0")
    create_topic(broker, "partial", 2)
    with pytest.raises(SamsaSourceError, match="missing partial-1"):
        stream_reader(
            broker, subscribe="partial", startingOffsets='{"partial": {"0": 0}}'
        ).initialOffset()
