"""Records inside a v2 batch: decode them and build batches (INDEX.md section 5.2).

Not on the produce or fetch path. Used by tools (dump-log), timestamp lookups, tests, and the
broker's own writers (internal topics, control batches).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from samsa.errors import CorruptRecordError
from samsa.records import compression
from samsa.records.batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Attr,
    BatchHeader,
    Compression,
    read_header,
)

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(n: int, out: bytearray) -> None:
    """Zig-zag signed varint/varlong, as the record format uses."""
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, next position) of a zig-zag varint at ``pos``."""
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("truncated varint in a record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in a record")
    return (result >> 1) ^ -(result & 1), pos


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptRecordError("record field runs past the end of the batch")
    return bytes(buf[pos : pos + length]), pos + length


def records_payload(batch: bytes | memoryview, header: BatchHeader | None = None) -> bytes:
    """The uncompressed bytes of the records of one batch."""
    header = header or read_header(batch)
    body = memoryview(batch)[HEADER_SIZE : header.size]
    return compression.decompress(header.compression, body)


def decode_records(batch: bytes | memoryview) -> Iterator[Record]:
    """The records of one whole batch (decompressed when needed)."""
    header = read_header(batch)
    payload = records_payload(batch, header)
    pos = 0
    for _ in range(header.records_count):
        length, pos = read_varint(payload, pos)
        end = pos + length
        if length < 0 or end > len(payload):
            raise CorruptRecordError("record length runs past the end of the batch")
        pos += 1  # attributes
        ts_delta, pos = read_varint(payload, pos)
        offset_delta, pos = read_varint(payload, pos)
        key, pos = _read_bytes(payload, pos)
        value, pos = _read_bytes(payload, pos)
        count, pos = read_varint(payload, pos)
        headers: list[Header] = []
        for _ in range(count):
            hkey, pos = _read_bytes(payload, pos)
            hvalue, pos = _read_bytes(payload, pos)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hvalue))
        if pos != end:
            raise CorruptRecordError("record length does not match its fields")
        timestamp = (
            header.max_timestamp if header.log_append_time else header.base_timestamp + ts_delta
        )
        yield Record(header.base_offset + offset_delta, timestamp, key, value, headers)


@dataclass
class RecordInput:
    """A record to put in a batch built here."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: Sequence[Header] = ()


def encode_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    compression_type: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    leader_epoch: int = -1,
) -> bytes:
    """Build one v2 record batch, with offset deltas 0..n-1 and a correct CRC-32C."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    stamps = [r.timestamp if r.timestamp is not None else timestamp for r in records]
    base_ts = stamps[0]
    body = bytearray()
    for delta, (rec, ts) in enumerate(zip(records, stamps, strict=True)):
        inner = bytearray(b"\x00")
        write_varint(ts - base_ts, inner)
        write_varint(delta, inner)
        for blob in (rec.key, rec.value):
            if blob is None:
                write_varint(-1, inner)
            else:
                write_varint(len(blob), inner)
                inner += blob
        write_varint(len(rec.headers), inner)
        for hkey, hvalue in rec.headers:
            encoded = hkey.encode()
            write_varint(len(encoded), inner)
            inner += encoded
            if hvalue is None:
                write_varint(-1, inner)
            else:
                write_varint(len(hvalue), inner)
                inner += hvalue
        write_varint(len(inner), body)
        body += inner
    payload = compression.compress(compression_type, bytes(body))
    attributes = int(compression_type)
    if transactional:
        attributes |= Attr.TRANSACTIONAL
    if control:
        attributes |= Attr.CONTROL
    batch = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(
        batch, 0, base_offset, len(batch) - LOG_OVERHEAD, leader_epoch, 2, 0, attributes,
        len(records) - 1, base_ts, max(stamps), producer_id, producer_epoch, base_sequence,
        len(records),
    )
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


class RawRecord(NamedTuple):
    """One record of a decompressed payload, located but not copied (the log cleaner's view).

    ``payload[start:end]`` is the whole record, its length first, and ``payload[rest:end]`` the
    record from its offset delta on, so a record can be written again as it is, or with
    another timestamp delta without decoding the rest.
    """

    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    value_is_null: bool
    rest: int
    end: int
    start: int = 0


