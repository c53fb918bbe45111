"""The pipeline's messages: activity events and monitoring events, in Avro or JSON.

Avro messages use the Confluent wire format: a zero magic byte, the schema id as a 4-byte
big-endian integer, then the Avro binary encoding (fastavro's schemaless writer). The schema ids
are fixed in ``SCHEMAS`` unless the frontends register their schemas in a schema registry
(``samsa.pipeline.schemas``), in which case a reader is given the registered writer schemas by id
(``registered``) and reads every message into the latest activity schema, ``ACTIVITY_SCHEMA_V2``
(Avro's schema resolution: a field the writer lacks takes its default). A reader meeting an id it
does not know fails with a message naming it. JSON messages are UTF-8 objects with the same field
names. A reader tells the two apart by the first byte, so one topic may hold both.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

AVRO_MAGIC = 0
_HEADER = struct.Struct(">bI")

ACTIVITY_SCHEMA_ID = 1
MONITORING_SCHEMA_ID = 2

#: page views, searches and clicks, as the paper's frontends publish them
ACTIVITY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "ActivityEvent",
    "namespace": "samsa.pipeline",
    "fields": [
        {"name": "event_type", "type": "string"},
        {"name": "user_id", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "query", "type": ["null", "string"], "default": None},
        {"name": "target", "type": ["null", "string"], "default": None},
        {"name": "server", "type": "string"},
        {"name": "timestamp", "type": "long"},  # milliseconds since the epoch, UTC
    ],
}

#: the activity schema as it evolves mid-run in the deployment: a field added with a default,
#: which the registry accepts as version 2 under BACKWARD compatibility
ACTIVITY_SCHEMA_V2: dict[str, Any] = {
    **ACTIVITY_SCHEMA,
    "fields": [
        *ACTIVITY_SCHEMA["fields"],
        {"name": "referrer", "type": ["null", "string"], "default": None},
    ],
}

#: one producer's count of the messages it published to one topic in one time window
MONITORING_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "MonitoringEvent",
    "namespace": "samsa.pipeline",
    "fields": [
        {"name": "server", "type": "string"},
        {"name": "topic", "type": "string"},
        {"name": "window_start", "type": "long"},  # milliseconds since the epoch, UTC
        {"name": "window_ms", "type": "long"},
        {"name": "count", "type": "long"},
    ],
}

SCHEMAS: dict[int, Any] = {
    ACTIVITY_SCHEMA_ID: parse_schema(ACTIVITY_SCHEMA),
    MONITORING_SCHEMA_ID: parse_schema(MONITORING_SCHEMA),
}
#: what a reader given registered writer schemas reads each kind of message into
READERS: dict[int, Any] = {
    ACTIVITY_SCHEMA_ID: parse_schema(ACTIVITY_SCHEMA_V2),
    MONITORING_SCHEMA_ID: SCHEMAS[MONITORING_SCHEMA_ID],
}

#: 9999-12-31T23:59:59.999Z in milliseconds
MAX_TIMESTAMP_MS = 253_402_300_799_999

EVENT_TYPES = ("page_view", "search", "click")
_ACTIVITY_TOPICS = {"page_view": "page_views", "search": "searches", "click": "clicks"}
FORMATS = ("avro", "json")


class BadEventError(ValueError):
    """A message that is not a pipeline event."""


@dataclass(frozen=True)
class Topics:
    """The pipeline's topic names; ``prefix`` lets several pipelines share one cluster."""

    prefix: str = ""

    def activity(self, event_type: str) -> str:
        return f"{self.prefix}{_ACTIVITY_TOPICS[event_type]}"

    @property
    def all_activity(self) -> list[str]:
        return [self.activity(t) for t in EVENT_TYPES]

    @property
    def monitoring(self) -> str:
        return f"{self.prefix}monitoring"


DEFAULT_TOPICS = Topics()


