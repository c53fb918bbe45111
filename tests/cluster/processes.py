"""Real broker processes on a real ZooKeeper, for tests that kill, freeze and restart brokers.

``ProcessCluster`` runs N ``python -m samsa.cli server`` processes (the command line of
``samsa.tools.cluster.BrokerProcess``: broker ids 1..N, each its own log dir, free loopback
ports) against a ``ZooKeeperServer``. Each broker's stdout and stderr are appended to
``<tmp>/broker-<id>.log`` across its restarts, so a test can read what it logged. A broker can
be SIGKILLed (``kill``), frozen and thawed (``pause`` / ``resume``: SIGSTOP / SIGCONT) and
started again with the same broker id and log dir (``restart``, once ZooKeeper has expired the
dead process's session, as a real operator would have to wait for too). That process control
is ``BrokerProcessControl``'s, which tests/chaos's brokers in network namespaces share.

The cluster's truth is read from ZooKeeper with kazoo (partition states, ``/controller``,
registrations); what clients see through Metadata with confluent-kafka's AdminClient. Every
wait has a deadline (``waiting.wait_for``) and, when it times out, prints the partition states
and the tail of every broker's log.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_frames import ConnectionClosed, FrameClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from waiting import wait_for

from samsa.records.batch import iter_headers
from samsa.records.record import decode_records
from samsa.tools.cluster import BrokerProcess, die_with_parent
from samsa.tools.zookeeper_server import ZooKeeperServer, free_port, terminate_process

HOST = "127.0.0.1"
SESSION_TIMEOUT_MS = 4000
METADATA = 3
# Small timeouts so that failures are detected and repaired in seconds.
FAST_OVERRIDES: dict[str, str] = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "replica.lag.time.max.ms": "3000",
    "replica.socket.timeout.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
}
LOG_TAIL_LINES = 25


@dataclass(frozen=True)
class Launch:
    """How a broker process starts: ``launcher`` + ``command`` in ``cwd``, with ``env`` (None:
    this process's environment). ``launcher`` is a prefix that runs the command elsewhere, as
    ``("ip", "netns", "exec", name)`` does in a network namespace."""

    command: list[str]
    cwd: Path
    env: dict[str, str] | None = None
    launcher: tuple[str, ...] = ()


@dataclass(kw_only=True)
class BrokerProcessControl(ABC):
    """A broker process that a test starts, SIGKILLs, freezes and thaws (SIGSTOP / SIGCONT) and
    stops: what ``Broker`` below and tests/chaos's ``BrokerNode`` share. A subclass has a
    ``broker_id`` (a field or a property), names its log (``log_path``: every run's output
    appended, after a header line that says who started it, ``started_by``) and says how to
    start it (``launch``).

    ``pause()`` of a broker that does not run is an error, or nothing to do where
    ``pause_needs_running`` is off (chaos faults run together: one may pause a broker another
    killed)."""

    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    paused: bool = False  # SIGSTOPped and not thawed since
    started_by: ClassVar[str] = "test"
    pause_needs_running: ClassVar[bool] = True

    if TYPE_CHECKING:  # for type checkers only: a property here would hide a subclass's field
        @property
        def broker_id(self) -> int: ...

    @property
    @abstractmethod
    def log_path(self) -> Path: ...

    @abstractmethod
    def launch(self) -> Launch:
        """Make what a run needs (its log dirs) and say how to start it."""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        assert not self.running, f"broker {self.broker_id} is already running"
        launch = self.launch()
        self.runs += 1
        self.paused = False
        with self.log_path.open("ab") as out:
            out.write(f"--- {self.started_by}: start {self.runs} of broker {self.broker_id} at"
                      f" {time.strftime('%H:%M:%S')} ---\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [*launch.launcher, *launch.command],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=launch.env, cwd=launch.cwd, preexec_fn=die_with_parent(signal.SIGKILL),
            )

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, its ZooKeeper session lives on until it expires."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP, and wait until the kernel reports it stopped (or it is gone). Nothing to do
        if it is paused already."""
        if not self.running:
            assert not self.pause_needs_running, f"broker {self.broker_id} is not running"
            return
        if self.paused:
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True
        wait_for(lambda: not self.running or self._state() in ("T", "t"), timeout=10,
                 what=f"broker {self.broker_id} to stop")

    def resume(self) -> None:
        """SIGCONT if it runs."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def _state(self) -> str:
        """The process's state letter in /proc (``T``: stopped); ``?`` once it is gone."""
        assert self.proc is not None
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return "?"
        return stat.rpartition(")")[2].split()[0]

    def terminate(self, timeout: float = 15.0) -> None:
        """Thawed, SIGTERM, SIGKILL after ``timeout`` seconds."""
        self.resume()
        if self.proc is not None:
            terminate_process(self.proc, timeout)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


@dataclass
class Broker(BrokerProcessControl):
    """One broker of a ``ProcessCluster`` on loopback; its output goes to ``log_path``."""

    spec: BrokerProcess
    zookeeper_connect: str
    overrides: dict[str, str]
    # this broker's own settings, over the spec's (log.dirs: more than its one log dir);
    # "{port}" in a value is the spec's port (listeners beside its PLAINTEXT one)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def broker_id(self) -> int:
        return self.spec.broker_id

    id = broker_id  # the name the cluster tests use

    @property
    def address(self) -> str:
        return f"{HOST}:{self.spec.port}"

    @property
    def log_path(self) -> Path:
        return self.spec.log_path

    def launch(self) -> Launch:
        self.spec.log_dir.mkdir(parents=True, exist_ok=True)
        command = self.spec.command(self.zookeeper_connect, self.overrides)
        for key, value in self.extra.items():
            command += ["--override", f"{key}={value.replace('{port}', str(self.spec.port))}"]
        return Launch(command, cwd=self.spec.log_dir.parent)


@dataclass(frozen=True)
class State:
    """A partition's state znode."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def registered_brokers(zk: KazooClient,
                       tolerate: tuple[type[Exception], ...] = (NoNodeError,)) -> set[int]:
    """The broker ids registered in ZooKeeper; none where reading them fails with one of
    ``tolerate`` (NoNodeError: none has registered yet)."""
    try:
        return {int(c) for c in zk.get_children("/brokers/ids")}
    except tolerate:
        return set()


def controller_id(zk: KazooClient,
                  tolerate: tuple[type[Exception], ...] = (NoNodeError,)) -> int | None:
    """The controller's broker id in ZooKeeper; None where reading it fails with one of
    ``tolerate`` (NoNodeError: there is no controller)."""
    try:
        data, _ = zk.get("/controller")
    except tolerate:
        return None
    return int(json.loads(data)["brokerid"])


@dataclass
class ProcessCluster:
    """ZooKeeper and ``size`` brokers (ids 1..size) under ``tmp_path``; ``overrides`` are laid
    over FAST_OVERRIDES for every broker. ``start()`` waits until all of them serve."""

    tmp_path: Path
    size: int = 3
    overrides: dict[str, str] = field(default_factory=dict)
    broker_overrides: dict[int, dict[str, str]] = field(default_factory=dict)  # broker id ->
    zookeeper: ZooKeeperServer | None = None
    zk: KazooClient | None = None
    brokers: dict[int, Broker] = field(default_factory=dict)
    _admin: AdminClient | None = None

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.zookeeper = ZooKeeperServer(self.tmp_path / "zk")
        self.zookeeper.start()
        self.zk = KazooClient(hosts=self.zookeeper.connect_string)
        self.zk.start(timeout=15)
        settings = {**FAST_OVERRIDES, **self.overrides}
        for i in range(1, self.size + 1):
            spec = BrokerProcess(i, free_port(), self.tmp_path / f"broker-{i}",
                                 self.tmp_path / f"broker-{i}.log")
            self.brokers[i] = Broker(spec, self.zookeeper.connect_string, settings,
                                     dict(self.broker_overrides.get(i, {})))
        for broker in self.brokers.values():
            broker.start()
        for attempt in range(3):
            try:
                self.wait_serving(set(self.brokers))
                return
            except AssertionError:
                # free_port() is bind-then-release: another process can take the port before
                # the broker binds it. A broker that lost its port at the first start gets a
                # new one (its later restarts keep it).
                lost = [b for b in self.brokers.values()
                        if not b.running and "address already in use" in b.log_tail()]
                if not lost or attempt == 2:
                    raise
                for broker in lost:
                    broker.spec.port = free_port()
                    broker.start()

    def close(self) -> None:
        self._admin = None
        for broker in self.brokers.values():
            broker.resume()
        for broker in self.brokers.values():
            broker.terminate()
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
        if self.zookeeper is not None:
            self.zookeeper.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap,
                                       "socket.connection.setup.timeout.ms": 3000})
        return self._admin

    def live_admin(self) -> AdminClient:
        """A new AdminClient that knows only the running brokers (a client that knew a dead
        controller may keep sending it controller requests until its metadata is refreshed)."""
        live = [b.address for b in self.brokers.values() if b.running]
        return AdminClient({"bootstrap.servers": ",".join(live)})

    def broker(self, broker_id: int) -> Broker:
        return self.brokers[broker_id]

    # --- what ZooKeeper says ----------------------------------------------------------------

    def registered(self) -> set[int]:
        assert self.zk is not None
        return registered_brokers(self.zk)

    def controller(self) -> int | None:
        assert self.zk is not None
        return controller_id(self.zk)

    def controller_epoch(self) -> int:
        assert self.zk is not None
        data, _ = self.zk.get("/controller_epoch")
        return int(data or b"0")

    def state(self, topic: str, partition: int) -> State | None:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        value = json.loads(data)
        return State(value["leader"], value["leader_epoch"], tuple(value["isr"]),
                     value["controller_epoch"])

    def replicas(self, topic: str) -> dict[int, tuple[int, ...]]:
        assert self.zk is not None
        data, _ = self.zk.get(f"/brokers/topics/{topic}")
        return {int(p): tuple(r) for p, r in json.loads(data)["partitions"].items()}

    def topic_configs(self, topic: str) -> dict[str, str]:
        assert self.zk is not None
        try:
            data, _ = self.zk.get(f"/config/topics/{topic}")
        except NoNodeError:
            return {}
        return dict(json.loads(data).get("config", {}))

    # --- what clients see -------------------------------------------------------------------

    def metadata(self, topic: str, via: int | None = None
                 ) -> dict[int, tuple[int, list[int], list[int]]] | None:
        """partition -> (leader, replicas, isr) from a Metadata request (to broker ``via``
        only: a client of its own, that knows no other broker yet); None if unanswered."""
        admin = self.admin if via is None else AdminClient({
            "bootstrap.servers": self.brokers[via].address})
        try:
            meta = admin.list_topics(topic, timeout=5)
        except KafkaException:
            return None
        found = meta.topics.get(topic)
        if found is None or found.error is not None and not found.partitions:
            return None
        return {p.id: (p.leader, list(p.replicas), list(p.isrs))
                for p in found.partitions.values()}

    def create_topic(self, topic: str, partitions: int, replication: int,
                     config: dict[str, str] | None = None) -> None:
        self.admin.create_topics([NewTopic(topic, partitions, replication,
                                           config=config or {})])[topic].result(30)
        self.wait_full_isr(topic, range(partitions), timeout=30)
        self.wait_leading(topic, range(partitions), timeout=30)

    # --- waiting ----------------------------------------------------------------------------

    def details(self, topics: Iterable[str] = ()) -> str:
        """Partition states and log tails, for a failed wait."""
        lines = [f"registered: {sorted(self.registered())}, controller: {self.controller()}"]
        for topic in topics:
            with contextlib.suppress(Exception):
                for p in sorted(self.replicas(topic)):
                    lines.append(f"{topic}-{p}: {self.state(topic, p)}")
        for broker in self.brokers.values():
            lines.append(f"--- broker {broker.id} (running: {broker.running}) ---")
            lines.append(broker.log_tail())
        return "\n".join(lines)

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = 30,
             topics: Iterable[str] = ()) -> Any:
        topics = list(topics)
        return wait_for(predicate, timeout=timeout, what=what, interval=0.1,
                        details=lambda: self.details(topics))

    def wait_serving(self, ids: set[int], timeout: float = 40) -> None:
        """Until these brokers are registered, a controller is elected and every running
        broker's Metadata lists them (a broker that has not seen the others yet would place
        replicas on fewer brokers); a broker that exits meanwhile fails the wait with its
        log's tail."""

        def listed_by(via: int) -> set[int]:
            admin = AdminClient({"bootstrap.servers": self.brokers[via].address})
            try:
                return set(admin.list_topics(timeout=5).brokers)
            except KafkaException:
                return set()

        def serving() -> bool:
            for broker_id in ids:
                _raise_exited(self.brokers[broker_id])
            if not ids <= self.registered() or self.controller() is None:
                return False
            return all(ids <= listed_by(b.id) for b in self.brokers.values()
                       if b.running and not b.paused)

        self.wait(serving, f"brokers {sorted(ids)} to serve", timeout=timeout)

    def wait_full_isr(self, topic: str, partitions: Iterable[int], timeout: float = 30) -> None:
        """Until every partition has a leader and all its replicas in its ISR."""
        wanted = list(partitions)

        def full() -> bool:
            assert self.zk is not None
            assignment = self.replicas(topic) if self.zk.exists(f"/brokers/topics/{topic}") \
                else {}
            for p in wanted:
                state = self.state(topic, p)
                if (state is None or state.leader < 0
                        or set(state.isr) != set(assignment.get(p, ()))):
                    return False
            return True

        self.wait(full, f"{topic}: leaders and full ISRs", timeout=timeout, topics=[topic])

    def leads(self, topic: str, partition: int, broker_id: int) -> bool:
        """Whether the broker itself says (in its own Metadata) that it leads the partition:
        it has applied the state znode the controller wrote, which a full ISR in ZooKeeper
        does not yet mean (each broker's watch fires in its own time)."""
        try:
            with FrameClient(self.brokers[broker_id].address, timeout=5) as client:
                meta = client.request(METADATA, 8, {
                    "topics": [{"name": topic}], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False})
        except (OSError, ConnectionClosed):
            return False
        return any(t.name == topic and p.partition_index == partition
                   and p.leader_id == broker_id and p.error_code == 0
                   for t in meta.topics for p in t.partitions)

    def wait_leading(self, topic: str, partitions: Iterable[int], timeout: float = 30) -> None:
        """Until each partition's leader in ZooKeeper says itself that it leads it."""
        wanted = list(partitions)

        def leading() -> bool:
            for p in wanted:
                state = self.state(topic, p)
                if state is None or state.leader < 0 or not self.leads(topic, p, state.leader):
                    return False
            return True

        self.wait(leading, f"{topic}: each leader to know it leads", timeout=timeout,
                  topics=[topic])

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def wait_session_gone(self, broker_id: int, timeout: float = 30) -> None:
        """Until ZooKeeper expired the session of a dead or frozen broker."""
        self.wait(lambda: broker_id not in self.registered(),
                  f"broker {broker_id}'s ZooKeeper session to expire", timeout=timeout)

    def restart(self, broker_id: int, timeout: float = 40) -> None:
        """Start a killed broker again (same id, same log dir) once its old session is gone,
        and wait until it serves."""
        broker = self.brokers[broker_id]
        assert not broker.running
        self.wait_session_gone(broker_id)
        broker.start()
        self.wait_serving({broker_id}, timeout=timeout)


