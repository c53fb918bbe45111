"""Exactly-once across a crash: a streaming query (samsa topic -> parquet sink with a checkpoint)
is SIGKILLed mid-stream while a producer keeps writing, then restarted from its checkpoint; the
output must hold every produced record exactly once. A second test does the same with a graceful
``query.stop()``.

Real PySpark (local mode) and a real (embedded) broker on 127.0.0.1. The killed query runs in a
child process (tests/spark/stream_query_main.py) in a session of its own: one
``killpg(SIGKILL)`` takes down its process group (the Python driver and the JVM that pyspark
launched through spark-submit); pyspark's worker daemons, which the JVM forks, move to process
groups of their own but stay in the session and exit once the JVM is gone. The test waits
until nothing of the session is left. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

pytestmark = pytest.mark.timeout(600)  # reads /proc: samsa runs on Linux

MAIN = Path(__file__).with_name("stream_query_main.py")
TIMEOUT = 15.0  # admin calls, producer flush, joining the producer thread
COMMITS_DEADLINE = 180.0  # child start-up (a JVM) + the first micro-batches, on a slow machine
FLOWING_DEADLINE = 10.0
KILL_DEADLINE = 30.0  # the whole process group gone after SIGKILL
QUERY_DEADLINE = 240.0  # the available-now restart, start-up included
PRODUCE_INTERVAL_S = 0.02  # ~50 records/s: more than the capped query reads, so it always lags
MAX_OFFSETS_WHILE_RUNNING = 10
MAX_OFFSETS_ON_RESTART = 400
PARTITIONS = 3

Record = tuple[int, int, bytes]  # (partition, offset, value)


# --- fixtures and helpers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("spark-kill-broker") / "data"
    with samsa.Broker(data, num_partitions=PARTITIONS) as b:
        yield b


def create_topic(broker: samsa.Broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, partitions)]).values():
        future.result(timeout=TIMEOUT)


class BackgroundProducer:
    """Produces keyed records with unique values ``m-<n>`` until stopped; keeps what the broker
    acknowledged (the delivery reports) as ``(partition, offset, value)``."""

    def __init__(self, bootstrap: str, topic: str, interval: float = PRODUCE_INTERVAL_S) -> None:
        self.topic = topic
        self.interval = interval
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.acked: list[Record] = []
        self.errors: list[KafkaError] = []
        self.unflushed: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"produce-{topic}", daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(err)
            else:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self.producer.produce(
                self.topic,
                key=f"key-{n % 11}".encode(),
                value=f"m-{n}".encode(),
                on_delivery=self._delivered,
            )
            n += 1
            self.producer.poll(0)
            self._stop.wait(self.interval)
        self.unflushed = self.producer.flush(TIMEOUT)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def is_producing(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def stop(self) -> list[Record]:
        """Stops producing, waits for every delivery report; returns the acknowledged records."""
        self._stop.set()
        self._thread.join(TIMEOUT + 5)
        assert not self._thread.is_alive(), "the producer thread did not stop"
        assert self.unflushed == 0, f"{self.unflushed} records were never acknowledged"
        assert not self.errors, f"delivery errors: {self.errors[:5]}"
        with self._lock:
            return list(self.acked)

    def wait_for_more(self, deadline_s: float = FLOWING_DEADLINE) -> None:
        """Data is flowing: at least one more record is acknowledged within the deadline."""
        before = self.count()
        wait_until(lambda: self.count() > before, deadline_s, "the producer to make progress")


def wait_until(condition: Callable[[], bool], deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")
        time.sleep(0.1)


def batch_ids(checkpoint: Path, log: str) -> list[int]:
    """The batch ids in a checkpoint metadata log (``offsets`` or ``commits``)."""
    folder = checkpoint / log
    if not folder.is_dir():
        return []
    return sorted(int(f.name) for f in folder.iterdir() if f.name.isdigit())


def committed(checkpoint: Path) -> int:
    return len(batch_ids(checkpoint, "commits"))


def checkpointed_end(checkpoint: Path, batch: int) -> dict:
    """The source's end offsets recorded for ``batch`` in the offsets log."""
    lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    # "v1", the batch metadata, then one line per source
    return json.loads(lines[2])


class Proc(NamedTuple):
    ppid: int
    pgid: int
    sid: int
    cmd: str


def processes() -> dict[int, Proc]:
    """A snapshot of the live (non-zombie) processes."""
    found: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        # after "pid (comm)": state ppid pgrp session ...
        state, ppid, pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if state != "Z":
            cmd = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found[int(entry)] = Proc(int(ppid), int(pgrp), int(session), cmd)
    return found


def in_session(sid: int) -> dict[int, Proc]:
    return {pid: p for pid, p in processes().items() if p.sid == sid}


