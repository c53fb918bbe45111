"""Fuzz target: the compressed-batch readers.

The input is a whole record batch. Its CRC-32C is rewritten (a corrupt CRC is the validator's
business, fuzz_records.py) and its records are read by every reader the broker has:

* ``compression.decompress`` of the body with each of the five codecs (gzip, snappy in
  xerial framing or raw, lz4 frame, zstd), whatever the attributes say;
* ``decode_records`` (tools, timestamp lookups, markers), ``iter_raw_records`` (the log
  cleaner, the compacted topic's key check), ``iter_record_keys``, ``record_keys`` and
  ``record_keys_in_order`` (the cleaner's offset map) and ``record_starts`` (where the
  cleaner finds a batch's survivors) on the batch's own codec;
* ``read_marker`` when the batch says it is a control batch.

They may refuse the bytes only with CorruptRecordError or UnsupportedCompressionError
(``record_keys_in_order`` also with NotInOrder, ``record_starts`` answers None). When
``decode_records`` reads every record, the cleaner's readers must read the same records: the
same offset deltas, keys and null values, and the same record boundaries.

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
    record_starts,
)
from samsa.records.control import read_marker
from samsa.records.record import (
    NotInOrder,
    decode_records,
    iter_raw_records,
    iter_record_keys,
    record_keys,
    record_keys_in_order,
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
        raws = list(iter_raw_records(payload, count))
        raw = [(r.offset_delta, r.key, r.value_is_null) for r in raws]
    except _REFUSALS:
        raws, raw = [], None
    try:
        pairs = record_keys(payload, count)
    except _REFUSALS:
        pairs = None
    try:
        in_order = record_keys_in_order(payload, count)
    except (*_REFUSALS, NotInOrder):
        in_order = None
    starts = record_starts(payload, count)
    try:
        keys = list(iter_record_keys(payload, count))
    except _REFUSALS:
        keys = None
    if records is not None and len(records) == count:
        if raw != records:
            raise AssertionError(f"iter_raw_records read {raw}, decode_records {records}")
        if keys != [(delta, key) for delta, key, _ in records]:
            raise AssertionError(f"iter_record_keys read {keys}, decode_records {records}")
        if pairs != ([key for _, key, _ in records], [delta for delta, _, _ in records]):
            raise AssertionError(f"record_keys read {pairs}, decode_records {records}")
        # (NotInOrder is allowed for deltas in order too: a varint written longer than it
        # needs to be is read record by record)
        if in_order is not None and (
                in_order != [key for _, key, _ in records]
                or [delta for delta, _, _ in records] != list(range(count))):
            raise AssertionError(f"record_keys_in_order read {in_order}, decode_records "
                                 f"{records}")
        bounds = [r.start for r in raws] + [raws[-1].end if raws else 0]
        if starts is not None and starts != bounds:
            raise AssertionError(f"record_starts found {starts}, iter_raw_records {bounds}")
    if header.is_control:
        try:
            read_marker(batch)
        except _REFUSALS:
            pass


if __name__ == "__main__":
    from fuzzing import fuzz

    fuzz(check)
