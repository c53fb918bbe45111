"""ACLs in Kafka's ZooKeeper layout: node paths (kafka.zk.ZkAclStore), node data
(AclEntry.toJsonCompatibleMap / fromBytes), change notifications (LiteralAclChangeStore,
ExtendedAclChangeStore), and round trips of random ACL sets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.security import AclAuthorizer
from samsa.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    storable_name,
)
from samsa.security.acl_store import (
    ACL_ROOTS,
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    acl_nodes,
    bindings_from_nodes,
    change_notification,
    decode_acls,
    encode_acls,
    pattern_from_change,
    pattern_from_path,
    resource_path,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def test_paths_are_kafkas() -> None:
    assert ACL_ROOTS == ("/kafka-acl", "/kafka-acl-extended/prefixed")
    assert resource_path(ResourcePattern(TOPIC, "topic-1", LITERAL)) == "/kafka-acl/Topic/topic-1"
    assert resource_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LITERAL)) == \
        "/kafka-acl/Cluster/kafka-cluster"
    assert resource_path(ResourcePattern(TOPIC, "*", LITERAL)) == "/kafka-acl/Topic/*"
    assert resource_path(ResourcePattern(GROUP, "group-1", PREFIXED)) == \
        "/kafka-acl-extended/prefixed/Group/group-1"
    assert resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LITERAL)) == \
        "/kafka-acl/TransactionalId/tx"
    assert resource_path(ResourcePattern(ResourceType.DELEGATION_TOKEN, "d", PREFIXED)) == \
        "/kafka-acl-extended/prefixed/DelegationToken/d"
    for bad in (ResourcePattern(TOPIC, "a/b", LITERAL),
                ResourcePattern(TOPIC, "t", PatternType.MATCH)):
        with pytest.raises(ValueError):
            resource_path(bad)


def test_paths_read_back() -> None:
    assert pattern_from_path("/kafka-acl/Topic/topic-1") == ResourcePattern(TOPIC, "topic-1")
    assert pattern_from_path("/kafka-acl-extended/prefixed/User/bo") == \
        ResourcePattern(ResourceType.USER, "bo", PREFIXED)
    assert pattern_from_path("/kafka-acl/Widget/w").resource_type is ResourceType.UNKNOWN
    for bad in ("/kafka-acl/Topic", "/kafka-acl/Topic/a/b", "/brokers/ids/1",
                "/kafka-acl-extended/literal/Topic/t"):
        with pytest.raises(ValueError):
            pattern_from_path(bad)


def test_node_data_is_kafkas_json() -> None:
    data = encode_acls([AccessControlEntry("User:alice", "*", AclOperation.READ, ALLOW),
                        AccessControlEntry("User:alice", "host1",
                                           AclOperation.DESCRIBE_CONFIGS, DENY)])
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:alice", "permissionType": "Deny", "operation": "DescribeConfigs",
         "host": "host1"}]}
    assert data.startswith(b'{"version":1,"acls":[{"principal":"User:alice",')


def test_node_data_as_kafka_wrote_it() -> None:
    # The example of kafka.zk.ZkData's comment, with its spaces and key order.
    written = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow",'
               b'"operation": "Read","principal": "User:alice"}]}')
    assert decode_acls(written) == [
        AccessControlEntry("User:alice", "host1", AclOperation.READ, ALLOW)]
    # Names as SecurityUtils reads them: any case without underscores.
    assert decode_acls(b'{"version":1,"acls":[{"host":"*","permissionType":"ALLOW",'
                       b'"operation":"idempotentwrite","principal":"User:*"}]}') == [
        AccessControlEntry("User:*", "*", AclOperation.IDEMPOTENT_WRITE, ALLOW)]
    # A name this version does not know reads as UNKNOWN, as in Kafka.
    [entry] = decode_acls(b'{"version":1,"acls":[{"host":"*","permissionType":"Allow",'
                          b'"operation":"Teleport","principal":"User:a"}]}')
    assert entry.operation is AclOperation.UNKNOWN
    assert decode_acls(b"") == [] and decode_acls(None) == [] and decode_acls(b"null") == []
    assert decode_acls(b'{"version":1,"acls":[]}') == []


@pytest.mark.parametrize("bad", [
    b'{"version":2,"acls":[]}',
    b'{"acls":[]}',
    b'{"version":1}',
    b'[1]',
    b'{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Read"}]}',
    b'{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Read",'
    b'"principal":"alice"}]}',
])
def test_node_data_refused(bad: bytes) -> None:
    with pytest.raises(ValueError):
        decode_acls(bad)


def test_change_notifications() -> None:
    path, data = change_notification(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx:1"))
    assert (path, data) == ("/kafka-acl-changes/acl_changes_", b"TRANSACTIONAL_ID:tx:1")
    assert pattern_from_change(LITERAL_CHANGES, data) == \
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx:1", LITERAL)
    prefixed = ResourcePattern(GROUP, "app-", PREFIXED)
    path, data = change_notification(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "GROUP", "name": "app-",
                                "patternType": "PREFIXED"}
    assert pattern_from_change(EXTENDED_CHANGES, data) == prefixed
    assert pattern_from_change(LITERAL_CHANGES, b"widget:w").resource_type is \
        ResourceType.UNKNOWN
    for root, bad in [(LITERAL_CHANGES, b"no-colon"),
                      (EXTENDED_CHANGES, b'{"version":2,"resourceType":"GROUP","name":"a",'
                                         b'"patternType":"PREFIXED"}'),
                      (EXTENDED_CHANGES, b'{"version":1,"resourceType":"GROUP","name":"a",'
                                         b'"patternType":"MATCH"}'),
                      ("/elsewhere", b"TOPIC:t")]:
        with pytest.raises(ValueError):
            pattern_from_change(root, bad)


# --- round trips ------------------------------------------------------------------------------

valid_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(storable_name)
valid_bindings = st.builds(
    lambda rt, name, pt, principal, host, op, perm: AclBinding(
        ResourcePattern(rt, name if rt is not ResourceType.CLUSTER else "kafka-cluster", pt),
        AccessControlEntry(principal, host, op, perm)),
    st.sampled_from([t for t in ResourceType if t not in (ResourceType.ANY,
                                                          ResourceType.UNKNOWN)]),
    valid_names, st.sampled_from([LITERAL, PREFIXED]),
    st.builds(lambda t, n: f"{t}:{n}", st.sampled_from(["User", "Group"]), st.text(max_size=6)),
    st.sampled_from(["*", "10.0.0.1", "::1"]),
    st.sampled_from([o for o in AclOperation if o not in (AclOperation.ANY,
                                                           AclOperation.UNKNOWN)]),
    st.sampled_from([ALLOW, DENY]))


@given(st.lists(valid_bindings, max_size=15))
def test_every_valid_binding_survives_the_store(bindings: list[AclBinding]) -> None:
    auth = AclAuthorizer()
    assert auth.add(bindings) == [None] * len(bindings)  # what CreateAcls accepts, it can store
    nodes = acl_nodes(auth.acls())
    assert set(bindings_from_nodes(nodes)) == set(bindings)
    for path in nodes:
        assert resource_path(pattern_from_path(path)) == path
    # Loading the nodes into a new authorizer gives the same ACLs.
    loaded = AclAuthorizer()
    loaded.add(bindings_from_nodes(nodes), validate=False)
    assert set(loaded.acls()) == set(auth.acls())
    for binding in bindings:
        kind = binding.pattern.pattern_type
        path, data = change_notification(binding.pattern)
        root = LITERAL_CHANGES if kind is LITERAL else EXTENDED_CHANGES
        assert path.startswith(root + "/")
        assert pattern_from_change(root, data) == binding.pattern


def test_nodes_of_unknown_types_are_skipped() -> None:
    nodes = {"/kafka-acl/Widget/w": encode_acls(
                 [AccessControlEntry("User:a", "*", AclOperation.READ, ALLOW)]),
             "/kafka-acl/Topic/t": encode_acls(
                 [AccessControlEntry("User:a", "*", AclOperation.READ, ALLOW)])}
    assert bindings_from_nodes(nodes) == [AclBinding(
        ResourcePattern(TOPIC, "t"),
        AccessControlEntry("User:a", "*", AclOperation.READ, ALLOW))]
