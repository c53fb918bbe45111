"""``SamsaDataSource``: the batch read path, with the options and schema of Spark's Kafka connector.

Offsets are resolved on the driver (``SamsaBatchReader.__init__``) with confluent-kafka, so each
Spark partition is a fixed ``(topic, partition, start, end)`` range; tasks read their range
(never a group subscription, never a commit) and yield ``pyarrow.RecordBatch`` objects: by
Fetch, decoding whole record batches into Arrow columns (``fetch_read``), or, for the client
settings that path does not know, with a librdkafka consumer's ``assign``, message by message.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
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

if TYPE_CHECKING:
    import pyarrow as pa

EARLIEST = -2
LATEST = -1

#: rows per yielded Arrow record batch
BATCH_ROWS = 10_000
#: a task that sees no progress for this long fails (or stops, with failOnDataLoss=false)
DEFAULT_POLL_TIMEOUT_MS = 60_000
#: librdkafka settings of the tasks' consumers (read_range_librdkafka) that a kafka.* option may
#: override. librdkafka stops prefetching at 100,000 queued messages and then waits
#: fetch.queue.backoff.ms (1 s) before fetching again; a task converting rows in Python drains
#: that queue within the wait, so with the default it idles about half the time (2x the rows/s
#: in bench/spark_bench.py). queued.max.messages.kbytes (64 MiB) still bounds the memory.
TASK_CLIENT_DEFAULTS = {"queued.min.messages": "1000000"}
#: what both the driver's and the tasks' consumers default to: Spark's Kafka source reads with
#: the Java consumer's read_uncommitted unless kafka.isolation.level says otherwise, while
#: librdkafka's own default is read_committed
CLIENT_DEFAULTS = {"isolation.level": "read_uncommitted"}
#: timeout of the driver's metadata and offset requests
DRIVER_TIMEOUT_S = 30.0

# Kafka client options a user may not set, as in Spark's Kafka connector: the source owns the
# positions (assign + seek) and never commits. kafka.group.id is allowed, as in Spark: the
# consumers use it as their group.id but still assign partitions and never join or commit.
_FORBIDDEN_KAFKA = {
    "group.instance.id": "the source reads with assign and never joins a consumer group",
    "auto.offset.reset": "use startingOffsets / endingOffsets instead",
    "enable.auto.commit": "the source never commits offsets",
    "enable.auto.offset.store": "the source never commits offsets",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
}
_INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}
_STRATEGIES = {"error", "latest"}


class SamsaSourceError(ValueError):
    """A bad option or an impossible read; the message names the option or topic-partition."""


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter``), headers when asked."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema PySpark expects for :func:`kafka_schema` (``to_arrow_schema``, UTC)."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise SamsaSourceError(f"option '{name}' must be 'true' or 'false', got {raw!r}")
    return text == "true"


def _int_option(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        raise SamsaSourceError(f"option '{name}' must be an integer, got {raw!r}") from None


def _parse_json(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SamsaSourceError(f"option '{name}' is not valid JSON ({exc.msg}): {raw!r}") from None


def _parse_partition_map(name: str, raw: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 23, "1": -2}}`` -> ``{(topic, 0): 23, (topic, 1): -2}``."""
    data = _parse_json(name, raw)
    example = 'expected JSON like {"topicA": {"0": 23, "1": -1}}'
    if not isinstance(data, dict):
        raise SamsaSourceError(f"option '{name}' is malformed, {example}: {raw!r}")
    out: dict[tuple[str, int], int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise SamsaSourceError(f"option '{name}' is malformed, {example}: {raw!r}")
        for part, value in parts.items():
            try:
                p = int(part)
            except (TypeError, ValueError):
                raise SamsaSourceError(
                    f"option '{name}': partition {part!r} of topic {topic!r} is not an integer"
                ) from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise SamsaSourceError(
                    f"option '{name}': value for {topic}-{p} must be an integer, got {value!r}"
                )
            out[(topic, p)] = value
    return out


def _parse_assign(raw: str) -> list[tuple[str, int]]:
    data = _parse_json("assign", raw)
    example = 'expected JSON like {"topicA": [0, 1]}'
    if not isinstance(data, dict) or not data:
        raise SamsaSourceError(f"option 'assign' is malformed, {example}: {raw!r}")
    out: list[tuple[str, int]] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in parts
        ):
            raise SamsaSourceError(f"option 'assign' is malformed, {example}: {raw!r}")
        out.extend((topic, p) for p in parts)
    return out


