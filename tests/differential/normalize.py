"""Decoded responses as plain data, without what legitimately differs between two brokers,
and a readable field-by-field diff of two of them.

Removed or masked: throttle times, hosts and ports, cluster ids, topic ids and other random
UUIDs (an all-zero UUID stays: it means "none"), error messages, the clock's timestamps, the
random part of member ids. Kept: error codes (shown by name) and every other field, node ids
included (both brokers are node 1). Record batches are decoded into their header fields and
records so that a difference reads as one. Arrays whose items have a name or an index are
compared as maps (``ITEM_KEYS``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from samsa.records.batch import read_header
from samsa.records.record import decode_records

DROPPED = frozenset({
    "throttle_time", "throttle_time_ms", "host", "port", "cluster_id", "error_message",
    "client_host", "batch_index_error_message",
})
# the broker's clock: a LogAppendTime topic's, a transaction's start
CLOCK = frozenset({"log_append_time", "transaction_start_time"})
MEMBER_IDS = frozenset({"member_id", "leader"})
ZERO_UUID = uuid.UUID(int=0)
# java.util.UUID's text (the random part of a member id Kafka generates) and Kafka's own
# Uuid's (URL-safe base64, 22 characters)
_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                        r"|(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}$")


def _error(code: int) -> str:
    try:
        return f"{ErrorCode(code).name}({code})"
    except ValueError:
        return f"UNKNOWN({code})"


def records(data: bytes) -> list[dict[str, Any]]:
    """The batches of a fetch response's records: header fields and records (a partial batch at
    the end, which a broker may send, shows as its size)."""
    out: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 61:
            out.append({"partial batch bytes": len(data) - pos})
            break
        header = read_header(data, pos)
        if pos + header.size > len(data):
            out.append({"partial batch bytes": len(data) - pos})
            break
        whole = data[pos:pos + header.size]
        fields = header._asdict()
        fields["records"] = [
            {"offset_delta": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
             "headers": r.headers}
            for r in decode_records(whole)]
        out.append(fields)
        pos += header.size
    return out


def plain(value: Any, key: str = "") -> Any:
    """A kio entity (or anything inside one) as dicts, lists and scalars, normalized."""
    if key in DROPPED:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), f.name)
                for f in dataclasses.fields(value) if f.name not in DROPPED}
    if isinstance(value, tuple | list):
        return [plain(v, key) for v in value]
    if isinstance(value, ErrorCode) or (key.endswith("error_code") and isinstance(value, int)):
        return _error(int(value))
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return "<zero uuid>" if value == ZERO_UUID else "<uuid>"
    if isinstance(value, datetime.datetime):  # kio's timestamps: milliseconds, as sent
        millis = round(value.timestamp() * 1000)
        return "<clock>" if key in CLOCK and millis > 0 else millis
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if key == "records" and isinstance(value, bytes):
        return records(value)
    if isinstance(value, bytes):
        return value.hex()
    if key in MEMBER_IDS and isinstance(value, str):
        return _UUID_TEXT.sub("<uuid>", value)
    return value


# Fields that identify an item of a response's array: clients match items by them, never by
# position, and Kafka builds several of its arrays from hash maps, so arrays of items with one
# of these (present in every item and unique) are compared as maps, in any order.
ITEM_KEYS = ("name", "topic", "partition_index", "index", "partition", "group_id",
             "resource_name", "transactional_id", "member_id")


def _item_key(items: list[Any]) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in ITEM_KEYS:
        values = [i.get(key, _MISSING) for i in items]
        if _MISSING not in values and len({repr(v) for v in values}) == len(values):
            return key
    return None


_MISSING = object()


def _diff_by_key(kafka: dict[Any, Any], samsa: dict[Any, Any],
                 path_of: Callable[[Any], str]) -> list[tuple[str, str]]:
    """The differences of two mappings, entry by entry (Kafka's order, then samsa's extra)."""
    out = []
    for k in list(kafka) + [k for k in samsa if k not in kafka]:
        sub = path_of(k)
        if k not in samsa:
            out.append((sub, f"kafka={kafka[k]!r} samsa=<absent>"))
        elif k not in kafka:
            out.append((sub, f"kafka=<absent> samsa={samsa[k]!r}"))
        else:
            out += diff(kafka[k], samsa[k], sub)
    return out


def diff(kafka: Any, samsa: Any, path: str = "") -> list[tuple[str, str]]:
    """Where two normalized values differ: (path, ``kafka=... samsa=...``) for each place,
    paths such as ``topics[name=t].partitions[partition_index=0].error_code``."""
    if isinstance(kafka, dict) and isinstance(samsa, dict):
        return _diff_by_key(kafka, samsa, lambda k: f"{path}.{k}" if path else str(k))
    if isinstance(kafka, list) and isinstance(samsa, list):
        key = _item_key(kafka)
        if key is not None and key == _item_key(samsa):
            return _diff_by_key({repr(i[key]): i for i in kafka},
                                {repr(i[key]): i for i in samsa},
                                lambda k: f"{path}[{key}={k.strip(chr(39))}]")
        if len(kafka) != len(samsa):
            return [(path, f"kafka has {len(kafka)} items, samsa {len(samsa)}:"
                           f"\n    kafka={kafka!r}\n    samsa={samsa!r}")]
        return [line for i, (a, b) in enumerate(zip(kafka, samsa, strict=True))
                for line in diff(a, b, f"{path}[{i}]")]
    if kafka != samsa:
        return [(path or "<value>", f"kafka={kafka!r} samsa={samsa!r}")]
    return []
