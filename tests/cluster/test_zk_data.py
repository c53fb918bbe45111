"""Kafka's ZooKeeper znode formats (kafka.zk.ZkData, Kafka 3.9): the exact bytes a Kafka 3.x
broker (Scala 2.13 build) writes, decoding of what Kafka 1.x-3.x wrote, round trips, and clear
errors on malformed data."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.zk import zk_data as zk
from samsa.zk.zk_data import (
    BrokerInfo,
    ConfigChangeNotification,
    ControllerInfo,
    Endpoint,
    EntityConfig,
    FeatureRange,
    PartitionState,
    ProducerIdBlock,
    ReplicaAssignment,
    TopicAssignment,
    ZkDataError,
)

TOPIC_ID = zk.kafka_uuid_from_string("jYQbHmaVS1K8R1QtVqSO4Q")
PLAINTEXT = Endpoint("PLAINTEXT", "PLAINTEXT", "localhost", 9092)


def same_json(encoded: bytes, expected: bytes) -> bool:
    """The same compact JSON as Kafka writes, up to key order (which means nothing there)."""
    return b" " not in encoded and json.loads(encoded) == json.loads(expected)

# --- paths -------------------------------------------------------------------------------------


def test_paths() -> None:
    assert zk.CLUSTER_ID_PATH == "/cluster/id"
    assert zk.CONTROLLER_PATH == "/controller"
    assert zk.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert zk.broker_path(3) == "/brokers/ids/3"
    assert zk.topic_path("orders") == "/brokers/topics/orders"
    assert zk.partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert zk.partition_path("orders", 2) == "/brokers/topics/orders/partitions/2"
    assert zk.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert zk.topic_config_path("orders") == "/config/topics/orders"
    assert zk.config_entity_path("users", "alice/clients/app") == "/config/users/alice/clients/app"
    assert zk.config_entity_type_path("brokers") == "/config/brokers"
    assert zk.config_change_create_path() == "/config/changes/config_change_"
    assert zk.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk.REASSIGN_PARTITIONS_PATH == "/admin/reassign_partitions"
    assert zk.PREFERRED_REPLICA_ELECTION_PATH == "/admin/preferred_replica_election"
    assert zk.BROKER_SEQID_PATH == "/brokers/seqid"
    assert zk.PRODUCER_ID_BLOCK_PATH == "/latest_producer_id_block"


@pytest.mark.parametrize("bad", ["", "a/b", ".", ".."])
def test_paths_refuse_bad_names(bad: str) -> None:
    with pytest.raises(ValueError):
        zk.topic_path(bad)
    with pytest.raises(ValueError):
        zk.delete_topic_path(bad)


def test_persistent_paths_are_kafkas() -> None:
    # ZkData.PersistentZkPaths in Kafka 3.9, ConfigType.ALL last
    assert zk.PERSISTENT_ZK_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
    )


# --- /cluster/id ------------------------------------------------------------------------------


def test_cluster_id() -> None:
    raw = b'{"version":"1","id":"Xy3kR5aBQ_2jZ0mYl1d9wA"}'
    assert zk.encode_cluster_id("Xy3kR5aBQ_2jZ0mYl1d9wA") == raw
    assert zk.decode_cluster_id(raw) == "Xy3kR5aBQ_2jZ0mYl1d9wA"
    assert zk.decode_cluster_id(b'{"version":1,"id":"abc"}') == "abc"
    assert zk.decode_cluster_id(b'{"id":"abc"}') == "abc"  # Kafka reads only "id"


# --- /controller, /controller_epoch -------------------------------------------------------------


def test_controller_v2_exact_bytes() -> None:
    raw = b'{"version":2,"brokerid":1,"timestamp":"1700000000123","kraftControllerEpoch":-1}'
    c = ControllerInfo(1, 1700000000123)
    assert zk.encode_controller(c) == raw
    assert zk.decode_controller(raw) == c


def test_controller_v1() -> None:
    raw = b'{"version":1,"brokerid":2,"timestamp":"1589452322290"}'
    c = zk.decode_controller(raw)
    assert c == ControllerInfo(2, 1589452322290, None, 1)
    assert zk.encode_controller(c) == raw


def test_controller_timestamp_defaults_to_now() -> None:
    c = zk.decode_controller(zk.encode_controller(ControllerInfo(4)))
    assert c.broker_id == 4 and c.timestamp_ms is not None and c.timestamp_ms > 1_600_000_000_000


def test_controller_epoch() -> None:
    assert zk.encode_controller_epoch(zk.INITIAL_CONTROLLER_EPOCH) == b"0"
    assert zk.encode_controller_epoch(17) == b"17"
    assert zk.decode_controller_epoch(b"17") == 17
    assert zk.decode_controller_epoch(b"+3") == 3  # Integer.parseInt takes a sign
    assert zk.decode_controller_epoch(b"-" + b"0" * 30 + b"1") == -1  # and leading zeros


# --- /brokers/ids/<id> ----------------------------------------------------------------------


def test_broker_v5_exact_bytes() -> None:
    # what a Kafka 3.x ZooKeeper-mode broker with listeners=PLAINTEXT://localhost:9092 writes
    raw = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
           b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
           b'"host":"localhost","version":5,"timestamp":"1700000000123"}')
    b = BrokerInfo(0, (PLAINTEXT,), timestamp_ms=1700000000123)
    assert same_json(zk.encode_broker_info(b), raw)
    assert zk.decode_broker_info(0, raw) == b


def test_broker_v5_rack_and_listeners() -> None:
    raw = (b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT",'
           b'"EXTERNAL":"SASL_SSL"},"endpoints":["INTERNAL://kafka-1.internal:19092",'
           b'"EXTERNAL://kafka-1.example.com:9093"],"rack":"eu-west-1a","jmx_port":9999,'
           b'"port":19092,"host":"kafka-1.internal","version":5,"timestamp":"1700000000123"}')
    b = BrokerInfo(
        1,
        (Endpoint("INTERNAL", "PLAINTEXT", "kafka-1.internal", 19092),
         Endpoint("EXTERNAL", "SASL_SSL", "kafka-1.example.com", 9093)),
        rack="eu-west-1a", jmx_port=9999, timestamp_ms=1700000000123)
    assert same_json(zk.encode_broker_info(b), raw)
    assert zk.decode_broker_info(1, raw) == b
    assert b.plaintext_endpoint() == b.endpoints[0]


def test_broker_without_plaintext_endpoint_has_null_host() -> None:
    b = BrokerInfo(2, (Endpoint("SSL", "SSL", "h", 9093),), timestamp_ms=1)
    doc = json.loads(zk.encode_broker_info(b))
    assert doc["host"] is None and doc["port"] == -1
    assert "rack" not in doc
    assert zk.decode_broker_info(2, zk.encode_broker_info(b)) == b


def test_broker_ipv6_and_wildcard_endpoints() -> None:
    b = BrokerInfo(3, (Endpoint("PLAINTEXT", "PLAINTEXT", "::1", 9092),
                       Endpoint("SSL", "SSL", None, 9093)), timestamp_ms=5)
    doc = json.loads(zk.encode_broker_info(b))
    assert doc["endpoints"] == ["PLAINTEXT://[::1]:9092", "SSL://:9093"]
    assert doc["host"] == "::1"
    assert zk.decode_broker_info(3, zk.encode_broker_info(b)) == b


def test_broker_v5_features() -> None:
    raw = (b'{"features":{"metadata.version":{"min_version":1,"max_version":7}},'
           b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
           b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
           b'"host":"localhost","version":5,"timestamp":"1700000000123"}')
    b = zk.decode_broker_info(0, raw)
    assert b.features == {"metadata.version": FeatureRange(1, 7)}
    assert same_json(zk.encode_broker_info(b), raw)
    null_features = raw.replace(b'{"metadata.version":{"min_version":1,"max_version":7}}',
                                b"null")
    assert zk.decode_broker_info(0, null_features).features == {}


def test_broker_v4_from_kafka_2() -> None:
    # a Kafka 2.x (Scala 2.12) registration: other key order, no features
    raw = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
           b'"endpoints":["PLAINTEXT://kafka1:9092","SSL://kafka1:9093"],"rack":null,'
           b'"jmx_port":9999,"host":"kafka1","timestamp":"1589452322290","port":9092,'
           b'"version":4}')
    b = zk.decode_broker_info(5, raw)
    assert b == BrokerInfo(5, (Endpoint("PLAINTEXT", "PLAINTEXT", "kafka1", 9092),
                               Endpoint("SSL", "SSL", "kafka1", 9093)),
                           None, 9999, {}, 4, 1589452322290)
    again = zk.decode_broker_info(5, zk.encode_broker_info(b))
    assert again == b
    assert "features" not in json.loads(zk.encode_broker_info(b))


def test_broker_v3_and_v2_without_protocol_map() -> None:
    v3 = (b'{"jmx_port":-1,"timestamp":"1500000000000","endpoints":["SASL_PLAINTEXT://h:9092",'
          b'"SSL://h:9093"],"rack":"r1","host":null,"version":3,"port":-1}')
    b = zk.decode_broker_info(1, v3)
    assert b.endpoints == (Endpoint("SASL_PLAINTEXT", "SASL_PLAINTEXT", "h", 9092),
                           Endpoint("SSL", "SSL", "h", 9093))
    assert b.rack == "r1" and b.version == 3
    v2 = b'{"jmx_port":-1,"timestamp":"1","endpoints":["plaintext://h:9092"],"host":"h",' \
         b'"version":2,"port":9092}'
    b2 = zk.decode_broker_info(1, v2)
    assert b2.endpoints == (Endpoint("PLAINTEXT", "PLAINTEXT", "h", 9092),)  # name normalised
    assert "rack" not in json.loads(zk.encode_broker_info(b2))
    assert zk.decode_broker_info(1, zk.encode_broker_info(b2)) == b2


def test_broker_v1() -> None:
    raw = b'{"jmx_port":-1,"timestamp":"1400000000000","host":"old","version":1,"port":9092}'
    b = zk.decode_broker_info(0, raw)
    assert b.endpoints == (Endpoint("PLAINTEXT", "PLAINTEXT", "old", 9092),)
    assert b.version == 1


def test_broker_encode_refuses_bad_values() -> None:
    with pytest.raises(ValueError):
        zk.encode_broker_info(BrokerInfo(0, ()))
    with pytest.raises(ValueError):
        zk.encode_broker_info(BrokerInfo(0, (Endpoint("X", "TLS", "h", 1),)))
    with pytest.raises(ValueError):
        zk.encode_broker_info(BrokerInfo(0, (PLAINTEXT,), version=1))


# --- /brokers/topics/<topic> ----------------------------------------------------------------


def test_topic_v3_exact_bytes() -> None:
    raw = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},'
           b'"topic_id":"jYQbHmaVS1K8R1QtVqSO4Q","adding_replicas":{},"removing_replicas":{},'
           b'"version":3}')
    t = TopicAssignment({0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1)),
                         2: ReplicaAssignment((3, 1, 2))}, TOPIC_ID)
    assert same_json(zk.encode_topic_assignment(t), raw)
    assert zk.decode_topic_assignment(raw) == t


def test_topic_many_partitions() -> None:
    t = TopicAssignment({p: ReplicaAssignment((p % 3,)) for p in range(40)}, TOPIC_ID)
    raw = zk.encode_topic_assignment(t)
    assert zk.decode_topic_assignment(raw) == t
    keys = list(json.loads(raw)["partitions"])
    assert sorted(keys, key=int) == [str(p) for p in range(40)]


def test_topic_reassignment_in_progress() -> None:
    raw = (b'{"partitions":{"0":[1,2,4],"1":[2,3]},"topic_id":"jYQbHmaVS1K8R1QtVqSO4Q",'
           b'"adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]},"version":3}')
    t = zk.decode_topic_assignment(raw)
    assert t.partitions == {0: ReplicaAssignment((1, 2, 4), (4,), (1,)),
                            1: ReplicaAssignment((2, 3))}
    assert same_json(zk.encode_topic_assignment(t), raw)


def test_topic_older_versions() -> None:
    v1 = b'{"version":1,"partitions":{"1":[2,1],"0":[1,2]}}'
    t1 = zk.decode_topic_assignment(v1)
    assert t1 == TopicAssignment({1: ReplicaAssignment((2, 1)), 0: ReplicaAssignment((1, 2))},
                                 None, 1)
    assert zk.decode_topic_assignment(zk.encode_topic_assignment(t1)) == t1
    v2 = (b'{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},'
          b'"removing_replicas":{}}')
    t2 = zk.decode_topic_assignment(v2)
    assert t2 == TopicAssignment({0: ReplicaAssignment((1, 2))}, None, 2)
    assert zk.decode_topic_assignment(zk.encode_topic_assignment(t2)) == t2
    # written by Kafka 2.8+ without an id yet (topic created before the upgrade)
    v3 = (b'{"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{},'
          b'"version":3}')
    assert zk.decode_topic_assignment(v3) == TopicAssignment({0: ReplicaAssignment((1,))})
    with pytest.raises(ValueError):
        zk.encode_topic_assignment(TopicAssignment({0: ReplicaAssignment((1,))}, TOPIC_ID, 2))


def test_kafka_uuid() -> None:
    u = uuid.uuid4()
    s = zk.kafka_uuid_to_string(u)
    assert len(s) == 22 and "=" not in s
    assert zk.kafka_uuid_from_string(s) == u
    assert zk.kafka_uuid_from_string(s + "==") == u
    assert zk.kafka_uuid_to_string(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    for bad in ["", "abc", "jYQbHmaVS1K8R1QtVqSO4Q" * 2, "jYQbHmaVS1K8R1QtVqSO4!",
                "jYQb+maVS1K8R1QtVqSO4Q", "jYQb/maVS1K8R1QtVqSO4Q", "jYQbHmaVS1K8R1QtVqSO4Q="]:
        with pytest.raises(ValueError):
            zk.kafka_uuid_from_string(bad)


# --- partition state -------------------------------------------------------------------------


def test_partition_state_exact_bytes() -> None:
    raw = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}'
    s = PartitionState(leader=1, leader_epoch=7, isr=(1, 2, 3), controller_epoch=3)
    assert same_json(zk.encode_partition_state(s), raw)
    assert zk.decode_partition_state(raw) == s


def test_partition_state_recovering_and_no_leader() -> None:
    s = PartitionState(-1, 8, (), 4, zk.LEADER_RECOVERY_RECOVERING)
    raw = zk.encode_partition_state(s)
    assert same_json(raw, b'{"controller_epoch":4,"leader":-1,"version":1,'
                          b'"leader_recovery_state":1,"leader_epoch":8,"isr":[]}')
    assert zk.decode_partition_state(raw) == s
    recovered = b'{"controller_epoch":4,"leader":2,"version":1,"leader_recovery_state":0,' \
                b'"leader_epoch":8,"isr":[2]}'
    assert zk.decode_partition_state(recovered).leader_recovery_state == 0


# --- config -----------------------------------------------------------------------------------


def test_topic_config() -> None:
    raw = b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"86400000"}}'
    c = zk.decode_entity_config(raw)
    assert c == EntityConfig({"cleanup.policy": "compact", "retention.ms": "86400000"})
    assert same_json(zk.encode_entity_config(c), raw)
    assert same_json(zk.encode_entity_config(EntityConfig({"retention.ms": "86400000",
                                                           "cleanup.policy": "compact"})), raw)
    assert zk.encode_entity_config(EntityConfig()) == b'{"version":1,"config":{}}'
    assert zk.decode_entity_config(b"") == EntityConfig({})
    assert zk.decode_entity_config(None) == EntityConfig({})


def test_config_change_notifications() -> None:
    raw = b'{"version":2,"entity_path":"topics/orders"}'
    n = zk.decode_config_change(raw)
    assert n == ConfigChangeNotification("topics/orders")
    assert (n.entity_type, n.entity_name) == ("topics", "orders")
    assert zk.encode_config_change(n) == raw
    nested = zk.decode_config_change(b'{"version":2,"entity_path":"users/alice/clients/app"}')
    assert (nested.entity_type, nested.entity_name) == ("users", "alice/clients/app")
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"orders"}'
    old = zk.decode_config_change(v1)
    assert old == ConfigChangeNotification("topics/orders", 1)
    assert zk.encode_config_change(old) == v1


# --- admin, notifications, producer ids ------------------------------------------------------


def test_delete_topic_has_no_data() -> None:
    assert zk.encode_delete_topic() == b""


def test_producer_id_block() -> None:
    raw = b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    b = ProducerIdBlock(1, 0, 999)
    assert zk.encode_producer_id_block(b) == raw
    assert zk.decode_producer_id_block(raw) == b
    assert b.size == zk.PRODUCER_ID_BLOCK_SIZE
    assert b.next_block(2) == ProducerIdBlock(2, 1000, 1999)
    assert zk.decode_producer_id_block(b"") is None  # created empty at broker startup
    assert zk.decode_producer_id_block(None) is None
    big = ProducerIdBlock(3, 9_000_000_000_000, 9_000_000_000_999)
    assert zk.decode_producer_id_block(zk.encode_producer_id_block(big)) == big


def test_log_dir_event_notification() -> None:
    """Kafka's LogDirEventNotificationSequenceZNode: a sequential node per failure event."""
    raw = b'{"version":1,"broker":2,"event":1}'
    assert zk.encode_log_dir_event_notification(2) == raw
    assert zk.decode_log_dir_event_notification(raw) == 2
    assert zk.log_dir_event_create_path() == "/log_dir_event_notification/log_dir_event_"
    assert (zk.log_dir_event_path("log_dir_event_0000000003")
            == "/log_dir_event_notification/log_dir_event_0000000003")
    with pytest.raises(ZkDataError, match="broker"):
        zk.decode_log_dir_event_notification(b'{"version":1,"event":1}')


