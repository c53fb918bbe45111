"""The pipeline's message formats: Avro (Confluent framing) and JSON, and every bad input."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from samsa.pipeline.events import (
    ACTIVITY_SCHEMA_ID,
    AVRO_MAGIC,
    DEFAULT_TOPICS,
    MONITORING_SCHEMA_ID,
    SCHEMAS,
    BadEventError,
    Topics,
    decode,
    encode,
)

SEARCH = {
    "event_type": "search",
    "user_id": "user-00042",
    "page": "/search",
    "query": "stream processing",
    "target": None,
    "server": "frontend-01",
    "timestamp": 1_763_800_000_123,
}
CLICK = {
    "event_type": "click",
    "user_id": "user-00007",
    "page": "/feed",
    "query": None,
    "target": "/jobs",
    "server": "frontend-02",
    "timestamp": 1_763_800_060_000,
}
PAGE_VIEW = {
    "event_type": "page_view",
    "user_id": "user-00001",
    "page": "/profile/3",
    "query": None,
    "target": None,
    "server": "frontend-03",
    "timestamp": 0,
}
MONITORING = {
    "server": "frontend-01",
    "topic": "page_views",
    "window_start": 1_763_799_960_000,
    "window_ms": 60_000,
    "count": 1234,
}
EVENTS: list[tuple[dict[str, Any], int]] = [
    (SEARCH, ACTIVITY_SCHEMA_ID),
    (CLICK, ACTIVITY_SCHEMA_ID),
    (PAGE_VIEW, ACTIVITY_SCHEMA_ID),
    (MONITORING, MONITORING_SCHEMA_ID),
]
EVENT_IDS = ["search", "click", "page_view", "monitoring"]


def _json(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode()


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["avro", "json"])
@pytest.mark.parametrize(("event", "schema_id"), EVENTS, ids=EVENT_IDS)
def test_round_trip(event: dict[str, Any], schema_id: int, fmt: str) -> None:
    assert decode(encode(event, schema_id, fmt), schema_id) == event


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_round_trip_extreme_longs(fmt: str) -> None:
    event = dict(MONITORING, window_ms=2**63 - 1, count=-(2**63))
    assert decode(encode(event, MONITORING_SCHEMA_ID, fmt), MONITORING_SCHEMA_ID) == event


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_round_trip_non_ascii_strings(fmt: str) -> None:
    event = dict(SEARCH, query="Kafka – Ünïcødé 日本語 🚀", page="/search?q=ü")
    assert decode(encode(event, ACTIVITY_SCHEMA_ID, fmt), ACTIVITY_SCHEMA_ID) == event


def test_encode_rejects_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        encode(SEARCH, ACTIVITY_SCHEMA_ID, "xml")


# --- Avro framing --------------------------------------------------------------------------


@pytest.mark.parametrize(("event", "schema_id"), EVENTS, ids=EVENT_IDS)
def test_avro_framing(event: dict[str, Any], schema_id: int) -> None:
    value = encode(event, schema_id, "avro")
    assert value[0] == AVRO_MAGIC == 0
    assert value[1:5] == schema_id.to_bytes(4, "big")
    assert struct.unpack(">bI", value[:5]) == (0, schema_id)
    # the body is fastavro's schemaless encoding, with nothing else after it
    import io

    from fastavro import schemaless_reader

    body = io.BytesIO(value[5:])
    assert schemaless_reader(body, SCHEMAS[schema_id], None) == event
    assert body.read() == b""


def test_avro_schema_ids_are_fixed() -> None:
    # the ids are in the messages of existing topics: they must never change
    assert (ACTIVITY_SCHEMA_ID, MONITORING_SCHEMA_ID) == (1, 2)
    assert set(SCHEMAS) == {1, 2}


@pytest.mark.parametrize(("event", "schema_id"), EVENTS, ids=EVENT_IDS)
def test_json_is_a_compact_utf8_object(event: dict[str, Any], schema_id: int) -> None:
    value = encode(event, schema_id, "json")
    assert value[:1] == b"{"
    assert json.loads(value.decode("utf-8")) == event
    assert b", " not in value and b": " not in value


def test_one_topic_may_mix_avro_and_json() -> None:
    values = [encode(SEARCH, ACTIVITY_SCHEMA_ID, "avro"), encode(CLICK, ACTIVITY_SCHEMA_ID, "json")]
    assert [decode(v, ACTIVITY_SCHEMA_ID) for v in values] == [SEARCH, CLICK]


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [b"", None], ids=["empty", "none"])
def test_empty_value(value: bytes | None) -> None:
    with pytest.raises(BadEventError, match="^empty message value$"):
        decode(value, ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize("value", [b"\x00", b"\x00\x00\x00\x00"], ids=["1-byte", "4-byte"])
def test_avro_without_a_whole_schema_id(value: bytes) -> None:
    with pytest.raises(BadEventError, match=f"Avro message of {len(value)} bytes has no schema id"):
        decode(value, ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize("schema_id", [0, 3, 99, 2**32 - 1])
def test_avro_unknown_schema_id(schema_id: int) -> None:
    body = encode(SEARCH, ACTIVITY_SCHEMA_ID, "avro")[5:]
    value = struct.pack(">bI", 0, schema_id) + body
    with pytest.raises(BadEventError, match=f"^unknown Avro schema id {schema_id}$"):
        decode(value, ACTIVITY_SCHEMA_ID)


def test_avro_with_the_other_schemas_id() -> None:
    monitoring = encode(MONITORING, MONITORING_SCHEMA_ID, "avro")
    with pytest.raises(BadEventError, match="^Avro schema id 2 where 1 was expected$"):
        decode(monitoring, ACTIVITY_SCHEMA_ID)
    activity = encode(SEARCH, ACTIVITY_SCHEMA_ID, "avro")
    with pytest.raises(BadEventError, match="^Avro schema id 1 where 2 was expected$"):
        decode(activity, MONITORING_SCHEMA_ID)


@pytest.mark.parametrize(("event", "schema_id"), EVENTS, ids=EVENT_IDS)
def test_truncated_avro_body(event: dict[str, Any], schema_id: int) -> None:
    value = encode(event, schema_id, "avro")
    for length in range(5, len(value)):  # every cut after the header, the empty body included
        with pytest.raises(BadEventError, match="^undecodable Avro body: "):
            decode(value[:length], schema_id)


def test_avro_body_of_garbage() -> None:
    # a string length of -1 (zigzag 0x01) is not a string
    with pytest.raises(BadEventError, match="^undecodable Avro body: "):
        decode(b"\x00\x00\x00\x00\x01\x01\xff\xff", ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize(
    "value",
    [b"hello", b"\xff\xfe\xfd", b"\x01\x00\x00\x00\x01", b"{not json}", b'{"a": 1'],
    ids=["text", "not-utf8", "wrong-magic", "bad-object", "unterminated"],
)
def test_neither_avro_nor_json(value: bytes) -> None:
    with pytest.raises(BadEventError, match=r"^neither Avro \(magic byte 0\) nor JSON: "):
        decode(value, ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize(
    "value", [b"[1, 2]", b"42", b'"page_view"', b"null", b"true", b"[]"],
    ids=["array", "number", "string", "null", "bool", "empty-array"],
)
def test_json_not_an_object(value: bytes) -> None:
    with pytest.raises(BadEventError, match="^JSON message is not an object$"):
        decode(value, ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize(
    "field", ["event_type", "user_id", "page", "server", "timestamp"]
)
def test_json_activity_missing_required_field(field: str) -> None:
    event = {k: v for k, v in SEARCH.items() if k != field}
    with pytest.raises(BadEventError, match=f"^JSON event lacks '{field}'$"):
        decode(_json(event), ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize("field", list(MONITORING))
def test_json_monitoring_missing_required_field(field: str) -> None:
    event = {k: v for k, v in MONITORING.items() if k != field}
    with pytest.raises(BadEventError, match=f"^JSON event lacks '{field}'$"):
        decode(_json(event), MONITORING_SCHEMA_ID)


def test_json_empty_object() -> None:
    with pytest.raises(BadEventError, match="^JSON event lacks 'event_type'$"):
        decode(b"{}", ACTIVITY_SCHEMA_ID)


@pytest.mark.parametrize(
    ("schema_id", "base", "field", "value", "avro_type"),
    [
        (ACTIVITY_SCHEMA_ID, SEARCH, "timestamp", "1763800000123", "long"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "timestamp", True, "long"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "timestamp", False, "long"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "timestamp", 1.5, "long"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "timestamp", None, "long"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "user_id", 42, "string"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "page", None, "string"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "server", ["frontend-01"], "string"),
        (ACTIVITY_SCHEMA_ID, SEARCH, "query", 7, "['null', 'string']"),
        (ACTIVITY_SCHEMA_ID, CLICK, "target", {"page": "/jobs"}, "['null', 'string']"),
        (MONITORING_SCHEMA_ID, MONITORING, "count", "1234", "long"),
        (MONITORING_SCHEMA_ID, MONITORING, "count", True, "long"),
        (MONITORING_SCHEMA_ID, MONITORING, "window_ms", 60_000.0, "long"),
        (MONITORING_SCHEMA_ID, MONITORING, "topic", None, "string"),
    ],
    ids=[
        "timestamp-string", "timestamp-true", "timestamp-false", "timestamp-float",
        "timestamp-null", "user_id-int", "page-null", "server-list", "query-int",
        "target-object", "count-string", "count-bool", "window_ms-float", "topic-null",
    ],
)
def test_json_wrong_type(
    schema_id: int, base: dict[str, Any], field: str, value: object, avro_type: str
) -> None:
    event = dict(base, **{field: value})
    with pytest.raises(BadEventError) as info:
        decode(_json(event), schema_id)
    assert str(info.value) == f"JSON event field '{field}' is not of Avro type {avro_type}"


@pytest.mark.parametrize("absent", [("query",), ("target",), ("query", "target")])
def test_json_optional_fields_default_to_none(absent: tuple[str, ...]) -> None:
    event = {k: v for k, v in PAGE_VIEW.items() if k not in absent}
    assert decode(_json(event), ACTIVITY_SCHEMA_ID) == PAGE_VIEW


def test_json_optional_fields_explicit_null_and_value() -> None:
    assert decode(_json(SEARCH), ACTIVITY_SCHEMA_ID)["target"] is None
    assert decode(_json(CLICK), ACTIVITY_SCHEMA_ID)["target"] == "/jobs"


def test_json_activity_is_not_a_monitoring_event() -> None:
    # the same topic name scheme must not let an activity event pass as a monitoring one
    with pytest.raises(BadEventError, match="^JSON event lacks 'topic'$"):
        decode(encode(SEARCH, ACTIVITY_SCHEMA_ID, "json"), MONITORING_SCHEMA_ID)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1], ids=["too-big", "too-small"])
def test_json_long_outside_64_bits(value: int) -> None:
    with pytest.raises(BadEventError, match="'count' is not of Avro type long"):
        decode(_json(dict(MONITORING, count=value)), MONITORING_SCHEMA_ID)


@pytest.mark.parametrize("fmt", ["avro", "json"])
@pytest.mark.parametrize("value", [-1, 10**16, 2**63 - 1])
def test_event_times_parquet_cannot_hold_are_refused(fmt: str, value: int) -> None:
    with pytest.raises(BadEventError, match=f"timestamp {value} is not a time between"):
        decode(encode(dict(SEARCH, timestamp=value), ACTIVITY_SCHEMA_ID, fmt), ACTIVITY_SCHEMA_ID)
    with pytest.raises(BadEventError, match=f"window_start {value} is not a time between"):
        decode(
            encode(dict(MONITORING, window_start=value), MONITORING_SCHEMA_ID, fmt),
            MONITORING_SCHEMA_ID,
        )


def test_bytes_after_the_avro_body_are_refused() -> None:
    value = encode(SEARCH, ACTIVITY_SCHEMA_ID, "avro") + b"junk"
    with pytest.raises(BadEventError, match="4 bytes after the Avro body"):
        decode(value, ACTIVITY_SCHEMA_ID)


def test_bad_event_error_is_a_value_error() -> None:
    assert issubclass(BadEventError, ValueError)


# --- topic names ---------------------------------------------------------------------------


def test_default_topic_names() -> None:
    assert Topics() == DEFAULT_TOPICS
    assert Topics().activity("page_view") == "page_views"
    assert Topics().activity("search") == "searches"
    assert Topics().activity("click") == "clicks"
    assert Topics().all_activity == ["page_views", "searches", "clicks"]
    assert Topics().monitoring == "monitoring"


def test_prefixed_topic_names() -> None:
    topics = Topics("test-run-7.")
    assert topics.all_activity == [
        "test-run-7.page_views", "test-run-7.searches", "test-run-7.clicks",
    ]
    assert topics.monitoring == "test-run-7.monitoring"
    assert topics.activity("click") == "test-run-7.clicks"


def test_unknown_event_type_has_no_topic() -> None:
    with pytest.raises(KeyError):
        Topics().activity("purchase")
