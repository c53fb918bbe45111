"""Spark benchmark: samsa's PySpark data source (``format("samsa")``) against Parquet and Spark's
own Kafka connector, in one run; with ``--baseline``, another version of samsa beside this one.

What is measured, rows per second, with local SparkSessions and one embedded broker:

* **setup** (not timed): an embedded ``samsa.Broker`` in this process (its event loop on a
  background thread, listening on 127.0.0.1), a topic with ``--partitions`` partitions
  (default 3) created with ``AdminClient.create_topics``, and ``--rows`` records (default
  1,000,000) produced into it with a batching confluent-kafka Producer (``linger.ms=20``,
  ``batch.size=1000000``, acks=all, no compression), round-robin over the partitions. Keys are
  null; values are ``--value-bytes`` (default 100) pseudo-random bytes, so neither Kafka nor
  Parquet can compress them. The high watermarks must add up to ``--rows`` before anything runs.
* **samsa_count**: ``spark.read.format("samsa")`` with ``subscribe``, ``startingOffsets=earliest``
  and ``endingOffsets=latest``, then ``df.count()``. One Spark task per topic-partition; each
  task's Python worker fetches its offset range's record batches and decodes them into Arrow
  columns. A Python data source has no column pruning: even a count moves every column.
* **samsa_count_minpN**: the same with ``minPartitions=N`` (``--min-partitions``, default 6):
  the offset ranges are split in proportion to their size into at least N tasks, rounded as
  Spark's ``KafkaOffsetRangeCalculator`` does.
* **samsa_scan**: the data source into ``agg(count(*), sum(length(value)))``, the same query as
  parquet_scan, so the two lines compare like with like.
* **samsa_to_parquet**: the data source into ``df.write.mode("overwrite").parquet(dir)``, all
  seven columns of Spark's Kafka schema.
* **floor_count**, **floor_scan**: ``bench/spark_floor.py``'s ``format("python_floor")``, a
  Python data source that does no work (each task builds one Arrow batch of the same schema,
  value sizes and partitions once and hands it over again and again), into the same queries:
  what PySpark's Python data sources cost by themselves (workers, Arrow to the JVM, Spark rows),
  the ceiling of samsa_count and samsa_scan on this machine.
* **kafka_count**, **kafka_scan**: Spark's own Kafka connector (``format("kafka")``,
  spark-sql-kafka-0-10, the jars ``make reference`` lists in ``build/spark-kafka/classpath.txt``,
  or ``--kafka-classpath``) on the same topic with the same options and queries as
  samsa_count and samsa_scan. Without the jars these lines say so and the run goes on.
* **pipeline_load** (needs the ``pipeline`` extra): ``samsa.pipeline.load.load`` of ``--rows``
  Avro activity events made by ``samsa.pipeline.generate`` (untimed, in the setup) from the
  three activity topics into a new table each run: read and decoded on the tasks, written as
  Parquet partitioned by date and hour and committed with its offsets.
* **parquet_count**: ``spark.read.parquet(baseline).count()``; Parquet answers a count from its
  footers, so this line is an upper bound rather than a scan.
* **parquet_scan** (the baseline of the ratio column): ``spark.read.parquet(baseline)`` into
  ``agg(count(*), sum(length(value)))``, which decodes every value. ``baseline`` is written
  once, untimed, by the samsa_to_parquet code path, and its row count is checked.

Each version of samsa gets its own SparkSession in its own process (a child of this one whose
``PYTHONPATH`` is that version's tree, so its Spark workers import that samsa); the broker and
the data are shared. ``--baseline DIR`` (a checkout of another commit: ``git worktree add`` or
``git archive``) adds a second session for DIR's samsa: the workloads that run samsa code
(samsa_*, pipeline_load) run in both, interleaved run by run (the order alternating), so that
both versions see the same machine; the others (kafka_*, parquet_*) run once, in this version's
session, and the ratios of both versions are against that parquet_scan. The table ends with each
workload's speed-up over the baseline.

Each workload runs once as a warm-up (``--warmup``; JIT, Python worker start-up and imports,
page cache), then ``--repeat`` times (default 3); the table shows the median seconds and
rows/s = rows / median seconds, and ``vs parquet_scan`` = rows/s over parquet_scan's rows/s.
Every run's row count is checked against ``--rows`` (the aggregations also check the sum of
the value lengths); a mismatch or a failure is reported in the table and the run goes on.

CPU columns: CPU seconds consumed during the timed runs (median over the repeats), read from
``/proc``: the broker's event-loop thread (``broker``), the Python processes a session's Spark
starts (``pyworkers``: pyspark.daemon and the workers it forks, reaped ones included through
the daemon's children times) and its JVM (``jvm``). With ``local[2]`` on a small machine all
of them share the same cores, so where the CPU goes explains the wall time.

Every socket is on 127.0.0.1 (the broker, and Spark's driver: ``spark.driver.bindAddress`` and
``spark.driver.host``, ``SPARK_LOCAL_IP``); the Spark UI is off. Every wait is bounded: the
setup steps by ``SETUP_TIMEOUT``, each Spark action by ``--job-timeout`` (from then on its
jobs are cancelled once a second and the workload reports an error; a session that does not
answer within another minute is killed), the data source's tasks by ``kafka.poll.timeout``, and
the whole run, including any hang no job cancel reaches, by ``--time-limit`` (faulthandler
dumps the stacks and exits). Temporary files go to one directory that is removed at the end.

    .venv/bin/python bench/spark_bench.py                       # 1M rows, about 3 minutes
    .venv/bin/python bench/spark_bench.py --rows 200000 --repeat 5
    .venv/bin/python bench/spark_bench.py --workloads samsa_count,parquet_scan --master local[4]
    git worktree add /tmp/before <commit>                       # before and after, one run:
    .venv/bin/python bench/spark_bench.py --baseline /tmp/before

To add a workload: write a function ``(ctx: Context) -> int`` that runs one Spark action and
returns the rows it saw, and add ``(name, function, runs_samsa_code)`` to ``WORKLOADS``.

Timings never fail the run: the exit status is 0 unless the setup fails.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import platform
import random
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from proc_cpu import ProcStat, read_stat

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOPIC = "spark-bench"
#: the pipeline's activity topics (page_views, searches, clicks) for pipeline_load
LOAD_TOPIC_PREFIX = "bench-"
BASELINE = "parquet_scan"
SETUP_TIMEOUT = 60.0
PRODUCE_TIMEOUT = 300.0
POLL_TIMEOUT_MS = 30_000
#: a session must answer this long after its job timeout, or it is killed
SESSION_GRACE_S = 60.0
#: the marker of a child session's result lines on its stdout
RESULT = "@@spark-bench-result "
KAFKA_CLASSPATH = PROJECT_DIR / "build" / "spark-kafka" / "classpath.txt"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- setup: broker, topic, data -------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 1)], operation_timeout=10, request_timeout=SETUP_TIMEOUT
    )
    futures[topic].result(timeout=SETUP_TIMEOUT)
    deadline = time.monotonic() + SETUP_TIMEOUT
    while True:
        meta = admin.list_topics(topic, timeout=SETUP_TIMEOUT).topics.get(topic)
        if (meta is not None and meta.error is None and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has no leaders after {SETUP_TIMEOUT} s")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, partitions: int, rows: int, value_bytes: int) -> float:
    """``rows`` values of ``value_bytes`` random bytes, round-robin; returns the seconds taken."""
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(failures) < 5:
            failures.append(str(err))

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "batch.num.messages": 1_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "compression.type": "none",
        "acks": "all",
        "log_level": 3,
    })
    rnd = random.Random(1)
    t0 = time.perf_counter()
    deadline = time.monotonic() + PRODUCE_TIMEOUT
    for i in range(rows):
        value = rnd.randbytes(value_bytes)
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.05)
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"produce: queue still full after {PRODUCE_TIMEOUT} s"
                    ) from None
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    seconds = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"produce: {left} messages not delivered in {PRODUCE_TIMEOUT} s")
    if failures:
        raise RuntimeError(f"produce: delivery failed: {'; '.join(failures)}")
    return seconds


def topic_rows(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench-check",
                         "log_level": 3})
    try:
        total = 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=SETUP_TIMEOUT, cached=False
            )
            total += high - low
        return total
    finally:
        consumer.close()


def make_spark(master: str, driver_memory: str, jars: list[str] | None = None) -> SparkSession:
    # Python workers must run this interpreter (the one with samsa and confluent-kafka).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import samsa.spark

    spark = (
        SparkSession.builder.master(master)
        .appName("samsa-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", driver_memory)
        .config("spark.jars", ",".join(jars or []))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)
    return spark


# --- CPU accounting -------------------------------------------------------------------------------


def cpu_snapshot(broker: tuple[int, int] | None) -> dict[tuple[str, int], float]:
    """CPU seconds so far of the broker thread (``(pid, tid)``), and of every JVM and Python
    process below this one."""
    out: dict[tuple[str, int], float] = {}
    if broker is not None:
        st = read_stat(f"/proc/{broker[0]}/task/{broker[1]}/stat")
        if st is not None:
            out[("broker", broker[1])] = st.cpu_s + st.children_s
    procs: dict[int, ProcStat] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = read_stat(f"/proc/{entry}/stat")
            if st is not None:
                procs[int(entry)] = st
    me = os.getpid()
    for pid, st in procs.items():
        ancestor, hops = st.ppid, 0
        while ancestor not in (me, 0, 1) and ancestor in procs and hops < 64:
            ancestor, hops = procs[ancestor].ppid, hops + 1
        if ancestor != me or pid == me:
            continue
        if st.comm == "java":
            out[("jvm", pid)] = st.cpu_s + st.children_s
        elif st.comm.startswith("python"):
            out[("pyworkers", pid)] = st.cpu_s + st.children_s
    return out


def cpu_delta(
    before: dict[tuple[str, int], float], after: dict[tuple[str, int], float]
) -> dict[str, float]:
    roles = {"broker": 0.0, "pyworkers": 0.0, "jvm": 0.0}
    for key, cpu in after.items():
        roles[key[0]] += max(0.0, cpu - before.get(key, 0.0))
    return roles


# --- workloads ------------------------------------------------------------------------------------


@dataclass
class Context:
    """What a workload gets: the session, the broker's address, the data and a scratch dir."""

    spark: SparkSession
    bootstrap: str
    topic: str
    rows: int
    value_bytes: int
    min_partitions: int
    work: Path
    partitions: int = 3
    _baseline: Path | None = None
    loads: int = 0
    _floor_registered: bool = False

    def samsa(self, **options: str) -> DataFrame:
        return self._read("samsa", {"kafka.poll.timeout": str(POLL_TIMEOUT_MS), **options})

    def floor(self) -> DataFrame:
        """bench/spark_floor.py's source that does no work: the same schema, rows, value
        sizes and partitions as the topic, built once per task and handed over again."""
        if not self._floor_registered:
            import spark_floor
            from pyspark import cloudpickle

            # the Python workers cannot import bench/: the class travels by value
            cloudpickle.register_pickle_by_value(spark_floor)
            self.spark.dataSource.register(spark_floor.FloorDataSource)
            self._floor_registered = True
        return (self.spark.read.format("python_floor").option("rows", str(self.rows))
                .option("partitions", str(self.partitions))
                .option("valueBytes", str(self.value_bytes)).option("topic", self.topic).load())

    def kafka(self) -> DataFrame:
        """Spark's own Kafka connector on the same topic, with the same offsets."""
        return self._read("kafka", {})

    def _read(self, fmt: str, options: dict[str, str]) -> DataFrame:
        reader = (
            self.spark.read.format(fmt)
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    def scan(self, df: DataFrame) -> int:
        """count(*) and sum(length(value)) of ``df``; checks the sum, returns the count."""
        from pyspark.sql import functions as F  # noqa: N812

        row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
        assert row is not None
        n, total = int(row["n"]), int(row["b"] or 0)
        if total != n * self.value_bytes:
            raise RuntimeError(f"sum(length(value)) = {total}, expected {n * self.value_bytes}")
        return n

    def baseline(self) -> Path:
        """The Parquet files read back by the parquet_* workloads: written on first use, untimed,
        by the same code as samsa_to_parquet, and counted."""
        if self._baseline is None:
            path = self.work / "baseline.parquet"
            write_parquet(self, path)
            n = self.spark.read.parquet(str(path)).count()
            if n != self.rows:
                raise RuntimeError(f"baseline Parquet has {n} rows, expected {self.rows}")
            self._baseline = path
        return self._baseline


def write_parquet(ctx: Context, path: Path) -> None:
    ctx.samsa().write.mode("overwrite").parquet(str(path))


def samsa_count(ctx: Context) -> int:
    return ctx.samsa().count()


def samsa_count_min_partitions(ctx: Context) -> int:
    return ctx.samsa(minPartitions=str(ctx.min_partitions)).count()


def samsa_scan(ctx: Context) -> int:
    return ctx.scan(ctx.samsa())


def samsa_to_parquet(ctx: Context) -> int:
    """Rows are not counted here (that would be a second job inside the clock): the same code
    wrote the baseline, whose count is checked."""
    write_parquet(ctx, ctx.work / "write-out.parquet")
    return ctx.rows


def floor_count(ctx: Context) -> int:
    return ctx.floor().count()


def floor_scan(ctx: Context) -> int:
    return ctx.scan(ctx.floor())


def kafka_count(ctx: Context) -> int:
    return ctx.kafka().count()


def kafka_scan(ctx: Context) -> int:
    return ctx.scan(ctx.kafka())


def parquet_count(ctx: Context) -> int:
    return ctx.spark.read.parquet(str(ctx.baseline())).count()


def parquet_scan(ctx: Context) -> int:
    return ctx.scan(ctx.spark.read.parquet(str(ctx.baseline())))


def pipeline_load(ctx: Context) -> int:
    """``samsa pipeline load`` of the activity events into a new table (Avro decoded on the
    tasks, Parquet by date and hour, committed with its offsets); every run loads all of them."""
    from samsa.pipeline.events import Topics
    from samsa.pipeline.load import load

    ctx.loads += 1
    result = load(ctx.spark, ctx.bootstrap, ctx.work / f"load-{ctx.loads}" / "events",
                  topics=Topics(LOAD_TOPIC_PREFIX))
    return result.rows


#: (name, function, whether it runs samsa's code): the order they run in. The name of
#: samsa_count_min_partitions is completed with --min-partitions.
WORKLOADS: list[tuple[str, Callable[[Context], int], bool]] = [
    ("samsa_count", samsa_count, True),
    ("samsa_count_minp", samsa_count_min_partitions, True),
    ("samsa_scan", samsa_scan, True),
    ("samsa_to_parquet", samsa_to_parquet, True),
    ("floor_count", floor_count, False),
    ("floor_scan", floor_scan, False),
    ("kafka_count", kafka_count, False),
    ("kafka_scan", kafka_scan, False),
    ("parquet_count", parquet_count, False),
    ("parquet_scan", parquet_scan, False),
    ("pipeline_load", pipeline_load, True),
]


# --- a session: one version's SparkSession, in its own process ------------------------------------


@dataclass
class Run:
    """One run of a workload in a session, as the session reports it."""

    seconds: float = 0.0
    rows: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@contextmanager
def job_deadline(spark: SparkSession, seconds: float) -> Iterator[threading.Event]:
    """After ``seconds``, cancel every Spark job, and again each second until the block ends
    (a job submitted after the first cancel, e.g. once the driver has planned the Python data
    source, is cancelled too). The event tells whether the deadline passed."""
    fired = threading.Event()
    done = threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        fired.set()
        while not done.is_set():
            try:
                spark.sparkContext.cancelAllJobs()
            except Exception:  # the session is going away: nothing left to cancel
                return
            done.wait(1.0)

    watcher = threading.Thread(target=watch, name="job-deadline", daemon=True)
    watcher.start()
    try:
        yield fired
    finally:
        done.set()
        watcher.join(5.0)


def run_once(ctx: Context, name: str, fn: Callable[[Context], int], job_timeout: float,
             broker: tuple[int, int] | None) -> Run:
    try:
        if name.startswith("parquet"):
            ctx.baseline()  # written outside the clock
        before = cpu_snapshot(broker)
        with job_deadline(ctx.spark, job_timeout) as fired:
            t0 = time.perf_counter()
            try:
                rows = fn(ctx)
            except Exception as exc:
                if fired.is_set():
                    raise TimeoutError(f"cancelled after --job-timeout {job_timeout} s") from exc
                raise
            seconds = time.perf_counter() - t0
            if fired.is_set():
                raise TimeoutError(f"took {seconds:.1f} s, over --job-timeout {job_timeout} s")
        after = cpu_snapshot(broker)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return Run(error=f"{type(exc).__name__}: {text[0][:150] if text else ''}")
    if rows != ctx.rows:
        return Run(error=f"saw {rows} rows, expected {ctx.rows}")
    return Run(seconds, rows, cpu_delta(before, after))


def session_main(config: dict[str, Any]) -> int:
    """A child session: builds its SparkSession, then runs one workload per line of stdin
    (``run <name>``), answering each with a result line on stdout, until ``quit``."""
    functions = {name: fn for name, fn, _ in WORKLOADS}
    jars = config["jars"]
    spark = make_spark(config["master"], config["driver_memory"], jars)
    try:
        ctx = Context(spark, config["bootstrap"], config["topic"], config["rows"],
                      config["value_bytes"], config["min_partitions"], Path(config["work"]),
                      config["partitions"])
        broker = (config["broker"][0], config["broker"][1]) if config["broker"] else None
        print(RESULT + json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            command, _, name = line.strip().partition(" ")
            if command == "quit":
                break
            fn = functions["samsa_count_minp" if name.startswith("samsa_count_minp") else name]
            if name.startswith("kafka") and not jars:
                run = Run(error="no jars of Spark's Kafka connector (make reference)")
            else:
                run = run_once(ctx, name, fn, config["job_timeout"], broker)
            print(RESULT + json.dumps(asdict(run)), flush=True)
    finally:
        spark.stop()
    return 0


class Session:
    """The parent's handle on a child session (one version of samsa)."""

    def __init__(self, label: str, tree: Path, config: dict[str, Any]) -> None:
        self.label = label
        self.job_timeout = float(config["job_timeout"])
        env = dict(os.environ, PYTHONPATH=str(tree), PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--session", json.dumps(config)],
            cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._answer(SETUP_TIMEOUT * 3)  # its "ready"

    def run(self, name: str) -> Run:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"run {name}\n")
            self.proc.stdin.flush()
            return Run(**self._answer(self.job_timeout + SESSION_GRACE_S))
        except (OSError, RuntimeError) as exc:
            return Run(error=f"session {self.label}: {exc}")

    def _answer(self, timeout: float) -> dict[str, Any]:
        stdout: IO[str] | None = self.proc.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stdout], [], [], left)[0]:
                self.close()
                raise RuntimeError(f"no answer within {timeout:.0f} s: killed")
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"the session exited ({self.proc.wait()})")
            if line.startswith(RESULT):
                answer: dict[str, Any] = json.loads(line[len(RESULT):])
                return answer
            sys.stdout.write(line)  # whatever else the session printed

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


