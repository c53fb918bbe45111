"""Dynamic broker configs in cluster mode, two in-process brokers on a real ZooKeeper: the
cluster default set through one broker (``samsa configs --broker-defaults``) reaches the other
and takes effect there (a produce it leads is refused over the new message.max.bytes); one
broker's value stays its own; both live in Kafka's znodes (``/config/brokers/<default>``,
``/config/brokers/<id>``, with ``/config/changes`` notifications), so a change written into
ZooKeeper as ``kafka-configs --zookeeper`` writes it is followed too, and a restarted broker
starts with them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kazoo.client import KazooClient
from waiting import wait_for

import samsa
from samsa.config import LONG_MAX
from samsa.tools.zookeeper_server import ZooKeeperServer
from tests.kafka_frames import FrameClient
from tests.tools import ok
from tests.tools import samsa as run_samsa

pytestmark = pytest.mark.timeout(120)

BROKER_CONFIG = {"zookeeper.session.timeout.ms": 6000, "replica.fetch.wait.max.ms": 100,
                 "replica.fetch.backoff.ms": 200}


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
        yield server


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("brokers")


def start(root: Path, zookeeper: ZooKeeperServer, broker_id: int) -> samsa.Broker:
    broker = samsa.Broker(root / f"b{broker_id}", config={
        "broker.id": broker_id, "zookeeper.connect": zookeeper.connect_string, **BROKER_CONFIG})
    broker.start()
    return broker


@pytest.fixture(scope="module")
def cluster(root: Path, zookeeper: ZooKeeperServer) -> Iterator[list[samsa.Broker]]:
    brokers: list[samsa.Broker] = []
    try:
        for i in (1, 2):
            brokers.append(start(root, zookeeper, i))
        for b in brokers:
            wait_for(lambda b=b: len(b.server.membership.brokers) == 2,
                     what="both brokers to see each other")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


@pytest.fixture
def zk(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def znode(zk: KazooClient, path: str) -> Any:
    data, _ = zk.get(path)
    return json.loads(data)


def notified(zk: KazooClient, entity_path: str) -> bool:
    return any(json.loads(zk.get(f"/config/changes/{child}")[0]).get("entity_path") == entity_path
               for child in zk.get_children("/config/changes"))


def configs(broker: samsa.Broker, *args: str) -> str:
    return ok(run_samsa("configs", "--bootstrap-server", broker.bootstrap_servers, *args))


def test_the_default_set_through_one_broker_takes_effect_on_the_other(
        cluster: list[samsa.Broker], zk: KazooClient) -> None:
    one, two = cluster
    admin = AdminClient({"bootstrap.servers": two.bootstrap_servers})
    admin.create_topics([NewTopic("led-by-two", 1, replica_assignment=[[2]])])[
        "led-by-two"].result(30)
    producer = Producer({"bootstrap.servers": two.bootstrap_servers, "linger.ms": 0,
                         "message.timeout.ms": 10000, "retries": 0})

    def produce(size: int) -> Any:
        outcome: list[Any] = []
        producer.produce("led-by-two", b"x" * size, on_delivery=lambda e, _m: outcome.append(e))
        producer.flush(15)
        return outcome[0] if outcome else "no answer"

    wait_for(lambda: produce(50_000) is None, timeout=30, what="broker 2 to lead led-by-two")

    assert configs(one, "--broker-defaults", "--alter", "--add-config",
                   "message.max.bytes=10000") == (
        "Completed updating default config for brokers in the cluster.\n")
    assert znode(zk, "/config/brokers/<default>") == {
        "version": 1, "config": {"message.max.bytes": "10000"}}
    assert notified(zk, "brokers/<default>")
    wait_for(lambda: two.server.config.get("message.max.bytes") == 10000, timeout=15,
             what="broker 2 to take the default")
    too_big = produce(50_000)
    assert isinstance(too_big, KafkaError) and too_big.code() == KafkaError.MSG_SIZE_TOO_LARGE
    resource = ConfigResource(ResourceType.BROKER, "2")
    entry = admin.describe_configs([resource])[resource].result(15)["message.max.bytes"]
    assert (entry.value, entry.source) == (
        "10000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert configs(two, "--broker-defaults", "--describe").splitlines()[1].startswith(
        "  message.max.bytes=10000 ")

    configs(two, "--broker-defaults", "--alter", "--delete-config", "message.max.bytes")
    assert znode(zk, "/config/brokers/<default>") == {"version": 1, "config": {}}
    wait_for(lambda: one.server.config.get("message.max.bytes") == 1024 * 1024 + 12,
             timeout=15, what="broker 1 to drop the default")
    assert produce(50_000) is None


def test_a_brokers_own_value_stays_its_own(cluster: list[samsa.Broker],
                                           zk: KazooClient) -> None:
    one, two = cluster
    admin = AdminClient({"bootstrap.servers": one.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("leader.replication.throttled.rate", "12345",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    assert znode(zk, "/config/brokers/1") == {
        "version": 1, "config": {"leader.replication.throttled.rate": "12345"}}
    assert one.server.replicas.quotas.leader.bound == 12345
    assert two.server.replicas.quotas.leader.bound == LONG_MAX
    assert two.server.config.dynamic_props(True) == {}

    # broker 1's resource is broker 1's to change (Kafka's clients send it there)
    with FrameClient(two.bootstrap_servers) as client:
        answer = client.request(44, 1, {"resources": [{
            "resource_type": 4, "resource_name": "1", "configs": [{
                "name": "leader.replication.throttled.rate", "config_operation": 0,
                "value": "1"}]}], "validate_only": False})
    assert (answer.responses[0].error_code, answer.responses[0].error_message) == (
        42, "Unexpected broker id, expected 2, but received 1")
    assert one.server.replicas.quotas.leader.bound == 12345

    configs(one, "--broker", "1", "--alter", "--delete-config",
            "leader.replication.throttled.rate")
    assert one.server.replicas.quotas.leader.bound == LONG_MAX


def test_a_change_written_into_zookeeper_is_followed(cluster: list[samsa.Broker],
                                                     zk: KazooClient) -> None:
    """As ``kafka-configs --zookeeper --entity-type brokers --entity-name 2 --alter`` writes
    it: the entity's node, then a notification naming it."""
    two = cluster[1]
    config = json.dumps({"version": 1, "config": {
        "follower.replication.throttled.rate": "54321"}}).encode()
    if zk.exists("/config/brokers/2"):
        zk.set("/config/brokers/2", config)
    else:
        zk.create("/config/brokers/2", config, makepath=True)
    zk.create("/config/changes/config_change_", json.dumps(
        {"version": 2, "entity_path": "brokers/2"}).encode(), sequence=True)
    wait_for(lambda: two.server.replicas.quotas.follower.bound == 54321, timeout=15,
             what="broker 2 to follow the change")
    assert cluster[0].server.replicas.quotas.follower.bound == LONG_MAX
    configs(two, "--broker", "2", "--alter", "--delete-config",
            "follower.replication.throttled.rate")
    assert two.server.replicas.quotas.follower.bound == LONG_MAX


def test_a_restarted_broker_starts_with_its_configs_and_the_defaults(
        cluster: list[samsa.Broker], root: Path, zookeeper: ZooKeeperServer,
        zk: KazooClient) -> None:
    one, two = cluster
    configs(one, "--broker-defaults", "--alter", "--add-config", "log.retention.bytes=4242")
    configs(two, "--broker", "2", "--alter", "--add-config", "log.retention.ms=60000")
    two.stop()
    again = start(root, zookeeper, 2)
    cluster[1] = again  # the fixture stops the one that runs
    assert again.server.config.get("log.retention.bytes") == 4242
    assert again.server.config.get("log.retention.ms") == 60000
    assert again.server.log_manager.defaults["retention.ms"] == 60000
    configs(again, "--broker-defaults", "--alter", "--delete-config", "log.retention.bytes")
    configs(again, "--broker", "2", "--alter", "--delete-config", "log.retention.ms")
    assert znode(zk, "/config/brokers/2") == {"version": 1, "config": {}}
