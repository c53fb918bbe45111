"""JSON: JSON Schema documents, checked by ``jsonschema`` against their draft's meta-schema.

Compatibility follows the rules Confluent documents for JSON Schema, for the common cases.
A reader can read a writer's documents unless (Confluent's difference names):

- TYPE_NARROWED / TYPE_CHANGED: the reader's ``type`` allows fewer types (``integer`` is
  within ``number``), or the reader adds a ``type`` the writer did not have;
- ENUM_ARRAY_NARROWED / ENUM_ARRAY_CHANGED, CONST changed: fewer allowed values;
- MAX_*_DECREASED / MIN_*_INCREASED / *_ADDED: ``maximum``, ``minimum``,
  ``exclusiveMaximum``, ``exclusiveMinimum``, ``maxLength``, ``minLength``, ``maxItems``,
  ``minItems``, ``maxProperties``, ``minProperties`` tightened or added; ``pattern`` and
  ``multipleOf`` added or changed;
- REQUIRED_ATTRIBUTE_ADDED: the reader requires a property the writer did not;
- PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL: the reader declares a property the writer did not,
  while the writer allowed any other property (no ``additionalProperties: false``), unless
  the reader's schema for it accepts anything;
- PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL: the writer's property is unknown to a reader
  with ``additionalProperties: false`` (or one whose ``additionalProperties`` schema cannot
  read it);
- ADDITIONAL_PROPERTIES_REMOVED / NARROWED, ITEMS / ADDITIONAL_ITEMS likewise for arrays;
- COMBINED_TYPE_*: every branch of the writer's ``oneOf`` / ``anyOf`` must be readable by
  one of the reader's; ``allOf`` is compared branch by branch;
- ``not`` changed.

``$ref`` to the document itself (``#/definitions/...``, ``#/$defs/...``) and to registered
references (by their name) are followed; other ``$ref``s compare equal only to the same URL.
Not covered: ``if``/``then``/``else``, ``dependentSchemas``, ``patternProperties`` beyond
equality, ``unevaluated*``.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from samsa.registry.parsed import (
    ParsedSchema,
    ResolvedReference,
    SchemaInvalid,
    compact_json,
    parse_json,
)

SCHEMA_TYPE = "JSON"

_MAXIMA = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_MINIMA = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
# a $ref chain deeper than this is a cycle (recursive schemas): taken as compatible
_MAX_DEPTH = 64


class JsonSchema:
    schema_type = SCHEMA_TYPE

    def __init__(self, text: str, references: list[ResolvedReference]) -> None:
        document = parse_json(text)
        if not isinstance(document, dict | bool):
            raise SchemaInvalid("a JSON Schema is an object or a boolean")
        try:
            jsonschema.validators.validator_for(document).check_schema(document)
        except jsonschema.exceptions.SchemaError as exc:
            raise SchemaInvalid(exc.message) from exc
        self.document: dict[str, Any] | bool = document
        self.references: dict[str, Any] = {
            ref.name: parse_json(ref.schema, f"reference {ref.name} is not JSON")
            for ref in references}
        self._canonical = compact_json(document)

    @property
    def canonical(self) -> str:
        return self._canonical

    def read_incompatibilities(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, JsonSchema)
        return _Comparison(self, writer).compare(self.document, writer.document, "#/", 0)


def _types(schema: dict[str, Any]) -> set[str] | None:
    found = schema.get("type")
    if found is None:
        return None
    return {found} if isinstance(found, str) else set(found)


def _open(schema: dict[str, Any], key: str) -> bool:
    """Whether ``key`` (additionalProperties, additionalItems) accepts anything."""
    value = schema.get(key, True)
    return value is True or value == {}


class _Comparison:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.roots = {"reader": reader, "writer": writer}

    def _resolve(self, schema: Any, side: str, depth: int) -> Any:
        """Follow ``$ref``s into the document or a registered reference."""
        while isinstance(schema, dict) and "$ref" in schema and depth < _MAX_DEPTH:
            ref = schema["$ref"]
            root = self.roots[side]
            target: Any
            if ref.startswith("#"):
                target = root.document
            elif ref.split("#")[0] in root.references:
                base, _, ref = ref.partition("#")
                target = root.references[base]
                ref = "#" + ref
            else:
                return schema
            for part in ref.lstrip("#").strip("/").split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    return schema
                target = target[part]
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings} if isinstance(target, dict) and siblings else target
            depth += 1
        return schema

    def compare(self, reader: Any, writer: Any, path: str, depth: int) -> list[str]:
        if depth > _MAX_DEPTH:
            return []
        reader = self._resolve(reader, "reader", depth)
        writer = self._resolve(writer, "writer", depth)
        if reader is True or reader == {} or writer is False:
            return []
        if reader is False:
            return [f"{path}: the reader accepts nothing (false)"]
        if writer is True:
            writer = {}
        if isinstance(reader, dict) and "$ref" in reader or isinstance(writer, dict) and (
                "$ref" in writer):
            if reader.get("$ref") == writer.get("$ref"):
                return []
            return [f"{path}: $ref changed from {writer.get('$ref')} to {reader.get('$ref')}"]
        found: list[str] = []
        found += self._types(reader, writer, path)
        found += self._values(reader, writer, path)
        found += self._bounds(reader, writer, path)
        found += self._combined(reader, writer, path, depth)
        found += self._object(reader, writer, path, depth)
        found += self._array(reader, writer, path, depth)
        return found

    @staticmethod
    def _types(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        r, w = _types(reader), _types(writer)
        if r is None:
            return []
        if w is None:
            return [f"{path}: TYPE_CHANGED: the reader restricts type to {sorted(r)}"]
        if "number" in r:
            r = r | {"integer"}
        missing = w - r
        if missing:
            return [f"{path}: TYPE_NARROWED: the reader does not accept {sorted(missing)}"]
        return []

    @staticmethod
    def _values(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        found = []
        if "enum" in reader:
            written = writer.get("enum", [writer["const"]] if "const" in writer else None)
            if written is None:
                found.append(f"{path}: ENUM_ARRAY_CHANGED: the reader adds an enum")
            elif any(v not in reader["enum"] for v in written):
                found.append(f"{path}: ENUM_ARRAY_NARROWED: the reader's enum lacks values")
        if "const" in reader and reader["const"] != writer.get("const", object()):
            found.append(f"{path}: CONST changed or added")
        for key in ("pattern", "multipleOf", "format"):
            if key in reader and reader[key] != writer.get(key):
                found.append(f"{path}: {key.upper()}_CHANGED or added")
        if "not" in reader and reader["not"] != writer.get("not"):
            found.append(f"{path}: NOT_TYPE_CHANGED or added")
        return found

    @staticmethod
    def _bounds(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        found = []
        for key in _MAXIMA:
            if key in reader and (key not in writer or _number(writer[key]) > _number(
                    reader[key])):
                found.append(f"{path}: {key.upper()}_DECREASED or added")
        for key in _MINIMA:
            if key in reader and (key not in writer or _number(writer[key]) < _number(
                    reader[key])):
                found.append(f"{path}: {key.upper()}_INCREASED or added")
        return found

    def _combined(self, reader: dict[str, Any], writer: dict[str, Any], path: str,
                  depth: int) -> list[str]:
        found: list[str] = []
        for key in ("oneOf", "anyOf"):
            if key not in reader:
                continue
            branches = writer.get("oneOf") or writer.get("anyOf") or [writer]
            for i, branch in enumerate(branches):
                if not any(not self.compare(r, branch, f"{path}{key}/", depth + 1)
                           for r in reader[key]):
                    found.append(f"{path}{key}: COMBINED_TYPE_SUBSCHEMAS_CHANGED: the "
                                 f"writer's branch {i} is readable by no branch of the reader")
        if "allOf" in reader:
            written = writer.get("allOf", [])
            for i, branch in enumerate(reader["allOf"]):
                if not any(not self.compare(branch, w, f"{path}allOf/{i}/", depth + 1)
                           for w in written or [writer]):
                    found.append(f"{path}allOf/{i}: COMBINED_TYPE_SUBSCHEMAS_CHANGED")
        return found

    def _object(self, reader: dict[str, Any], writer: dict[str, Any], path: str,
                depth: int) -> list[str]:
        found: list[str] = []
        added = set(reader.get("required", [])) - set(writer.get("required", []))
        if added:
            found.append(f"{path}required: REQUIRED_ATTRIBUTE_ADDED: {sorted(added)}")
        r_props: dict[str, Any] = reader.get("properties", {})
        w_props: dict[str, Any] = writer.get("properties", {})
        r_more = reader.get("additionalProperties", True)
        w_more = writer.get("additionalProperties", True)
        for name, schema in w_props.items():
            where = f"{path}properties/{name}/"
            if name in r_props:
                found += self.compare(r_props[name], schema, where, depth + 1)
            elif r_more is False:
                found.append(f"{where}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            elif not _open(reader, "additionalProperties"):
                found += self.compare(r_more, schema, where, depth + 1)
        for name, schema in r_props.items():
            if name in w_props:
                continue
            where = f"{path}properties/{name}/"
            if _open(writer, "additionalProperties"):
                if not (schema is True or schema == {}):
                    found.append(f"{where}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            elif w_more is not False:
                found += self.compare(schema, w_more, where, depth + 1)
        object_typed = _types(reader) is None or "object" in (_types(reader) or ())
        if object_typed and not _open(reader, "additionalProperties") and w_more is not False:
            if _open(writer, "additionalProperties"):
                kind = "REMOVED" if r_more is False else "NARROWED"
                found.append(f"{path}: ADDITIONAL_PROPERTIES_{kind}")
            elif r_more is False:
                found.append(f"{path}: ADDITIONAL_PROPERTIES_REMOVED")
            else:
                found += self.compare(r_more, w_more, f"{path}additionalProperties/", depth + 1)
        return found

    def _array(self, reader: dict[str, Any], writer: dict[str, Any], path: str,
               depth: int) -> list[str]:
        found: list[str] = []
        r_items, w_items = reader.get("items"), writer.get("items")
        if isinstance(r_items, dict | bool) and r_items not in (True, {}):
            if w_items is None or isinstance(w_items, list):
                found.append(f"{path}items: ITEMS_CHANGED or added")
            else:
                found += self.compare(r_items, w_items, f"{path}items/", depth + 1)
        elif isinstance(r_items, list):
            w_list = w_items if isinstance(w_items, list) else []
            for i, item in enumerate(r_items):
                if i < len(w_list):
                    found += self.compare(item, w_list[i], f"{path}items/{i}/", depth + 1)
                elif _open(writer, "additionalItems"):
                    found.append(f"{path}items/{i}: ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        if "uniqueItems" in reader and reader["uniqueItems"] and not writer.get("uniqueItems"):
            found.append(f"{path}: UNIQUE_ITEMS_ADDED")
        return found


def _number(value: Any) -> float:
    if isinstance(value, bool):  # draft 4's exclusiveMaximum: true
        return 0.0
    return float(value) if isinstance(value, int | float) else 0.0
