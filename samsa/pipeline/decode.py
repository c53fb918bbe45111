"""Turning the data source's rows (``value`` binary) into event columns, in Arrow, on the tasks.

Used with ``DataFrame.mapInArrow``: the tasks get Arrow record batches from the samsa source and
return Arrow record batches, so no row ever becomes a Spark ``Row`` in Python. A message that is
not an event fails the task with a message naming its topic, partition and offset: the load
job never drops a row silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

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
    "query string, target string, server string, event_time timestamp, date string, hour int, "
    "referrer string"
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
            ("referrer", pa.string()),  # version 2 of the activity schema on
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


def decode_events(
    batches: Iterator[pa.RecordBatch], writers: Mapping[int, Any] | None = None
) -> Iterator[pa.RecordBatch]:
    """``topic, partition, offset, value`` batches -> :data:`EVENT_COLUMNS` batches.

    ``writers``: the registered writer schemas by schema id (``pipeline.schemas``); without it
    the fixed ``events.SCHEMAS``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from samsa.pipeline.avro_columns import activity_columns

    schema = _event_schema()
    fields = ("event_type", "user_id", "page", "query", "target", "server")
    for batch in batches:
        topics = batch.column("topic")
        partitions = batch.column("partition")
        offsets = batch.column("offset")
        columns = activity_columns(batch.column("value"), writers)
        if columns is None:  # not all Avro activity events: one by one, to say which is not
            columns = _decode_one_by_one(batch, writers)
        event_time = columns["timestamp"].cast(pa.timestamp("ms", tz="UTC")).cast(
            pa.timestamp("us", tz="UTC"))
        arrays = [
            topics,
            partitions,
            offsets,
            *(columns[name] for name in fields),
            event_time,
            utc_dates(columns["timestamp"]),
            pc.hour(event_time).cast(pa.int32()),
            columns.get("referrer", pa.nulls(batch.num_rows, pa.string())),
        ]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _decode_one_by_one(
    batch: pa.RecordBatch, writers: Mapping[int, Any] | None = None
) -> dict[str, pa.Array]:
    import pyarrow as pa

    fields = ("event_type", "user_id", "page", "query", "target", "server", "referrer")
    decoded: dict[str, list[object]] = {name: [] for name in (*fields, "timestamp")}
    for i, value in enumerate(batch.column("value").to_pylist()):
        try:
            event = decode(value, ACTIVITY_SCHEMA_ID, writers)
        except BadEventError as exc:
            where = _where(batch.column("topic")[i].as_py(), batch.column("partition")[i].as_py(),
                           batch.column("offset")[i].as_py())
            raise BadEventError(f"{where} is not an activity event: {exc}") from None
        for name, values in decoded.items():
            values.append(event.get(name))
    out = {name: pa.array(decoded[name], pa.string()) for name in fields}
    out["timestamp"] = pa.array(decoded["timestamp"], pa.int64())
    return out


def utc_dates(millis: pa.Array) -> pa.Array:
    """``YYYY-MM-DD`` (UTC) of each time in milliseconds, as ``strftime`` writes it: one
    string per day the batch spans, taken for each row (strftime costs 0.6 µs a row)."""
    import datetime

    import numpy as np
    import pyarrow as pa

    days = millis.to_numpy(zero_copy_only=False) // 86_400_000
    if len(days) == 0:
        return pa.array([], pa.string())
    low, high = int(days.min()), int(days.max())
    epoch = datetime.date(1970, 1, 1)
    if high - low < 4096:
        labels = [(epoch + datetime.timedelta(days=d)).isoformat() for d in range(low, high + 1)]
        return pa.array(labels, pa.string()).take(pa.array(days - low))
    unique, index = np.unique(days, return_inverse=True)
    labels = [(epoch + datetime.timedelta(days=int(d))).isoformat() for d in unique]
    return pa.array(labels, pa.string()).take(pa.array(index))


def decode_monitoring(
    batches: Iterator[pa.RecordBatch], writers: Mapping[int, Any] | None = None
) -> Iterator[pa.RecordBatch]:
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
                event = decode(value, MONITORING_SCHEMA_ID, writers)
            except BadEventError as exc:
                raise BadEventError(
                    f"{_where(topic, partition, offset)} is not a monitoring event: {exc}"
                ) from None
            for name in ("server", "topic", "window_start", "window_ms", "count"):
                out[name].append(event[name])
            out["source_partition"].append(partition)
            out["source_offset"].append(offset)
        yield pa.RecordBatch.from_pydict(out, schema=schema)
