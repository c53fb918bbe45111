"""Three brokers on a real ZooKeeper whose inter-broker listener is SSL
(``security.inter.broker.protocol=SSL``, ``ssl.client.auth=required``, host names checked):
followers fetch over TLS with their own certificates (acks=all with min.insync.replicas=3
completes only if they do), transaction markers reach other leaders over TLS, the
registrations carry each listener's protocol, and each client is told its own listener's
endpoints of every broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from waiting import wait_for

import samsa
from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(180)

DEADLINE = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[samsa.Broker], Path, KazooClient]]:
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
                })
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 3, DEADLINE,
                         "every broker to see the others")
            client = ca.issue("CN=client").write(tmp_path, "client")
            yield brokers, client[0], zk
        finally:
            for b in brokers:
                b.stop()
            zk.stop()
            zk.close()


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
    tls = {"bootstrap.servers": ",".join(b.bootstrap_for("SSL") for b in brokers),
           "security.protocol": "SSL", "ssl.ca.location": str(client_cert.parent / "ca.pem"),
           "ssl.certificate.location": str(client_cert),
           "ssl.key.location": str(client_cert.with_suffix(".key"))}
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

    # acks=all with min.insync.replicas=3: answered only once both followers fetched it
    producer = Producer({**tls, "acks": "all", "linger.ms": 5})
    for i in range(300):
        producer.produce("replicated", b"acked-%d" % i, partition=i % 3)
    assert producer.flush(DEADLINE) == 0

    # a transaction over all three partitions: its markers go to the other two leaders
    txn = Producer({**tls, "transactional.id": "tls-txn"})
    txn.init_transactions(DEADLINE)
    txn.begin_transaction()
    for i in range(30):
        txn.produce("replicated", b"txn-%d" % i, partition=i % 3)
    txn.commit_transaction(DEADLINE)

    consumer = Consumer({**plain, "group.id": "reader", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe(["replicated"])
    got: set[bytes] = set()

    def read_all() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.add(message.value())
        return len(got) == 330

    try:
        wait_for(read_all, DEADLINE, "every record, committed transaction included",
                 interval=0)
    finally:
        consumer.close()
    assert got == {b"acked-%d" % i for i in range(300)} | {b"txn-%d" % i for i in range(30)}
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