# --- round trips -------------------------------------------------------------------------------

_ids = st.integers(min_value=0, max_value=2**31 - 1)
_i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                 max_size=20)
_hosts = st.one_of(st.none(), st.from_regex(r"[a-z0-9.\-]{1,20}", fullmatch=True),
                   st.sampled_from(["::1", "fe80::1%eth0", "10.0.0.1"]))
_endpoints = st.builds(Endpoint, st.from_regex(r"[A-Z][A-Z_0-9]{0,10}", fullmatch=True),
                       st.sampled_from(zk.SECURITY_PROTOCOLS), _hosts,
                       st.integers(min_value=0, max_value=65535))


@st.composite
def _brokers(draw: Any) -> BrokerInfo:
    endpoints = draw(st.lists(_endpoints, min_size=1, max_size=4,
                              unique_by=lambda e: e.listener_name))
    features = draw(st.dictionaries(_names, st.builds(
        lambda a, b: FeatureRange(min(a, b), max(a, b)),
        st.integers(0, 0x7FFF), st.integers(0, 0x7FFF)), max_size=3))
    return BrokerInfo(draw(_ids), tuple(endpoints), draw(st.one_of(st.none(), _names)),
                      draw(_i32), features, 5, draw(st.integers(0, 2**62)))


@given(_brokers())
def test_broker_round_trip(b: BrokerInfo) -> None:
    assert zk.decode_broker_info(b.broker_id, zk.encode_broker_info(b)) == b


