"""Cluster benchmark: the cost of replication on samsa, and how long a lost leader stalls producers.

One run starts a local cluster of three broker processes and a real ZooKeeper with
``samsa.tools.cluster.LocalCluster`` (what ``samsa cluster up`` runs: Debian's ZooKeeper in a JVM,
``python -m samsa.cli server`` per broker, broker ids 1-3), everything on free 127.0.0.1 ports and
under one temporary directory, which is removed at the end (also on errors; the brokers also get
SIGTERM if this process dies). Brokers run with Kafka's defaults except
``zookeeper.session.timeout.ms``, the one setting this benchmark varies. The client is
confluent-kafka (librdkafka) in this process. Every topic is created with
``AdminClient.create_topics`` and no clock starts before each of its partitions has a leader and a
full ISR in the metadata.

1. **Throughput** (``throughput``): 200-byte values (``os.urandom``), ``linger.ms=5`` and
   librdkafka's other defaults (as txn_bench.py's and broker_bench.py's idempotent workloads),
   round-robin over the topic's 3 partitions (``produce(..., partition=i % 3)``; placement makes
   each broker the leader of one), at most ``--messages`` messages or ``--seconds`` seconds, then
   ``flush()`` (at most ``FLUSH_GRACE`` s more) stops the clock. Workloads:

   * ``rf1_acks1``: replication factor 1, ``acks=1``, no idempotence;
   * ``rf1_acksall``: replication factor 1, ``acks=all``, ``enable.idempotence=true``;
   * ``rf3_acksall``: replication factor 3, topic ``min.insync.replicas=2``, ``acks=all``,
     ``enable.idempotence=true``: the same producer as ``rf1_acksall``, so that ratio is the cost
     of replication alone (a produce is answered once both followers have fetched the batch).

   Two more (``--workloads``, not run by default), with a fixed request stream instead of
   librdkafka's timing-dependent batching: ``rf1_batches`` and ``rf3_batches`` (same topics as
   ``rf1_acksall`` / ``rf3_acksall``) send Produce v9 requests of one pre-encoded batch of
   ``--batch-records`` (500) 200-byte records, no producer id, acks=all, one request in flight
   per partition, from a thread per partition, so that every run of any samsa makes the same
   requests (with RF 3, exactly one follower fetch with data per request and follower).

   msg/s and MB/s (value bytes / s / 1e6) count messages whose delivery report succeeded: sent,
   less those failed (``delivery.report.only.error``: only failures reach Python) and those still
   unacknowledged after the grace (purged). One message per partition is delivered before the
   clock starts (connections to the three leaders open), and the check after the clock: the
   partitions' high watermarks add up to the acknowledged messages plus those three
   (``hw_ok``). The brokers' CPU (utime + stime of the three processes, from /proc) per message
   is reported beside, with the kernel's part of it alone (stime: ``brokers_sys_us_per_msg``),
   and so is the CPU every other process of the machine used meanwhile (``others_cpu_pct``, % of
   one core: /proc/stat's busy time less this process, the brokers and
   ZooKeeper; a few % on a quiet machine, more means someone else's load took a share of the
   cores). Each workload runs ``--repeat`` times (every other round in reverse order, fresh
   topics each time) and the best (highest msg/s) is reported, every repeat's figure under
   ``repeats``.

2. **Failover** (``failover_kill`` and ``failover_term``): a topic of 3 partitions, replication
   factor 3, ``min.insync.replicas=2``; an idempotent ``acks=all`` producer (``linger.ms=0``) sends
   200-byte values to partition 0 at ``FAILOVER_RATE`` msg/s, paced by the clock (its ``poll()``
   waits out the gaps, so delivery callbacks are timed within a millisecond). After ``WARM_S``
   seconds of deliveries the process of partition 0's leader gets SIGKILL (``failover_kill``) or
   SIGTERM (``failover_term``: the broker's own clean shutdown, whatever it does before closing its
   ZooKeeper session), and the clock runs from just before ``os.kill`` to the first successful
   delivery callback of a message produced after the signal. A kazoo client in this process watches
   ZooKeeper meanwhile, for the stages between: the victim's ``/brokers/ids/<id>`` disappearing
   (``deregistered_s``: for SIGKILL, its session expiring, which ZooKeeper counts from the broker's
   last heartbeat before the signal, so it can come a little before the timeout), and partition 0's
   state znode naming a new leader (``elected_s``). Then the producer is flushed (nothing may fail:
   ``failed``), the victim is started again (same id, data and port) and the next round waits until
   it is back in every partition's ISR; the next round's victim is whichever broker leads partition
   0 then. Whether the victim was also the controller is reported per round. After the rounds,
   partition 0's high watermark must equal the messages acknowledged to it (``hw_ok``: nothing
   lost, nothing written twice). Errors the producer saw (``error_cb``, failed deliveries,
   librdkafka's warnings) are counted per round.

   After SIGKILL the controller learns of the death only when the broker's ZooKeeper session
   expires, so ``failover_kill`` runs once per ``--session-timeouts-ms`` value (default 4000 and
   Kafka's default 18000), each on a fresh cluster whose brokers all use that
   ``zookeeper.session.timeout.ms`` (ZooKeeper's tick is 500 ms: sessions of 1-60 s are granted
   as asked). Throughput and ``failover_term`` run on the first cluster only (they do not depend
   on the session timeout). ``--rounds`` rounds each; the median is reported.

``--baseline TREE`` starts a second cluster whose brokers run another samsa source tree
(``PYTHONPATH``), and runs every throughput workload on both, interleaved (every other round in
reverse order); per workload the run with the least brokers' CPU per message is compared. With
``--profile`` every broker runs under cProfile (``profiled_broker.py``): SIGUSR1 before and after
a workload gives the Python calls per message of the three brokers together and the functions
called most (the CPU figures are then the profiled brokers'; run once more without it for
those). Calls per message are deterministic for the ``*_batches`` workloads.

Output: one JSON line per workload (and per failover round) on stdout; a table on stderr, then a
markdown snippet for the README's performance section with the exact command. Timings never fail
the run: the exit status is 0.

    .venv/bin/python bench/cluster_bench.py                    # about 2.5 minutes
    .venv/bin/python bench/cluster_bench.py --messages 500000 --seconds 10 --repeat 3
    .venv/bin/python bench/cluster_bench.py --parts failover_kill --session-timeouts-ms 6000
    git worktree add /tmp/old <commit>                 # two versions, interleaved, one run:
    .venv/bin/python bench/cluster_bench.py --parts throughput --baseline /tmp/old \
        --workloads rf1_acksall,rf3_acksall,rf1_batches,rf3_batches [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import os
import platform
import pstats
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from samsa.protocol.client import ClientCodec
from samsa.records.record import RecordInput, encode_batch
from samsa.tools.cluster import BrokerProcess, LocalCluster, die_with_parent
from samsa.tools.zookeeper_server import free_port, port_in_use

from proc_cpu import cpu_seconds, machine_busy_seconds, read_stat

PARTS = ("throughput", "failover_term", "failover_kill")
WORKLOADS: dict[str, tuple[int, str, bool]] = {  # name: (replication factor, acks, idempotent)
    "rf1_acks1": (1, "1", False),
    "rf1_acksall": (1, "all", True),
    "rf3_acksall": (3, "all", True),
    # fixed batches from a raw client (``batches``): the same requests whatever the timing
    "rf1_batches": (1, "all", False),
    "rf3_batches": (3, "all", False),
}
DEFAULT_WORKLOADS = ("rf1_acks1", "rf1_acksall", "rf3_acksall")
BROKERS = 3
PARTITIONS = 3
VALUE_BYTES = 200
LINGER_MS = 5
MIN_INSYNC = 2
FAILOVER_PARTITION = 0
FAILOVER_RATE = 1_000  # msg/s to partition 0 during a failover round
WARM_S = 2.0  # seconds of deliveries before the signal
FAILOVER_MAX_S = 60.0  # beyond the session timeout: a round that takes longer is reported as such
FAILOVER_FLUSH_S = 30.0
FLUSH_GRACE = 5.0
BATCH_RECORDS = 500
START_TIMEOUT = 60.0
READY_TIMEOUT = 30.0
RESTART_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
SETUP_TIMEOUT = 10.0
HOST = "127.0.0.1"
PROJECT_DIR = Path(__file__).resolve().parent.parent
PROFILER = Path(__file__).resolve().parent / "profiled_broker.py"
PROFILE_TIMEOUT = 30.0
TOP_CALLS = 12  # functions listed per workload with --profile


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def emit(line: dict[str, Any], results: list[dict[str, Any]]) -> None:
    results.append(line)
    print(json.dumps(line), flush=True)


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def free_ports() -> tuple[int, int]:
    """(first broker port, ZooKeeper port): BROKERS consecutive free ports and one more."""
    for _ in range(100):
        base = free_port(HOST)
        if base + BROKERS > 65535:
            continue
        if any(port_in_use(base + i, HOST) for i in range(1, BROKERS)):
            continue
        for _ in range(100):
            zk = free_port(HOST)
            if not base <= zk < base + BROKERS:
                return base, zk
    raise RuntimeError("no free loopback ports found")


# --- the cluster ----------------------------------------------------------------------------------


@dataclass
class BenchBroker(BrokerProcess):
    """A broker of ``tree`` (its source first on PYTHONPATH), under cProfile when ``profile``
    is set (``profiled_broker.py``: statistics on SIGUSR1 to ``<profile>.<n>.prof``)."""

    tree: Path = PROJECT_DIR
    profile: Path | None = None
    dumps: int = 0

    def command(self, zookeeper_connect: str, overrides: dict[str, str]) -> list[str]:
        command = super().command(zookeeper_connect, overrides)  # python -m samsa.cli server
        if self.profile is not None:
            command = [command[0], str(PROFILER), str(self.profile), *command[3:]]
        return ["env", f"PYTHONPATH={self.tree}", *command]  # env execs: the same pid

    def profile_stats(self) -> pstats.Stats:
        """The statistics so far (SIGUSR1, then the file it writes)."""
        if self.profile is None or self.proc is None:
            raise RuntimeError(f"broker {self.broker_id} is not profiled")
        self.dumps += 1
        path = Path(f"{self.profile}.{self.dumps}.prof")
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.perf_counter() + PROFILE_TIMEOUT
        while not path.exists():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"broker {self.broker_id} wrote no profile in"
                                   f" {PROFILE_TIMEOUT:g} s")
            time.sleep(0.02)
        return pstats.Stats(str(path))


@dataclass
class ZkEvent:
    at: float  # perf_counter
    kind: str  # "ids", "state", "controller"
    value: Any


@dataclass
class Cluster:
    """A started LocalCluster with an admin client and a kazoo client watching ZooKeeper."""

    local: LocalCluster
    session_timeout_ms: int
    name: str = "samsa"
    admin: AdminClient = field(init=False)
    events: list[ZkEvent] = field(default_factory=list)
    zk: Any = None
    watched: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    @property
    def bootstrap(self) -> str:
        return self.local.bootstrap_servers

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.local.members if b.broker_id == broker_id)

    def pids(self) -> list[int]:
        return [b.proc.pid for b in self.local.members if b.proc is not None]

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids())

    def cpu_and_system_seconds(self) -> tuple[float, float]:
        """The brokers' CPU (utime + stime) and the kernel's part of it (stime), one read of
        each broker's /proc/<pid>/stat."""
        stats = [s for pid in self.pids() if (s := read_stat(f"/proc/{pid}/stat")) is not None]
        return sum(s.cpu_s for s in stats), sum(s.system_s for s in stats)

    def ours_cpu_seconds(self) -> float:
        """This process (librdkafka's threads too), the brokers and ZooKeeper."""
        zk = self.local.zookeeper
        return (self.cpu_seconds() + cpu_seconds(os.getpid())
                + cpu_seconds(zk.pid if zk is not None else None))

    def zookeeper_version(self) -> str:
        zk = self.local.zookeeper
        reply = zk.four_letter_word("srvr") if zk is not None else None
        for line in (reply or "").splitlines():
            if line.startswith("Zookeeper version:"):
                # "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on ..." (Debian's)
                return line.split(":", 1)[1].split(",")[0].split("-")[0].strip()
        return "?"

    def start_watching(self) -> None:
        """A kazoo client in this process; every change of /brokers/ids and /controller is
        logged with its time (partition states are added by ``watch_state``)."""
        from kazoo.client import KazooClient

        logging.getLogger("kazoo").addHandler(logging.NullHandler())
        logging.getLogger("kazoo").propagate = False
        self.zk = KazooClient(hosts=self.local.zookeeper_connect, timeout=10.0)
        self.zk.start(timeout=SETUP_TIMEOUT)

        def on_ids(children: list[str]) -> None:
            self.events.append(ZkEvent(time.perf_counter(), "ids",
                                       sorted(int(c) for c in children if c.isdigit())))

        def on_controller(data: bytes | None, _stat: Any) -> None:
            value = json.loads(data)["brokerid"] if data else None
            self.events.append(ZkEvent(time.perf_counter(), "controller", value))

        self.zk.ChildrenWatch("/brokers/ids", on_ids)
        self.zk.DataWatch("/controller", on_controller)

    def watch_state(self, topic: str, partition: int) -> None:
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        if self.zk is None or path in self.watched:
            return
        self.watched.add(path)

        def on_state(data: bytes | None, _stat: Any) -> None:
            if data:
                state = json.loads(data)
                self.events.append(ZkEvent(time.perf_counter(), "state",
                                           (state["leader"], state["isr"])))

        self.zk.DataWatch(path, on_state)

    def controller(self) -> int | None:
        for event in reversed(self.events):
            if event.kind == "controller":
                return int(event.value) if event.value is not None else None
        return None

    def stop(self) -> None:
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
        self.local.stop()

    # -- topics ------------------------------------------------------------------------------

    def partitions(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition: (leader, replicas, isr), as the brokers' metadata says."""
        meta = self.admin.list_topics(topic, timeout=SETUP_TIMEOUT).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        return {p.id: (p.leader, list(p.replicas), list(p.isrs))
                for p in meta.partitions.values()}

    def create_topic(self, topic: str, replication: int, config: dict[str, str]) -> None:
        futures = self.admin.create_topics(
            [NewTopic(topic, PARTITIONS, replication, config=config)],
            operation_timeout=SETUP_TIMEOUT, request_timeout=SETUP_TIMEOUT)
        futures[topic].result(timeout=SETUP_TIMEOUT)
        self.wait_in_sync(topic, replication, what=f"topic {topic}")

    def wait_in_sync(self, topic: str, replication: int, what: str,
                     timeout: float = READY_TIMEOUT) -> dict[int, tuple[int, list[int], list[int]]]:
        """Until every partition has a leader and ``replication`` replicas in its ISR."""
        deadline = time.perf_counter() + timeout
        state: dict[int, tuple[int, list[int], list[int]]] = {}
        while True:
            with contextlib.suppress(Exception):
                state = self.partitions(topic)
            if len(state) == PARTITIONS and all(
                    leader >= 0 and len(isr) == replication for leader, _, isr in state.values()):
                return state
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{what}: no leader and full ISR within {timeout:g} s: {state}")
            time.sleep(0.1)

    def high_watermarks(self, topic: str) -> list[int]:
        """Every partition's end offset (ListOffsets, latest: the high watermark). Not with a
        Consumer: its group.id would make the brokers create __consumer_offsets (50 partitions
        more for the controller to move on every failover)."""
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        futures = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                          request_timeout=SETUP_TIMEOUT)
        by = {(tp.topic, tp.partition): f.result(timeout=SETUP_TIMEOUT).offset
              for tp, f in futures.items()}
        return [by[(topic, p)] for p in range(PARTITIONS)]

    # -- one broker --------------------------------------------------------------------------

    def restart(self, broker: BrokerProcess) -> None:
        """Start a stopped broker again: same id, port, data and log file, as LocalCluster."""
        local = self.local
        with broker.log_path.open("ab") as out:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            out.write(f"--- cluster_bench: restarting broker {broker.broker_id} at {stamp}"
                      f" ---\n".encode())
            out.flush()
            broker.log_start = out.tell()
            broker.proc = subprocess.Popen(
                broker.command(local.zookeeper_connect, local.overrides),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=local.data_dir, start_new_session=True, preexec_fn=die_with_parent())

    def registered(self) -> list[int]:
        for event in reversed(self.events):
            if event.kind == "ids":
                return list(event.value)
        return []


