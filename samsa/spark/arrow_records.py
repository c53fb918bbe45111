"""Record batches (v2, as a Fetch returns them) to Arrow columns in bulk, on the Spark tasks.

The tasks turn many thousand records a second into rows, so no record becomes a Python object:
one walk over the records' length varints finds where each starts (``record_walk``: the only
step that cannot be vectorised, compiled by numba), and numpy decodes every other field of all
records at once (one vectorised step per field: attributes, timestamp delta, offset delta,
key, value, header count, headers level by level). Keys, values and header fields become
Arrow ``binary_view`` arrays over the decompressed payload (no copy) and are cast to ``binary``
(one copy, in Arrow's C++). A compressed batch is decompressed once, then decoded the same
way. The per-record decoder (:func:`samsa.records.record.decode_records`) is the reference
these columns must match (``tests/spark/test_arrow_records.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from samsa.errors import CorruptRecordError
from samsa.records import compression
from samsa.records.batch import HEADER_SIZE, BatchHeader, Compression
from samsa.spark.record_walk import record_starts

if TYPE_CHECKING:
    import pyarrow as pa

#: zero bytes after the joined payloads: the unaligned 8-byte reads of a field's first 12 bytes
#: (the prefix or inline bytes of Arrow's views) near the end stay inside the buffer
_PAD = 16
#: a view's bytes inline up to this length (Arrow's binary_view layout)
_INLINE = 12


#: the mask keeping the first k bytes of a little-endian word
_KEEP = np.array([(1 << (8 * k)) - 1 for k in range(9)], np.uint64)


@dataclass(frozen=True)
class Columns:
    """The records of some batches, column by column (row ``i`` is the same record in each).

    ``payload`` holds the records' bytes (the batches' records, decompressed, one after the
    other); the ``*_start`` / ``*_len`` arrays locate fields in it, a negative length is null.
    """

    payload: bytes
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, milliseconds
    timestamp_types: np.ndarray  # int32: 0 create time, 1 log append time
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    header_count: np.ndarray  # int64, per record
    header_key_start: np.ndarray  # the records' headers one after the other, in record order
    header_key_len: np.ndarray
    header_value_start: np.ndarray
    header_value_len: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets)


def batch_payload(buf: bytes | memoryview, pos: int, header: BatchHeader) -> bytes | memoryview:
    """The records of the batch at ``pos`` of ``buf``, decompressed when needed."""
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression == Compression.NONE:
        return body
    return compression.decompress(header.compression, body)


def decode_batches(buf: bytes | memoryview, batches: Sequence[tuple[int, BatchHeader]]) -> Columns:
    """Every record of the batches at the given positions of ``buf`` (``(position, header)``,
    whole batches, in log order), as :class:`Columns`. CorruptRecordError when a batch's records
    do not parse into exactly the fields and the count its header says."""
    parts = [batch_payload(buf, pos, header) for pos, header in batches]
    parts.append(bytes(_PAD))
    payload = b"".join(parts)
    counts = [header.records_count for _, header in batches]
    starts = record_starts(payload, [len(p) for p in parts[:-1]], counts)

    a = np.frombuffer(payload, np.uint8)
    begin, end = starts[:-1], starts[1:]
    n = len(begin)
    try:
        length, p = zigzag_varints(a, begin)
        if n and (np.any(length < 0) or np.any(p + length != end)):
            raise CorruptRecordError("record length does not match the records' positions")
        ts_delta, p = zigzag_varints(a, p + 1)  # after the attributes byte
        offset_delta, p = zigzag_varints(a, p)
        key_len, key_start = zigzag_varints(a, p)
        value_len, value_start = zigzag_varints(a, key_start + np.maximum(key_len, 0))
        header_count, p = zigzag_varints(a, value_start + np.maximum(value_len, 0))
        headers = _headers(a, p, header_count)
        if n and np.any(headers[0] != end):
            raise CorruptRecordError("record length does not match its fields")
    except IndexError:
        raise CorruptRecordError("record fields run past the end of the batch") from None

    which = np.repeat(np.arange(len(batches)), counts)
    base_offsets = np.array([h.base_offset for _, h in batches], np.int64)
    base_ts = np.array([h.base_timestamp for _, h in batches], np.int64)
    max_ts = np.array([h.max_timestamp for _, h in batches], np.int64)
    append_time = np.array([h.log_append_time for _, h in batches], np.bool_)
    per_record_append = append_time[which]
    return Columns(
        payload=payload,
        offsets=base_offsets[which] + offset_delta,
        timestamps=np.where(per_record_append, max_ts[which], base_ts[which] + ts_delta),
        timestamp_types=per_record_append.astype(np.int32),
        key_start=key_start,
        key_len=key_len,
        value_start=value_start,
        value_len=value_len,
        header_count=header_count,
        header_key_start=headers[1],
        header_key_len=headers[2],
        header_value_start=headers[3],
        header_value_len=headers[4],
    )


def zigzag_varints(a: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varints (up to 64 bits) starting at each of ``pos`` in ``a``: (values as
    int64, the position after each). IndexError when one runs past ``a``."""
    b = a[pos]
    after = pos + 1
    more = b >= 0x80
    if not more.any():  # one byte each: -64..63
        small = b.astype(np.int64)
        return (small >> 1) ^ -(small & 1), after
    raw = (b & 0x7F).astype(np.uint64)
    shift = 7
    if more.all():  # all of at least two bytes (lengths of 64 B to 8 KiB): no indexing yet
        b = a[after]
        raw |= (b & 0x7F).astype(np.uint64) << np.uint64(7)
        after += 1
        more = b >= 0x80
        shift = 14
    rows = np.flatnonzero(more)
    while rows.size:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in a record")
        at = after[rows]
        b = a[at]
        raw[rows] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[rows] = at + 1
        rows = rows[b >= 0x80]
        shift += 7
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, after


