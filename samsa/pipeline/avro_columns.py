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

from typing import TYPE_CHECKING

from samsa.errors import CorruptRecordError
from samsa.pipeline.events import ACTIVITY_SCHEMA, ACTIVITY_SCHEMA_ID, AVRO_MAGIC, MAX_TIMESTAMP_MS
from samsa.spark.arrow_records import binary_array, zigzag_varints

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

#: zero bytes after the copied message bytes (Arrow views read whole 4-byte words)
_PAD = 16
#: magic byte and schema id
_FRAMING = 5


def activity_columns(values: pa.Array) -> dict[str, pa.Array] | None:
    """The activity schema's fields (``timestamp`` as int64 milliseconds, strings as Arrow
    strings) of every message in ``values`` (binary), or None when any message is not one
    this reads (see the module's docstring)."""
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
    if np.any(data[start] != AVRO_MAGIC) or np.any(framing[start + 1] != ACTIVITY_SCHEMA_ID):
        return None
    pos = start + _FRAMING
    spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    try:
        for field in ACTIVITY_SCHEMA["fields"]:
            name, kind = field["name"], field["type"]
            if kind == "long":
                value, pos = zigzag_varints(data, pos)
                spans[name] = (value, value)
                continue
            if kind == "string":
                length, pos = zigzag_varints(data, pos)
            else:  # ["null", "string"]: the branch, then the string when it is 1
                branch, pos = zigzag_varints(data, pos)
                if np.any((branch != 0) & (branch != 1)):
                    return None
                length = np.full(n, -1, np.int64)
                has = np.flatnonzero(branch == 1)
                length[has], pos[has] = zigzag_varints(data, pos[has])
            if np.any(length < -1) or (kind == "string" and np.any(length < 0)):
                return None
            spans[name] = (pos.copy(), length)
            pos = pos + np.maximum(length, 0)
    except (IndexError, CorruptRecordError):
        return None
    if np.any(pos != end):
        return None
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