def kafka_params(options: Mapping[str, str]) -> tuple[dict[str, str], int | None]:
    """The ``kafka.*`` options without the prefix, and ``kafka.poll.timeout`` (ms) if given."""
    params: dict[str, str] = {}
    poll_timeout: int | None = None
    for key, value in options.items():
        lowered = key.lower()
        if not lowered.startswith("kafka."):
            continue
        name = lowered[len("kafka.") :]
        if name in _FORBIDDEN_KAFKA:
            raise SamsaSourceError(
                f"Kafka option 'kafka.{name}' is not supported: {_FORBIDDEN_KAFKA[name]}"
            )
        if name in ("poll.timeout", "poll.timeout.ms"):
            poll_timeout = _int_option(options, key)
            continue
        params[name] = str(value)
    if not params.get("bootstrap.servers"):
        raise SamsaSourceError("option 'kafka.bootstrap.servers' must be specified")
    return params, poll_timeout


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark partition: offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges in proportion to their size so that there are at least ``min_partitions``
    (as far as there are offsets to split), as Spark's ``KafkaOffsetRangeCalculator``."""
    non_empty = [r for r in ranges if r.size > 0]
    if not min_partitions or len(non_empty) >= min_partitions:
        return non_empty
    total = sum(r.size for r in non_empty)
    out: list[OffsetRange] = []
    for r in non_empty:
        # Scala's math.round (half up), as Spark does
        parts = min(r.size, max(1, math.floor(r.size / total * min_partitions + 0.5)))
        step, extra = divmod(r.size, parts)
        start = r.start
        for i in range(parts):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


class SamsaDataSource(DataSource):
    """``spark.read.format("samsa")``: samsa (or any Kafka broker) with Spark's Kafka options."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> StructType:
        return kafka_schema(_bool_option(self.options, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return SamsaBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        from samsa.spark.stream import SamsaStreamReader  # stream.py builds on this module

        return SamsaStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from samsa.spark.writer import SamsaWriter

        return SamsaWriter(self.options, schema, overwrite)

    def streamWriter(  # noqa: N802
        self, schema: StructType, overwrite: bool
    ) -> DataSourceStreamWriter:
        from samsa.spark.writer import SamsaStreamWriter

        return SamsaStreamWriter(self.options, schema)


class RangeReader:
    """What the batch and the stream reader share: the options of the tasks, and a task reading
    its offset range."""

    def _task_options(self, opts: Mapping[str, str]) -> None:
        self.include_headers = _bool_option(opts, "includeHeaders", False)
        self.fail_on_data_loss = _bool_option(opts, "failOnDataLoss", True)
        self.kafka_params, poll_timeout = kafka_params(opts)
        spark_poll = _int_option(opts, "kafkaConsumer.pollTimeoutMs")
        self.poll_timeout_ms = poll_timeout or spark_poll or DEFAULT_POLL_TIMEOUT_MS

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        if partition.size <= 0:
            return
        yield from read_range(
            partition,
            self.kafka_params,
            include_headers=self.include_headers,
            fail_on_data_loss=self.fail_on_data_loss,
            poll_timeout_ms=self.poll_timeout_ms,
        )


class SamsaBatchReader(RangeReader, DataSourceReader):
    """Plans the offset ranges on the driver; ``read`` runs in the tasks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        self._task_options(opts)
        min_partitions = _int_option(opts, "minPartitions")
        if min_partitions is not None and min_partitions <= 0:
            raise SamsaSourceError(f"option 'minPartitions' must be positive, got {min_partitions}")
        self.ranges = split_ranges(_plan(opts, self.kafka_params), min_partitions)

    def partitions(self) -> Sequence[InputPartition]:
        if not self.ranges:  # nothing to read: one task that yields nothing
            return [OffsetRange("", 0, 0, 0)]
        return list(self.ranges)



# --- driver: which topic-partitions, which offsets ---------------------------------------------


def _driver_consumer(params: Mapping[str, str]) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "group.id": f"samsa-spark-driver-{uuid.uuid4()}",
            **CLIENT_DEFAULTS,
            **params,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )


