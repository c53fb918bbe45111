"""Turning the data source's rows (``value`` binary) into event columns, in Arrow, on the tasks.

Used with ``DataFrame.mapInArrow``: the tasks get Arrow record batches from the samsa source and
return Arrow record batches, so no row ever becomes a Spark ``Row`` in Python. A message that is
not an event fails the task with a message naming its topic, partition and offset: the load
job never drops a row silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from samsa.pipeline.events import (
    ACTIVITY_SCHEMA_ID,
    MONITORING_SCHEMA_ID,
    BadEventError,
    decode,
)

if TYPE_CHECKING:
    import pyarrow as pa

#: the loaded table's columns; ``date`` and ``hour`` (UTC, of the event time) partition it
EVENT_COLUMNS = (
    "topic string, partition int, offset long, event_type string, user_id string, page string, "
    "query string, target string, server string, event_time timestamp, date string, hour int"
)
MONITORING_COLUMNS = (
    "server string, topic string, window_start long, window_ms long, count long, "
    "source_partition int, source_offset long"
)


def _event_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("event_type", pa.string()),
            ("user_id", pa.string()),
            ("page", pa.string()),
            ("query", pa.string()),
            ("target", pa.string()),
            ("server", pa.string()),
            ("event_time", pa.timestamp("us", tz="UTC")),
            ("date", pa.string()),
            ("hour", pa.int32()),
        ]
    )


def _monitoring_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("server", pa.string()),
            ("topic", pa.string()),
            ("window_start", pa.int64()),
            ("window_ms", pa.int64()),
            ("count", pa.int64()),
            ("source_partition", pa.int32()),
            ("source_offset", pa.int64()),
        ]
    )


def _where(topic: str, partition: int, offset: int) -> str:
    return f"{topic}-{partition} at offset {offset}"


def decode_events(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``topic, partition, offset, value`` batches -> :data:`EVENT_COLUMNS` batches."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = _event_schema()
    fields = ("event_type", "user_id", "page", "query", "target", "server")
    for batch in batches:
        topics = batch.column("topic")
        partitions = batch.column("partition")
        offsets = batch.column("offset")
        decoded: dict[str, list[object]] = {name: [] for name in (*fields, "timestamp")}
        for i, value in enumerate(batch.column("value").to_pylist()):
            try:
                event = decode(value, ACTIVITY_SCHEMA_ID)
            except BadEventError as exc:
                where = _where(topics[i].as_py(), partitions[i].as_py(), offsets[i].as_py())
                raise BadEventError(f"{where} is not an activity event: {exc}") from None
            for name, values in decoded.items():
                values.append(event[name])
        event_time = pa.array(decoded.pop("timestamp"), pa.int64()).cast(
            pa.timestamp("ms", tz="UTC")
        ).cast(pa.timestamp("us", tz="UTC"))
        columns = [
            topics,
            partitions,
            offsets,
            *(pa.array(decoded[name], pa.string()) for name in fields),
            event_time,
            pc.strftime(event_time, format="%Y-%m-%d"),
            pc.hour(event_time).cast(pa.int32()),
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def decode_monitoring(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``topic, partition, offset, value`` batches -> :data:`MONITORING_COLUMNS` batches."""
    import pyarrow as pa

    schema = _monitoring_schema()
    for batch in batches:
        out: dict[str, list[object]] = {name: [] for name in schema.names}
        for topic, partition, offset, value in zip(
            batch.column("topic").to_pylist(),
            batch.column("partition").to_pylist(),
            batch.column("offset").to_pylist(),
            batch.column("value").to_pylist(),
            strict=True,
        ):
            try:
                event = decode(value, MONITORING_SCHEMA_ID)
            except BadEventError as exc:
                raise BadEventError(
                    f"{_where(topic, partition, offset)} is not a monitoring event: {exc}"
                ) from None
            for name in ("server", "topic", "window_start", "window_ms", "count"):
                out[name].append(event[name])
            out["source_partition"].append(partition)
            out["source_offset"].append(offset)
        yield pa.RecordBatch.from_pydict(out, schema=schema)
