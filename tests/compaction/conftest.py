"""Helpers of the compaction tests: brokers with a fast cleaner, compacted topics, a producer of
key updates and tombstones, a reader for each client, and waits on the cleaner.

Every wait here is bounded by a deadline. What the cleaner has done is judged from the outside:
the ``cleaner-offset-checkpoint`` file (Kafka's format) and the partition's segment files.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for  # noqa: F401 (the test modules import it from here)

import samsa

with warnings.catch_warnings():
    # kafka-python loads its schemas with importlib.resources' deprecated API: not ours to fix.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

DEADLINE = 20.0
BACKOFF_MS = 100
SEGMENT_BYTES = 8192
#: the broker keys of every test broker: a cleaner that looks for work every 100 ms
FAST_CLEANER: dict[str, Any] = {"log.cleaner.backoff.ms": BACKOFF_MS}
CHECKPOINT_FILE = "cleaner-offset-checkpoint"
KCAT_FORMAT = "%o\\t%k\\t%S\\t%s\\n"


# --- brokers and topics --------------------------------------------------------------------------


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., samsa.Broker]]:
    """``broker_factory(name="data", **config)``: a started broker on ``tmp_path / name`` with the
    fast cleaner and ``config`` (Kafka's key names), stopped at the end of the test. Calling it
    again with the same name after ``broker.stop()`` restarts on the same data."""
    started: list[samsa.Broker] = []

    def make(name: str = "data", **config: Any) -> samsa.Broker:
        b = samsa.Broker(tmp_path / name, config={**FAST_CLEANER, **config})
        b.start()
        started.append(b)
        return b

    yield make
    for b in reversed(started):
        b.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., samsa.Broker]) -> samsa.Broker:
    return broker_factory()


def compacted(**extra: Any) -> dict[str, str]:
    """Topic configs of a compacted topic with small segments that is cleaned at once."""
    configs = {"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES,
               "min.cleanable.dirty.ratio": 0.01, **extra}
    return {k: str(v) for k, v in configs.items()}


def create_topic(broker: samsa.Broker, name: str, configs: dict[str, str],
                 partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)],
                                  request_timeout=DEADLINE)
    futures[name].result(DEADLINE)


# --- producing -----------------------------------------------------------------------------------


def producer_conf(broker: samsa.Broker, **extra: Any) -> dict[str, Any]:
    # batch.size stays well below segment.bytes: Kafka refuses a batch larger than a segment.
    return {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "batch.size": 2048,
            "message.timeout.ms": int(DEADLINE * 1000), "acks": "all", **extra}


class Deliveries(list):
    """Delivery reports: (error, offset, key, value, timestamp)."""

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.append((err, msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

    @property
    def errors(self) -> list[KafkaError]:
        return [err for err, *_ in self if err is not None]


Update = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


def produce(producer: Producer, topic: str, updates: Iterable[Update],
            timestamp: int | None = None, partition: int | None = None) -> Deliveries:
    """Produce ``updates`` in order, flush, and check that every one was delivered."""
    deliveries = Deliveries()
    count = 0
    kwargs: dict[str, Any] = {}
    if timestamp is not None:
        kwargs["timestamp"] = timestamp
    if partition is not None:
        kwargs["partition"] = partition
    for key, value in updates:
        producer.produce(topic, key=key, value=value, on_delivery=deliveries, **kwargs)
        producer.poll(0)
        count += 1
    assert producer.flush(DEADLINE) == 0, "messages still in flight after the flush deadline"
    assert len(deliveries) == count
    assert not deliveries.errors, deliveries.errors[:5]
    return deliveries


def key_of(i: int) -> bytes:
    return b"key-%03d" % i


def value_of(i: int, round_: int) -> bytes:
    return b"key-%03d@%02d:" % (i, round_) + b"v" * 24


@dataclass
class Written:
    """What a test produced to a partition: every (offset, key, value), in order."""

    records: list[tuple[int, bytes, bytes | None]] = field(default_factory=list)
    timestamps: dict[int, int] = field(default_factory=dict)

    def add(self, deliveries: Deliveries) -> None:
        for _, offset, key, value, timestamp in deliveries:
            self.records.append((offset, key, value))
            self.timestamps[offset] = timestamp
        self.records.sort()

    @property
    def final(self) -> dict[bytes, bytes | None]:
        """The last value of every key (None for a key whose last record is a tombstone)."""
        return {key: value for _, key, value in self.records}

    @property
    def end_offset(self) -> int:
        return self.records[-1][0] + 1 if self.records else 0

    def at(self) -> dict[int, tuple[bytes, bytes | None]]:
        return {offset: (key, value) for offset, key, value in self.records}


def rounds(keys: Sequence[int], first: int, count: int) -> Iterator[Update]:
    """``count`` rounds of updates: every key in ``keys`` once a round."""
    for r in range(first, first + count):
        for i in keys:
            yield key_of(i), value_of(i, r)


# --- the cleaner, seen from the data directory ---------------------------------------------------


def partition_dir(broker: samsa.Broker, topic: str, partition: int = 0) -> Path:
    return broker.data_dir / f"{topic}-{partition}"


def segment_files(broker: samsa.Broker, topic: str, partition: int = 0) -> list[Path]:
    """The partition's segment files (``.log`` only: no ``.cleaned`` or ``.swap``), by offset."""
    files = [p for p in partition_dir(broker, topic, partition).iterdir()
             if p.name.endswith(".log")]
    return sorted(files, key=base_offset)


def base_offset(segment: Path) -> int:
    return int(segment.name.split(".")[0])


def active_base(broker: samsa.Broker, topic: str, partition: int = 0) -> int:
    return base_offset(segment_files(broker, topic, partition)[-1])


def log_bytes(broker: samsa.Broker, topic: str, partition: int = 0) -> int:
    total = 0
    for p in segment_files(broker, topic, partition):
        try:
            total += p.stat().st_size
        except FileNotFoundError:  # swapped out while we looked
            pass
    return total


def read_cleaner_checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    """``cleaner-offset-checkpoint``: version 0, a count, then ``topic partition offset``."""
    path = data_dir / CHECKPOINT_FILE
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    assert lines[0] == "0", lines
    assert int(lines[1]) == len(lines) - 2, lines
    out = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        out[(topic, int(partition))] = int(offset)
    return out


def cleaned_up_to(broker: samsa.Broker, topic: str, partition: int = 0) -> int:
    return read_cleaner_checkpoint(broker.data_dir).get((topic, partition), -1)


def wait_cleaned(broker: samsa.Broker, topic: str, partition: int = 0,
                 timeout: float = DEADLINE) -> int:
    """Wait until the cleaner has cleaned everything below the active segment (which it never
    cleans); returns that offset."""

    def done() -> int | None:
        base = active_base(broker, topic, partition)
        return base if base > 0 and cleaned_up_to(broker, topic, partition) >= base else None

    return wait_for(
        done, timeout, f"the cleaner to clean {topic}-{partition} up to its active segment",
        details=lambda: (f"checkpoint {read_cleaner_checkpoint(broker.data_dir)}, segments "
                         f"{[p.name for p in segment_files(broker, topic, partition)]}, "
                         f"metrics {broker.cleaner_metrics()}"),
    )


# --- reading with each client --------------------------------------------------------------------


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None


def consumer_conf(broker: samsa.Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "group.id": "compaction-tests",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 50, **extra}


def high_watermark(broker: samsa.Broker, topic: str, partition: int = 0) -> int:
    consumer = Consumer(consumer_conf(broker))
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                 timeout=DEADLINE)
        return high
    finally:
        consumer.close()


