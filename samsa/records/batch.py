"""RecordBatch v2 (magic 2) header view: what the produce and fetch paths touch.

Only the 61-byte header is ever parsed here; records stay opaque bytes. Byte layout:
shared/kafka-protocol/INDEX.md section 5.1.
"""

from __future__ import annotations

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

    Returns the parsed headers. Raises CorruptRecordError (framing, CRC), InvalidRecordError
    (counts, control batches from clients, missing sequence), UnsupportedForMessageFormatError
    (magic 0/1) or UnsupportedCompressionError. Cost is per batch: the header and one CRC-32C.
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
