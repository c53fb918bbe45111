"""PROTOBUF: .proto text (proto2 and proto3), parsed by ``proto-schema-parser`` (a pure
Python ANTLR grammar of the protobuf language).

Compatibility follows Confluent's protobuf rules for the common cases (its difference names):
incompatible are PACKAGE_CHANGED, MESSAGE_REMOVED, ENUM_REMOVED, ENUM_CONST_CHANGED (one
number, another name), FIELD_KIND_CHANGED (scalar, message, enum or map), FIELD_SCALAR_KIND_
CHANGED outside one wire-compatible group (int32/uint32/int64/uint64/bool, sint32/sint64,
fixed32/sfixed32, fixed64/sfixed64, string/bytes), FIELD_NAMED_TYPE_CHANGED, a change between
repeated and singular, REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED (proto2),
ONEOF_FIELD_REMOVED (also a field moved out of its oneof), FIELD_MOVED_TO_EXISTING_ONEOF and
MULTIPLE_FIELDS_MOVED_TO_ONEOF.
Compatible: messages, enums, fields and enum constants added, optional fields removed, fields
renamed (only numbers travel). A schema given as a base64 FileDescriptorProto (what
confluent-kafka's ProtobufSerializer registers) is kept as its .proto text, and answered in
that form where ``format=serialized`` asks (``protobuf_descriptor``). Not covered: options,
extensions, services, groups' contents, and types of imported files beyond their names
(imports are resolved by name only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from samsa.registry import protobuf_descriptor
from samsa.registry.parsed import ParsedSchema, ResolvedReference, SchemaInvalid

SCHEMA_TYPE = "PROTOBUF"

_SCALARS = {
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
}
_WIRE_GROUPS = [
    {"int32", "uint32", "int64", "uint64", "bool"}, {"sint32", "sint64"},
    {"fixed32", "sfixed32"}, {"fixed64", "sfixed64"}, {"string", "bytes"},
]


class _Raise(ErrorListener):  # type: ignore[misc]
    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int,
                    msg: str, e: Any) -> None:
        raise SchemaInvalid(f"line {line}:{column} {msg}")


def _raising(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


@dataclass
class _Field:
    name: str
    type: str
    label: str  # "", "optional", "required", "repeated"
    oneof: str | None


@dataclass
class _Message:
    fields: dict[int, _Field] = field(default_factory=dict)
    oneofs: set[str] = field(default_factory=set)


class ProtobufSchema:
    schema_type = SCHEMA_TYPE

    def __init__(self, text: str, references: list[ResolvedReference]) -> None:
        descriptor = protobuf_descriptor.decode(text.strip())
        if descriptor is not None:  # a serialized FileDescriptorProto: kept as its .proto text
            text = protobuf_descriptor.to_text(descriptor)
        try:
            parsed = Parser(setup_lexer=_raising, setup_parser=_raising).parse(text)
        except SchemaInvalid:
            raise
        except Exception as exc:  # the grammar's visitor on input it did not expect
            raise SchemaInvalid(f"cannot parse .proto: {exc}") from exc
        self.package = ""
        self.messages: dict[str, _Message] = {}
        self.enums: dict[str, dict[int, str]] = {}
        for element in parsed.file_elements:
            if isinstance(element, ast.Package):
                self.package = element.name
        for element in parsed.file_elements:
            self._collect(element, self.package)
        if not self.messages and not self.enums and not parsed.file_elements:
            raise SchemaInvalid("an empty .proto file")
        self._canonical = text.strip()
        self.file = parsed

    def serialized(self, name: str) -> str:
        """The schema as a base64 FileDescriptorProto named ``name`` (``format=serialized``)."""
        return protobuf_descriptor.encode(protobuf_descriptor.to_descriptor(self.file, name))

    @property
    def canonical(self) -> str:
        return self._canonical

    def _collect(self, element: Any, scope: str) -> None:
        if isinstance(element, ast.Message):
            name = f"{scope}.{element.name}" if scope else element.name
            message = _Message()
            self.messages[name] = message
            for child in element.elements:
                self._field(message, child, None, name)
                self._collect(child, name)
        elif isinstance(element, ast.Enum):
            name = f"{scope}.{element.name}" if scope else element.name
            self.enums[name] = {v.number: v.name for v in element.elements
                                if isinstance(v, ast.EnumValue)}

    def _field(self, message: _Message, element: Any, oneof: str | None, scope: str) -> None:
        if isinstance(element, ast.Field):
            label = element.cardinality.value.lower() if element.cardinality else ""
            self._add(message, element.number, _Field(element.name, element.type, label, oneof),
                      scope)
        elif isinstance(element, ast.MapField):
            self._add(message, element.number, _Field(
                element.name, f"map<{element.key_type},{element.value_type}>", "", oneof), scope)
        elif isinstance(element, ast.OneOf):
            message.oneofs.add(element.name)
            for child in element.elements:
                self._field(message, child, element.name, scope)

    @staticmethod
    def _add(message: _Message, number: int, found: _Field, scope: str) -> None:
        if number in message.fields:
            raise SchemaInvalid(f"field number {number} is used twice in {scope}")
        message.fields[number] = found

    def read_incompatibilities(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        found: list[str] = []
        if self.package != writer.package:
            found.append(f"PACKAGE_CHANGED: {writer.package!r} to {self.package!r}")
        for name, old in writer.messages.items():
            new = self.messages.get(name)
            if new is None:
                found.append(f"MESSAGE_REMOVED: #/{name}")
                continue
            found += _message_differences(name, new, old)
        for name, old_values in writer.enums.items():
            new_values = self.enums.get(name)
            if new_values is None:
                found.append(f"ENUM_REMOVED: #/{name}")
                continue
            for number, value in old_values.items():
                if number in new_values and new_values[number] != value:
                    found.append(f"ENUM_CONST_CHANGED: #/{name}/{number}")
        return found


def _kind(type_name: str) -> str:
    if type_name.startswith("map<"):
        return "map"
    return "scalar" if type_name in _SCALARS else "named"


def _message_differences(name: str, new: _Message, old: _Message) -> list[str]:
    found: list[str] = []
    moved_to: dict[str, int] = {}
    for number, before in old.fields.items():
        where = f"#/{name}/{number}"
        after = new.fields.get(number)
        if after is None:
            if before.label == "required":
                found.append(f"REQUIRED_FIELD_REMOVED: {where}")
            if before.oneof is not None:
                found.append(f"ONEOF_FIELD_REMOVED: {where}")
            continue
        if _kind(before.type) != _kind(after.type):
            found.append(f"FIELD_KIND_CHANGED: {where}")
        elif _kind(before.type) == "scalar" and before.type != after.type and not any(
                {before.type, after.type} <= group for group in _WIRE_GROUPS):
            found.append(f"FIELD_SCALAR_KIND_CHANGED: {where}")
        elif _kind(before.type) != "scalar" and (
                before.type.rsplit(".", 1)[-1] != after.type.rsplit(".", 1)[-1]):
            found.append(f"FIELD_NAMED_TYPE_CHANGED: {where}")
        if (before.label == "repeated") != (after.label == "repeated"):
            found.append(f"FIELD_LABEL_CHANGED: {where}")
        if (before.label == "required") != (after.label == "required"):
            found.append(f"REQUIRED_FIELD_{'ADDED' if after.label == 'required' else 'REMOVED'}"
                         f": {where}")
        if before.oneof is not None and after.oneof != before.oneof:
            found.append(f"ONEOF_FIELD_REMOVED: {where}")  # moved out of its oneof
        if before.oneof is None and after.oneof is not None:
            if after.oneof in old.oneofs:
                found.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: {where}")
            moved_to[after.oneof] = moved_to.get(after.oneof, 0) + 1
    for oneof, count in moved_to.items():
        if count > 1 and oneof not in old.oneofs:
            found.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: #/{name}/{oneof}")
    for number, after in new.fields.items():
        if number not in old.fields and after.label == "required":
            found.append(f"REQUIRED_FIELD_ADDED: #/{name}/{number}")
    return found
