"""RecordBatch v2 (magic 2) header view: what the produce and fetch paths touch.

The 61-byte header is parsed here; of the records, a client's batch has only its length
varints walked (``records_problem``: do they hold the records the header counts?), never their
fields. Byte layout: shared/kafka-protocol/INDEX.md section 5.1.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from samsa.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionError,
    UnsupportedForMessageFormatError,
)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: batchLength counts the bytes after these
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

BASE_OFFSET = 0
BATCH_LENGTH = 8
LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
MAX_TIMESTAMP = 35
CRC_START = ATTRIBUTES

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class Attr:
    CODEC_MASK = 0x07
    LOG_APPEND_TIME = 0x08
    TRANSACTIONAL = 0x10
    CONTROL = 0x20
    DELETE_HORIZON = 0x40


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        """The batch's codec; UnsupportedCompressionError for 5-7 (never appended: the
        validator refuses them, but a reader may meet them in a damaged file)."""
        codec = self.attributes & Attr.CODEC_MASK
        if codec > Compression.ZSTD:
            raise UnsupportedCompressionError(f"unknown compression codec {codec}")
        return Compression(codec)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & Attr.TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & Attr.CONTROL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & Attr.LOG_APPEND_TIME)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def crc_of(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batches(
    buf: bytes | bytearray | memoryview, *, internal: bool = False, from_client: bool = True
) -> list[BatchHeader]:
    """Check every v2 batch in ``buf`` as Kafka's broker does on append.

    ``internal`` admits the broker's own control batches and sequence-less producer batches.
    ``from_client=False`` is for batches copied from a leader: they may be control batches or
    compacted (fewer records than their offset span), so only framing and CRC are checked.

    A client's batch must also hold the records its header counts, as Kafka's LogValidator
    finds when it iterates them: the records' length varints are walked (a compressed batch's
    after decompressing it), never their fields.

    Returns the parsed headers. Raises CorruptRecordError (framing, CRC, a compressed payload
    that does not decompress), InvalidRecordError (counts, records that disagree with the
    count, control batches from clients, missing sequence), UnsupportedForMessageFormatError
    (magic 0/1) or UnsupportedCompressionError. Cost: the header and one CRC-32C per batch,
    and one step per record of the client's batches.
    """
    view = memoryview(buf)
    total = len(view)
    if total == 0:
        raise InvalidRecordError("no record batch in the records")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated record batch: {total - pos} bytes at position {pos}, "
                f"a header needs {HEADER_SIZE}"
            )
        header = read_header(view, pos)
        if header.magic != 2:
            if header.magic in (0, 1):
                raise UnsupportedForMessageFormatError(
                    f"message format v{header.magic} is not accepted; clients must send "
                    "RecordBatch v2 (magic 2)"
                )
            raise CorruptRecordError(f"unknown record batch magic {header.magic}")
        size = header.size
        if header.batch_length < MIN_BATCH_LENGTH or pos + size > total:
            raise CorruptRecordError(
                f"record batch length {header.batch_length} at position {pos} does not fit "
                f"the {total - pos} bytes left"
            )
        if crc32c(view[pos + CRC_START : pos + size]) != header.crc:
            raise CorruptRecordError(f"record batch CRC-32C mismatch at position {pos}")
        if header.attributes & Attr.CODEC_MASK > Compression.ZSTD:
            raise UnsupportedCompressionError(
                f"unknown compression codec {header.attributes & Attr.CODEC_MASK}"
            )
        if header.last_offset_delta < 0:
            raise InvalidRecordError(f"negative lastOffsetDelta {header.last_offset_delta}")
        if from_client:
            _check_client_batch(header, internal)
            _check_records(view, pos, header)
        headers.append(header)
        pos += size
    return headers


def _check_client_batch(header: BatchHeader, internal: bool) -> None:
    if header.records_count <= 0:
        raise InvalidRecordError("record batch has no records")
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"lastOffsetDelta {header.last_offset_delta} does not match "
            f"recordsCount {header.records_count}"
        )
    if header.is_control and not internal:
        raise InvalidRecordError("clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0 and not internal:
        # the broker's own writers (markers, transactional offset commits) carry no sequence
        raise InvalidRecordError(f"producer id {header.producer_id} without a base sequence")


# Kafka's DefaultRecord has six fields after its length, each at least one byte (attributes,
# timestamp delta, offset delta, key length, value length, header count): a shorter record
# does not parse.
MIN_RECORD_BODY = 6


def _check_records(view: memoryview, pos: int, header: BatchHeader) -> None:
    """The batch at ``pos`` holds exactly ``header.records_count`` records (Kafka's
    "Incorrect declared batch size"), each as long as its length says."""
    body: bytes | memoryview = view[pos + HEADER_SIZE : pos + header.size]
    if header.attributes & Attr.CODEC_MASK:
        # a function-level import: compression imports this module for Compression
        from samsa.records.compression import decompress_bounded, decompressed_limit

        body = decompress_bounded(header.compression, body, decompressed_limit(len(body)))
    problem = records_problem(body, header.records_count)
    if problem is not None:
        raise InvalidRecordError(f"{problem} (the record batch at position {pos} declares "
                                 f"{header.records_count} records)")


def records_problem(records: bytes | memoryview, count: int) -> str | None:
    """Why ``records`` (a batch's uncompressed records, exactly) is not ``count`` records, or
    None when it is. Only the length varints are read: this runs for every produced batch, so
    the one- and two-byte ones (records up to 8 KiB) take one table look-up each."""
    steps = _length_steps()
    pos = 0
    try:
        for _ in range(count):
            step = steps[_UINT16_LE.unpack_from(records, pos)[0]]
            if step:
                pos += step
                continue
            length, after = _varint(records, pos)
            if length < 0:
                return f"a record length longer than five bytes at byte {pos} of the records"
            if length & 1 or length >> 1 < MIN_RECORD_BODY:
                size = (length >> 1) ^ -(length & 1)
                return f"Invalid record size {size} at byte {pos} of the records"
            pos = after + (length >> 1)
    except (struct.error, IndexError):  # fewer than the two bytes of the smallest record
        return "Incorrect declared batch size, premature EOF reached"
    if pos > len(records):
        return "Incorrect declared batch size, premature EOF reached"
    if pos < len(records):
        return "Incorrect declared batch size, records still remaining in file"
    return None


_UINT16_LE = struct.Struct("<H")


def record_starts(records: bytes | memoryview, count: int) -> list[int] | None:
    """Where each of the ``count`` records of ``records`` (a batch's uncompressed records,
    exactly) starts, and where the last one ends: ``count + 1`` positions, found as
    ``records_problem`` walks them (their length varints only); None when they are not
    ``count`` well-formed lengths that end where ``records`` does."""
    steps = _length_steps()
    unpack = _UINT16_LE.unpack_from
    starts: list[int] = []
    add = starts.append
    pos = 0
    try:
        for _ in range(count):
            add(pos)
            step = steps[unpack(records, pos)[0]]
            if step:
                pos += step
                continue
            length, after = _varint(records, pos)
            if length < 0 or length & 1 or length >> 1 < MIN_RECORD_BODY:
                return None
            pos = after + (length >> 1)
    except (struct.error, IndexError):
        return None
    if pos != len(records):
        return None
    add(pos)
    return starts


@functools.cache
def _length_steps() -> list[int]:
    """For the two bytes at a record's start (little-endian, as ``_UINT16_LE`` reads them):
    how far the next record starts when they begin a one- or two-byte length varint of a
    record at least MIN_RECORD_BODY long, else 0 (a longer varint, or a length to refuse).
    Built on first use (64 Ki entries), a slice per second byte rather than a call per
    entry."""
    steps = [0] * (1 << 16)
    # a one-byte length: the first byte alone decides, whatever follows it
    one = [0 if b & 1 or b >> 1 < MIN_RECORD_BODY else 1 + (b >> 1) for b in range(0x80)]
    for c in range(0x100):
        steps[c << 8 : (c << 8) + 0x80] = one
    # a two-byte length: a first byte with its high bit set, a second without
    for c in range(0x80):
        lengths = [(b & 0x7F) | (c << 7) for b in range(0x80, 0x100)]
        steps[(c << 8) + 0x80 : (c << 8) + 0x100] = [
            0 if n & 1 or n >> 1 < MIN_RECORD_BODY else 2 + (n >> 1) for n in lengths]
    return steps


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(the raw zig-zag value, the position after it) of a varint of up to five bytes (a
    record length is an int32), (-1, pos) for a longer one; IndexError when it runs past
    ``buf``."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            return -1, pos


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in ``buf``; stops at a partial tail."""
    pos, total = 0, len(buf)
    while total - pos >= HEADER_SIZE:
        header = read_header(buf, pos)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > total:
            return
        yield pos, header
        pos += header.size


def stamp_prefix(base_offset: int, batch_length: int, leader_epoch: int) -> bytes:
    """The first 16 bytes of a batch as the log stores it: none of them is under the CRC."""
    return _OFFSET_AND_LENGTH.pack(base_offset, batch_length) + _INT32.pack(leader_epoch)


def stamp(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Set baseOffset and partitionLeaderEpoch in place (outside the CRC: no re-checksum)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET, base_offset)
    _INT32.pack_into(buf, pos + LEADER_EPOCH, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark a batch LogAppendTime and set its maxTimestamp: both under the CRC, so re-checksum."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES)
    _INT16.pack_into(buf, pos + ATTRIBUTES, attributes | Attr.LOG_APPEND_TIME)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP, now_ms)
    _UINT32.pack_into(buf, pos + CRC, crc_of(buf, pos, size))