def encode(event: dict[str, Any], schema_id: int, fmt: str, schema: Any = None) -> bytes:
    """One event as a message value in ``fmt`` ("avro" or "json"); ``schema`` (parsed) is the
    writer schema registered as ``schema_id``, one of ``SCHEMAS`` by default."""
    if fmt == "json":
        return json.dumps(event, separators=(",", ":")).encode()
    if fmt != "avro":
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    import io

    out = io.BytesIO()
    out.write(_HEADER.pack(AVRO_MAGIC, schema_id))
    schemaless_writer(out, SCHEMAS[schema_id] if schema is None else schema, event)
    return out.getvalue()


def decode(
    value: bytes | None, schema_id: int, registered: Mapping[int, Any] | None = None
) -> dict[str, Any]:
    """A message value (Avro with a schema id, or JSON) as a dict of ``schema_id``'s fields.

    With ``registered`` (writer schemas by registry id), an Avro message may carry any of those
    ids and is read into ``READERS[schema_id]``; ``schema_id`` only names the kind of event."""
    if not value:
        raise BadEventError("empty message value")
    if value[0] == AVRO_MAGIC:
        if len(value) < _HEADER.size:
            raise BadEventError(f"Avro message of {len(value)} bytes has no schema id")
        _, found = _HEADER.unpack_from(value)
        if registered is not None:
            return _decode_registered(value, found, schema_id, registered)
        if found not in SCHEMAS:
            raise BadEventError(f"unknown Avro schema id {found}")
        if found != schema_id:
            raise BadEventError(f"Avro schema id {found} where {schema_id} was expected")
        import io

        body = io.BytesIO(value)
        body.seek(_HEADER.size)
        try:
            event = schemaless_reader(body, SCHEMAS[found], None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError...
            raise BadEventError(f"undecodable Avro body: {exc}") from exc
        if body.tell() != len(value):
            raise BadEventError(f"{len(value) - body.tell()} bytes after the Avro body")
        return _checked(event, schema_id)
    try:
        event = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadEventError(f"neither Avro (magic byte 0) nor JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise BadEventError("JSON message is not an object")
    for field in SCHEMAS[schema_id]["fields"]:
        name = field["name"]
        if name not in event:
            if "default" not in field:
                raise BadEventError(f"JSON event lacks {name!r}")
            event[name] = field["default"]
        elif not _matches(event[name], field["type"]):
            raise BadEventError(f"JSON event field {name!r} is not of Avro type {field['type']}")
    return _checked(event, schema_id)


def _decode_registered(
    value: bytes, found: int, schema_id: int, registered: Mapping[int, Any]
) -> dict[str, Any]:
    import io

    if found not in registered:
        raise BadEventError(f"schema id {found} is not registered")
    body = io.BytesIO(value)
    body.seek(_HEADER.size)
    try:
        event = schemaless_reader(body, registered[found], READERS[schema_id])
    except Exception as exc:  # a body or a writer schema the reader cannot resolve
        raise BadEventError(f"undecodable Avro body (schema id {found}): {exc}") from exc
    if body.tell() != len(value):
        raise BadEventError(f"{len(value) - body.tell()} bytes after the Avro body")
    return _checked(event, schema_id)


def _checked(event: dict[str, Any], schema_id: int) -> dict[str, Any]:
    """Refuse event times Parquet and Spark cannot hold (before 1970, after 9999)."""
    name = "timestamp" if schema_id == ACTIVITY_SCHEMA_ID else "window_start"
    if not 0 <= event[name] <= MAX_TIMESTAMP_MS:
        raise BadEventError(f"{name} {event[name]} is not a time between 1970 and 9999")
    return event


def _matches(value: Any, avro_type: Any) -> bool:
    if isinstance(avro_type, list):
        return any(_matches(value, t) for t in avro_type)
    if avro_type == "null":
        return value is None
    if avro_type == "string":
        return isinstance(value, str)
    if avro_type == "long":
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    raise AssertionError(f"no JSON check for Avro type {avro_type}")
