"""``formats``: every format, and Avro with Confluent's framing decoded through a real HTTP
schema registry (``GET /schemas/ids/{id}``, served from a thread on loopback)."""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import fastavro
import pytest

from samsa.console.formats import FORMATS, Rendered, SchemaRegistry, matches, render
from samsa.console.model import Message

SCHEMA = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
SCHEMAS = {7: {"schema": json.dumps(SCHEMA)},
           8: {"schema": '{"type": "string"}', "schemaType": "PROTOBUF"}}


class Registry(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Registry.requests.append(self.path)
        prefix = "/schemas/ids/"
        found = SCHEMAS.get(int(self.path[len(prefix):])) if self.path.startswith(
            prefix) else None
        body = json.dumps(found or {"error_code": 40403, "message": "Schema not found"})
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Registry.requests = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def avro(schema_id: int, record: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
    return struct.pack(">bI", 0, schema_id) + out.getvalue()


def test_text_json_hex_and_auto() -> None:
    assert render(None, "auto", None) == Rendered("null", "text")
    assert render(b"hello", "text", None) == Rendered("hello", "text")
    assert render(b'{"a":[1,2]}', "json", None) == Rendered(
        '{\n  "a": [\n    1,\n    2\n  ]\n}', "json")
    assert render(b"\x00\xff", "hex", None) == Rendered("00 ff", "hex")
    assert render(b'{"a": "\xc3\xa9"}', "auto", None) == Rendered('{\n  "a": "\u00e9"\n}', "json")
    assert render(b"plain words", "auto", None) == Rendered("plain words", "text")
    assert render(b"\xff\xfe", "auto", None) == Rendered("ff fe", "hex")
    assert render(b"a\x01b", "auto", None) == Rendered("61 01 62", "hex")
    failed = render(b"not json", "json", None)
    assert (failed.text, failed.format) == ("6e 6f 74 20 6a 73 6f 6e", "hex")
    assert failed.error and failed.error.startswith("not JSON")
    failed = render(b"\xff", "text", None)
    assert failed.format == "hex" and failed.error and "not UTF-8" in failed.error
    assert set(FORMATS) == {"auto", "text", "json", "avro", "hex"}


def test_avro_through_a_schema_registry(registry_url: str) -> None:
    registry = SchemaRegistry(registry_url)
    value = avro(7, {"id": 42, "item": "t\u00e9a"})
    shown = render(value, "avro", registry)
    assert shown == Rendered('{\n  "id": 42,\n  "item": "t\u00e9a"\n}', "avro")
    assert render(value, "auto", registry) == shown
    assert render(avro(7, {"id": 1, "item": "x"}), "auto", registry).format == "avro"
    assert Registry.requests == ["/schemas/ids/7"]  # cached
    # without a registry, auto does not guess Avro
    assert render(value, "auto", None).format in ("hex", "text")


def test_avro_errors(registry_url: str) -> None:
    registry = SchemaRegistry(registry_url)
    unknown = render(avro(9, {"id": 1, "item": "x"}), "avro", registry)
    assert unknown.format == "hex"
    assert unknown.error == "undecodable Avro: schema id 9 not found in the registry"
    render(avro(9, {"id": 1, "item": "x"}), "avro", registry)
    assert Registry.requests.count("/schemas/ids/9") == 1  # the failure is remembered
    corrupt = render(struct.pack(">bI", 0, 7) + b"\x02\xff\xff\xff\xff\xff", "avro", registry)
    assert corrupt.format == "hex" and corrupt.error is not None
    assert corrupt.error.startswith("undecodable Avro: the payload does not match schema id 7")
    left_over = render(avro(7, {"id": 1, "item": "x"}) + b"\x00", "avro", registry)
    assert left_over.error and "1 bytes left over" in left_over.error
    assert render(b"plain", "avro", registry).error == (
        "undecodable Avro: no Confluent framing (magic byte 0 and a 4-byte schema id)")
    protobuf = render(struct.pack(">bI", 0, 8) + b"\x00", "avro", registry)
    assert protobuf.error == "undecodable Avro: schema id 8 is a PROTOBUF schema, not Avro"
    assert render(avro(7, {"id": 1, "item": "x"}), "avro", None).error == (
        "undecodable Avro: schema id 7: no schema registry is configured")


def test_a_registry_that_is_down() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    registry = SchemaRegistry(f"http://127.0.0.1:{port}", timeout_s=2.0)
    shown = render(avro(7, {"id": 1, "item": "x"}), "auto", registry)
    assert shown.format == "hex" and shown.error is not None
    assert shown.error.startswith(f"undecodable Avro: schema registry http://127.0.0.1:{port} "
                                  "unreachable")


def test_matches(registry_url: str) -> None:
    registry = SchemaRegistry(registry_url)
    message = Message("t", 0, 5, 0, "CreateTime", b"order-1", avro(7, {"id": 3, "item": "Tea"}),
                      [("trace", b"abc123"), ("empty", None)])
    assert matches(message, "")
    assert matches(message, "ORDER-1")
    assert matches(message, '"item": "tea"', registry=registry)
    assert not matches(message, '"item": "tea"')  # not decoded without a registry
    assert matches(message, "trace") and matches(message, "abc1")
    assert not matches(message, "coffee", registry=registry)
