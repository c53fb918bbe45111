"""The cores of one machine: 1, 2, 4, ... samsa brokers on one host, aggregate throughput.

One samsa broker is one event loop on one core; a machine's other cores are used by running
more broker processes in one cluster (``samsa cluster up --brokers N``, a real ZooKeeper). For
each broker count N (``--brokers``) and replication factor (1, and 3 where N >= 3) this starts
a fresh ``LocalCluster``, creates a topic of ``2 N`` partitions (leaders spread over the brokers
by placement), then:

* **produce**: N producer processes (confluent-kafka / librdkafka, ``linger.ms=5``, 100-byte
  values, ``acks=1`` at RF 1, ``acks=all`` and ``enable.idempotence`` at RF 3), each over every
  partition, for ``--seconds``; msg/s of successful deliveries, all producers together;
* **consume**: N consumer processes of one group read it all back; msg/s until every record is
  read;
* the brokers' CPU per message (sum over the broker processes, /proc), each broker's resident
  memory at the end, and **idle**: the brokers' CPU per second with no client at all over
  ``--idle`` seconds (heartbeats to ZooKeeper, controller and ISR work: what N brokers cost
  before any request).

The clients run on the same machine and take cores too: the figures are for one host, as a user
of ``samsa cluster up`` gets them; ``cores`` says how many the machine has.

    .venv/bin/python bench/scaling_bench.py --brokers 1,2,4

Output: one JSON line per (brokers, rf) on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.tools.cluster import HOST, LocalCluster
from samsa.tools.zookeeper_server import free_port, port_in_use

from proc_cpu import cpu_seconds

TOPIC = "scaling"
VALUE = b"v" * 100
START_TIMEOUT = 120.0


def _ports(brokers: int) -> tuple[int, int]:
    for _ in range(100):
        base = free_port(HOST)
        if base + brokers > 65535 or any(port_in_use(base + i, HOST) for i in range(1, brokers)):
            continue
        zk = free_port(HOST)
        if not base <= zk < base + brokers:
            return base, zk
    raise RuntimeError("no free loopback ports found")


def _rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def produce(bootstrap: str, partitions: int, rf: int, seconds: float, results: Any) -> None:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5,
                              "acks": "all" if rf > 1 else "1",
                              "enable.idempotence": rf > 1, "log_level": 0}
    producer = Producer(config)
    failed = [0]

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed[0] += 1

    sent, i = 0, 0
    began = time.monotonic()
    end = began + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            try:
                producer.produce(TOPIC, VALUE, partition=i % partitions, on_delivery=report)
            except BufferError:
                producer.poll(0.01)
                continue
            i += 1
            sent += 1
        producer.poll(0)
    left = producer.flush(60)
    results.put((sent - failed[0] - left, began, time.monotonic()))


def consume(bootstrap: str, total: int, members: int, results: Any) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scaling",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         # librdkafka stops prefetching at 100,000 queued messages, then
                         # waits fetch.queue.backoff.ms (1 s): that, not the brokers, would
                         # set the rate (as in broker_bench.py)
                         "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 0,
                         "log_level": 0})
    consumer.subscribe([TOPIC])
    read = 0
    deadline = time.monotonic() + 300
    quiet_since = None
    first = last = time.monotonic()
    while time.monotonic() < deadline:
        batch = consumer.consume(10_000, 0.5)
        got = sum(1 for m in batch if not m.error())
        now = time.monotonic()
        if got:
            first = first if read else now
            last = now
            read += got
            quiet_since = None
        elif read and quiet_since is None:
            quiet_since = now
        elif quiet_since is not None and now - quiet_since > 3:
            break  # the others read the rest
    consumer.close()
    results.put((read, first, last))


def measure(brokers: int, rf: int, seconds: float, idle: float, work: Path) -> dict[str, Any]:
    base, zk = _ports(brokers)
    data = work / f"b{brokers}-rf{rf}"
    data.mkdir()
    cluster = LocalCluster(data, brokers, base, zk, {"num.partitions": "1"})
    try:
        cluster.start(START_TIMEOUT)
        pids = [b.proc.pid for b in cluster.members if b.proc is not None]
        t0, c0 = time.monotonic(), sum(cpu_seconds(p) for p in pids)
        time.sleep(idle)
        idle_cores = (sum(cpu_seconds(p) for p in pids) - c0) / (time.monotonic() - t0)
        partitions = 2 * brokers
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        topic = NewTopic(TOPIC, partitions, rf, config={"min.insync.replicas": str(min(2, rf))})
        admin.create_topics([topic])[TOPIC].result(60)
        deadline = time.monotonic() + 60
        while True:  # every partition led, full ISR
            meta = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
            if len(meta.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isrs) == rf for p in meta.partitions.values()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the topic never got its leaders")
            time.sleep(0.1)
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        producers = [ctx.Process(target=produce, args=(cluster.bootstrap_servers, partitions,
                                                       rf, seconds, results))
                     for _ in range(brokers)]
        c0, t0 = sum(cpu_seconds(p) for p in pids), time.monotonic()
        for p in producers:
            p.start()
        done = [results.get(timeout=seconds + 180) for _ in producers]
        delivered = sum(d[0] for d in done)
        produce_s = max(d[2] for d in done) - min(d[1] for d in done)
        produce_cpu = sum(cpu_seconds(p) for p in pids) - c0
        for p in producers:
            p.join(30)
        consumers = [ctx.Process(target=consume, args=(cluster.bootstrap_servers, delivered,
                                                       brokers, results))
                     for _ in range(brokers)]
        c0, t0 = sum(cpu_seconds(p) for p in pids), time.monotonic()
        for p in consumers:
            p.start()
        done = [results.get(timeout=400) for _ in consumers]
        read = sum(d[0] for d in done)
        consume_s = max(d[2] for d in done) - min(d[1] for d in done)
        consume_cpu = sum(cpu_seconds(p) for p in pids) - c0
        for p in consumers:
            p.join(30)
        rss = [_rss_mb(p) for p in pids]
    finally:
        cluster.stop()
    return {"brokers": brokers, "rf": rf, "produce_msg_s": delivered / produce_s,
            "produce_broker_us_msg": produce_cpu / max(delivered, 1) * 1e6,
            "consume_msg_s": read / max(consume_s, 0.001), "read": read, "delivered": delivered,
            "consume_broker_us_msg": consume_cpu / max(read, 1) * 1e6,
            "idle_broker_cores": idle_cores, "rss_mb_per_broker": max(rss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="1,2,4", help="broker counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="produce time per run")
    parser.add_argument("--idle", type=float, default=5.0, help="idle measurement, seconds")
    args = parser.parse_args()
    counts = [int(n) for n in args.brokers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="scaling-bench-") as work:
        for n in counts:
            for rf in (1, 3) if n >= 3 else (1,):
                row = measure(n, rf, args.seconds, args.idle, Path(work))
                row["cores"] = os.cpu_count()
                rows.append(row)
                print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                                  for k, v in row.items()}), flush=True)
    print(f"\n{'brokers':>7}{'rf':>4}{'produce msg/s':>15}{'us/msg':>8}{'consume msg/s':>15}"
          f"{'us/msg':>8}{'idle cores':>11}{'RSS MB':>8}", file=sys.stderr)
    for r in rows:
        print(f"{r['brokers']:>7}{r['rf']:>4}{r['produce_msg_s']:>15,.0f}"
              f"{r['produce_broker_us_msg']:>8.2f}{r['consume_msg_s']:>15,.0f}"
              f"{r['consume_broker_us_msg']:>8.2f}{r['idle_broker_cores']:>11.3f}"
              f"{r['rss_mb_per_broker']:>8.0f}", file=sys.stderr)


if __name__ == "__main__":
    main()
