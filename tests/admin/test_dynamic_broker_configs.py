"""Dynamic broker configs on one broker: confluent-kafka's AdminClient (IncrementalAlterConfigs,
AlterConfigs, DescribeConfigs of BROKER resources), raw frames where librdkafka cannot go (the
cluster default's empty resource name, every synonym of an entry, malformed requests), and real
produces and connections to see a change take effect without a restart. Every refused change
(an unknown or non-dynamic key, a bad value, a thread count out of range, another broker's
id...) answers Kafka's error and leaves the configs, and the file that keeps them, as they
were."""

from __future__ import annotations

import re
import socket
import ssl
import threading
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
    NewTopic,
    ResourceType,
)
from waiting import wait_for

import samsa
from samsa.cluster.broker_configs import BROKER_CONFIGS_FILE
from samsa.config import BrokerConfig, ConfigError, check_dynamic
from samsa.server.modes import FIRST_GENERATED_BROKER_ID
from tests.kafka_frames import FrameClient
from tests.test_connection_limits import connect, served

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings(
    "ignore:alter_configs has been deprecated:DeprecationWarning")]

TIMEOUT = 10.0
BID = str(FIRST_GENERATED_BROKER_ID)  # the embedded broker's generated id
DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
SET, DELETE, APPEND = 0, 1, 2
BROKER = 4
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
INVALID_REQUEST, INVALID_CONFIG = 42, 40


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path, log_retention_hours=2) as b:
        yield b


@pytest.fixture
def admin(broker: samsa.Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                        "socket.timeout.ms": 10000})


def wait(futures: Mapping[Any, Future]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT)
        except KafkaException as exc:
            out[key] = exc.args[0]
    return out


