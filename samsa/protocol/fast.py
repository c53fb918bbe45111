"""Hand-written encoders for the responses on the hot path, byte-identical to kio's.

Produce is answered once per request, and building plus encoding kio's dataclasses costs more
than everything else the broker does for a small batch. tests/protocol/test_fast.py checks every
version against kio's encoder; the schema (ProduceResponse.json) stays the source of truth.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V2 = struct.Struct(">ihqq")  # + log_append_time
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log_start_offset


_SMALL_UVARINTS = tuple(bytes([n]) for n in range(128))


def uvarint(n: int) -> bytes:
    """An unsigned varint (Kafka's compact lengths and counts, tag numbers and sizes)."""
    if n < 128:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _count(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


def produce_response(version: int, data: dict[str, Any]) -> bytes:
    """The body of a ProduceResponse (v3-12) for the dict the produce handler returns."""
    flexible = version >= 9
    tags = b"\x00" if flexible else b""
    parts = [_count(len(data["responses"]), flexible)]
    for topic in data["responses"]:
        parts.append(_string(topic["name"], flexible))
        partitions = topic["partition_responses"]
        parts.append(_count(len(partitions), flexible))
        for p in partitions:
            code = int(p["error_code"])
            if version >= 5:
                parts.append(_PARTITION_V5.pack(p["index"], code, p["base_offset"],
                                                p["log_append_time"], p["log_start_offset"]))
            else:
                parts.append(_PARTITION_V2.pack(p["index"], code, p["base_offset"],
                                                p["log_append_time"]))
            if version >= 8:
                errors = p["record_errors"]  # KIP-467: (index in the batch, message)
                parts.append(_count(len(errors), flexible))
                for e in errors:
                    parts.append(_I32.pack(e["batch_index"]))
                    parts.append(_string(e["batch_index_error_message"], flexible))
                    parts.append(tags)
                parts.append(_string(p["error_message"], flexible))
            parts.append(tags)
        parts.append(tags)
    parts.append(_I32.pack(data.get("throttle_time", 0)))
    parts.append(tags)
    return b"".join(parts)


# api key -> (first flexible version, body encoder)
FAST_RESPONSES: dict[int, tuple[int, Callable[[int, dict[str, Any]], bytes]]] = {
    0: (9, produce_response),
}


def encode_fast(api_key: int, version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    first_flexible, encoder = FAST_RESPONSES[api_key]
    header = _I32.pack(correlation_id) + (b"\x00" if version >= first_flexible else b"")
    body = encoder(version, data)
    return _I32.pack(len(header) + len(body)) + header + body