def raw_record_at(payload: bytes, pos: int) -> RawRecord:
    """The record that starts at ``pos`` of a decompressed batch payload. One-byte varints
    (and two-byte record lengths) are read inline, others through ``read_varint``."""
    start = pos
    try:  # the inline reads raise IndexError when the fields run past the payload
        b = payload[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        elif payload[pos + 1] < 0x80:  # records of 64 B to 8 KiB
            n = (b & 0x7F) | (payload[pos + 1] << 7)
            length, pos = (n >> 1) ^ -(n & 1), pos + 2
        else:
            length, pos = read_varint(payload, pos)
        end = pos + length
        if length <= 0 or end > len(payload):  # not even the attributes byte
            raise CorruptRecordError("record length runs past the end of the batch")
        attributes = payload[pos]
        b = payload[pos + 1]
        if b < 0x80:
            ts_delta, rest = (b >> 1) ^ -(b & 1), pos + 2
        else:
            ts_delta, rest = read_varint(payload, pos + 1)
        b = payload[rest]
        if b < 0x80:
            offset_delta, cursor = (b >> 1) ^ -(b & 1), rest + 1
        elif payload[rest + 1] < 0x80:  # deltas of 64 to 8191
            n = (b & 0x7F) | (payload[rest + 1] << 7)
            offset_delta, cursor = (n >> 1) ^ -(n & 1), rest + 2
        else:
            offset_delta, cursor = read_varint(payload, rest)
        b = payload[cursor]
        if b < 0x80:
            key_length, cursor = (b >> 1) ^ -(b & 1), cursor + 1
        else:
            key_length, cursor = read_varint(payload, cursor)
        key = None
        if key_length >= 0:
            if cursor + key_length > len(payload):
                raise CorruptRecordError("record field runs past the end of the batch")
            key = bytes(payload[cursor : cursor + key_length])
            cursor += key_length
        b = payload[cursor]
        if b < 0x80:
            value_length, cursor = (b >> 1) ^ -(b & 1), cursor + 1
        elif payload[cursor + 1] < 0x80:  # values of 64 B to 8 KiB
            n = (b & 0x7F) | (payload[cursor + 1] << 7)
            value_length, cursor = (n >> 1) ^ -(n & 1), cursor + 2
        else:
            value_length, cursor = read_varint(payload, cursor)
    except IndexError:
        raise CorruptRecordError("truncated varint in a record") from None
    if cursor > end or (value_length > 0 and cursor + value_length > end):
        raise CorruptRecordError("record fields run past the record's length")
    return RawRecord(attributes, ts_delta, offset_delta, key, value_length < 0, rest, end, start)


def iter_raw_records(payload: bytes, count: int) -> Iterator[RawRecord]:
    """The ``count`` records of a decompressed batch payload."""
    pos = 0
    for _ in range(count):
        record = raw_record_at(payload, pos)
        yield record
        pos = record.end


def record_timestamps(batch: bytes | memoryview, header: BatchHeader) -> Iterator[int]:
    """Each record's timestamp (the batch's base timestamp plus the record's delta)."""
    payload = records_payload(batch, header)
    for record in iter_raw_records(payload, header.records_count):
        yield header.base_timestamp + record.timestamp_delta


def encode_raw_batch(
    header: BatchHeader,
    payload: bytes,
    records: Sequence[RawRecord],
    *,
    base_timestamp: int,
    attributes: int,
    max_timestamp: int | None = None,
) -> bytes:
    """A batch like ``header``'s (offsets, producer fields, epoch) holding only ``records`` of
    its ``payload``, with timestamp deltas rewritten against ``base_timestamp`` and the codec
    of ``attributes``. No records gives Kafka's empty batch (a header that keeps a producer's
    last sequence)."""
    if base_timestamp == header.base_timestamp:  # the records' bytes stay as they are
        body: bytes | bytearray = b"".join([payload[r.start : r.end] for r in records])
    else:
        body = bytearray()
        for record in records:
            inner = bytearray((record.attributes,))
            write_varint(header.base_timestamp + record.timestamp_delta - base_timestamp, inner)
            inner += payload[record.rest : record.end]
            write_varint(len(inner), body)
            body += inner
    return batch_of(header, body, len(records), base_timestamp=base_timestamp,
                    attributes=attributes, max_timestamp=max_timestamp)


def batch_of(
    header: BatchHeader,
    body: bytes | bytearray,
    records: int,
    *,
    base_timestamp: int,
    attributes: int,
    max_timestamp: int | None = None,
) -> bytes:
    """A batch like ``header``'s (offsets, producer fields, epoch) around ``records``
    uncompressed records (``body``), compressed with the codec of ``attributes``."""
    codec = Compression(attributes & Attr.CODEC_MASK)
    data = compression.compress(codec, bytes(body)) if records else b""
    batch = bytearray(HEADER_SIZE) + data
    HEADER.pack_into(
        batch, 0, header.base_offset, len(batch) - LOG_OVERHEAD, header.leader_epoch, 2, 0,
        attributes, header.last_offset_delta, base_timestamp,
        header.max_timestamp if max_timestamp is None else max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, records,
    )
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def record_keys(payload: bytes, count: int) -> tuple[list[bytes | None], list[int]]:
    """(keys, offset deltas) of the records of a decompressed payload, in order: the cleaner's
    offset-map pass, which needs nothing else. One- and two-byte varints (lengths, small
    deltas) are read inline, the timestamp delta is skipped; longer ones go through
    ``read_varint``."""
    keys: list[bytes | None] = []
    deltas: list[int] = []
    add_key, add_delta = keys.append, deltas.append
    pos = 0
    size = len(payload)
    try:  # the inline reads raise IndexError when the fields run past the payload
        for _ in range(count):
            b = payload[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif payload[pos + 1] < 0x80:  # records of 64 B to 8 KiB
                n = (b & 0x7F) | (payload[pos + 1] << 7)
                length, pos = (n >> 1) ^ -(n & 1), pos + 2
            else:
                length, pos = read_varint(payload, pos)
            end = pos + length
            if length <= 0 or end > size:
                raise CorruptRecordError("record length runs past the end of the batch")
            cursor = pos + 1  # attributes
            while payload[cursor] >= 0x80:  # the timestamp delta, not needed
                cursor += 1
            cursor += 1
            b = payload[cursor]
            if b < 0x80:
                add_delta((b >> 1) ^ -(b & 1))
                cursor += 1
            elif payload[cursor + 1] < 0x80:  # deltas of 64 to 8191
                n = (b & 0x7F) | (payload[cursor + 1] << 7)
                add_delta((n >> 1) ^ -(n & 1))
                cursor += 2
            else:
                delta, cursor = read_varint(payload, cursor)
                add_delta(delta)
            b = payload[cursor]
            if b < 0x80:
                key_length, cursor = (b >> 1) ^ -(b & 1), cursor + 1
            else:
                key_length, cursor = read_varint(payload, cursor)
            if cursor > end:
                raise CorruptRecordError("record fields run past the record's length")
            if key_length < 0:
                add_key(None)
            elif cursor + key_length > end:
                raise CorruptRecordError("record key runs past the record's length")
            else:
                add_key(payload[cursor : cursor + key_length])
            pos = end
    except IndexError:
        raise CorruptRecordError("record fields run past the end of the batch") from None
    return keys, deltas


class NotInOrder(Exception):
    """A record's offset delta is not its position in the batch."""


def record_keys_in_order(payload: bytes, count: int) -> list[bytes | None]:
    """The keys of the records of a decompressed payload whose offset deltas should be 0, 1,
    ... (a batch whose records count is its last offset delta plus one): ``record_keys``
    comparing each delta's bytes with its position's instead of decoding it. NotInOrder when
    one differs, or when the records do not end where the payload does (a client may send
    any deltas: read such a batch with ``record_keys``)."""
    keys: list[bytes | None] = []
    add = keys.append
    pos = 0
    try:  # the inline reads raise IndexError when the fields run past the payload
        for i in range(count):
            b = payload[pos]
            if b < 0x80:
                end = pos + 1 + (b >> 1)
                cursor = pos + 2  # after the attributes
            else:
                c = payload[pos + 1]
                if c < 0x80:  # records of 64 B to 8 KiB
                    end = pos + 2 + (((b & 0x7F) | (c << 7)) >> 1)
                    cursor = pos + 3
                else:
                    length, cursor = read_varint(payload, pos)
                    end = cursor + length
                    cursor += 1
            if b & 1 or end < cursor:  # a negative length (zig-zag), or no attributes
                raise CorruptRecordError("record length runs past the end of the batch")
            while payload[cursor] > 0x7F:  # the timestamp delta
                cursor += 1
            z = i << 1  # the offset delta, zig-zag, then the key length
            if z < 0x80:
                if payload[cursor + 1] != z:
                    raise NotInOrder(i)
                b = payload[cursor + 2]
                cursor += 3
            elif z < 0x4000:
                if payload[cursor + 1] != (z & 0x7F) | 0x80 or payload[cursor + 2] != z >> 7:
                    raise NotInOrder(i)
                b = payload[cursor + 3]
                cursor += 4
            else:
                delta, cursor = read_varint(payload, cursor + 1)
                if delta != i:
                    raise NotInOrder(i)
                b = payload[cursor]
                cursor += 1
            if b < 0x80:
                if b & 1:  # negative: no key
                    add(None)
                    pos = end
                    continue
                key_length = b >> 1
            else:
                key_length, cursor = read_varint(payload, cursor - 1)
                if key_length < 0:
                    add(None)
                    pos = end
                    continue
            if cursor + key_length > end:
                raise CorruptRecordError("record key runs past the record's length")
            add(payload[cursor : cursor + key_length])
            pos = end
    except IndexError:
        raise CorruptRecordError("record fields run past the end of the batch") from None
    if pos != len(payload):
        raise NotInOrder(count)
    return keys


def iter_record_keys(payload: bytes, count: int) -> Iterator[tuple[int, bytes | None]]:
    """(offset delta, key) of each record of a decompressed payload: the cleaner's offset-map
    pass, which needs nothing else. One-byte varints (the usual case for lengths and small
    deltas) are read inline; others go through ``read_varint``."""
    pos = 0
    size = len(payload)
    try:  # the inline reads raise IndexError when the fields run past the payload
        for _ in range(count):
            if pos >= size:
                raise CorruptRecordError("truncated record")
            b = payload[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif pos + 1 < size and payload[pos + 1] < 0x80:  # records of 64 B to 8 KiB
                n = (b & 0x7F) | (payload[pos + 1] << 7)
                length, pos = (n >> 1) ^ -(n & 1), pos + 2
            else:
                length, pos = read_varint(payload, pos)
            end = pos + length
            if length < 0 or end > size:
                raise CorruptRecordError("record length runs past the end of the batch")
            cursor = pos + 1  # attributes
            b = payload[cursor]
            if b < 0x80:
                cursor += 1  # timestamp delta
            else:
                _, cursor = read_varint(payload, cursor)
            b = payload[cursor]
            if b < 0x80:
                offset_delta, cursor = (b >> 1) ^ -(b & 1), cursor + 1
            else:
                offset_delta, cursor = read_varint(payload, cursor)
            b = payload[cursor]
            if b < 0x80:
                key_length, cursor = (b >> 1) ^ -(b & 1), cursor + 1
            else:
                key_length, cursor = read_varint(payload, cursor)
            if cursor > end:
                raise CorruptRecordError("record fields run past the record's length")
            if key_length < 0:
                yield offset_delta, None
            elif cursor + key_length > end:
                raise CorruptRecordError("record key runs past the record's length")
            else:
                yield offset_delta, payload[cursor : cursor + key_length]
            pos = end
    except IndexError:
        raise CorruptRecordError("record fields run past the end of the batch") from None
