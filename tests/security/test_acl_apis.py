"""CreateAcls, DescribeAcls and DeleteAcls from real clients (confluent-kafka's AdminClient,
librdkafka; kafka-python's KafkaAdminClient), the single node's ACL file across a restart, and
real producers and consumers meeting ACLs.

The admin clients here are User:ANONYMOUS (PLAINTEXT), so their broker lists it in
super.users; the producer and consumer tests use a broker whose only super user is User:admin,
whose ACLs the test creates over the wire (authz_support.py); the last test has real
principals, from TLS client certificates: an admin certificate's super user creates ACLs for
another certificate's principal through the AdminClient.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
)
from kafka.admin import ResourcePattern as PyResourcePattern
from kafka.admin import ResourcePatternFilter as PyResourcePatternFilter
from kafka.admin import ResourceType as PyResourceType
from kafka.errors import SecurityDisabledError
from waiting import wait_for

import samsa
from samsa.cluster.acls import ACLS_FILE
from samsa.security.acl import AclOperation as Op
from samsa.security.acl import ResourceType as Res

from .authz_support import ADMIN, ANONYMOUS, AUTHORIZER, Acl, authorizing_broker, connect_as, grant

TIMEOUT = 15.0


def admin_for(broker: samsa.Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                        "socket.timeout.ms": 10000})


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data", config={
            "authorizer.class.name": AUTHORIZER, "super.users": ANONYMOUS}) as b:
        yield b


def binding(name: str, operation: AclOperation = AclOperation.READ,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL,
            principal: str = "User:alice",
            permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)


def outcome(future: Any) -> Any:
    try:
        return future.result(timeout=TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]


def test_confluent_admin_creates_describes_and_deletes(broker: samsa.Broker) -> None:
    admin = admin_for(broker)
    read = binding("orders")
    write = binding("orders", AclOperation.WRITE)
    prefixed = binding("app-", pattern=ResourcePatternType.PREFIXED, principal="User:bob")
    cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:carol", "10.0.0.1", AclOperation.ALTER, AclPermissionType.DENY)
    created = admin.create_acls([read, write, prefixed, cluster], request_timeout=TIMEOUT)
    assert {b: outcome(f) for b, f in created.items()} == dict.fromkeys(
        [read, write, prefixed, cluster])

    described = outcome(admin.describe_acls(ANY_FILTER, request_timeout=TIMEOUT))
    assert sorted(described) == sorted([read, write, prefixed, cluster])
    # MATCH: the ACLs that apply to the topic app-1
    match = AclBindingFilter(ResourceType.TOPIC, "app-1", ResourcePatternType.MATCH, None,
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert outcome(admin.describe_acls(match, request_timeout=TIMEOUT)) == [prefixed]

    doomed = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None,
                              None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([doomed], request_timeout=TIMEOUT)
    assert sorted(outcome(deleted[doomed])) == sorted([read, write])
    assert sorted(outcome(admin.describe_acls(ANY_FILTER, request_timeout=TIMEOUT))) == sorted(
        [prefixed, cluster])


def test_confluent_admin_gets_each_bindings_error(broker: samsa.Broker) -> None:
    admin = admin_for(broker)
    good = binding("t")
    bad_cluster = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL,
                             "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    bad_principal = binding("t", principal="alice")
    created = admin.create_acls([good, bad_cluster, bad_principal], request_timeout=TIMEOUT)
    assert outcome(created[good]) is None
    for bad, message in ((bad_cluster, "The only valid name for the CLUSTER resource is "
                                       "kafka-cluster"),
                         (bad_principal, "expected a string in format "
                                         "principalType:principalName but got alice")):
        error = outcome(created[bad])
        assert isinstance(error, KafkaError), error
        assert error.code() == KafkaError.INVALID_REQUEST and message in error.str()
    assert outcome(admin.describe_acls(ANY_FILTER, request_timeout=TIMEOUT)) == [good]


def test_admin_clients_without_an_authorizer(tmp_path: Path) -> None:
    """SECURITY_DISABLED. (librdkafka reads DescribeAcls' top-level error but hands its
    caller an empty list: kafka-python shows the error.)"""
    with samsa.Broker(tmp_path) as plain:
        admin = admin_for(plain)
        created = admin.create_acls([binding("t")], request_timeout=TIMEOUT)
        error = outcome(next(iter(created.values())))
        assert isinstance(error, KafkaError) and error.code() == KafkaError.SECURITY_DISABLED
        client = KafkaAdminClient(bootstrap_servers=plain.bootstrap_servers,
                                  request_timeout_ms=10000)
        try:
            everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                   PyResourcePatternFilter(PyResourceType.ANY, None,
                                                           ACLResourcePatternType.ANY))
            with pytest.raises(SecurityDisabledError):
                client.describe_acls(everything)
        finally:
            client.close()


def test_kafka_python_admin(broker: samsa.Broker) -> None:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                              request_timeout_ms=10000)
    try:
        topic = PyResourcePattern(PyResourceType.TOPIC, "events")
        group = PyResourcePattern(PyResourceType.GROUP, "app-",
                                  ACLResourcePatternType.PREFIXED)
        acls = [ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, topic),
                ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, group)]
        result = client.create_acls(acls)
        assert len(result["succeeded"]) == 2 and not result["failed"], result
        everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                               PyResourcePatternFilter(PyResourceType.ANY, None,
                                                       ACLResourcePatternType.ANY))
        found, error = client.describe_acls(everything)
        assert error.errno == 0
        assert {(a.resource_pattern.resource_type, a.resource_pattern.resource_name,
                 a.resource_pattern.pattern_type) for a in found} == {
            (PyResourceType.TOPIC, "events", ACLResourcePatternType.LITERAL),
            (PyResourceType.GROUP, "app-", ACLResourcePatternType.PREFIXED)}
        topics_only = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                PyResourcePatternFilter(PyResourceType.TOPIC, None,
                                                        ACLResourcePatternType.ANY))
        ((_, deleted, error),) = client.delete_acls([topics_only])
        assert error.errno == 0
        assert [(a.principal, a.resource_pattern.resource_name) for a in deleted] == [
            ("User:alice", "events")]
        found, _ = client.describe_acls(everything)
        assert [a.resource_pattern.resource_name for a in found] == ["app-"]
    finally:
        client.close()


def test_the_acls_outlive_a_restart(tmp_path: Path) -> None:
    """A single node keeps its ACLs in its metadata dir, in Kafka's ZooKeeper layout."""
    config = {"authorizer.class.name": AUTHORIZER, "super.users": ANONYMOUS}
    kept = [binding("orders"), binding("app-", AclOperation.WRITE,
                                       ResourcePatternType.PREFIXED)]
    with samsa.Broker(tmp_path, config=config) as first:
        admin = admin_for(first)
        for future in admin.create_acls(kept, request_timeout=TIMEOUT).values():
            assert outcome(future) is None
    stored = json.loads((tmp_path / ACLS_FILE).read_text())
    assert stored == {"version": 1, "acls": {
        "/kafka-acl-extended/prefixed/Topic/app-": {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
             "host": "*"}]},
        "/kafka-acl/Topic/orders": {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
             "host": "*"}]}}}
    with samsa.Broker(tmp_path, config=config) as second:
        assert sorted(outcome(admin_for(second).describe_acls(
            ANY_FILTER, request_timeout=TIMEOUT))) == sorted(kept)
        assert second.server.authorizer is not None
        assert second.server.authorizer.authorize("User:alice", "1.2.3.4", Op.WRITE, Res.TOPIC,
                                                  "app-1")