def _headers(
    a: np.ndarray, pos: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each record's headers from ``pos`` (after its header count): (the position after the
    headers, then key start, key length, value start, value length of every header, the
    records' headers one after the other). Decoded level by level: all first headers, then
    the second headers of the records that have two, ..."""
    if np.any(count < 0):
        raise CorruptRecordError("negative header count in a record")
    total = int(count.sum())
    fields = [np.empty(total, np.int64) for _ in range(4)]
    if not total:
        return pos, *fields  # type: ignore[return-value]
    first = np.zeros(len(count), np.int64)
    np.cumsum(count[:-1], out=first[1:])
    pos = pos.copy()
    level = 0
    rows = np.flatnonzero(count > 0)
    while rows.size:
        at = first[rows] + level
        klen, kstart = zigzag_varints(a, pos[rows])
        vlen, vstart = zigzag_varints(a, kstart + np.maximum(klen, 0))
        pos[rows] = vstart + np.maximum(vlen, 0)
        for column, values in zip(fields, (kstart, klen, vstart, vlen), strict=True):
            column[at] = values
        level += 1
        rows = rows[count[rows] > level]
    return pos, *fields  # type: ignore[return-value]


# --- Arrow ---------------------------------------------------------------------------------------


def binary_array(
    payload: bytes | bytearray,
    data: np.ndarray,
    start: np.ndarray,
    length: np.ndarray,
    type_: pa.DataType | None = None,
) -> pa.Array:
    """A ``binary`` array (or ``type_``: ``string`` checks UTF-8) of
    ``payload[start[i] : start[i] + length[i]]``, null where the length is negative: Arrow
    views over ``payload``, cast in C++. ``data`` is ``payload`` as uint8, with at least
    :data:`_PAD` bytes after the last field."""
    import pyarrow as pa

    target = pa.binary() if type_ is None else type_
    n = len(start)
    valid = length >= 0
    if not valid.any():
        return pa.nulls(n, target)
    all_valid = bool(valid.all())
    size = (length if all_valid else np.where(valid, length, 0)).astype(np.uint64)
    at = (start if all_valid else np.where(valid, start, 0)).astype(np.uint64)
    # Arrow's 16-byte view, as two little-endian words: the int32 length and either the first
    # 4 of up to 12 bytes inline (zero-padded) then the other 8, or a 4-byte prefix then the
    # buffer index (0) and the int32 offset into the buffer
    words = np.ndarray(buffer=data, dtype="<u8", shape=(len(data) - 7,), strides=(1,))
    head = words[at] & _KEEP[np.minimum(size, np.uint64(4))]
    views = np.empty((n, 2), np.uint64)
    views[:, 0] = size | (head << np.uint64(32))
    inline = size <= _INLINE
    if inline.all():
        rest = np.clip(size.astype(np.int64) - 4, 0, 8)
        views[:, 1] = words[at + np.uint64(4)] & _KEEP[rest]
    elif inline.any():
        rest = np.clip(size.astype(np.int64) - 4, 0, 8)
        views[:, 1] = np.where(inline, words[at + np.uint64(4)] & _KEEP[rest],
                               at << np.uint64(32))
    else:
        views[:, 1] = at << np.uint64(32)
    validity = None if all_valid else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array_ = pa.Array.from_buffers(
        pa.binary_view(), n, [validity, pa.py_buffer(views), pa.py_buffer(payload)]
    )
    return array_.cast(target)


def record_batch(
    columns: Columns, topic: str, partition: int, schema: pa.Schema, lo: int, hi: int
) -> pa.RecordBatch:
    """Rows ``lo`` to ``hi`` (exclusive) of ``columns`` as a record batch of ``schema`` (Spark's
    Kafka schema, headers included when the schema has them)."""
    import pyarrow as pa

    n = hi - lo
    data = np.frombuffer(columns.payload, np.uint8)
    payload = columns.payload
    micros = columns.timestamps[lo:hi] * 1000
    arrays = [
        binary_array(payload, data, columns.key_start[lo:hi], columns.key_len[lo:hi]),
        binary_array(payload, data, columns.value_start[lo:hi], columns.value_len[lo:hi]),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(columns.offsets[lo:hi]),
        pa.Array.from_buffers(schema.field("timestamp").type, n, [None, pa.py_buffer(micros)]),
        pa.array(columns.timestamp_types[lo:hi]),
    ]
    if "headers" in schema.names:
        arrays.append(_headers_array(columns, lo, hi, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers_array(columns: Columns, lo: int, hi: int, list_type: pa.DataType) -> pa.Array:
    """``headers``: a list of (key string, value binary) per record, null for a record
    without headers (as the Java consumer's and librdkafka's empty headers read)."""
    import pyarrow as pa

    n = hi - lo
    count = columns.header_count[lo:hi]
    first = int(columns.header_count[:lo].sum())
    total = int(count.sum())
    if total == 0:
        return pa.nulls(n, list_type)
    rows = slice(first, first + total)
    data = np.frombuffer(columns.payload, np.uint8)
    keys = binary_array(columns.payload, data, columns.header_key_start[rows],
                        columns.header_key_len[rows])
    keys = _utf8(keys.fill_null(b""))
    values = binary_array(columns.payload, data, columns.header_value_start[rows],
                          columns.header_value_len[rows])
    struct_type = list_type.value_type
    entries = pa.StructArray.from_arrays([keys, values], fields=list(struct_type))
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(count, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), entries, type=list_type,
                                    mask=pa.array(count == 0))


def _utf8(keys: pa.Array) -> pa.Array:
    """Header keys as strings; bytes that are not UTF-8 are replaced, as ``decode_records``
    reads them."""
    import pyarrow as pa

    try:
        return keys.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())
