"""ACLs in a cluster: created through one broker, enforced by every broker.

Three real ``samsa server`` processes with the ACL authorizer on a real ZooKeeper
(tests/cluster/processes.py). Every client here is User:ANONYMOUS (PLAINTEXT), and so are the
brokers' own requests to each other (the followers' fetches): as Kafka's rule goes, the
inter-broker principal needs CLUSTER_ACTION on the cluster, or to be a super user. Broker 1
lists User:ANONYMOUS in super.users (it is the admin's way in); brokers 2 and 3 have no super
user, so there User:ANONYMOUS has only what the ACLs give it.

ACLs created and deleted through broker 1 reach brokers 2 and 3 through Kafka's znodes and
change notifications (literal and prefixed patterns); ACLs written into ZooKeeper directly, as
Kafka's ZooKeeper-era kafka-acls did, reach them the same way. Every wait has a deadline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka_frames import FrameClient

from samsa.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from samsa.security.acl_store import change_notification, encode_acls, resource_path

from .processes import ProcessCluster, process_cluster

TOPIC = "guarded"
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER = "samsa.security.AclAuthorizer"
MATCH_ALL = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1,
             "permission_type": 1}


def creation(resource_type: ResourceType, name: str, operation: AclOperation,
             pattern_type: PatternType = PatternType.LITERAL) -> dict[str, object]:
    return {"resource_type": int(resource_type), "resource_name": name,
            "resource_pattern_type": int(pattern_type), "principal": ANONYMOUS, "host": "*",
            "operation": int(operation), "permission_type": int(AclPermissionType.ALLOW)}


def describe_topic_error(cluster: ProcessCluster, via: int) -> int:
    """The error of a Metadata request for the topic, sent to broker ``via``."""
    with FrameClient(cluster.broker(via).address) as client:
        response = client.request(3, 9, {"topics": [{"name": TOPIC}],
                                         "allow_auto_topic_creation": False,
                                         "include_cluster_authorized_operations": False,
                                         "include_topic_authorized_operations": False})
    return int(response.topics[0].error_code)


def wait_everywhere(cluster: ProcessCluster, expected: int, what: str) -> None:
    cluster.wait(lambda: all(describe_topic_error(cluster, b) == expected for b in (2, 3)),
                 what, timeout=30, topics=[TOPIC])


@pytest.mark.timeout(240)
def test_an_acl_made_through_one_broker_is_enforced_by_all(tmp_path: Path) -> None:
    with process_cluster(tmp_path, overrides={"authorizer.class.name": AUTHORIZER},
                         broker_overrides={1: {"super.users": ANONYMOUS}}) as cluster:
        run(cluster)


def run(cluster: ProcessCluster) -> None:
    assert cluster.zk is not None
    with FrameClient(cluster.broker(1).address) as admin:
        # the followers' fetches: CLUSTER_ACTION for the inter-broker principal
        made = admin.request(30, 2, {"creations": [
            creation(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)]})
        assert [r.error_code for r in made.results] == [0]
        created = admin.request(19, 7, {"topics": [{
            "name": TOPIC, "num_partitions": 3, "replication_factor": 3, "assignments": [],
            "configs": []}], "timeout": 30000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        cluster.wait_full_isr(TOPIC, range(3), timeout=60)

        # brokers 2 and 3 refuse User:ANONYMOUS what no ACL gives it; broker 1 does not
        wait_everywhere(cluster, 29, "brokers 2 and 3 to refuse DESCRIBE")
        assert describe_topic_error(cluster, 1) == 0

        made = admin.request(30, 2, {"creations": [
            creation(ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE)]})
        assert [r.error_code for r in made.results] == [0]
        wait_everywhere(cluster, 0, "the literal ACL to reach brokers 2 and 3")
        node, _ = cluster.zk.get(f"/kafka-acl/Topic/{TOPIC}")
        assert json.loads(node) == {"version": 1, "acls": [
            {"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Describe",
             "host": "*"}]}
        assert cluster.zk.get_children("/kafka-acl-changes")

        doomed = {**MATCH_ALL, "resource_type_filter": int(ResourceType.TOPIC),
                  "resource_name_filter": TOPIC,
                  "pattern_type_filter": int(PatternType.LITERAL)}
        deleted = admin.request(31, 2, {"filters": [doomed]})
        assert [len(f.matching_acls) for f in deleted.filter_results] == [1]
        wait_everywhere(cluster, 29, "the deletion to reach brokers 2 and 3")
        assert not cluster.zk.exists(f"/kafka-acl/Topic/{TOPIC}")

        made = admin.request(30, 2, {"creations": [
            creation(ResourceType.TOPIC, "guar", AclOperation.READ, PatternType.PREFIXED)]})
        assert [r.error_code for r in made.results] == [0]
        wait_everywhere(cluster, 0, "the prefixed ACL (READ implies DESCRIBE) to reach all")
        assert cluster.zk.exists("/kafka-acl-extended/prefixed/Topic/guar")
        assert cluster.zk.get_children("/kafka-acl-extended-changes")
        admin.request(31, 2, {"filters": [MATCH_ALL | {
            "resource_type_filter": int(ResourceType.TOPIC)}]})
        wait_everywhere(cluster, 29, "every topic ACL to be gone everywhere")

    # Kafka's ZooKeeper-era kafka-acls wrote the znode and the notification itself
    pattern = ResourcePattern(ResourceType.TOPIC, TOPIC, PatternType.LITERAL)
    cluster.zk.create(resource_path(pattern), encode_acls([AccessControlEntry(
        ANONYMOUS, "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]), makepath=True)
    prefix, data = change_notification(pattern)
    cluster.zk.create(prefix, data, sequence=True)
    wait_everywhere(cluster, 0, "an ACL written into ZooKeeper to reach every broker")

    # a broker that starts loads the ACLs before it serves
    cluster.kill(2)
    cluster.restart(2)
    assert describe_topic_error(cluster, 2) == 0
