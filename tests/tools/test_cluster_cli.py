"""``samsa cluster up/down``: a real ZooKeeper and three broker processes on loopback ports.

``up`` runs as a subprocess until it prints the bootstrap servers; a replicated topic written
with acks=all survives ``down`` and a second ``up`` on the same data dir, and ``down`` leaves no
process and no port behind. Every failure (nothing to stop, a port in use, a broker that exits
while starting, ZooKeeper missing) is one ``samsa:`` line and exit 1.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from samsa.tools.zookeeper_server import port_in_use

from . import RUN_TIMEOUT_S, error_line, free_port, ok

pytestmark = pytest.mark.timeout(150)

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0

# ``samsa cluster`` through samsa.cli.run (its one-line errors and exit codes)
_RUNNER = "import samsa.cli as cli; cli.run()"


def cluster_cli(*args: str | int | Path) -> subprocess.CompletedProcess[str]:
    """Run ``samsa cluster ARGS`` to its end; stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-c", _RUNNER, "cluster", *map(str, args)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )


def cluster_ports(brokers: int) -> tuple[int, int]:
    """A base port with ``brokers`` free ports from it, and a free ZooKeeper port."""
    for _ in range(100):
        base = free_port()
        if base + brokers <= 65535 and not any(
            port_in_use(base + i) for i in range(brokers)
        ):
            zookeeper = free_port()
            if not base <= zookeeper < base + brokers:
                return base, zookeeper
    raise AssertionError("no run of free loopback ports")


def processes_using(data_dir: Path) -> list[str]:
    """Live processes whose command line names ``data_dir`` (brokers, ZooKeeper, ``up``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if any(str(data_dir) in arg for arg in args):
            found.append(f"{entry.name}: {' '.join(args)[:200]}")
    return found


class Up:
    """A running ``samsa cluster up`` subprocess; its stdout lines read by a thread."""

    def __init__(self, data_dir: Path, brokers: int, port: int, zookeeper_port: int) -> None:
        self.data_dir = data_dir
        self.stderr_path = data_dir.parent / f"up-{time.monotonic_ns()}.err"
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _RUNNER, "cluster", "up", "--brokers", str(brokers),
                 "--data-dir", str(data_dir), "--port", str(port),
                 "--zookeeper-port", str(zookeeper_port)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout.append(line.rstrip("\n"))
            self.lines.put(line.rstrip("\n"))

    def details(self) -> str:
        logs = "\n".join(
            f"{log.name}: {log.read_text(errors='replace')[-1500:]}"
            for log in sorted(self.data_dir.glob("broker-*.log"))
        )
        return (f"exit code {self.proc.poll()}\nstdout: {self.stdout}\nstderr: "
                f"{self.stderr_path.read_text(errors='replace')}\n{logs}")

    def wait_ready(self) -> dict[str, str]:
        """The ``key=value`` lines ``up`` prints once the cluster serves."""
        got: dict[str, str] = {}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "bootstrap.servers" not in got or "zookeeper.connect" not in got:
            if time.monotonic() > deadline:
                raise AssertionError(f"up printed no bootstrap line in time\n{self.details()}")
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(f"up exited early\n{self.details()}") from None
                continue
            key, sep, value = line.partition("=")
            if sep:
                got[key] = value
        return got

    def wait_exit(self) -> int:
        return self.proc.wait(STOP_TIMEOUT_S)

    def kill(self) -> None:
        """Cleanup after a failed test: SIGTERM (a clean stop), SIGKILL if that hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def start_up(tmp_path: Path) -> Iterator[Callable[..., Up]]:
    """Start ``up`` subprocesses; whatever still runs at the end is stopped."""
    started: list[Up] = []

    def start(data_dir: Path, brokers: int, port: int, zookeeper_port: int) -> Up:
        up = Up(data_dir, brokers, port, zookeeper_port)
        started.append(up)
        return up

    yield start
    for up in started:
        up.kill()
    for up in started:  # anything a killed ``up`` left behind
        with contextlib.suppress(Exception):
            cluster_cli("down", "--data-dir", up.data_dir)


