"""Request decoding and response encoding with kio's entities (Kafka's JSON schemas).

Decoding runs in kio's native reader. A response is encoded into a list of chunks: bytes, and
any file region a Fetch response carries as its records, passed through untouched so the
connection can send it with sendfile.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import IO, Any, cast

from kio.index import KioIndexError, load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from samsa.protocol.guard import check_body, check_nulls

_KEY_AND_VERSION = struct.Struct(">hh")
_SIZE = struct.Struct(">i")
_read_header_v1 = entity_reader(RequestHeaderV1)


class MalformedRequestError(Exception):
    """A frame that cannot be decoded; Kafka closes the connection."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any  # the kio request entity, or None when the (key, version) is not one kio knows
    size: int  # frame size in bytes


def peek_key_and_version(frame: bytes) -> tuple[int, int]:
    if len(frame) < _KEY_AND_VERSION.size:
        raise MalformedRequestError(f"frame of {len(frame)} bytes has no request header")
    return _KEY_AND_VERSION.unpack_from(frame, 0)


@cache
def _request_schema(api_key: int, api_version: int) -> Any:
    try:
        return load_request_schema(api_key, api_version)
    except KioIndexError:
        return None


def decode_request(frame: bytes) -> Request:
    """Decode a frame (the bytes after the size prefix)."""
    api_key, api_version = peek_key_and_version(frame)
    schema = _request_schema(api_key, api_version)
    try:
        if schema is None:
            header, _ = _read_header_v1(frame, 0)
            body = None
        else:
            header, used = entity_reader(schema.__header_schema__)(frame, 0)
            check_body(schema, frame, used)
            body, _ = entity_reader(schema)(frame, used)
            check_nulls(schema, body)
    except (DecodeError, KeyError, ValueError, TypeError) as exc:  # FrameTooShort too
        raise MalformedRequestError(
            f"cannot decode api key {api_key} v{api_version}: {type(exc).__name__}: {exc}"
        ) from None
    return Request(
        api_key, api_version, header.correlation_id, header.client_id or "", body, len(frame)
    )


class _Chunks(list):
    """A kio Writable that keeps every write as a chunk (records are not copied)."""

    def write(self, data: Any) -> None:
        self.append(data)

    @property
    def out(self) -> IO[bytes]:
        """Itself, typed as the binary stream kio's writers take (it has their ``write``)."""
        return cast("IO[bytes]", self)


def encode_response(correlation_id: int, response: Any) -> list[Any]:
    """The size-prefixed response frame as a list of chunks (bytes or file regions)."""
    chunks = _Chunks()
    header_schema = type(response).__header_schema__
    entity_writer(header_schema)(chunks.out, header_schema(correlation_id=correlation_id))
    entity_writer(type(response))(chunks.out, response)
    size = sum(len(c) for c in chunks)
    return [_SIZE.pack(size), *chunks]


def encode_message(entity: Any) -> bytes:
    """Encode a kio entity on its own (tests and tools)."""
    chunks = _Chunks()
    entity_writer(type(entity))(chunks.out, entity)
    return b"".join(bytes(c) for c in chunks)