def start_cluster(parent: Path, session_timeout_ms: int, name: str = "samsa",
                  tree: Path = PROJECT_DIR, profile: bool = False) -> Cluster:
    base, zk_port = free_ports()
    data_dir = parent / f"{name}-session-{session_timeout_ms}"
    data_dir.mkdir()
    local = LocalCluster(data_dir, BROKERS, base, zk_port,
                         {"zookeeper.session.timeout.ms": str(session_timeout_ms)})
    local.members = [
        BenchBroker(b.broker_id, b.port, b.log_dir, b.log_path, tree=tree,
                    profile=data_dir / f"broker-{b.broker_id}-profile" if profile else None)
        for b in local.members]
    t0 = time.perf_counter()
    try:
        local.start(START_TIMEOUT)
    except BaseException:
        with contextlib.suppress(Exception):
            local.stop()
        raise
    cluster = Cluster(local, session_timeout_ms, name)
    try:
        cluster.start_watching()
    except BaseException:
        cluster.stop()
        raise
    log(f"cluster {name} ({tree}{', profiled' if profile else ''},"
        f" zookeeper.session.timeout.ms={session_timeout_ms}): ZooKeeper "
        f"{cluster.zookeeper_version()} on {local.zookeeper_connect}, brokers "
        f"{local.bootstrap_servers} (pids {', '.join(map(str, cluster.pids()))}), up in "
        f"{time.perf_counter() - t0:.1f} s, controller {cluster.controller()}")
    return cluster