def low_watermark(broker: samsa.Broker, topic: str, partition: int = 0) -> int:
    consumer = Consumer(consumer_conf(broker))
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                timeout=DEADLINE)
        return low
    finally:
        consumer.close()


def poll_until(consumer: Consumer, end: int, out: list[Rec], deadline: float) -> None:
    """Append what ``consumer`` returns to ``out`` until it has read the offset before ``end``."""
    while not out or out[-1].offset < end - 1:
        assert time.monotonic() < deadline, (
            f"read up to offset {out[-1].offset if out else None} of {end} before the deadline")
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(Rec(msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))


def read_confluent(broker: samsa.Broker, topic: str, start: int = OFFSET_BEGINNING,
                   partition: int = 0, end: int | None = None) -> list[Rec]:
    """Every record from ``start`` (the log start by default) up to the high watermark, with
    confluent-kafka."""
    end = high_watermark(broker, topic, partition) if end is None else end
    out: list[Rec] = []
    if start >= end:
        return out
    consumer = Consumer(consumer_conf(broker))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        poll_until(consumer, end, out, time.monotonic() + DEADLINE)
    finally:
        consumer.close()
    return out


def read_kafka_python(broker: samsa.Broker, topic: str, partition: int = 0) -> list[Rec]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, fetch_max_wait_ms=50,
                             request_timeout_ms=int(DEADLINE * 1000) + 1000)
    try:
        tp = KpTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[Rec] = []
        deadline = time.monotonic() + DEADLINE
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python read {len(out)} records"
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(Rec(r.offset, r.key, r.value, r.timestamp) for r in records)
        return out
    finally:
        consumer.close()


