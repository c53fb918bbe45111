"""Fuzz target: the compressed-batch readers.

The input is a whole record batch. Its CRC-32C is rewritten (a corrupt CRC is the validator's
business, fuzz_records.py) and its records are read by every reader the broker has:

* ``compression.decompress`` of the body with each of the five codecs (gzip, snappy in
  xerial framing or raw, lz4 frame, zstd), whatever the attributes say;
* ``decode_records`` (tools, timestamp lookups, markers), ``iter_raw_records`` (the log
  cleaner, the compacted topic's key check) and ``iter_record_keys`` (the cleaner's offset
  map) on the batch's own codec;
* ``read_marker`` when the batch says it is a control batch.

They may refuse the bytes only with CorruptRecordError or UnsupportedCompressionError. When
``decode_records`` reads every record, the cleaner's two readers must read the same records:
the same offset deltas, keys and null values.

    python fuzz/fuzz_compression.py tests/fuzz_corpus/compression -runs=200000
"""

from __future__ import annotations

import struct

from samsa.errors import CorruptRecordError, UnsupportedCompressionError
from samsa.records import compression
from samsa.records.batch import (
    CRC,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    crc_of,
    read_header,
)
from samsa.records.control import read_marker
from samsa.records.record import (
    decode_records,
    iter_raw_records,
    iter_record_keys,
    records_payload,
)

_REFUSALS = (CorruptRecordError, UnsupportedCompressionError)
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
MAX_RECORDS = 10_000  # a count the harness reads up to (the header may claim 2**31)


def _batch(data: bytes) -> bytes | None:
    """The input as one framed batch: batchLength set to its size, CRC rewritten."""
    if len(data) < HEADER_SIZE:
        return None
    buf = bytearray(data)
    _INT32.pack_into(buf, 8, len(buf) - LOG_OVERHEAD)
    _UINT32.pack_into(buf, CRC, crc_of(buf, 0, len(buf)))
    return bytes(buf)


def check(data: bytes) -> None:
    body = data[HEADER_SIZE:]
    for codec in Compression:
        try:
            compression.decompress(codec, body)
        except _REFUSALS:
            pass
    batch = _batch(data)
    if batch is None:
        return
    header = read_header(batch)
    count = min(header.records_count, MAX_RECORDS)
    try:
        records = [(r.offset - header.base_offset, r.key, r.value is None)
                   for _, r in zip(range(count), decode_records(batch), strict=False)]
    except _REFUSALS:
        records = None
    try:
        payload = records_payload(batch, header)
    except _REFUSALS:
        if records and count > 0:  # (decode_records decompresses when asked for a record)
            raise AssertionError("decode_records read what records_payload refused") from None
        return
    try:
        raw = [(r.offset_delta, r.key, r.value_is_null)
               for r in iter_raw_records(payload, count)]
    except _REFUSALS:
        raw = None
    try:
        keys = list(iter_record_keys(payload, count))
    except _REFUSALS:
        keys = None
    if records is not None and len(records) == count:
        if raw != records:
            raise AssertionError(f"iter_raw_records read {raw}, decode_records {records}")
        if keys != [(delta, key) for delta, key, _ in records]:
            raise AssertionError(f"iter_record_keys read {keys}, decode_records {records}")
    if header.is_control:
        try:
            read_marker(batch)
        except _REFUSALS:
            pass


if __name__ == "__main__":
    from fuzzing import fuzz

    fuzz(check)