# --- throughput -----------------------------------------------------------------------------------


def throughput(cluster: Cluster, workload: str, rep: int, args: argparse.Namespace
               ) -> dict[str, Any]:
    if workload.endswith("_batches"):
        return batches(cluster, workload, rep, args)
    replication, acks, idempotent = WORKLOADS[workload]
    topic = f"cluster-bench-{workload}-{rep}"
    topic_config = {"min.insync.replicas": str(MIN_INSYNC)} if replication > 1 else {}
    cluster.create_topic(topic, replication, topic_config)
    leaders = sorted(leader for leader, _, _ in cluster.partitions(topic).values())
    failed = [0]
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failed[0] += 1
            if len(errors) < 3:
                errors.append(str(err))

    config: dict[str, Any] = {"acks": acks, "enable.idempotence": idempotent,
                              "linger.ms": LINGER_MS}
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "delivery.report.only.error": True, "on_delivery": on_delivery,
                         "log_level": 3, **config})
    producer.list_topics(topic, timeout=SETUP_TIMEOUT)
    for p in range(PARTITIONS):  # a connection to every partition's leader
        producer.produce(topic, b"warm-up", partition=p)
    if producer.flush(SETUP_TIMEOUT) or failed[0]:
        raise RuntimeError(f"warm-up messages not delivered: {errors}")
    value = os.urandom(VALUE_BYTES)
    produce, poll = producer.produce, producer.poll
    limit = args.messages
    sent = left = 0
    profiled = [b for b in cluster.local.members
                if isinstance(b, BenchBroker) and b.profile is not None]
    stats0 = [b.profile_stats() for b in profiled]
    cpu0, sys0 = cluster.cpu_and_system_seconds()
    ours0, machine0 = cluster.ours_cpu_seconds(), machine_busy_seconds()
    start = time.perf_counter()
    stop_at = start + args.seconds
    try:
        while sent < limit:
            try:
                produce(topic, value, partition=sent % PARTITIONS)
            except BufferError:
                poll(0.0005)
                if time.perf_counter() > stop_at:
                    break
                continue
            sent += 1
            if not sent & 1023:
                poll(0)
                if time.perf_counter() > stop_at:
                    break
        left = producer.flush(FLUSH_GRACE)
        end = time.perf_counter()
        cpu1, sys1 = cluster.cpu_and_system_seconds()
        ours1, machine1 = cluster.ours_cpu_seconds(), machine_busy_seconds()
        failed_in_time = failed[0]
        stats1 = [b.profile_stats() for b in profiled]
    finally:
        if left:
            producer.purge()
        producer.flush(1)
    delivered = sent - left - failed_in_time
    seconds = end - start
    hws = cluster.high_watermarks(topic)
    line: dict[str, Any] = {
        "messages": delivered,
        "seconds": round(seconds, 3),
        "msg_per_s": round(delivered / seconds, 1),
        "mb_per_s": round(delivered * VALUE_BYTES / seconds / 1e6, 2),
        "brokers_cpu_us_per_msg": round((cpu1 - cpu0) * 1e6 / delivered, 2) if delivered else None,
        # the kernel's part of it (syscalls, loopback copies, page-cache writes)
        "brokers_sys_us_per_msg": round((sys1 - sys0) * 1e6 / delivered, 2) if delivered else None,
        # other tenants of the machine meanwhile, in % of one core: noise, if not about 0
        "others_cpu_pct": round(max(0.0, (machine1 - machine0) - (ours1 - ours0))
                                * 100 / seconds, 1),
        "failed": failed_in_time,
        "unacked_at_end": left,
        "high_watermarks": hws,
        "hw_ok": sum(hws) == delivered + PARTITIONS,
        "replication_factor": replication,
        "min_insync_replicas": MIN_INSYNC if replication > 1 else 1,
        "leaders": leaders,
        "config": config,
    }
    if profiled and delivered:
        line.update(call_counts(stats0, stats1, delivered))
    if errors:
        line["first_errors"] = errors
    return line