def alter_broker(admin: AdminClient, *ops: tuple[str, str | None, AlterConfigOpType],
                 validate_only: bool = False) -> Any:
    resource = ConfigResource(ResourceType.BROKER, BID, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    return wait(admin.incremental_alter_configs([resource], validate_only=validate_only)
                )[resource]


def described(admin: AdminClient, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)


def frames(broker: samsa.Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    with FrameClient(broker.bootstrap_servers) as client:
        return client.request(api_key, version, body)


def describe_frames(broker: samsa.Broker, name: str, keys: list[str] | None = None) -> Any:
    response = frames(broker, DESCRIBE, 4, {"resources": [
        {"resource_type": BROKER, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": False})
    return response.results[0]


def entries(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def incremental_frames(broker: samsa.Broker, name: str, ops: list[tuple[str, str | None, int]],
                       validate_only: bool = False) -> tuple[int, str | None]:
    response = frames(broker, INCREMENTAL, 1, {"resources": [
        {"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, v, op in ops]}],
        "validate_only": validate_only})
    result = response.responses[0]
    return result.error_code, result.error_message


def produce_one(producer: Producer, topic: str, value: bytes) -> Any:
    outcome: list[Any] = []
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(TIMEOUT) == 0
    return outcome[0]


def code(outcome: Any) -> int | None:
    return outcome.code() if isinstance(outcome, KafkaError) else None


# --- taking effect --------------------------------------------------------------------------


def test_a_broker_default_reaches_the_topics_without_their_own(
    admin: AdminClient, broker: samsa.Broker
) -> None:
    wait(admin.create_topics([NewTopic("plain", 1, 1),
                              NewTopic("own", 1, 1, config={"max.message.bytes": "2000000"})]))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "message.timeout.ms": 10000, "retries": 0})
    assert produce_one(producer, "plain", b"x" * 50_000) is None

    assert alter_broker(admin, ("message.max.bytes", "10000", AlterConfigOpType.SET)) is None
    entry = described(admin, ResourceType.BROKER, BID)["message.max.bytes"]
    assert (entry.value, entry.source, entry.is_read_only) == (
        "10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    topic = described(admin, ResourceType.TOPIC, "plain")["max.message.bytes"]
    assert (topic.value, topic.source) == ("10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert code(produce_one(producer, "plain", b"x" * 50_000)) == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(producer, "own", b"x" * 50_000) is None  # its own override wins

    assert alter_broker(admin, ("message.max.bytes", None, AlterConfigOpType.DELETE)) is None
    assert produce_one(producer, "plain", b"x" * 50_000) is None
    entry = described(admin, ResourceType.BROKER, BID)["message.max.bytes"]
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value


def test_cluster_default_and_broker_value_with_kafkas_synonyms(broker: samsa.Broker) -> None:
    assert incremental_frames(broker, "", [("log.retention.ms", "7000", SET),
                                           ("log.retention.bytes", "999", SET)]) == (0, None)
    assert incremental_frames(broker, "", [("log.cleanup.policy", "compact", APPEND)]) == (
        0, None)
    assert incremental_frames(broker, BID, [("log.retention.ms", "5000", SET)]) == (0, None)

    default = describe_frames(broker, "")
    assert default.error_code == 0
    found = entries(default)
    assert sorted(found) == ["log.cleanup.policy", "log.retention.bytes", "log.retention.ms"]
    assert found["log.cleanup.policy"].value == "delete,compact"
    assert (found["log.retention.ms"].value, found["log.retention.ms"].config_source) == (
        "7000", DYNAMIC_DEFAULT)
    assert synonyms(found["log.retention.ms"]) == [("log.retention.ms", "7000", DYNAMIC_DEFAULT)]

    mine = entries(describe_frames(broker, BID, ["log.retention.ms", "log.retention.bytes",
                                                 "log.retention.hours"]))
    retention = mine["log.retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == (
        "5000", DYNAMIC_BROKER, False)
    assert synonyms(retention) == [
        ("log.retention.ms", "5000", DYNAMIC_BROKER), ("log.retention.ms", "7000", DYNAMIC_DEFAULT),
        ("log.retention.hours", "2", STATIC), ("log.retention.hours", "168", DEFAULT)]
    assert (mine["log.retention.bytes"].value, mine["log.retention.bytes"].config_source) == (
        "999", DYNAMIC_DEFAULT)
    assert synonyms(mine["log.retention.bytes"]) == [
        ("log.retention.bytes", "999", DYNAMIC_DEFAULT), ("log.retention.bytes", "-1", DEFAULT)]
    hours = mine["log.retention.hours"]  # not dynamic: read-only, its own value
    assert (hours.value, hours.config_source, hours.read_only) == ("2", STATIC, True)

    # a topic's retention.ms follows the broker's value, then the default once that goes
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    wait(admin.create_topics([NewTopic("kept", 1, 1)]))
    assert described(admin, ResourceType.TOPIC, "kept")["retention.ms"].value == "5000"
    assert broker.server.replicas.partition("kept", 0).log.config.retention_ms == 5000
    assert incremental_frames(broker, BID, [("log.retention.ms", None, DELETE)]) == (0, None)
    entry = described(admin, ResourceType.TOPIC, "kept")["retention.ms"]
    assert (entry.value, entry.source) == ("7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert broker.server.replicas.partition("kept", 0).log.config.retention_ms == 7000


def test_configs_survive_a_restart(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        assert alter_broker(admin, ("message.max.bytes", "10000", AlterConfigOpType.SET)) is None
        assert incremental_frames(b, "", [("log.retention.bytes", "4242", SET)]) == (0, None)
    with samsa.Broker(tmp_path) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        wait(admin.create_topics([NewTopic("after", 1, 1)]))
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0,
                             "message.timeout.ms": 10000, "retries": 0})
        assert code(produce_one(producer, "after", b"x" * 50_000)) == (
            KafkaError.MSG_SIZE_TOO_LARGE)
        mine = described(admin, ResourceType.BROKER, BID)
        assert mine["message.max.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert mine["log.retention.bytes"].value == "4242"
        assert mine["log.retention.bytes"].source == (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


def test_alter_configs_replaces_the_whole_level(admin: AdminClient) -> None:
    first = ConfigResource(ResourceType.BROKER, BID, set_config={
        "log.retention.ms": "5000", "leader.replication.throttled.rate": "100000"})
    assert wait(admin.alter_configs([first])) == {first: None}
    found = described(admin, ResourceType.BROKER, BID)
    assert found["leader.replication.throttled.rate"].value == "100000"
    second = ConfigResource(ResourceType.BROKER, BID, set_config={"log.retention.ms": "6000"})
    assert wait(admin.alter_configs([second])) == {second: None}
    found = described(admin, ResourceType.BROKER, BID)
    assert found["log.retention.ms"].value == "6000"
    assert "leader.replication.throttled.rate" not in found  # a dynamic-only key, unset


def test_validate_only_changes_nothing(admin: AdminClient, broker: samsa.Broker) -> None:
    assert alter_broker(admin, ("log.retention.ms", "5000", AlterConfigOpType.SET),
                        validate_only=True) is None
    entry = described(admin, ResourceType.BROKER, BID)["log.retention.ms"]
    assert entry.value == str(2 * 3600 * 1000)  # log.retention.hours=2, static
    assert not (broker.server.log_manager.dirs[0] / BROKER_CONFIGS_FILE).exists()
    refused = alter_broker(admin, ("log.retention.ms", "-7", AlterConfigOpType.SET),
                           validate_only=True)
    assert code(refused) == KafkaError.INVALID_REQUEST


def test_connection_quotas_apply_to_new_connections(
    admin: AdminClient, broker: samsa.Broker
) -> None:
    described(admin, ResourceType.BROKER, BID)  # the admin client's connections are open
    assert incremental_frames(broker, BID, [("max.connections.per.ip", "1", SET)]) == (0, None)
    with connect(broker) as refused:
        assert not served(refused)  # the admin client's connection holds the one slot
    assert alter_broker(admin, ("max.connections.per.ip", None, AlterConfigOpType.DELETE)
                        ) is None
    with connect(broker) as accepted:
        assert served(accepted)


def test_log_cleaner_threads_change_while_it_runs(admin: AdminClient,
                                                  broker: samsa.Broker) -> None:
    def cleaners() -> int:
        return sum(1 for t in threading.enumerate()
                   if t.name.startswith("log-cleaner-") and t.is_alive())

    before = cleaners()  # this broker's one, and any other broker's in this process
    assert alter_broker(admin, ("log.cleaner.threads", "2", AlterConfigOpType.SET)) is None
    wait_for(lambda: cleaners() == before + 1, timeout=10, what="a second cleaner thread")
    assert broker.server.cleaner is not None and broker.server.cleaner.thread_count == 2


# --- refused, and nothing changed -------------------------------------------------------------


BAD_CHANGES = [
    pytest.param(("foo", "1", SET), INVALID_REQUEST, "Unknown broker configuration 'foo'",
                 id="unknown key"),
    pytest.param(("broker.id", "5", SET), INVALID_REQUEST,
                 "Cannot update these configs dynamically: Set(broker.id)", id="read-only key"),
    pytest.param(("log.retention.hours", "1", SET), INVALID_REQUEST,
                 "Cannot update these configs dynamically: Set(log.retention.hours)",
                 id="less precise synonym"),
    pytest.param(("follower.replication.throttled.rate", "-1", SET), INVALID_REQUEST,
                 "Invalid value -1 for configuration follower.replication.throttled.rate",
                 id="negative rate"),
    pytest.param(("leader.replication.throttled.rate", "fast", SET), INVALID_REQUEST,
                 "expected a value of type long", id="malformed rate"),
    pytest.param(("log.retention.ms", "soon", SET), INVALID_REQUEST,
                 "expected a value of type long", id="malformed value"),
    pytest.param(("num.io.threads", "100", SET), INVALID_REQUEST,
                 "Invalid dynamic configuration", id="thread count over double"),
    pytest.param(("log.cleaner.threads", "5", SET), INVALID_REQUEST,
                 "Invalid dynamic configuration", id="cleaner threads over double"),
    pytest.param(("max.connections.per.ip.overrides", "nohost", SET), INVALID_REQUEST,
                 "Invalid dynamic configuration", id="malformed overrides"),
    pytest.param(("log.segment.bytes", "5", APPEND), INVALID_CONFIG,
                 "Can't APPEND to key log.segment.bytes because its type is not LIST.",
                 id="append to a non-list"),
    pytest.param(("log.retention.ms", None, SET), INVALID_REQUEST,
                 "Null value not supported for : log.retention.ms", id="null value"),
    pytest.param(("log.retention.ms", "1", 9), INVALID_REQUEST, "Unknown operations type 9",
                 id="unknown operation"),
]


@pytest.mark.parametrize(("bad", "error", "message"), BAD_CHANGES)
@pytest.mark.parametrize("level", ["broker", "default"])
def test_bad_changes_are_refused_and_change_nothing(
    broker: samsa.Broker, level: str, bad: tuple[str, str | None, int], error: int,
    message: str
) -> None:
    name = BID if level == "broker" else ""
    assert incremental_frames(broker, name, [("log.retention.ms", "5000", SET)]) == (0, None)
    stored = (broker.server.log_manager.dirs[0] / BROKER_CONFIGS_FILE).read_bytes()
    got, text = incremental_frames(broker, name, [("log.retention.bytes", "1", SET), bad])
    assert got == error, text
    assert text is not None and message in text
    assert broker.server.config.dynamic_props(level == "broker") == {"log.retention.ms": "5000"}
    assert (broker.server.log_manager.dirs[0] / BROKER_CONFIGS_FILE).read_bytes() == stored
    found = entries(describe_frames(broker, name))
    assert found["log.retention.ms"].value == "5000"
    assert found.get("log.retention.bytes") is None or found["log.retention.bytes"].value == "-1"


def test_malformed_requests_get_kafkas_errors(broker: samsa.Broker) -> None:
    assert incremental_frames(broker, "7", [("log.retention.ms", "1", SET)]) == (
        INVALID_REQUEST, f"Unexpected broker id, expected {BID}, but received 7")
    assert incremental_frames(broker, "seven", [("log.retention.ms", "1", SET)]) == (
        INVALID_REQUEST, "Node id must be an integer, but it is: seven")
    assert incremental_frames(broker, BID, [("log.retention.ms", "1", SET),
                                            ("log.retention.ms", "2", SET)]) == (
        INVALID_REQUEST, "Error due to duplicate config keys")
    legacy = frames(broker, ALTER, 1, {"resources": [
        {"resource_type": BROKER, "resource_name": BID,
         "configs": [{"name": "log.retention.ms", "value": None}]}], "validate_only": False})
    assert (legacy.responses[0].error_code, legacy.responses[0].error_message) == (
        INVALID_REQUEST, "Null value not supported for : log.retention.ms")
    twice = frames(broker, INCREMENTAL, 1, {"resources": [
        {"resource_type": BROKER, "resource_name": BID, "configs": []}] * 2,
        "validate_only": False})
    assert [(r.error_code, r.error_message) for r in twice.responses] == [
        (INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    other = describe_frames(broker, "7")
    assert (other.error_code, other.error_message) == (
        INVALID_REQUEST, f"Unexpected broker id, expected {BID} or empty string, but received 7")
    assert broker.server.config.dynamic_props(True) == {}
    assert broker.server.config.dynamic_props(False) == {}


def test_throttled_replicas_topic_configs_are_checked(admin: AdminClient) -> None:
    bad = NewTopic("bad-throttle", 1, 1, config={
        "leader.replication.throttled.replicas": "0:1,one:2"})
    outcome = wait(admin.create_topics([bad]))["bad-throttle"]
    assert code(outcome) == KafkaError.INVALID_CONFIG
    assert "must be the literal '*' or a list of replicas" in outcome.str()
    wait(admin.create_topics([NewTopic("throttled", 1, 1, config={
        "leader.replication.throttled.replicas": "0:1,1:2"})]))
    resource = ConfigResource(ResourceType.TOPIC, "throttled", incremental_configs=[
        ConfigEntry("follower.replication.throttled.replicas", "*",
                    incremental_operation=AlterConfigOpType.SET)])
    assert wait(admin.incremental_alter_configs([resource])) == {resource: None}
    found = described(admin, ResourceType.TOPIC, "throttled")
    assert found["leader.replication.throttled.replicas"].value == "0:1,1:2"
    assert found["follower.replication.throttled.replicas"].value == "*"


def test_dynamic_only_keys_are_refused_in_the_static_config() -> None:
    with pytest.raises(ConfigError, match="can only be set dynamically"):
        BrokerConfig({"leader.replication.throttled.rate": "1000"})


# --- a listener's TLS stores --------------------------------------------------------------------


def test_a_listeners_key_store_changes_for_new_connections(tmp_path: Path) -> None:
    from samsa.security.ca import LOCAL_HOSTS

    with samsa.Broker(tmp_path, security_protocol="SSL") as b:
        tls = b.tls
        assert tls is not None
        admin = AdminClient(b.client_config())
        node = str(b.server.broker_id)

        def alter(key: str, value: str) -> Any:
            resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
            return wait(admin.incremental_alter_configs([resource]))[resource]

        def served_certificate() -> int:
            context = ssl.create_default_context(cafile=str(tls.ca_file))
            host, port = b.bootstrap_servers.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as raw, \
                    context.wrap_socket(raw, server_hostname="localhost") as sock:
                certificate = sock.getpeercert()
                assert certificate is not None
                # hex, as OpenSSL prints it (zero-padded to whole bytes): compared as a number
                return int(str(certificate["serialNumber"]), 16)

        before = served_certificate()
        renewed = tls.ca.issue("CN=localhost", hosts=LOCAL_HOSTS)
        path = renewed.write_keystore(tmp_path / "renewed.pem")
        assert alter("listener.name.ssl.ssl.keystore.location", str(path)) is None
        assert served_certificate() == renewed.certificate.serial_number != before
        entry = described(admin, ResourceType.BROKER, node)[
            "listener.name.ssl.ssl.keystore.location"]
        assert (entry.value, entry.source) == (str(path), ConfigSource.DYNAMIC_BROKER_CONFIG.value)

        # refused, the renewed store still served: an unprefixed key, a store that does not
        # load, another subject (Kafka's DN check), a password (Kafka would need
        # password.encoder.secret), a key listeners cannot change
        other = tls.ca.issue("CN=elsewhere", hosts=LOCAL_HOSTS).write_keystore(
            tmp_path / "other.pem")
        for key, value, error, text in [
            ("ssl.keystore.location", str(path), KafkaError.INVALID_REQUEST,
             "These security configs can be dynamically updated only per-listener using the"
             " listener prefix: Set(ssl.keystore.location)"),
            ("listener.name.ssl.ssl.keystore.location", str(tmp_path / "missing.pem"),
             KafkaError.INVALID_REQUEST, "Invalid dynamic configuration"),
            ("listener.name.ssl.ssl.keystore.location", str(other),
             KafkaError.INVALID_REQUEST, "Invalid dynamic configuration"),
            ("listener.name.ssl.ssl.truststore.password", "secret",
             KafkaError.INVALID_CONFIG, "Password encoder secret not configured"),
            ("listener.name.ssl.ssl.principal.mapping.rules", "DEFAULT",
             KafkaError.INVALID_REQUEST, "Cannot update these configs dynamically"),
        ]:
            if key == "listener.name.ssl.ssl.truststore.password":  # a store it fits
                store = tls.ca.write_pkcs12_truststore(tmp_path / "trust.p12", value)
                resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in [
                        ("listener.name.ssl.ssl.truststore.type", "PKCS12"),
                        ("listener.name.ssl.ssl.truststore.location", str(store)),
                        (key, value)]])
                outcome = wait(admin.incremental_alter_configs([resource]))[resource]
            else:
                outcome = alter(key, value)
            assert code(outcome) == error, (key, outcome)
            assert text in outcome.str(), (key, outcome)
            assert served_certificate() == renewed.certificate.serial_number
        assert b.server.config.dynamic_props(True) == {
            "listener.name.ssl.ssl.keystore.location": str(path)}


def test_a_listeners_stores_are_per_broker_only() -> None:
    with pytest.raises(ConfigError, match=re.escape(
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: Set(listener.name.ssl.ssl.keystore.location)")):
        check_dynamic({"listener.name.ssl.ssl.keystore.location": "/k.pem"}, per_broker=False)
    assert check_dynamic({"listener.name.SSL.ssl.keystore.location": "/k.pem"},
                         per_broker=True) == {"listener.name.ssl.ssl.keystore.location": "/k.pem"}
