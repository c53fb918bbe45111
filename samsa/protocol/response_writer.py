"""Encode a handler's response dict straight to bytes, byte-identical to ``build`` + kio.

Handlers describe responses as plain dicts (``samsa.protocol.build``). Building kio's frozen
dataclasses from them and serializing those field by field cost more than most handlers: for a
Heartbeat, half the broker's CPU; for a Metadata, two thirds. Each response entity class (one
version of one message) is compiled once, from its dataclass fields, into a straight-line Python
function that reads the dict and appends bytes: consecutive fixed-width fields go out with one
``struct.pack``, strings and arrays with their length prefix, nested entities through their own
compiled functions.

The dict is read with ``build``'s rules: a field the version lacks is ignored, a missing field
takes the dataclass default (an array without one is empty), None in a string or bytes field
that is not nullable is written empty, milliseconds may be ints or timedeltas, timestamps ints
or datetimes, error codes ints or ErrorCodes, and a nested value may be a dict or a kio entity.
Tagged fields (rare, and absent unless a handler sets them) are converted and written by kio's
own code, so their default-skipping is kio's exactly. tests/protocol/test_response_writer.py
compares every response version against kio on generated values.
"""

from __future__ import annotations

import datetime
import io
import struct
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import get_field_tag
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field

from samsa.protocol.build import build, plan, response_schema
from samsa.protocol.fast import uvarint as _uvarint

Writer = Callable[[list[Any], Any], None]

_STRUCT_CODES = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H",
    "uint32": "I", "uint64": "Q", "float64": "d", "bool": "?", "error_code": "h",
    "timedelta_i32": "i", "timedelta_i64": "q", "datetime_i64": "q",
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_UUID_ZERO = bytes(16)
def _ms(value: Any) -> int:
    """A duration: Kafka's milliseconds as an int, or a kio timedelta."""
    if type(value) is int:
        return value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _time(value: Any) -> int:
    """A timestamp: milliseconds (any negative one is -1), a datetime, or None (-1)."""
    if type(value) is int:
        return -1 if value < 0 else value
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def _uuid(value: uuid.UUID | None) -> bytes:
    return _UUID_ZERO if value is None else value.bytes


def _fields_of(value: Any) -> dict[str, Any]:
    """A kio entity given where a dict was expected: its fields, by name."""
    return {f.name: getattr(value, f.name) for f in fields(value)}


def _convert(kafka_type: str, expr: str) -> str:
    if kafka_type == "error_code":
        return f"int({expr})"
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return f"_ms({expr})"
    if kafka_type == "datetime_i64":
        return f"_time({expr})"
    if kafka_type == "bool":
        return f"bool({expr})"
    return expr


