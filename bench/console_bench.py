"""How fast the console's pages answer on a large cluster: 1,000 topics of 10 partitions.

A ``samsa server`` process holds the topics (a few messages in each, a consumer group with
offsets on some), a ``samsa ui`` process serves the console against it; each page is asked
for ``--rounds`` times over HTTP after one warm-up and its time to the last byte is reported
(median and worst). The issue's aim: list pages under 200 ms.

    .venv/bin/python bench/console_bench.py [--topics 1000] [--partitions 10] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.tools.zookeeper_server import free_port

BIN = Path(sys.executable).parent


def wait_until(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    raise SystemExit(f"console_bench: timed out waiting for {what}")


def fill(bootstrap: str, topics: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-topic-{i:04d}" for i in range(topics)]
    for start in range(0, topics, 100):
        batch = [NewTopic(n, partitions, 1) for n in names[start:start + 100]]
        futures = admin.create_topics(batch, request_timeout=120)
        for future in futures.values():
            future.result(120)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i, name in enumerate(names):
        for p in range(partitions):
            producer.produce(name, json.dumps({"n": i, "p": p}).encode(), partition=p)
        producer.poll(0)
    producer.flush(300)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-group",
                         "enable.auto.commit": False})
    committed = [TopicPartition(n, p, 0) for n in names[:50] for p in range(partitions)]
    consumer.commit(offsets=committed, asynchronous=False)
    consumer.close()


def fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        answer.read()
        assert answer.status == 200, (url, answer.status)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as work:
        kafka_port, ui_port = free_port(), free_port()
        bootstrap = f"127.0.0.1:{kafka_port}"
        broker = subprocess.Popen(
            [str(BIN / "samsa"), "server", "--override", f"log.dirs={work}/data",
             "--override", f"listeners=PLAINTEXT://{bootstrap}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ui = None
        try:
            wait_until(lambda: socket.create_connection(("127.0.0.1", kafka_port), 1), 60,
                       "the broker")
            started = time.monotonic()
            fill(bootstrap, args.topics, args.partitions)
            print(json.dumps({"filled_s": round(time.monotonic() - started, 1),
                              "topics": args.topics, "partitions": args.topics * args.partitions}),
                  flush=True)
            ui = subprocess.Popen(
                [str(BIN / "samsa"), "ui", "--bootstrap-server", bootstrap,
                 "--port", str(ui_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base = f"http://127.0.0.1:{ui_port}"
            wait_until(lambda: fetch(base + "/topics") >= 0, 120, "the console")
            pages = ["/", "/topics", "/topics?q=bench-topic-09", "/topics/bench-topic-0500",
                     "/topics/bench-topic-0500/messages?partition=0&from=beginning&limit=50",
                     "/groups", "/groups/bench-group"]
            for page in pages:
                fetch(base + page)  # warm-up
                times = [fetch(base + page) for _ in range(args.rounds)]
                print(json.dumps({"page": page,
                                  "median_ms": round(statistics.median(times) * 1e3, 1),
                                  "max_ms": round(max(times) * 1e3, 1)}), flush=True)
        finally:
            for process in (ui, broker):
                if process is not None:
                    process.terminate()
                    try:
                        process.wait(30)
                    except subprocess.TimeoutExpired:
                        process.kill()


if __name__ == "__main__":
    main()
