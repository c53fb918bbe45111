"""What log compaction promises producers and consumers, over TCP with real clients: tombstones
go after ``delete.retention.ms``, a consumer at the head sees everything, offsets keep their
meaning, keyless records are refused, idempotent producers are not disturbed, and
``cleanup.policy=compact,delete`` also deletes by retention."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka_frames import FrameClient

import samsa
from samsa.records.record import RecordInput, encode_batch

from .conftest import (
    DEADLINE,
    Deliveries,
    Rec,
    Written,
    base_offset,
    check_compacted_read,
    cleaned_up_to,
    compacted,
    consumer_conf,
    create_topic,
    key_of,
    low_watermark,
    produce,
    producer_conf,
    read_aiokafka,
    read_confluent,
    read_kafka_python,
    read_kcat,
    rounds,
    samsa_cli,
    segment_files,
    value_of,
    wait_cleaned,
    wait_for,
)

pytestmark = pytest.mark.timeout(90)

BrokerFactory = Callable[..., samsa.Broker]
# The tombstones' delete.retention.ms: short, but longer than a loaded machine takes from the
# cleaning that stamps their horizon to the test's read of them (1 s was not: the cleaner had
# come back past the horizon and removed them before the read).
TOMBSTONE_RETENTION_MS = 5000


def test_tombstones_go_after_delete_retention(broker: samsa.Broker) -> None:
    """The first cleaning that sees a tombstone keeps it and sets its delete horizon (now +
    delete.retention.ms); a cleaning after the horizon removes it, so the key is gone."""
    topic = "short-tombstones"
    retention_ms = TOMBSTONE_RETENTION_MS
    create_topic(broker, topic, compacted(**{"delete.retention.ms": retention_ms}))
    keys = range(200)
    doomed = [i for i in keys if i % 5 == 0]
    live = [i for i in keys if i % 5 != 0]
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(keys, 0, 5)))
    written.add(produce(producer, topic, ((key_of(i), None) for i in doomed)))
    written.add(produce(producer, topic, rounds(live, 5, 1)))

    first = wait_cleaned(broker, topic)
    assert max(o for o, _, v in written.records if v is None) < first
    records = read_confluent(broker, topic)
    check_compacted_read(records, written, first)
    assert {r.key for r in records if r.value is None} == {key_of(i) for i in doomed}

    # Past the horizon, new data makes the log dirty again: the next cleaning drops them.
    time.sleep(1.2 * retention_ms / 1000)
    written.add(produce(producer, topic, rounds(live, 6, 2)))
    second = wait_cleaned(broker, topic)
    records = read_confluent(broker, topic)
    assert {r.key for r in records} == {key_of(i) for i in live}, "tombstoned keys still there"
    assert all(r.value is not None for r in records)
    assert {r.key: r.value for r in records} == {key_of(i): value_of(i, 7) for i in live}
    assert second > first


def test_tombstones_go_after_the_horizon_without_new_writes(broker: samsa.Broker) -> None:
    """A quiet topic: after the cleaning that stamped the tombstones, nothing more is written.
    The cleaner still comes back once their delete horizon has passed and removes them."""
    topic = "quiet-tombstones"
    retention_ms = TOMBSTONE_RETENTION_MS
    create_topic(broker, topic, compacted(**{"delete.retention.ms": retention_ms}))
    keys = range(100)
    doomed = [i for i in keys if i % 4 == 0]
    live = [i for i in keys if i % 4 != 0]
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(keys, 0, 3)))
    written.add(produce(producer, topic, ((key_of(i), None) for i in doomed)))
    written.add(produce(producer, topic, rounds(live, 3, 1)))  # rolls past the tombstones
    first = wait_cleaned(broker, topic)
    assert max(o for o, _, v in written.records if v is None) < first
    assert {r.key for r in read_confluent(broker, topic) if r.value is None} == {
        key_of(i) for i in doomed
    }

    def tombstones_gone() -> bool:
        return not any(r.value is None for r in read_confluent(broker, topic))

    wait_for(tombstones_gone, what="the tombstones to go after their horizon")
    records = read_confluent(broker, topic)
    assert {r.key: r.value for r in records} == {key_of(i): value_of(i, 3) for i in live}


def test_consumer_at_the_head_sees_every_message(broker: samsa.Broker) -> None:
    """A consumer that keeps up with the head reads every message, even while the cleaner
    cleans the segments behind it; a consumer from the beginning afterwards does not."""
    topic = "head"
    create_topic(broker, topic, compacted())
    producer = Producer(producer_conf(broker))
    consumer = Consumer(consumer_conf(broker))
    written = Written()
    seen: list[Rec] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        step = 0
        for chunk in range(20):
            written.add(produce(producer, topic, rounds(range(100), chunk, 1)))
            deadline = time.monotonic() + DEADLINE
            while len(seen) < len(written.records):
                assert time.monotonic() < deadline, f"read {len(seen)} of {len(written.records)}"
                msg = consumer.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    seen.append(Rec(msg.offset(), msg.key(), msg.value()))
            if chunk in (6, 13):  # let the cleaner clean everything behind the consumer
                step = wait_cleaned(broker, topic)
        assert step > 0
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value) for r in seen] == written.records
    cleaned = wait_cleaned(broker, topic)
    from_start = read_confluent(broker, topic)
    check_compacted_read(from_start, written, cleaned)
    assert len(from_start) < len(seen) // 2


def alter_topic(broker: samsa.Broker, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    futures = admin.incremental_alter_configs(
        [ConfigResource("topic", topic, incremental_configs=entries)],
        request_timeout=DEADLINE)
    for future in futures.values():
        future.result(DEADLINE)


def test_offsets_keep_their_meaning(broker: samsa.Broker) -> None:
    """Read everything while min.compaction.lag.ms holds the cleaner back, let it clean, read
    again: every offset still there holds the same key, value and timestamp."""
    topic = "meaning"
    create_topic(broker, topic, compacted(**{"min.compaction.lag.ms": 3_600_000}))
    producer = Producer(producer_conf(broker))
    written = Written()
    base = int(time.time() * 1000) - 60_000
    for r in range(6):  # explicit, distinct timestamps a round
        written.add(produce(producer, topic, rounds(range(150), r, 1), timestamp=base + r))
    written.add(produce(producer, topic, ((key_of(i), None) for i in range(0, 150, 10)),
                        timestamp=base + 10))
    written.add(produce(producer, topic, rounds(range(1, 150, 2), 6, 3), timestamp=base + 20))
    before = read_confluent(broker, topic)
    assert [(r.offset, r.key, r.value) for r in before] == written.records
    assert cleaned_up_to(broker, topic) == -1, "cleaned in spite of min.compaction.lag.ms"

    alter_topic(broker, topic, min_compaction_lag_ms="0")
    cleaned = wait_cleaned(broker, topic)
    after = read_confluent(broker, topic)
    check_compacted_read(after, written, cleaned)
    by_offset = {r.offset: r for r in before}
    changed = [(r, by_offset[r.offset]) for r in after if by_offset[r.offset] != r]
    assert not changed, f"(after, before): {changed[:5]}"
    # kafka-python agrees on every offset, key, value and timestamp.
    assert read_kafka_python(broker, topic) == after


def test_keyless_record_is_refused(broker: samsa.Broker) -> None:
    """Kafka's rule: a compacted topic accepts only keyed records; a keyless one fails with
    INVALID_RECORD in the delivery report. Keyed records and other topics are unaffected."""
    topic = "needs-keys"
    create_topic(broker, topic, compacted())
    create_topic(broker, "plain", {})
    producer = Producer(producer_conf(broker, retries=0))
    deliveries = Deliveries()
    producer.produce(topic, value=b"no key", on_delivery=deliveries)
    assert producer.flush(DEADLINE) == 0
    ((err, *_),) = deliveries
    assert err is not None, "a keyless record was accepted by a compacted topic"
    assert err.code() == KafkaError.INVALID_RECORD, err
    assert err.name() == "INVALID_RECORD", err
    assert not err.retriable()

    written = Written()
    written.add(produce(producer, topic, [(b"k", b"v")]))
    plain = Deliveries()
    producer.produce("plain", value=b"no key is fine here", on_delivery=plain)
    assert producer.flush(DEADLINE) == 0
    assert [err for err, *_ in plain] == [None]
    assert [(r.offset, r.key, r.value) for r in read_confluent(broker, topic)] == [
        (written.records[0][0], b"k", b"v")
    ]


def test_idempotent_producer_across_cleanings(broker: samsa.Broker) -> None:
    """An idempotent producer keeps writing while the cleaner removes its older batches, and
    after another producer has overwritten every key it wrote (its last batch then stays in the
    log as an empty batch, which keeps its sequence): no OutOfOrderSequence, no duplicates, and
    every client reads the right last values past the empty batch."""
    topic = "idempotent"
    create_topic(broker, topic, compacted())
    errors: list[KafkaError] = []
    idempotent = Producer(producer_conf(broker, **{
        "enable.idempotence": True, "error_cb": errors.append}))
    written = Written()
    cleanings = 0
    last = -1
    for chunk in range(9):
        written.add(produce(idempotent, topic, rounds(range(120), chunk, 1)))
        if chunk % 3 == 2:
            done = wait_cleaned(broker, topic)
            cleanings += done > last
            last = done
    assert cleanings == 3
    idempotent_end = written.end_offset

    other = Producer(producer_conf(broker))
    written.add(produce(other, topic, rounds(range(120), 9, 3)))
    last = wait_cleaned(broker, topic)
    assert last > idempotent_end
    empty = empty_batches(broker, topic)
    assert empty, "the idempotent producer's last batch did not stay as an empty batch"
    assert all(base < idempotent_end for base, _ in empty), empty

    written.add(produce(idempotent, topic, rounds(range(0, 120, 2), 12, 3)))
    last = wait_cleaned(broker, topic)
    assert not errors, errors
    offsets = [o for o, _, _ in written.records]
    assert offsets == list(range(len(offsets))), "gaps or duplicates in the producers' offsets"
    expected = {key_of(i): value_of(i, 14 if i % 2 == 0 else 11) for i in range(120)}
    for read in (read_confluent, read_kafka_python, read_aiokafka, read_kcat):
        records = read(broker, topic)
        check_compacted_read(records, written, last)
        assert {r.key: r.value for r in records} == expected, read.__name__


def empty_batches(broker: samsa.Broker, topic: str) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch without records, from ``samsa dump-log``."""
    result = samsa_cli("dump-log", *segment_files(broker, topic))
    assert result.returncode == 0, result.stderr
    found = []
    for line in result.stdout.splitlines():
        if line.startswith("baseOffset: "):
            fields = line.split()
            values = dict(zip(fields[::2], fields[1::2], strict=False))
            if values["count:"] == "0":
                assert int(values["producerId:"]) >= 0, line
                found.append((int(values["baseOffset:"]), int(values["lastOffset:"])))
    return found