def _topic_partitions(opts: Mapping[str, str], metadata: Any) -> list[tuple[str, int]]:
    strategies = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(strategies) != 1:
        raise SamsaSourceError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be "
            f"specified, got {len(strategies)}"
            + (f" ({', '.join(strategies)})" if strategies else "")
        )
    topics: dict[str, Any] = {name: t for name, t in metadata.topics.items() if t.error is None}
    strategy = strategies[0]
    if strategy == "subscribe":
        names = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not names:
            raise SamsaSourceError("option 'subscribe' names no topic")
        for name in names:
            if name not in topics:
                raise SamsaSourceError(f"option 'subscribe': unknown topic '{name}'")
        return [(n, p) for n in names for p in sorted(topics[n].partitions)]
    if strategy == "subscribepattern":
        raw = opts["subscribepattern"]
        try:
            pattern = re.compile(raw)
        except re.error as exc:
            raise SamsaSourceError(
                f"option 'subscribePattern' is not a valid regex: {exc}"
            ) from None
        names = sorted(
            n for n in topics if n not in _INTERNAL_TOPICS and pattern.fullmatch(n) is not None
        )
        return [(n, p) for n in names for p in sorted(topics[n].partitions)]
    pairs = _parse_assign(opts["assign"])
    for topic, part in pairs:
        if topic not in topics:
            raise SamsaSourceError(f"option 'assign': unknown topic '{topic}'")
        if part not in topics[topic].partitions:
            raise SamsaSourceError(f"option 'assign': topic '{topic}' has no partition {part}")
    return pairs


def _by_timestamp(
    consumer: Any,
    name: str,
    wanted: Mapping[tuple[str, int], int],
    watermarks: Mapping[tuple[str, int], tuple[int, int]],
    strategy: str,
) -> dict[tuple[str, int], int]:
    """First offset whose timestamp is >= the given one, per topic-partition."""
    from confluent_kafka import TopicPartition

    if not wanted:
        return {}
    found = consumer.offsets_for_times(
        [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()], timeout=DRIVER_TIMEOUT_S
    )
    out: dict[tuple[str, int], int] = {}
    for tp in found:
        key = (tp.topic, tp.partition)
        if tp.error is not None:
            raise SamsaSourceError(
                f"option '{name}': lookup for {tp.topic}-{tp.partition} failed: {tp.error}"
            )
        if tp.offset >= 0:
            out[key] = tp.offset
        elif strategy == "error":
            raise SamsaSourceError(
                f"option '{name}': no offset of {tp.topic}-{tp.partition} has a timestamp at or "
                f"after {wanted[key]}"
            )
        else:
            out[key] = watermarks[key][1]
    return out


def _specific(
    name: str,
    raw: str,
    tps: Sequence[tuple[str, int]],
    forbidden: int,
    forbidden_word: str,
) -> dict[tuple[str, int], int]:
    """``startingOffsets`` / ``endingOffsets`` as a per topic-partition offset (maybe -1/-2)."""
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        if text.lower() == forbidden_word:
            raise SamsaSourceError(f"option '{name}' can't be '{forbidden_word}' for batch queries")
        value = EARLIEST if text.lower() == "earliest" else LATEST
        return dict.fromkeys(tps, value)
    offsets = _parse_partition_map(name, text)
    if set(offsets) != set(tps):
        missing = sorted(set(tps) - set(offsets))
        extra = sorted(set(offsets) - set(tps))
        raise SamsaSourceError(
            f"option '{name}' with specific offsets must name exactly the read topic-partitions"
            + (f"; missing {', '.join(f'{t}-{p}' for t, p in missing)}" if missing else "")
            + (f"; not read {', '.join(f'{t}-{p}' for t, p in extra)}" if extra else "")
        )
    for (t, p), off in offsets.items():
        if off == forbidden:
            raise SamsaSourceError(
                f"option '{name}' for {t}-{p} can't be {forbidden} ({forbidden_word}) for batch "
                "queries"
            )
        if off < EARLIEST:
            raise SamsaSourceError(f"option '{name}' for {t}-{p}: invalid offset {off}")
    return offsets


