"""Compatibility levels through the REST API (Avro: the Apache Avro package's checker), each
level and transitive against not, and JSON Schema's and Protobuf's rules directly."""

from __future__ import annotations

import json

import pytest

from samsa.registry.compatibility import incompatibilities
from samsa.registry.schema_types import parse_schema

from .helpers import Http, record

# Three versions whose pairs tell the levels apart:
#   A: {a}    B: {a, b="x"}    C: {b="x"}  (a removed, b kept with its default)
A = record("R", ("a", "int"))
B = record("R", ("a", "int"), ("b", "string", "x"))
C = record("R", ("b", "string", "x"))
NEW_REQUIRED = record("R", ("a", "int"), ("c", "string"))  # a field without a default


def _register_all(http: Http, subject: str, level: str, *schemas: dict[str, object]) -> list[int]:
    assert http.put(f"/config/{subject}", {"compatibility": level}).status == 200
    return [http.register(subject, s).status for s in schemas]


@pytest.mark.parametrize("level, statuses", [
    # B reads A (b has a default); C reads B; A cannot read C (a has no default in A)
    ("BACKWARD", [200, 200, 200]),
    ("NONE", [200, 200, 200]),
    # A reads B (b ignored); B cannot read C's data (a missing, no default)
    ("FORWARD", [200, 200, 409]),
    ("FULL", [200, 200, 409]),
])
def test_non_transitive_levels(http: Http, level: str, statuses: list[int]) -> None:
    assert _register_all(http, "s", level, A, B, C) == statuses


def test_backward_transitive_checks_every_version(http: Http) -> None:
    # V3 reads V2's data (a missing: its default) but not V1's (a was an int)
    v2 = record("R", ("b", "string", "x"))
    v3 = record("R", ("b", "string", "x"), ("a", "string", "y"))
    assert _register_all(http, "plain", "BACKWARD", A, v2, v3) == [200, 200, 200]
    assert _register_all(http, "trans", "BACKWARD_TRANSITIVE", A, v2, v3) == [200, 200, 409]
    # a field without a default breaks against the latest already
    assert _register_all(http, "new", "BACKWARD", A, NEW_REQUIRED) == [200, 409]


def test_forward_transitive_against_forward(http: Http) -> None:
    # V1 {a}, V2 {a, b=x}, V3 {b=x, a=0}: V2 reads V3 (a is there), V1 reads V3 (a is there)
    v3 = record("R", ("b", "string", "x"), ("a", "int", 0))
    v4 = record("R", ("b", "string", "x"))  # drops a: V3 (a has a default) reads it, V1 not
    assert _register_all(http, "fwd", "FORWARD", A, B, v3, v4) == [200, 200, 200, 200]
    assert _register_all(http, "fwdt", "FORWARD_TRANSITIVE", A, B, v3, v4) == [
        200, 200, 200, 409]


def test_full_transitive_against_full(http: Http) -> None:
    v2 = record("R", ("a", "int", 0))
    v3 = record("R", ("a", "int", 0), ("b", "string", "x"))
    v4 = record("R", ("b", "string", "x"))  # a dropped: v3 reads it (a's default), v1 not
    assert _register_all(http, "full", "FULL", A, v2, v3, v4) == [200, 200, 200, 200]
    assert _register_all(http, "fullt", "FULL_TRANSITIVE", A, v2, v3, v4) == [
        200, 200, 200, 409]


def test_global_level_applies_where_the_subject_has_none(http: Http) -> None:
    assert http.put("/config", {"compatibility": "NONE"}).status == 200
    assert http.register("s", A).status == 200
    assert http.register("s", record("R", ("a", "string"))).status == 200
    assert http.put("/config/s", {"compatibility": "BACKWARD"}).status == 200
    assert http.register("s", record("R", ("a", "boolean"))).status == 409


def test_type_change_is_incompatible(http: Http) -> None:
    assert http.register("s", A).status == 200
    changed = http.register("s", {"type": "object"}, "JSON")
    assert changed.status == 409


def _json(schema: object) -> object:
    return parse_schema("JSON", json.dumps(schema))


