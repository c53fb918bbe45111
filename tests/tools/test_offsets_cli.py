"""``samsa get-offsets`` (kafka-get-offsets.sh) and ``samsa delete-records``
(kafka-delete-records.sh) run as subprocesses against an in-process broker: offsets at the
latest, the earliest and a timestamp, filtered by topic regex and partitions; records deleted
below offsets with the low watermarks printed, a partition that fails printed as Kafka prints
it, the others deleted; bad input is one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

import samsa

from . import error_line, ok, unique
from . import samsa as run_samsa

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("offsets"), config={"num.partitions": 2}) as b:
        yield b


def produce(broker: samsa.Broker, topic: str, per_partition: int) -> None:
    """Records 1000, 1001, ... as timestamps, alternating between partitions 0 and 1."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(2 * per_partition):
        producer.produce(topic, b"v", partition=i % 2, timestamp=1000 + i)
    assert producer.flush(30) == 0


def offsets(broker: samsa.Broker, *args: str) -> list[str]:
    return ok(run_samsa("get-offsets", "--bootstrap-server", broker.bootstrap_servers,
                        *args)).splitlines()


def test_get_offsets(broker: samsa.Broker) -> None:
    topic, other = unique("events"), unique("other")
    produce(broker, topic, 5)
    produce(broker, other, 1)
    assert offsets(broker, "--topic", topic) == [f"{topic}:0:5", f"{topic}:1:5"]
    assert offsets(broker, "--topic", topic, "--time", "-2") == [f"{topic}:0:0", f"{topic}:1:0"]
    assert offsets(broker, "--topic", topic, "--time", "earliest", "--partitions", "1") == \
        [f"{topic}:1:0"]
    # the first offset at or after timestamp 1005 (partition 0 has 1004 then 1006)
    assert offsets(broker, "--topic", topic, "--time", "1005") == [f"{topic}:0:3",
                                                                   f"{topic}:1:2"]
    assert offsets(broker, "--topic", topic, "--time", "99999999999") == [f"{topic}:0:",
                                                                          f"{topic}:1:"]
    # a regular expression over every topic; both topics, sorted
    both = offsets(broker, "--topic", f"({topic}|{other})")
    assert both == sorted([f"{topic}:0:5", f"{topic}:1:5", f"{other}:0:1", f"{other}:1:1"])
    everything = offsets(broker, "--exclude-internal-topics")
    assert f"{topic}:0:5" in everything and not any(line.startswith("__")
                                                    for line in everything)


def test_delete_records(broker: samsa.Broker, tmp_path: Path) -> None:
    topic = unique("trimmed")
    produce(broker, topic, 5)
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"partitions": [
        {"topic": topic, "partition": 0, "offset": 3},
        {"topic": topic, "partition": 1, "offset": 99}], "version": 1}))
    out = ok(run_samsa("delete-records", "--bootstrap-server", broker.bootstrap_servers,
                       "--offset-json-file", plan))
    lines = out.splitlines()
    assert lines[:2] == ["Executing records delete operation",
                         "Records delete operation completed:"]
    assert sorted(lines[2:]) == [
        f"partition: {topic}-0\tlow_watermark: 3",
        f"partition: {topic}-1\terror: org.apache.kafka.common.errors."
        "OffsetOutOfRangeException: The requested offset is not within the range of offsets "
        "maintained by the server."]
    assert offsets(broker, "--topic", topic, "--time", "-2") == [f"{topic}:0:3", f"{topic}:1:0"]


def test_bad_input_is_one_line(broker: samsa.Broker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    assert "--time" in error_line(run_samsa("get-offsets", "--bootstrap-server", bootstrap,
                                            "--time", "yesterday"))
    assert "--partitions" in error_line(run_samsa("get-offsets", "--bootstrap-server",
                                                  bootstrap, "--partitions", "a,b"))
    assert "regular expression" in error_line(run_samsa("get-offsets", "--bootstrap-server",
                                                        bootstrap, "--topic", "(unclosed"))
    plan = tmp_path / "bad.json"
    plan.write_text("{not json")
    assert "not a valid JSON" in error_line(run_samsa(
        "delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", plan))
    plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "offset": 1},
                                               {"topic": "t", "partition": 0, "offset": 2}]}))
    assert "duplicate topic partitions: t-0" in error_line(run_samsa(
        "delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", plan))
    plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0}]}))
    assert "needs topic, partition and offset" in error_line(run_samsa(
        "delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", plan))
