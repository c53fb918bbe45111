"""``samsa produce`` and ``samsa consume``: kafka-console-producer.sh / kafka-console-consumer.sh.

The producer reads one record per stdin line (Kafka's LineMessageReader rules for keys and
headers); the consumer prints one line per record (Kafka's DefaultMessageFormatter).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import click
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka import KafkaError as ClientError

from samsa.cluster.topics import topic_name_problem
from samsa.tools.common import (
    METADATA_TIMEOUT_S,
    ToolError,
    bootstrap_option,
    check_reachable,
    client_config,
    describe_error,
    handle_client_errors,
    parse_assignments,
    parse_bool,
    read_properties_file,
    serve_client_log,
    unescape,
)

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
# How long the producer keeps trying to deliver a record (delivery.timeout.ms) unless told.
DEFAULT_DELIVERY_TIMEOUT_MS = 30_000
# Most records handed to the client between polls.
_BATCH = 500


def _check_topic(topic: str) -> None:
    problem = topic_name_problem(topic)
    if problem is not None:
        raise click.UsageError(f"illegal topic name: {problem}")


def _connect(client: Producer | Consumer, bootstrap: str) -> Any:
    """The cluster's metadata through ``client``; one-line error when the broker is not there."""
    try:
        return client.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        serve_client_log(client)  # no message is assigned yet: a poll serves only log lines
        raise ToolError(f"cannot get metadata from {bootstrap}: {describe_error(exc)}") from exc


# --- produce -------------------------------------------------------------------------------------


@dataclass
class LineReader:
    """Kafka's LineMessageReader: ``[headers<delimiter>][key<separator>]value`` per line."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False

    PROPERTIES = (
        "parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
        "headers.key.separator", "null.marker", "ignore.error",
    )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineReader:
        unknown = sorted(set(props) - set(cls.PROPERTIES))
        if unknown:
            raise click.UsageError(
                f"unknown --property {unknown[0]} (known: {', '.join(cls.PROPERTIES)})"
            )
        reader = cls()

        def separator(name: str, default: bytes) -> bytes:
            if name not in props:
                return default
            value = unescape(props[name]).encode()
            if not value:
                raise click.UsageError(f"property {name} must not be empty")
            return value

        reader.parse_key = parse_bool(props.get("parse.key", "false"), "parse.key")
        reader.parse_headers = parse_bool(props.get("parse.headers", "false"), "parse.headers")
        reader.ignore_error = parse_bool(props.get("ignore.error", "false"), "ignore.error")
        reader.key_separator = separator("key.separator", reader.key_separator)
        reader.headers_delimiter = separator("headers.delimiter", reader.headers_delimiter)
        reader.headers_separator = separator("headers.separator", reader.headers_separator)
        reader.headers_key_separator = separator(
            "headers.key.separator", reader.headers_key_separator
        )
        if "null.marker" in props:
            reader.null_marker = unescape(props["null.marker"]).encode() or None
        if reader.headers_separator == reader.headers_key_separator:
            raise click.UsageError(
                "headers.separator and headers.key.separator may not be equal"
            )
        if reader.null_marker is not None:
            for name, value in (
                ("key.separator", reader.key_separator),
                ("headers.delimiter", reader.headers_delimiter),
                ("headers.separator", reader.headers_separator),
                ("headers.key.separator", reader.headers_key_separator),
            ):
                if value == reader.null_marker:
                    raise click.UsageError(f"null.marker and {name} may not be equal")
        return reader

    def _split(
        self, line: bytes, start: int, separator: bytes, what: str, number: int
    ) -> bytes | None:
        index = line.find(separator, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise ToolError(
                f"No {what} found on line number {number}: '{_text(line)}'"
            )
        return line[start:index]

    def parse(
        self, line: bytes, number: int
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line (without its line break)."""
        headers_text = (
            self._split(line, 0, self.headers_delimiter, "headers delimiter", number)
            if self.parse_headers else None
        )
        offset = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key = (
            self._split(line, offset, self.key_separator, "key separator", number)
            if self.parse_key else None
        )
        if key is not None:
            offset += len(key) + len(self.key_separator)
        value: bytes | None = line[offset:]
        if key is not None and key == self.null_marker:
            key = None
        if value == self.null_marker:
            value = None
        headers: list[tuple[str, bytes | None]] = []
        if headers_text is not None and headers_text != self.null_marker:
            headers = self._headers(headers_text, number)
        return key, value, headers

    def _headers(self, text: bytes, number: int) -> list[tuple[str, bytes | None]]:
        headers: list[tuple[str, bytes | None]] = []
        for pair in text.split(self.headers_separator):
            index = pair.find(self.headers_key_separator)
            if index == -1:
                if self.ignore_error:
                    headers.append((_text(pair), None))
                    continue
                raise ToolError(
                    f"No header key separator found in pair '{_text(pair)}' on line number"
                    f" {number}"
                )
            key = pair[:index]
            if self.null_marker is not None and key == self.null_marker:
                raise ToolError(
                    f"Header keys should not be equal to the null marker"
                    f" '{_text(self.null_marker)}' as they can't be null"
                )
            value: bytes | None = pair[index + len(self.headers_key_separator):]
            if value == self.null_marker:
                value = None
            headers.append((_text(key), value))
        return headers


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    """stdin lines without their line break (\\n or \\r\\n), as Java's readLine."""
    for raw in stream:
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        yield raw


