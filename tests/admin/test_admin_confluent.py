"""Topic and config administration through confluent-kafka's AdminClient (librdkafka 2.x).

librdkafka sends CreateTopics v4, DeleteTopics v4, CreatePartitions v2, DescribeConfigs v1
(always with include_synonyms), AlterConfigs v2 and IncrementalAlterConfigs v1. For a manual
replica assignment it wants num_partitions equal to the assignment's length locally and sends
-1 / -1 on the wire, as Kafka requires.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

import samsa
from samsa.config import DEPRECATED, TOPIC_KEYS
from samsa.server.modes import FIRST_GENERATED_BROKER_ID

TIMEOUT = 10.0
pytestmark = pytest.mark.filterwarnings(
    "ignore:alter_configs has been deprecated:DeprecationWarning"
)
BROKER_ID = FIRST_GENERATED_BROKER_ID  # the embedded broker leaves broker.id to be generated


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data") as b:
        yield b


def admin_for(b: samsa.Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap_servers, "socket.timeout.ms": 10000})


@pytest.fixture
def admin(broker: samsa.Broker) -> AdminClient:
    return admin_for(broker)


def wait(futures: Mapping[Any, Future]) -> dict[Any, Any]:
    """Every future's result, or the KafkaError it failed with."""
    out: dict[Any, Any] = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT)
        except KafkaException as exc:
            out[key] = exc.args[0]
    return out


def error_code(outcome: Any) -> int | None:
    return outcome.code() if isinstance(outcome, KafkaError) else None


def topic_partitions(admin: AdminClient) -> dict[str, int]:
    metadata = admin.list_topics(timeout=TIMEOUT)
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