@pytest.mark.parametrize("old, new, backward", [
    ({"type": "integer"}, {"type": "number"}, True),  # widened
    ({"type": "number"}, {"type": "integer"}, False),  # narrowed
    ({"type": "string"}, {"type": ["string", "null"]}, True),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, True),
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, False),
    ({"type": "integer", "minimum": 0}, {"type": "integer"}, True),
    ({"type": "integer"}, {"type": "integer", "minimum": 0}, False),
    ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True),
    ({"enum": ["a", "b"]}, {"enum": ["a"]}, False),
    # objects: open content model (additionalProperties absent)
    ({"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {}}, True),  # removed from an open model
    ({"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
     False),  # PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
    # closed content model
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "additionalProperties": False},
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
      "additionalProperties": False}, True),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
      "additionalProperties": False},
     {"type": "object", "properties": {"a": {"type": "string"}},
      "additionalProperties": False}, False),  # PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ({"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
     {"type": "object", "properties": {"a": {"type": "string"}}}, True),
    ({"type": "array", "items": {"type": "integer"}},
     {"type": "array", "items": {"type": "number"}}, True),
    ({"type": "array", "items": {"type": "number"}},
     {"type": "array", "items": {"type": "integer"}}, False),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]},
     {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, True),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]},
     {"oneOf": [{"type": "string"}]}, False),
    ({"definitions": {"n": {"type": "integer"}}, "$ref": "#/definitions/n"},
     {"definitions": {"n": {"type": "number"}}, "$ref": "#/definitions/n"}, True),
    ({"definitions": {"n": {"type": "number"}}, "$ref": "#/definitions/n"},
     {"definitions": {"n": {"type": "integer"}}, "$ref": "#/definitions/n"}, False),
])
def test_json_schema_rules(old: object, new: object, backward: bool) -> None:
    found = incompatibilities("BACKWARD", _json(new), [_json(old)])
    assert (found == []) is backward, found


def _proto(text: str) -> object:
    return parse_schema("PROTOBUF", text)


BASE = 'syntax = "proto3"; package shop; message Item { string name = 1; int32 count = 2; }'


@pytest.mark.parametrize("new, compatible", [
    ('syntax = "proto3"; package shop; message Item { string name = 1; int32 count = 2;'
     ' bool sold = 3; }', True),  # field added
    ('syntax = "proto3"; package shop; message Item { string name = 1; }', True),  # removed
    ('syntax = "proto3"; package shop; message Item { string title = 1; int32 count = 2; }',
     True),  # renamed: only numbers travel
    ('syntax = "proto3"; package shop; message Item { bytes name = 1; int64 count = 2; }',
     True),  # wire-compatible scalars
    ('syntax = "proto3"; package shop; message Item { string name = 1; string count = 2; }',
     False),  # FIELD_SCALAR_KIND_CHANGED
    ('syntax = "proto3"; package shop; message Item { string name = 1; '
     'repeated int32 count = 2; }', False),  # label changed
    ('syntax = "proto3"; package store; message Item { string name = 1; int32 count = 2; }',
     False),  # PACKAGE_CHANGED
    ('syntax = "proto3"; package shop; message Thing { string name = 1; }', False),  # removed
    ('syntax = "proto3"; package shop; message Item { string name = 1; Other count = 2; }'
     ' message Other {}', False),  # FIELD_KIND_CHANGED
    ('syntax = "proto3"; package shop; message Item { oneof o { string name = 1;'
     ' int32 count = 2; } }', False),  # MULTIPLE_FIELDS_MOVED_TO_ONEOF
])
def test_protobuf_rules(new: str, compatible: bool) -> None:
    for level in ("BACKWARD", "FORWARD", "FULL"):
        found = incompatibilities(level, _proto(new), [_proto(BASE)])
        assert (found == []) is compatible, (level, found)


def test_protobuf_required_fields_proto2() -> None:
    old = 'syntax = "proto2"; message M { required int32 a = 1; }'
    new = 'syntax = "proto2"; message M { required int32 a = 1; required int32 b = 2; }'
    assert incompatibilities("BACKWARD", _proto(new), [_proto(old)])
    assert incompatibilities("BACKWARD", _proto(old), [_proto(new)])
