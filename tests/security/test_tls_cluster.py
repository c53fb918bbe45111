"""Three brokers on a real ZooKeeper whose inter-broker listener is SSL
(``security.inter.broker.protocol=SSL``, ``ssl.client.auth=required``, host names checked):
followers fetch over TLS with their own certificates (acks=all with min.insync.replicas=3
completes only if they do), transaction markers reach other leaders over TLS, the
registrations carry each listener's protocol, and each client is told its own listener's
endpoints of every broker."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient
from waiting import wait_for

import samsa
from samsa.security.acl import AclOperation as Op
from samsa.security.acl import ResourceType as Res
from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority
from samsa.tools.zookeeper_server import ZooKeeperServer

from .roundtrip import acked_and_transactional

pytestmark = pytest.mark.timeout(180)

DEADLINE = 30.0


@contextlib.contextmanager
def tls_cluster(tmp_path: Path, config: dict[str, Any] | None = None
                ) -> Iterator[tuple[list[samsa.Broker], CertificateAuthority, KazooClient]]:
    """Three brokers whose inter-broker listener is SSL, each with its own certificate
    (``CN=broker-<id>``), client certificates required there; ``config`` on every broker."""
    ca = CertificateAuthority()
    ca_file = ca.write(tmp_path / "ca.pem")
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        brokers: list[samsa.Broker] = []
        zk = KazooClient(hosts=zookeeper.connect_string)
        zk.start(timeout=15)
        try:
            for i in (1, 2, 3):
                keystore = ca.issue(f"CN=broker-{i}", hosts=LOCAL_HOSTS).write_keystore(
                    tmp_path / f"broker-{i}.pem")
                broker = samsa.Broker(tmp_path / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    "zookeeper.session.timeout.ms": 6000,
                    "replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 200,
                    "replica.lag.time.max.ms": 10000,
                    "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 3,
                    "transaction.state.log.num.partitions": 3,
                    "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                    "security.inter.broker.protocol": "SSL",
                    "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file),
                    "ssl.client.auth": "required",
                    **(config or {}),
                })
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 3, DEADLINE,
                         "every broker to see the others")
            yield brokers, ca, zk
        finally:
            for b in brokers:
                b.stop()
            zk.stop()
            zk.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[samsa.Broker], Path, KazooClient]]:
    with tls_cluster(tmp_path) as (brokers, ca, zk):
        yield brokers, ca.issue("CN=client").write(tmp_path, "client")[0], zk


def tls_client(brokers: list[samsa.Broker], cert: Path) -> dict[str, str]:
    return {"bootstrap.servers": ",".join(b.bootstrap_for("SSL") for b in brokers),
            "security.protocol": "SSL", "ssl.ca.location": str(cert.parent / "ca.pem"),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(cert.with_suffix(".key"))}


def test_replication_and_markers_over_tls(
        cluster: tuple[list[samsa.Broker], Path, KazooClient]) -> None:
    brokers, client_cert, zk = cluster
    registration = json.loads(zk.get("/brokers/ids/1")[0])
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                              "SSL": "SSL"}
    assert registration["endpoints"] == [
        f"PLAINTEXT://{brokers[0].bootstrap_for('PLAINTEXT')}",
        f"SSL://{brokers[0].bootstrap_for('SSL')}"]

    plain = {"bootstrap.servers": ",".join(b.bootstrap_for("PLAINTEXT") for b in brokers)}
    tls = tls_client(brokers, client_cert)
    for config, listener in ((plain, "PLAINTEXT"), (tls, "SSL")):
        seen = AdminClient(config).list_topics(timeout=DEADLINE).brokers
        assert {b.id: f"{b.host}:{b.port}" for b in seen.values()} == {
            i + 1: b.bootstrap_for(listener) for i, b in enumerate(brokers)}

    admin = AdminClient(plain)
    admin.create_topics([NewTopic("replicated", 3, 3, config={"min.insync.replicas": "3"})],
                        operation_timeout=DEADLINE)["replicated"].result(DEADLINE)
    wait_for(lambda: all(
        p.leader >= 0 for p in admin.list_topics("replicated", timeout=DEADLINE)
        .topics["replicated"].partitions.values()), DEADLINE, "leaders")
    leaders = {p.leader for p in admin.list_topics("replicated", timeout=DEADLINE)
               .topics["replicated"].partitions.values()}
    assert len(leaders) == 3  # one partition led by each broker: markers cross brokers

    acked_and_transactional(tls, plain, "tls-txn",
                            lambda ready, what: wait_for(ready, DEADLINE, what, interval=0))
    # every follower's log holds them too
    for b in brokers:
        for index in range(3):
            partition = b.server.replicas.partition("replicated", index)
            assert partition is not None and partition.log.log_end_offset >= 100 + 10
    # the followers fetched from the leaders' SSL endpoints, with the inter-broker TLS context
    ssl_ports = {i + 1: b.bootstrap_for("SSL") for i, b in enumerate(brokers)}
    for b in brokers:
        manager = b.server.replica_manager
        assert manager is not None and manager.fetchers
        for leader, fetcher in manager.fetchers.items():
            assert "{}:{}".format(*fetcher.leader) == ssl_ports[leader]
            assert fetcher.ssl_context is b.server.inter_broker.ssl_context is not None


BROKERS_AND_ADMIN = "User:CN=broker-1;User:CN=broker-2;User:CN=broker-3;User:CN=admin"


def test_brokers_are_authorized_as_their_certificates_principals(tmp_path: Path) -> None:
    """With an authorizer on, brokers talk to each other as the principals of their
    certificates (super users here) while a client's certificate gets only what its ACLs
    allow: its acks=all writes with min.insync.replicas=3 complete once it may write, which
    needs both followers' fetches (CLUSTER_ACTION) authorized as the brokers."""
    with tls_cluster(tmp_path, {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": BROKERS_AND_ADMIN}) as (brokers, ca, _zk):
        admin_cert = ca.issue("CN=admin").write(tmp_path, "admin")[0]
        client_cert = ca.issue("CN=client").write(tmp_path, "client")[0]
        admin = AdminClient(tls_client(brokers, admin_cert))
        admin.create_topics([NewTopic("guarded", 3, 3, config={"min.insync.replicas": "3"})],
                            operation_timeout=DEADLINE)["guarded"].result(DEADLINE)

        refused = Producer({**tls_client(brokers, client_cert), "acks": "all",
                            "message.timeout.ms": 5000})
        errors: list[Any] = []
        refused.produce("guarded", b"no", partition=0,
                        on_delivery=lambda err, _msg: errors.append(err))
        refused.flush(DEADLINE)
        assert errors and errors[0] is not None, "a client without an ACL wrote"
        assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]

        created = admin.create_acls([AclBinding(
            ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:CN=client", "*",
            AclOperation.WRITE, AclPermissionType.ALLOW)])
        for future in created.values():
            future.result(DEADLINE)

        def allowed_everywhere() -> bool:  # every broker has applied the ACL
            return all(b.server.authorizer is not None and b.server.authorizer.authorize(
                "User:CN=client", "127.0.0.1", Op.WRITE, Res.TOPIC, "guarded")
                for b in brokers)

        wait_for(allowed_everywhere, DEADLINE, "the ACL on every broker")
        producer = Producer({**tls_client(brokers, client_cert), "acks": "all",
                             "message.timeout.ms": 30000})
        delivered: list[Any] = []
        for i in range(90):
            producer.produce("guarded", b"yes-%d" % i, partition=i % 3,
                             on_delivery=lambda err, _msg: delivered.append(err))
        assert producer.flush(DEADLINE) == 0
        assert delivered == [None] * 90, [e for e in delivered if e is not None][:3]
