"""Replication throttles set by ``samsa reassign-partitions --execute --throttle`` on two
in-process brokers and a real ZooKeeper: the topic's throttled replicas and the brokers' rates
are set as Kafka's tool sets them, a follower catching up 2 MB under a 100 KB/s throttle takes
well over ten seconds where the same move unthrottled takes a few, ``--verify`` leaves the
throttles while the move runs and clears them once it is done (not with
``--preserve-throttles``), and ``--cancel`` clears them too.

The bounds are generous and were measured: the throttled move took about 20 s here (the
leader and the follower both hold back while the rate, over Kafka's 11 one-second windows, is
above the bound; the first fetch goes through before the rate is known), the unthrottled one
about 1 s."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from waiting import wait_for

import samsa
from samsa.tools.zookeeper_server import ZooKeeperServer

from . import samsa as run_samsa
from . import unique

pytestmark = pytest.mark.timeout(180)

BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 200,
    "replica.lag.time.max.ms": 3000,
    # fetches of at most 100 KB (the producer's batches are smaller): a throttle is held to
    # within one fetch, so 1 MB fetches would let half of the 2 MB through unthrottled
    "replica.fetch.max.bytes": 100_000,
}
THROTTLE = 100_000  # bytes a second
DATA = 2_000_000  # bytes to move
RECORD = 10_000
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[samsa.Broker]]:
    root = tmp_path_factory.mktemp("throttle")
    brokers: list[samsa.Broker] = []
    with ZooKeeperServer(root / "zk") as zookeeper:
        try:
            for i in (1, 2):
                broker = samsa.Broker(root / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    **BROKER_CONFIG})
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 2,
                         what="both brokers to see each other")
            yield brokers
        finally:
            for b in brokers:
                b.stop()


def servers(brokers: list[samsa.Broker]) -> str:
    return ",".join(b.bootstrap_servers for b in brokers)


def reassign(brokers: list[samsa.Broker], *args: str | Path) -> list[str]:
    result = run_samsa("reassign-partitions", "--bootstrap-server", servers(brokers), *args)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout
    return result.stdout.splitlines()


def topic_on_broker_1(brokers: list[samsa.Broker], tmp_path: Path,
                      data: int = DATA) -> tuple[str, Path]:
    """A topic of one partition on broker 1 holding ``data`` bytes, and a plan moving it to
    brokers 1 and 2."""
    topic = unique("throttled")
    admin = AdminClient({"bootstrap.servers": servers(brokers)})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])])[topic].result(30)
    wait_for(lambda: brokers[0].server.replicas.partition(topic, 0) is not None
             and brokers[0].server.replicas.partition(topic, 0).is_leader,
             timeout=30, what=f"broker 1 to lead {topic}")
    producer = Producer({"bootstrap.servers": servers(brokers), "linger.ms": 5,
                         "batch.size": 50_000, "compression.type": "none"})
    for _ in range(data // RECORD):
        producer.produce(topic, os.urandom(RECORD))
    assert producer.flush(60) == 0
    plan = tmp_path / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2]}]}))
    return topic, plan


def described(brokers: list[samsa.Broker], kind: ResourceType, name: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": servers(brokers)})
    resource = ConfigResource(kind, name)
    entries = admin.describe_configs([resource])[resource].result(timeout=15)
    return {k: e.value for k, e in entries.items()}


def throttles(brokers: list[samsa.Broker], topic: str) -> dict[str, object]:
    """The throttle configs of the topic and of each broker."""
    found: dict[str, object] = {}
    topic_configs = described(brokers, ResourceType.TOPIC, topic)
    found.update({key: topic_configs[key] for key in REPLICAS})
    for b in (1, 2):
        broker_configs = described(brokers, ResourceType.BROKER, str(b))
        found[str(b)] = {key: broker_configs.get(key) for key in THROTTLES}
    return found


def moved(brokers: list[samsa.Broker], plan: Path) -> float:
    """Seconds until --verify reports the move completed."""
    start = time.monotonic()
    wait_for(lambda: any("is completed" in line for line in reassign(
        brokers, "--verify", "--preserve-throttles", "--reassignment-json-file", plan)),
        timeout=120, interval=0.5, what="the reassignment to complete")
    return time.monotonic() - start


def test_a_throttled_move_catches_up_at_about_the_throttled_rate(
        cluster: list[samsa.Broker], tmp_path: Path) -> None:
    free_topic, free_plan = topic_on_broker_1(cluster, tmp_path)
    lines = reassign(cluster, "--execute", "--reassignment-json-file", free_plan)
    assert lines[-1] == f"Successfully started partition reassignment for {free_topic}-0"
    unthrottled = moved(cluster, free_plan)

    topic, plan = topic_on_broker_1(cluster, tmp_path)
    lines = reassign(cluster, "--execute", "--throttle", str(THROTTLE),
                     "--reassignment-json-file", plan)
    start = time.monotonic()
    assert lines[4:] == [
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to"
        " ensure the throttle is removed.",
        f"The inter-broker throttle limit was set to {THROTTLE} B/s",
        f"Successfully started partition reassignment for {topic}-0",
    ]
    # Kafka's throttled replicas: the current replica (the leader side), the new one
    assert throttles(cluster, topic) == {
        "leader.replication.throttled.replicas": "0:1",
        "follower.replication.throttled.replicas": "0:2",
        "1": dict.fromkeys(THROTTLES, str(THROTTLE)),
        "2": dict.fromkeys(THROTTLES, str(THROTTLE)),
    }
    # while it runs, --verify says so and leaves the throttles
    assert reassign(cluster, "--verify", "--reassignment-json-file", plan) == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is still in progress."]
    assert throttles(cluster, topic)["1"] == dict.fromkeys(THROTTLES, str(THROTTLE))

    moved(cluster, plan)
    throttled = time.monotonic() - start
    rate = DATA / throttled
    assert unthrottled < 8, f"unthrottled, the move took {unthrottled:.1f} s"
    assert throttled > 10, f"at {THROTTLE} B/s, 2 MB moved in {throttled:.1f} s"
    assert THROTTLE / 3 < rate < THROTTLE * 2, (
        f"moved at {rate:.0f} B/s under a {THROTTLE} B/s throttle ({throttled:.1f} s)")

    # done, with --preserve-throttles: they stay; without: cleared everywhere
    assert throttles(cluster, topic)["2"] == dict.fromkeys(THROTTLES, str(THROTTLE))
    assert reassign(cluster, "--verify", "--reassignment-json-file", plan) == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
        "Clearing broker-level throttles on brokers 1,2",
        f"Clearing topic-level throttles on topic {topic}",
    ]
    assert throttles(cluster, topic) == {
        "leader.replication.throttled.replicas": "",
        "follower.replication.throttled.replicas": "",
        "1": dict.fromkeys(THROTTLES), "2": dict.fromkeys(THROTTLES),
    }
    for b in cluster:
        assert b.server.replicas.quotas.leader.bound == 2**63 - 1
        assert b.server.replicas.quotas.follower.bound == 2**63 - 1


@pytest.mark.parametrize(("side", "broker"), [("leader", 1), ("follower", 2)])
def test_each_side_throttles_on_its_own(cluster: list[samsa.Broker], tmp_path: Path,
                                        side: str, broker: int) -> None:
    """Only the leader's (or only the follower's) rate and throttled replicas, set with the
    admin client: 1 MB still moves at about the rate (measured: about 9 s)."""
    topic, plan = topic_on_broker_1(cluster, tmp_path, data=1_000_000)
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    changes = [
        ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(
            f"{side}.replication.throttled.replicas", f"0:{broker}",
            incremental_operation=AlterConfigOpType.SET)]),
        ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[ConfigEntry(
            f"{side}.replication.throttled.rate", str(THROTTLE),
            incremental_operation=AlterConfigOpType.SET)]),
    ]
    for resource, future in admin.incremental_alter_configs(changes).items():
        assert future.result(15) is None, resource
    # the broker applies the topic's throttled replicas when its ZooKeeper watch fires, as
    # Kafka's brokers do: a move started before that is not throttled at first
    store = cluster[broker - 1].server.replicas.store
    wait_for(lambda: store.topics[topic].configs.get(f"{side}.replication.throttled.replicas")
             == f"0:{broker}", timeout=30, what=f"broker {broker} to know {topic}'s throttle")
    other = "follower" if side == "leader" else "leader"
    assert getattr(cluster[broker - 1].server.replicas.quotas, side).bound == THROTTLE
    assert all(getattr(b.server.replicas.quotas, other).bound == 2**63 - 1 for b in cluster)

    reassign(cluster, "--execute", "--reassignment-json-file", plan)
    took = moved(cluster, plan)
    assert 5 < took < 60, f"1 MB moved in {took:.1f} s with the {side}'s {THROTTLE} B/s"
    reassign(cluster, "--verify", "--reassignment-json-file", plan)  # clears them
    assert getattr(cluster[broker - 1].server.replicas.quotas, side).bound == 2**63 - 1


def test_cancel_clears_the_throttles(cluster: list[samsa.Broker], tmp_path: Path) -> None:
    topic, plan = topic_on_broker_1(cluster, tmp_path)
    lines = reassign(cluster, "--execute", "--throttle", "1000",
                     "--replica-alter-log-dirs-throttle", "2000", "--reassignment-json-file", plan)
    assert lines[-3:] == ["The inter-broker throttle limit was set to 1000 B/s",
                          "The replica-alter-dir throttle limit was set to 2000 B/s",
                          f"Successfully started partition reassignment for {topic}-0"]
    assert throttles(cluster, topic)["2"] == dict.fromkeys(THROTTLES, "1000")
    lines = reassign(cluster, "--cancel", "--reassignment-json-file", plan)
    assert lines[-2:] == ["Clearing broker-level throttles on brokers 1,2",
                          f"Clearing topic-level throttles on topic {topic}"]
    assert throttles(cluster, topic) == {
        "leader.replication.throttled.replicas": "",
        "follower.replication.throttled.replicas": "",
        "1": dict.fromkeys(THROTTLES), "2": dict.fromkeys(THROTTLES),
    }
