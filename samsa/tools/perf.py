"""``samsa producer-perf-test`` and ``samsa consumer-perf-test``: Kafka's
kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh, with their flags and output, over
confluent-kafka.

The producer sends ``--num-records`` records of ``--record-size`` random capital letters (or
lines of ``--payload-file``), at most ``--throughput`` a second (-1: no limit), and prints a
line every 5 s and a summary with latency percentiles, as ProducerPerformance does::

    48127 records sent, 9625.4 records/sec (0.92 MB/sec), 12.3 ms avg latency, 80.0 ms max latency.
    100000 records sent, 9980.039920 records/sec (0.95 MB/sec), 11.52 ms avg latency, 80.00 ms
    max latency, 9 ms 50th, 25 ms 95th, 40 ms 99th, 78 ms 99.9th.

The consumer reads ``--messages`` records from the start (``--from-latest``: from the end) in a
group of its own and prints ConsumerPerformance's header and line (MB are 1024 * 1024 bytes).
"""

from __future__ import annotations

import datetime
import random
import string
import time
import uuid
from pathlib import Path
from typing import Any

import click
from confluent_kafka import Consumer, KafkaError, Producer

from samsa.tools.common import (
    ToolError,
    client_config,
    describe_error,
    handle_client_errors,
    parse_assignments,
    read_properties_file,
    serve_client_log,
)

REPORT_EVERY_S = 5.0
MB = 1024 * 1024


class Stats:
    """ProducerPerformance's Stats: a window printed every 5 s, and every latency kept for the
    percentiles (sampled when there are more than 500,000 records, as Kafka does)."""

    def __init__(self, records: int) -> None:
        self.start = self.window_start = time.monotonic()
        self.count = self.bytes = self.max_latency = self.total_latency = 0
        self.window_count = self.window_bytes = self.window_max = self.window_total = 0
        self.sampling = max(1, records // 500_000)
        self.latencies: list[int] = []
        self.iteration = 0

    def record(self, latency_ms: int, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency_ms
        self.window_max = max(self.window_max, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if time.monotonic() - self.window_start >= REPORT_EVERY_S:
            self.print_window()

    def print_window(self) -> None:
        elapsed = max(time.monotonic() - self.window_start, 1e-9)
        click.echo(f"{self.window_count} records sent, {self.window_count / elapsed:.1f} "
                   f"records/sec ({self.window_bytes / elapsed / MB:.2f} MB/sec), "
                   f"{self.window_total / max(self.window_count, 1):.1f} ms avg latency, "
                   f"{float(self.window_max):.1f} ms max latency.")
        self.window_start = time.monotonic()
        self.window_count = self.window_bytes = self.window_max = self.window_total = 0

    def print_total(self) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        ordered = sorted(self.latencies) or [0]

        def at(fraction: float) -> int:
            return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]

        click.echo(f"{self.count} records sent, {self.count / elapsed:f} records/sec "
                   f"({self.bytes / elapsed / MB:.2f} MB/sec), "
                   f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
                   f"{float(self.max_latency):.2f} ms max latency, {at(0.5)} ms 50th, "
                   f"{at(0.95)} ms 95th, {at(0.99)} ms 99th, {at(0.999)} ms 99.9th.")


def payloads(record_size: int | None, payload_file: Path | None, delimiter: str) -> list[bytes]:
    if payload_file is not None:
        try:
            text = payload_file.read_text()
        except OSError as exc:
            raise ToolError(f"--payload-file: cannot read {payload_file}: "
                            f"{exc.strerror or exc}") from exc
        found = [p.encode() for p in text.split(delimiter.encode().decode("unicode_escape"))
                 if p]
        if not found:
            raise ToolError(f"--payload-file: {payload_file} has no payloads")
        return found
    assert record_size is not None
    return ["".join(random.choices(string.ascii_uppercase, k=record_size)).encode()]


@click.command("producer-perf-test")
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--num-records", "num_records", required=True, type=click.IntRange(min=1),
              help="How many records to send.")
@click.option("--record-size", "record_size", type=click.IntRange(min=0),
              help="Bytes a record (random capital letters).")
@click.option("--payload-file", "payload_file", type=click.Path(dir_okay=False,
              path_type=Path), help="Payloads to pick from at random, one per line.")
@click.option("--payload-delimiter", "payload_delimiter", default="\\n", show_default=True,
              help="What separates the payloads of --payload-file.")
@click.option("--throughput", required=True, type=float,
              help="At most this many records a second (-1: no limit).")
@click.option("--producer-props", "producer_props", multiple=True, metavar="KEY=VALUE",
              help="Producer configs (bootstrap.servers among them), space or repeat.")
@click.option("--producer.config", "producer_config", type=click.Path(
              dir_okay=False, path_type=Path), help="A properties file of producer configs.")
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT",
              help="The broker(s) to connect to (else bootstrap.servers of the props).")
