"""SASL_SSL between brokers: three ``samsa server`` processes on a real ZooKeeper
(tests/cluster/processes.py) whose inter-broker listener is SASL_SSL with SCRAM-SHA-512, the
brokers' own credentials in the listener's JAAS config (``username`` / ``password``, as Kafka's
ScramLoginModule).

The brokers' SCRAM user is created through one broker (AlterUserScramCredentials on its
PLAINTEXT listener), as is a client's: both land in ZooKeeper as Kafka keeps them
(``/config/users/<user>`` and a ``users/<user>`` change notification), every broker follows the
notification, and then: the followers fetch over SASL_SSL (acks=all with min.insync.replicas=3
completes only if they do), transaction markers reach the other leaders, and the client logs
in at each broker.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster.processes import ProcessCluster, new_leaders, process_cluster
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka_frames import FrameClient

from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority
from samsa.security.sasl.jaas import SCRAM_LOGIN_MODULE, jaas_config
from samsa.security.sasl.scram import ScramClient, ScramCredential
from samsa.security.sasl.scram import ScramMechanism as Mechanism
from samsa.tools.zookeeper_server import free_port
from samsa.zk.zk_data import decode_config_change, decode_entity_config

from .roundtrip import acked_and_transactional, consume, produce

pytestmark = pytest.mark.timeout(300)

DEADLINE = 40.0
BROKER_SECRET = "broker-secret"
ALICE_SECRET = "alice-secret"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ProcessCluster, Path, dict[int, int]]]:
    ca = CertificateAuthority()
    ca_file = ca.write(tmp_path / "ca.pem")
    sasl_ports = {i: free_port() for i in (1, 2, 3)}
    overrides = {
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas_config(
            SCRAM_LOGIN_MODULE, {"username": "broker", "password": BROKER_SECRET}),
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file),
        "transaction.state.log.num.partitions": "3",
    }
    per_broker = {}
    for i, port in sasl_ports.items():
        keystore = ca.issue(f"CN=broker-{i}", hosts=LOCAL_HOSTS).write_keystore(
            tmp_path / f"broker-{i}.pem")
        per_broker[i] = {"listeners": f"PLAINTEXT://127.0.0.1:{{port}},"
                                      f"SASL_SSL://127.0.0.1:{port}",
                         "ssl.keystore.location": str(keystore)}
    with process_cluster(tmp_path, 3, overrides, per_broker) as running:
        yield running, ca_file, sasl_ports


def create_user(admin: AdminClient, user: str, mechanism: ScramMechanism,
                password: str) -> None:
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, 4096), password.encode())])
    futures[user].result(DEADLINE)


def logs_in(port: int, ca_file: Path, user: str, password: str) -> bool:
    """A SCRAM-SHA-256 login over SASL_SSL at one broker, in raw frames."""
    context = ssl.create_default_context(cafile=str(ca_file))
    with FrameClient(("127.0.0.1", port)) as frames:
        frames.sock = context.wrap_socket(frames.sock, server_hostname="127.0.0.1")
        if frames.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code != 0:
            return False
        client = ScramClient(Mechanism.SCRAM_SHA_256, user, password)
        message: bytes | None = client.first_message()
        try:
            while message is not None:
                answer = frames.request(36, 1, {"auth_bytes": message})
                if answer.error_code != 0:
                    return False
                message = client.evaluate(answer.auth_bytes)
        except (TimeoutError, ConnectionError):
            return False
        return client.complete


def test_brokers_authenticate_to_each_other_and_users_reach_every_broker(
        cluster: tuple[ProcessCluster, Path, dict[int, int]]) -> None:
    running, ca_file, sasl_ports = cluster
    zk = running.zk
    assert zk is not None
    registration = json.loads(zk.get("/brokers/ids/2")[0])
    assert registration["listener_security_protocol_map"]["SASL_SSL"] == "SASL_SSL"

    # through broker 1 only (its PLAINTEXT listener, as an admin's way in)
    admin = AdminClient({"bootstrap.servers": running.broker(1).address})
    create_user(admin, "broker", ScramMechanism.SCRAM_SHA_512, BROKER_SECRET)
    create_user(admin, "alice", ScramMechanism.SCRAM_SHA_256, ALICE_SECRET)

    # Kafka's layout: the user entity's config, and a change notification for it
    data, _ = zk.get("/config/users/alice")
    stored = decode_entity_config(data).config
    assert set(stored) == {"SCRAM-SHA-256"}
    assert ScramCredential.from_string(stored["SCRAM-SHA-256"]).iterations == 4096
    paths = set()
    for child in zk.get_children("/config/changes"):
        change = decode_config_change(zk.get(f"/config/changes/{child}")[0])
        paths.add(change.entity_path)
    assert {"users/alice", "users/broker"} <= paths

    # every broker followed the notifications: alice logs in at each
    running.wait(lambda: all(logs_in(port, ca_file, "alice", ALICE_SECRET)
                             for port in sasl_ports.values()),
                 "alice to log in at every broker", timeout=DEADLINE)
    assert not logs_in(sasl_ports[3], ca_file, "alice", "wrong")

    running.create_topic("replicated", 3, 3, {"min.insync.replicas": "3"})
    leaders = {running.state("replicated", p).leader for p in range(3)}  # type: ignore[union-attr]
    assert leaders == {1, 2, 3}  # one partition led by each broker: markers cross brokers

    # a client of broker 2's SASL_SSL listener alone
    client = {"bootstrap.servers": f"127.0.0.1:{sasl_ports[2]}",
              "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca_file),
              "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
              "sasl.password": ALICE_SECRET}
    # over SASL_SSL with the brokers' SCRAM credentials: followers fetch, markers go out
    acked_and_transactional(
        client, {**client, "bootstrap.servers": f"127.0.0.1:{sasl_ports[3]}"}, "sasl-txn",
        lambda ready, what: running.wait(ready, what, timeout=DEADLINE, topics=["replicated"]))
    for broker_id in (2, 3):
        assert "SCRAM credentials of user alice changed" in running.broker(broker_id).log_text()

    # failover: the leader goes, a follower that fetched over SASL_SSL leads with every
    # acknowledged write; the old leader comes back and catches up over SASL_SSL (the ISR is
    # full again only if it did), then the new leader goes too and the data is still there
    everywhere = {**client, "bootstrap.servers": ",".join(
        f"127.0.0.1:{port}" for port in sasl_ports.values())}
    running.create_topic("failover", 1, 3, {"min.insync.replicas": "2"})
    running.wait_full_isr("failover", [0], timeout=DEADLINE)
    before = [b"before-%d" % i for i in range(300)]
    produce({**everywhere, "acks": "all"}, "failover", before)
    for round_ in (1, 2):
        state = running.state("failover", 0)
        assert state is not None
        victim = state.leader
        running.kill(victim)
        running.wait(new_leaders(running, "failover", [0], victim),
                     f"a new leader after broker {victim} was killed", timeout=DEADLINE,
                     topics=["failover"])
        if round_ == 1:
            after = [b"after-%d" % i for i in range(300)]
            produce({**everywhere, "acks": "all"}, "failover", after)
            running.restart(victim)
            running.wait_full_isr("failover", [0], timeout=DEADLINE)
    assert consume(everywhere, "failover", len(before) + len(after)) == before + after
    for broker_id in (1, 2, 3):
        assert "Traceback" not in running.broker(broker_id).log_text()