def _timestamps(
    opts: Mapping[str, str],
    single: str,
    by_partition: str,
    tps: Sequence[tuple[str, int]],
) -> tuple[str, dict[tuple[str, int], int]] | None:
    """``startingTimestamp`` takes precedence over ``startingOffsetsByTimestamp`` (as Spark)."""
    if single.lower() in opts:
        ts = _int_option(opts, single)
        assert ts is not None
        return single, dict.fromkeys(tps, ts)
    if by_partition.lower() in opts:
        wanted = _parse_partition_map(by_partition, opts[by_partition.lower()])
        missing = sorted(set(tps) - set(wanted))
        if missing:
            raise SamsaSourceError(
                f"option '{by_partition}' must name every read topic-partition; missing "
                + ", ".join(f"{t}-{p}" for t, p in missing)
            )
        return by_partition, {tp: wanted[tp] for tp in tps}
    return None


def _plan(opts: Mapping[str, str], params: Mapping[str, str]) -> list[OffsetRange]:
    from confluent_kafka import TopicPartition

    fail_on_data_loss = _bool_option(opts, "failOnDataLoss", True)
    start_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if start_strategy not in _STRATEGIES:
        raise SamsaSourceError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"got {start_strategy!r}"
        )
    consumer = _driver_consumer(params)
    try:
        metadata = consumer.list_topics(timeout=DRIVER_TIMEOUT_S)
        tps = _topic_partitions(opts, metadata)
        # option validation before any offset request
        start_ts = _timestamps(opts, "startingTimestamp", "startingOffsetsByTimestamp", tps)
        end_ts = _timestamps(opts, "endingTimestamp", "endingOffsetsByTimestamp", tps)
        starts = _specific(
            "startingOffsets", opts.get("startingoffsets", "earliest"), tps, LATEST, "latest"
        )
        ends = _specific(
            "endingOffsets", opts.get("endingoffsets", "latest"), tps, EARLIEST, "earliest"
        )
        watermarks: dict[tuple[str, int], tuple[int, int]] = {}
        for t, p in tps:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(t, p), timeout=DRIVER_TIMEOUT_S, cached=False
            )
            watermarks[(t, p)] = (low, high)
        if start_ts is not None:
            starts = _by_timestamp(consumer, start_ts[0], start_ts[1], watermarks, start_strategy)
        if end_ts is not None:
            ends = _by_timestamp(consumer, end_ts[0], end_ts[1], watermarks, "latest")
    finally:
        consumer.close()

    ranges: list[OffsetRange] = []
    for t, p in tps:
        low, high = watermarks[(t, p)]
        start = {EARLIEST: low, LATEST: high}.get(starts[(t, p)], starts[(t, p)])
        end = {EARLIEST: low, LATEST: high}.get(ends[(t, p)], ends[(t, p)])
        if start < low:
            if fail_on_data_loss:
                raise SamsaSourceError(
                    f"data loss in {t}-{p}: the requested starting offset {start} is below the "
                    f"log start offset {low} (records were deleted). Set failOnDataLoss=false to "
                    "start at the log start offset instead."
                )
            start = low
        if end < start:
            if end >= low or fail_on_data_loss:
                raise SamsaSourceError(
                    f"{t}-{p}: the ending offset {end} is below the starting offset {start}"
                )
            end = start  # the whole requested range was deleted
        ranges.append(OffsetRange(t, p, start, end))
    return ranges


# --- tasks: read one range ---------------------------------------------------------------------