# --- the runner -----------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    version: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[dict[str, float]] = field(default_factory=list)
    rows: int = 0
    error: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def rows_s(self) -> float | None:
        m = self.median_s
        return self.rows / m if m else None

    def median_cpu(self, role: str) -> float | None:
        return statistics.median(c[role] for c in self.cpu) if self.cpu else None

    @property
    def label(self) -> str:
        return self.name if self.version == "this" else f"{self.name} ({self.version})"


def run_workload(sessions: list[Session], name: str, warmup: int, repeat: int
                 ) -> list[Result]:
    """Warm-ups, then the timed runs, interleaved across ``sessions`` (order alternating)."""
    results = {s.label: Result(name, s.label) for s in sessions}
    for i in range(warmup + repeat):
        timed = i >= warmup
        order = sessions if i % 2 == 0 else sessions[::-1]
        for session in order:
            result = results[session.label]
            if result.error is not None:
                continue
            label = f"run {i - warmup + 1}/{repeat}" if timed else f"warm-up {i + 1}/{warmup}"
            run = session.run(name)
            who = f"{name}" + ("" if session.label == "this" else f" ({session.label})")
            if run.error is not None:
                result.error = run.error
                say(f"  {who} {label}: FAILED {run.error}")
                continue
            cpu = run.cpu
            say(f"  {who} {label}: {run.seconds:.3f} s, {run.rows / run.seconds:,.0f} rows/s, "
                f"cpu s broker {cpu['broker']:.2f} pyworkers {cpu['pyworkers']:.2f} "
                f"jvm {cpu['jvm']:.2f}")
            if timed:
                result.rows = run.rows
                result.seconds.append(run.seconds)
                result.cpu.append(cpu)
    return list(results.values())


