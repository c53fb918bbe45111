"""How the console shows a key, a value or a header: text, JSON (pretty), Avro or hex.

Avro values are read as Confluent's serializers write them: magic byte 0, the writer schema's
id (4 bytes, big-endian), then the Avro binary encoding; the schema comes from a schema
registry's ``GET {url}/schemas/ids/{id}`` (``SchemaRegistry``, cached). A value that cannot be
shown in the format asked for is shown in hex, with the reason in ``Rendered.error``.
"""

from __future__ import annotations

import io
import json
import struct
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import fastavro

from samsa.console.model import Message

FORMATS = ("auto", "text", "json", "avro", "hex")
MAGIC = 0
_HEADER = struct.Struct(">bI")
# How long an answer about a schema id that is not there (or a registry that is down) is
# kept: a page of messages asks once, not once per message.
FAILURE_TTL_S = 10.0


class SchemaError(Exception):
    """A schema that cannot be had: ``str(exc)`` says why."""


class SchemaRegistry:
    """A Confluent-compatible schema registry, read over HTTP (urllib); parsed schemas are
    cached for good (an id's schema never changes), failures for ``FAILURE_TTL_S``."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout_s
        self._schemas: dict[int, Any] = {}
        self._failures: dict[int, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def schema(self, schema_id: int) -> Any:
        """The parsed Avro schema of this id; SchemaError when there is none."""
        with self._lock:
            if schema_id in self._schemas:
                return self._schemas[schema_id]
            failed = self._failures.get(schema_id)
            if failed is not None and time.monotonic() < failed[0]:
                raise SchemaError(failed[1])
        try:
            parsed = self._fetch(schema_id)
        except SchemaError as exc:
            with self._lock:
                self._failures[schema_id] = (time.monotonic() + FAILURE_TTL_S, str(exc))
            raise
        with self._lock:
            self._schemas[schema_id] = parsed
            self._failures.pop(schema_id, None)
        return parsed

    def _fetch(self, schema_id: int) -> Any:
        address = f"{self.url}/schemas/ids/{schema_id}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise SchemaError(f"schema id {schema_id} not found in the registry") from exc
            raise SchemaError(f"the schema registry answered HTTP {exc.code} for schema id "
                              f"{schema_id}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SchemaError(f"schema registry {self.url} unreachable: {reason}") from exc
        except ValueError as exc:
            raise SchemaError(f"the schema registry's answer for schema id {schema_id} is "
                              "not JSON") from exc
        kind = body.get("schemaType", "AVRO") if isinstance(body, dict) else None
        if kind != "AVRO":
            raise SchemaError(f"schema id {schema_id} is a {kind} schema, not Avro")
        try:
            return fastavro.parse_schema(json.loads(body["schema"]))
        except (KeyError, TypeError, ValueError, fastavro.schema.SchemaParseException) as exc:
            raise SchemaError(f"schema id {schema_id} is not a valid Avro schema: {exc}"
                              ) from exc


@dataclass(frozen=True)
class Rendered:
    text: str  # what the page shows ("null" for no data)
    format: str  # the format used: "auto" resolved to one of the others
    error: str | None = None  # why the format asked for could not be used


def framed(data: bytes) -> tuple[int, bytes] | None:
    """(schema id, Avro payload) of a value with Confluent's framing, else None."""
    if len(data) < _HEADER.size or data[0] != MAGIC:
        return None
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, data[_HEADER.size:]


def decode_avro(data: bytes, registry: SchemaRegistry | None) -> Any:
    """The value a Confluent-framed Avro message holds; ValueError saying why not."""
    frame = framed(data)
    if frame is None:
        raise ValueError("no Confluent framing (magic byte 0 and a 4-byte schema id)")
    schema_id, payload = frame
    if registry is None:
        raise ValueError(f"schema id {schema_id}: no schema registry is configured")
    try:
        schema = registry.schema(schema_id)
    except SchemaError as exc:
        raise ValueError(str(exc)) from None
    stream = io.BytesIO(payload)
    try:
        value = fastavro.schemaless_reader(stream, schema, None)
    except Exception as exc:  # noqa: BLE001 - any byte string: fastavro fails in many ways
        raise ValueError(f"the payload does not match schema id {schema_id}: "
                         f"{type(exc).__name__}: {exc}") from None
    if stream.tell() != len(payload):
        raise ValueError(f"the payload does not match schema id {schema_id}: "
                         f"{len(payload) - stream.tell()} bytes left over")
    return value


def hex_text(data: bytes) -> str:
    return data.hex(" ")


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex(" ")
    return str(value)  # Avro's logical types: decimals, dates, UUIDs


def render(data: bytes | None, fmt: str, registry: SchemaRegistry | None) -> Rendered:
    """``data`` shown in ``fmt`` (one of FORMATS); hex with the error when it cannot be."""
    if fmt not in FORMATS:
        return Rendered(hex_text(data or b""), "hex", f"unknown format {fmt!r}")
    if data is None:
        return Rendered("null", "text" if fmt == "auto" else fmt)
    if fmt == "auto":
        return _auto(data, registry)
    if fmt == "hex":
        return Rendered(hex_text(data), "hex")
    if fmt == "avro":
        try:
            return Rendered(_json_text(decode_avro(data, registry)), "avro")
        except ValueError as exc:
            return Rendered(hex_text(data), "hex", f"undecodable Avro: {exc}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rendered(hex_text(data), "hex", f"not UTF-8 text: {exc.reason} at byte "
                                               f"{exc.start}")
    if fmt == "text":
        return Rendered(text, "text")
    try:
        return Rendered(_json_text(json.loads(text)), "json")
    except ValueError as exc:
        return Rendered(hex_text(data), "hex", f"not JSON: {exc}")


def _auto(data: bytes, registry: SchemaRegistry | None) -> Rendered:
    if registry is not None and framed(data) is not None:
        return render(data, "avro", registry)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Rendered(hex_text(data), "hex")
    try:
        return Rendered(_json_text(json.loads(text)), "json")
    except ValueError:
        pass
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return Rendered(hex_text(data), "hex")  # control characters: binary, not text
    return Rendered(text, "text")


def matches(message: Message, needle: str, fmt: str = "auto",
            registry: SchemaRegistry | None = None) -> bool:
    """The search filter: ``needle`` (case-insensitive) in the key, the value (as shown in
    ``fmt``), a header's name or a header's value (as text); an empty needle matches all."""
    if not needle:
        return True
    wanted = needle.casefold()
    texts = [render(message.key, fmt, registry).text,
             render(message.value, fmt, registry).text]
    for name, value in message.headers:
        texts.append(name)
        if value is not None:
            texts.append(render(value, "auto", None).text)
    return any(wanted in text.casefold() for text in texts)
