"""Mirror benchmark: ``samsa mirror`` (MirrorMaker 2) against a plain consume-and-produce loop
of the same client, on the same two clusters, in one run; and replication lag under a steady
10,000 msg/s.

Two samsa brokers run as their own processes (broker_bench.py's ``BrokerProcess``: ``python -m
samsa.cli server`` on a free loopback port, default settings): the source cluster and the
target cluster. The mirror (``samsa.mirror.runner.MirrorMaker``, the code behind ``samsa
mirror``) and the plain loop run in this process with confluent-kafka. Workloads:

1. ``plain_loop``: ``--messages`` 200-byte messages (4 partitions) are preloaded into a fresh
   source topic; a consumer (fresh group, earliest, ``consume(2000)``) and an idempotent
   producer (``linger.ms=5``) copy them to a target topic, partition p to partition p, keys,
   headers and timestamps kept, librdkafka reporting failed deliveries only; the clock runs
   from the first ``consume`` that returns messages to the ``flush`` that acknowledges the
   last. No offsets are stored anywhere:
   the floor of copying with this client in Python.
2. ``mirror``: the same preload in another fresh topic, copied by the mirror (at-least-once,
   its defaults: offset syncs, progress in ``mm2-offsets.<source>.internal``, checkpoints and
   heartbeats running) until the target acknowledged every message (the mirror's
   ``record-count``); msg/s counts from the first message the target acknowledged (as for the
   plain loop); the start-up before it (topic creation, the group join with the broker's
   default group.initial.rebalance.delay.ms of 3 s) is ``startup_s``.
3. ``mirror_eos``: as 2 with ``exactly.once.support = enabled`` (a transaction per poll).
4. ``lag_10k``: the mirror (at-least-once) runs while a producer sends 200-byte messages at
   ``--rate`` msg/s (default 10,000, paced by the clock in 10 ms steps) to the source for
   ``--lag-duration`` seconds; a consumer of the remote topic takes each message's
   replication latency (its arrival on the target minus the CreateTime the source producer
   gave it, same clock); p50 / p99 / max, the mirror's lag (records behind, sampled every
   second) and the rate actually achieved. Beside it, a consumer of the source topic takes the
   same latency there (``source_read_latency_ms``): the part that is not the mirror's.

msg/s and MB/s (value bytes / s / 1e6) count messages acknowledged by the target. Output: one
JSON line per workload on stdout, a markdown table on stderr. Both brokers are stopped and the
temporary directory removed at the end; all on 127.0.0.1.

    .venv/bin/python bench/mirror_bench.py                    # about a minute
    .venv/bin/python bench/mirror_bench.py --messages 500000 --rate 10000 --lag-duration 30
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from samsa.mirror.config import MirrorMakerConfig  # noqa: E402
from samsa.mirror.runner import MirrorMaker  # noqa: E402

VALUE_BYTES = 200
PARTITIONS = 4


def log(text: str) -> None:
    print(f"[mirror_bench] {text}", file=sys.stderr, flush=True)


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def preload(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10000, "queue.buffering.max.messages": 500000})
    value = b"x" * VALUE_BYTES
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, str(i).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def mm2(alias: str, source: str, target: str, topic: str,
        extra: dict[str, str] | None = None) -> dict:
    """A flow ``alias``->T: each run has its own source alias, so its own worker group."""
    props = {"clusters": f"{alias}, T", f"{alias}.bootstrap.servers": source,
             "T.bootstrap.servers": target, f"{alias}->T.enabled": "true",
             f"{alias}->T.topics": topic, "replication.factor": "1",
             "offset-syncs.topic.replication.factor": "1",
             "checkpoints.topic.replication.factor": "1",
             "heartbeats.topic.replication.factor": "1",
             "offset.storage.replication.factor": "1", "heartbeats.replication.enabled": "false",
             "emit.checkpoints.interval.seconds": "5", "offset.flush.interval.ms": "5000"}
    props.update(extra or {})
    return props


def plain_loop(source: str, target: str, count: int) -> dict[str, Any]:
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    create(source, topic)
    create(target, topic)
    preload(source, topic, count)
    consumer = Consumer({"bootstrap.servers": source, "group.id": f"plain-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    failed = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal failed
        failed += 1

    # the loop's cheapest honest form: librdkafka reports only failures (no Python call per
    # message); the last flush() acknowledges everything else
    producer = Producer({"bootstrap.servers": target, "enable.idempotence": True,
                         "linger.ms": 5, "delivery.report.only.error": True,
                         "on_delivery": delivered})

    consumer.subscribe([topic])
    copied = 0
    start = None
    deadline = time.monotonic() + 600
    while copied < count and time.monotonic() < deadline:
        msgs = consumer.consume(2000, timeout=0.5)
        if msgs and start is None:
            start = time.perf_counter()
        for m in msgs:
            if m.error():
                continue
            ts_type, ts = m.timestamp()
            while True:
                try:
                    producer.produce(topic, m.value(), m.key(), partition=m.partition(),
                                     timestamp=ts if ts_type else 0, headers=m.headers())
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - (start or time.perf_counter())
    acked = copied - failed - left
    consumer.close()
    return {"workload": "plain_loop", "messages": acked, "seconds": round(elapsed, 3),
            "msg_per_s": round(acked / elapsed), "mb_per_s": round(acked * VALUE_BYTES /
                                                                   elapsed / 1e6, 2)}


def mirror_run(source: str, target: str, count: int, eos: bool) -> dict[str, Any]:
    topic = f"mirror-{uuid.uuid4().hex[:8]}"
    create(source, topic)
    preload(source, topic, count)
    extra = {"exactly.once.support": "enabled"} if eos else {}
    maker = MirrorMaker(MirrorMakerConfig(mm2(f"S{topic[-8:]}", source, target, topic, extra)))
    flow = maker.sources[0]
    start = time.perf_counter()
    maker.start()
    try:
        maker.wait_ready(60)
        ready = time.perf_counter()
        first = None
        deadline = time.monotonic() + 600
        while flow.metrics.record_count < count and time.monotonic() < deadline:
            if first is None and flow.metrics.record_count:
                first = time.perf_counter()
            if maker.failure():
                raise RuntimeError(maker.failure())
            time.sleep(0.01)
        end = time.perf_counter()
    finally:
        maker.stop()
    done = flow.metrics.record_count
    copying = end - (first or ready)
    return {"workload": "mirror_eos" if eos else "mirror", "messages": done,
            "seconds": round(end - start, 3), "startup_s": round((first or ready) - start, 3),
            "msg_per_s": round(done / copying), "mb_per_s": round(done * VALUE_BYTES / copying
                                                                  / 1e6, 2),
            "msg_per_s_incl_startup": round(done / (end - start))}


def lag_run(source: str, target: str, rate: int, duration: float) -> dict[str, Any]:
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    create(source, topic)
    alias = f"S{topic[-8:]}"
    maker = MirrorMaker(MirrorMakerConfig(mm2(alias, source, target, topic)))
    flow = maker.sources[0]
    maker.start()
    latencies: list[float] = []  # on the target: source producer -> mirrored record read
    at_source: list[float] = []  # on the source: the same records read there (the floor)
    lags: list[int] = []
    stop = threading.Event()

    def read(bootstrap: str, name: str, found: list[float]) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lag-{name}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        while name not in consumer.list_topics(timeout=10).topics:
            time.sleep(0.1)
        consumer.subscribe([name])
        while not stop.is_set():
            for m in consumer.consume(2000, timeout=0.2):
                if not m.error():
                    found.append(time.time() * 1000 - m.timestamp()[1])
        consumer.close()

    readers = [threading.Thread(target=read, args=(target, f"{alias}.{topic}", latencies),
                                daemon=True),
               threading.Thread(target=read, args=(source, topic, at_source), daemon=True)]
    try:
        maker.wait_ready(60)
        deadline = time.monotonic() + 60
        while flow.metrics.partitions < PARTITIONS and time.monotonic() < deadline:
            time.sleep(0.05)  # the group join: the load starts once the mirror holds them
        for reader in readers:
            reader.start()
        producer = Producer({"bootstrap.servers": source, "linger.ms": 5,
                             "queue.buffering.max.messages": 1_000_000})
        value = b"x" * VALUE_BYTES
        sent = 0
        start = time.monotonic()
        next_sample = start + 1
        while time.monotonic() - start < duration:
            due = int((time.monotonic() - start) * rate)
            while sent < due:
                try:
                    producer.produce(topic, value, partition=sent % PARTITIONS)
                    sent += 1
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            if time.monotonic() >= next_sample:
                lags.append(flow.metrics.lag)
                next_sample += 1
            time.sleep(0.01)
        producer.flush(60)
        achieved = sent / (time.monotonic() - start)
        deadline = time.monotonic() + 120
        while len(latencies) < sent and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        maker.stop()
        for reader in readers:
            reader.join(30)
    values = sorted(latencies)
    floor = sorted(at_source)

    def pct(q: float, values: list[float] = values) -> float | None:
        return round(values[min(len(values) - 1, int(q * len(values)))], 1) if values else None

    return {"workload": "lag_10k", "rate_asked": rate, "rate_achieved": round(achieved),
            "messages": sent, "received": len(values), "latency_ms_p50": pct(0.5),
            "latency_ms_p99": pct(0.99), "latency_ms_max": round(values[-1], 1) if values
            else None, "lag_records_mean": round(statistics.mean(lags)) if lags else None,
            "lag_records_max": max(lags) if lags else None,
            "source_read_latency_ms_p50": pct(0.5, floor),
            "source_read_latency_ms_p99": pct(0.99, floor)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--lag-duration", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=2,
                        help="rounds of the throughput workloads; the best is reported")
    parser.add_argument("--workloads", nargs="+",
                        default=["plain_loop", "mirror", "mirror_eos", "lag_10k"])
    args = parser.parse_args(argv)
    from broker_bench import BrokerProcess

    results = []
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as tmp:
        brokers = []
        for name in ("source", "target"):
            (Path(tmp) / name).mkdir()
            brokers.append(BrokerProcess("samsa", Path(tmp) / name))
        try:
            for b in brokers:
                b.start()
            source, target = brokers[0].bootstrap, brokers[1].bootstrap
            log(f"source {source}, target {target}; {platform.python_implementation()} "
                f"{platform.python_version()}, {os.cpu_count()} CPUs")
            for workload in args.workloads:
                rounds = 1 if workload == "lag_10k" else max(1, args.repeat)
                lines = []
                for i in range(rounds):
                    log(f"{workload} (round {i + 1} of {rounds}) ...")
                    if workload == "plain_loop":
                        lines.append(plain_loop(source, target, args.messages))
                    elif workload in ("mirror", "mirror_eos"):
                        lines.append(mirror_run(source, target, args.messages,
                                                workload == "mirror_eos"))
                    else:
                        lines.append(lag_run(source, target, args.rate, args.lag_duration))
                line = max(lines, key=lambda r: r.get("msg_per_s", 0))
                if rounds > 1:
                    line["repeats_msg_per_s"] = [r["msg_per_s"] for r in lines]
                print(json.dumps(line), flush=True)
                results.append(line)
        finally:
            for b in brokers:
                with contextlib.suppress(Exception):
                    b.stop()
    log("| workload | msg/s | MB/s | notes |")
    log("|---|---|---|---|")
    for r in results:
        if r["workload"] == "lag_10k":
            log(f"| lag_10k | {r['rate_achieved']} | | latency p50 {r['latency_ms_p50']} ms, "
                f"p99 {r['latency_ms_p99']} ms, max {r['latency_ms_max']} ms; lag mean "
                f"{r['lag_records_mean']} max {r['lag_records_max']} records; read on the "
                f"source: p50 {r['source_read_latency_ms_p50']} ms, p99 "
                f"{r['source_read_latency_ms_p99']} ms |")
        else:
            log(f"| {r['workload']} | {r['msg_per_s']} | {r['mb_per_s']} | "
                f"{r['messages']} messages in {r['seconds']} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