class _RawProducer:
    """Produce v9 requests of one pre-encoded batch to one partition's leader over a socket,
    one at a time (acks=all: each waits for the followers)."""

    def __init__(self, port: int, topic: str, partition: int, batch: bytes) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=SETUP_TIMEOUT * 3)
        self.codec = ClientCodec("cluster-bench")
        self.frame, self.sent = self.codec.encode(0, 9, ProduceRequest(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=partition, records=batch),)),)))
        self.acked = 0
        self.error: str | None = None

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def produce(self) -> None:
        self.sock.sendall(self.frame)
        answer = self._read(self.codec.frame_size(self._read(4)))
        response = self.codec.decode(self.sent, answer)
        code = response.responses[0].partition_responses[0].error_code
        if code != 0:
            raise RuntimeError(f"produce failed: {code!r}")
        self.acked += 1

    def run(self, count: int, stop_at: float) -> None:
        try:
            for _ in range(count):
                self.produce()
                if time.perf_counter() > stop_at:
                    break
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        self.sock.close()


def batches(cluster: Cluster, workload: str, rep: int, args: argparse.Namespace
            ) -> dict[str, Any]:
    """A fixed request stream: per partition, produce requests of one batch of
    ``--batch-records`` records (no producer id), one at a time with acks=all, from a thread
    per partition; the same batches whatever the brokers' speed, so that calls per message
    do not depend on how the client batched."""
    replication, _, _ = WORKLOADS[workload]
    topic = f"cluster-bench-{workload}-{rep}"
    topic_config = {"min.insync.replicas": str(MIN_INSYNC)} if replication > 1 else {}
    cluster.create_topic(topic, replication, topic_config)
    state = cluster.partitions(topic)
    leaders = sorted(leader for leader, _, _ in state.values())
    value = os.urandom(VALUE_BYTES)
    batch = encode_batch([RecordInput(key=None, value=value, timestamp=int(time.time() * 1000))]
                         * args.batch_records)
    producers = [_RawProducer(cluster.broker(state[p][0]).port, topic, p, batch)
                 for p in range(PARTITIONS)]
    try:
        for producer in producers:  # warm up: one request each
            producer.produce()
        per_partition = max(1, args.messages // args.batch_records // PARTITIONS)
        profiled = [b for b in cluster.local.members
                    if isinstance(b, BenchBroker) and b.profile is not None]
        stats0 = [b.profile_stats() for b in profiled]
        cpu0, sys0 = cluster.cpu_and_system_seconds()
        ours0, machine0 = cluster.ours_cpu_seconds(), machine_busy_seconds()
        start = time.perf_counter()
        threads = [threading.Thread(target=p.run, args=(per_partition, start + args.seconds))
                   for p in producers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        end = time.perf_counter()
        cpu1, sys1 = cluster.cpu_and_system_seconds()
        ours1, machine1 = cluster.ours_cpu_seconds(), machine_busy_seconds()
        stats1 = [b.profile_stats() for b in profiled]
    finally:
        for producer in producers:
            producer.close()
    errors = [p.error for p in producers if p.error]
    delivered = sum(p.acked - 1 for p in producers) * args.batch_records
    seconds = end - start
    hws = cluster.high_watermarks(topic)
    line: dict[str, Any] = {
        "messages": delivered,
        "seconds": round(seconds, 3),
        "msg_per_s": round(delivered / seconds, 1),
        "mb_per_s": round(delivered * VALUE_BYTES / seconds / 1e6, 2),
        "brokers_cpu_us_per_msg": round((cpu1 - cpu0) * 1e6 / delivered, 2) if delivered else None,
        # the kernel's part of it (syscalls, loopback copies, page-cache writes)
        "brokers_sys_us_per_msg": round((sys1 - sys0) * 1e6 / delivered, 2) if delivered else None,
        "others_cpu_pct": round(max(0.0, (machine1 - machine0) - (ours1 - ours0))
                                * 100 / seconds, 1),
        "failed": len(errors),
        "high_watermarks": hws,
        "hw_ok": sum(hws) == sum(p.acked for p in producers) * args.batch_records,
        "replication_factor": replication,
        "min_insync_replicas": MIN_INSYNC if replication > 1 else 1,
        "leaders": leaders,
        "config": {"acks": "all", "batch_records": args.batch_records, "in_flight": 1},
    }
    if profiled and delivered:
        line.update(call_counts(stats0, stats1, delivered))
    if errors:
        line["first_errors"] = errors[:3]
    return line


def _label(func: tuple[str, int, str]) -> str:
    filename, lineno, name = func
    if filename == "~":  # a built-in
        return name
    parts = Path(filename).parts
    where = "/".join(parts[parts.index("samsa"):]) if "samsa" in parts else Path(filename).name
    return f"{where}:{lineno}({name})"


def call_counts(before: list[pstats.Stats], after: list[pstats.Stats], messages: int
                ) -> dict[str, Any]:
    """Python function calls per message in the brokers between two profiles (all brokers
    together), and the functions called most."""
    calls: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for b, a in zip(before, after, strict=True):
        old = b.stats  # type: ignore[attr-defined]
        for func, (_cc, nc, tt, _ct, _callers) in a.stats.items():  # type: ignore[attr-defined]
            prev = old.get(func)
            label = _label(func)
            calls[label] += nc - (prev[1] if prev else 0)
            own[label] += tt - (prev[2] if prev else 0.0)
    total = sum(calls.values())
    return {
        "calls_per_msg": round(total / messages, 3),
        "top_calls_per_msg": {k: round(v / messages, 4) for k, v in calls.most_common(TOP_CALLS)},
        "top_own_us_per_msg": {k: round(v * 1e6 / messages, 4)
                               for k, v in own.most_common(TOP_CALLS)},
    }


# --- failover -------------------------------------------------------------------------------------


@dataclass
class RoundLog:
    """What the producer saw in one failover round."""

    ok: int = 0
    failed: int = 0
    kill_seq: int | None = None  # first message produced after the signal
    first_ok_after: float | None = None  # perf_counter of its delivery callback
    acked_seq: set[int] = field(default_factory=set)
    delivery_errors: Counter[str] = field(default_factory=Counter)
    client_errors: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)


class _Collect(logging.Handler):
    """librdkafka's log lines (warnings and worse), counted by facility and shortened text."""

    def __init__(self, target: Callable[[], RoundLog]) -> None:
        super().__init__(logging.WARNING)
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        # "[thrd:...]: 127.0.0.1:123/2: Connect to ... failed: ..." -> without the thread part
        text = text.split("]: ", 1)[-1]
        self.target().warnings[text[:140]] += 1


def failover_round(cluster: Cluster, topic: str, sig: signal.Signals, round_no: int
                   ) -> dict[str, Any]:
    state = cluster.wait_in_sync(topic, BROKERS, what=f"round {round_no}")
    victim_id = state[FAILOVER_PARTITION][0]
    victim = cluster.broker(victim_id)
    controller = cluster.controller()
    proc = victim.proc
    if proc is None or proc.poll() is not None:
        raise RuntimeError(f"broker {victim_id} is not running")
    rl = RoundLog()
    unpack = struct.Struct(">q").unpack_from
    pack = struct.Struct(">q").pack
    pad = b"f" * (VALUE_BYTES - 8)

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        seq = unpack(msg.value() or b"\0" * 8)[0]
        if err is not None:
            rl.failed += 1
            rl.delivery_errors[err.name()] += 1
            return
        rl.ok += 1
        rl.acked_seq.add(seq)
        if rl.first_ok_after is None and rl.kill_seq is not None and seq >= rl.kill_seq:
            rl.first_ok_after = time.perf_counter()

    def on_error(err: KafkaError) -> None:
        rl.client_errors[err.name()] += 1

    rdlog = logging.getLogger(f"cluster-bench.librdkafka.{id(rl)}")
    rdlog.propagate = False
    rdlog.setLevel(logging.WARNING)
    rdlog.addHandler(_Collect(lambda: rl))
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 0, "on_delivery": on_delivery, "error_cb": on_error, "logger": rdlog,
        "log_level": 4,
    })
    produce, poll = producer.produce, producer.poll
    perf_counter = time.perf_counter
    gap = 1.0 / FAILOVER_RATE
    limit = cluster.session_timeout_ms / 1000 + FAILOVER_MAX_S
    seq = 0
    t_kill: float | None = None
    exited: float | None = None
    t0 = perf_counter()
    next_send = t0
    try:
        while True:
            now = perf_counter()
            if t_kill is None:
                if now >= t0 + WARM_S and rl.ok:
                    rl.kill_seq = seq
                    t_kill = perf_counter()
                    os.kill(proc.pid, sig)
                elif now > t0 + WARM_S + READY_TIMEOUT:
                    raise RuntimeError(f"no delivery in {WARM_S + READY_TIMEOUT:g} s before the"
                                       f" signal: {dict(rl.delivery_errors)}")
            else:
                if exited is None and proc.poll() is not None:
                    exited = now
                if rl.first_ok_after is not None or now > t_kill + limit:
                    break
            if now >= next_send:
                try:
                    produce(topic, pack(seq) + pad, partition=FAILOVER_PARTITION)
                    seq += 1
                except BufferError:
                    pass
                next_send = max(next_send + gap, now - 0.1)
            poll(max(0.0, min(next_send - perf_counter(), 0.01)))
        # when did the process end (a clean stop may outlast the failover)?
        while exited is None and perf_counter() < t_kill + STOP_TIMEOUT:
            poll(0.01)
            if proc.poll() is not None:
                exited = perf_counter()
        left = producer.flush(FAILOVER_FLUSH_S)
    finally:
        producer.purge()
        producer.flush(1)
    if proc.poll() is None:  # still there STOP_TIMEOUT s after SIGTERM
        proc.kill()
        proc.wait(SETUP_TIMEOUT)
    assert t_kill is not None

    def first(kind: str, test: Callable[[Any], bool]) -> float | None:
        for event in cluster.events:
            if event.kind == kind and event.at >= t_kill and test(event.value):
                return round(event.at - t_kill, 3)
        return None

    deregistered = first("ids", lambda ids: victim_id not in ids)
    elected = first("state", lambda s: s[0] not in (victim_id, -1))
    new_leader = next((e.value[0] for e in cluster.events
                       if e.kind == "state" and e.at >= t_kill and e.value[0] not in
                       (victim_id, -1)), None)
    new_controller = first("controller", lambda c: c is not None and c != victim_id) \
        if controller == victim_id else None
    stalled = None if rl.first_ok_after is None else round(rl.first_ok_after - t_kill, 3)
    line: dict[str, Any] = {
        "round": round_no,
        "signal": sig.name,
        "victim": victim_id,
        "victim_was_controller": controller == victim_id,
        "new_leader": new_leader,
        "failover_s": stalled,
        "deregistered_s": deregistered,
        "elected_s": elected,
        "new_controller_s": new_controller,
        "process_exited_s": None if exited is None else round(exited - t_kill, 3),
        "produced": seq,
        "acked": rl.ok,
        "failed": rl.failed,
        "unacked_at_end": left,
    }
    if stalled is None:
        line["error"] = f"no delivery within {limit:g} s of the signal"
    if rl.delivery_errors:
        line["delivery_errors"] = dict(rl.delivery_errors)
    if rl.client_errors:
        line["client_errors"] = dict(rl.client_errors)
    if rl.warnings:
        line["librdkafka_warnings"] = sum(rl.warnings.values())
        line["librdkafka_warning_kinds"] = [f"{n}x {text}" for text, n in
                                            rl.warnings.most_common(4)]
    line["_acked_seq_count"] = len(rl.acked_seq)

    # the victim comes back: its registration must be gone first (after SIGKILL: once its session
    # has expired, which the failover above already waited for unless it timed out)
    deadline = perf_counter() + cluster.session_timeout_ms / 1000 + RESTART_TIMEOUT
    while victim_id in cluster.registered():
        if perf_counter() > deadline:
            raise RuntimeError(f"broker {victim_id} is still registered in ZooKeeper")
        time.sleep(0.1)
    t_restart = perf_counter()
    cluster.restart(victim)
    deadline = t_restart + RESTART_TIMEOUT
    while True:
        if victim.proc is not None and victim.proc.poll() is not None:
            raise RuntimeError(f"broker {victim_id} exited after its restart: {victim.log_tail()}")
        with contextlib.suppress(Exception):
            parts = cluster.partitions(topic)
            if len(parts) == PARTITIONS and all(victim_id in isr for _, _, isr in parts.values()):
                break
        if perf_counter() > deadline:
            raise RuntimeError(f"broker {victim_id} not back in every ISR {RESTART_TIMEOUT:g} s"
                               f" after its restart: {cluster.partitions(topic)}")
        time.sleep(0.1)
    line["restart_to_isr_s"] = round(perf_counter() - t_restart, 3)
    return line