@given(st.dictionaries(st.integers(0, 5000), st.builds(
    ReplicaAssignment, st.lists(_ids, max_size=5).map(tuple), st.lists(_ids, max_size=2).map(tuple),
    st.lists(_ids, max_size=2).map(tuple)), max_size=30), st.one_of(st.none(), st.uuids()))
def test_topic_round_trip(parts: dict[int, ReplicaAssignment], topic_id: uuid.UUID | None) -> None:
    t = TopicAssignment(parts, topic_id)
    assert zk.decode_topic_assignment(zk.encode_topic_assignment(t)) == t


@given(st.builds(PartitionState, _i32, _i32, st.lists(_ids, max_size=6).map(tuple), _i32,
                 st.sampled_from([0, 1])))
def test_partition_state_round_trip(s: PartitionState) -> None:
    assert zk.decode_partition_state(zk.encode_partition_state(s)) == s


@given(st.dictionaries(_names, st.text(max_size=30), max_size=40))
def test_config_round_trip(config: dict[str, str]) -> None:
    assert zk.decode_entity_config(zk.encode_entity_config(EntityConfig(config))).config == config


@given(st.builds(ControllerInfo, _i32, st.integers(0, 2**62), _i32, st.just(2)))
def test_controller_round_trip(c: ControllerInfo) -> None:
    assert zk.decode_controller(zk.encode_controller(c)) == c


