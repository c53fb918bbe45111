"""A listener that only some brokers have (Kafka's MetadataCache rule): a client that came in
on it is told only the brokers that have it, and a partition whose leader lacks it has no
leader: LISTENER_NOT_FOUND from Metadata v6 on (so that the configuration error shows),
LEADER_NOT_AVAILABLE before. Two brokers on a real ZooKeeper, both with a PLAINTEXT listener
(the inter-broker one), broker 1 with an EXTERNAL listener as well."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(120)

TOPIC = "split"
LISTENER_NOT_FOUND, LEADER_NOT_AVAILABLE = 72, 5


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[list[samsa.Broker]]:
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        started: list[samsa.Broker] = []
        try:
            for i, listeners in ((1, "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0"),
                                 (2, "PLAINTEXT://127.0.0.1:0")):
                broker = samsa.Broker(tmp_path / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    "zookeeper.session.timeout.ms": 6000, "listeners": listeners,
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
                    "offsets.topic.replication.factor": 1})
                broker.start()
                started.append(broker)
            for b in started:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 2,
                         what="both brokers to see each other")
            yield started
        finally:
            for b in started:
                b.stop()


def metadata(address: str, version: int) -> object:
    topic: dict[str, object] = {"name": TOPIC}
    if version >= 10:
        topic["topic_id"] = None
    body: dict[str, object] = {"topics": [topic], "allow_auto_topic_creation": False}
    if version >= 8:
        body["include_cluster_authorized_operations"] = False
        body["include_topic_authorized_operations"] = False
    with FrameClient(address) as client:
        return client.request(3, version, body)


def test_a_leader_without_the_clients_listener(brokers: list[samsa.Broker]) -> None:
    one, _two = brokers
    admin = AdminClient({"bootstrap.servers": one.bootstrap_for("PLAINTEXT")})
    # partition 0 on broker 1, partition 1 on broker 2
    admin.create_topics([NewTopic(TOPIC, 2, replica_assignment=[[1], [2]])])[TOPIC].result(30)

    def leaders_known() -> bool:
        answer = metadata(one.bootstrap_for("PLAINTEXT"), 9)
        return [p.leader_id for p in answer.topics[0].partitions] == [1, 2]  # type: ignore[attr-defined]

    wait_for(leaders_known, what="both partitions to have their leaders", timeout=30)

    external = one.bootstrap_for("EXTERNAL")
    for version, missing in ((5, LEADER_NOT_AVAILABLE), (6, LISTENER_NOT_FOUND),
                             (9, LISTENER_NOT_FOUND), (12, LISTENER_NOT_FOUND)):
        answer = metadata(external, version)
        assert [b.node_id for b in answer.brokers] == [1]  # type: ignore[attr-defined]
        partitions = {p.partition_index: p for p in answer.topics[0].partitions}  # type: ignore[attr-defined]
        assert (partitions[0].error_code, partitions[0].leader_id) == (0, 1), version
        assert (partitions[1].error_code, partitions[1].leader_id) == (missing, -1), version
        assert list(partitions[1].replica_nodes) == [2]

    # on the listener both brokers have, nothing is missing
    answer = metadata(one.bootstrap_for("PLAINTEXT"), 12)
    assert sorted(b.node_id for b in answer.brokers) == [1, 2]  # type: ignore[attr-defined]
    assert [p.error_code for p in answer.topics[0].partitions] == [0, 0]  # type: ignore[attr-defined]