class _Compiler:
    """Generates the source of one entity class's writer."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "_uvarint": _uvarint, "_ms": _ms, "_time": _time, "_uuid": _uuid,
            "_I16": _I16, "_I32": _I32, "_fields_of": _fields_of, "MISSING": MISSING,
        }
        self._pending: list[tuple[str, str]] = []  # fixed-width fields not yet packed
        self._n = 0

    def name(self, value: Any, prefix: str) -> str:
        self._n += 1
        key = f"{prefix}{self._n}"
        self.names[key] = value
        return key

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    def flush_fixed(self) -> None:
        if not self._pending:
            return
        fmt = ">" + "".join(code for code, _ in self._pending)
        packer = self.name(struct.Struct(fmt), "_S")
        self.emit(f"out.append({packer}.pack({', '.join(e for _, e in self._pending)}))")
        self._pending = []

    def compile(self) -> Writer:
        cls = self.cls
        self.emit("def write(out, d):", 0)
        self.emit("if type(d) is not dict:")
        self.emit("d = _fields_of(d)", 2)
        tagged: list[tuple[int, Field[Any], Any, Any, Any]] = []
        for f in fields(cls):
            tag = get_field_tag(f)
            if tag is not None:
                writer = get_field_writer(f, flexible=self.flexible, is_request_header=False,
                                          is_tag=True)
                tagged.append((tag, f, writer, get_tagged_field_default(f),
                               _converter(cls, f.name)))
                continue
            self.field(f)
        self.flush_fixed()
        if self.flexible:
            if tagged:
                spec = self.name(tuple(sorted(tagged, key=lambda t: t[0])), "_T")
                self.emit(f"_write_tags(out, d, {spec})")
            else:
                self.emit("out.append(b'\\x00')")
        source = "\n".join(self.lines) + "\n"
        self.names["_write_tags"] = _write_tags
        namespace = dict(self.names)
        exec(compile(source, f"<response writer {cls.__qualname__}>", "exec"), namespace)
        write: Writer = namespace["write"]
        return write

    def field(self, f: Field[Any]) -> None:
        name = f.name
        tp = f.type
        nullable = False
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = typing.get_args(tp)
            present = [a for a in args if a is not type(None)]
            nullable = len(present) < len(args)
            tp = present[0] if len(present) == 1 else tp
        many = typing.get_origin(tp) is tuple
        inner = typing.get_args(tp)[0] if many else tp
        if many and typing.get_origin(inner) in (typing.Union, types.UnionType):
            inner = next(a for a in typing.get_args(inner) if a is not type(None))
        kafka_type = f.metadata.get("kafka_type", "")
        inner = typing.cast("type", inner)
        entity = is_dataclass(inner)
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        var = f"v_{name}"
        if has_default:
            factory = typing.cast("Callable[[], Any]", f.default_factory)
            default = f.default if f.default is not MISSING else factory()
            self.emit(f"{var} = d.get({name!r}, {self.name(default, '_D')})")
        elif many:
            self.emit(f"{var} = d.get({name!r}, ())")
        else:
            self.emit(f"{var} = d[{name!r}]")
        if not many and not entity and kafka_type in _STRUCT_CODES:
            # (a nullable timestamp's None is -1 as well: _time)
            self._pending.append((_STRUCT_CODES[kafka_type], _convert(kafka_type, var)))
            return
        self.flush_fixed()
        if many:
            self.array(var, inner, kafka_type, nullable, entity)
        elif entity:
            writer = self.name(compiled(inner), "_W")
            if nullable:
                self.emit(f"if {var} is None:")
                self.emit("out.append(b'\\xff')", 2)
                self.emit("else:")
                self.emit("out.append(b'\\x01')", 2)
                self.emit(f"{writer}(out, {var})", 2)
            else:
                self.emit(f"{writer}(out, {var})")
        else:
            self.scalar(var, kafka_type, nullable)

    def scalar(self, var: str, kafka_type: str, nullable: bool, indent: int = 1) -> None:
        if kafka_type == "uuid":
            self.emit(f"out.append(_uuid({var}))", indent)
            return
        if kafka_type not in ("string", "bytes", "records"):
            # every kafka_type of kio's schemas is handled above; a new one needs a writer here
            raise ValueError(f"{self.cls.__qualname__}: no writer for kafka_type {kafka_type!r}")
        if nullable:
            null = "b'\\x00'" if self.flexible else (
                "b'\\xff\\xff'" if kafka_type == "string" else "b'\\xff\\xff\\xff\\xff'")
            self.emit(f"if {var} is None:", indent)
            self.emit(f"out.append({null})", indent + 1)
            self.emit("else:", indent)
            indent += 1
        else:
            empty = '""' if kafka_type == "string" else 'b""'
            self.emit(f"if {var} is None:", indent)
            self.emit(f"{var} = {empty}", indent + 1)
        if kafka_type == "string":
            self.emit(f"{var} = {var}.encode()", indent)
            prefix = (f"_uvarint(len({var}) + 1)" if self.flexible
                      else f"_I16.pack(len({var}))")
        else:
            prefix = (f"_uvarint(len({var}) + 1)" if self.flexible
                      else f"_I32.pack(len({var}))")
        self.emit(f"out.append({prefix})", indent)
        self.emit(f"out.append({var})", indent)

    def array(self, var: str, inner: Any, kafka_type: str, nullable: bool,
              entity: bool) -> None:
        indent = 1
        if nullable:
            self.emit(f"if {var} is None:")
            null = "b'\\x00'" if self.flexible else "b'\\xff\\xff\\xff\\xff'"
            self.emit(f"out.append({null})", 2)
            self.emit("else:")
            indent = 2
        prefix = (f"_uvarint(len({var}) + 1)" if self.flexible else f"_I32.pack(len({var}))")
        self.emit(f"out.append({prefix})", indent)
        item = f"i_{var}"
        if entity:
            writer = self.name(compiled(inner), "_W")
            self.emit(f"for {item} in {var}:", indent)
            self.emit(f"{writer}(out, {item})", indent + 1)
        elif kafka_type in _STRUCT_CODES:
            packer = self.name(struct.Struct(">" + _STRUCT_CODES[kafka_type]), "_S")
            self.emit(f"for {item} in {var}:", indent)
            self.emit(f"out.append({packer}.pack({_convert(kafka_type, item)}))", indent + 1)
        else:
            self.emit(f"for {item} in {var}:", indent)
            self.scalar(item, kafka_type, False, indent + 1)


def _write_tags(out: list[Any], d: dict[str, Any], spec: tuple[Any, ...]) -> None:
    """The tagged fields, through kio: each present in ``d`` is converted as ``build`` does
    and skipped where kio skips it (equal to its default)."""
    written: list[bytes] = []
    for tag, f, writer, implicit, convert in spec:
        if f.name not in d:
            continue
        value = convert(d[f.name])
        if value == f.default or (f.default is MISSING and value == implicit):
            continue
        buffer = io.BytesIO()
        write_tagged_field(buffer, tag, writer, value)
        written.append(buffer.getvalue())
    out.append(_uvarint(len(written)))
    out.extend(written)


def _converter(cls: type, name: str) -> Callable[[Any], Any]:
    """Field ``name`` of ``cls`` converted as ``build`` converts it."""
    _, nested, many, converter, _, null_as = next(s for s in plan(cls) if s[0] == name)

    def convert(value: Any) -> Any:
        if value is None and null_as is not None:
            return null_as
        if nested is not None and value is not None:
            if many:
                return tuple(v if is_dataclass(v) else build(nested, v) for v in value)
            return value if is_dataclass(value) else build(nested, value)
        if converter is not None and value is not None:
            return converter(value)
        return value

    return convert


@cache
def compiled(cls: type) -> Writer:
    """The writer of entity class ``cls``: ``write(out, d)`` appends ``d`` encoded to ``out``."""
    return _Compiler(cls).compile()


@cache
def _header(api_key: int, version: int) -> tuple[type, bool]:
    cls = response_schema(api_key, version)
    return cls, bool(cls.__header_schema__.__flexible__)  # type: ignore[attr-defined]


def encode(api_key: int, version: int, correlation_id: int, data: Any) -> list[Any]:
    """The size-prefixed response frame for ``data``: one bytes chunk, or, around a file
    region (a fetch's records, which go out with sendfile), the runs of bytes and the region."""
    cls, flexible_header = _header(api_key, version)
    out: list[Any] = [_I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")]
    compiled(cls)(out, data)
    try:
        body = b"".join(out)
    except TypeError:  # a file region among the chunks
        pass
    else:
        return [_I32.pack(len(body)) + body]
    chunks: list[Any] = []
    run: list[Any] = []
    size = 0
    for chunk in out:
        size += len(chunk)
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            run.append(chunk)
        else:
            if run:
                chunks.append(b"".join(run))
                run = []
            chunks.append(chunk)
    if run:
        chunks.append(b"".join(run))
    return [_I32.pack(size), *chunks]
