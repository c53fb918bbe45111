"""The compiled response writer against kio: the same bytes for every response version the
broker answers, on values generated from each version's schema (missing fields, None where a
string is not nullable, ints or timedeltas, nested dicts or kio entities, tagged fields)."""

from __future__ import annotations

import datetime
import random
import types
import typing
import uuid
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial._introspect import get_field_tag

from samsa.handlers import load_handlers
from samsa.handlers.registry import APIS
from samsa.protocol import build
from samsa.protocol.codec import encode_response
from samsa.protocol.response_writer import encode
from samsa.storage.log import FileRegion

RUNS_PER_VERSION = 25
_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint8": (0, 255),
    "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}
_CODES = list(ErrorCode)


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        present = [a for a in args if a is not type(None)]
        return present[0], len(present) < len(args)
    return tp, False


def _scalar(kafka_type: str, nullable: bool, rnd: random.Random, region: FileRegion,
            item: bool = False) -> Any:
    if nullable and rnd.random() < 0.2:
        return None
    if kafka_type in _RANGES:
        low, high = _RANGES[kafka_type]
        return rnd.choice([low, high, 0, -1 if low < 0 else 1, rnd.randint(low, high)])
    if kafka_type == "error_code":
        code = rnd.choice(_CODES)
        return code if rnd.random() < 0.5 else int(code)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        ms = rnd.choice([0, 1, 30_000, rnd.randint(0, 2**31 - 1)])
        return datetime.timedelta(milliseconds=ms) if rnd.random() < 0.3 else ms
    if kafka_type == "datetime_i64":
        return rnd.choice([-1, 0, 1_700_000_000_123, rnd.randint(0, 2**41)])
    if kafka_type == "bool":
        return rnd.random() < 0.5
    if kafka_type == "float64":
        return rnd.random() * 1e6
    if kafka_type == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    if kafka_type == "string":
        if not item and rnd.random() < 0.1:
            return None  # written empty where the version does not allow null
        return rnd.choice(["", "topic", "ünïcødé-✓", "x" * rnd.randint(0, 300)])
    if kafka_type in ("bytes", "records"):
        if not item and rnd.random() < 0.1:
            return None
        if kafka_type == "records" and rnd.random() < 0.3:
            return region
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 200)))
    raise AssertionError(kafka_type)


def generate(cls: type, rnd: random.Random, region: FileRegion, depth: int = 0) -> Any:
    data: dict[str, Any] = {}
    for f in fields(cls):
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        tagged = get_field_tag(f) is not None
        if (has_default or tagged) and rnd.random() < 0.4:
            continue
        tp, nullable = _strip_optional(f.type)
        many = typing.get_origin(tp) is tuple
        inner, _ = _strip_optional(typing.get_args(tp)[0]) if many else (tp, False)
        if many and not has_default and rnd.random() < 0.1:
            continue  # an array left out is empty
        kafka_type = f.metadata.get("kafka_type", "")
        if many:
            if nullable and rnd.random() < 0.2:
                data[f.name] = None
                continue
            count = rnd.randint(0, 3 if depth < 2 else 1)
            if is_dataclass(inner):
                data[f.name] = [generate(inner, rnd, region, depth + 1) for _ in range(count)]
            else:
                data[f.name] = [_scalar(kafka_type, False, rnd, region, item=True)
                                for _ in range(count)]
        elif is_dataclass(tp):
            data[f.name] = (None if nullable and rnd.random() < 0.3
                            else generate(tp, rnd, region, depth + 1))
        else:
            data[f.name] = _scalar(kafka_type, nullable, rnd, region)
    if depth and rnd.random() < 0.2:
        return build.build(cls, data)  # a kio entity where a dict is expected
    return data


def _bytes(chunks: list[Any]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)


def _versions() -> list[tuple[int, int]]:
    load_handlers()
    return [(api.key, v) for api in APIS.values()
            for v in range(api.min_version, api.max_version + 1)]


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("region") / "segment"
    path.write_bytes(bytes(range(256)) * 4)
    with path.open("rb") as file:
        yield FileRegion(file, 100, 500)


@pytest.mark.parametrize(("api_key", "version"), _versions())
def test_the_same_bytes_as_kio(api_key: int, version: int, region: FileRegion) -> None:
    rnd = random.Random(api_key * 1000 + version)
    cls = build.response_schema(api_key, version)
    for run in range(RUNS_PER_VERSION):
        data = generate(cls, rnd, region)
        correlation = rnd.randint(-(2**31), 2**31 - 1)
        expected = _bytes(encode_response(correlation, build.response(api_key, version, data)))
        got = encode(api_key, version, correlation, data)
        assert _bytes(got) == expected, (run, data)
        assert sum(len(c) for c in got[1:]) + 4 == len(expected) or len(got) == 1


def test_a_file_region_stays_a_chunk_of_its_own(region: FileRegion) -> None:
    chunks = encode(1, 12, 7, {"throttle_time": 0, "error_code": 0, "session_id": 0,
                               "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1,
         "last_stable_offset": 1, "log_start_offset": 0, "records": region}]}]})
    assert region in chunks
    assert all(isinstance(c, bytes) for c in chunks if c is not region)
