"""ZooKeeper and the brokers as real processes, each in its own network namespace
(``netns.Network``), driven from the ``ctl`` namespace where the workloads run.

Process faults: ``kill`` (SIGKILL), ``restart`` (same id and log dir), ``pause`` / ``resume``
(SIGSTOP / SIGCONT), and ``set_clock``: the broker's wall clock moved by some seconds (the
``clock_shim``, loaded into every broker). Each broker has a disk of its own, a tmpfs that a
fault can fill up, with its log dir ``logs`` on it; with ``failing_disks`` it has a second log
dir, ``broker-<id>-eio``: tests/faults/faultfs.py over the same disk, whose writes a fault can
make fail with EIO.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from cluster.processes import BrokerProcessControl, Launch, controller_id, registered_brokers
from faults.faultfs import FaultFs, unmount
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from waiting import wait_for

from samsa.tools.zookeeper_server import ZooKeeperServer

from .netns import Network, Node

SHIM_DIR = Path(__file__).resolve().parent / "clock_shim"
PROJECT_DIR = Path(__file__).resolve().parents[2]
BROKER_PORT = 9092
DISK_SIZE = "256m"  # each broker's log dir: a tmpfs (a fault fills it up)
SESSION_TIMEOUT_MS = 6000
STOP_TIMEOUT_S = 20  # from SIGTERM to SIGKILL, when a broker is stopped
# Kafka's names, small timeouts so that faults are noticed and repaired in seconds.
OVERRIDES: dict[str, str] = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.lag.time.max.ms": "4000",
    "replica.socket.timeout.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
}


@dataclass
class BrokerNode(BrokerProcessControl):
    """A broker on its node: started in the node's network namespace, with the clock shim."""

    broker_id: int
    node: Node
    zookeeper_connect: str
    work_dir: Path
    overrides: dict[str, str]
    failing_dir: FaultFs | None = None  # the second log dir, whose writes can fail
    started_by: ClassVar[str] = "chaos"
    pause_needs_running: ClassVar[bool] = False  # a fault may pause a broker another killed

    @property
    def address(self) -> str:
        return f"{self.node.ip}:{BROKER_PORT}"

    @property
    def disk(self) -> Path:
        """The tmpfs under every log dir of the broker."""
        return self.work_dir / f"broker-{self.broker_id}"

    @property
    def log_dirs(self) -> list[Path]:
        dirs = [self.disk / "logs"]
        if self.failing_dir is not None:
            dirs.append(self.failing_dir.mountpoint)
        return dirs

    @property
    def log_path(self) -> Path:
        return self.work_dir / f"broker-{self.broker_id}.log"

    @property
    def clock_file(self) -> Path:
        return self.work_dir / f"broker-{self.broker_id}.clock"

    def command(self) -> list[str]:
        settings = {
            **self.overrides,
            "zookeeper.connect": self.zookeeper_connect,
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.address}",
            "log.dirs": ",".join(map(str, self.log_dirs)),
        }
        command = [sys.executable, "-m", "samsa.cli", "server"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        return command

    def launch(self) -> Launch:
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        if not self.clock_file.exists():
            self.clock_file.write_text("0\n")
        env = dict(os.environ, SAMSA_CLOCK_FILE=str(self.clock_file),
                   PYTHONPATH=os.pathsep.join([str(SHIM_DIR), str(PROJECT_DIR)]))
        return Launch(self.command(), cwd=self.work_dir, env=env,
                      launcher=tuple(self.node.exec_prefix()))

    def set_clock(self, offset_s: float) -> None:
        """Move this broker's wall clock ``offset_s`` seconds from the true time."""
        tmp = self.clock_file.with_suffix(".tmp")
        tmp.write_text(f"{offset_s}\n")
        tmp.replace(self.clock_file)

    def restart(self) -> None:
        """Stopped (SIGTERM, then SIGKILL after STOP_TIMEOUT_S) if it runs, and started again."""
        self.terminate(STOP_TIMEOUT_S)
        self.start()


@dataclass
class ChaosCluster:
    """ZooKeeper on node ``zk`` and brokers 1..n on nodes ``b1``..``bn`` of ``network``."""

    network: Network
    work_dir: Path
    size: int = 3
    overrides: dict[str, str] = field(default_factory=dict)
    failing_disks: bool = False  # a second log dir on each broker that a fault can fail
    zookeeper: ZooKeeperServer | None = None
    zk: KazooClient | None = None
    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    _mounted: list[Path] = field(default_factory=list)

    def start(self, timeout: float = 90) -> None:
        zk_node = self.network["zk"]
        self.zookeeper = ZooKeeperServer(self.work_dir / "zk", host=zk_node.ip,
                                         launcher=zk_node.exec_prefix())
        self.zookeeper.start()
        self.zk = KazooClient(hosts=self.zookeeper.connect_string)
        self.zk.start(timeout=30)
        settings = {**OVERRIDES, **self.overrides}
        for i in range(1, self.size + 1):
            self.brokers[i] = BrokerNode(i, self.network[f"b{i}"],
                                         self.zookeeper.connect_string, self.work_dir, settings)
        for broker in self.brokers.values():
            # each broker a disk of its own, that a fault can fill up (mounted before the
            # broker starts, so the broker's mount namespace has it too)
            broker.disk.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs",
                            str(broker.disk)], check=True, capture_output=True)
            self._mounted.append(broker.disk)
            if self.failing_disks:
                broker.failing_dir = FaultFs(broker.disk / "eio",
                                             self.work_dir / f"broker-{broker.broker_id}-eio")
                broker.failing_dir.__enter__()
        for broker in self.brokers.values():
            broker.start()
        self.wait(lambda: self.registered() == set(self.brokers) and self.controller(),
                  "every broker registered and a controller", timeout)

    def close(self) -> None:
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.terminate(STOP_TIMEOUT_S)
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
        if self.zookeeper is not None:
            with contextlib.suppress(Exception):
                self.zookeeper.close()
        for broker in self.brokers.values():
            if broker.failing_dir is not None:
                with contextlib.suppress(Exception):
                    broker.failing_dir.close()
        for path in self._mounted:
            with contextlib.suppress(Exception):
                unmount(path)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    # --- what ZooKeeper says --------------------------------------------------------------
    # (while a network fault cuts ZooKeeper off: nothing read, no error)

    def registered(self) -> set[int]:
        assert self.zk is not None
        return registered_brokers(self.zk, tolerate=(Exception,))

    def controller(self) -> int | None:
        assert self.zk is not None
        return controller_id(self.zk, tolerate=(Exception,))

    def offline_replicas(self, broker_id: int) -> set[tuple[str, int]]:
        """The replicas the broker lists as in its offline log dirs (samsa's znode)."""
        assert self.zk is not None
        try:
            data, _ = self.zk.get(f"/samsa/offline_replicas/{broker_id}")
        except NoNodeError:
            return set()
        return {(e["topic"], e["partition"]) for e in json.loads(data)["partitions"]}

    def partition_states(self, topic: str) -> dict[int, dict[str, Any]]:
        assert self.zk is not None
        out = {}
        try:
            for p in self.zk.get_children(f"/brokers/topics/{topic}/partitions"):
                data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
                out[int(p)] = json.loads(data)
        except NoNodeError:
            pass
        return out

    def details(self, topics: tuple[str, ...] = ()) -> str:
        lines = [f"registered: {sorted(self.registered())}, controller: {self.controller()}"]
        for topic in topics:
            with contextlib.suppress(Exception):
                lines += [f"{topic}-{p}: {s}" for p, s in
                          sorted(self.partition_states(topic).items())]
        for broker in self.brokers.values():
            lines.append(f"--- broker {broker.broker_id} (running: {broker.running}, "
                         f"paused: {broker.paused}) ---")
            lines.append(broker.log_tail(30))
        return "\n".join(lines)

    def wait(self, predicate: Any, what: str, timeout: float = 60,
             topics: tuple[str, ...] = ()) -> Any:
        return wait_for(predicate, timeout=timeout, what=what, interval=0.2,
                        details=lambda: self.details(topics))

    def wait_full_isr(self, topic: str, partitions: int, timeout: float = 90) -> None:
        def full() -> bool:
            states = self.partition_states(topic)
            return len(states) == partitions and all(
                s["leader"] >= 0 and len(s["isr"]) == self.size for s in states.values())
        self.wait(full, f"{topic}: a leader and a full ISR everywhere", timeout, (topic,))
