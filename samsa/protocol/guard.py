"""Check a flexible-version request body's lengths before kio's native reader sees it.

kio's native reader reserves memory for a compact array's claimed element count before it
checks that the bytes are there; a 14-byte frame claiming 2**32 elements makes the allocation
fail, which aborts the whole process. This walk follows the body's structure with the same
schema (kio's entity classes) without building anything, and refuses any count that cannot fit
in the bytes that remain. Non-flexible versions use int32 counts, which kio checks itself, so
only flexible bodies are walked.

The request path is hot, so each entity class is compiled once into a straight-line Python
function (generated from its dataclass fields) instead of being interpreted field by field.

After decoding, ``check_nulls`` refuses a non-nullable array that was sent as null (count -1,
or 0 in a compact array): kio's reader returns None for it, which no handler expects; Kafka's
own readers refuse such a request and close the connection. It is compiled the same way and
only visits the arrays of entities that have arrays inside them.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

_FIXED = {
    "int8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8,
    "uuid": 16,
}
_VARIABLE = {"string", "bytes", "records"}

Walker = Callable[[bytes, int, int], int]


class FrameTooShort(ValueError):
    """A length or count in the frame runs past its end."""


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise FrameTooShort("varint longer than 5 bytes")


def _too_short(what: str, count: int, left: int) -> FrameTooShort:
    return FrameTooShort(f"{what} claims {count} with {left} bytes left")


def _tags(buf: bytes, pos: int, end: int, tagged: dict[int, Walker]) -> int:
    count = buf[pos]
    if count == 0:  # almost always: no tagged fields
        return pos + 1
    count, pos = _uvarint(buf, pos)
    if count > end - pos:
        raise _too_short("tagged fields", count, end - pos)
    for _ in range(count):
        tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        if size > end - pos:
            raise _too_short("tagged field", size, end - pos)
        walker = tagged.get(tag)
        if walker is not None:
            walker(buf, pos, pos + size)
        pos += size
    return pos


_WALKERS: dict[type, Walker] = {}


def _shape(f: Any) -> tuple[bool, bool, Any]:
    """(nullable, is an array, the element type) of a field."""
    tp = f.type
    nullable = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        present = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(present) != len(typing.get_args(tp))
        tp = present[0] if len(present) == 1 else tp
    many = typing.get_origin(tp) is tuple
    return nullable, many, typing.get_args(tp)[0] if many else tp


def _field_code(f: Any, ns: dict[str, Any], name: str) -> tuple[list[str], bool]:
    """Source lines that skip field ``f`` at ``pos``; and whether it is an array."""
    nullable, many, element = _shape(f)
    if is_dataclass(element):
        ns[name] = lambda buf, pos, end, e=element: walker_for(e)(buf, pos, end)
        if nullable and not many:
            one = [f"if buf[pos] < 128: pos = {name}(buf, pos + 1, end)", "else: pos += 1"]
        else:
            one = [f"pos = {name}(buf, pos, end)"]
    else:
        kafka_type = f.metadata.get("kafka_type", "")
        if kafka_type in _FIXED:
            one = [f"pos += {_FIXED[kafka_type]}"]
        elif kafka_type in _VARIABLE:
            one = ["n = buf[pos]", "if n < 128: pos += 1", "else: n, pos = uv(buf, pos)",
                   "if n: pos += n - 1"]
        else:
            raise TypeError(f"{f.name}: unknown kafka_type {kafka_type!r}")
    if not many:
        return one, False
    lines = ["n = buf[pos]", "if n < 128: pos += 1", "else: n, pos = uv(buf, pos)",
             "if n > 1:", "    n -= 1",
             "    if n > end - pos: raise short('array', n, end - pos)",
             "    for _ in range(n):"]
    lines += ["        " + line for line in one]
    return lines, True


def walker_for(cls: type) -> Walker:
    """The compiled walker of one flexible entity class."""
    walker = _WALKERS.get(cls)
    if walker is not None:
        return walker
    ns: dict[str, Any] = {"uv": _uvarint, "short": _too_short, "tags": _tags}
    body: list[str] = []
    tagged: dict[int, Walker] = {}
    for i, f in enumerate(fields(cls)):
        lines, _ = _field_code(f, ns, f"nested{i}")
        tag = f.metadata.get("tag")
        if tag is None:
            body += lines
        else:
            src = "def tagged(buf, pos, end):\n" + "".join(f"    {ln}\n" for ln in lines)
            src += "    if pos > end: raise short('tagged field', pos, end)\n    return pos\n"
            local: dict[str, Any] = dict(ns)
            exec(compile(src, f"<guard {cls.__name__}.{f.name}>", "exec"), local)
            tagged[tag] = local["tagged"]
    ns["tagged_fields"] = tagged
    src = "def walk(buf, pos, end):\n" + "".join(f"    {ln}\n" for ln in body)
    src += "    return tags(buf, pos, end, tagged_fields)\n"
    exec(compile(src, f"<guard {cls.__name__}>", "exec"), ns)
    walker = _WALKERS[cls] = ns["walk"]
    return walker


def check_body(schema: type, frame: bytes, body_start: int) -> None:
    """Raise FrameTooShort when a flexible body claims more than the frame holds."""
    if not schema.__flexible__:  # type: ignore[attr-defined]
        return
    try:
        end = walker_for(schema)(frame, body_start, len(frame))
    except IndexError:
        raise FrameTooShort("the body runs past the end of the frame") from None
    if end > len(frame):
        raise FrameTooShort("the body runs past the end of the frame")


class NullArray(ValueError):
    """A non-nullable array sent as null."""


_NULL_CHECKS: dict[type, Callable[[Any], None] | None] = {}


def _null(where: str) -> NullArray:
    return NullArray(f"non-nullable array {where} was sent as null")


def null_check_for(cls: type) -> Callable[[Any], None] | None:
    """The compiled null check of one entity class; None when it has no arrays to check."""
    if cls in _NULL_CHECKS:
        return _NULL_CHECKS[cls]
    ns: dict[str, Any] = {"null": _null}
    body: list[str] = []
    for i, f in enumerate(fields(cls)):
        nullable, many, element = _shape(f)
        nested = isinstance(element, type) and is_dataclass(element)
        inner = null_check_for(element) if nested else None
        must_be_there = many and not nullable
        if not must_be_there and inner is None:
            continue
        name = f"nested{i}"
        ns[name] = inner
        body.append(f"v = e.{f.name}")
        if must_be_there:
            body.append(f"if v is None: raise null('{cls.__name__}.{f.name}')")
        if inner is not None:
            visit = [f"for x in v: {name}(x)"] if many else [f"{name}(v)"]
            if nullable or not many:  # None is allowed here: nothing inside to check
                visit = ["if v is not None:", *(f"    {line}" for line in visit)]
            body += visit
    if not body:
        _NULL_CHECKS[cls] = None
        return None
    src = "def check(e):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(src, f"<null check {cls.__name__}>", "exec"), ns)
    check = _NULL_CHECKS[cls] = ns["check"]
    return check


def check_nulls(schema: type, body: Any) -> None:
    """Raise NullArray when a decoded body holds None where its schema has a non-nullable
    array (anywhere in it)."""
    check = null_check_for(schema)
    if check is not None:
        check(body)
