"""A follower's Fetch v12, hand-encoded and hand-decoded: the replica fetcher sends one per
round trip to its leader, and kio's entity writer and reader cost more than the rest of the
round trip does for a follower that keeps up.

``encode_fetch_request`` writes the request frame kio would write for the fields a follower
sets (tests/protocol/test_replica_fetch.py checks it byte for byte); ``decode_fetch_response``
reads the response into slotted objects with kio's field names, whose ``records`` are read-only
views into the frame, never copies: they live as long as the frame's buffer holds it (the
replica fetcher's connection reuses its buffer at the next request). Tagged fields the follower
does not read are skipped, unknown ones too.
"""

from __future__ import annotations

import struct
from typing import Any

from samsa.errors import ErrorCode
from samsa.protocol.fast import uvarint as _uvarint

FETCH = 1
VERSION = 12

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_REQUEST = struct.Struct(">iiiibii")  # replica id .. session epoch
_PARTITION = struct.Struct(">iiqiqi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RESPONSE = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION_DATA = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start
_ABORTED = struct.Struct(">qq")
_EPOCH_END = struct.Struct(">iq")
_LEADER = struct.Struct(">ii")
_SNAPSHOT = struct.Struct(">qi")

_NO_TAGS = b"\x00"
_EMPTY_ARRAY = b"\x01"
_EMPTY_STRING = b"\x01"

_ERRORS: dict[int, ErrorCode] = {}


def _error(code: int) -> ErrorCode:
    error = _ERRORS.get(code)
    if error is None:
        error = _ERRORS[code] = ErrorCode(code)
    return error


def _compact_string(value: str) -> bytes:
    data = value.encode()
    return _uvarint(len(data) + 1) + data


# (topic, [(partition, current leader epoch, fetch offset, last fetched epoch, log start
# offset, partition max bytes)])
FetchTopics = list[tuple[str, list[tuple[int, int, int, int, int, int]]]]


def encode_fetch_request(
    correlation_id: int, client_id: str, replica_id: int, max_wait_ms: int, min_bytes: int,
    max_bytes: int, topics: FetchTopics,
) -> bytes:
    """The size-prefixed frame of a follower's Fetch v12 (request header v2): read uncommitted,
    no fetch session, no forgotten topics, no rack, no cluster id."""
    client = client_id.encode()
    parts = [_HEADER.pack(FETCH, VERSION, correlation_id, len(client)), client, _NO_TAGS,
             _REQUEST.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1),
             _uvarint(len(topics) + 1)]
    pack = _PARTITION.pack
    for topic, partitions in topics:
        parts.append(_compact_string(topic))
        parts.append(_uvarint(len(partitions) + 1))
        for p in partitions:
            parts.append(pack(*p))
            parts.append(_NO_TAGS)
        parts.append(_NO_TAGS)
    parts.append(_EMPTY_ARRAY)  # forgotten_topics_data
    parts.append(_EMPTY_STRING)  # rack_id
    parts.append(_NO_TAGS)
    payload = b"".join(parts)
    return _I32.pack(len(payload)) + payload


class EpochEndOffset:
    __slots__ = ("epoch", "end_offset")

    def __init__(self, epoch: int = -1, end_offset: int = -1) -> None:
        self.epoch = epoch
        self.end_offset = end_offset


class LeaderIdAndEpoch:
    __slots__ = ("leader_id", "leader_epoch")

    def __init__(self, leader_id: int = -1, leader_epoch: int = -1) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


class AbortedTransaction:
    __slots__ = ("producer_id", "first_offset")

    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset


_NO_DIVERGENCE = EpochEndOffset()
_NO_LEADER = LeaderIdAndEpoch()


class PartitionData:
    __slots__ = ("partition_index", "error_code", "high_watermark", "last_stable_offset",
                 "log_start_offset", "aborted_transactions", "preferred_read_replica",
                 "records", "diverging_epoch", "current_leader")

    partition_index: int
    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...] | None
    preferred_read_replica: int
    records: memoryview | None
    diverging_epoch: EpochEndOffset
    current_leader: LeaderIdAndEpoch


class FetchableTopicResponse:
    __slots__ = ("topic", "partitions")

    def __init__(self, topic: str, partitions: tuple[PartitionData, ...]) -> None:
        self.topic = topic
        self.partitions = partitions


class FetchResponse:
    __slots__ = ("throttle_time_ms", "error_code", "session_id", "responses")

    def __init__(self, throttle_time_ms: int, error_code: ErrorCode, session_id: int,
                 responses: tuple[FetchableTopicResponse, ...]) -> None:
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.session_id = session_id
        self.responses = responses


class FetchResponseError(Exception):
    """A frame that is not a Fetch v12 response to the request sent."""


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def uvarint(self) -> int:
        buf, pos = self.buf, self.pos
        value = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 28:
                raise FetchResponseError("a varint longer than five bytes")

    def unpack(self, fmt: struct.Struct) -> tuple[Any, ...]:
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values

    def take(self, n: int) -> memoryview:
        start = self.pos
        end = start + n
        if end > len(self.buf):
            raise FetchResponseError(f"{n} bytes announced, {len(self.buf) - start} left")
        self.pos = end
        return self.buf[start:end]

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise FetchResponseError("a null topic name")
        return str(self.take(n), "utf-8")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def decode_fetch_response(frame: memoryview, correlation_id: int) -> FetchResponse:
    """A Fetch v12 response frame (the bytes after the size prefix, header v1 first).
    FetchResponseError when it is malformed or answers another correlation id."""
    try:
        return _decode(frame, correlation_id)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise FetchResponseError(f"cannot read the Fetch response: {exc!r}") from None


def _decode(frame: memoryview, correlation_id: int) -> FetchResponse:
    (answered,) = _I32.unpack_from(frame, 0)
    if answered != correlation_id:
        raise FetchResponseError(f"answered correlation id {answered}, expected "
                                 f"{correlation_id}")
    r = _Reader(frame, 4)
    r.skip_tags()
    throttle, error, session = r.unpack(_RESPONSE)
    topics = []
    for _ in range(r.uvarint() - 1):
        name = r.compact_string()
        partitions = []
        for _ in range(r.uvarint() - 1):
            p = PartitionData()
            (p.partition_index, code, p.high_watermark, p.last_stable_offset,
             p.log_start_offset) = r.unpack(_PARTITION_DATA)
            p.error_code = _error(code)
            count = r.uvarint() - 1
            if count < 0:
                p.aborted_transactions = None
            else:
                aborted = []
                for _ in range(count):
                    aborted.append(AbortedTransaction(*r.unpack(_ABORTED)))
                    r.skip_tags()
                p.aborted_transactions = tuple(aborted)
            (p.preferred_read_replica,) = r.unpack(_I32)
            size = r.uvarint() - 1
            p.records = None if size < 0 else r.take(size)
            p.diverging_epoch = _NO_DIVERGENCE
            p.current_leader = _NO_LEADER
            for _ in range(r.uvarint()):
                tag = r.uvarint()
                field = _Reader(r.take(r.uvarint()), 0)
                if tag == 0:
                    p.diverging_epoch = EpochEndOffset(*field.unpack(_EPOCH_END))
                elif tag == 1:
                    p.current_leader = LeaderIdAndEpoch(*field.unpack(_LEADER))
            partitions.append(p)
        r.skip_tags()
        topics.append(FetchableTopicResponse(name, tuple(partitions)))
    r.skip_tags()
    return FetchResponse(throttle, _error(error), session, tuple(topics))