@click.argument("more_props", nargs=-1, metavar="[KEY=VALUE]...")
@handle_client_errors
def producer_perf_test(topic: str, num_records: int, record_size: int | None,
                       payload_file: Path | None, payload_delimiter: str, throughput: float,
                       producer_props: tuple[str, ...], producer_config: Path | None,
                       bootstrap_server: str | None, more_props: tuple[str, ...]) -> None:
    """Measure producer throughput and latency, as kafka-producer-perf-test.sh does
    (``--producer-props a=1 b=2`` as Kafka takes it: the values after the flag)."""
    if more_props and not producer_props:
        raise click.UsageError(f"Got unexpected extra argument ({more_props[0]})")
    producer_props = producer_props + more_props
    if (record_size is None) == (payload_file is None):
        raise click.UsageError("Either --record-size or --payload-file must be specified "
                               "but not both.")
    props: dict[str, Any] = dict(read_properties_file(producer_config, "--producer.config"))
    props.update(parse_assignments(
        (p for prop in producer_props for p in prop.split()), "--producer-props"))
    bootstrap = bootstrap_server or props.pop("bootstrap.servers", None)
    props.pop("bootstrap.servers", None)
    if not bootstrap:
        raise click.UsageError("bootstrap.servers is needed: --bootstrap-server, "
                               "--producer-props or --producer.config")
    choices = payloads(record_size, payload_file, payload_delimiter)
    producer = Producer(client_config(bootstrap, "perf-producer-client", props,
                                      short_timeouts=False))
    stats = Stats(num_records)
    failures: list[str] = []

    def delivered(sent_at: float, size: int) -> Any:
        def report(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failures.append(describe_error(err))
            else:
                stats.record(int((time.monotonic() - sent_at) * 1000), size)
        return report

    start = time.monotonic()
    for i in range(num_records):
        payload = choices[0] if len(choices) == 1 else random.choice(choices)
        while True:
            try:
                producer.produce(topic, payload, on_delivery=delivered(time.monotonic(),
                                                                       len(payload)))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        if throughput > 0:  # ThroughputThrottler: sleep back to the rate
            ahead = (i + 1) / throughput - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        if failures:
            break
    producer.flush(60)
    serve_client_log(producer)
    if failures:
        raise ToolError(f"a record was not delivered: {failures[0]}")
    stats.print_total()


HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
          "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _stamp(moment: float) -> str:
    """Kafka's default --date-format, yyyy-MM-dd HH:mm:ss:SSS."""
    at = datetime.datetime.fromtimestamp(moment)
    return at.strftime("%Y-%m-%d %H:%M:%S:") + f"{at.microsecond // 1000:03d}"


@click.command("consumer-perf-test")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT",
              help="The broker(s) to connect to: host:port, comma separated.")
@click.option("--topic", required=True, help="The topic to consume.")
@click.option("--messages", required=True, type=click.IntRange(min=1),
              help="How many records to read.")
@click.option("--group", default=None, help="The group id (default: perf-consumer-<random>).")
@click.option("--from-latest", "from_latest", is_flag=True,
              help="Start at the end of the topic rather than its start.")
@click.option("--timeout", "timeout_ms", default=10_000, show_default=True,
              type=click.IntRange(min=1), help="Give up after this long without a record (ms).")
@click.option("--hide-header", "hide_header", is_flag=True, help="No header line.")
@click.option("--consumer.config", "consumer_config", type=click.Path(
              dir_okay=False, path_type=Path), help="A properties file of consumer configs.")
@handle_client_errors
def consumer_perf_test(bootstrap_server: str, topic: str, messages: int, group: str | None,
                       from_latest: bool, timeout_ms: int, hide_header: bool,
                       consumer_config: Path | None) -> None:
    """Measure consumer throughput, as kafka-consumer-perf-test.sh does."""
    props = read_properties_file(consumer_config, "--consumer.config")
    consumer = Consumer(client_config(bootstrap_server, "perf-consumer-client", {
        "group.id": group or f"perf-consumer-{uuid.uuid4().int % 100000}",
        "auto.offset.reset": "latest" if from_latest else "earliest",
        "enable.auto.commit": False, **props}, short_timeouts=False))
    assigned_at: list[float] = []
    started = time.time()
    consumer.subscribe([topic], on_assign=lambda _c, _p: assigned_at.append(time.time()))
    count = size = 0
    last = time.monotonic()
    try:
        while count < messages:
            batch = consumer.consume(min(10_000, messages - count), 0.5)
            got = [m for m in batch if m.error() is None]
            for m in batch:
                error = m.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise ToolError(describe_error(error))
            if got:
                last = time.monotonic()
                count += len(got)
                size += sum(len(m.value() or b"") for m in got)
            elif time.monotonic() - last > timeout_ms / 1000:
                click.echo(f"WARNING: Exiting before consuming the expected number of "
                           f"messages: timeout ({timeout_ms} ms) exceeded. You can use the "
                           f"--timeout option to increase the timeout.", err=True)
                break
    finally:
        consumer.close()
    ended = time.time()
    elapsed = max(ended - started, 1e-9)
    rebalance = (assigned_at[0] - started) if assigned_at else 0.0
    fetching = max(elapsed - rebalance, 1e-9)
    megabytes = size / MB
    if not hide_header:
        click.echo(HEADER)
    click.echo(f"{_stamp(started)}, {_stamp(ended)}, {megabytes:.4f}, {megabytes / elapsed:.4f}"
               f", {count}, {count / elapsed:.4f}, {int(rebalance * 1000)}, "
               f"{int(fetching * 1000)}, {megabytes / fetching:.4f}, {count / fetching:.4f}")