@dataclass
class Deliveries:
    """What became of the records handed to the producer."""

    sent: int = 0
    delivered: int = 0
    failed: dict[str, list[int]] = field(default_factory=dict)  # error text -> line numbers

    def callback(self, number: int) -> Callable[[ClientError | None, Message], None]:
        def on_delivery(err: ClientError | None, _msg: Message) -> None:
            if err is None:
                self.delivered += 1
            else:
                self.failed.setdefault(describe_error(err), []).append(number)

        return on_delivery

    def fail(self, error: str, number: int) -> None:
        self.failed.setdefault(error, []).append(number)

    @property
    def failures(self) -> int:
        return sum(len(lines) for lines in self.failed.values())

    def report(self, topic: str) -> str:
        parts = [
            f"{len(lines)} record(s) not delivered to {topic}: {error}"
            f" (first on line {min(lines)})"
            for error, lines in self.failed.items()
        ]
        return "; ".join(parts)


@click.command("produce")
@bootstrap_option
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Line reader settings: parse.key, key.separator, parse.headers, "
                   "headers.delimiter, headers.separator, headers.key.separator, null.marker, "
                   "ignore.error.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="A producer (librdkafka) config; repeatable.")
@click.option("--producer.config", "--producer-config", "producer_config",
              type=click.Path(dir_okay=False, path_type=Path),
              help="A properties file of producer configs (--producer-property wins).")
@click.option("--compression-type", "--compression-codec", "compression",
              type=click.Choice(COMPRESSION_TYPES), help="Compress record batches.")
@click.option("--request-required-acks", "acks", type=click.Choice(["-1", "0", "1", "all"]),
              help="acks: all (-1, the default), 1 or 0.")
@click.option("--sync", is_flag=True, help="Wait for each record to be acknowledged.")
@handle_client_errors
def produce(
    bootstrap_server: str, topic: str, properties: tuple[str, ...],
    producer_properties: tuple[str, ...], producer_config: Path | None, compression: str | None,
    acks: str | None, sync: bool,
) -> None:
    """Produce one record per stdin line, as kafka-console-producer.sh does."""
    _check_topic(topic)
    reader = LineReader.from_properties(parse_assignments(properties, "--property"))
    settings: dict[str, str | int] = {"acks": "all"}
    settings.update(read_properties_file(producer_config, "--producer.config"))
    settings.update(parse_assignments(producer_properties, "--producer-property"))
    timeout_key = next(
        (k for k in ("delivery.timeout.ms", "message.timeout.ms") if k in settings), None
    )
    if timeout_key is None:
        timeout_key = "delivery.timeout.ms"
        settings[timeout_key] = DEFAULT_DELIVERY_TIMEOUT_MS
    try:
        timeout_s = int(settings[timeout_key]) / 1000
    except ValueError as exc:
        raise click.UsageError(f"{timeout_key} must be an integer") from exc
    if timeout_s <= 0:
        timeout_s = 300.0  # 0 means no limit in librdkafka; bound the tool's own wait anyway
    if compression is not None:
        settings["compression.type"] = compression
    if acks is not None:
        settings["acks"] = "all" if acks == "-1" else acks
    config = client_config(bootstrap_server, "samsa-console-producer", settings)
    check_reachable(bootstrap_server)
    producer = Producer(config)
    _connect(producer, bootstrap_server)
    deliveries = Deliveries()
    problem: ToolError | None = None
    try:
        for number, line in enumerate(read_lines(sys.stdin.buffer), 1):
            key, value, headers = reader.parse(line, number)
            _send(producer, topic, key, value, headers, deliveries, number, timeout_s)
            if sync:
                _flush(producer, timeout_s + 5)
            else:
                producer.poll(0)  # serve delivery callbacks as we go
    except ToolError as exc:
        problem = exc  # a line the reader refuses: send what came before it, then report it
    remaining = _flush(producer, timeout_s + 5)
    if problem is not None:
        raise problem
    if remaining:
        deliveries.fail(f"REQUEST_TIMED_OUT: no acknowledgement within {timeout_s:g} s", 0)
    if deliveries.failed:
        raise ToolError(deliveries.report(topic))


