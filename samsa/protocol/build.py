"""Build a versioned kio entity from a plain dict, so handlers are written once for all versions.

A handler describes its response with every field it knows (snake_case, kio's names: ``*_ms``
fields drop the suffix); ``build(cls, data)`` keeps the fields that ``cls`` (one version of the
message) has, converts the nested dicts into that version's nested classes, milliseconds into
timedeltas and ints into ErrorCode. A field the version lacks is dropped, as Kafka's own
serializers do for fields marked ignorable.
"""

from __future__ import annotations

import datetime
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

_UTC = datetime.UTC


def to_ms(value: datetime.timedelta) -> int:
    """A request's kio timedelta (a ``*_ms`` field) as Kafka's milliseconds."""
    return int(value.total_seconds() * 1000)


def _ms_to_timedelta(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


# Kafka writes -1 for "no time": kio writes this datetime as -1 (and cannot take None for a
# field that is not nullable).
_NO_TIME = datetime.datetime.fromtimestamp(-0.001, tz=_UTC)


def _ms_to_datetime(value: Any) -> Any:
    if isinstance(value, int):
        return _NO_TIME if value < 0 else datetime.datetime.fromtimestamp(value / 1000, tz=_UTC)
    return value


def _to_error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "timedelta_i32": _ms_to_timedelta,
    "timedelta_i64": _ms_to_timedelta,
    "datetime_i64": _ms_to_datetime,
    "error_code": _to_error_code,
}

# (field name, nested entity class or None, is a sequence, converter or None, has default,
#  what None becomes: None where the version allows null, else "" / b"" as Kafka writes)
_Plan = list[tuple[str, Any, bool, Callable[[Any], Any] | None, bool, Any]]
_NULL_AS = {"string": "", "bytes": b""}


@cache
def plan(cls: type) -> _Plan:
    steps: _Plan = []
    for f in fields(cls):
        nested, many = None, False
        tp = f.type
        nullable = False
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # nullable: X | None
            present = [a for a in typing.get_args(tp) if a is not type(None)]
            nullable = len(present) < len(typing.get_args(tp))
            if len(present) == 1:
                tp = present[0]
        args = typing.get_args(tp)
        if typing.get_origin(tp) is tuple and args and is_dataclass(args[0]):
            nested, many = args[0], True
        else:
            candidates = [a for a in args if is_dataclass(a)] or ([tp] if is_dataclass(tp) else [])
            if candidates:
                nested = candidates[0]
        kafka_type = f.metadata.get("kafka_type", "")
        converter = _CONVERTERS.get(kafka_type)
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        null_as = None if nullable else _NULL_AS.get(kafka_type)
        steps.append((f.name, nested, many, converter, has_default, null_as))
    return steps


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """An instance of the kio entity ``cls`` from ``data`` (see the module docstring)."""
    kwargs: dict[str, Any] = {}
    for name, nested, many, converter, has_default, null_as in plan(cls):
        if name not in data:
            if not has_default and many:
                kwargs[name] = ()
            continue
        value = data[name]
        if value is None and null_as is not None:
            value = null_as
        if nested is not None and value is not None:
            if many:
                value = tuple(v if is_dataclass(v) else build(nested, v) for v in value)
            elif not is_dataclass(value):
                value = build(nested, value)
        elif converter is not None and value is not None:
            value = converter(value)
        kwargs[name] = value
    return cls(**kwargs)


response_schema = cache(load_response_schema)


def response(api_key: int, version: int, data: Mapping[str, Any]) -> Any:
    """The response entity of ``api_key`` at ``version`` built from ``data``."""
    return build(response_schema(api_key, version), data)
