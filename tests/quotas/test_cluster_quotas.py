"""Client quotas in a cluster: three ``samsa server`` processes on a real ZooKeeper
(tests/cluster/processes.py). A quota altered through one broker lands in Kafka's znodes
(``/config/clients/<client id>``, ``/config/users/<user>``, a ``config_change`` notification)
and every broker applies it; a user's SCRAM credentials and quotas share its znode and keep
each other; quotas written into ZooKeeper directly, as Kafka's ZooKeeper-era kafka-configs
did, are applied the same way."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster.processes import ProcessCluster, process_cluster
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka_frames import FrameClient
from waiting import wait_for

from samsa.records.record import RecordInput, encode_batch
from samsa.zk.zk_data import decode_config_change, decode_entity_config

from .support import CLIENT_ID, USER, alter, described, set_quotas

pytestmark = pytest.mark.timeout(300)

TOPIC = "quota-cluster"
QUOTA = 10_000  # bytes a second: a 120 KB produce is 2 s over
DEADLINE = 40.0
_ids = itertools.count()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    with process_cluster(tmp_path, 3) as running:
        running.create_topic(TOPIC, 3, 1)
        running.wait(lambda: all(running.state(TOPIC, p) is not None for p in range(3)),
                     "the topic's partitions have leaders")
        yield running


def throttle_ms(cluster: ProcessCluster, via: int, client_id: str) -> int:
    """A 120 KB produce to a partition broker ``via`` leads, sent to it as ``client_id``:
    its throttle time."""
    partition = next(p for p in range(3) if cluster.state(TOPIC, p).leader == via)
    batch = encode_batch([RecordInput(None, b"x" * 120_000)], timestamp=int(time.time() * 1000))
    with FrameClient(cluster.broker(via).address, timeout=30) as client:
        client.send(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5000,
                           "topic_data": [{"name": TOPIC, "partition_data": [
                               {"index": partition, "records": batch}]}]},
                    client_id=client_id)
        _, response = client.recv(0, 9, timeout=30)
    assert response.responses[0].partition_responses[0].error_code == 0
    return int(response.throttle_time.total_seconds() * 1000)


def throttled_everywhere(cluster: ProcessCluster) -> bool:
    """Every broker throttles a new client id (one of the clients/<default> quota)."""
    return all(throttle_ms(cluster, b, f"fresh-{next(_ids)}") > 0 for b in (1, 2, 3))


def nowhere_throttled(cluster: ProcessCluster) -> bool:
    return all(throttle_ms(cluster, b, f"fresh-{next(_ids)}") == 0 for b in (1, 2, 3))


def znode(cluster: ProcessCluster, path: str) -> dict[str, str]:
    assert cluster.zk is not None
    return decode_entity_config(cluster.zk.get(path)[0]).config


def notified(cluster: ProcessCluster) -> set[str]:
    assert cluster.zk is not None
    return {decode_config_change(cluster.zk.get(f"/config/changes/{c}")[0]).entity_path
            for c in cluster.zk.get_children("/config/changes")}


def test_a_quota_altered_through_one_broker_applies_on_every_broker(
        cluster: ProcessCluster) -> None:
    assert nowhere_throttled(cluster)
    with FrameClient(cluster.broker(1).address) as admin:
        set_quotas(admin, [(CLIENT_ID, None)], producer_byte_rate=QUOTA)
    # Kafka's layout
    assert znode(cluster, "/config/clients/<default>") == {"producer_byte_rate": str(QUOTA)}
    assert "clients/<default>" in notified(cluster)
    wait_for(lambda: throttled_everywhere(cluster), DEADLINE,
             "every broker throttles a client of the default client quota")
    # any broker answers Describe, from ZooKeeper
    with FrameClient(cluster.broker(3).address) as other:
        assert described(other) == {((CLIENT_ID, None),): {"producer_byte_rate": QUOTA}}
        # removed through another broker: gone everywhere
        set_quotas(other, [(CLIENT_ID, None)], producer_byte_rate=None)
    wait_for(lambda: nowhere_throttled(cluster), DEADLINE, "the quota gone from every broker")


def test_scram_credentials_and_quotas_share_the_users_znode(cluster: ProcessCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).address})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dana", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret")]
    )["dana"].result(DEADLINE)
    with FrameClient(cluster.broker(2).address) as client:
        set_quotas(client, [(USER, "dana")], producer_byte_rate=2048, request_percentage=25)
        assert set(znode(cluster, "/config/users/dana")) == {
            "SCRAM-SHA-256", "producer_byte_rate", "request_percentage"}
        assert znode(cluster, "/config/users/dana")["request_percentage"] == "25.0"
        set_quotas(client, [(USER, "dana"), (CLIENT_ID, "app")], consumer_byte_rate=1)
        assert znode(cluster, "/config/users/dana/clients/app") == {"consumer_byte_rate": "1"}
        assert "users/dana/clients/app" in notified(cluster)
        set_quotas(client, [(USER, "dana")], producer_byte_rate=None, request_percentage=None)
    # the credential kept (and still good for describing)
    assert set(znode(cluster, "/config/users/dana")) == {"SCRAM-SHA-256"}
    described_users = admin.describe_user_scram_credentials(["dana"])["dana"].result(DEADLINE)
    assert described_users.scram_credential_infos[0].iterations == 4096
    # bad input through any broker: Kafka's error, nothing written
    with FrameClient(cluster.broker(3).address) as client:
        ((code, message, _),) = alter(client, [([(USER, "dana")], {"producer_byte_rate": -1})])
        assert (code, message) == (42, "Quota producer_byte_rate must be greater than 0")
    assert set(znode(cluster, "/config/users/dana")) == {"SCRAM-SHA-256"}


def test_quotas_written_into_zookeeper_by_kafkas_tools(cluster: ProcessCluster) -> None:
    zk = cluster.zk
    assert zk is not None

    def write(path: str, config: dict[str, Any], entity_path: str) -> None:
        data = json.dumps({"version": 1, "config": config}).encode()
        if zk.exists(path):
            zk.set(path, data)
        else:
            zk.create(path, data, makepath=True)
        zk.create("/config/changes/config_change_", json.dumps(
            {"version": 2, "entity_path": entity_path}).encode(), sequence=True)

    # kafka-configs --zookeeper --entity-type users --entity-default (ANONYMOUS falls under it)
    write("/config/users/<default>", {"producer_byte_rate": str(QUOTA)}, "users/<default>")
    wait_for(lambda: throttled_everywhere(cluster), DEADLINE,
             "every broker applies the default user's quota")
    write("/config/users/<default>", {}, "users/<default>")
    wait_for(lambda: nowhere_throttled(cluster), DEADLINE, "the quota removed everywhere")
