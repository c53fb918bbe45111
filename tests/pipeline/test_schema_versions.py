"""Activity events of two registered schema versions (a field added with a default) in one
batch: decoded in bulk per schema id, as fastavro's schema resolution reads them."""

from __future__ import annotations

import random

import pyarrow as pa
from fastavro import parse_schema

from samsa.pipeline.avro_columns import activity_columns
from samsa.pipeline.decode import _decode_one_by_one, decode_events
from samsa.pipeline.events import (
    ACTIVITY_SCHEMA,
    ACTIVITY_SCHEMA_ID,
    ACTIVITY_SCHEMA_V2,
    MONITORING_SCHEMA,
    BadEventError,
    decode,
    encode,
)

from .test_avro_columns import FIELDS, batch_of, event

V1, V2, MONITORING = 41, 57, 42  # ids a registry handed out
WRITERS = {V1: parse_schema(ACTIVITY_SCHEMA), V2: parse_schema(ACTIVITY_SCHEMA_V2),
           MONITORING: parse_schema(MONITORING_SCHEMA)}


def mixed(n: int) -> tuple[list[dict[str, object]], pa.Array]:
    rnd = random.Random(7)
    events, values = [], []
    for i in range(n):
        e = event(rnd, i)
        if rnd.random() < 0.5:
            e["referrer"] = rnd.choice([None, "/feed", "ü"])
            values.append(encode(e, V2, "avro", WRITERS[V2]))
        else:
            values.append(encode(e, V1, "avro", WRITERS[V1]))
        events.append(e)
    return events, pa.array(values, pa.binary())


def test_two_versions_decoded_in_bulk_as_fastavro_resolves_them() -> None:
    events, values = mixed(2000)
    columns = activity_columns(values, WRITERS)
    assert columns is not None
    resolved = [decode(v, ACTIVITY_SCHEMA_ID, WRITERS) for v in values.to_pylist()]
    for name in (*FIELDS, "referrer"):
        assert columns[name].to_pylist() == [e[name] for e in resolved], name
    assert columns["referrer"].to_pylist() == [e.get("referrer") for e in events]
    assert activity_columns(values) is None  # without the registry's schemas: unknown ids


def test_decode_events_gives_the_same_rows_in_bulk_or_one_by_one() -> None:
    _, values = mixed(300)
    bulk = next(decode_events(iter([batch_of(values)]), WRITERS))
    with_monitoring = pa.concat_arrays([values, pa.array([encode(
        {"server": "s", "topic": "t", "window_start": 0, "window_ms": 1, "count": 1},
        MONITORING, "avro", WRITERS[MONITORING])], pa.binary())])
    assert activity_columns(with_monitoring, WRITERS) is None
    try:
        next(decode_events(iter([batch_of(with_monitoring)]), WRITERS))
        raise AssertionError("a monitoring event loaded as an activity event")
    except BadEventError as exc:
        assert "t-0 at offset 300" in str(exc)
    one_by_one = _decode_one_by_one(batch_of(values), WRITERS)
    for name, column in one_by_one.items():
        if name != "timestamp":
            assert column.to_pylist() == bulk.column(name).to_pylist(), name


def test_an_unregistered_id_is_named() -> None:
    _, values = mixed(3)
    try:
        decode(values[0].as_py(), ACTIVITY_SCHEMA_ID, {MONITORING: WRITERS[MONITORING]})
        raise AssertionError("decoded with no schema")
    except BadEventError as exc:
        assert "is not registered" in str(exc)
