"""``samsa get-offsets`` (kafka-get-offsets.sh) and ``samsa delete-records``
(kafka-delete-records.sh), through confluent-kafka's admin client.

``get-offsets`` prints ``topic:partition:offset`` for the partitions chosen by ``--topic`` (a
regular expression, as Kafka's GetOffsetShell) and ``--partitions 0,2``, at ``--time``:
``-1`` / ``latest`` (the default), ``-2`` / ``earliest``, ``-3`` / ``max-timestamp``, or a
timestamp in milliseconds (the first offset at or after it; none: the offset is left empty,
as Kafka prints it). ``--exclude-internal-topics`` leaves out ``__consumer_offsets`` and
``__transaction_state``.

``delete-records --offset-json-file F`` takes Kafka's ``{"partitions": [{"topic": "t",
"partition": 0, "offset": 5}], "version": 1}`` (offset -1: the high watermark) and prints::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 5

or ``partition: t-0	error: <Kafka's exception>: <message>`` for a partition that failed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from samsa.tools.admin import connect_admin
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    command_config_option,
    describe_error,
    handle_client_errors,
    read_properties_file,
)
from samsa.tools.reassign_partitions import is_int32, read_json
from samsa.tools.wire import exception_class, kafka_message

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_TIMES = {"-1": OffsetSpec.latest, "latest": OffsetSpec.latest,
          "-2": OffsetSpec.earliest, "earliest": OffsetSpec.earliest,
          "-3": OffsetSpec.max_timestamp, "max-timestamp": OffsetSpec.max_timestamp}


def offset_spec(value: str) -> OffsetSpec:
    named = _TIMES.get(value.strip().lower())
    if named is not None:
        return named()
    try:
        timestamp = int(value)
    except ValueError:
        raise click.UsageError(f"--time must be -1, -2, -3, latest, earliest, max-timestamp or "
                               f"a timestamp in milliseconds, got {value!r}") from None
    if timestamp < 0:
        raise click.UsageError(f"--time: no such special time {timestamp} (-1, -2 or -3)")
    return OffsetSpec.for_timestamp(timestamp)


def parse_partitions(value: str | None) -> set[int] | None:
    if value is None or not value.strip():
        return None
    try:
        return {int(p) for p in value.split(",") if p.strip()}
    except ValueError:
        raise click.UsageError(f"--partitions must be comma-separated partition numbers, "
                               f"got {value!r}") from None


@click.command("get-offsets")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT",
              help="The broker(s) to connect to: host:port, comma separated.")
@command_config_option
@click.option("--topic", help="A regular expression the topics' names must match "
                              "(default: every topic).")
@click.option("--partitions", help="Only these partitions: 0,1,... (default: all).")
@click.option("--time", "time_", default="-1", show_default=True,
              help="-1 or latest, -2 or earliest, -3 or max-timestamp, or a timestamp (ms).")
@click.option("--exclude-internal-topics", "exclude_internal", is_flag=True,
              help="Leave out the internal topics.")
@handle_client_errors
def get_offsets(bootstrap_server: str, command_config: Path | None, topic: str | None,
                partitions: str | None, time_: str, exclude_internal: bool) -> None:
    """Print the offsets of partitions at a time, as kafka-get-offsets.sh does."""
    spec = offset_spec(time_)
    wanted = parse_partitions(partitions)
    try:
        pattern = re.compile(topic) if topic is not None else None
    except re.error as exc:
        raise click.UsageError(f"--topic is not a regular expression: {exc}") from None
    extra = read_properties_file(command_config, "--command-config")
    admin, metadata = connect_admin(bootstrap_server, "samsa-get-offsets", extra)
    chosen = [
        TopicPartition(name, p)
        for name, t in metadata.topics.items()
        if (pattern is None or pattern.fullmatch(name))
        and not (exclude_internal and name in INTERNAL_TOPICS)
        for p in t.partitions if wanted is None or p in wanted]
    if not chosen:
        return
    futures = admin.list_offsets({tp: spec for tp in chosen},
                                 request_timeout=REQUEST_TIMEOUT_S)
    lines = []
    for tp, future in futures.items():
        try:
            offset = future.result(REQUEST_TIMEOUT_S).offset
        except KafkaException as exc:
            raise ToolError(f"{tp.topic}-{tp.partition}: {describe_error(exc)}") from exc
        lines.append((tp.topic, tp.partition, "" if offset < 0 else str(offset)))
    for name, partition, offset in sorted(lines):
        click.echo(f"{name}:{partition}:{offset}")


def records_to_delete(data: Any, where: str) -> list[TopicPartition]:
    """Kafka's DeleteRecordsCommand JSON: the partitions and the offsets to delete before."""
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise ToolError(f"{where}: expected {{\"partitions\": [{{\"topic\": ..., "
                        f"\"partition\": ..., \"offset\": ...}}], \"version\": 1}}")
    found: list[TopicPartition] = []
    for entry in data["partitions"]:
        if not isinstance(entry, dict) or not all(k in entry for k in
                                                  ("topic", "partition", "offset")):
            raise ToolError(f"{where}: every partition needs topic, partition and offset, "
                            f"got {entry!r}")
        topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        if not isinstance(topic, str) or not is_int32(partition) \
                or not isinstance(offset, int) or isinstance(offset, bool):
            raise ToolError(f"{where}: topic must be a string, partition an int32 and offset "
                            f"an integer, got {entry!r}")
        found.append(TopicPartition(topic, partition, offset))
    keys = [(tp.topic, tp.partition) for tp in found]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ToolError("Offset json file contains duplicate topic partitions: "
                        + ",".join(f"{t}-{p}" for t, p in repeated))
    return found


@click.command("delete-records")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT",
              help="The broker(s) to connect to: host:port, comma separated.")
@command_config_option
@click.option("--offset-json-file", "offset_json_file", required=True,
              type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help='{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}')
@handle_client_errors
def delete_records(bootstrap_server: str, command_config: Path | None,
                   offset_json_file: Path) -> None:
    """Delete the records before offsets, as kafka-delete-records.sh does."""
    partitions = records_to_delete(read_json(offset_json_file, "--offset-json-file"),
                                   str(offset_json_file))
    extra = read_properties_file(command_config, "--command-config")
    admin, _ = connect_admin(bootstrap_server, "samsa-delete-records", extra)
    click.echo("Executing records delete operation")
    futures = admin.delete_records(partitions, request_timeout=REQUEST_TIMEOUT_S)
    click.echo("Records delete operation completed:")
    for tp, future in futures.items():
        name = f"{tp.topic}-{tp.partition}"
        try:
            low = future.result(REQUEST_TIMEOUT_S).low_watermark
            click.echo(f"partition: {name}\tlow_watermark: {low}")
        except KafkaException as exc:
            error = exc.args[0]
            code = error.code() if hasattr(error, "code") else -1
            text = (f"{exception_class(code)}: {kafka_message(code) or error.str()}"
                    if code > 0 else describe_error(exc))  # librdkafka's own are negative
            click.echo(f"partition: {name}\terror: {text}")