def describe_topic(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(
        timeout=TIMEOUT
    )


# --- CreateTopics ------------------------------------------------------------------------------


def test_create_topics_and_list(admin: AdminClient) -> None:
    results = wait(admin.create_topics(
        [
            NewTopic("orders", 3, 1),
            NewTopic("events"),  # -1 partitions: num.partitions
            NewTopic("assigned", 2, replica_assignment=[[BROKER_ID]] * 2),
        ],
        request_timeout=TIMEOUT,
    ))
    assert results == {"orders": None, "events": None, "assigned": None}
    topics = topic_partitions(admin)
    assert topics["orders"] == 3
    assert topics["events"] == 1  # num.partitions
    assert topics["assigned"] == 2
    orders = admin.list_topics("orders", timeout=TIMEOUT).topics["orders"]
    for partition in orders.partitions.values():
        assert partition.leader == BROKER_ID and partition.replicas == [BROKER_ID]


def test_create_validate_only_creates_nothing(admin: AdminClient) -> None:
    results = wait(admin.create_topics(
        [NewTopic("dry", 2, 1, config={"retention.ms": "1000"}), NewTopic("dry-bad", 1, 3)],
        validate_only=True, request_timeout=TIMEOUT,
    ))
    assert results["dry"] is None
    assert error_code(results["dry-bad"]) == KafkaError.INVALID_REPLICATION_FACTOR
    assert "dry" not in topic_partitions(admin)


def test_create_errors(admin: AdminClient) -> None:
    assert wait(admin.create_topics([NewTopic("taken", 1, 1), NewTopic("dot.ted", 1, 1)])) == {
        "taken": None, "dot.ted": None
    }
    results = wait(admin.create_topics(
        [
            NewTopic("taken", 1, 1),
            NewTopic("bad name!", 1, 1),
            NewTopic("triple", 1, 3),
            NewTopic("bad-value", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("bad-key", 1, 1, config={"no.such.config": "1"}),
            NewTopic("bad-policy", 1, 1, config={"cleanup.policy": "shred"}),
            NewTopic("elsewhere", 1, replica_assignment=[[7]]),
            NewTopic("dot_ted", 1, 1),
            NewTopic("fine", 1, 1),
        ],
        request_timeout=TIMEOUT,
    ))
    assert error_code(results["taken"]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_code(results["bad name!"]) == KafkaError.TOPIC_EXCEPTION
    assert "bad name!" in results["bad name!"].str()
    assert error_code(results["triple"]) == KafkaError.INVALID_REPLICATION_FACTOR
    assert "Replication factor: 3 larger than available brokers: 1." in results["triple"].str()
    assert error_code(results["bad-value"]) == KafkaError.INVALID_CONFIG
    assert "retention.ms" in results["bad-value"].str()
    assert error_code(results["bad-key"]) == KafkaError.INVALID_CONFIG
    assert "no.such.config" in results["bad-key"].str()
    assert error_code(results["bad-policy"]) == KafkaError.INVALID_CONFIG
    assert error_code(results["elsewhere"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert error_code(results["dot_ted"]) == KafkaError.TOPIC_EXCEPTION  # '.' and '_' collide
    assert "dot.ted" in results["dot_ted"].str()
    assert results["fine"] is None
    topics = topic_partitions(admin)
    assert "fine" in topics and "triple" not in topics and "bad-value" not in topics


def test_create_with_configs_then_describe(admin: AdminClient) -> None:
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact,delete"}
    assert wait(admin.create_topics([NewTopic("configured", 1, 1, config=configs)])) == {
        "configured": None
    }
    entries = describe_topic(admin, "configured")
    assert set(entries) == set(TOPIC_KEYS) - DEPRECATED  # Kafka 4 lists no removed key
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "compact,delete"
    assert entries["segment.bytes"].value == str(TOPIC_KEYS["segment.bytes"].default)
    assert entries["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not entries["segment.bytes"].is_read_only
    assert "retention.ms" in entries["retention.ms"].synonyms  # the topic override first


# --- DeleteTopics ------------------------------------------------------------------------------


def test_delete_topics(admin: AdminClient) -> None:
    wait(admin.create_topics([NewTopic("doomed", 2, 1), NewTopic("kept", 1, 1)]))
    results = wait(admin.delete_topics(["doomed", "never-was"], request_timeout=TIMEOUT))
    assert results["doomed"] is None
    assert error_code(results["never-was"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    topics = topic_partitions(admin)
    assert "doomed" not in topics and "kept" in topics
    # The name can be used again, with a fresh log.
    assert wait(admin.create_topics([NewTopic("doomed", 1, 1)])) == {"doomed": None}
    assert topic_partitions(admin)["doomed"] == 1


def test_delete_disabled(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path, delete_topic_enable=False) as b:
        admin = admin_for(b)
        wait(admin.create_topics([NewTopic("sticky", 1, 1)]))
        results = wait(admin.delete_topics(["sticky"], request_timeout=TIMEOUT))
        assert error_code(results["sticky"]) == KafkaError.TOPIC_DELETION_DISABLED
        assert "sticky" in topic_partitions(admin)


# --- CreatePartitions --------------------------------------------------------------------------


def test_create_partitions(admin: AdminClient) -> None:
    wait(admin.create_topics([NewTopic("growing", 1, 1)]))
    assert wait(admin.create_partitions([NewPartitions("growing", 4)])) == {"growing": None}
    assert topic_partitions(admin)["growing"] == 4
    results = wait(admin.create_partitions(
        [NewPartitions("growing", 6)], validate_only=True, request_timeout=TIMEOUT
    ))
    assert results == {"growing": None}
    assert topic_partitions(admin)["growing"] == 4
    shrink = wait(admin.create_partitions([NewPartitions("growing", 2)]))["growing"]
    assert error_code(shrink) == KafkaError.INVALID_PARTITIONS
    assert "4" in shrink.str()
    same = wait(admin.create_partitions([NewPartitions("growing", 4)]))["growing"]
    assert error_code(same) == KafkaError.INVALID_PARTITIONS
    unknown = wait(admin.create_partitions([NewPartitions("absent", 2)]))["absent"]
    assert error_code(unknown) == KafkaError.UNKNOWN_TOPIC_OR_PART
    elsewhere = wait(admin.create_partitions(
        [NewPartitions("growing", 5, replica_assignment=[[2]])]
    ))["growing"]
    assert error_code(elsewhere) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    here = wait(admin.create_partitions(
        [NewPartitions("growing", 5, replica_assignment=[[BROKER_ID]])]
    ))
    assert here == {"growing": None}
    assert topic_partitions(admin)["growing"] == 5


def test_new_partitions_take_writes(admin: AdminClient, broker: samsa.Broker) -> None:
    wait(admin.create_topics([NewTopic("spread", 1, 1)]))
    wait(admin.create_partitions([NewPartitions("spread", 3)]))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "message.timeout.ms": 10000})
    errors: list[Any] = []
    for partition in range(3):
        producer.produce("spread", b"x", partition=partition,
                         on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert errors == [None, None, None]


# --- DescribeConfigs ---------------------------------------------------------------------------


def test_describe_broker_and_static_sources(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path, num_partitions=3, log_retention_hours=2) as b:
        admin = admin_for(b)
        resource = ConfigResource(ResourceType.BROKER, str(BROKER_ID))
        entries = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)
        assert entries["num.partitions"].value == "3"
        assert entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert entries["num.partitions"].is_read_only
        assert entries["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        assert entries["broker.id"].value == str(BROKER_ID)
        assert entries["log.retention.hours"].value == "2"
        assert entries["log.retention.ms"].value == str(2 * 3600 * 1000)

        wait(admin.create_topics([NewTopic("defaults")]))
        assert topic_partitions(admin)["defaults"] == 3
        topic = describe_topic(admin, "defaults")
        assert topic["retention.ms"].value == str(2 * 3600 * 1000)
        assert topic["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert topic["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_describe_unknown_topic(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.TOPIC, "ghost")
    outcome = wait(admin.describe_configs([resource]))[resource]
    assert error_code(outcome) == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------


def test_alter_configs_replaces_overrides(admin: AdminClient) -> None:
    wait(admin.create_topics([NewTopic("altered", 1, 1, config={"retention.ms": "1000"})]))
    resource = ConfigResource(ResourceType.TOPIC, "altered",
                              set_config={"segment.bytes": "1048576"})
    assert wait(admin.alter_configs([resource])) == {resource: None}
    entries = describe_topic(admin, "altered")
    assert entries["segment.bytes"].value == "1048576"
    assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # AlterConfigs replaces the whole set: the retention.ms override is gone.
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    dry = ConfigResource(ResourceType.TOPIC, "altered", set_config={"retention.ms": "5"})
    assert wait(admin.alter_configs([dry], validate_only=True)) == {dry: None}
    retention = describe_topic(admin, "altered")["retention.ms"]
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value

    bad = ConfigResource(ResourceType.TOPIC, "altered", set_config={"segment.bytes": "1"})
    assert error_code(wait(admin.alter_configs([bad]))[bad]) == KafkaError.INVALID_CONFIG
    assert describe_topic(admin, "altered")["segment.bytes"].value == "1048576"

    ghost = ConfigResource(ResourceType.TOPIC, "ghost", set_config={"retention.ms": "5"})
    assert error_code(wait(admin.alter_configs([ghost]))[ghost]) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )


def test_alter_broker_configs_refused(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.BROKER, str(BROKER_ID),
                              set_config={"num.partitions": "2"})
    outcome = wait(admin.alter_configs([resource]))[resource]
    assert error_code(outcome) == KafkaError.INVALID_REQUEST
    incremental = ConfigResource(ResourceType.BROKER, str(BROKER_ID), incremental_configs=[
        ConfigEntry("num.partitions", "2", incremental_operation=AlterConfigOpType.SET)
    ])
    outcome = wait(admin.incremental_alter_configs([incremental]))[incremental]
    assert error_code(outcome) == KafkaError.INVALID_REQUEST


def incremental(name: str, *ops: tuple[str, str | None, AlterConfigOpType]) -> ConfigResource:
    return ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops
    ])


def test_incremental_alter_configs(admin: AdminClient) -> None:
    wait(admin.create_topics([NewTopic("inc", 1, 1, config={"retention.ms": "1000"})]))
    change = incremental(
        "inc",
        ("segment.ms", "60000", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
    )
    assert wait(admin.incremental_alter_configs([change])) == {change: None}
    entries = describe_topic(admin, "inc")
    assert entries["retention.ms"].value == "1000"  # untouched, unlike AlterConfigs
    assert entries["segment.ms"].value == "60000"
    assert entries["cleanup.policy"].value == "delete,compact"

    change = incremental(
        "inc",
        ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
        ("retention.ms", None, AlterConfigOpType.DELETE),
    )
    assert wait(admin.incremental_alter_configs([change])) == {change: None}
    entries = describe_topic(admin, "inc")
    assert entries["cleanup.policy"].value == "compact"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    not_a_list = incremental("inc", ("retention.ms", "5", AlterConfigOpType.APPEND))
    outcome = wait(admin.incremental_alter_configs([not_a_list]))[not_a_list]
    assert error_code(outcome) == KafkaError.INVALID_CONFIG
    unknown = incremental("inc", ("no.such.key", "5", AlterConfigOpType.SET))
    outcome = wait(admin.incremental_alter_configs([unknown]))[unknown]
    assert error_code(outcome) == KafkaError.INVALID_CONFIG
    assert outcome.str() == "Unknown topic config name: no.such.key"  # LogConfig.validateNames

    dry = incremental("inc", ("segment.ms", "120000", AlterConfigOpType.SET))
    assert wait(admin.incremental_alter_configs([dry], validate_only=True)) == {dry: None}
    assert describe_topic(admin, "inc")["segment.ms"].value == "60000"


def produce_one(producer: Producer, topic: str, value: bytes) -> Any:
    outcome: list[Any] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert len(outcome) == 1
    return outcome[0]


def test_max_message_bytes_takes_effect_on_a_running_log(
    admin: AdminClient, broker: samsa.Broker
) -> None:
    wait(admin.create_topics([NewTopic("limited", 1, 1)]))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "message.timeout.ms": 10000, "retries": 0})
    assert produce_one(producer, "limited", b"x" * 5000) is None

    change = incremental("limited", ("max.message.bytes", "1000", AlterConfigOpType.SET))
    assert wait(admin.incremental_alter_configs([change])) == {change: None}
    too_big = produce_one(producer, "limited", b"x" * 5000)
    assert error_code(too_big) == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(producer, "limited", b"x" * 100) is None

    reset = incremental("limited", ("max.message.bytes", None, AlterConfigOpType.DELETE))
    assert wait(admin.incremental_alter_configs([reset])) == {reset: None}
    assert produce_one(producer, "limited", b"x" * 5000) is None


def test_overrides_survive_restart(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path) as b:
        admin = admin_for(b)
        wait(admin.create_topics([NewTopic("durable", 2, 1, config={"retention.ms": "1234"})]))
    with samsa.Broker(tmp_path) as b:
        admin = admin_for(b)
        assert describe_topic(admin, "durable")["retention.ms"].value == "1234"
        assert topic_partitions(admin)["durable"] == 2