def failover(cluster: Cluster, sig: signal.Signals, rounds: int, results: list[dict[str, Any]]
             ) -> dict[str, Any]:
    name = "failover_kill" if sig == signal.SIGKILL else "failover_term"
    topic = f"cluster-bench-{name}"
    cluster.create_topic(topic, BROKERS, {"min.insync.replicas": str(MIN_INSYNC)})
    cluster.watch_state(topic, FAILOVER_PARTITION)
    lines: list[dict[str, Any]] = []
    acked = 0
    for round_no in range(1, rounds + 1):
        try:
            line = failover_round(cluster, topic, sig, round_no)
        except Exception as exc:
            line = {"round": round_no, "error": f"{type(exc).__name__}: {exc}"}
        acked += line.pop("_acked_seq_count", 0)
        line = {"workload": f"{name}_round",
                "zookeeper_session_timeout_ms": cluster.session_timeout_ms, **line}
        emit(line, results)
        lines.append(line)
        log(f"  {name} (session {cluster.session_timeout_ms} ms) round {round_no}: "
            + ", ".join(f"{k} {line[k]}" for k in (
                "victim", "victim_was_controller", "failover_s", "deregistered_s", "elected_s",
                "process_exited_s", "failed", "client_errors", "delivery_errors",
                "restart_to_isr_s", "error") if k in line))
        if "restart_to_isr_s" not in line:
            break  # the cluster is not whole again: no more rounds
    times = [x["failover_s"] for x in lines if x.get("failover_s") is not None]
    hw: int | None = None
    with contextlib.suppress(Exception):
        hw = cluster.high_watermarks(topic)[FAILOVER_PARTITION]
    summary: dict[str, Any] = {
        "workload": name,
        "zookeeper_session_timeout_ms": cluster.session_timeout_ms,
        "rounds": len(lines),
        "failover_s": times,
        "median_s": rounded(statistics.median(times)) if times else None,
        "victims": [x.get("victim") for x in lines],
        "victim_was_controller": [x.get("victim_was_controller") for x in lines],
        "deregistered_s": [x.get("deregistered_s") for x in lines],
        "elected_s": [x.get("elected_s") for x in lines],
        "process_exited_s": [x.get("process_exited_s") for x in lines],
        "failed": sum(x.get("failed", 0) for x in lines),
        "client_errors": dict(sum((Counter(x.get("client_errors", {})) for x in lines),
                                  Counter())),
        "delivery_errors": dict(sum((Counter(x.get("delivery_errors", {})) for x in lines),
                                    Counter())),
        "high_watermark": hw,
        "acked": acked,
        "hw_ok": hw == acked,
    }
    errors = [x["error"] for x in lines if "error" in x]
    if errors:
        summary["errors"] = errors
    emit(summary, results)
    return summary