@given(_i32)
def test_controller_epoch_round_trip(epoch: int) -> None:
    assert zk.decode_controller_epoch(zk.encode_controller_epoch(epoch)) == epoch


# --- malformed data ---------------------------------------------------------------------------

Decoder = Callable[[bytes], Any]
DECODERS: dict[str, Decoder] = {
    "cluster_id": zk.decode_cluster_id,
    "controller": zk.decode_controller,
    "controller_epoch": zk.decode_controller_epoch,
    "broker": lambda d: zk.decode_broker_info(1, d),
    "topic": lambda d: zk.decode_topic_assignment(d, path="/brokers/topics/orders"),
    "state": zk.decode_partition_state,
    "config": zk.decode_entity_config,
    "config_change": zk.decode_config_change,
    "producer_id_block": zk.decode_producer_id_block,
}

BROKER = json.loads(zk.encode_broker_info(BrokerInfo(1, (PLAINTEXT,), timestamp_ms=1)))


def _broker(**changes: Any) -> bytes:
    doc = {**BROKER, **changes}
    return json.dumps({k: v for k, v in doc.items() if v is not _DROP}).encode()


_DROP = object()

MALFORMED: list[tuple[str, bytes, str]] = [
    # (decoder, data, words the message must contain)
    ("cluster_id", b"", "/cluster/id: no data"),
    ("cluster_id", b'{"version":"1"}', "field 'id': missing"),
    ("cluster_id", b'{"version":"2","id":"x"}', "unsupported version"),
    ("cluster_id", b'{"version":"1","id":7}', "field 'id': expected a string"),
    ("cluster_id", b'["x"]', "expected a JSON object"),
    ("controller", b'{"version":2,"timestamp":"1"}', "/controller: field 'brokerid': missing"),
    ("controller", b'{"version":2,"brokerid":"1"}', "field 'brokerid': expected an integer"),
    ("controller", b'{"version":2,"brokerid":1.0}', "field 'brokerid': expected an integer"),
    ("controller", b'{"version":2,"brokerid":true}', "field 'brokerid': expected an integer"),
    ("controller", b'{"version":2,"brokerid":2147483648}', "out of range"),
    ("controller", b'{"version":3,"brokerid":1}', "unsupported version 3"),
    ("controller", b'{"brokerid":1}', "field 'version': missing"),
    ("controller", b'{"version":2,"brokerid":1,"timestamp":1}', "field 'timestamp'"),
    ("controller", b'{"version":2,"brokerid":1,"timestamp":"x"}', "decimal integer"),
    ("controller", b'{"version":2,"brokerid":1,"kraftControllerEpoch":null}',
     "field 'kraftControllerEpoch'"),
    ("controller", b'{"version":2,"brokerid":NaN}', "not JSON"),
    ("controller", b'{"version":2,', "not JSON"),
    ("controller", b'\xff\xfe{}', "not UTF-8"),
    ("controller_epoch", b"", "/controller_epoch"),
    ("controller_epoch", b" 3", "decimal integer"),
    ("controller_epoch", b"3.0", "decimal integer"),
    ("controller_epoch", b"\xd9\xa3", "/controller_epoch"),  # Arabic-Indic 3: int() takes it
    ("controller_epoch", b"99999999999", "out of range"),
    ("controller_epoch", b"1" * 5000, "out of range"),
    ("broker", _broker(version=6), "/brokers/ids/1: field 'version': unsupported version 6"),
    ("broker", _broker(jmx_port=_DROP), "field 'jmx_port': missing"),
    ("broker", _broker(endpoints=_DROP), "field 'endpoints': missing"),
    ("broker", _broker(endpoints="PLAINTEXT://h:1"), "field 'endpoints': expected a JSON array"),
    ("broker", _broker(endpoints=[1]), "field 'endpoints[0]': expected a string"),
    ("broker", _broker(endpoints=["h:9092"]), "field 'endpoints[0]': cannot parse"),
    ("broker", _broker(endpoints=["PLAINTEXT://h:99999999999"]), "out of range"),
    ("broker", _broker(endpoints=["SSL://h:9093"]), "no security protocol defined for listener"),
    ("broker", _broker(listener_security_protocol_map={"PLAINTEXT": "TLS"}),
     "field 'listener_security_protocol_map.PLAINTEXT': unknown security protocol"),
    ("broker", _broker(listener_security_protocol_map=[]),
     "field 'listener_security_protocol_map': expected a JSON object"),
    ("broker", _broker(rack=3), "field 'rack': expected a string or null"),
    ("broker", _broker(features={"f": {"min_version": 1}}),
     "field 'features.f.max_version': missing"),
    ("broker", _broker(features={"f": {"min_version": 3, "max_version": 1}}),
     "bad version range"),
    ("broker", _broker(features={"f": 1}), "field 'features.f': expected a JSON object"),
    ("broker", _broker(host=1), "field 'host'"),
    ("broker", json.dumps({"version": 1, "jmx_port": -1, "port": 1}).encode(),
     "field 'host': missing"),
    ("topic", b'{"version":3}', "/brokers/topics/orders: field 'partitions': missing"),
    ("topic", b'{"version":4,"partitions":{}}', "unsupported version 4"),
    ("topic", b'{"version":3,"partitions":{"x":[1]}}', "partition id 'x' is not an integer"),
    ("topic", b'{"version":3,"partitions":{"-1":[1]}}', "out of range"),
    ("topic", b'{"version":3,"partitions":{"0":[1],"00":[1]}}', "appears twice"),
    ("topic", b'{"version":3,"partitions":{"0":1}}', "field 'partitions.0'"),
    ("topic", b'{"version":3,"partitions":{"0":["1"]}}', "field 'partitions.0[0]'"),
    ("topic", b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"1":[2]}}',
     "not in partitions"),
    ("topic", b'{"version":3,"partitions":{"0":[1]},"removing_replicas":[]}',
     "field 'removing_replicas': expected a JSON object"),
    ("topic", b'{"version":3,"partitions":{},"topic_id":"abc"}', "field 'topic_id'"),
    ("topic", b'{"version":3,"partitions":{},"topic_id":null}', "field 'topic_id'"),
    ("state", b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1]}',
     "field 'controller_epoch': missing"),
    ("state", b'{"version":1,"leader":1,"leader_epoch":0,"isr":null,"controller_epoch":1}',
     "field 'isr'"),
    ("state", b'{"version":1,"leader":1,"leader_epoch":0,"isr":[],"controller_epoch":1,'
              b'"leader_recovery_state":2}', "unknown leader recovery state 2"),
    ("state", b'{"version":2,"leader":1,"leader_epoch":0,"isr":[],"controller_epoch":1}',
     "unsupported version 2"),
    ("config", b'{"version":1,"config":{"retention.ms":86400000}}',
     "field 'config.retention.ms': expected a string"),
    ("config", b'{"version":1}', "field 'config': missing"),
    ("config_change", b'{"version":2,"entity_path":"orders"}', "field 'entity_path'"),
    ("config_change", b'{"version":1,"entity_type":"users","entity_name":"a"}',
     "field 'entity_type'"),
    ("config_change", b'{"version":3,"entity_path":"topics/t"}', "unsupported version 3"),
    ("producer_id_block", b'{"version":1,"broker":1,"block_start":0,"block_end":"999"}',
     "field 'block_start': expected a string"),
    ("producer_id_block", b'{"version":1,"broker":1,"block_start":"1000","block_end":"999"}',
     "bad block"),
    ("producer_id_block", b'{"version":1,"broker":1,"block_start":"0",'
                          b'"block_end":"99999999999999999999"}', "out of range"),
]


