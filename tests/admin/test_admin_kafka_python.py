"""Topic and config administration through kafka-python's KafkaAdminClient.

kafka-python 3 sends the newest versions samsa offers: CreateTopics v7 (so the response carries
num_partitions, replication_factor, the topic's configs and its id), DeleteTopics v6 (names or
topic ids), CreatePartitions v3, DescribeConfigs v4, IncrementalAlterConfigs v1 and, with
``incremental=False``, AlterConfigs v2.
"""

from __future__ import annotations

import socket
import struct
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

import samsa
from samsa.config import DEPRECATED, TOPIC_KEYS
from samsa.errors import ErrorCode
from samsa.protocol.build import build
from samsa.protocol.codec import encode_message
from samsa.server.modes import FIRST_GENERATED_BROKER_ID

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with importlib.resources' legacy API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

BROKER_ID = FIRST_GENERATED_BROKER_ID  # the embedded broker leaves broker.id to be generated
TIMEOUT_MS = 10000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data") as b:
        yield b


def admin_for(b: samsa.Broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=TIMEOUT_MS,
                            bootstrap_timeout_ms=TIMEOUT_MS)


@pytest.fixture
def admin(broker: samsa.Broker) -> Iterator[KafkaAdminClient]:
    client = admin_for(broker)
    try:
        yield client
    finally:
        client.close()


def codes(result: dict[str, Any], key: str = "topics") -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in result[key]}


def partition_counts(admin: KafkaAdminClient) -> dict[str, int]:
    return {t["name"]: len(t["partitions"]) for t in admin.describe_topics()}


def topic_configs(admin: KafkaAdminClient, name: str, **kwargs: Any) -> dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    return admin.describe_configs([resource], config_filter="all", **kwargs)["topic"][name]


