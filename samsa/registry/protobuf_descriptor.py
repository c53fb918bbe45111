"""Protobuf schemas as serialized ``FileDescriptorProto``s (base64), the form confluent-kafka's
ProtobufSerializer registers and its deserializer asks for (``?format=serialized``).

The registry stores .proto text (as Confluent's does): a descriptor that comes in is written
out as text, and text is built into a descriptor on the way out. Covered: messages (nested),
enums, scalar, message, enum and map fields, labels (proto3 ``optional`` through its synthetic
oneof), oneofs, imports, the package. Not carried: options, services, extensions, groups,
reserved ranges.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast

Field = descriptor_pb2.FieldDescriptorProto
_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]+=*\s*$")
_SCALARS = {
    "double": Field.TYPE_DOUBLE, "float": Field.TYPE_FLOAT, "int64": Field.TYPE_INT64,
    "uint64": Field.TYPE_UINT64, "int32": Field.TYPE_INT32, "fixed64": Field.TYPE_FIXED64,
    "fixed32": Field.TYPE_FIXED32, "bool": Field.TYPE_BOOL, "string": Field.TYPE_STRING,
    "bytes": Field.TYPE_BYTES, "uint32": Field.TYPE_UINT32, "sfixed32": Field.TYPE_SFIXED32,
    "sfixed64": Field.TYPE_SFIXED64, "sint32": Field.TYPE_SINT32, "sint64": Field.TYPE_SINT64,
}
_SCALAR_NAMES = {v: k for k, v in _SCALARS.items()}


def decode(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor in ``text`` when it is a base64 FileDescriptorProto, else None."""
    if not _BASE64.match(text) or "{" in text:
        return None
    try:
        found = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
    except (binascii.Error, DecodeError, ValueError):
        return None
    return found if found.message_type or found.enum_type else None


def encode(file: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.standard_b64encode(file.SerializeToString()).decode("ascii")


# --- descriptor -> .proto text ----------------------------------------------------------------

def to_text(file: descriptor_pb2.FileDescriptorProto) -> str:
    syntax = file.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if file.package:
        lines.append(f"package {file.package};")
    lines += [f'import "{dependency}";' for dependency in file.dependency]
    for message in file.message_type:
        lines += _message_text(message, syntax, "")
    for enum in file.enum_type:
        lines += _enum_text(enum, "")
    return "\n".join(lines) + "\n"


def _message_text(message: descriptor_pb2.DescriptorProto, syntax: str, indent: str
                  ) -> list[str]:
    inner = indent + "  "
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    oneofs: dict[int, list[str]] = {}
    for f in message.field:
        entry = entries.get(f.type_name.rsplit(".", 1)[-1]) if f.type_name else None
        if entry is not None and f.label == Field.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            line = f"map<{_type_text(key)}, {_type_text(value)}> {f.name} = {f.number};"
        else:
            label = ""
            if f.label == Field.LABEL_REPEATED:
                label = "repeated "
            elif f.label == Field.LABEL_REQUIRED:
                label = "required "
            elif syntax == "proto2" or f.proto3_optional:
                label = "optional "
            line = f"{label}{_type_text(f)} {f.name} = {f.number};"
        if f.HasField("oneof_index") and not f.proto3_optional:
            oneofs.setdefault(f.oneof_index, []).append(line)
            if len(oneofs[f.oneof_index]) > 1:
                continue
            lines.append(f"{inner}@oneof{f.oneof_index}")
        else:
            lines.append(inner + line)
    for index, fields in oneofs.items():
        at = lines.index(f"{inner}@oneof{index}")
        lines[at:at + 1] = [f"{inner}oneof {message.oneof_decl[index].name} {{",
                            *[f"{inner}  {line}" for line in fields], f"{inner}}}"]
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message_text(nested, syntax, inner)
    for enum in message.enum_type:
        lines += _enum_text(enum, inner)
    lines.append(f"{indent}}}")
    return lines


def _type_text(f: descriptor_pb2.FieldDescriptorProto) -> str:
    return f.type_name if f.type_name else _SCALAR_NAMES[f.type]


def _enum_text(enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
    return [f"{indent}enum {enum.name} {{",
            *[f"{indent}  {v.name} = {v.number};" for v in enum.value], f"{indent}}}"]


# --- .proto text (parsed) -> descriptor ---------------------------------------------------------

def to_descriptor(parsed: ast.File, name: str) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name=name, syntax=parsed.syntax or "proto2")
    for element in parsed.file_elements:
        if isinstance(element, ast.Package):
            file.package = element.name
        elif isinstance(element, ast.Import):
            file.dependency.append(element.name)
        elif isinstance(element, ast.Message):
            _message(file.message_type.add(), element, file.syntax)
        elif isinstance(element, ast.Enum):
            _enum(file.enum_type.add(), element)
    return file


def _message(out: descriptor_pb2.DescriptorProto, message: ast.Message, syntax: str) -> None:
    out.name = message.name
    synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
    for element in message.elements:
        if isinstance(element, ast.Field):
            f = _field(out.field.add(), element.name, element.number, element.type)
            _label(f, element.cardinality, syntax, synthetic)
        elif isinstance(element, ast.MapField):
            entry = out.nested_type.add(name=_camel(element.name) + "Entry")
            entry.options.map_entry = True
            _field(entry.field.add(label=Field.LABEL_OPTIONAL), "key", 1, element.key_type)
            _field(entry.field.add(label=Field.LABEL_OPTIONAL), "value", 2, element.value_type)
            f = out.field.add(name=element.name, number=element.number,
                              label=Field.LABEL_REPEATED, type_name=entry.name)
        elif isinstance(element, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=element.name)
            for child in element.elements:
                if isinstance(child, ast.Field):
                    f = _field(out.field.add(label=Field.LABEL_OPTIONAL), child.name,
                               child.number, child.type)
                    f.oneof_index = index
        elif isinstance(element, ast.Message):
            _message(out.nested_type.add(), element, syntax)
        elif isinstance(element, ast.Enum):
            _enum(out.enum_type.add(), element)
    for f in synthetic:  # proto3 optional: a oneof of its own, after the real ones
        f.oneof_index = len(out.oneof_decl)
        out.oneof_decl.add(name=f"_{f.name}")


def _field(f: descriptor_pb2.FieldDescriptorProto, name: str, number: int, type_name: str
           ) -> descriptor_pb2.FieldDescriptorProto:
    f.name, f.number = name, number
    if type_name in _SCALARS:
        f.type = _SCALARS[type_name]
    else:  # left to the descriptor pool to resolve (message or enum), as protoc's parser does
        f.type_name = type_name
    return f


def _label(f: descriptor_pb2.FieldDescriptorProto, cardinality: Any, syntax: str,
           synthetic: list[descriptor_pb2.FieldDescriptorProto]) -> None:
    if cardinality == ast.FieldCardinality.REPEATED:
        f.label = Field.LABEL_REPEATED
    elif cardinality == ast.FieldCardinality.REQUIRED:
        f.label = Field.LABEL_REQUIRED
    else:
        f.label = Field.LABEL_OPTIONAL
        if cardinality == ast.FieldCardinality.OPTIONAL and syntax == "proto3":
            f.proto3_optional = True
            synthetic.append(f)


def _enum(out: descriptor_pb2.EnumDescriptorProto, enum: ast.Enum) -> None:
    out.name = enum.name
    for value in enum.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))