@pytest.mark.parametrize(("decoder", "data", "words"), MALFORMED)
def test_malformed(decoder: str, data: bytes, words: str) -> None:
    with pytest.raises(ZkDataError) as info:
        DECODERS[decoder](data)
    assert isinstance(info.value, ValueError)
    assert words in str(info.value), str(info.value)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["version", "id", "brokerid", "timestamp", "endpoints", "jmx_port",
                         "host", "port", "rack", "features", "listener_security_protocol_map",
                         "partitions", "adding_replicas", "removing_replicas", "topic_id",
                         "leader", "leader_epoch", "isr", "controller_epoch", "config",
                         "entity_path", "entity_type", "entity_name", "topic", "partition",
                         "replicas", "broker", "block_start", "block_end", "event", "0"]),
        inner, max_size=8),
    max_leaves=20)


@settings(max_examples=300)
@given(st.sampled_from(sorted(DECODERS)), _json, st.sampled_from([1, 2, 3, 5]))
def test_decoders_raise_only_value_errors(decoder: str, doc: Any, version: int) -> None:
    if isinstance(doc, dict) and "version" not in doc:
        doc = {**doc, "version": version}
    try:
        DECODERS[decoder](json.dumps(doc).encode())
    except ZkDataError:
        pass


@given(st.sampled_from(sorted(DECODERS)), st.binary(max_size=40))
def test_decoders_on_random_bytes(decoder: str, data: bytes) -> None:
    try:
        DECODERS[decoder](data)
    except ZkDataError:
        pass


def test_deeply_nested_json_is_a_clear_error() -> None:
    with pytest.raises(ZkDataError, match="not JSON"):
        zk.decode_controller(b"[" * 100_000 + b"]" * 100_000)
