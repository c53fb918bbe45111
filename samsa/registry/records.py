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


def _encode(data: dict[str, Any] | None) -> bytes | None:
    return None if data is None else json.dumps(data, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _encode({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1}) or b""


def config_key(subject: str | None) -> bytes:
    return _encode({"keytype": CONFIG, "subject": subject, "magic": 0}) or b""


def mode_key(subject: str | None) -> bytes:
    return _encode({"keytype": MODE, "subject": subject, "magic": 0}) or b""


def delete_subject_key(subject: str) -> bytes:
    return _encode({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0}) or b""


def noop_key() -> bytes:
    return _encode({"keytype": NOOP, "magic": 0}) or b""


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list[dict[str, Any]], deleted: bool) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id,
                             "schema": schema, "deleted": deleted}
    if schema_type != "AVRO":  # as Confluent writes it: absent means AVRO
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    return _encode(value) or b""


def config_value(level: str) -> bytes:
    return _encode({"compatibilityLevel": level}) or b""


def mode_value(mode: str) -> bytes:
    return _encode({"mode": mode}) or b""


def delete_subject_value(subject: str, version: int) -> bytes:
    return _encode({"subject": subject, "version": version}) or b""


def decode(data: bytes | None) -> dict[str, Any] | None:
    """A key or value; None for a tombstone or for what is not a JSON object."""
    if data is None:
        return None
    try:
        decoded = json.loads(data)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None
