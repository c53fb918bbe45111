"""Kafka's own server.properties starts samsa: the ZooKeeper-mode file Kafka 3.x ships (with a
real ZooKeeper), and Kafka 4's KRaft file once its KRaft-only lines are gone; those lines get a
one-line refusal that names the key and what to use instead. Keys for Kafka's thread pools are
accepted with no effect and shown by DescribeConfigs; the socket buffer keys apply."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

import samsa
from samsa.tools.zookeeper_server import ZooKeeperServer, free_port

pytestmark = pytest.mark.timeout(120)

SAMSA = str(Path(sys.executable).parent / "samsa")
DEADLINE = 30.0

# Kafka 3.9's config/server.properties, comments shortened, log.dirs as a placeholder
KAFKA_ZK = """\
############################# Server Basics #############################
# The id of the broker. This must be set to a unique integer for each broker.
broker.id=0

############################# Socket Server Settings #############################
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
#listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs={log_dirs}
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Retention Policy #############################
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

############################# Zookeeper #############################
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000

############################# Group Coordinator Settings #############################
group.initial.rebalance.delay.ms=0
"""

# Kafka 4's config/server.properties (KRaft, combined broker and controller)
KAFKA_KRAFT_ONLY = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
controller.listener.names=CONTROLLER
"""
KAFKA_KRAFT_REST = """\
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={log_dirs}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def serve(properties: Path, port: int, log: Path, *overrides: str) -> subprocess.Popen[bytes]:
    """``samsa server <properties>`` on 127.0.0.1:``port``, until it answers Metadata."""
    args = [SAMSA, "server", str(properties),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    for override in overrides:
        args += ["--override", override]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("ab"))
    deadline = time.monotonic() + DEADLINE
    while True:
        assert proc.poll() is None, f"samsa server exited: {log.read_text()}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def round_trip(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [b"v%d" % i for i in range(50)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(DEADLINE) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "props",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == values


def broker_configs(bootstrap: str, broker_id: int) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(DEADLINE)
    return {name: entry.value for name, entry in entries.items()}


def test_kafkas_zookeeper_mode_file_starts_a_cluster_broker(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(KAFKA_ZK.format(log_dirs=tmp_path / "kafka-logs"))
    port = free_port()
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        proc = serve(properties, port, tmp_path / "server.log",
                     f"zookeeper.connect={zookeeper.connect_string}")
        try:
            bootstrap = f"127.0.0.1:{port}"
            round_trip(bootstrap, "from-kafkas-file")
            configs = broker_configs(bootstrap, 0)
            assert configs["num.network.threads"] == "3"
            assert configs["num.io.threads"] == "8"
            assert configs["socket.receive.buffer.bytes"] == "102400"
            assert configs["log.retention.hours"] == "168"
        finally:
            stop(proc)
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_kafkas_kraft_file_is_refused_in_one_line_per_kraft_key(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    rest = KAFKA_KRAFT_REST.format(log_dirs=tmp_path / "kraft-logs")
    properties.write_text(KAFKA_KRAFT_ONLY + rest)
    result = subprocess.run([SAMSA, "server", str(properties)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["samsa: process.roles is a KRaft-only configuration: remove it: samsa is "
                     "one broker on its own, or brokers coordinated by ZooKeeper "
                     "(zookeeper.connect)"], result.stderr
    for key, instead in (("node.id", "use broker.id"),
                         ("controller.quorum.bootstrap.servers", "zookeeper.connect"),
                         ("controller.listener.names", "no controller listener")):
        properties.write_text(f"{key}=1\n" + rest)
        result = subprocess.run([SAMSA, "server", str(properties)], capture_output=True,
                                text=True, timeout=30)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode != 0 and len(lines) == 1, result.stderr
        assert key in lines[0] and instead in lines[0], lines[0]

    # without its KRaft-only lines, the file starts a single node
    properties.write_text(rest)
    port = free_port()
    proc = serve(properties, port, tmp_path / "server.log",
                 f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}")
    try:
        round_trip(f"127.0.0.1:{port}", "from-kraft-file")
    finally:
        stop(proc)


def test_socket_buffer_sizes_apply(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path, config={"socket.send.buffer.bytes": 65536,
                                        "socket.receive.buffer.bytes": 32768}) as broker:
        listening = broker.server._servers[0].sockets[0]
        # Linux doubles what is set (the rest is its bookkeeping)
        assert listening.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 2 * 65536
        assert listening.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * 32768
        round_trip(broker.bootstrap_servers, "buffers")
    with samsa.Broker(tmp_path / "default") as broker:  # -1: the kernel's own
        listening = broker.server._servers[0].sockets[0]
        with socket.socket() as fresh:
            assert listening.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == \
                fresh.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def test_deprecated_message_format_keys_are_accepted_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """log.message.format.version (broker) and message.format.version (topic), which existing
    Kafka 2.x configs carry: accepted with one warning each, as Kafka 3.x does; no effect."""
    caplog.set_level(logging.WARNING, logger="samsa.config")
    with samsa.Broker(tmp_path, config={"log.message.format.version": "2.8"}) as broker:
        assert any("log.message.format.version is deprecated" in r.getMessage()
                   for r in caplog.records)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("legacy", 1, 1, config={
            "message.format.version": "2.8"})])["legacy"].result(DEADLINE)
        assert any("topic legacy: message.format.version is deprecated" in r.getMessage()
                   for r in caplog.records)
        resource = ConfigResource(ResourceType.TOPIC, "legacy")
        entries = admin.describe_configs([resource])[resource].result(DEADLINE)
        assert entries["message.format.version"].value == "2.8"
        round_trip(broker.bootstrap_servers, "legacy")