def descendants(pid: int, procs: dict[int, Proc]) -> set[int]:
    """Every descendant of ``pid`` in the snapshot ``procs``."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child, p in procs.items():
            if p.ppid == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def spawn_query(
    broker: samsa.Broker,
    topic: str,
    out: Path,
    checkpoint: Path,
    workdir: Path,
    trigger: str,
    max_offsets: int,
    log_name: str,
) -> tuple[subprocess.Popen[bytes], Path]:
    """Starts stream_query_main.py in a new session (its pid is its process group id)."""
    local_dir = workdir / f"spark-local-{log_name}"
    local_dir.mkdir()
    log = workdir / f"{log_name}.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(MAIN),
                "--bootstrap",
                broker.bootstrap_servers,
                "--topic",
                topic,
                "--out",
                str(out),
                "--checkpoint",
                str(checkpoint),
                "--local-dir",
                str(local_dir),
                "--trigger",
                trigger,
                "--max-offsets",
                str(max_offsets),
                "--timeout",
                str(QUERY_DEADLINE + 60),
            ],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return proc, log


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL everything the child started: its process group (it leads it: the Python driver,
    the JVM) and then whatever else is left in its session (pyspark's worker daemons put
    themselves in process groups of their own), and reap the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_DEADLINE)
    for pid in in_session(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def output_records(spark: SparkSession, out: Path, topic: str) -> list[Record]:
    """The sink's output as Spark reads it (through ``_spark_metadata``, so files of a batch the
    sink never committed are ignored)."""
    rows = spark.read.parquet(str(out)).collect()
    assert {r.topic for r in rows} <= {topic}
    return [(r.partition, r.offset, bytes(r.value)) for r in rows]


def sink_files(out: Path) -> tuple[set[str], set[str]]:
    """(parquet files in the directory, parquet files the ``_spark_metadata`` log lists)."""
    on_disk = {p.name for p in out.glob("*.parquet")}
    listed: set[str] = set()
    for entry in (out / "_spark_metadata").iterdir():
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:  # the first line is the version
            listed.add(json.loads(line)["path"].rsplit("/", 1)[-1])
    return on_disk, listed


def assert_exactly_once(got: list[Record], produced: list[Record]) -> None:
    assert produced, "nothing was produced"
    assert {p for p, _, _ in produced} == set(range(PARTITIONS)), "keys missed a partition"
    assert len({v for _, _, v in produced}) == len(produced)  # the values are unique
    duplicates = sorted(r for r, n in Counter(got).items() if n > 1)
    missing = sorted(Counter(produced) - Counter(got))
    extra = sorted(Counter(got) - Counter(produced))
    assert not duplicates, f"{len(duplicates)} records written more than once: {duplicates[:10]}"
    assert not missing, f"{len(missing)} produced records are missing: {missing[:10]}"
    assert not extra, f"{len(extra)} records were never produced: {extra[:10]}"
    assert sorted(got) == sorted(produced)
    for p in range(PARTITIONS):  # and per partition the offsets are exactly 0..n-1
        offsets = sorted(o for q, o, _ in got if q == p)
        assert offsets == list(range(len(offsets)))


# --- SIGKILL ------------------------------------------------------------------------------------


def test_sigkilled_query_restarts_exactly_once(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topic = "killed"
    create_topic(broker, topic, PARTITIONS)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    producer = BackgroundProducer(broker.bootstrap_servers, topic).start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first, first_log = spawn_query(
            broker, topic, out, ckpt, tmp_path, "processing", MAX_OFFSETS_WHILE_RUNNING, "first"
        )
        procs.append(first)

        def three_commits() -> bool:
            if first.poll() is not None:
                raise AssertionError(
                    f"the query exited early ({first.returncode}):\n{tail(first_log)}"
                )
            return committed(ckpt) >= 3

        wait_until(three_commits, COMMITS_DEADLINE, "3 committed micro-batches")
        jitter = random.uniform(0.0, 1.0)  # vary the point in the batch the kill hits
        time.sleep(jitter)
        # Prefer to kill while a batch is in flight (planned in offsets/, not yet in commits/);
        # the query lags behind the producer, so one almost always is.
        with contextlib.suppress(AssertionError):
            wait_until(
                lambda: batch_ids(ckpt, "offsets")[-1:] > batch_ids(ckpt, "commits")[-1:],
                FLOWING_DEADLINE,
                "a micro-batch in flight",
            )
        producer.wait_for_more()  # data is still flowing
        # killpg reaches the driver and the JVM; pyspark's worker daemons (forked by the JVM)
        # make process groups of their own but stay in the session, and exit when the JVM's
        # pipe to them closes. Every descendant is in the session, so watch the session.
        snapshot = processes()
        tree = descendants(first.pid, snapshot) | {first.pid}
        session = {pid for pid, p in snapshot.items() if p.sid == first.pid}
        group = {pid for pid, p in snapshot.items() if p.pgid == first.pid}
        assert any("java" in snapshot[pid].cmd for pid in group), f"no JVM in the group: {group}"
        assert tree == session, f"outside the child's session: {tree - session}"
        killed_at = time.monotonic()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=KILL_DEADLINE)
        assert first.returncode == -signal.SIGKILL
        wait_until(
            lambda: not in_session(first.pid),
            KILL_DEADLINE,
            f"every process the query started to die (of {len(session)}, "
            f"{len(session) - len(group)} outside its process group)",
        )
        all_gone_s = time.monotonic() - killed_at
        planned, done = batch_ids(ckpt, "offsets"), batch_ids(ckpt, "commits")
        produced_at_kill = producer.count()
        producer.wait_for_more()  # the producer outlived the query
        produced = producer.stop()

        second, second_log = spawn_query(
            broker, topic, out, ckpt, tmp_path, "available-now", MAX_OFFSETS_ON_RESTART, "second"
        )
        procs.append(second)
        try:
            second.wait(timeout=QUERY_DEADLINE)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the available-now restart did not finish in time:\n{tail(second_log)}"
            ) from None
        assert second.returncode == 0, f"the restart failed:\n{tail(second_log)}"
    finally:
        for proc in procs:
            kill_session(proc)
        if producer.is_producing():
            with contextlib.suppress(AssertionError):
                producer.stop()

    on_disk, listed = sink_files(out)
    print(
        f"killed {jitter:.2f}s after the 3rd commit: {len(session)} processes, "
        f"{len(session) - len(group)} outside the group, all gone in {all_gone_s:.1f}s; "
        f"batches planned {planned[-1:]} committed {done[-1:]} "
        f"(in flight: {planned[-1:] > done[-1:]}); {produced_at_kill} records acked at the kill, "
        f"{len(produced)} in all; the restart committed up to batch "
        f"{batch_ids(ckpt, 'commits')[-1]}; {len(on_disk - listed)} uncommitted parquet "
        "file(s) left by the killed run"
    )
    assert len(batch_ids(ckpt, "commits")) > len(done), "the restart committed nothing"
    last = batch_ids(ckpt, "commits")[-1]
    assert checkpointed_end(ckpt, last) == {
        topic: {str(p): sum(1 for q, _, _ in produced if q == p) for p in range(PARTITIONS)}
    }
    assert_exactly_once(output_records(spark, out, topic), produced)


# --- graceful stop --------------------------------------------------------------------------------


def test_stopped_query_restarts_exactly_once(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    """``query.stop()`` mid-stream (a batch usually in flight, the producer still writing), then
    an available-now restart from the same checkpoint."""
    topic = "stopped"
    create_topic(broker, topic, PARTITIONS)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def start(**trigger: str | bool) -> StreamingQuery:
        restart = "availableNow" in trigger
        cap = MAX_OFFSETS_ON_RESTART if restart else MAX_OFFSETS_WHILE_RUNNING
        return (
            spark.readStream.format("samsa")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(cap))
            .load()
            .selectExpr("topic", "partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(**trigger)
            .start()
        )

    producer = BackgroundProducer(broker.bootstrap_servers, topic).start()
    query: StreamingQuery | None = None
    try:
        query = start(processingTime="500 milliseconds")

        def three_commits() -> bool:
            if not query.isActive:
                raise AssertionError(f"the query stopped early: {query.exception()}")
            return committed(ckpt) >= 3

        wait_until(three_commits, COMMITS_DEADLINE, "3 committed micro-batches")
        producer.wait_for_more()
        query.stop()
        assert not query.isActive
        assert query.exception() is None
        planned, done = batch_ids(ckpt, "offsets"), batch_ids(ckpt, "commits")
        producer.wait_for_more()  # more records while the query is down
        produced = producer.stop()

        query = start(availableNow=True)
        finished = query.awaitTermination(QUERY_DEADLINE)
        assert finished, "the available-now restart did not finish in time"
        assert query.exception() is None, f"the restart failed: {query.exception()}"
    finally:
        if query is not None and query.isActive:
            query.stop()
        if producer.is_producing():
            with contextlib.suppress(AssertionError):
                producer.stop()

    on_disk, listed = sink_files(out)
    print(
        f"stopped with batches planned {planned[-1:]} committed {done[-1:]}; {len(produced)} "
        f"records; the restart committed up to batch {batch_ids(ckpt, 'commits')[-1]}; "
        f"{len(on_disk - listed)} uncommitted parquet file(s) left by the stopped run"
    )
    assert_exactly_once(output_records(spark, out, topic), produced)