def read_aiokafka(broker: samsa.Broker, topic: str, partition: int = 0) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    async def run() -> list[Rec]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=50,
                                    request_timeout_ms=int(DEADLINE * 1000))
        await asyncio.wait_for(consumer.start(), DEADLINE)
        try:
            tp = AioTopicPartition(topic, partition)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            out: list[Rec] = []
            deadline = time.monotonic() + DEADLINE
            while await consumer.position(tp) < end:
                assert time.monotonic() < deadline, f"aiokafka read {len(out)} records"
                batches = await consumer.getmany(tp, timeout_ms=200)
                for records in batches.values():
                    out.extend(Rec(r.offset, r.key, r.value, r.timestamp) for r in records)
            return out
        finally:
            await asyncio.wait_for(consumer.stop(), DEADLINE)

    return asyncio.run(run())


def kcat(broker: samsa.Broker, *args: str) -> str:
    # `make test` installs the Debian package; a missing kcat is a failure, not a skip.
    assert shutil.which("kcat"), "kcat is not installed: run `make test` (apt package kcat)"
    result = subprocess.run(["kcat", "-b", broker.bootstrap_servers, *args],
                            capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 0, f"kcat {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def read_kcat(broker: samsa.Broker, topic: str, partition: int = 0) -> list[Rec]:
    """``kcat -C -e -o beginning`` printing offset, key, value size (-1: null) and value."""
    out = kcat(broker, "-C", "-q", "-t", topic, "-p", str(partition), "-o", "beginning", "-e",
               "-f", KCAT_FORMAT)
    records = []
    for line in out.splitlines():
        offset, key, size, value = line.split("\t")
        records.append(Rec(int(offset), key.encode(), None if size == "-1" else value.encode()))
        if size != "-1":
            assert int(size) == len(value), line
    return records


# --- what every reader of a cleaned log must see -------------------------------------------------


def last_values(records: Iterable[Rec]) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in records}


def check_compacted_read(records: list[Rec], written: Written, cleaned_to: int) -> None:
    """The guarantees of a compacted log to a reader from the beginning: offsets strictly
    increasing (with gaps where records were cleaned), every record one that was written at that
    offset, the last value of every key (and so every tombstone still kept), and in the cleaned
    part at most one record a key."""
    offsets = [r.offset for r in records]
    assert all(a < b for a, b in itertools.pairwise(offsets)), "offsets not strictly increasing"
    assert len(records) < written.end_offset, "no gaps: nothing was cleaned"
    assert offsets[-1] == written.end_offset - 1
    at = written.at()
    wrong = [(r.offset, r.key, r.value, at.get(r.offset)) for r in records
             if at.get(r.offset) != (r.key, r.value)]
    assert not wrong, f"records that were not written at their offset: {wrong[:5]}"
    assert last_values(records) == written.final
    counts = Counter(r.key for r in records if r.offset < cleaned_to)
    repeated = sorted(k for k, n in counts.items() if n > 1)
    assert not repeated, f"keys more than once below the cleaner checkpoint: {repeated[:5]}"


def samsa_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=60, check=False)
