"""Reading a cleaned compacted topic from the beginning with every client: confluent-kafka,
kafka-python, aiokafka and kcat see strictly increasing offsets with gaps, the last value of
every key and every tombstone younger than ``delete.retention.ms``. Fetches and time lookups
that land in a gap, and ``samsa dump-log`` on the cleaned segments, work too.

One broker and one cleaned topic serve the whole module (nothing is produced after the cleaning,
so the cleaner has nothing more to do and the log stays as the tests found it).
"""

from __future__ import annotations

import ast
import bisect
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import samsa

from .conftest import (
    DEADLINE,
    FAST_CLEANER,
    Rec,
    Written,
    base_offset,
    check_compacted_read,
    compacted,
    consumer_conf,
    create_topic,
    key_of,
    produce,
    producer_conf,
    read_aiokafka,
    read_confluent,
    read_kafka_python,
    read_kcat,
    rounds,
    samsa_cli,
    segment_files,
    wait_cleaned,
)

pytestmark = pytest.mark.timeout(120)

TOPIC = "compacted"
KEYS = range(300)
TOMBSTONED = [i for i in KEYS if i % 7 == 3]
LIVE = [i for i in KEYS if i % 7 != 3]
ROUNDS = 8
DELETE_RETENTION_MS = 3_600_000
HORIZON = re.compile(r" deleteHorizonMs: (OptionalLong\.empty|OptionalLong\[(\d+)\]) ")
DUMP_RECORD = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<ts>-?\d+) key: (?P<key>b'.*'|None)"
    r" payload: (?P<value>b'.*'|None) headers: \[\]$"
)


@dataclass
class Cleaned:
    broker: samsa.Broker
    written: Written
    cleaned_to: int  # the cleaner's checkpoint: everything below it has been cleaned


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cleaned]:
    """Eight rounds of updates of 300 keys, a tombstone for every seventh key, one more round of
    the other keys (so the tombstones leave the active segment); then wait for the cleaner."""
    with samsa.Broker(tmp_path_factory.mktemp("compacted"), config=FAST_CLEANER) as broker:
        create_topic(broker, TOPIC, compacted(**{"delete.retention.ms": DELETE_RETENTION_MS}))
        producer = Producer(producer_conf(broker))
        written = Written()
        written.add(produce(producer, TOPIC, rounds(KEYS, 0, ROUNDS)))
        written.add(produce(producer, TOPIC, ((key_of(i), None) for i in TOMBSTONED)))
        written.add(produce(producer, TOPIC, rounds(LIVE, ROUNDS, 1)))
        cleaned_to = wait_cleaned(broker, TOPIC)
        tombstone_offsets = [o for o, _, v in written.records if v is None]
        assert len(tombstone_offsets) == len(TOMBSTONED)
        assert max(tombstone_offsets) < cleaned_to, "the tombstones were not cleaned"
        metrics = broker.cleaner_metrics()
        assert metrics is not None and metrics.runs >= 1, metrics
        assert 0 < metrics.bytes_written < metrics.bytes_read, metrics
        yield Cleaned(broker, written, cleaned_to)


def check(records: list[Rec], cleaned: Cleaned, timestamps: bool = True) -> None:
    check_compacted_read(records, cleaned.written, cleaned.cleaned_to)
    tombstones = {r.key for r in records if r.value is None}
    assert tombstones == {key_of(i) for i in TOMBSTONED}
    # Every record written since the last full round of the live keys is still there.
    assert len(records) >= len(KEYS)
    if timestamps:  # record timestamps survive the rewrite (tombstone batches get a horizon)
        stamps = cleaned.written.timestamps
        wrong = [(r.offset, r.timestamp, stamps[r.offset]) for r in records
                 if r.timestamp != stamps[r.offset]]
        assert not wrong, f"timestamps changed by cleaning (offset, read, written): {wrong[:5]}"


def test_confluent_reads_the_compacted_log(cleaned: Cleaned) -> None:
    check(read_confluent(cleaned.broker, TOPIC), cleaned)


def test_kafka_python_reads_the_compacted_log(cleaned: Cleaned) -> None:
    check(read_kafka_python(cleaned.broker, TOPIC), cleaned)


def test_aiokafka_reads_the_compacted_log(cleaned: Cleaned) -> None:
    check(read_aiokafka(cleaned.broker, TOPIC), cleaned)