def read_range(
    rng: OffsetRange,
    params: Mapping[str, str],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Records ``[rng.start, rng.end)`` of one topic-partition as Arrow record batches.

    Stops at ``end``, or at the high watermark when the range reaches past it. Offsets missing
    inside the range (compaction, transaction markers) are skipped. With no progress for
    ``poll_timeout_ms`` the task fails (failOnDataLoss=true) or ends (false): it never hangs.

    Reads with Fetch and decodes the record batches in bulk (``fetch_read``) where the client
    settings allow (PLAINTEXT, the settings that path knows, a broker that speaks Fetch v12);
    otherwise message by message with librdkafka.
    """
    from samsa.spark.fetch_read import DataLoss, ReadFailed, fetch_settings, read_range_fetch
    from samsa.spark.fetched import UnsupportedBatch
    from samsa.spark.task_client import NotSupported

    settings = fetch_settings({**CLIENT_DEFAULTS, **params})
    if settings is not None:
        started = False
        try:
            for batch in read_range_fetch(
                rng, settings, arrow_schema(include_headers),
                fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=poll_timeout_ms,
                batch_rows=batch_rows,
            ):
                started = True
                yield batch
            return
        except (DataLoss, ReadFailed) as exc:
            raise SamsaSourceError(str(exc)) from None
        except (NotSupported, UnsupportedBatch) as exc:  # an old broker, or old messages
            if started:
                raise SamsaSourceError(f"reading {rng.topic}-{rng.partition}: {exc}") from None
    yield from read_range_librdkafka(
        rng, params, include_headers=include_headers, fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout_ms, batch_rows=batch_rows,
    )


def read_range_librdkafka(
    rng: OffsetRange,
    params: Mapping[str, str],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_range` with a confluent-kafka Consumer, one message at a time."""
    import time

    import pyarrow as pa
    from confluent_kafka import (
        TIMESTAMP_CREATE_TIME,
        TIMESTAMP_LOG_APPEND_TIME,
        Consumer,
        KafkaError,
        TopicPartition,
    )

    schema = arrow_schema(include_headers)
    where = f"{rng.topic}-{rng.partition}"
    consumer = Consumer(
        {
            "group.id": f"samsa-spark-task-{uuid.uuid4()}",
            **CLIENT_DEFAULTS,
            **TASK_CLIENT_DEFAULTS,
            **params,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
            "enable.partition.eof": False,
        }
    )
    tp = TopicPartition(rng.topic, rng.partition, rng.start)
    ts_types = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}

    def flush() -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(columns, schema=schema)
        for values in columns.values():
            values.clear()
        return batch

    try:
        consumer.assign([tp])
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            messages = consumer.consume(
                num_messages=min(batch_rows, max(1, rng.end - position)), timeout=1.0
            )
            progressed = False
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.code() in (
                        KafkaError._AUTO_OFFSET_RESET,
                        KafkaError.OFFSET_OUT_OF_RANGE,
                    ):
                        raise SamsaSourceError(
                            f"data loss in {where}: offset {position} is no longer available "
                            f"(requested range [{rng.start}, {rng.end})): {err.str()}. Set "
                            "failOnDataLoss=false to skip deleted records."
                        )
                    raise SamsaSourceError(f"reading {where} failed at offset {position}: {err}")
                offset = msg.offset()
                if offset < position:
                    continue
                if offset >= rng.end:
                    position = rng.end
                    break
                ts_type, ts_ms = msg.timestamp()
                columns["key"].append(msg.key())
                columns["value"].append(msg.value())
                columns["topic"].append(rng.topic)
                columns["partition"].append(rng.partition)
                columns["offset"].append(offset)
                columns["timestamp"].append(ts_ms * 1000 if ts_type in ts_types else None)
                columns["timestampType"].append(ts_types.get(ts_type, -1))
                if include_headers:
                    headers = msg.headers()
                    columns["headers"].append(
                        [{"key": k, "value": v if v is None else bytes(v)} for k, v in headers]
                        if headers
                        else None
                    )
                position = offset + 1
                progressed = True
                if len(columns["offset"]) >= batch_rows:
                    yield flush()
            if position >= rng.end:
                break
            if progressed:
                last_progress = time.monotonic()
                # past markers or aborted records at the end of the range: no record will
                # reach ``end - 1``, so do not wait for one
                pos = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
                if pos >= rng.end:
                    break
                continue
            # nothing new: past the markers at the end of the range, or at the high watermark?
            consumer_pos = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
            if consumer_pos >= rng.end:
                break
            _, high = consumer.get_watermark_offsets(
                TopicPartition(rng.topic, rng.partition), timeout=10.0, cached=False
            )
            if high <= max(position, consumer_pos):
                break
            if (time.monotonic() - last_progress) * 1000 >= poll_timeout_ms:
                if fail_on_data_loss:
                    raise SamsaSourceError(
                        f"timed out reading {where}: no record after offset {position - 1} "
                        f"within {poll_timeout_ms} ms (range [{rng.start}, {rng.end}), high "
                        f"watermark {high}); set kafka.poll.timeout or failOnDataLoss=false"
                    )
                break
        if columns["offset"]:
            yield flush()
    finally:
        consumer.close()