def first_base(broker: samsa.Broker, topic: str) -> int:
    return base_offset(segment_files(broker, topic)[0])


def test_compact_delete_also_deletes_by_retention(broker_factory: BrokerFactory) -> None:
    """cleanup.policy=compact,delete: segments whose newest record is older than retention.ms
    are deleted (the log start offset moves) while the rest is compacted."""
    broker = broker_factory(**{"log.retention.check.interval.ms": 100})
    topic = "compact-delete"
    create_topic(broker, topic, compacted(**{"cleanup.policy": "compact,delete",
                                             "retention.ms": 3_600_000}))
    producer = Producer(producer_conf(broker))
    old = int(time.time() * 1000) - 2 * 3_600_000
    written = Written()
    for r in range(2):  # two hours old: past retention
        written.add(produce(producer, topic, ((b"old-%03d" % i, b"o%d" % r) for i in range(300)),
                            timestamp=old + r))
    written.add(produce(producer, topic, rounds(range(200), 0, 6)))

    wait_for(lambda: low_watermark(broker, topic), what="retention to move the log start",
             interval=0.2)
    cleaned = wait_cleaned(broker, topic)
    # The log starts where its first segment does (retention may still be deleting: converge).
    start = wait_for(lambda: (low := low_watermark(broker, topic)) == first_base(broker, topic)
                     and low, what="the log start offset to be the first segment's base",
                     interval=0.2)
    # The first segments went (a cleaned one may also have held new records, all superseded).
    final_offsets = {key: offset for offset, key, _ in written.records}
    live_lost = [k for k, o in final_offsets.items() if o < start and k.startswith(b"key-")]
    assert not live_lost, f"retention deleted the last value of {live_lost[:5]}"
    records = read_confluent(broker, topic)
    assert records[0].offset >= start
    last = {r.key: r.value for r in records}
    assert {k: v for k, v in last.items() if k.startswith(b"key-")} == {
        key_of(i): value_of(i, 5) for i in range(200)
    }
    old_left = [k for k in last if k.startswith(b"old-")]
    assert len(old_left) < 300, "no old segment was deleted"
    # and the new keys are compacted below the cleaner checkpoint
    new_below = [r.key for r in records if r.offset < cleaned and r.key.startswith(b"key-")]
    assert len(new_below) == len(set(new_below))


def test_keyless_records_are_named_in_record_errors(broker: samsa.Broker) -> None:
    """KIP-467: a batch with keyless records for a compacted topic is refused as a whole
    (INVALID_RECORD), each keyless record named by its index in the batch, with Kafka's
    messages; nothing of the batch is written."""
    topic = "named-errors"
    create_topic(broker, topic, compacted())
    batch = encode_batch([RecordInput(key=b"a", value=b"1", timestamp=1),
                          RecordInput(key=None, value=b"2", timestamp=1),
                          RecordInput(key=None, value=b"3", timestamp=1)])
    with FrameClient(broker.bootstrap_servers) as client:
        answer = client.request(0, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0,
                                                               "records": batch}]}]})
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code == KafkaError.INVALID_RECORD
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-0."
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] \
        == [(1, why), (2, why)]
    assert partition.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=2, message='{why}')]")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "named"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE)
    finally:
        consumer.close()
    assert (low, high) == (0, 0)
