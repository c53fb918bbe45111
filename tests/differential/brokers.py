"""The two brokers the differential tests compare: Apache Kafka's own, the release pinned in
``kafka/pom.xml`` (one KRaft node, broker and controller in one JVM, started from Maven's jars),
and samsa's, in this process, both configured alike (``SHARED_CONFIG``).

``make reference`` resolves Kafka's jars; ``kafka_classpath()`` runs that rule first when its
output is missing or older than the pom, as tests/reference does.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import built
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.tools.cluster import die_with_parent
from samsa.tools.zookeeper_server import free_port

ROOT = built.ROOT
BUILD = ROOT / "build" / "kafka-server"
CLASSPATH = BUILD / "classpath.txt"
START_TIMEOUT_S = 120
NODE_ID = 1

# Both brokers get these (Kafka's names): nothing is created behind the scenarios' backs, one
# partition for the internal topics (Kafka creates 50 of each otherwise, seconds of JVM time),
# and replication factors one node can meet.
SHARED_CONFIG: dict[str, Any] = {
    "auto.create.topics.enable": "false",
    "num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}

# A server JVM that starts quickly on a small machine: the C1 compiler only, the serial
# collector, a small heap. The broker's logs (slf4j-simple) go to its log file, WARN and above.
JVM_OPTIONS = [
    "-Xmx512m", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]


def kafka_classpath() -> str:
    """Kafka's jars, after ``make`` brought build/kafka-server up to date."""
    return built.classpath(CLASSPATH, "Apache Kafka's broker (make reference)")


def _answers_api_versions(address: str) -> bool:
    try:
        with FrameClient(address, timeout=5) as client:
            response = client.request(18, 3, {"client_software_name": "samsa-differential",
                                              "client_software_version": "1"})
            if response.error_code != 0:
                return False
            # served, and the broker knows itself (registered and unfenced)
            metadata = client.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})
            return bool(metadata.brokers)
    except OSError:
        return False


@contextmanager
def kafka_broker(directory: Path) -> Iterator[str]:
    """Apache Kafka in KRaft combined mode on free loopback ports: its bootstrap address."""
    java = shutil.which("java")
    assert java is not None, "a Java runtime is needed (make apt installs one)"
    classpath = kafka_classpath()
    port, controller_port = free_port(), free_port()
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "data"
    properties = {
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "log.dirs": str(data),
        **SHARED_CONFIG,
    }
    config = directory / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    command = [java, *JVM_OPTIONS, "-cp", classpath]
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F  # an id that starts with '-' would read as an option
    cluster_id = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    formatted = subprocess.run(
        [*command, "kafka.tools.StorageTool", "format", "--standalone",
         "--cluster-id", cluster_id, "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False)
    assert formatted.returncode == 0, (
        f"kafka-storage format failed:\n{formatted.stdout[-3000:]}\n{formatted.stderr[-3000:]}")
    log_path = directory / "kafka.log"
    address = f"127.0.0.1:{port}"
    with log_path.open("w") as log:
        # killed with this process too, should it die before the cleanup below
        process = subprocess.Popen([*command, "kafka.Kafka", str(config)], stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=die_with_parent(signal.SIGKILL))
    try:
        def ready() -> bool:
            assert process.poll() is None, (
                f"Kafka exited {process.returncode}:\n{log_path.read_text()[-4000:]}")
            return _answers_api_versions(address)

        wait_for(ready, timeout=START_TIMEOUT_S, interval=0.2, what="Kafka to serve",
                 details=lambda: log_path.read_text()[-4000:])
        yield address
    finally:
        # its data is thrown away: no controlled shutdown to wait for
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@contextmanager
def samsa_broker(directory: Path) -> Iterator[str]:
    """samsa, in this process, configured as the Kafka broker is: its bootstrap address."""
    with samsa.Broker(directory / "data", config={**SHARED_CONFIG, "broker.id": NODE_ID}) as b:
        yield b.bootstrap_servers
