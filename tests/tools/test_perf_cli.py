"""``samsa producer-perf-test`` and ``samsa consumer-perf-test`` (Kafka's perf tools) run as
subprocesses against an in-process broker: the records they say they sent are in the topic
(random capital letters of the asked size), the throttle holds the asked rate, the consumer
reads and reports exactly what is there, and bad input is one line."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

import samsa

from . import error_line, ok, unique
from . import samsa as run_samsa

pytestmark = pytest.mark.timeout(120)

SUMMARY = re.compile(r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                     r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
                     r"\d+ ms 99.9th\.$")
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
          "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("perf")) as b:
        yield b


def first_and_count(broker: samsa.Broker, topic: str) -> tuple[bytes, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message.value(), high
        raise AssertionError("nothing to read")
    finally:
        consumer.close()


def test_producer_then_consumer(broker: samsa.Broker) -> None:
    topic = unique("perf")
    out = ok(run_samsa("producer-perf-test", "--topic", topic, "--num-records", 3000,
                       "--record-size", 100, "--throughput", -1, "--producer-props",
                       f"bootstrap.servers={broker.bootstrap_servers}", "acks=1",
                       "linger.ms=5"))
    summary = SUMMARY.match(out.splitlines()[-1])
    assert summary is not None, out
    assert summary[1] == "3000"
    value, count = first_and_count(broker, topic)
    assert count == 3000
    assert len(value) == 100 and value.isupper() and value.isalpha()

    out = ok(run_samsa("consumer-perf-test", "--bootstrap-server", broker.bootstrap_servers,
                       "--topic", topic, "--messages", 3000))
    header, line = out.splitlines()
    assert header == HEADER
    fields = line.split(", ")
    assert fields[2] == f"{3000 * 100 / 1024 / 1024:.4f}" and fields[4] == "3000", line


def test_throttle_and_short_topic(broker: samsa.Broker) -> None:
    topic = unique("slow")
    started = time.monotonic()
    ok(run_samsa("producer-perf-test", "--topic", topic, "--num-records", 300,
                 "--record-size", 10, "--throughput", 200,
                 "--bootstrap-server", broker.bootstrap_servers))
    assert time.monotonic() - started >= 1.4  # 300 records at 200 a second: 1.5 s at least
    result = run_samsa("consumer-perf-test", "--bootstrap-server", broker.bootstrap_servers,
                       "--topic", topic, "--messages", 1000, "--timeout", 1000,
                       "--hide-header")
    line = ok(result).strip()
    assert line.split(", ")[4] == "300", line
    assert "WARNING: Exiting before consuming the expected number of messages" in result.stderr


def test_bad_input_is_one_line(broker: samsa.Broker, tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("a\nb\n")
    both = run_samsa("producer-perf-test", "--topic", "t", "--num-records", 1, "--record-size",
                     1, "--payload-file", payloads, "--throughput", -1, "--bootstrap-server",
                     broker.bootstrap_servers)
    assert "Either --record-size or --payload-file" in error_line(both)
    nowhere = run_samsa("producer-perf-test", "--topic", "t", "--num-records", 1,
                        "--record-size", 1, "--throughput", -1)
    assert "bootstrap.servers" in error_line(nowhere)
    assert "key=value" in error_line(run_samsa(
        "producer-perf-test", "--topic", "t", "--num-records", 1, "--record-size", 1,
        "--throughput", -1, "--producer-props", "nonsense"))
