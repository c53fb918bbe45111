"""SASL against real clients over TCP: one broker with a SASL_PLAINTEXT and a SASL_SSL listener
(on a CA made for the test), each offering PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER
(Kafka's unsecured validator).

confluent-kafka (every mechanism on both listeners, with a consumer group), kafka-python,
aiokafka and kcat (every mechanism, on one listener or the other) log in, produce and consume;
the broker holds each connection's principal as ``User:<name>`` (on SASL_SSL the SASL user,
not the client certificate); PLAIN's users come from a JAAS config that DescribeConfigs does
not show; the fixture starts a SASL broker with one line.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider
from waiting import wait_for

import samsa
from samsa.security.sasl.jaas import PLAIN_LOGIN_MODULE, jaas_config
from samsa.security.sasl.oauthbearer import unsecured_token

from .roundtrip import DEADLINE, consume, produce

pytestmark = pytest.mark.timeout(180)


USERS = {"alice": "alice-secret", "bob": "b0b's \"secret\""}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")


@pytest.fixture(scope="module")
def broker() -> Iterator[samsa.Broker]:
    # SASL_SSL's PLAIN users in its listener's JAAS config (what samsa.Broker writes);
    # SASL_PLAINTEXT's from the broker-level sasl.jaas.config, which samsa takes for the
    # mechanism its login module names
    with samsa.Broker(security_protocol="SASL_SSL", users=USERS, sasl_mechanism="OAUTHBEARER",
                      num_partitions=1, config={
                          "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                          "sasl.jaas.config": jaas_config(
                              PLAIN_LOGIN_MODULE, {f"user_{u}": p for u, p in USERS.items()}),
                          "listener.name.sasl_ssl.ssl.client.auth": "requested",
                      }) as b:
        yield b


def principals(broker: samsa.Broker, listener: str) -> set[str]:
    return {str(c.principal) for c in list(broker.server.connections)
            if c.listener_name == listener}


# --- confluent-kafka (librdkafka) -------------------------------------------------------------


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(broker: samsa.Broker, listener: str, mechanism: str) -> None:
    topic = f"ck-{listener}-{mechanism}".lower()
    user = "bob" if mechanism == "SCRAM-SHA-512" else "alice"
    config = broker.client_config(listener, user=user, sasl_mechanism=mechanism)
    assert config["security.protocol"] == listener and config["sasl.mechanism"] == mechanism
    values = [b"%s-%d" % (mechanism.encode(), i) for i in range(30)]
    producer = Producer({**config, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(DEADLINE) == 0
    assert f"User:{user}" in principals(broker, listener)
    del producer
    # a consumer group: FindCoordinator, JoinGroup, SyncGroup, OffsetCommit over SASL
    assert consume(config, topic, len(values), f"g-{topic}") == values


def test_on_sasl_ssl_the_principal_is_the_sasl_user(broker: samsa.Broker) -> None:
    config = broker.client_config("SASL_SSL", user="bob", sasl_mechanism="PLAIN")
    assert "ssl.certificate.location" in config  # it shows CN=client as well
    producer = Producer(config)
    assert producer.list_topics(timeout=DEADLINE).brokers

    def authenticated_as_bob() -> bool:
        # a connection librdkafka opened meanwhile has the certificate's principal until its
        # SASL exchange is over
        found = principals(broker, "SASL_SSL")
        return "User:bob" in found and not any("CN=client" in p for p in found)

    wait_for(authenticated_as_bob, timeout=DEADLINE,
             what="every SASL_SSL connection to be authenticated as User:bob")
    del producer


def test_the_jaas_config_is_not_shown(broker: samsa.Broker) -> None:
    admin = AdminClient(broker.client_config("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256"))
    resource = ConfigResource(ResourceType.BROKER, "1001")
    entries = admin.describe_configs([resource])[resource].result(DEADLINE)
    jaas = entries["sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    assert entries["sasl.enabled.mechanisms"].value == ",".join(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"))


# --- kafka-python ------------------------------------------------------------------------------


class KafkaPythonToken(AbstractTokenProvider):
    def token(self) -> str:
        return unsecured_token("alice", 300)


class AioToken(AioTokenProvider):
    async def token(self) -> str:
        return unsecured_token("alice", 300)


def python_client_args(broker: samsa.Broker, listener: str, mechanism: str) -> dict[str, Any]:
    args: dict[str, Any] = {"bootstrap_servers": broker.bootstrap_for(listener),
                            "security_protocol": listener, "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        args["sasl_oauth_token_provider"] = KafkaPythonToken()
    else:
        args.update(sasl_plain_username="bob", sasl_plain_password=USERS["bob"])
    if listener == "SASL_SSL":
        assert broker.tls is not None
        args["ssl_cafile"] = str(broker.tls.ca_file)
    return args


@pytest.mark.parametrize(("mechanism", "listener"), [
    ("PLAIN", "SASL_SSL"), ("SCRAM-SHA-256", "SASL_PLAINTEXT"), ("SCRAM-SHA-512", "SASL_SSL"),
    ("OAUTHBEARER", "SASL_PLAINTEXT")])
def test_kafka_python(broker: samsa.Broker, mechanism: str, listener: str) -> None:
    topic = f"kp-{mechanism}".lower()
    args = python_client_args(broker, listener, mechanism)
    producer = KafkaProducer(**args, max_block_ms=int(DEADLINE * 1000))
    try:
        for i in range(20):
            producer.send(topic, b"kp-%d" % i)
        producer.flush(timeout=DEADLINE)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, **args, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=int(DEADLINE * 1000))
    got: list[bytes] = []
    try:
        for message in consumer:
            got.append(message.value)
            if len(got) == 20:
                break
    finally:
        consumer.close(autocommit=False)
    assert got == [b"kp-%d" % i for i in range(20)]


# --- aiokafka ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("mechanism", "listener"), [
    ("PLAIN", "SASL_PLAINTEXT"), ("SCRAM-SHA-256", "SASL_SSL"),
    ("SCRAM-SHA-512", "SASL_PLAINTEXT"), ("OAUTHBEARER", "SASL_SSL")])
def test_aiokafka(broker: samsa.Broker, mechanism: str, listener: str) -> None:
    topic = f"aio-{mechanism}".lower()

    def args() -> dict[str, Any]:
        found: dict[str, Any] = {"bootstrap_servers": broker.bootstrap_for(listener),
                                 "security_protocol": listener, "sasl_mechanism": mechanism}
        if mechanism == "OAUTHBEARER":
            found["sasl_oauth_token_provider"] = AioToken()
        else:
            found.update(sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
        if listener == "SASL_SSL":
            assert broker.tls is not None
            found["ssl_context"] = create_ssl_context(cafile=str(broker.tls.ca_file))
        return found

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**args())
        await asyncio.wait_for(producer.start(), DEADLINE)
        try:
            for i in range(20):
                await producer.send(topic, b"aio-%d" % i)
            await asyncio.wait_for(producer.flush(), DEADLINE)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**args(), enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await asyncio.wait_for(consumer.start(), DEADLINE)
        got: list[bytes] = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            deadline = time.monotonic() + DEADLINE
            while len(got) < 20 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"aio-%d" % i for i in range(20)]


# --- kcat --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mechanism", "listener"), [
    ("PLAIN", "SASL_SSL"), ("SCRAM-SHA-256", "SASL_PLAINTEXT"), ("SCRAM-SHA-512", "SASL_SSL"),
    ("OAUTHBEARER", "SASL_PLAINTEXT")])
def test_kcat(broker: samsa.Broker, mechanism: str, listener: str) -> None:
    assert shutil.which("kcat"), "kcat is not installed: run `make test` (apt package kcat)"
    settings = broker.client_config(listener, user="alice", sasl_mechanism=mechanism,
                                    client_certificate=False)
    command = ["kcat", "-b", settings.pop("bootstrap.servers")]
    for key, value in settings.items():
        command += ["-X", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    topic = f"kcat-{mechanism}".lower()
    lines = [f"line {i}" for i in range(10)]

    def kcat(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run([*command, *args], input=stdin, capture_output=True,
                                text=True, timeout=DEADLINE)
        assert result.returncode == 0, f"kcat {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    kcat("-P", "-t", topic, stdin="\n".join(lines) + "\n")
    assert kcat("-C", "-t", topic, "-o", "beginning", "-e", "-q").splitlines() == lines


# --- the fixture -------------------------------------------------------------------------------


@pytest.mark.samsa_broker(security_protocol="SASL_PLAINTEXT", users={"carol": "carol-secret"})
def test_the_fixture_starts_a_sasl_broker(samsa_broker: samsa.Broker) -> None:
    config = samsa_broker.client_config()
    assert config["sasl.mechanism"] == "SCRAM-SHA-256" and config["sasl.username"] == "carol"
    produce(config, "fixture", [b"over sasl"])
    assert consume(config, "fixture", 1, "fixture") == [b"over sasl"]


def test_a_default_user() -> None:
    with samsa.Broker(security_protocol="SASL_SSL", sasl_mechanism="PLAIN") as b:
        assert list(b.users) == ["admin"]
        config = b.client_config()
        assert config["sasl.username"] == "admin" and config["ssl.ca.location"]
        assert Producer(config).list_topics(timeout=DEADLINE).brokers
