"""Spark benchmark: samsa's PySpark data source (``format("samsa")``) against Parquet, in one run.

What is measured, rows per second, with one local SparkSession and one embedded broker:

* **setup** (not timed): an embedded ``samsa.Broker`` in this process (its event loop on a
  background thread, listening on 127.0.0.1), a topic with ``--partitions`` partitions
  (default 3) created with ``AdminClient.create_topics``, and ``--rows`` records (default
  1,000,000) produced into it with a batching confluent-kafka Producer (``linger.ms=20``,
  ``batch.size=1000000``, acks=all, no compression), round-robin over the partitions. Keys are
  null; values are ``--value-bytes`` (default 100) pseudo-random bytes, so neither Kafka nor
  Parquet can compress them. The high watermarks must add up to ``--rows`` before anything runs.
* **samsa_count**: ``spark.read.format("samsa")`` with ``subscribe``, ``startingOffsets=earliest``
  and ``endingOffsets=latest``, then ``df.count()``. One Spark task per topic-partition; each
  task's Python worker reads its offset range with a confluent-kafka Consumer and yields Arrow
  record batches. A Python data source has no column pruning: even a count moves every column.
* **samsa_count_minpN**: the same with ``minPartitions=N`` (``--min-partitions``, default 6):
  the offset ranges are split in proportion to their size into at least N tasks, rounded as
  Spark's ``KafkaOffsetRangeCalculator`` does.
* **samsa_scan**: the data source into ``agg(count(*), sum(length(value)))``, the same query as
  parquet_scan, so the two lines compare like with like.
* **samsa_to_parquet**: the data source into ``df.write.mode("overwrite").parquet(dir)``, all
  seven columns of Spark's Kafka schema.
* **pipeline_load** (needs the ``pipeline`` extra): ``samsa.pipeline.load.load`` of ``--rows``
  Avro activity events made by ``samsa.pipeline.generate`` (untimed, in the setup) from the
  three activity topics into a new table each run: read through the data source, decoded on
  the tasks with fastavro (``mapInArrow``), written as Parquet partitioned by date and hour and
  committed with its offsets. Its ratio is against parquet_scan like the others.
* **parquet_count**: ``spark.read.parquet(baseline).count()``; Parquet answers a count from its
  footers, so this line is an upper bound rather than a scan.
* **parquet_scan** (the baseline of the ratio column): ``spark.read.parquet(baseline)`` into
  ``agg(count(*), sum(length(value)))``, which decodes every value. ``baseline`` is written
  once, untimed, by the samsa_to_parquet code path, and its row count is checked.

Each workload runs once as a warm-up (``--warmup``; JIT, Python worker start-up and imports,
page cache), then ``--repeat`` times (default 3); the table shows the median seconds and
rows/s = rows / median seconds, and ``vs parquet_scan`` = rows/s over parquet_scan's rows/s.
Every run's row count is checked against ``--rows`` (the aggregations also check the sum of
the value lengths); a mismatch or a failure is reported in the table and the run goes on.

CPU columns: CPU seconds consumed during the timed runs (median over the repeats), read from
``/proc``: the broker's event-loop thread in this process (``broker``), the Python processes
Spark starts (``pyworkers``: pyspark.daemon and the workers it forks, reaped ones included
through the daemon's children times) and the JVM (``jvm``). With ``local[2]`` on a small
machine all of them share the same cores, so where the CPU goes explains the wall time.

Every socket is on 127.0.0.1 (the broker, and Spark's driver: ``spark.driver.bindAddress`` and
``spark.driver.host``, ``SPARK_LOCAL_IP``); the Spark UI is off. Every wait is bounded: the
setup steps by ``SETUP_TIMEOUT``, each Spark action by ``--job-timeout`` (from then on its
jobs are cancelled once a second and the workload reports an error), the data source's tasks
by ``kafka.poll.timeout``, and the whole run, including any hang no job cancel reaches, by
``--time-limit`` (faulthandler dumps the stacks and exits). Temporary files go to one
directory that is removed at the end.

    .venv/bin/python bench/spark_bench.py                       # 1M rows, about 2.5 minutes
    .venv/bin/python bench/spark_bench.py --rows 200000 --repeat 5
    .venv/bin/python bench/spark_bench.py --workloads samsa_count,parquet_scan --master local[4]

To add a workload: write a function ``(ctx: Context) -> int`` that runs one Spark action and
returns the rows it saw, and append ``(name, function)`` to the list in ``main()``.

Timings never fail the run: the exit status is 0 unless the setup fails.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import samsa
from samsa.pipeline.events import Topics
from samsa.pipeline.generate import generate

from proc_cpu import ProcStat, read_stat

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TOPIC = "spark-bench"
#: the pipeline's activity topics (page_views, searches, clicks) for pipeline_load
LOAD_TOPICS = Topics("bench-")
BASELINE = "parquet_scan"
SETUP_TIMEOUT = 60.0
PRODUCE_TIMEOUT = 300.0
POLL_TIMEOUT_MS = 30_000


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


def make_spark(master: str, driver_memory: str) -> SparkSession:
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
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)
    return spark


# --- CPU accounting -------------------------------------------------------------------------------


def cpu_snapshot(broker_tid: int | None) -> dict[tuple[str, int], float]:
    """CPU seconds so far of the broker thread, and of every JVM and Python process below us."""
    out: dict[tuple[str, int], float] = {}
    if broker_tid is not None:
        st = read_stat(f"/proc/self/task/{broker_tid}/stat")
        if st is not None:
            out[("broker", broker_tid)] = st.cpu_s + st.children_s
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
    _baseline: Path | None = None
    loads: int = 0

    def samsa(self, **options: str) -> DataFrame:
        reader = (
            self.spark.read.format("samsa")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.poll.timeout", str(POLL_TIMEOUT_MS))
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


def parquet_count(ctx: Context) -> int:
    return ctx.spark.read.parquet(str(ctx.baseline())).count()


def parquet_scan(ctx: Context) -> int:
    return ctx.scan(ctx.spark.read.parquet(str(ctx.baseline())))


def pipeline_load(ctx: Context) -> int:
    """``samsa pipeline load`` of the activity events into a new table (Avro decoded on the
    tasks, Parquet by date and hour, committed with its offsets); every run loads all of them."""
    from samsa.pipeline.load import load

    ctx.loads += 1
    result = load(ctx.spark, ctx.bootstrap, ctx.work / f"load-{ctx.loads}" / "events",
                  topics=LOAD_TOPICS)
    return result.rows


# --- the runner -----------------------------------------------------------------------------------

Workload = tuple[str, Callable[[Context], int]]


@dataclass
class Result:
    name: str
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


def run_workload(
    ctx: Context, name: str, fn: Callable[[Context], int], warmup: int, repeat: int,
    job_timeout: float, broker_tid: int | None,
) -> Result:
    result = Result(name)
    for i in range(warmup + repeat):
        timed = i >= warmup
        label = f"run {i - warmup + 1}/{repeat}" if timed else f"warm-up {i + 1}/{warmup}"
        try:
            if name.startswith("parquet"):
                ctx.baseline()  # written outside the clock
            before = cpu_snapshot(broker_tid)
            with job_deadline(ctx.spark, job_timeout) as fired:
                t0 = time.perf_counter()
                try:
                    rows = fn(ctx)
                except Exception as exc:
                    if fired.is_set():
                        raise TimeoutError(
                            f"cancelled after --job-timeout {job_timeout} s"
                        ) from exc
                    raise
                seconds = time.perf_counter() - t0
                if fired.is_set():
                    raise TimeoutError(f"took {seconds:.1f} s, over --job-timeout {job_timeout} s")
            after = cpu_snapshot(broker_tid)
        except Exception as exc:
            text = str(exc).strip().splitlines()
            result.error = f"{type(exc).__name__}: {text[0][:150] if text else ''}"
            say(f"  {name} {label}: FAILED {result.error}")
            return result
        if rows != ctx.rows:
            result.error = f"saw {rows} rows, expected {ctx.rows}"
            say(f"  {name} {label}: {result.error}")
            return result
        cpu = cpu_delta(before, after)
        say(f"  {name} {label}: {seconds:.3f} s, {rows / seconds:,.0f} rows/s, cpu s "
            f"broker {cpu['broker']:.2f} pyworkers {cpu['pyworkers']:.2f} jvm {cpu['jvm']:.2f}")
        if timed:
            result.rows = rows
            result.seconds.append(seconds)
            result.cpu.append(cpu)
    return result


def format_table(results: list[Result]) -> list[str]:
    base = next((r.rows_s for r in results if r.name == BASELINE and r.rows_s), None)
    header = ("workload", "rows", "seconds", "rows/s", f"vs {BASELINE}",
              "cpu s broker", "pyworkers", "jvm", "runs (s)")
    lines: list[tuple[str, ...]] = [header]
    for r in results:
        if r.error is not None:
            lines.append((r.name, "-", "-", "-", "-", "-", "-", "-", f"ERROR {r.error}"))
            continue
        rate = r.rows_s or 0.0
        cpus = [r.median_cpu(role) for role in ("broker", "pyworkers", "jvm")]
        lines.append((
            r.name,
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="samsa's PySpark data source against Parquet: rows/s side by side.",
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
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    parser.add_argument("--job-timeout", type=float, default=300.0,
                        help="seconds after which one run's Spark jobs are cancelled (default 300)")
    parser.add_argument("--time-limit", type=float, default=1800.0,
                        help="seconds after which the whole run is aborted (default 1800)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="parent of the temporary directory (default: the system's)")
    args = parser.parse_args(argv)
    for name in ("rows", "value_bytes", "partitions", "min_partitions", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    faulthandler.dump_traceback_later(args.time_limit, exit=True)

    # The workloads, in the order they run: (name, function(ctx) -> rows seen). Append here.
    workloads: list[Workload] = [
        ("samsa_count", samsa_count),
        (f"samsa_count_minp{args.min_partitions}", samsa_count_min_partitions),
        ("samsa_scan", samsa_scan),
        ("samsa_to_parquet", samsa_to_parquet),
        ("parquet_count", parquet_count),
        ("parquet_scan", parquet_scan),
        ("pipeline_load", pipeline_load),
    ]
    if args.workloads:
        wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
        unknown = sorted(set(wanted) - {name for name, _ in workloads})
        if unknown:
            say(f"spark_bench: unknown workload(s) {', '.join(unknown)}; known: "
                f"{', '.join(name for name, _ in workloads)}")
            return 2
        workloads = [(name, fn) for name, fn in workloads if name in wanted]

    import pyarrow
    import pyspark

    say(f"samsa spark bench: {args.rows:,} rows of {args.value_bytes} bytes in "
        f"{args.partitions} partitions; {args.warmup} warm-up + {args.repeat} runs per workload")
    say(f"python {platform.python_version()}, pyspark {pyspark.__version__}, pyarrow "
        f"{pyarrow.__version__}, confluent-kafka {confluent_kafka.version()[0]} (librdkafka "
        f"{confluent_kafka.libversion()[0]}); {os.cpu_count()} CPUs; master {args.master}")

    work = Path(tempfile.mkdtemp(prefix="spark-bench-", dir=args.dir))
    spark = None
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
                generate(bootstrap, events=args.rows, topics=LOAD_TOPICS, seed=1,
                         partitions=args.partitions)
                say(f"generated {args.rows:,} Avro activity events for pipeline_load in "
                    f"{time.perf_counter() - t0:.1f} s (not part of the table)")

            t0 = time.perf_counter()
            spark = make_spark(args.master, args.driver_memory)
            say(f"SparkSession up in {time.perf_counter() - t0:.1f} s")
            ctx = Context(spark, bootstrap, TOPIC, args.rows, args.value_bytes,
                          args.min_partitions, work)
            for name, fn in workloads:
                say(f"{name}:")
                results.append(run_workload(ctx, name, fn, args.warmup, args.repeat,
                                            args.job_timeout, broker_tid))
            spark.stop()
            spark = None
    except (RuntimeError, KafkaException, TimeoutError) as exc:
        say(f"spark_bench: setup failed: {exc}")
        return 1
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)
        faulthandler.cancel_dump_traceback_later()

    print()
    for line in format_table(results):
        print(line)
    print()
    print(f"rows/s = rows / median seconds of {args.repeat} runs (after {args.warmup} warm-up); "
          f"cpu s = median CPU seconds per run by role; {args.master}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