def _send(
    producer: Producer, topic: str, key: bytes | None, value: bytes | None,
    headers: list[tuple[str, bytes | None]], deliveries: Deliveries, number: int,
    timeout_s: float,
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            producer.produce(
                topic, value=value, key=key, headers=headers or None,
                on_delivery=deliveries.callback(number),
            )
            deliveries.sent += 1
            return
        except BufferError:
            # The client's queue is full: let deliveries drain it, for at most the timeout.
            if time.monotonic() >= deadline:
                deliveries.fail("QUEUE_FULL: the producer queue stayed full", number)
                return
            producer.poll(0.1)
        except KafkaException as exc:
            deliveries.fail(describe_error(exc), number)
            return


def _flush(producer: Producer, timeout_s: float) -> int:
    """Wait (bounded) until every record is acknowledged or failed; the number still pending."""
    deadline = time.monotonic() + timeout_s
    remaining = len(producer)
    while remaining and time.monotonic() < deadline:
        remaining = producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
    return remaining


# --- consume -------------------------------------------------------------------------------------


@dataclass
class Formatter:
    """Kafka's DefaultMessageFormatter."""

    print_timestamp: bool = False
    print_key: bool = False
    print_offset: bool = False
    print_partition: bool = False
    print_headers: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_literal: bytes = b"null"

    FLAGS = ("print.timestamp", "print.key", "print.offset", "print.partition", "print.headers",
             "print.value")
    SEPARATORS = ("key.separator", "line.separator", "headers.separator",
                  "headers.key.separator", "null.literal")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Formatter:
        known = cls.FLAGS + cls.SEPARATORS
        unknown = sorted(set(props) - set(known))
        if unknown:
            raise click.UsageError(f"unknown --property {unknown[0]} (known: {', '.join(known)})")
        formatter = cls()
        for name in cls.FLAGS:
            if name in props:
                setattr(formatter, name.replace(".", "_"), parse_bool(props[name], name))
        for name in cls.SEPARATORS:
            if name in props:
                setattr(formatter, name.replace(".", "_"), unescape(props[name]).encode())
        return formatter

    def _text(self, data: bytes | None) -> bytes:
        if data is None:
            return self.null_literal
        return data.decode("utf-8", errors="replace").encode("utf-8")

    def format(self, msg: Message) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            kind, timestamp = msg.timestamp()
            if kind == TIMESTAMP_CREATE_TIME:
                fields.append(b"CreateTime:%d" % timestamp)
            elif kind == TIMESTAMP_LOG_APPEND_TIME:
                fields.append(b"LogAppendTime:%d" % timestamp)
            else:
                fields.append(b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(b"Partition:%d" % msg.partition())
        if self.print_offset:
            fields.append(b"Offset:%d" % msg.offset())
        if self.print_headers:
            headers = msg.headers() or []
            fields.append(
                self.headers_separator.join(
                    k.encode() + self.headers_key_separator + self._text(v) for k, v in headers
                ) if headers else b"NO_HEADERS"
            )
        if self.print_key:
            fields.append(self._text(msg.key()))
        if self.print_value:
            fields.append(self._text(msg.value()))
        return self.key_separator.join(fields) + self.line_separator


def parse_start_offset(value: str | None, from_beginning: bool) -> int:
    """--offset / --from-beginning -> a librdkafka start offset."""
    if value is None:
        return OFFSET_BEGINNING if from_beginning else OFFSET_END
    if value == "earliest":
        return OFFSET_BEGINNING
    if value == "latest":
        return OFFSET_END
    try:
        offset = int(value)
    except ValueError:
        offset = -1
    if offset < 0:
        raise click.UsageError(
            f"the provided offset value {value!r} is incorrect. Valid values are 'earliest',"
            " 'latest', or a non-negative long."
        )
    return offset


@click.command("consume")
@bootstrap_option
@click.option("--topic", required=True, help="The topic to consume.")
@click.option("--partition", type=int, help="Only this partition (default: all of them).")
@click.option("--offset", help="Where to start: earliest, latest (the default) or an offset.")
@click.option("--from-beginning", "from_beginning", is_flag=True,
              help="Start at the earliest offset (same as --offset earliest).")
@click.option("--max-messages", "max_messages", type=int,
              help="Exit after this many records.")
@click.option("--timeout-ms", "timeout_ms", type=int,
              help="Exit when no record arrives for this long.")
@click.option("--group", help="Consume as a member of this consumer group (subscribe).")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Output settings: print.key, print.offset, print.timestamp, "
                   "print.partition, print.headers, print.value, key.separator, "
                   "line.separator, headers.separator, headers.key.separator, null.literal.")
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="A consumer (librdkafka) config; repeatable.")
@click.option("--consumer.config", "--consumer-config", "consumer_config",
              type=click.Path(dir_okay=False, path_type=Path),
              help="A properties file of consumer configs (--consumer-property wins).")
