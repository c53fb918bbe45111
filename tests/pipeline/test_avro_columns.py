"""Activity events decoded in bulk (``samsa.pipeline.avro_columns``) against fastavro's decoder
one message at a time (``samsa.pipeline.events.decode``), and ``decode_events`` taking either
path: the same columns, the same errors."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from samsa.pipeline.avro_columns import activity_columns
from samsa.pipeline.decode import _decode_one_by_one, decode_events, utc_dates
from samsa.pipeline.events import (
    ACTIVITY_SCHEMA_ID,
    MAX_TIMESTAMP_MS,
    MONITORING_SCHEMA_ID,
    BadEventError,
    decode,
    encode,
)

FIELDS = ("event_type", "user_id", "page", "query", "target", "server", "timestamp")


def event(rnd: random.Random, i: int) -> dict[str, Any]:
    return {
        "event_type": rnd.choice(["page_view", "search", "click"]),
        "user_id": f"user-{rnd.randrange(10**5):05d}",
        "page": rnd.choice(["/", "/feed", "/profile/12", "", "/страница/ü", "x" * 70]),
        "query": rnd.choice([None, "kafka", "", "stream processing" * 9]),
        "target": rnd.choice([None, "/jobs", "é"]),
        "server": f"frontend-{i % 7:02d}",
        "timestamp": rnd.choice([0, 1, 63, 64, 8191, 8192, 1_763_800_000_123 + i,
                                 MAX_TIMESTAMP_MS]),
    }


def values(events: list[dict[str, Any]], fmt: str = "avro") -> pa.Array:
    return pa.array([encode(e, ACTIVITY_SCHEMA_ID, fmt) for e in events], pa.binary())


def batch_of(array: pa.Array) -> pa.RecordBatch:
    n = len(array)
    return pa.RecordBatch.from_arrays(
        [pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
         array], names=["topic", "partition", "offset", "value"])


def test_bulk_decoding_reads_what_fastavro_reads() -> None:
    rnd = random.Random(1)
    events = [event(rnd, i) for i in range(3000)]
    array = values(events)
    columns = activity_columns(array)
    assert columns is not None
    decoded = [decode(v, ACTIVITY_SCHEMA_ID) for v in array.to_pylist()]
    for name in FIELDS:
        assert columns[name].to_pylist() == [e[name] for e in decoded] == [e[name] for e in
                                                                            events], name
    sliced = activity_columns(array.slice(101, 57))
    assert sliced is not None
    assert sliced["page"].to_pylist() == [e["page"] for e in events[101:158]]


def test_decode_events_gives_the_same_rows_either_way() -> None:
    rnd = random.Random(2)
    batch = batch_of(values([event(rnd, i) for i in range(500)]))
    bulk = next(decode_events(iter([batch])))
    columns = _decode_one_by_one(batch)
    assert bulk.column("user_id").to_pylist() == columns["user_id"].to_pylist()
    mixed = pa.concat_arrays([batch.column("value"),
                              values([event(rnd, 0)], fmt="json")])
    one_by_one = next(decode_events(iter([batch_of(mixed)])))
    assert one_by_one.slice(0, 500).to_pylist() == bulk.to_pylist()
    times = columns["timestamp"].cast(pa.timestamp("ms", tz="UTC"))
    assert bulk.column("date").to_pylist() == pc.strftime(times, format="%Y-%m-%d").to_pylist()
    assert bulk.column("hour").to_pylist() == pc.hour(times).to_pylist()


def _avro(e: dict[str, Any]) -> bytes:
    return encode(e, ACTIVITY_SCHEMA_ID, "avro")


GOOD = {"event_type": "click", "user_id": "u", "page": "/", "query": None, "target": "/jobs",
        "server": "s", "timestamp": 1_763_800_000_000}


@pytest.mark.parametrize(
    "bad",
    [
        encode(GOOD, ACTIVITY_SCHEMA_ID, "json"),  # JSON: decoded one by one
        encode({"server": "s", "topic": "t", "window_start": 0, "window_ms": 1, "count": 1},
               MONITORING_SCHEMA_ID, "avro"),
        _avro(GOOD)[:-1],  # truncated
        _avro(GOOD) + b"\x00",  # trailing bytes
        _avro(GOOD)[:4],  # no whole schema id
        b"",
        _avro(GOOD).replace(b"\x02\n/jobs", b"\x04\n/jobs"),  # union branch 2
        _avro(GOOD).replace(b"\x02u", b"\x02\xff"),  # a user id that is not UTF-8
        _avro({**GOOD, "timestamp": MAX_TIMESTAMP_MS + 1}),
        _avro({**GOOD, "timestamp": -1}),
    ],
)
def test_any_message_bulk_decoding_cannot_read_sends_the_batch_one_by_one(bad: bytes) -> None:
    array = pa.array([_avro(GOOD), bad, _avro(GOOD)], pa.binary())
    assert activity_columns(array) is None
    try:
        expected: Any = decode(bad, ACTIVITY_SCHEMA_ID)
    except BadEventError as exc:
        expected = exc
    batch = batch_of(array)
    if isinstance(expected, BadEventError):
        with pytest.raises(BadEventError, match=r"t-0 at offset 1 is not an activity event"):
            list(decode_events(iter([batch])))
    else:
        (rows,) = decode_events(iter([batch]))
        assert rows.column("user_id").to_pylist() == ["u", expected["user_id"], "u"]


def test_nulls_and_empty_batches_are_not_read_in_bulk() -> None:
    assert activity_columns(pa.array([_avro(GOOD), None], pa.binary())) is None
    assert activity_columns(pa.array([], pa.binary())) is None


@pytest.mark.parametrize("spread_days", [0, 3, 5000])
def test_utc_dates_are_strftimes(spread_days: int) -> None:
    """A few days (labels by day), and times 1970 to 9999 apart (labels by distinct day)."""
    rnd = random.Random(spread_days)
    extremes = [0, MAX_TIMESTAMP_MS] if spread_days > 4096 else []
    millis = pa.array([1_763_800_000_000 + rnd.randrange(0, spread_days * 86_400_000 + 1)
                       for _ in range(2000)] + extremes, pa.int64())
    times = millis.cast(pa.timestamp("ms", tz="UTC"))
    assert utc_dates(millis).to_pylist() == pc.strftime(times, format="%Y-%m-%d").to_pylist()