def format_table(results: list[Result]) -> list[str]:
    base = next((r.rows_s for r in results if r.name == BASELINE and r.rows_s), None)
    header = ("workload", "rows", "seconds", "rows/s", f"vs {BASELINE}",
              "cpu s broker", "pyworkers", "jvm", "runs (s)")
    lines: list[tuple[str, ...]] = [header]
    for r in results:
        if r.error is not None:
            lines.append((r.label, "-", "-", "-", "-", "-", "-", "-", f"ERROR {r.error}"))
            continue
        rate = r.rows_s or 0.0
        cpus = [r.median_cpu(role) for role in ("broker", "pyworkers", "jvm")]
        lines.append((
            r.label,
            f"{r.rows:,}",
            f"{r.median_s:.3f}",
            f"{rate:,.0f}",
            f"{rate / base:.3f}x" if base else "-",
            *(f"{c:.2f}" if c is not None else "-" for c in cpus),
            " ".join(f"{s:.2f}" for s in r.seconds),
        ))
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        cells = [c.ljust(widths[i]) if i in (0, 8) else c.rjust(widths[i])
                 for i, c in enumerate(line)]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def speedups(results: list[Result]) -> list[str]:
    """Each workload's rows/s in this version over the baseline's."""
    out = []
    for r in results:
        if r.version != "this" or not r.rows_s:
            continue
        base = next((b for b in results if b.name == r.name and b.version == "base"), None)
        if base is not None and base.rows_s:
            out.append(f"  {r.name}: {r.rows_s / base.rows_s:.2f}x ({base.rows_s:,.0f} -> "
                       f"{r.rows_s:,.0f} rows/s)")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="samsa's PySpark data source against Parquet and Spark's Kafka connector: "
        "rows/s side by side.",
        epilog="Progress goes to stderr, the table to stdout. Exit status 0 whatever the timings.",
    )
    parser.add_argument("--rows", type=int, default=1_000_000,
                        help="records produced into the topic (default 1000000)")
    parser.add_argument("--value-bytes", type=int, default=100,
                        help="bytes per value, random (default 100)")
    parser.add_argument("--partitions", type=int, default=3,
                        help="partitions of the topic (default 3)")
    parser.add_argument("--min-partitions", type=int, default=6,
                        help="minPartitions of the split read (default 6)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed runs per workload; the table shows the median (default 3)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed runs before the timed ones (default 1)")
    parser.add_argument("--workloads", default=None,
                        help="comma-separated workload names (default: all)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another samsa source tree (a checkout of an earlier commit): its "
                        "samsa runs the samsa workloads too, interleaved with this one's")
    parser.add_argument("--kafka-classpath", type=Path, default=KAFKA_CLASSPATH,
                        help="the classpath file of Spark's Kafka connector (default: the one "
                        "make reference writes)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    parser.add_argument("--job-timeout", type=float, default=300.0,
                        help="seconds after which one run's Spark jobs are cancelled (default 300)")
    parser.add_argument("--time-limit", type=float, default=3600.0,
                        help="seconds after which the whole run is aborted (default 3600)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="parent of the temporary directory (default: the system's)")
    parser.add_argument("--session", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("rows", "value_bytes", "partitions", "min_partitions", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    if args.baseline is not None and not (args.baseline / "samsa" / "spark").is_dir():
        parser.error(f"--baseline {args.baseline} is not a samsa source tree with samsa/spark")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.session is not None:
        return session_main(json.loads(args.session))
    faulthandler.dump_traceback_later(args.time_limit, exit=True)

    workloads = [(f"{name}{args.min_partitions}" if name == "samsa_count_minp" else name,
                  needs_samsa) for name, _, needs_samsa in WORKLOADS]
    if args.workloads:
        wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
        unknown = sorted(set(wanted) - {name for name, _ in workloads})
        if unknown:
            say(f"spark_bench: unknown workload(s) {', '.join(unknown)}; known: "
                f"{', '.join(name for name, _ in workloads)}")
            return 2
        workloads = [(name, needs) for name, needs in workloads if name in wanted]
    jars: list[str] = []
    if any(name.startswith("kafka") for name, _ in workloads):
        if args.kafka_classpath.exists():
            jars = [j for j in args.kafka_classpath.read_text().strip().split(":") if j]
        else:
            say(f"no {args.kafka_classpath} (make reference): the kafka_* lines are skipped")

    import pyarrow
    import pyspark

    import samsa
    from samsa.pipeline.events import Topics
    from samsa.pipeline.generate import generate

    say(f"samsa spark bench: {args.rows:,} rows of {args.value_bytes} bytes in "
        f"{args.partitions} partitions; {args.warmup} warm-up + {args.repeat} runs per workload"
        + (f"; baseline {args.baseline}" if args.baseline else ""))
    say(f"python {platform.python_version()}, pyspark {pyspark.__version__}, pyarrow "
        f"{pyarrow.__version__}, confluent-kafka {confluent_kafka.version()[0]} (librdkafka "
        f"{confluent_kafka.libversion()[0]}); {os.cpu_count()} CPUs; master {args.master}")

    work = Path(tempfile.mkdtemp(prefix="spark-bench-", dir=args.dir))
    sessions: list[Session] = []
    results: list[Result] = []
    try:
        with samsa.Broker(work / "broker", num_partitions=args.partitions) as broker:
            bootstrap = broker.bootstrap_servers
            thread = getattr(broker, "_thread", None)
            broker_tid = getattr(thread, "native_id", None)
            create_topic(bootstrap, TOPIC, args.partitions)
            seconds = produce(bootstrap, TOPIC, args.partitions, args.rows, args.value_bytes)
            found = topic_rows(bootstrap, TOPIC, args.partitions)
            if found != args.rows:
                raise RuntimeError(f"the topic holds {found} records, expected {args.rows}")
            say(f"broker on {bootstrap}; produced {args.rows:,} records in {seconds:.2f} s "
                f"({args.rows / seconds:,.0f} msg/s, not part of the table)")
            if any(name == "pipeline_load" for name, _ in workloads):
                t0 = time.perf_counter()
                generate(bootstrap, events=args.rows, topics=Topics(LOAD_TOPIC_PREFIX), seed=1,
                         partitions=args.partitions)
                say(f"generated {args.rows:,} Avro activity events for pipeline_load in "
                    f"{time.perf_counter() - t0:.1f} s (not part of the table)")

            t0 = time.perf_counter()
            trees = [("this", PROJECT_DIR)]
            if args.baseline is not None and any(needs for _, needs in workloads):
                trees.append(("base", args.baseline.resolve()))
            for label, tree in trees:
                (work / label).mkdir()
                config = {
                    "bootstrap": bootstrap, "topic": TOPIC, "rows": args.rows,
                    "value_bytes": args.value_bytes, "min_partitions": args.min_partitions,
                    "partitions": args.partitions,
                    "work": str(work / label), "master": args.master,
                    "driver_memory": args.driver_memory, "job_timeout": args.job_timeout,
                    "broker": [os.getpid(), broker_tid] if broker_tid else None,
                    "jars": jars if label == "this" else [],
                }
                sessions.append(Session(label, tree, config))
            say(f"{len(sessions)} SparkSession(s) up in {time.perf_counter() - t0:.1f} s")
            for name, needs_samsa in workloads:
                say(f"{name}:")
                results += run_workload(sessions if needs_samsa else sessions[:1], name,
                                        args.warmup, args.repeat)
            for session in sessions:
                session.close()
    except (RuntimeError, KafkaException, TimeoutError) as exc:
        say(f"spark_bench: setup failed: {exc}")
        return 1
    finally:
        for session in sessions:
            session.close()
        shutil.rmtree(work, ignore_errors=True)
        faulthandler.cancel_dump_traceback_later()

    print()
    for line in format_table(results):
        print(line)
    print()
    print(f"rows/s = rows / median seconds of {args.repeat} runs (after {args.warmup} warm-up); "
          f"cpu s = median CPU seconds per run by role; {args.master}, {os.cpu_count()} CPUs")
    if len(sessions) > 1:
        print(f"\nthis version over the baseline ({args.baseline}), interleaved runs:")
        for line in speedups(results):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
