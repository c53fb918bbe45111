"""The tools on samsa's own wire client (``samsa.tools.wire``: ``samsa transactions``, ``samsa
reassign-partitions``, ``samsa groups --delete-offsets``) over TLS and SASL, as their
``--command-config`` says: run as subprocesses against an embedded SASL_SSL broker (SCRAM-SHA-256)
and an SSL broker, over TCP; a wrong password, an untrusted CA and a mechanism the client lacks
are one ``samsa:`` line each, exit status 1, no traceback.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.embedded import Broker
from samsa.security.ca import CertificateAuthority

from . import error_line, ok, samsa, unique

pytestmark = pytest.mark.timeout(120)

WAIT_S = 30.0


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[Broker]:
    with Broker(security_protocol="SASL_SSL", users={"admin": "admin-secret"},
                sasl_mechanism="SCRAM-SHA-256") as broker:
        yield broker


@pytest.fixture(scope="module")
def ssl_broker() -> Iterator[Broker]:
    with Broker(security_protocol="SSL") as broker:
        yield broker


def properties(path: Path, config: Mapping[str, Any]) -> Path:
    """A --command-config file of a client config, less bootstrap.servers."""
    path.write_text("".join(f"{k}={v}\n" for k, v in config.items()
                            if k != "bootstrap.servers"))
    return path


def ongoing_transaction(broker: Broker) -> tuple[str, Producer]:
    """A transactional producer (over the broker's secured listener) inside a transaction."""
    transactional_id = unique("secure-txn")
    producer = Producer(broker.client_config(**{"transactional.id": transactional_id}))
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(unique("secure-topic"), b"v")
    producer.flush(WAIT_S)
    return transactional_id, producer


def committed_group(broker: Broker) -> tuple[str, str]:
    """A topic, and a group (no members) with an offset committed on its partition 0."""
    admin = AdminClient(broker.client_config())
    topic, group = unique("secure-topic"), unique("secure-group")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 0)])])[group].result(WAIT_S)
    return topic, group


def wire_tools_work(broker: Broker, config: Path) -> None:
    """transactions list and describe, reassign-partitions --list, groups --list and
    --delete-offsets."""
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    transactional_id, producer = ongoing_transaction(broker)
    try:
        out = ok(samsa("transactions", *bs, "--command-config", config, "list"))
        rows = [line.split() for line in out.splitlines()[1:]]
        assert [r[-1] for r in rows if r[0] == transactional_id] == ["Ongoing"], out
        out = ok(samsa("transactions", *bs, "--command-config", config, "describe",
                       "--transactional-id", transactional_id))
        assert "Ongoing" in out, out
    finally:
        producer.abort_transaction(WAIT_S)

    out = ok(samsa("reassign-partitions", *bs, "--command-config", config, "--list"))
    assert out == "No partition reassignments found.\n"

    topic, group = committed_group(broker)
    out = ok(samsa("groups", *bs, "--command-config", config, "--list", "--type", "--state"))
    assert [group, "Classic", "Empty"] in [line.split() for line in out.splitlines()], out
    out = ok(samsa("groups", *bs, "--command-config", config, "--delete-offsets",
                   "--group", group, "--topic", topic))
    assert out.splitlines()[0] == f"Request succeeded for deleting offsets from group {group}."
    assert out.split()[-3:] == [topic, "0", "Successful"], out


def test_sasl_ssl_scram(sasl_broker: Broker, tmp_path: Path) -> None:
    config = sasl_broker.client_config()
    assert config["sasl.mechanism"] == "SCRAM-SHA-256"
    wire_tools_work(sasl_broker, properties(tmp_path / "sasl.properties", config))


def test_ssl(ssl_broker: Broker, tmp_path: Path) -> None:
    config = ssl_broker.client_config()
    assert config["security.protocol"] == "SSL"
    wire_tools_work(ssl_broker, properties(tmp_path / "ssl.properties", config))


def test_wrong_password(sasl_broker: Broker, tmp_path: Path) -> None:
    """The broker's SASL error message, one line, exit status 1, no traceback."""
    bs = ["--bootstrap-server", sasl_broker.bootstrap_servers]
    config = properties(tmp_path / "wrong.properties",
                        sasl_broker.client_config(**{"sasl.password": "not-the-secret"}))
    for args in (["transactions", *bs, "--command-config", config, "list"],
                 ["reassign-partitions", *bs, "--command-config", config, "--list"]):
        result = samsa(*args)
        line = error_line(result)
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert "SASL SCRAM-SHA-256 authentication as admin failed" in line, line
        assert "SASL_AUTHENTICATION_FAILED" in line and "invalid credentials" in line, line


def test_untrusted_ca(ssl_broker: Broker, tmp_path: Path) -> None:
    """A CA that did not sign the broker's certificate: the TLS handshake fails, one line."""
    other_ca = CertificateAuthority().write(tmp_path / "other-ca.pem")
    config = properties(tmp_path / "other-ca.properties",
                        ssl_broker.client_config(**{"ssl.ca.location": other_ca}))
    result = samsa("transactions", "--bootstrap-server", ssl_broker.bootstrap_servers,
                   "--command-config", config, "list")
    line = error_line(result)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"TLS handshake with {ssl_broker.bootstrap_servers} failed: " in line, line
    assert "certificate" in line, line


@pytest.mark.parametrize(("settings", "message"), [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
     "sasl.mechanism=GSSAPI is not supported (one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"},
     "sasl.mechanism=OAUTHBEARER is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
     "PLAIN needs sasl.username and sasl.password"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "ks.p12"},
     "ssl.keystore.location is not supported"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
     "cannot load the TLS files"),
    ({"security.protocol": "KERBEROS"}, "unsupported security.protocol=KERBEROS"),
])
def test_unsupported_settings(tmp_path: Path, settings: dict[str, str], message: str) -> None:
    """Refused before any connection: one line naming the setting."""
    config = properties(tmp_path / "bad.properties", settings)
    for args in (["transactions", "--bootstrap-server", "127.0.0.1:1", "--command-config",
                  config, "list"],
                 ["reassign-partitions", "--bootstrap-server", "127.0.0.1:1",
                  "--command-config", config, "--list"]):
        result = samsa(*args)
        assert message in error_line(result), result.stderr
        assert result.returncode == 1