def _raise_exited(broker: Broker) -> bool:
    if broker.proc is not None and broker.proc.poll() is not None:
        raise AssertionError(f"broker {broker.id} exited with code {broker.proc.returncode};"
                             f" its log ends with:\n{broker.log_tail()}")
    return True


@contextlib.contextmanager
def process_cluster(tmp_path: Path, size: int = 3, overrides: dict[str, str] | None = None,
                    broker_overrides: dict[int, dict[str, str]] | None = None
                    ) -> Iterator[ProcessCluster]:
    cluster = ProcessCluster(tmp_path, size, dict(overrides or {}), dict(broker_overrides or {}))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def new_leaders(cluster: ProcessCluster, topic: str, partitions: list[int],
                gone: int) -> Callable[[], bool]:
    """A predicate: these partitions have a leader other than ``gone``, and ``gone`` left
    their ISRs."""
    def moved() -> bool:
        for p in partitions:
            state = cluster.state(topic, p)
            if state is None or state.leader in (-1, gone) or gone in state.isr:
                return False
        return True

    return moved


# --- clients ------------------------------------------------------------------------------------


def value_of(partition: int, seq: int) -> bytes:
    return f"{partition}:{seq:08d}".encode()


def seq_of(value: bytes) -> tuple[int, int]:
    partition, seq = value.decode().split(":")
    return int(partition), int(seq)


