"""The write side of ``format("samsa")``, ``df.write`` and ``df.writeStream``: Spark's Kafka sink.

Columns, as Spark's connector (``KafkaWriter.validateQuery``): ``value`` (required, string or
binary), ``key`` (string or binary), ``topic`` (string; required unless the ``topic`` or ``path``
option is given: the ``topic`` option overrides ``path``, which overrides the column),
``partition`` (int; null or absent: the producer's partitioner) and ``headers``
(``array<struct<key string, value binary>>``). Other columns are ignored, as in Spark.

The schema and the options are checked on the driver, so a bad column or option fails the query
before any task runs. Each task produces its rows with one confluent-kafka ``Producer``, flushes
at the end and fails if any delivery failed: at-least-once, as Spark's connector (a retried task
may write its rows twice). Driver-side commit and abort have nothing to do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from samsa.spark.source import SamsaSourceError

log = logging.getLogger(__name__)

# Producer options a user may not set, as in Spark's Kafka sink (KafkaSourceProvider).
_FORBIDDEN_PRODUCER = {
    "key.serializer": "keys are always written as bytes (string keys as UTF-8)",
    "value.serializer": "values are always written as bytes (string values as UTF-8)",
}
# Spark's producer is the Java client, whose default partitioner hashes keys with murmur2: keep
# the same key -> partition placement unless the user sets kafka.partitioner.
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random"}
#: how long produce() waits for room in a full local queue before it fails the task
QUEUE_FULL_TIMEOUT_S = 300.0


class SamsaWriteError(SamsaSourceError):
    """A bad column, option or row for a write, or a failed delivery; the message names it."""


@dataclass
class SamsaCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver: how many records it produced."""

    count: int


