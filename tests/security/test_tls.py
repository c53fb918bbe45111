"""TLS against real clients over TCP: one broker with three listeners, PLAINTEXT, EXTERNAL
(SSL, no client certificate asked) and INTERNAL (SSL, ``ssl.client.auth=required`` as a
``listener.name.internal.`` override), certificates from a CA made for the test.

confluent-kafka, kafka-python, aiokafka and kcat produce and consume over SSL with and without
client certificates; each client is told its own listener's endpoints in Metadata; the
principal comes from the client certificate through ``ssl.principal.mapping.rules``; a failed
handshake (plaintext bytes, no certificate, another CA's, an expired one) closes that
connection with one log line while established clients go on.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from waiting import wait_for

import samsa
from samsa.embedded import TlsFiles
from samsa.security.ca import CertificateAuthority
from samsa.server.connection import Connection

from .roundtrip import DEADLINE, consume, produce

pytestmark = pytest.mark.timeout(120)


RULES = "RULE:^CN=([^,]*),OU=eng,.*$/$1/L,DEFAULT"
_BODY = struct.pack(">hhih", 18, 0, 7, 4) + b"test"  # ApiVersions v0, correlation id 7
API_VERSIONS = struct.pack(">i", len(_BODY)) + _BODY


@pytest.fixture(scope="module")
def broker() -> Iterator[samsa.Broker]:
    with samsa.Broker(security_protocol="SSL", num_partitions=1, config={
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL,INTERNAL:SSL",
        "listener.name.internal.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": RULES,
    }) as b:
        yield b


def tls_of(broker: samsa.Broker) -> TlsFiles:
    assert broker.tls is not None
    return broker.tls


def port_of(broker: samsa.Broker, listener: str) -> int:
    return int(broker.bootstrap_for(listener).rsplit(":", 1)[1])


# --- real clients -------------------------------------------------------------------------


def test_confluent_kafka_with_and_without_a_client_certificate(broker: samsa.Broker) -> None:
    values = [b"value-%d" % i for i in range(200)]
    produce(broker.client_config("EXTERNAL"), "confluent", values)  # no certificate
    inside = broker.client_config("INTERNAL")
    assert "ssl.certificate.location" in inside  # required there
    # a group: FindCoordinator must name the INTERNAL endpoint for this consumer to join
    assert consume(inside, "confluent", len(values)) == values


def test_large_fetches_go_through_the_tls_transport(broker: samsa.Broker) -> None:
    """Regions of 64 KiB and more go out with sendfile on PLAINTEXT; over TLS they are read
    and encrypted: both read back byte for byte."""
    values = [bytes([i % 251]) * 30_000 + b"%d" % i for i in range(120)]  # 3.6 MB
    produce(broker.client_config("PLAINTEXT"), "large", values)
    assert consume(broker.client_config("EXTERNAL"), "large", len(values), "tls") == values
    assert consume(broker.client_config("PLAINTEXT"), "large", len(values), "plain") == values


def test_produces_large_and_small_go_through_the_tls_session(broker: samsa.Broker) -> None:
    """Over TLS: requests larger than the connection's read buffer (1 MB batches of 30 kB
    values), and many small ones where librdkafka sends a TLS record per message; both read
    back byte for byte, over TLS and over PLAINTEXT."""
    large = [bytes([i % 251]) * 30_000 + b"%d" % i for i in range(120)]  # 3.6 MB
    produce(broker.client_config("EXTERNAL"), "tls-large", large)
    small = [b"small-%d" % i for i in range(20_000)]
    tls_producer = {**broker.client_config("EXTERNAL"), "batch.num.messages": 50}
    produce(tls_producer, "tls-small", small)
    for topic, values in (("tls-large", large), ("tls-small", small)):
        assert consume(broker.client_config("EXTERNAL"), topic, len(values), "tls") == values
        assert consume(broker.client_config("PLAINTEXT"), topic, len(values), "p") == values


def test_kafka_python(broker: samsa.Broker) -> None:
    tls = tls_of(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_for("INTERNAL"),
                             security_protocol="SSL", ssl_cafile=str(tls.ca_file),
                             ssl_certfile=str(tls.client_cert_file),
                             ssl_keyfile=str(tls.client_key_file),
                             max_block_ms=int(DEADLINE * 1000))
    try:
        for i in range(50):
            producer.send("kafka-python", b"kp-%d" % i)
        producer.flush(timeout=DEADLINE)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer("kafka-python", bootstrap_servers=broker.bootstrap_for("EXTERNAL"),
                             security_protocol="SSL", ssl_cafile=str(tls.ca_file),
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=int(DEADLINE * 1000))
    got: list[bytes] = []
    try:
        for message in consumer:
            got.append(message.value)
            if len(got) == 50:
                break
    finally:
        consumer.close(autocommit=False)
    assert got == [b"kp-%d" % i for i in range(50)]


def test_aiokafka(broker: samsa.Broker) -> None:
    tls = tls_of(broker)

    async def run() -> list[bytes]:
        with_certificate = create_ssl_context(cafile=str(tls.ca_file),
                                              certfile=str(tls.client_cert_file),
                                              keyfile=str(tls.client_key_file))
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_for("INTERNAL"),
                                    security_protocol="SSL", ssl_context=with_certificate)
        await asyncio.wait_for(producer.start(), DEADLINE)
        try:
            for i in range(50):
                await producer.send("aiokafka", b"aio-%d" % i)
            await asyncio.wait_for(producer.flush(), DEADLINE)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_for("EXTERNAL"),
                                    security_protocol="SSL",
                                    ssl_context=create_ssl_context(cafile=str(tls.ca_file)),
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await asyncio.wait_for(consumer.start(), DEADLINE)
        got: list[bytes] = []
        try:
            consumer.assign([TopicPartition("aiokafka", 0)])
            deadline = time.monotonic() + DEADLINE
            while len(got) < 50 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"aio-%d" % i for i in range(50)]


def test_kcat(broker: samsa.Broker) -> None:
    assert shutil.which("kcat"), "kcat is not installed: run `make test` (apt package kcat)"
    tls = tls_of(broker)

    def kcat(listener: str, *args: str, certificate: bool, stdin: str | None = None) -> str:
        command = ["kcat", "-b", broker.bootstrap_for(listener), "-X", "security.protocol=SSL",
                   "-X", f"ssl.ca.location={tls.ca_file}"]
        if certificate:
            command += ["-X", f"ssl.certificate.location={tls.client_cert_file}",
                        "-X", f"ssl.key.location={tls.client_key_file}"]
        result = subprocess.run([*command, *args], input=stdin, capture_output=True,
                                text=True, timeout=DEADLINE)
        assert result.returncode == 0, f"kcat {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    lines = [f"line {i}" for i in range(20)]
    kcat("INTERNAL", "-P", "-t", "kcat", certificate=True, stdin="\n".join(lines) + "\n")
    out = kcat("EXTERNAL", "-C", "-t", "kcat", "-o", "beginning", "-e", "-q", certificate=False)
    assert out.splitlines() == lines
    listing = kcat("INTERNAL", "-L", "-t", "kcat", certificate=True)
    assert f"broker 1001 at {broker.bootstrap_for('INTERNAL')}" in listing


# --- listeners ------------------------------------------------------------------------------


def test_each_client_is_told_its_own_listeners_endpoints(broker: samsa.Broker) -> None:
    for listener in ("PLAINTEXT", "EXTERNAL", "INTERNAL"):
        admin = AdminClient(broker.client_config(listener))
        brokers = admin.list_topics(timeout=DEADLINE).brokers
        assert [(b.id, f"{b.host}:{b.port}") for b in brokers.values()] == [
            (1001, broker.bootstrap_for(listener))], listener
    assert len({broker.bootstrap_for(n) for n in ("PLAINTEXT", "EXTERNAL", "INTERNAL")}) == 3


# --- principals -----------------------------------------------------------------------------


def tls_client(broker: samsa.Broker, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls_of(broker).ca_file))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def connection_of(broker: samsa.Broker, sock: socket.socket) -> Connection:
    host, port = sock.getsockname()[:2]
    peer = f"{host}:{port}"
    return wait_for(lambda: next((c for c in list(broker.server.connections)
                                  if c.peer == peer), None), DEADLINE, f"the connection of {peer}")


def principal_of(broker: samsa.Broker, listener: str, context: ssl.SSLContext | None) -> str:
    """Connect, have one request answered (so the broker authenticated the connection), and
    read the principal the broker holds for it."""
    with socket.create_connection(("127.0.0.1", port_of(broker, listener)), timeout=10) as raw:
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
        sock.sendall(API_VERSIONS)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        assert struct.unpack(">i", recv_exact(sock, size)[:4])[0] == 7
        connection = connection_of(broker, sock)
        assert connection.listener_name == listener
        return str(connection.principal)


def test_principal_from_the_client_certificate(broker: samsa.Broker,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="samsa.server.connection")
    tls = tls_of(broker)
    alice = tls.issue_client("CN=Alice,OU=eng,O=Example,C=US")
    bob = tls.issue_client("CN=bob,OU=ops,O=Example")
    # RULE:^CN=([^,]*),OU=eng,.*$/$1/L maps alice; bob falls through to DEFAULT: the whole
    # name as the JDK writes it
    assert principal_of(broker, "INTERNAL", tls_client(broker, alice)) == "User:alice"
    assert principal_of(broker, "INTERNAL", tls_client(broker, bob)) == (
        "User:CN=bob,OU=ops,O=Example")
    assert principal_of(broker, "EXTERNAL", tls_client(broker)) == "User:ANONYMOUS"
    assert principal_of(broker, "EXTERNAL", tls_client(broker, alice)) == "User:ANONYMOUS"
    assert principal_of(broker, "PLAINTEXT", None) == "User:ANONYMOUS"
    assert any("authenticated on listener INTERNAL as User:alice" in r.getMessage()
               for r in caplog.records)


# --- failures -------------------------------------------------------------------------------


def refused(port: int, context: ssl.SSLContext | None) -> str:
    """Connect (with TLS when ``context``), send an ApiVersions request and read: how the
    broker ended it (the client's TLS error, or 'closed'); never an answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
        local = raw.getsockname()[1]
        try:
            sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
            sock.sendall(API_VERSIONS)
            received = b""
            while chunk := sock.recv(4096):
                received += chunk
        except (ssl.SSLError, ConnectionError) as exc:
            return f"{local} {type(exc).__name__}"
    # plaintext bytes: at most a TLS alert record (content type 21) comes back, then EOF
    assert received == b"" or received[0] == 0x15, received[:16]
    return f"{local} closed"


def test_a_close_notify_is_answered(broker: samsa.Broker) -> None:
    """A client that ends the session (close_notify) gets the broker's close_notify back, as
    asyncio's TLS client waits for (the broker's own connections to other brokers close so);
    the request before it was answered."""
    with socket.create_connection(("127.0.0.1", port_of(broker, "EXTERNAL")), timeout=10) as raw:
        sock = tls_client(broker).wrap_socket(raw, server_hostname="127.0.0.1")
        sock.sendall(API_VERSIONS)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        assert struct.unpack(">i", recv_exact(sock, size)[:4]) == (7,)  # the correlation id
        sock.unwrap()  # sends close_notify, then waits (10 s at most) for the broker's


def test_failed_handshakes_close_only_that_connection(broker: samsa.Broker,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    tls = tls_of(broker)
    # an established client, before and after
    producer = Producer({**broker.client_config("INTERNAL"), "linger.ms": 0})
    producer.produce("survivor", b"before")
    assert producer.flush(DEADLINE) == 0
    now = datetime.datetime.now(datetime.UTC)
    expired = tls.issue_client("CN=expired", not_before=now - datetime.timedelta(days=10),
                               not_after=now - datetime.timedelta(days=1))
    stranger_ca = CertificateAuthority("CN=another CA")
    stranger = stranger_ca.issue("CN=stranger").write(tls.directory, "stranger")
    internal, external = port_of(broker, "INTERNAL"), port_of(broker, "EXTERNAL")
    cases = {
        "plaintext bytes": (external, None, "SSL handshake failed"),
        "no certificate where one is required": (internal, tls_client(broker),
                                                 "peer did not return a certificate"),
        "another CA's certificate": (internal, tls_client(broker, stranger),
                                     "certificate verify failed"),
        "an expired certificate": (internal, tls_client(broker, expired),
                                   "certificate has expired"),
    }
    for what, (port, context, reason) in cases.items():
        local = refused(port, context).split()[0]

        def logged(local: str = local, reason: str = reason) -> list[logging.LogRecord]:
            return [r for r in caplog.records
                    if f"Failed authentication with 127.0.0.1:{local} " in r.getMessage()
                    and reason in r.getMessage()]

        records = wait_for(logged, DEADLINE, f"the log line of {what}",
                           details=lambda: "\n".join(r.getMessage() for r in caplog.records))
        assert len(records) == 1, what
        assert records[0].exc_info is None and "\n" not in records[0].getMessage(), what
        wait_for(lambda local=local: not any(c.peer.endswith(f":{local}")
                                             for c in list(broker.server.connections)),
                 DEADLINE, f"the connection of {what} to go")
    # the broker is unharmed: the established client goes on, a new one connects
    producer.produce("survivor", b"after")
    assert producer.flush(DEADLINE) == 0
    assert consume(broker.client_config("EXTERNAL"), "survivor", 2) == [b"before", b"after"]


def test_a_name_no_rule_maps_is_refused(tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    with samsa.Broker(tmp_path, security_protocol="SSL", ssl_client_auth="required",
                      ssl_principal_mapping_rules="RULE:^CN=([^,]*),OU=eng$/$1/") as b:
        tls = tls_of(b)
        engineer = tls.issue_client("CN=carol,OU=eng")
        assert principal_of(b, "SSL", tls_client(b, engineer)) == "User:carol"
        local = refused(b.port, tls_client(b, (tls.client_cert_file, tls.client_key_file)))
        wait_for(lambda: any(f"127.0.0.1:{local.split()[0]} " in r.getMessage()
                             and "No rules apply to CN=client" in r.getMessage()
                             for r in caplog.records), DEADLINE, "the refusal's log line")


@pytest.mark.samsa_broker(security_protocol="SSL", ssl_client_auth="required")
def test_the_fixture_starts_a_tls_broker(samsa_broker: samsa.Broker) -> None:
    config = samsa_broker.client_config()
    assert config["security.protocol"] == "SSL" and "ssl.key.location" in config
    produce(config, "fixture", [b"over tls"])
    assert consume(config, "fixture", 1) == [b"over tls"]
