"""Activity events in Avro (Confluent framing) to Arrow columns, all messages of a batch at once.

Every field of the activity schema is a zig-zag varint or starts with one (a string's length,
a union's branch, the timestamp), so the fields of all messages are decoded together with
numpy, one field after the other (``samsa.spark.arrow_records.zigzag_varints``), and the
strings become Arrow arrays over the messages' bytes. Nothing is decided here about a message
this cannot read: a batch holding any message that is not an activity event in Avro with its
schema id (JSON, another schema, a bad body, a time out of range, bytes that are not UTF-8)
returns None, and the caller decodes that batch message by message
(``samsa.pipeline.events.decode``), which says what is wrong where.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from samsa.errors import CorruptRecordError
from samsa.pipeline.events import (
    ACTIVITY_SCHEMA,
    ACTIVITY_SCHEMA_ID,
    ACTIVITY_SCHEMA_V2,
    AVRO_MAGIC,
    MAX_TIMESTAMP_MS,
)
from samsa.spark.arrow_records import binary_array, zigzag_varints

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

#: zero bytes after the copied message bytes (Arrow views read whole 4-byte words)
_PAD = 16
#: magic byte and schema id
_FRAMING = 5


def activity_columns(
    values: pa.Array, writers: Mapping[int, Any] | None = None
) -> dict[str, pa.Array] | None:
    """The activity schema's fields (``timestamp`` as int64 milliseconds, strings as Arrow
    strings) of every message in ``values`` (binary), or None when any message is not one
    this reads (see the module's docstring).

    ``writers``: the registered writer schemas by schema id; the messages of each id are decoded
    together with that schema's fields, into the fields of ``ACTIVITY_SCHEMA_V2`` (a field the
    writer lacks is null, as its default says). Without it, only ``ACTIVITY_SCHEMA_ID`` is read."""
    import numpy as np
    import pyarrow as pa

    n = len(values)
    if n == 0 or values.null_count:
        return None
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset * 4)
    first, last = int(offsets[0]), int(offsets[-1])
    payload = bytearray(last - first + _PAD)
    payload[: last - first] = memoryview(values.buffers()[2])[first:last]
    data = np.frombuffer(payload, np.uint8)
    start = offsets[:-1].astype(np.int64) - first
    end = offsets[1:].astype(np.int64) - first
    if np.any(end - start < _FRAMING):
        return None
    framing = np.ndarray(buffer=data, dtype=">u4", shape=(len(data) - 3,), strides=(1,))
    if np.any(data[start] != AVRO_MAGIC):
        return None
    ids = framing[start + 1].astype(np.int64)
    if writers is None:
        writers = {ACTIVITY_SCHEMA_ID: ACTIVITY_SCHEMA}
        reader = [f["name"] for f in ACTIVITY_SCHEMA["fields"]]
    else:
        reader = [f["name"] for f in ACTIVITY_SCHEMA_V2["fields"]]
    # every reader field as (position, length) per message, length -1 for null
    spans = {name: (np.zeros(n, np.int64), np.full(n, -1, np.int64)) for name in reader}
    # one schema id, as nearly every batch has: no sort, no index of rows
    one_id = bool(np.all(ids == ids[0]))
    for schema_id in [int(ids[0])] if one_id else np.unique(ids).tolist():
        if schema_id not in writers:
            return None
        rows = slice(None) if one_id else np.flatnonzero(ids == schema_id)
        found = _fields(data, start[rows] + _FRAMING, end[rows], writers[schema_id]["fields"])
        if found is None or not set(found) <= set(spans):
            return None
        if not set(reader) - set(found) <= _NULL_BY_DEFAULT:  # a field the writer lacks
            return None
        for name, (at, length) in found.items():
            spans[name][0][rows] = at
            spans[name][1][rows] = length
    timestamps = spans.pop("timestamp")[0]
    if np.any(timestamps < 0) or np.any(timestamps > MAX_TIMESTAMP_MS):
        return None
    out: dict[str, pa.Array] = {}
    for name, (at, length) in spans.items():
        try:
            out[name] = binary_array(payload, data, at, length, pa.string())
        except pa.ArrowInvalid:  # not UTF-8
            return None
    out["timestamp"] = pa.array(timestamps)
    return out


#: the reader's fields a writer may lack (read as null)
_NULL_BY_DEFAULT = frozenset(
    f["name"] for f in ACTIVITY_SCHEMA_V2["fields"] if "default" in f and f["default"] is None)


def _fields(
    data: np.ndarray, pos: np.ndarray, end: np.ndarray, fields: list[dict[str, Any]]
) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """Each field's (position, length) per message (a long: (value, value)), or None when a
    message does not hold exactly these fields, or a field is of a type this does not read."""
    import numpy as np

    n = len(pos)
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    try:
        for field in fields:
            name, kind = field["name"], field["type"]
            if kind == "long":
                value, pos = zigzag_varints(data, pos)
                spans[name] = (value, value)
                continue
            if kind == "string":
                length, pos = zigzag_varints(data, pos)
            elif kind == ["null", "string"]:  # the branch, then the string when it is 1
                branch, pos = zigzag_varints(data, pos)
                if np.any((branch != 0) & (branch != 1)):
                    return None
                length = np.full(n, -1, np.int64)
                has = np.flatnonzero(branch == 1)
                length[has], pos[has] = zigzag_varints(data, pos[has])
            else:
                return None
            if np.any(length < -1) or (kind == "string" and np.any(length < 0)):
                return None
            spans[name] = (pos.copy(), length)
            pos = pos + np.maximum(length, 0)
    except (IndexError, CorruptRecordError):
        return None
    if np.any(pos != end):
        return None
    return spans
