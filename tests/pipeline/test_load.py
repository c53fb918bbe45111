"""The load job, with real PySpark (local mode) and a real broker: exactly once, killed or not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pipeline_data import TIMEOUT_S, loaded_keys, produced
from pyspark.sql import SparkSession

import samsa
from samsa.pipeline.events import Topics
from samsa.pipeline.generate import generate
from samsa.pipeline.load import load
from samsa.pipeline.table import OFFSETS_FILE, Table

HOUR_MS = 3_600_000


def test_load_writes_exactly_the_produced_events_by_date_and_hour(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("exact-")
    start = 1_763_800_000_000 - 1_763_800_000_000 % HOUR_MS  # a whole hour, UTC
    generate(broker.bootstrap_servers, events=3000, topics=topics, seed=1, start_ms=start,
             span_ms=3 * HOUR_MS)
    table = tmp_path / "warehouse" / "events"

    result = load(spark, broker.bootstrap_servers, table, topics=topics)

    events = produced(broker.bootstrap_servers, topics)
    assert len(events) == 3000
    assert result.rows == 3000 and result.version == 1
    assert loaded_keys(spark, table) == sorted(events)
    for row in spark.read.parquet(str(table)).collect():
        event = events[(row.topic, row.partition, row.offset)]
        assert row.user_id == event["user_id"] == event["key"].decode()
        assert (row.event_type, row.page, row.query, row.target, row.server) == (
            event["event_type"], event["page"], event["query"], event["target"], event["server"]
        )
        when = datetime.fromtimestamp(event["timestamp"] / 1000, UTC)
        assert row.event_time.timestamp() * 1000 == event["timestamp"]  # naive, local time
        assert (row.date, row.hour) == (when.date(), when.hour)  # Spark infers date=... as a date
    hours = {p.relative_to(table).as_posix() for p in table.glob("date=*/hour=*")}
    first = datetime.fromtimestamp(start / 1000, UTC)
    assert hours == {f"date={first:%Y-%m-%d}/hour={first.hour + h}" for h in range(3)}
    assert (table / OFFSETS_FILE).is_file()


def test_reloading_adds_only_new_events(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("again-")
    table = tmp_path / "events"
    generate(broker.bootstrap_servers, events=1000, topics=topics, seed=2)
    assert load(spark, broker.bootstrap_servers, table, topics=topics).rows == 1000

    nothing = load(spark, broker.bootstrap_servers, table, topics=topics)
    assert (nothing.rows, nothing.version) == (0, 1)

    generate(broker.bootstrap_servers, events=500, topics=topics, seed=3)
    more = load(spark, broker.bootstrap_servers, table, topics=topics)
    assert (more.rows, more.version) == (500, 2)
    assert loaded_keys(spark, table) == sorted(produced(broker.bootstrap_servers, topics))
    offsets = Table(table).current().offsets
    assert sum(sum(parts.values()) for parts in offsets.values()) == 1500


def test_a_failed_load_leaves_nothing_visible(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("poison-")
    table = tmp_path / "events"
    generate(broker.bootstrap_servers, events=300, topics=topics, seed=4)
    load(spark, broker.bootstrap_servers, table, topics=topics)
    before = Table(table).current()
    generate(broker.bootstrap_servers, events=300, topics=topics, seed=5)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topics.activity("click"), value=b"not an event", partition=1)
    assert producer.flush(TIMEOUT_S) == 0

    with pytest.raises(Exception, match=r"poison-clicks-1 at offset \d+ is not an activity event"):
        load(spark, broker.bootstrap_servers, table, topics=topics)

    after = Table(table).current()
    assert (after.number, after.offsets) == (before.number, before.offsets)
    assert len(loaded_keys(spark, table)) == 300


def test_data_loss_fails_the_load_unless_allowed(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("loss-")
    table = tmp_path / "events"
    generate(broker.bootstrap_servers, events=600, topics=topics, seed=6, partitions=1)
    load(spark, broker.bootstrap_servers, table, topics=topics)
    first_load = set(loaded_keys(spark, table))
    generate(broker.bootstrap_servers, events=600, topics=topics, seed=7)
    # what retention would do: delete records the table has not loaded yet
    topic = topics.activity("page_view")
    loaded_to = Table(table).current().offsets[topic][0]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic, 0, loaded_to + 10)])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)

    with pytest.raises(Exception, match=rf"data loss in {topic}-0"):
        load(spark, broker.bootstrap_servers, table, topics=topics)
    assert Table(table).current().number == 1

    result = load(spark, broker.bootstrap_servers, table, topics=topics, fail_on_data_loss=False)
    assert result.version == 2
    keys = loaded_keys(spark, table)
    assert len(keys) == len(set(keys))
    # the first load's rows and every event still in the broker (from the new log start on)
    assert set(keys) == first_load | set(produced(broker.bootstrap_servers, topics))
    assert not [k for k in keys if k[0] == topic and loaded_to <= k[2] < loaded_to + 10]


def _load_command(broker: samsa.Broker, table: Path, prefix: str) -> list[str]:
    return [sys.executable, "-m", "samsa.cli", "pipeline", "load", "--bootstrap-server",
            broker.bootstrap_servers, "--topic-prefix", prefix, "--table", str(table),
            "--master", "local[2]"]


def test_a_killed_load_then_a_rerun_loads_every_row_once(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("killed-")
    table = tmp_path / "events"
    generate(broker.bootstrap_servers, events=1000, topics=topics, seed=8)
    load(spark, broker.bootstrap_servers, table, topics=topics)
    generate(broker.bootstrap_servers, events=40_000, topics=topics, seed=9)
    staging = Table(table).versions / "v00000002"

    proc = subprocess.Popen(_load_command(broker, table, "killed-"), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        # kill while Spark writes the new version's files (its job has started)
        while not (staging / "_temporary").exists():
            assert proc.poll() is None, proc.communicate()[0].decode()[-2000:]
            assert time.monotonic() < deadline, "the load never started writing"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(TIMEOUT_S)

    assert Table(table).current().number == 1
    assert len(loaded_keys(spark, table)) == 1000  # the half-written version is invisible

    result = load(spark, broker.bootstrap_servers, table, topics=topics)
    assert (result.version, result.rows) == (2, 40_000)
    assert loaded_keys(spark, table) == sorted(produced(broker.bootstrap_servers, topics))
    assert sorted(p.name for p in Table(table).versions.iterdir()) == ["v00000001", "v00000002"]


def test_two_loads_of_one_table_do_not_run_together(broker: samsa.Broker, tmp_path: Path) -> None:
    table = tmp_path / "events"
    with Table(table).locked():
        proc = subprocess.run(_load_command(broker, table, "exact-"), capture_output=True,
                              text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"samsa: another load is running on {table}"
