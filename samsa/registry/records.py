"""The records of the ``_schemas`` topic, in Confluent Schema Registry's format: JSON keys
``{"keytype": "SCHEMA" | "CONFIG" | "MODE" | "DELETE_SUBJECT" | "NOOP", ...}`` and JSON values
(null: a tombstone, the key's state removed), so that a registry of either kind reads the
other's topic."""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"


def _encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _encode({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _encode({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _encode({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _encode({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list[dict[str, Any]], deleted: bool) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id,
                             "schema": schema, "deleted": deleted}
    if schema_type != "AVRO":  # as Confluent writes it: absent means AVRO
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    return _encode(value)


def config_value(level: str) -> bytes:
    return _encode({"compatibilityLevel": level})


def mode_value(mode: str) -> bytes:
    return _encode({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _encode({"subject": subject, "version": version})


def decode(data: bytes | None) -> dict[str, Any] | None:
    """A key or value; None for a tombstone or for what is not a JSON object."""
    if data is None:
        return None
    try:
        decoded = json.loads(data)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None