class ContinuousProducer:
    """An idempotent acks=all producer writing in a thread, round-robin over the partitions,
    each value ``<partition>:<sequence>`` (a per-partition sequence). ``acked`` holds
    (partition, offset, sequence) of every delivery report without error."""

    def __init__(self, bootstrap: str, topic: str, partitions: int,
                 rate_per_s: float = 200.0, **config: Any) -> None:
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate_per_s
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120000,
            "error_cb": self._on_error, **config,
        })
        self.acked: list[tuple[int, int, int]] = []
        self.failed: list[tuple[int, int, str]] = []
        self.errors: list[KafkaError] = []
        self.sent = [0] * partitions
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        self.errors.append(err)

    @property
    def fatal(self) -> list[KafkaError]:
        return [e for e in self.errors if e.fatal()]

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        partition, seq = seq_of(msg.value())  # type: ignore[arg-type]
        with self._lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), seq))  # type: ignore[misc]
            else:
                self.failed.append((partition, seq, str(err)))

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        p = 0
        while not self._stop.is_set():
            seq = self.sent[p]
            try:
                self.producer.produce(self.topic, value_of(p, seq), partition=p,
                                      on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent[p] += 1
            p = (p + 1) % self.partitions
            self.producer.poll(0)
            time.sleep(self.interval)

    def wait_progress(self, more: int, timeout: float, details: Callable[[], str]) -> None:
        """Until ``more`` further messages are acknowledged."""
        target = self.acked_count() + more
        wait_for(lambda: self.acked_count() >= target or self.fatal or self.failed,
                 timeout=timeout, what=f"{more} more acknowledged messages",
                 details=details)
        assert not self.fatal, f"the idempotent producer failed: {self.fatal}"
        assert not self.failed, f"messages not delivered: {self.failed[:5]}"

    def stop(self, flush_timeout: float = 60) -> None:
        """Stop writing, wait for every delivery report, and let the client go (its
        callbacks hold it in a cycle: it would go on logging long after the test)."""
        self._stop.set()
        self._thread.join(10)
        try:
            left = self.producer.flush(flush_timeout)
        finally:
            self.producer = None  # type: ignore[assignment]
        assert left == 0, f"{left} messages neither acknowledged nor failed"


def read_partitions(bootstrap: str, topic: str, partitions: Iterable[int],
                    timeout: float = 60) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of these partitions as (offset, value), from the start to the high
    watermark each has when the reading starts."""
    wanted = list(partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in wanted}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                for p in wanted}
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        position = dict.fromkeys(wanted, 0)
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in wanted):
            assert time.monotonic() < deadline, (
                f"read {position} of {topic} by the deadline, the ends are {ends}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            out[msg.partition()].append((msg.offset(), msg.value()))  # type: ignore[arg-type]
            position[msg.partition()] = msg.offset() + 1  # type: ignore[operator,index]
    finally:
        consumer.close()
    return out


def check_acked_exactly_once(acked: Iterable[tuple[int, int | None, int]],
                             read: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every acknowledged (partition, offset, sequence) is in the partition at that offset;
    nothing is there twice and the sequences only go up (the producer's order).

    An acknowledgement without an offset (None) is librdkafka's implicit ack: a request whose
    answer was lost (a timeout, a dropped connection) is known written once a later request of
    the same idempotent producer succeeds, but not where: its sequence must be there somewhere.
    """
    by_partition: dict[int, dict[int, int]] = {}
    placed_anywhere: dict[int, set[int]] = {}
    for partition, offset, seq in acked:
        if offset is None:
            placed_anywhere.setdefault(partition, set()).add(seq)
        else:
            by_partition.setdefault(partition, {})[offset] = seq
    for partition, records in read.items():
        seqs = []
        at: dict[int, int] = {}
        for offset, value in records:
            p, seq = seq_of(value)
            assert p == partition, f"{value!r} in partition {partition}"
            seqs.append(seq)
            at[offset] = seq
        duplicates = sorted(s for s, n in Counter(seqs).items() if n > 1)
        assert not duplicates, f"partition {partition}: sequences read twice: {duplicates[:20]}"
        disorder = [(a, b) for a, b in zip(seqs, seqs[1:], strict=False) if b <= a]
        assert not disorder, f"partition {partition}: out of order: {disorder[:20]}"
        expected = by_partition.get(partition, {})
        missing = {o: s for o, s in expected.items() if at.get(o) != s}
        assert not missing, (
            f"partition {partition}: {len(missing)} acknowledged records missing or moved"
            f" (offset: sequence, first 20): {dict(sorted(missing.items())[:20])}")
        lost = sorted(placed_anywhere.get(partition, set()) - set(seqs))
        assert not lost, (
            f"partition {partition}: {len(lost)} records acknowledged without an offset are "
            f"missing (sequences, first 20): {lost[:20]}")


def replica_records(broker: Broker, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """(offset, value) of the data records in a broker's own copy of a partition, read from
    its segment files (the broker writes them unbuffered; a batch being written is left
    out)."""
    directory = broker.spec.log_dir / f"{topic}-{partition}"
    out: list[tuple[int, bytes]] = []
    for segment in sorted(directory.glob("*.log")):
        data = memoryview(segment.read_bytes())
        for pos, header in iter_headers(data):
            if header.is_control:
                continue
            for record in decode_records(data[pos:pos + header.size]):
                out.append((record.offset, bytes(record.value or b"")))
    return out