@click.option("--isolation-level", "isolation_level",
              type=click.Choice(["read_committed", "read_uncommitted"]),
              help="Whether to read records of aborted or open transactions.")
@handle_client_errors
def consume(
    bootstrap_server: str, topic: str, partition: int | None, offset: str | None,
    from_beginning: bool, max_messages: int | None, timeout_ms: int | None, group: str | None,
    properties: tuple[str, ...], consumer_properties: tuple[str, ...],
    consumer_config: Path | None, isolation_level: str | None,
) -> None:
    """Print records of a topic, one per line, as kafka-console-consumer.sh does."""
    _check_topic(topic)
    if from_beginning and offset is not None:
        raise click.UsageError("--from-beginning and --offset cannot be used together")
    if group is not None and (partition is not None or offset is not None):
        raise click.UsageError("--group cannot be used with --partition or --offset")
    if partition is not None and partition < 0:
        raise click.UsageError("--partition must not be negative")
    if max_messages is not None and max_messages < 1:
        raise click.UsageError("--max-messages must be positive")
    if timeout_ms is not None and timeout_ms < 1:
        raise click.UsageError("--timeout-ms must be positive")
    start = parse_start_offset(offset, from_beginning)
    formatter = Formatter.from_properties(parse_assignments(properties, "--property"))
    settings: dict[str, Any] = {
        "auto.offset.reset": "earliest" if start == OFFSET_BEGINNING else "latest",
        "enable.partition.eof": False,
    }
    if group is None:
        # The Python client insists on a group.id; without subscribe() or commits it is never
        # joined, so nothing is stored for it on the broker.
        settings.update({
            "group.id": f"samsa-console-consumer-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        })
    else:
        settings["group.id"] = group
    if isolation_level is not None:
        settings["isolation.level"] = isolation_level
    settings.update(read_properties_file(consumer_config, "--consumer.config"))
    settings.update(parse_assignments(consumer_properties, "--consumer-property"))
    config = client_config(bootstrap_server, "samsa-console-consumer", settings)
    check_reachable(bootstrap_server)
    consumer = Consumer(config)
    try:
        _connect(consumer, bootstrap_server)
        if group is None:
            consumer.assign(_assignment(consumer, topic, partition, start))
        else:
            consumer.subscribe([topic])
        count = _consume_loop(consumer, formatter, max_messages, timeout_ms)
    finally:
        consumer.close()
    click.echo(f"Processed a total of {count} messages", err=True)


def _assignment(
    consumer: Consumer, topic: str, partition: int | None, start: int
) -> list[TopicPartition]:
    try:
        metadata = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ToolError(describe_error(exc)) from exc
    entry = metadata.topics.get(topic)
    if entry is None or entry.error is not None:
        detail = describe_error(entry.error) if entry is not None and entry.error else ""
        if detail.startswith("UNKNOWN_TOPIC_OR_PARTITION") or entry is None:
            raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: topic '{topic}' does not exist")
        raise ToolError(detail)
    partitions = sorted(entry.partitions)
    if partition is not None:
        if partition not in entry.partitions:
            raise ToolError(
                f"UNKNOWN_TOPIC_OR_PARTITION: topic '{topic}' has no partition {partition}"
                f" (it has {len(partitions)})"
            )
        partitions = [partition]
    return [TopicPartition(topic, p, start) for p in partitions]


def _consume_loop(
    consumer: Consumer, formatter: Formatter, max_messages: int | None, timeout_ms: int | None
) -> int:
    """Print records until --max-messages, --timeout-ms of silence, Ctrl-C or a closed pipe."""
    out = sys.stdout.buffer
    count = 0
    idle_limit = None if timeout_ms is None else timeout_ms / 1000
    last = time.monotonic()
    try:
        while max_messages is None or count < max_messages:
            wait = 1.0
            if idle_limit is not None:
                wait = max(0.0, min(wait, last + idle_limit - time.monotonic()))
            want = _BATCH if max_messages is None else min(_BATCH, max_messages - count)
            # poll() returns as soon as one record is there; then take what is already fetched.
            first = consumer.poll(wait)
            messages = [] if first is None else [first]
            if first is not None and want > 1:
                messages += consumer.consume(num_messages=want - 1, timeout=0)
            printed = False
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == ClientError._PARTITION_EOF or err.retriable():
                        continue
                    raise ToolError(describe_error(err))
                out.write(formatter.format(msg))
                count += 1
                printed = True
            if printed:
                out.flush()
                last = time.monotonic()
            elif idle_limit is not None and time.monotonic() - last >= idle_limit:
                break
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # The reader went away (| head): stop quietly; keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return count