def produce(servers: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30_000})
    errors: list[object] = []
    for i, value in enumerate(values):
        producer.produce(topic, value, key=str(i).encode(),
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
    assert producer.flush(40) == 0, "messages left unacknowledged"
    assert not errors, errors


def read_all(servers: str, topic: str, partitions: int) -> list[bytes]:
    """Every message of the topic, from offset 0 to the end of each partition."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "cluster-cli-check",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"partitions {ended} ended, got {len(got)}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    ended.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def full_isr(admin: AdminClient, topic: str, replicas: int) -> bool:
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    return bool(meta.partitions) and all(
        p.leader >= 0 and len(p.replicas) == replicas and len(p.isrs) == replicas
        for p in meta.partitions.values()
    )


def assert_all_stopped(data_dir: Path, ports: list[int]) -> None:
    assert not (data_dir / "cluster.pid").exists()
    wait_for(lambda: not processes_using(data_dir), timeout=10,
             what="no process of the cluster", details=lambda: str(processes_using(data_dir)))
    busy = [port for port in ports if port_in_use(port)]
    assert not busy, f"ports still bound: {busy}"


# --- a cluster up, down, and up again ------------------------------------------------------------


def test_up_down_up_keeps_a_replicated_topic(
    tmp_path: Path, start_up: Callable[..., Up]
) -> None:
    data_dir = tmp_path / "cluster"
    port, zookeeper_port = cluster_ports(3)
    ports = [port, port + 1, port + 2]
    servers = ",".join(f"127.0.0.1:{p}" for p in ports)

    up = start_up(data_dir, 3, port, zookeeper_port)
    ready = up.wait_ready()
    assert ready["bootstrap.servers"] == servers
    assert ready["zookeeper.connect"] == f"127.0.0.1:{zookeeper_port}"
    assert (data_dir / "cluster.pid").read_text().strip() == str(up.proc.pid)
    assert {p.name for p in data_dir.iterdir()} >= {
        "zookeeper", "broker-1", "broker-2", "broker-3", "broker-1.log", "cluster.pid"}

    admin = AdminClient({"bootstrap.servers": servers})
    meta = admin.list_topics(timeout=10)
    assert {b.id: (b.host, b.port) for b in meta.brokers.values()} == {
        i + 1: ("127.0.0.1", p) for i, p in enumerate(ports)}
    assert meta.controller_id in (1, 2, 3)

    # a second ``up`` on the same data dir is refused while this one runs
    again = cluster_cli("up", "--brokers", 3, "--data-dir", data_dir, "--port", port,
                        "--zookeeper-port", zookeeper_port)
    assert "already running" in error_line(again)
    assert again.returncode == 1

    admin.create_topics([NewTopic("kept", 3, 3)])["kept"].result(30)
    wait_for(lambda: full_isr(admin, "kept", 3), timeout=30, what="leaders and full ISRs")
    values = [f"message-{i}".encode() for i in range(30)]
    produce(servers, "kept", values)
    assert sorted(read_all(servers, "kept", 3)) == sorted(values)

    down = cluster_cli("down", "--data-dir", data_dir)
    assert "stopped" in ok(down), down
    assert down.stderr == ""
    assert up.wait_exit() == 0, up.details()
    assert up.stdout[-1] == "cluster stopped"
    assert_all_stopped(data_dir, [*ports, zookeeper_port])

    # up again on the same data dir: the same brokers, the topic and its messages
    up = start_up(data_dir, 3, port, zookeeper_port)
    assert up.wait_ready()["bootstrap.servers"] == servers
    admin_again = AdminClient({"bootstrap.servers": servers})
    wait_for(lambda: full_isr(admin_again, "kept", 3), timeout=30,
             what="the topic back, in sync")
    assert sorted(read_all(servers, "kept", 3)) == sorted(values)

    ok(cluster_cli("down", "--data-dir", data_dir))
    assert up.wait_exit() == 0, up.details()
    assert_all_stopped(data_dir, [*ports, zookeeper_port])


# --- failures: one line each ---------------------------------------------------------------------


def test_down_with_nothing_running_is_one_line(tmp_path: Path) -> None:
    result = cluster_cli("down", "--data-dir", tmp_path)
    assert "no cluster is running from" in error_line(result)
    assert result.returncode == 1

    # a pid file whose process is gone: one line, and the stale file is removed
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "cluster.pid").write_text(f"{gone.pid}\n")
    result = cluster_cli("down", "--data-dir", tmp_path)
    assert "stale pid file" in error_line(result)
    assert result.returncode == 1
    assert not (tmp_path / "cluster.pid").exists()


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    port, zookeeper_port = cluster_ports(2)
    for busy in (port + 1, zookeeper_port):
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", busy))
            holder.listen()
            result = cluster_cli("up", "--brokers", 2, "--data-dir", tmp_path / "c", "--port",
                                 port, "--zookeeper-port", zookeeper_port)
        line = error_line(result)
        assert f"127.0.0.1:{busy}" in line and "in use" in line, line
        assert result.returncode == 1
        assert not (tmp_path / "c" / "cluster.pid").exists()
        assert not processes_using(tmp_path / "c")


def test_a_broker_exiting_while_starting_is_one_line_with_its_log(tmp_path: Path) -> None:
    data_dir = tmp_path / "c"
    port, zookeeper_port = cluster_ports(2)
    result = cluster_cli("up", "--brokers", 2, "--data-dir", data_dir, "--port", port,
                         "--zookeeper-port", zookeeper_port, "--override", "no.such.key=1")
    line = error_line(result)
    assert "exited with code 1 while starting" in line, line
    assert "no.such.key" in line and "broker-" in line, line  # the log's tail, and which log
    assert result.returncode == 1
    assert_all_stopped(data_dir, [port, port + 1, zookeeper_port])


def test_zookeeper_missing_and_bad_options_are_one_line(tmp_path: Path) -> None:
    no_java_dir = (
        "import pathlib, samsa.tools.zookeeper_server as z\n"
        f"z.JAVA_DIR = pathlib.Path({str(tmp_path)!r})\n"
        "import samsa.cli as cli; cli.run()\n"
    )
    port, zookeeper_port = cluster_ports(1)
    result = subprocess.run(
        [sys.executable, "-c", no_java_dir, "cluster", "up", "--brokers", "1", "--data-dir",
         str(tmp_path / "c"), "--port", str(port), "--zookeeper-port", str(zookeeper_port)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert "ZooKeeper is not installed" in error_line(result)
    assert result.returncode == 1
    assert not (tmp_path / "c" / "cluster.pid").exists()

    result = cluster_cli("up", "--data-dir", tmp_path / "c", "--override", "broker.id=7")
    assert "--override may not set broker.id" in error_line(result)
    result = cluster_cli("up", "--data-dir", tmp_path / "c", "--port", 9000,
                         "--zookeeper-port", 9001)
    assert "is one of the brokers' ports" in error_line(result)
    assert not processes_using(tmp_path / "c")
    assert os.listdir(tmp_path / "c") == []