def test_kcat_reads_the_compacted_log(cleaned: Cleaned) -> None:
    check(read_kcat(cleaned.broker, TOPIC), cleaned, timestamps=False)


def test_fetch_from_inside_a_gap_starts_at_the_next_record(cleaned: Cleaned) -> None:
    """A consumer positioned on a removed offset (an old committed offset, say) gets the next
    record: in the same segment, past a segment's removed tail, past emptied segments."""
    present = [r.offset for r in read_confluent(cleaned.broker, TOPIC)]
    kept = set(present)
    gaps = [o for o in range(present[-1]) if o not in kept]
    bases = [base_offset(p) for p in segment_files(cleaned.broker, TOPIC)]
    # the first gap, each segment's last offset when removed, and a spread of the rest
    chosen = sorted({gaps[0], *(b - 1 for b in bases[1:] if b - 1 not in kept), *gaps[::211]})
    consumer = Consumer(consumer_conf(cleaned.broker))
    try:
        wrong = []
        for gap in chosen:
            consumer.assign([TopicPartition(TOPIC, 0, gap)])
            deadline = time.monotonic() + DEADLINE
            msg = None
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
            assert msg is not None and msg.error() is None, (gap, msg and msg.error())
            expected = present[bisect.bisect_left(present, gap)]
            if msg.offset() != expected:
                wrong.append((gap, msg.offset(), expected))
            consumer.unassign()
        assert not wrong, f"(fetch offset, first offset read, next record's offset): {wrong}"
    finally:
        consumer.close()


def test_offsets_for_times_after_cleaning(cleaned: Cleaned) -> None:
    """ListOffsets by timestamp answers with the first record still in the log whose timestamp
    is at least the one asked for."""
    records = read_confluent(cleaned.broker, TOPIC)
    consumer = Consumer(consumer_conf(cleaned.broker))
    try:
        wrong = []
        for r in records[::37]:
            assert r.timestamp is not None
            (found,) = consumer.offsets_for_times([TopicPartition(TOPIC, 0, r.timestamp)],
                                                  timeout=DEADLINE)
            expected = min(x.offset for x in records if (x.timestamp or 0) >= r.timestamp)
            if found.offset != expected:
                wrong.append((r.timestamp, found.offset, expected))
        assert not wrong, f"(timestamp, offset found, expected): {wrong[:5]}"
    finally:
        consumer.close()


def test_dump_log_prints_cleaned_segments(cleaned: Cleaned) -> None:
    """``samsa dump-log --print-data-log`` on every cleaned segment (some emptied entirely):
    every batch decodes, no torn tail, and the records are the ones consumers read."""
    files: list[Path] = [p for p in segment_files(cleaned.broker, TOPIC)
                         if base_offset(p) < cleaned.cleaned_to]
    assert len(files) >= 2
    result = samsa_cli("dump-log", *files, "--print-data-log")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "trailing bytes" not in out and "cannot decode" not in out, out[-2000:]
    assert out.count("Dumping ") == len(files)
    dumped = []
    horizon: int | None = None
    horizons = {}  # offset of each tombstone -> its batch's delete horizon
    for line in out.splitlines():
        if line.startswith("| "):
            match = DUMP_RECORD.match(line)
            assert match is not None, line
            record = (int(match["offset"]), ast.literal_eval(match["key"]),
                      ast.literal_eval(match["value"]), int(match["ts"]))
            dumped.append(record)
            if record[2] is None:
                horizons[record[0]] = horizon
        elif line.startswith("baseOffset: "):
            found = HORIZON.search(line)
            assert found is not None, line
            horizon = None if found[1] == "OptionalLong.empty" else int(found[2])
        else:
            assert line.startswith("Dumping "), line
    # The first cleaning that kept a tombstone set its batch's delete horizon (KIP-534): about
    # delete.retention.ms after that cleaning, so an hour after the tombstone was written.
    assert len(horizons) == len(TOMBSTONED)
    stamps = cleaned.written.timestamps
    early = [(o, h) for o, h in horizons.items()
             if h is None or not 0 <= h - stamps[o] - DELETE_RETENTION_MS < 60_000]
    assert not early, f"(tombstone offset, batch delete horizon): {early[:5]}"
    expected = [(r.offset, r.key, r.value, r.timestamp)
                for r in read_confluent(cleaned.broker, TOPIC) if r.offset < cleaned.cleaned_to]
    assert dumped == expected
