"""The cleaner as part of the broker: restarts after cleaning (the log, the checkpoint, the
topic's compaction, an idempotent producer's state), the compacted ``__consumer_offsets`` topic
across a restart, and the cleaner's topic and broker configs as DescribeConfigs and
``samsa configs --describe`` show them."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

import samsa

from .conftest import (
    BACKOFF_MS,
    DEADLINE,
    SEGMENT_BYTES,
    Deliveries,
    Written,
    check_compacted_read,
    cleaned_up_to,
    compacted,
    consumer_conf,
    create_topic,
    high_watermark,
    key_of,
    log_bytes,
    partition_dir,
    produce,
    producer_conf,
    read_cleaner_checkpoint,
    read_confluent,
    read_kafka_python,
    rounds,
    samsa_cli,
    value_of,
    wait_cleaned,
    wait_for,
)

pytestmark = pytest.mark.timeout(90)

BrokerFactory = Callable[..., samsa.Broker]
OFFSETS = "__consumer_offsets"


def test_restart_after_cleaning(broker_factory: BrokerFactory) -> None:
    """A cleaned log reopens as it was: consumers from the beginning read the same records and
    the cleaner-offset-checkpoint is kept, with no cleaner leftovers in the partition."""
    topic = "restarted"
    broker = broker_factory("data")
    create_topic(broker, topic, compacted())
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(range(250), 0, 6)))
    written.add(produce(producer, topic, ((key_of(i), None) for i in range(0, 250, 9))))
    written.add(produce(producer, topic, rounds(range(1, 250, 9), 6, 4)))
    cleaned = wait_cleaned(broker, topic)
    before = read_confluent(broker, topic)
    check_compacted_read(before, written, cleaned)
    del producer
    broker.stop()

    assert read_cleaner_checkpoint(broker.data_dir) == {(topic, 0): cleaned}
    leftovers = [p.name for p in partition_dir(broker, topic).iterdir()
                 if p.name.endswith((".cleaned", ".swap"))]
    assert not leftovers, leftovers

    again = broker_factory("data")
    assert again.data_dir == broker.data_dir
    assert high_watermark(again, topic) == written.end_offset
    assert read_confluent(again, topic) == before
    assert read_kafka_python(again, topic) == before
    assert cleaned_up_to(again, topic) == cleaned
    metrics = again.cleaner_metrics()  # the checkpoint says everything is clean already
    assert metrics is not None and metrics.runs == 0, f"cleaned again after restart: {metrics}"


def test_topics_stay_compacted_after_restart(broker_factory: BrokerFactory) -> None:
    """After a restart a compacted topic still is one: keyless records are refused and the
    cleaner goes on from its checkpoint when new data comes (for a user topic and for
    __consumer_offsets)."""
    topic = "still-compacted"
    config = {"offsets.topic.segment.bytes": 16384, "offsets.topic.num.partitions": 1}
    broker = broker_factory("data", **config)
    create_topic(broker, topic, compacted())
    producer = Producer(producer_conf(broker))
    written = Written()
    written.add(produce(producer, topic, rounds(range(250), 0, 4)))
    consumer = Consumer(consumer_conf(broker, **{"group.id": "g"}))
    commit(consumer, [TopicPartition(topic, 0, 1)])
    consumer.close()
    cleaned = wait_cleaned(broker, topic)
    del producer
    broker.stop()

    broker = broker_factory("data", **config)
    producer = Producer(producer_conf(broker, retries=0))
    deliveries = Deliveries()
    producer.produce(topic, value=b"no key", on_delivery=deliveries)
    assert producer.flush(DEADLINE) == 0
    ((err, *_),) = deliveries
    assert err is not None and err.name() == "INVALID_RECORD", (
        f"after a restart the compacted topic accepted a keyless record (error {err})")

    written.add(produce(producer, topic, rounds(range(250), 4, 2)))
    assert wait_cleaned(broker, topic, timeout=5) > cleaned, "no cleaning after the restart"
    after = read_confluent(broker, topic)
    check_compacted_read(after, written, cleaned_up_to(broker, topic))
    assert {r.key: r.value for r in after} == {key_of(i): value_of(i, 5) for i in range(250)}

    consumer = Consumer(consumer_conf(broker, **{"group.id": "g"}))
    for i in range(600):
        commit(consumer, [TopicPartition(topic, 0, i)])
    consumer.close()
    wait_cleaned(broker, OFFSETS, timeout=5)
    assert committed(broker, "g", [TopicPartition(topic, 0)]) == {(topic, 0): 599}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_idempotent_producer_across_cleaning_and_restart(broker_factory: BrokerFactory) -> None:
    """One idempotent producer through a cleaning that leaves its last batch empty, a broker
    restart on the same port, more writes and a second restart: its producer state (kept by
    the empty batch and the snapshots) lets it go on without OutOfOrderSequence."""
    port = free_port()
    config = {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    broker = broker_factory("data", **config)
    topic = "idempotent-restart"
    create_topic(broker, topic, compacted())
    errors: list = []
    idempotent = Producer(producer_conf(broker, **{
        "enable.idempotence": True, "reconnect.backoff.max.ms": 200,
        "error_cb": lambda err: errors.append(err) if err.fatal() else None}))
    written = Written()
    written.add(produce(idempotent, topic, rounds(range(120), 0, 3)))
    other = Producer(producer_conf(broker))
    written.add(produce(other, topic, rounds(range(120), 3, 3)))
    wait_cleaned(broker, topic)
    del other

    for round_ in (6, 7):
        broker.stop()
        broker = broker_factory("data", **config)
        written.add(produce(idempotent, topic, rounds(range(120), round_, 1)))
    assert not errors, errors
    offsets = [o for o, _, _ in written.records]
    assert offsets == list(range(len(offsets)))
    records = read_confluent(broker, topic)
    assert {r.key: r.value for r in records} == {key_of(i): value_of(i, 7) for i in range(120)}


def commit(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    result = consumer.commit(offsets=offsets, asynchronous=False)
    assert result is not None and all(tp.error is None for tp in result), result


def committed(broker: samsa.Broker, group: str, partitions: list[TopicPartition]
              ) -> dict[tuple[str, int], int]:
    consumer = Consumer(consumer_conf(broker, **{"group.id": group}))
    try:
        found = consumer.committed(partitions, timeout=DEADLINE)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found}


def test_consumer_offsets_are_compacted_and_survive_a_restart(
    broker_factory: BrokerFactory,
) -> None:
    """2000 offset commits of one group fill __consumer_offsets (cleanup.policy=compact, small
    segments from offsets.topic.segment.bytes); the cleaner shrinks it to about one record a
    partition; after a restart the group's offsets are the last ones committed and a deleted
    group stays deleted."""
    config = {"offsets.topic.segment.bytes": 16384, "offsets.topic.num.partitions": 1}
    broker = broker_factory("data", **config)
    create_topic(broker, "orders", {}, partitions=3)
    partitions = [TopicPartition("orders", p) for p in range(3)]

    doomed = Consumer(consumer_conf(broker, **{"group.id": "doomed"}))
    for i in range(50):
        commit(doomed, [TopicPartition("orders", p, i) for p in range(3)])
    doomed.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_consumer_groups(["doomed"], request_timeout=DEADLINE)["doomed"].result(DEADLINE)

    consumer = Consumer(consumer_conf(broker, **{"group.id": "kept"}))
    commits = 2000
    for i in range(commits):
        commit(consumer, [TopicPartition("orders", p, 3 * i + p) for p in range(3)])
    consumer.close()
    last = {("orders", p): 3 * (commits - 1) + p for p in range(3)}

    end = high_watermark(broker, OFFSETS)
    assert end >= 3 * commits, end
    wait_cleaned(broker, OFFSETS)
    # 6000+ offset commit records of about 60 bytes each: well over 300 KB before cleaning.
    wait_for(lambda: log_bytes(broker, OFFSETS) < 2 * 16384,
             what="the cleaner to shrink __consumer_offsets",
             details=lambda: f"{log_bytes(broker, OFFSETS)} bytes")
    size = log_bytes(broker, OFFSETS)
    metrics = broker.cleaner_metrics()
    assert metrics is not None and metrics.bytes_read > 10 * size, metrics
    assert committed(broker, "kept", partitions) == last
    broker.stop()

    broker = broker_factory("data", **config)
    assert committed(broker, "kept", partitions) == last
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    listed = admin.list_consumer_groups(request_timeout=DEADLINE).result(DEADLINE)
    names = {g.group_id for g in listed.valid}
    assert "kept" in names and "doomed" not in names, names
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("kept")], request_timeout=DEADLINE)
    offsets = futures["kept"].result(DEADLINE).topic_partitions
    assert {(tp.topic, tp.partition): tp.offset for tp in offsets} == last
    assert set(committed(broker, "doomed", partitions).values()) == {-1001}  # OFFSET_INVALID

    # The group goes on committing on the restarted broker.
    consumer = Consumer(consumer_conf(broker, **{"group.id": "kept"}))
    commit(consumer, [TopicPartition("orders", 0, 123_456)])
    consumer.close()
    assert committed(broker, "kept", partitions) == {**last, ("orders", 0): 123_456}


# --- configs ---------------------------------------------------------------------------------

#: Kafka's defaults of the cleaner's topic keys, and the broker keys that set them
TOPIC_DEFAULTS = {
    "cleanup.policy": ("delete", "log.cleanup.policy"),
    "delete.retention.ms": ("86400000", "log.cleaner.delete.retention.ms"),
    "min.cleanable.dirty.ratio": ("0.5", "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("0", "log.cleaner.min.compaction.lag.ms"),
    "max.compaction.lag.ms": ("9223372036854775807", "log.cleaner.max.compaction.lag.ms"),
    "segment.bytes": ("1073741824", "log.segment.bytes"),
}
BROKER_DEFAULTS = {
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.io.buffer.load.factor": "0.9",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": "9223372036854775807",
    "log.cleanup.policy": "delete",
}


def describe(admin: AdminClient, kind: str, name: str) -> dict:
    futures = admin.describe_configs([ConfigResource(kind, name)], request_timeout=DEADLINE)
    return next(iter(futures.values())).result(DEADLINE)


def test_describe_configs_shows_the_cleaner_keys(broker: samsa.Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(DEADLINE)
    create_topic(broker, "tuned", compacted(**{"delete.retention.ms": 1000,
                                               "min.compaction.lag.ms": 5,
                                               "max.compaction.lag.ms": 60000}))

    plain = describe(admin, "topic", "plain")
    for name, (value, broker_key) in TOPIC_DEFAULTS.items():
        entry = plain[name]
        assert (entry.value, entry.source, entry.is_default) == (
            value, ConfigSource.DEFAULT_CONFIG.value, True), entry
        assert broker_key in entry.synonyms, (name, entry.synonyms)

    tuned = describe(admin, "topic", "tuned")
    overridden = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                  "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000",
                  "min.compaction.lag.ms": "5", "max.compaction.lag.ms": "60000"}
    for name, value in overridden.items():
        entry = tuned[name]
        assert (entry.value, entry.source, entry.is_default) == (
            value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False), entry

    cleaner_keys = describe(admin, "broker", str(broker.server.broker_id))
    for name, value in BROKER_DEFAULTS.items():
        assert (cleaner_keys[name].value, cleaner_keys[name].source) == (
            value, ConfigSource.DEFAULT_CONFIG.value), cleaner_keys[name]
    backoff = cleaner_keys["log.cleaner.backoff.ms"]
    assert (backoff.value, backoff.source) == (
        str(BACKOFF_MS), ConfigSource.STATIC_BROKER_CONFIG.value), backoff

    # kafka-configs.sh --describe --all, as samsa prints it
    result = samsa_cli("configs", "--bootstrap-server", broker.bootstrap_servers,
                       "--topic", "plain", "--describe", "--all")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "All configs for topic plain are:"
    for name, (value, broker_key) in TOPIC_DEFAULTS.items():
        expected = (f"  {name}={value} sensitive=false"
                    f" synonyms={{DEFAULT_CONFIG:{broker_key}={value}}}")
        assert expected in lines, (expected, lines)
    result = samsa_cli("configs", "--bootstrap-server", broker.bootstrap_servers,
                       "--topic", "tuned", "--describe")
    assert result.returncode == 0, result.stderr
    assert "  delete.retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" \
           "delete.retention.ms=1000, DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}" \
           in result.stdout.splitlines(), result.stdout


@pytest.mark.parametrize("name, value", [
    ("cleanup.policy", "shred"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "-0.1"),
    ("delete.retention.ms", "-1"),
    ("min.compaction.lag.ms", "-1"),
    ("max.compaction.lag.ms", "0"),
])
def test_invalid_cleaner_configs_are_refused(broker: samsa.Broker, name: str, value: str
                                             ) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    future = admin.create_topics([NewTopic("bad", 1, 1, config={name: value})],
                                 request_timeout=DEADLINE)["bad"]
    with pytest.raises(KafkaException) as info:
        future.result(DEADLINE)
    assert info.value.args[0].name() == "INVALID_CONFIG", info.value