def test_create_topics_v7_response(admin: KafkaAdminClient) -> None:
    result = admin.create_topics(
        {"metrics": {"num_partitions": 4, "configs": {"retention.ms": "60000"}},
         "plain": {}},
        timeout_ms=TIMEOUT_MS,
    )
    by_name = {t["name"]: t for t in result["topics"]}
    metrics = by_name["metrics"]
    assert metrics["error_code"] == 0
    assert metrics["num_partitions"] == 4 and metrics["replication_factor"] == 1
    assert set(metrics["configs"]) == set(TOPIC_KEYS) - DEPRECATED
    assert metrics["configs"]["retention.ms"]["value"] == "60000"
    assert metrics["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert metrics["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert by_name["plain"]["num_partitions"] == 1
    described = {t["name"]: t for t in admin.describe_topics(["metrics", "plain"])}
    assert str(described["metrics"]["topic_id"]) == str(metrics["topic_id"])
    assert partition_counts(admin)["metrics"] == 4


def test_create_validate_only_and_errors(admin: KafkaAdminClient) -> None:
    result = admin.create_topics({"dry": {"num_partitions": 2}}, validate_only=True)
    assert codes(result) == {"dry": 0}
    assert result["topics"][0]["num_partitions"] == 2
    assert "dry" not in partition_counts(admin)

    admin.create_topics({"taken": {}})
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({"taken": {}})
    result = admin.create_topics(
        {
            "taken": {},
            "bad/name": {},
            "zero": {"num_partitions": 0},
            "triple": {"replication_factor": 3},
            "bad-config": {"configs": {"segment.bytes": "10"}},
            "null-config": {"configs": {"retention.ms": None}},
            "assigned": {"assignments": {0: [BROKER_ID], 1: [BROKER_ID]}},
            "gap": {"assignments": {0: [BROKER_ID], 2: [BROKER_ID]}},
        },
        raise_errors=False,
    )
    assert codes(result) == {
        "taken": ErrorCode.topic_already_exists,
        "bad/name": ErrorCode.invalid_topic_exception,
        "zero": ErrorCode.invalid_partitions,
        "triple": ErrorCode.invalid_replication_factor,
        "bad-config": ErrorCode.invalid_config,
        "null-config": ErrorCode.invalid_config,
        "assigned": 0,
        "gap": ErrorCode.invalid_replica_assignment,
    }
    messages = {t["name"]: t["error_message"] for t in result["topics"]}
    assert messages["taken"] == "Topic 'taken' already exists."
    assert "segment.bytes" in messages["bad-config"]
    assert "3" in messages["triple"]
    failed = next(t for t in result["topics"] if t["name"] == "triple")
    assert failed["num_partitions"] == -1 and failed["topic_id"] is None
    assert partition_counts(admin)["assigned"] == 2


def test_duplicate_names_in_one_request(admin: KafkaAdminClient) -> None:
    result = admin.create_topics([NewTopic("twice", 1, 1), NewTopic("twice", 2, 1)],
                                 raise_errors=False)
    assert codes(result) == {"twice": ErrorCode.invalid_request}
    assert "twice" not in partition_counts(admin)


def test_delete_topics_by_name_and_id(admin: KafkaAdminClient) -> None:
    admin.create_topics({"by-name": {}, "by-id": {"num_partitions": 2}, "kept": {}})
    topic_id = uuid.UUID(str(admin.describe_topics(["by-id"])[0]["topic_id"]))
    result = admin.delete_topics(["by-name", topic_id])
    assert codes(result) == {"by-name": 0, "by-id": 0}
    ids = {t["name"]: t["topic_id"] for t in result["topics"]}
    assert str(ids["by-id"]) == str(topic_id)
    assert set(partition_counts(admin)) == {"kept"}

    missing = admin.delete_topics(["absent", uuid.uuid4()], raise_errors=False)
    assert sorted(t["error_code"] for t in missing["topics"]) == [
        ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id
    ]
    assert all(t["error_message"] for t in missing["topics"])


def test_delete_disabled(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path, delete_topic_enable=False) as b:
        admin = admin_for(b)
        try:
            admin.create_topics({"sticky": {}})
            result = admin.delete_topics(["sticky"], raise_errors=False)
            assert codes(result) == {"sticky": ErrorCode.topic_deletion_disabled}
            assert "sticky" in partition_counts(admin)
        finally:
            admin.close()


def test_create_partitions(admin: KafkaAdminClient) -> None:
    admin.create_topics({"growing": {"num_partitions": 2}})
    response = admin.create_partitions({"growing": 5})
    assert [(r.name, r.error_code) for r in response.results] == [("growing", 0)]
    assert partition_counts(admin)["growing"] == 5

    response = admin.create_partitions({"growing": 7}, validate_only=True)
    assert response.results[0].error_code == 0
    assert partition_counts(admin)["growing"] == 5

    response = admin.create_partitions({"growing": 3, "absent": 2}, raise_errors=False)
    errors = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert errors["growing"][0] == ErrorCode.invalid_partitions
    assert "5 partition(s)" in errors["growing"][1]
    assert errors["absent"][0] == ErrorCode.unknown_topic_or_partition

    response = admin.create_partitions(
        {"growing": {"count": 7, "assignments": [[BROKER_ID]]}}, raise_errors=False
    )
    assert response.results[0].error_code == ErrorCode.invalid_replica_assignment
    assert partition_counts(admin)["growing"] == 5


def test_describe_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics({"described": {"configs": {"cleanup.policy": "compact"}}})
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "described")])
    assert set(modified["topic"]["described"]) == {"cleanup.policy"}

    entries = topic_configs(admin, "described", include_synonyms=True)
    assert set(entries) == set(TOPIC_KEYS) - DEPRECATED  # Kafka 4 lists no removed key
    policy = entries["cleanup.policy"]
    assert policy["value"] == "compact"
    assert policy["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert policy["config_type"] == "LIST"
    assert [s["name"] for s in policy["synonyms"]] == ["cleanup.policy", "log.cleanup.policy"]
    assert policy["synonyms"][1]["source"] == "DEFAULT_CONFIG"
    assert entries["max.message.bytes"]["config_type"] == "INT"
    assert entries["retention.ms"]["config_type"] == "LONG"

    only = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "described", {"retention.ms": None})],
        config_filter="all",
    )["topic"]["described"]
    assert set(only) == {"retention.ms"}

    broker = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(BROKER_ID))], config_filter="all"
    )["broker"][str(BROKER_ID)]
    assert broker["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker["log.dirs"]["read_only"] is True
    assert broker["num.partitions"]["config_source"] == "DEFAULT_CONFIG"
    assert broker["auto.create.topics.enable"]["value"] == "true"
    assert broker["auto.create.topics.enable"]["config_type"] == "BOOLEAN"


def test_alter_configs(admin: KafkaAdminClient) -> None:
    admin.create_topics({"tuned": {"configs": {"retention.ms": "1000"}}})
    resource = ConfigResource(ConfigResourceType.TOPIC, "tuned", {"segment.ms": "60000"})
    assert admin.alter_configs([resource]) == {"topic": {"tuned": "OK"}}  # incremental
    entries = topic_configs(admin, "tuned")
    assert entries["segment.ms"]["value"] == "60000"
    assert entries["retention.ms"]["value"] == "1000"

    # Legacy AlterConfigs: kafka-python re-sends the other overrides itself.
    resource = ConfigResource(ConfigResourceType.TOPIC, "tuned", {"retention.ms": "2000"})
    assert admin.alter_configs([resource], incremental=False) == {"topic": {"tuned": "OK"}}
    entries = topic_configs(admin, "tuned")
    assert entries["retention.ms"]["value"] == "2000"
    assert entries["segment.ms"]["value"] == "60000"

    bad = ConfigResource(ConfigResourceType.TOPIC, "tuned", {"retention.ms": "-7"})
    outcome = admin.alter_configs([bad])["topic"]["tuned"]
    assert "InvalidConfigurationError" in outcome and "retention.ms" in outcome
    assert topic_configs(admin, "tuned")["retention.ms"]["value"] == "2000"


# --- protocol edges no client API reaches: raw kio frames -----------------------------------


def raw_request(b: samsa.Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """Send one request with exactly this version and return the decoded response."""
    schema = load_request_schema(api_key, version)
    header_schema = schema.__header_schema__
    header = header_schema(request_api_key=api_key, request_api_version=version,
                           correlation_id=7, client_id="raw")
    payload = encode_message(header) + encode_message(build(schema, body))
    with socket.create_connection(("127.0.0.1", b.port), timeout=TIMEOUT_MS / 1000) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        frame = b""
        size = None
        while size is None or len(frame) < size:
            chunk = sock.recv(65536)
            assert chunk, "connection closed before the whole response arrived"
            frame += chunk
            if size is None and len(frame) >= 4:
                size, frame = struct.unpack(">i", frame[:4])[0], frame[4:]
    response_schema = load_response_schema(api_key, version)
    response_header, used = entity_reader(response_schema.__header_schema__)(frame, 0)
    assert response_header.correlation_id == 7
    return entity_reader(response_schema)(frame, used)[0]


def test_raw_describe_configs_edges(broker: samsa.Broker, admin: KafkaAdminClient) -> None:
    admin.create_topics({"raw": {}})
    resources = [
        {"resource_type": 2, "resource_name": "raw", "configuration_keys": ["retention.ms"]},
        {"resource_type": 4, "resource_name": "", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "me", "configuration_keys": None},
        {"resource_type": 8, "resource_name": str(BROKER_ID), "configuration_keys": None},
        {"resource_type": 2, "resource_name": "ghost", "configuration_keys": None},
    ]
    response = raw_request(broker, 32, 4, {"resources": resources, "include_synonyms": True,
                                           "include_documentation": True})
    topic, default_broker, other, named, logger, ghost = response.results
    assert topic.error_code == 0
    (retention,) = topic.configs
    assert retention.name == "retention.ms" and retention.config_type == 5  # LONG
    assert retention.documentation == TOPIC_KEYS["retention.ms"].doc
    assert [s.name for s in retention.synonyms] == ["log.retention.hours"]
    assert default_broker.error_code == 0 and default_broker.configs == ()
    assert other.error_code == ErrorCode.invalid_request and "7" in other.error_message
    assert named.error_code == ErrorCode.invalid_request and "integer" in named.error_message
    assert logger.error_code == ErrorCode.invalid_request
    assert ghost.error_code == ErrorCode.unknown_topic_or_partition and ghost.error_message


def test_raw_topic_request_edges(broker: samsa.Broker, admin: KafkaAdminClient) -> None:
    admin.create_topics({"kept": {}, "third": {}})
    topic_id = uuid.UUID(str(admin.describe_topics(["kept"])[0]["topic_id"]))
    response = raw_request(broker, 20, 6, {"timeout": 1000, "topics": [
        {"name": "kept", "topic_id": topic_id},
        {"name": None, "topic_id": None},
        {"name": "twice", "topic_id": None},
        {"name": "twice", "topic_id": None},
    ]})
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("kept", ErrorCode.invalid_request),
        (None, ErrorCode.invalid_request),
        ("twice", ErrorCode.invalid_request),
    ]
    assert "kept" in partition_counts(admin)

    # v2: the response has no message, configs or id; a huge request is refused as a whole topic.
    response = raw_request(broker, 19, 2, {"timeout": 1000, "validate_only": False, "topics": [
        {"name": "huge", "num_partitions": 10001, "replication_factor": 1, "assignments": [],
         "configs": []},
        {"name": "v2", "num_partitions": 2, "replication_factor": -1, "assignments": [],
         "configs": [{"name": "retention.ms", "value": "100"}]},
    ]})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("huge", ErrorCode.policy_violation), ("v2", 0)
    ]
    assert partition_counts(admin)["v2"] == 2 and "huge" not in partition_counts(admin)

    response = raw_request(broker, 44, 1, {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "kept",
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}]},
        {"resource_type": 2, "resource_name": "kept", "configs": []},
        {"resource_type": 2, "resource_name": "v2", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1"},
            {"name": "retention.ms", "config_operation": 1, "value": None},
        ]},
        {"resource_type": 2, "resource_name": "third",
         "configs": [{"name": "cleanup.policy", "config_operation": 9, "value": "x"}]},
    ]})
    assert [r.error_code for r in response.responses] == [ErrorCode.invalid_request] * 4
    messages = [r.error_message for r in response.responses]
    assert messages[0] == messages[1] == "Each resource must appear at most once."
    assert messages[2] == "Error due to duplicate config keys"
    assert messages[3] == "Unknown operations type 9"
    assert topic_configs(admin, "kept")["retention.ms"]["config_source"] == "DEFAULT_CONFIG"


def test_raw_delete_disabled_old_version(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path, delete_topic_enable=False) as b:
        response = raw_request(b, 20, 1, {"timeout": 1000, "topic_names": ["a"]})
        assert [(r.name, r.error_code) for r in response.responses] == [
            ("a", ErrorCode.invalid_request)
        ]


def test_internal_topic_names(admin: KafkaAdminClient) -> None:
    """__consumer_offsets made through CreateTopics is internal; like Kafka's broker (the
    refusal is kafka-topics.sh's, client side), DeleteTopics does delete it."""
    admin.create_topics({"__consumer_offsets": {"num_partitions": 2}})
    (described,) = admin.describe_topics(["__consumer_offsets"])
    assert described["is_internal"] is True
    assert codes(admin.delete_topics(["__consumer_offsets"])) == {"__consumer_offsets": 0}
    assert "__consumer_offsets" not in partition_counts(admin)