# --- the run --------------------------------------------------------------------------------------


def run_throughput(clusters: list[Cluster], args: argparse.Namespace,
                   results: list[dict[str, Any]]) -> None:
    """Every workload on every cluster (a samsa tree each), interleaved: every other round in
    reverse order."""
    runs = [(c, w) for w in args.workloads for c in clusters]
    lines: dict[tuple[str, str], list[dict[str, Any]]] = {(c.name, w): [] for c, w in runs}
    for rep in range(max(1, args.repeat)):
        order = runs if rep % 2 == 0 else list(reversed(runs))
        log(f"throughput round {rep + 1} of {max(1, args.repeat)}")
        for cluster, workload in order:
            try:
                line = throughput(cluster, workload, rep, args)
            except Exception as exc:
                line = {"error": f"{type(exc).__name__}: {exc}"}
            lines[(cluster.name, workload)].append(line)
            log(f"  {cluster.name} {workload}: " + ", ".join(f"{k} {line[k]}" for k in (
                "msg_per_s", "mb_per_s", "messages", "seconds", "brokers_cpu_us_per_msg",
                "brokers_sys_us_per_msg", "calls_per_msg", "others_cpu_pct", "hw_ok", "failed",
                "leaders", "error")
                if k in line))
    for (name, workload), repeats in lines.items():
        ok = [r for r in repeats if "error" not in r]
        # the best: the least broker CPU per message when comparing trees, else the most msg/s
        best = (dict(min(ok, key=lambda r: r["brokers_cpu_us_per_msg"]))
                if ok and len(clusters) > 1 else
                dict(max(ok, key=lambda r: r["msg_per_s"])) if ok else dict(repeats[-1]))
        if len(repeats) > 1:
            best["repeats"] = [r.get("msg_per_s", r.get("error")) for r in repeats]
            best["repeats_cpu_us_per_msg"] = [r.get("brokers_cpu_us_per_msg") for r in repeats]
        emit({"workload": workload, "samsa": name, **best}, results)