def producer_params(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without the prefix, for a confluent-kafka ``Producer``."""
    params = dict(_PRODUCER_DEFAULTS)
    for key, value in options.items():
        lowered = str(key).lower()
        if not lowered.startswith("kafka."):
            continue
        name = lowered[len("kafka.") :]
        if name in _FORBIDDEN_PRODUCER:
            raise SamsaWriteError(
                f"Kafka option 'kafka.{name}' is not supported: {_FORBIDDEN_PRODUCER[name]}"
            )
        params[name] = str(value)
    if not params.get("bootstrap.servers"):
        raise SamsaWriteError("option 'kafka.bootstrap.servers' must be specified")
    return params


def _type_name(data_type: DataType) -> str:
    return data_type.simpleString()


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType):
        return False
    element = data_type.elementType
    if not isinstance(element, StructType) or len(element.fields) != 2:
        return False
    key, value = element.fields
    return (
        key.name == "key"
        and isinstance(key.dataType, StringType)
        and value.name == "value"
        and isinstance(value.dataType, BinaryType)
    )


@dataclass(frozen=True)
class WritePlan:
    """Where each Kafka field comes from: a fixed topic or column positions in the rows."""

    topic: str | None
    topic_index: int | None
    key_index: int | None
    value_index: int
    partition_index: int | None
    headers_index: int | None


def plan_write(options: Mapping[str, str], schema: StructType) -> WritePlan:
    """Check the DataFrame's schema and the topic options as Spark's ``validateQuery`` does."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    index = {f.name.lower(): i for i, f in enumerate(schema.fields)}

    def column(name: str, allowed: tuple[type[DataType], ...], wanted: str) -> int | None:
        i = index.get(name)
        if i is None:
            return None
        data_type = schema.fields[i].dataType
        if not isinstance(data_type, allowed):
            raise SamsaWriteError(
                f"column '{name}' must be of type {wanted}, got {_type_name(data_type)}"
            )
        return i

    topic = opts.get("topic") or opts.get("path") or None
    if "topic" in opts and not opts["topic"].strip():
        raise SamsaWriteError("option 'topic' is empty")
    topic_index = None
    if topic is None:
        if "topic" not in index:
            raise SamsaWriteError(
                "no 'topic' column and no 'topic' option: add a string column 'topic' or set "
                "the option 'topic'"
            )
        topic_index = column("topic", (StringType,), "string")
    value_index = column("value", (StringType, BinaryType), "string or binary")
    if value_index is None:
        raise SamsaWriteError(
            "required column 'value' not found (columns: "
            + ", ".join(f.name for f in schema.fields)
            + ")"
        )
    key_index = column("key", (StringType, BinaryType), "string or binary")
    partition_index = column("partition", (IntegerType,), "int")
    headers_index = index.get("headers")
    if headers_index is not None and not _is_headers_type(schema.fields[headers_index].dataType):
        raise SamsaWriteError(
            "column 'headers' must be of type array<struct<key:string,value:binary>>, got "
            + _type_name(schema.fields[headers_index].dataType)
        )
    return WritePlan(topic, topic_index, key_index, value_index, partition_index, headers_index)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _headers(raw: Sequence[Any] | None) -> list[tuple[str, bytes | None]] | None:
    if raw is None:
        return None
    out: list[tuple[str, bytes | None]] = []
    for header in raw:
        if header is None or header[0] is None:
            raise SamsaWriteError("column 'headers': a header or a header key is null")
        out.append((header[0], _as_bytes(header[1])))
    return out


def write_rows(rows: Iterator[Any], plan: WritePlan, params: Mapping[str, str]) -> int:
    """Produce every row, flush, and raise if any delivery failed; the number of records."""
    import time

    from confluent_kafka import KafkaException, Producer

    producer = Producer(dict(params))
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}-{msg.partition()}: {err}")

    count = 0
    for row in rows:
        if failures:  # as Spark: stop at the first failed delivery
            break
        topic = plan.topic if plan.topic is not None else row[plan.topic_index]
        if topic is None:
            raise SamsaWriteError(
                "column 'topic' is null in a row: set the option 'topic' or fill the column"
            )
        kwargs: dict[str, Any] = {"value": _as_bytes(row[plan.value_index])}
        if plan.key_index is not None:
            kwargs["key"] = _as_bytes(row[plan.key_index])
        if plan.partition_index is not None and row[plan.partition_index] is not None:
            kwargs["partition"] = row[plan.partition_index]
        if plan.headers_index is not None:
            headers = _headers(row[plan.headers_index])
            if headers:
                kwargs["headers"] = headers
        deadline = time.monotonic() + QUEUE_FULL_TIMEOUT_S
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                if time.monotonic() >= deadline:
                    raise SamsaWriteError(
                        f"the producer's queue stayed full for {QUEUE_FULL_TIMEOUT_S:.0f} s"
                    ) from None
                producer.poll(0.1)
            except KafkaException as exc:
                where = f"{topic}" + (f"-{kwargs['partition']}" if "partition" in kwargs else "")
                raise SamsaWriteError(f"producing to {where} failed: {exc}") from None
        producer.poll(0)
        count += 1
    remaining = producer.flush()
    if failures:
        shown = "; ".join(failures[:5])
        more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
        raise SamsaWriteError(f"{len(failures)} record(s) were not delivered: {shown}{more}")
    if remaining:
        raise SamsaWriteError(f"{remaining} record(s) were still undelivered after flush")
    return count


def _check_producer_config(params: Mapping[str, str]) -> None:
    """Fail on the driver for an option librdkafka does not know, not in every task."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer(dict(params))
    except KafkaException as exc:
        raise SamsaWriteError(f"bad Kafka producer option: {exc.args[0].str()}") from None


class _WriteBase:
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opts = {str(k): str(v) for k, v in options.items()}
        self.params = producer_params(opts)
        self.plan = plan_write(opts, schema)
        _check_producer_config(self.params)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return SamsaCommitMessage(write_rows(iterator, self.plan, self.params))


def _total(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.count for m in messages if isinstance(m, SamsaCommitMessage))


class SamsaWriter(_WriteBase, DataSourceWriter):
    """``df.write.format("samsa")``: every task produces its rows (append only)."""

    def __init__(
        self, options: Mapping[str, str], schema: StructType, overwrite: bool = False
    ) -> None:
        if overwrite:
            raise SamsaWriteError(
                "save mode 'overwrite' is not allowed for samsa: use 'append' or "
                "'errorifexists' (the default)"
            )
        super().__init__(options, schema)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("samsa write committed: %d record(s)", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already delivered stay in the log: at-least-once, as Spark's Kafka sink.
        log.warning("samsa write aborted after %d delivered record(s)", _total(messages))


class SamsaStreamWriter(_WriteBase, DataSourceStreamWriter):
    """``df.writeStream.format("samsa")``: each microbatch as a batch write."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.debug("samsa microbatch %d committed: %d record(s)", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("samsa microbatch %d aborted: %d record(s)", batchId, _total(messages))
