"""A Fetch v12 answer read by hand: the records stay a view into the received frame.

kio's reader copies each partition's records into a new ``bytes`` and builds an entity per
field; a task reads megabytes per answer and decodes them at once, so this reader walks the
frame (Kafka's FetchResponse v12, flexible: compact arrays and strings, tagged fields) and
returns the records as a ``memoryview`` of it, valid until the frame's buffer is reused.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from samsa.errors import ErrorCode

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start offset
_ABORTED = struct.Struct(">qq")  # producer id, first offset


class AnswerError(Exception):
    """A frame that is not a Fetch v12 answer to the request sent."""


@dataclass(frozen=True)
class PartitionAnswer:
    """One partition's part of a Fetch answer."""

    topic: str
    partition: int
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset)
    records: memoryview


@dataclass(frozen=True)
class FetchAnswer:
    error: int
    partitions: list[PartitionAnswer]


def read_fetch_answer(frame: memoryview, correlation_id: int) -> FetchAnswer:
    """The answer in ``frame`` (the bytes after the size prefix, response header v1 first)."""
    try:
        return _Reader(frame).answer(correlation_id)
    except (IndexError, struct.error, UnicodeDecodeError):
        raise AnswerError("a truncated or malformed Fetch answer") from None


class _Reader:
    def __init__(self, frame: memoryview) -> None:
        self.buf = frame
        self.pos = 0

    def answer(self, correlation_id: int) -> FetchAnswer:
        got = self.int32()
        if got != correlation_id:
            raise AnswerError(f"answered correlation id {got}, expected {correlation_id}")
        self.tagged()
        self.pos += 4  # throttle time
        error = self.int16()
        self.pos += 4  # session id
        partitions: list[PartitionAnswer] = []
        for _ in range(self.count()):
            topic = self.string()
            for _ in range(self.count()):
                partitions.append(self.partition(topic))
            self.tagged()
        self.tagged()
        return FetchAnswer(error, partitions)

    def partition(self, topic: str) -> PartitionAnswer:
        index, error, high, lso, log_start = _PARTITION.unpack_from(self.buf, self.pos)
        self.pos += _PARTITION.size
        aborted: list[tuple[int, int]] = []
        for _ in range(self.count()):
            aborted.append(_ABORTED.unpack_from(self.buf, self.pos))
            self.pos += _ABORTED.size
            self.tagged()
        self.pos += 4  # preferred read replica
        size = self.uvarint() - 1
        if size < 0:
            records = self.buf[0:0]
        else:
            if self.pos + size > len(self.buf):
                raise IndexError
            records = self.buf[self.pos : self.pos + size]
            self.pos += size
        self.tagged()
        return PartitionAnswer(topic, index, ErrorCode(error), high, lso, log_start, aborted,
                               records)

    def int16(self) -> int:
        (value,) = _INT16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        (value,) = _INT32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise AnswerError("an unsigned varint longer than 10 bytes")

    def count(self) -> int:
        """A compact array's length (null reads as empty)."""
        return max(0, self.uvarint() - 1)

    def string(self) -> str:
        size = self.uvarint() - 1
        if size < 0:
            return ""
        if self.pos + size > len(self.buf):
            raise IndexError
        text = bytes(self.buf[self.pos : self.pos + size]).decode()
        self.pos += size
        return text

    def tagged(self) -> None:
        """Skip a tagged-fields section."""
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()