def bench(args: argparse.Namespace, parent: Path, results: list[dict[str, Any]]) -> None:
    for i, session_ms in enumerate(args.session_timeouts_ms):
        todo = [p for p in args.parts if p == "failover_kill" or i == 0]
        if not todo:
            continue
        cluster = start_cluster(parent, session_ms, profile=args.profile)
        clusters = [cluster]
        args.zookeeper_version = cluster.zookeeper_version()
        try:
            if "throughput" in todo:
                if args.baseline is not None:
                    clusters.append(start_cluster(parent, session_ms, "baseline",
                                                  args.baseline, args.profile))
                run_throughput(clusters, args, results)
            if "failover_term" in todo:
                failover(cluster, signal.SIGTERM, args.rounds, results)
            if "failover_kill" in todo:
                failover(cluster, signal.SIGKILL, args.rounds, results)
        finally:
            for c in clusters:
                for b in c.local.members:
                    if b.proc is not None and b.proc.poll() not in (
                            None, 0, -signal.SIGKILL, -signal.SIGTERM):
                        log(f"{c.name} broker {b.broker_id} exited with {b.proc.poll()}:"
                            f" {b.log_tail()}")
                c.stop()


# --- the report -----------------------------------------------------------------------------------


def seconds_list(values: list[float | None]) -> str:
    return ", ".join("-" if x is None else f"{x:.2f}" for x in values) or "-"


