"""``df.write`` / ``df.writeStream`` through samsa's writer: real PySpark, a real broker.

What was written is read back with the batch reader.

PySpark's Python data sources accept only the save modes append and overwrite, so every batch
write says ``mode("append")``; overwrite is refused, as by Spark's Kafka sink.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

FORMAT = "samsa"
PARTITIONS = 3
TIMEOUT = 15.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("spark-write-broker") / "data"
    with samsa.Broker(data, num_partitions=PARTITIONS) as b:
        yield b


@pytest.fixture(scope="module")
def session(spark: SparkSession) -> SparkSession:
    return spark  # the session-wide SparkSession, with format("samsa") registered


_topic_counter = 0


@pytest.fixture
def topic(broker: samsa.Broker) -> str:
    """A fresh topic with PARTITIONS partitions."""
    global _topic_counter
    _topic_counter += 1
    name = f"written-{_topic_counter}"
    create_topics(broker, name)
    return name


def create_topics(broker: samsa.Broker, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(n, PARTITIONS) for n in names]).values():
        future.result(timeout=TIMEOUT)


def writer(df: DataFrame, broker: samsa.Broker, **options: str) -> DataFrameWriter:
    w = df.write.format(FORMAT).mode("append")
    w = w.option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        w = w.option(key, value)
    return w


def read_back(spark: SparkSession, broker: samsa.Broker, topic: str, headers: bool = False) -> Any:
    return (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("includeHeaders", str(headers).lower())
        .load()
        .collect()
    )


def key_values(rows: list[Any]) -> list[tuple[bytes | None, bytes | None]]:
    def b(x: Any) -> bytes | None:
        return None if x is None else bytes(x)

    return sorted(((b(r.key), b(r.value)) for r in rows), key=repr)


def test_write_string_key_value_and_topic_column(
    session: SparkSession, broker: samsa.Broker
) -> None:
    create_topics(broker, "by-column-a", "by-column-b")
    rows = [(f"k{i}", f"v{i}", "by-column-a" if i % 3 else "by-column-b", i) for i in range(30)]
    df = session.createDataFrame(rows, "key string, value string, topic string, extra int")
    writer(df.repartition(3), broker).save()  # 'extra' is ignored, as by Spark

    got_a = read_back(session, broker, "by-column-a")
    got_b = read_back(session, broker, "by-column-b")
    assert key_values(got_a) == sorted(
        ((f"k{i}".encode(), f"v{i}".encode()) for i in range(30) if i % 3), key=repr
    )
    assert key_values(got_b) == sorted(
        ((f"k{i}".encode(), f"v{i}".encode()) for i in range(30) if not i % 3), key=repr
    )
    # one key, one partition (the producer's key hash)
    partitions: dict[bytes, set[int]] = {}
    for r in got_a + got_b:
        partitions.setdefault(bytes(r.key), set()).add(r.partition)
    assert all(len(p) == 1 for p in partitions.values())


def test_write_binary_columns_and_null_key(
    session: SparkSession, broker: samsa.Broker, topic: str
) -> None:
    rows = [(bytearray(b"\x00\xffk"), bytearray(b"\x01v\x00")), (None, bytearray(b"no key"))]
    df = session.createDataFrame(rows, "key binary, value binary")
    writer(df, broker, topic=topic).save()
    assert key_values(read_back(session, broker, topic)) == sorted(
        [(b"\x00\xffk", b"\x01v\x00"), (None, b"no key")], key=repr
    )


def test_value_only_and_null_value(session: SparkSession, broker: samsa.Broker, topic: str) -> None:
    df = session.createDataFrame([("a",), (None,)], "value string")
    writer(df, broker, topic=topic).save()
    assert key_values(read_back(session, broker, topic)) == sorted(
        [(None, b"a"), (None, None)], key=repr
    )


def test_topic_option_overrides_topic_column(
    session: SparkSession, broker: samsa.Broker, topic: str
) -> None:
    create_topics(broker, "not-this-one")
    df = session.createDataFrame(
        [("v1", "not-this-one"), ("v2", None)], "value string, topic string"
    )
    writer(df, broker, topic=topic).save()
    assert key_values(read_back(session, broker, topic)) == [(None, b"v1"), (None, b"v2")]
    assert read_back(session, broker, "not-this-one") == []


def test_save_path_is_the_topic(session: SparkSession, broker: samsa.Broker, topic: str) -> None:
    """As Spark: ``save(path)`` names the topic, below the ``topic`` option."""
    df = session.createDataFrame([("v",)], "value string")
    writer(df, broker).save(topic)
    assert key_values(read_back(session, broker, topic)) == [(None, b"v")]


def test_partition_column(session: SparkSession, broker: samsa.Broker, topic: str) -> None:
    rows = [(f"v{i}", i % PARTITIONS) for i in range(12)] + [("anywhere", None)]
    df = session.createDataFrame(rows, "value string, partition int")
    writer(df, broker, topic=topic).save()
    got = read_back(session, broker, topic)
    placed = {bytes(r.value).decode(): r.partition for r in got}
    assert len(got) == 13
    assert all(placed[f"v{i}"] == i % PARTITIONS for i in range(12))
    assert placed["anywhere"] in range(PARTITIONS)


def test_headers(session: SparkSession, broker: samsa.Broker, topic: str) -> None:
    rows = [
        ("v0", 0, [("h1", bytearray(b"one")), ("h2", None), ("h1", bytearray(b"again"))]),
        ("v1", 0, []),
        ("v2", 0, None),
    ]
    schema = "value string, partition int, headers array<struct<key: string, value: binary>>"
    writer(session.createDataFrame(rows, schema), broker, topic=topic).save()
    got = sorted(read_back(session, broker, topic, headers=True), key=lambda r: bytes(r.value))
    assert [bytes(r.value) for r in got] == [b"v0", b"v1", b"v2"]
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in got[0].headers] == [
        ("h1", b"one"),
        ("h2", None),
        ("h1", b"again"),
    ]
    assert not got[1].headers and got[2].headers is None


@pytest.mark.parametrize(
    ("schema", "options", "message"),
    [
        ("key string, topic string", {}, "required column 'value' not found"),
        ("value int, topic string", {}, "column 'value' must be of type string or binary"),
        ("value string, key int, topic string", {}, "column 'key' must be of type string"),
        ("value string, topic int", {}, "column 'topic' must be of type string"),
        ("value string, topic string, partition string", {}, "column 'partition' must be"),
        ("value string, topic string, headers array<string>", {}, "column 'headers'"),
        ("value string", {}, "no 'topic' column and no 'topic' option"),
        ("value string", {"topic": "t", "kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
        ("value string", {"topic": "t", "kafka.key.serializer": "x"}, "kafka.key.serializer"),
        ("value string", {"topic": "t", "kafka.value.serializer": "x"}, "kafka.value.serializer"),
        ("value string", {"topic": "t", "kafka.no.such.option": "1"}, "no.such.option"),
    ],
)
def test_bad_input_gives_a_clear_error(
    session: SparkSession,
    broker: samsa.Broker,
    schema: str,
    options: dict[str, str],
    message: str,
) -> None:
    df = session.createDataFrame([], schema)
    with pytest.raises(Exception, match=message):
        writer(df, broker, **options).save()


def test_missing_bootstrap_servers(session: SparkSession) -> None:
    df = session.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        df.write.format(FORMAT).mode("append").option("topic", "t").save()


def test_overwrite_mode_is_refused(session: SparkSession, broker: samsa.Broker) -> None:
    df = session.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="overwrite"):
        writer(df, broker, topic="t").mode("overwrite").save()


def test_null_topic_in_a_row(session: SparkSession, broker: samsa.Broker, topic: str) -> None:
    df = session.createDataFrame([("v", topic), ("w", None)], "value string, topic string")
    with pytest.raises(Exception, match="column 'topic' is null"):
        writer(df.coalesce(1), broker).save()


def test_failed_delivery_fails_the_write(
    session: SparkSession, broker: samsa.Broker, topic: str
) -> None:
    df = session.createDataFrame([("v", 99)], "value string, partition int")
    with pytest.raises(Exception, match=rf"{topic}-99"):
        writer(df, broker, topic=topic, **{"kafka.message.timeout.ms": "5000"}).save()


def test_stream_write(
    session: SparkSession, broker: samsa.Broker, topic: str, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    expected = [json.dumps({"i": i}) for i in range(50)]
    for n in range(3):  # three files, read in one or more microbatches
        (source / f"part-{n}.txt").write_text("\n".join(expected[n::3]) + "\n")
    query = (
        session.readStream.format("text")
        .option("maxFilesPerTrigger", "1")
        .load(str(source))
        .writeStream.format(FORMAT)
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(60), "the streaming write did not finish within 60 s"
        assert query.exception() is None
    finally:
        query.stop()
    got = read_back(session, broker, topic)
    assert sorted(bytes(r.value).decode() for r in got) == sorted(expected)
    assert len(query.recentProgress) >= 3  # one file per microbatch


def test_stream_write_from_rate_source(
    session: SparkSession, broker: samsa.Broker, topic: str, tmp_path: Path
) -> None:
    import time

    def run_until(rows_wanted: int) -> list[Any]:
        query = (
            session.readStream.format("rate")
            .option("rowsPerSecond", "20")
            .load()
            .selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value")
            .writeStream.format(FORMAT)
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", topic)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 25
            rows: list[Any] = []
            while time.monotonic() < deadline and len(rows) < rows_wanted:
                time.sleep(1)
                assert query.exception() is None
                rows = read_back(session, broker, topic)
        finally:
            query.stop()
        assert len(rows) >= rows_wanted
        return read_back(session, broker, topic)

    # stop() may cut a micro-batch short (one task's rows written, another's not): at least
    # once means the restarted query writes that batch again, so nothing is missing after it
    first = sorted(int(bytes(r.value)) for r in run_until(20))
    rows = run_until(len(first) + 20)
    values = {int(bytes(r.value)) for r in rows}
    assert set(range(max(first) + 1)) <= values
    assert all(r.key == r.value for r in rows)
