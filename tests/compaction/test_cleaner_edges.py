"""Less travelled paths of the cleaner, over TCP with real clients: compressed batches rewritten
with their codec, a dedupe buffer too small for the dirty part (cleaning in several passes),
two cleaner threads over several partitions, max.compaction.lag.ms forcing a cleaning below
min.cleanable.dirty.ratio, and a compacted topic deleted and created again."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

import samsa

from .conftest import (
    DEADLINE,
    Written,
    check_compacted_read,
    cleaned_up_to,
    compacted,
    create_topic,
    key_of,
    produce,
    producer_conf,
    read_cleaner_checkpoint,
    read_confluent,
    read_kafka_python,
    rounds,
    samsa_cli,
    segment_files,
    value_of,
    wait_cleaned,
    wait_for,
)

pytestmark = pytest.mark.timeout(90)

BrokerFactory = Callable[..., samsa.Broker]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_cleaned(broker: samsa.Broker, codec: str) -> None:
    """Batches partly kept are written again with their codec; both clients decode them."""
    topic = f"compressed-{codec}"
    create_topic(broker, topic, compacted(**{"segment.bytes": 4096}))
    producer = Producer(producer_conf(broker, **{"compression.type": codec,
                                                 "batch.size": 1024}))
    written = Written()
    # Rounds of every key, then rounds of the even ones: the batches of the last full round
    # keep their odd keys only and are written again.
    written.add(produce(producer, topic, rounds(range(300), 0, 6)))
    written.add(produce(producer, topic, ((key_of(i), None) for i in range(0, 300, 11))))
    written.add(produce(producer, topic, rounds(range(0, 300, 2), 6, 4)))
    cleaned = wait_cleaned(broker, topic)
    records = read_confluent(broker, topic)
    check_compacted_read(records, written, cleaned)
    assert read_kafka_python(broker, topic) == records

    result = samsa_cli("dump-log", *segment_files(broker, topic))
    assert result.returncode == 0, result.stderr
    batches = []
    for line in result.stdout.splitlines():
        if line.startswith("baseOffset: "):
            fields = line.split()
            batches.append(dict(zip(fields[::2], fields[1::2], strict=False)))
    rewritten = [b for b in batches
                 if 0 < int(b["count:"]) < int(b["lastOffset:"]) - int(b["baseOffset:"]) + 1]
    assert len(rewritten) >= 3, f"few batches were kept in part: {rewritten}"
    # the batches kept in part are written again with their codec (librdkafka itself may send
    # a batch uncompressed when compressing would not make it smaller)
    assert {b["compresscodec:"] for b in rewritten} == {codec}


def test_small_dedupe_buffer_cleans_in_several_passes(broker_factory: BrokerFactory) -> None:
    """A dedupe map of about 150 entries for 400 keys: each cleaning stops where the map is
    full and the next goes on from there, until the whole log is clean."""
    broker = broker_factory(**{"log.cleaner.dedupe.buffer.size": 21400})  # 150 entries
    topic = "small-map"
    create_topic(broker, topic, compacted())
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(range(400), 0, 4)))
    cleaned = wait_cleaned(broker, topic)
    metrics = broker.cleaner_metrics()
    assert metrics is not None and metrics.errors == 0, metrics
    assert metrics.runs >= 5, f"expected several partial cleanings: {metrics}"
    records = read_confluent(broker, topic)
    check_compacted_read(records, written, cleaned)
    assert {r.key: r.value for r in records} == {key_of(i): value_of(i, 3) for i in range(400)}


def test_two_cleaner_threads_over_several_partitions(broker_factory: BrokerFactory) -> None:
    """log.cleaner.threads=2: four compacted partitions, each cleaned and read back right."""
    broker = broker_factory(**{"log.cleaner.threads": 2})
    topic = "spread"
    partitions = range(4)
    create_topic(broker, topic, compacted(), partitions=len(partitions))
    producer = Producer(producer_conf(broker))
    written = {p: Written() for p in partitions}
    for r in range(5):
        for p in partitions:
            written[p].add(produce(producer, topic, rounds(range(p, 150 + p), r, 1),
                                   partition=p))
    for p in partitions:
        cleaned = wait_cleaned(broker, topic, p)
        check_compacted_read(read_confluent(broker, topic, partition=p), written[p], cleaned)
    metrics = broker.cleaner_metrics()
    assert metrics is not None and metrics.errors == 0, metrics
    assert metrics.runs >= len(partitions), metrics


def alter_topic(broker: samsa.Broker, topic: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    futures = admin.incremental_alter_configs(
        [ConfigResource("topic", topic, incremental_configs=[entry])], request_timeout=DEADLINE)
    for future in futures.values():
        future.result(DEADLINE)


def test_max_compaction_lag_forces_a_cleaning(broker: samsa.Broker) -> None:
    """With min.cleanable.dirty.ratio=1 a cleaned log is never dirty enough again; a dirty
    segment older than max.compaction.lag.ms is cleaned all the same."""
    topic = "lagging"
    create_topic(broker, topic, compacted())
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(range(200), 0, 3)))
    first = wait_cleaned(broker, topic)
    alter_topic(broker, topic, "min.cleanable.dirty.ratio", "1")
    written.add(produce(producer, topic, rounds(range(200), 3, 3)))
    time.sleep(1.0)
    assert cleaned_up_to(broker, topic) == first, "cleaned below min.cleanable.dirty.ratio"

    alter_topic(broker, topic, "max.compaction.lag.ms", "500")
    cleaned = wait_cleaned(broker, topic)
    assert cleaned > first
    records = read_confluent(broker, topic)
    check_compacted_read(records, written, cleaned)


def recovery_point(broker: samsa.Broker, topic: str) -> int:
    path = broker.data_dir / "recovery-point-offset-checkpoint"
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines[2:]:
        name, partition, offset = line.split(" ")
        if (name, partition) == (topic, "0"):
            return int(offset)
    return -1


def test_deleted_and_recreated_topic_is_cleaned_from_scratch(broker_factory: BrokerFactory
                                                             ) -> None:
    """Deleting a topic drops its cleaner checkpoint: the topic created again under the same
    name (with fewer records than before) is cleaned from its start."""
    broker = broker_factory(**{"log.flush.offset.checkpoint.interval.ms": 100})
    topic = "reborn"
    create_topic(broker, topic, compacted())
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(range(300), 0, 8)))
    first = wait_cleaned(broker, topic)
    # Delete only once the background fsync of the rolled segments is done: a DeleteTopics
    # racing it can fail (the fsync writes a deleted segment's time index again, so the
    # partition directory is not empty when the delete removes it).
    wait_for(lambda: recovery_point(broker, topic) >= first, what="the rolled segments' fsync")

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([topic], request_timeout=DEADLINE)[topic].result(DEADLINE)
    wait_for(lambda: (topic, 0) not in read_cleaner_checkpoint(broker.data_dir),
             what="the deleted topic to leave the cleaner checkpoint")
    create_topic(broker, topic, compacted())

    producer = Producer(producer_conf(broker))
    again = Written()
    again.add(produce(producer, topic, rounds(range(100), 0, 4)))
    assert again.end_offset < first
    cleaned = wait_cleaned(broker, topic)
    records = read_confluent(broker, topic)
    check_compacted_read(records, again, cleaned)
    assert {r.key: r.value for r in records} == {key_of(i): value_of(i, 3) for i in range(100)}
