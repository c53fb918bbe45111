"""Raw Kafka request frames for the protocol-level tests: kio entities built from dicts,
size-prefixed frames encoded and decoded at any version, and ``FrameClient``, a blocking
connection that sends and receives them (shared by tests/clients, tests/groups_protocol and
tests/transactions)."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import socket
import struct
import types
import typing
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

_SIZE = struct.Struct(">i")


def _nested(tp: Any) -> tuple[Any, bool]:
    """(entity class, is a sequence) of a field type, or (None, False)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            tp = args[0]
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if args and dataclasses.is_dataclass(args[0]):
            return args[0], True
    if dataclasses.is_dataclass(tp):
        return tp, False
    return None, False


def build_entity(cls: type, data: dict[str, Any]) -> Any:
    """A kio entity from a dict of its fields: nested dicts and lists become the nested
    entities, ints become timedeltas where kio wants them. Keys the version does not have are
    dropped, so one dict serves several versions."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        nested, many = _nested(f.type)
        kafka_type = f.metadata.get("kafka_type", "")
        if value is None:
            pass
        elif nested is not None and many:
            value = tuple(v if dataclasses.is_dataclass(v) else build_entity(nested, v)
                          for v in value)
        elif nested is not None and isinstance(value, dict):
            value = build_entity(nested, value)
        elif isinstance(value, list):
            value = tuple(value)
        elif kafka_type.startswith("timedelta") and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        kwargs[f.name] = value
    return cls(**kwargs)


def encode_request(
    api_key: int, version: int, body: Any, correlation_id: int, client_id: str | None = "raw"
) -> bytes:
    """A size-prefixed request frame; ``body`` is a kio entity or a dict of its fields."""
    schema = load_request_schema(api_key, version)
    entity = body if isinstance(body, schema) else build_entity(schema, body)
    header_schema = schema.__header_schema__
    header = header_schema(
        request_api_key=api_key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id,
    )
    chunks: list[bytes] = []

    class _Out:
        write = staticmethod(lambda data: chunks.append(bytes(data)))

    entity_writer(header_schema)(_Out, header)
    entity_writer(schema)(_Out, entity)
    payload = b"".join(chunks)
    return _SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, response entity) of a frame without its size prefix."""
    schema = load_response_schema(api_key, version)
    header, used = entity_reader(schema.__header_schema__)(frame, 0)
    body, size = entity_reader(schema)(frame, used)  # (entity, bytes read)
    end = used + size
    assert end == len(frame), f"{len(frame) - end} bytes left after the {schema.__name__}"
    return header.correlation_id, body


class ConnectionClosed(Exception):
    pass


class FrameClient:
    """A blocking Kafka protocol connection for tests: explicit frames, explicit versions."""

    def __init__(self, address: tuple[str, int] | str, timeout: float = 10.0) -> None:
        if isinstance(address, str):
            host, port = address.split(",")[0].rsplit(":", 1)
            address = (host, int(port))
        self.address = address
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.settimeout(timeout)
        self._corr = itertools.count(1)

    def __enter__(self) -> FrameClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # frames

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self, timeout: float | None = None) -> bytes:
        """The next response frame (without its size); socket.timeout if none comes."""
        old = self.sock.gettimeout()
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            (size,) = _SIZE.unpack(self._read_exactly(4))
            return self._read_exactly(size)
        finally:
            self.sock.settimeout(old)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within ``timeout``;
        False when it stays open and silent. Any data received first is an error."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        assert data == b"", f"expected the connection to close, got {len(data)} bytes"
        return True

    # requests

    def send(self, api_key: int, version: int, body: Any, correlation_id: int | None = None,
             client_id: str | None = "raw") -> int:
        corr = next(self._corr) if correlation_id is None else correlation_id
        self.send_bytes(encode_request(api_key, version, body, corr, client_id))
        return corr

    def recv(self, api_key: int, version: int, timeout: float | None = None) -> tuple[int, Any]:
        return decode_response(api_key, version, self.recv_frame(timeout))

    def request(self, api_key: int, version: int, body: Any, timeout: float | None = None) -> Any:
        corr = self.send(api_key, version, body)
        got, response = self.recv(api_key, version, timeout)
        assert got == corr, f"correlation id {got}, expected {corr}"
        return response