def report(results: list[dict[str, Any]], args: argparse.Namespace, command: str) -> None:
    by = {r["workload"]: r for r in results
          if not r["workload"].endswith("_round") and r.get("samsa", "samsa") == "samsa"}
    base = {r["workload"]: r for r in results if r.get("samsa") == "baseline"}
    labels = {
        "rf1_acks1": "RF 1, acks=1",
        "rf1_acksall": "RF 1, acks=all, idempotent",
        "rf3_acksall": "RF 3, min.insync.replicas=2, acks=all, idempotent",
    }

    def rate(w: str) -> float | None:
        value = by.get(w, {}).get("msg_per_s")
        return float(value) if isinstance(value, int | float) else None

    c, a, b = rate("rf3_acksall"), rate("rf1_acks1"), rate("rf1_acksall")
    ratios = {"rf3_acksall": (f"{c / a:.2f}x" if c and a else "-",
                              f"{c / b:.2f}x" if c and b else "-")}
    rows: list[list[str]] = []
    header = ["produce, 200 B, 3 partitions", "msg/s", "MB/s", "brokers' CPU us/msg",
              "c / a", "c / b", "others' CPU %", "check"]
    for w, label in labels.items():
        line = by.get(w)
        if line is None:
            continue
        if "error" in line:
            rows.append([label, "-", "-", "-", "-", "-", "-", f"error: {line['error']}"])
            continue
        ra, rb = ratios.get(w, ("", ""))
        rows.append([f"({'abc'[list(labels).index(w)]}) {label}",
                     f"{line['msg_per_s']:,.0f}", f"{line['mb_per_s']:.1f}",
                     f"{line['brokers_cpu_us_per_msg']:.2f}", ra, rb,
                     f"{line['others_cpu_pct']:.0f}",
                     ("ok" if line["messages"] >= args.messages else
                      f"ok, {line['messages']:,} messages in the {args.seconds:g} s cap")
                     if line["hw_ok"] and not line["failed"] else "FAILED"])
    log("")
    if rows:
        log(f"throughput: best of {args.repeat}, at most {args.messages:,} messages or"
            f" {args.seconds:g} s each; others' CPU: other processes on the machine meanwhile"
            f" (% of one core; about 0 on a quiet machine); check: no failed delivery, high"
            f" watermarks = acked")
        log("")
        log("| " + " | ".join(header) + " |")
        log("|---|" + "---:|" * (len(header) - 2) + "---|")
        for row in rows:
            log("| " + " | ".join(row) + " |")
        log("")

    if base:
        log(f"this tree against --baseline {args.baseline}, interleaved; per workload the run"
            f" with the least brokers' CPU per message of {args.repeat}; ratio: this / baseline")
        log("")
        cols = ["workload", "msg/s base", "msg/s this", "CPU us/msg base", "CPU us/msg this",
                "CPU ratio"]
        if args.profile:
            cols += ["calls/msg base", "calls/msg this", "calls ratio"]
        log("| " + " | ".join(cols) + " |")
        log("|---|" + "---:|" * (len(cols) - 1))
        for w in args.workloads:
            old, new = base.get(w, {}), by.get(w, {})
            if "msg_per_s" not in old or "msg_per_s" not in new:
                continue
            row = [w, f"{old['msg_per_s']:,.0f}", f"{new['msg_per_s']:,.0f}",
                   f"{old['brokers_cpu_us_per_msg']:.2f}", f"{new['brokers_cpu_us_per_msg']:.2f}",
                   f"{new['brokers_cpu_us_per_msg'] / old['brokers_cpu_us_per_msg']:.2f}x"]
            if args.profile and "calls_per_msg" in old and "calls_per_msg" in new:
                row += [f"{old['calls_per_msg']:.2f}", f"{new['calls_per_msg']:.2f}",
                        f"{new['calls_per_msg'] / old['calls_per_msg']:.2f}x"]
            log("| " + " | ".join(row) + " |")
        log("")
    if args.profile:
        for name, lines in (("this tree", by), ("baseline", base)):
            for w, line in lines.items():
                if "top_calls_per_msg" in line:
                    log(f"{name}, {w}: {line['calls_per_msg']} calls/msg; most called (per msg):")
                    for k, v in line["top_calls_per_msg"].items():
                        log(f"    {v:8.4f}  {k}")
                    log("  most own time (us/msg, profiled):")
                    for k, v in line["top_own_us_per_msg"].items():
                        log(f"    {v:8.4f}  {k}")
        log("")

    fail_rows: list[list[str]] = []
    for r in results:
        if r["workload"] not in ("failover_kill", "failover_term"):
            continue
        how = "SIGKILL" if r["workload"] == "failover_kill" else "SIGTERM (clean stop)"
        times = seconds_list(r["failover_s"])
        ctl = ", ".join("yes" if x else "no" for x in r["victim_was_controller"])
        median = "-" if r["median_s"] is None else f"{r['median_s']:.2f}"
        errors = ", ".join(f"{k} x{v}" for k, v in {**r["client_errors"],
                                                   **r["delivery_errors"]}.items()) or "none"
        check = "ok" if r["hw_ok"] and not r["failed"] and "errors" not in r else "FAILED"
        fail_rows.append([how, str(r["zookeeper_session_timeout_ms"]), times, median,
                          seconds_list(r["process_exited_s"]), seconds_list(r["deregistered_s"]),
                          seconds_list(r["elected_s"]),
                          ctl, errors, check])
    if fail_rows:
        header2 = ["leader's broker gets", "zookeeper.session.timeout.ms",
                   "signal to first delivery, each round (s)", "median (s)", "process gone (s)",
                   "deregistered in ZK (s)", "new leader in ZK (s)", "victim was controller",
                   "producer errors", "check"]
        log(f"failover: acks=all, idempotent, RF 3, min.insync.replicas=2, {FAILOVER_RATE:,}"
            f" msg/s to one partition; times from the signal; check: no failed delivery, high"
            f" watermark = acked")
        log("")
        log("| " + " | ".join(header2) + " |")
        log("|---|" + "---:|" * 6 + "---|---|---|")
        for r2 in fail_rows:
            log("| " + " | ".join(r2) + " |")
        log("")
    for r in results:
        if "error" in r and not r["workload"].endswith("_round"):
            log(f"error: {r['workload']}: {r['error']}")
        for e in r.get("errors", []):
            log(f"error: {r['workload']}: {e}")

    # README rows
    snippet = [
        f"**Cluster** (`{command}`: 3 broker processes and ZooKeeper"
        f" {args.zookeeper_version} on loopback, confluent-kafka {confluent_kafka.version()};"
        f" {time.strftime('%Y-%m-%d')}):",
        "",
        "| workload | samsa | ratio |",
        "|---|---:|---:|",
    ]
    for w, label in labels.items():
        line = by.get(w)
        if line is None or "error" in line:
            continue
        note = "baseline"
        if w == "rf1_acksall" and a:
            note = f"{line['msg_per_s'] / a:.2f}x of RF 1 acks=1"
        if w == "rf3_acksall":
            note = f"{ratios[w][0]} of RF 1 acks=1, {ratios[w][1]} of RF 1 acks=all"
        snippet.append(f"| produce 200 B, 3 partitions, {label} (msg/s / MB/s) |"
                       f" {line['msg_per_s']:,.0f} / {line['mb_per_s']:.1f} | {note} |")
    for r in results:
        if r["workload"] not in ("failover_kill", "failover_term") or r["median_s"] is None:
            continue
        how = ("SIGKILL of the leader's broker" if r["workload"] == "failover_kill"
               else "SIGTERM (clean stop) of the leader's broker")
        each = " / ".join(f"{x:.2f}" for x in r["failover_s"])
        snippet.append(f"| failover, {how}, zookeeper.session.timeout.ms="
                       f"{r['zookeeper_session_timeout_ms']}: to the first acks=all delivery,"
                       f" median of {len(r['failover_s'])} (s) | {r['median_s']:.2f} |"
                       f" rounds: {each} |")
    log("markdown for the README:")
    log("")
    for s in snippet:
        log(s)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="samsa on a local 3-broker cluster with ZooKeeper: replicated produce"
        " throughput and leader failover, with confluent-kafka; JSON lines on stdout, tables"
        " on stderr.")
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="messages per throughput workload (default 1,000,000)")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="time cap per throughput workload, seconds (default 30)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of the throughput workloads; the best is reported (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="failover rounds per signal and session timeout (default 3)")
    parser.add_argument("--session-timeouts-ms", default="4000,18000",
                        help="zookeeper.session.timeout.ms values for failover_kill, one cluster"
                        " each; the first cluster also runs the other parts (default 4000,18000)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, from: {', '.join(PARTS)} (default: all)")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help=f"throughput workloads, comma-separated, from: {', '.join(WORKLOADS)}"
                        f" (default: {','.join(DEFAULT_WORKLOADS)})")
    parser.add_argument("--batch-records", type=int, default=BATCH_RECORDS,
                        help="records per produce request of the *_batches workloads (default"
                        f" {BATCH_RECORDS})")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another samsa source tree: its brokers run the throughput"
                        " workloads too, on a second cluster, interleaved with this tree's")
    parser.add_argument("--profile", action="store_true",
                        help="run the brokers under cProfile (bench/profiled_broker.py) and"
                        " report Python calls per message per workload (the CPU figures are"
                        " then the profiled brokers')")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="parent of the temporary cluster directory (default: $TMPDIR)")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep the cluster's directory (logs, data) instead of removing it")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    args.workloads = [w for w in args.workloads.split(",") if w]
    for w in args.workloads:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}")
    if args.baseline is not None:
        if not (args.baseline / "samsa" / "cli.py").exists():
            parser.error(f"--baseline {args.baseline} is not a samsa source tree")
        args.baseline = args.baseline.resolve()
    for p in args.parts:
        if p not in PARTS:
            parser.error(f"unknown part {p!r}")
    try:
        args.session_timeouts_ms = [int(x) for x in args.session_timeouts_ms.split(",") if x]
    except ValueError:
        parser.error("--session-timeouts-ms takes comma-separated integers")
    if not args.session_timeouts_ms or any(not 1000 <= x <= 60000
                                           for x in args.session_timeouts_ms):
        parser.error("--session-timeouts-ms: values from 1000 to 60000 (ZooKeeper's bounds here)")
    if args.messages <= 0 or args.seconds <= 0 or args.rounds <= 0:
        parser.error("--messages, --seconds and --rounds must be positive")
    args.zookeeper_version = "?"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = " ".join([".venv/bin/python", "bench/cluster_bench.py",
                        *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    results: list[dict[str, Any]] = []
    parent = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=args.data_dir))
    began = time.perf_counter()
    log(f"cluster bench: {platform.python_implementation()} {platform.python_version()}, "
        f"confluent-kafka {confluent_kafka.version()} / librdkafka "
        f"{confluent_kafka.libversion()[0]}, {os.cpu_count()} CPUs, load average"
        f" {os.getloadavg()[0]:.2f}, data in {parent}")
    try:
        bench(args, parent, results)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception as exc:  # timings never fail the run
        log(f"cluster bench failed: {type(exc).__name__}: {exc}")
    finally:
        if args.keep_data:
            log(f"kept {parent}")
        else:
            shutil.rmtree(parent, ignore_errors=True)
    report(results, args, command)
    log(f"\ntotal {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