# --- real producers and consumers -----------------------------------------------------------------


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[samsa.Broker]:
    with authorizing_broker(tmp_path / "secured", **{"auto.create.topics.enable": "false"}) as b:
        with connect_as(b, ADMIN) as admin:
            created = admin.request(19, 7, {"topics": [{
                "name": "payments", "num_partitions": 1, "replication_factor": 1,
                "assignments": [], "configs": []}], "timeout": 10000, "validate_only": False})
            assert created.topics[0].error_code == 0
        yield b


def produce_one(broker: samsa.Broker, value: bytes, idempotent: bool = False) -> int | None:
    """A new producer sends one record to ``payments``: None, or the error code it failed with
    (in its delivery report, or at once once librdkafka knows the topic is not authorized)."""
    errors: list[KafkaError | None] = []
    producer = Producer(broker.client_config(**{
        "enable.idempotence": idempotent, "message.timeout.ms": 10000}))
    try:
        producer.produce("payments", value, on_delivery=lambda e, m: errors.append(e))
    except KafkaException as exc:
        return int(exc.args[0].code())
    producer.flush(TIMEOUT)
    assert len(errors) == 1
    error = errors[0]  # (a KafkaError compared with None raises inside confluent-kafka)
    return None if error is None else int(error.code())


def test_a_producer_needs_write_and_a_consumer_read(secured: samsa.Broker) -> None:
    assert produce_one(secured, b"denied") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with connect_as(secured, ADMIN) as admin:
        grant(admin, [Acl(Res.TOPIC, "payments", Op.WRITE)])  # WRITE implies DESCRIBE
    assert produce_one(secured, b"allowed") is None

    consumer = Consumer({"bootstrap.servers": secured.bootstrap_servers, "group.id": "readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["payments"])

        def group_refused() -> bool:
            message = consumer.poll(0.2)
            return message is not None and message.error() is not None and \
                message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED

        wait_for(group_refused, timeout=TIMEOUT, what="GROUP_AUTHORIZATION_FAILED")
        with connect_as(secured, ADMIN) as admin:
            grant(admin, [Acl(Res.GROUP, "readers", Op.READ), Acl(Res.TOPIC, "payments",
                                                                  Op.READ)])

        def read() -> bytes | None:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                return None
            return message.value()

        assert wait_for(read, timeout=TIMEOUT, what="the record") == b"allowed"
    finally:
        consumer.close()


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(
        secured: samsa.Broker) -> None:
    """KIP-679: InitProducerId of an idempotent producer asks IDEMPOTENT_WRITE on the cluster,
    or WRITE on any topic."""
    with connect_as(secured, ADMIN) as admin:
        grant(admin, [Acl(Res.TOPIC, "payments", Op.WRITE)])
    assert produce_one(secured, b"once", idempotent=True) is None


def test_create_topics_needs_create(secured: samsa.Broker) -> None:
    admin = admin_for(secured)
    (future,) = admin.create_topics([NewTopic("made", 1, 1)],
                                    request_timeout=TIMEOUT).values()
    error = outcome(future)
    assert isinstance(error, KafkaError)
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with connect_as(secured, ADMIN) as wire:
        grant(wire, [Acl(Res.CLUSTER, "kafka-cluster", Op.CREATE)])
    (future,) = admin.create_topics([NewTopic("made", 1, 1)],
                                    request_timeout=TIMEOUT).values()
    assert outcome(future) is None


# --- real principals: TLS client certificates -----------------------------------------------------


def test_tls_principals_meet_their_acls() -> None:
    """With TLS client certificates the principals are real: an admin whose certificate names
    a super user creates ACLs through the AdminClient for another certificate's principal
    (User:CN=client, DEFAULT mapping), whose producer is refused until then."""
    with samsa.Broker(security_protocol="SSL", ssl_client_auth="required", config={
            "authorizer.class.name": AUTHORIZER, "super.users": "User:CN=admin,O=samsa",
            "auto.create.topics.enable": "false"}) as broker:
        assert broker.tls is not None
        cert, key = broker.tls.issue_client("CN=admin,O=samsa", "admin")
        admin = AdminClient(broker.client_config(**{
            "ssl.certificate.location": str(cert), "ssl.key.location": str(key),
            "socket.timeout.ms": 10000}))
        (created,) = admin.create_topics([NewTopic("payments", 1, 1)],
                                         request_timeout=TIMEOUT).values()
        assert outcome(created) is None

        assert produce_one(broker, b"denied") == KafkaError.TOPIC_AUTHORIZATION_FAILED
        write = AclBinding(ResourceType.TOPIC, "payments", ResourcePatternType.LITERAL,
                           "User:CN=client", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        (made,) = admin.create_acls([write], request_timeout=TIMEOUT).values()
        assert outcome(made) is None
        assert produce_one(broker, b"allowed") is None
        # an ACL for User:ANONYMOUS does nothing for a client with a certificate
        assert broker.server.authorizer is not None
        assert not broker.server.authorizer.authorize(ANONYMOUS, "127.0.0.1", Op.WRITE,
                                                      Res.TOPIC, "payments")
