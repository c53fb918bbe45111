"""Screenshots of the web console (docs/console-*.png, 1280x800).

Starts an embedded broker with some realistic data (topics, JSON messages with headers, a
consumer group with lag and a member, another one without members), the console over it, keeps
producing for the live charts, and photographs the overview, topics, topic, messages and group
pages with headless Chromium (Debian's /usr/bin/chromium, through Playwright).

    .venv/bin/python docs/screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import sync_playwright

from samsa import Broker
from samsa.console.app import create_app
from samsa.console.cluster_view import ClusterView
from samsa.console.history import History
from samsa.tools.zookeeper_server import free_port

TOPICS = {"orders": 6, "payments": 3, "clickstream": 12, "inventory-updates": 4,
          "audit-log": 2, "email-notifications": 1}
ITEMS = ["espresso machine", "desk lamp", "standing desk", "headphones", "keyboard", "monitor"]
CHARTS_S = 20.0  # how long the producer runs before the first picture (chart points)


def order(i: int, rng: random.Random) -> bytes:
    return json.dumps({"order_id": f"o-{10_000 + i}", "customer": f"c-{rng.randint(1, 500)}",
                       "item": rng.choice(ITEMS), "quantity": rng.randint(1, 4),
                       "amount": round(rng.uniform(5, 900), 2), "currency": "EUR"}).encode()


def seed(bootstrap: str, rng: random.Random) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    compacted = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"}
    futures = admin.create_topics([
        NewTopic(n, p, 1, config=compacted if n == "inventory-updates" else {})
        for n, p in TOPICS.items()])
    for future in futures.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(3000):
        producer.produce("orders", order(i, rng), f"c-{rng.randint(1, 500)}".encode(),
                         headers=[("source", b"checkout-web"), ("trace-id", b"%08x" % i)])
        if i % 3 == 0:
            producer.produce("payments", json.dumps({"order_id": f"o-{10_000 + i}",
                                                     "status": "captured"}).encode())
        producer.produce("clickstream", json.dumps({"page": f"/p/{rng.randint(1, 99)}",
                                                    "session": rng.randint(1, 9999)}).encode())
    for sku in range(200):
        producer.produce("inventory-updates", json.dumps({"sku": sku, "stock": sku % 17}).encode(),
                         f"sku-{sku}".encode())
    producer.produce("audit-log", b"user admin created topic orders")
    assert producer.flush(60) == 0


def consume_some(bootstrap: str, group: str, topic: str, count: int) -> Consumer:
    """A group member that read and committed ``count`` messages (and stays a member)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": f"{group}-1", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < count and time.monotonic() < deadline:
        got += len([m for m in consumer.consume(min(500, count - got), 1.0) if not m.error()])
    consumer.commit(asynchronous=False)
    return consumer


def keep_producing(bootstrap: str, stop: threading.Event, rng: random.Random) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 3000
    while not stop.is_set():
        for _ in range(rng.randint(20, 60)):
            producer.produce("orders", order(i, rng), headers=[("source", b"checkout-web")])
            producer.produce("clickstream", b'{"page": "/"}')
            i += 1
        producer.poll(0)
        stop.wait(0.5)
    producer.flush(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as data, \
            Broker(data, prometheus_listener="http://127.0.0.1:0") as broker:
        bootstrap = broker.bootstrap_servers
        seed(bootstrap, rng)
        member = consume_some(bootstrap, "order-processor", "orders", 2200)
        idle = consume_some(bootstrap, "billing-service", "payments", 400)
        idle.close()
        # an empty group with a committed offset on one partition
        admin_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "analytics"})
        admin_consumer.commit(offsets=[TopicPartition("clickstream", 0, 50)],
                              asynchronous=False)
        admin_consumer.close()

        view = ClusterView(bootstrap)
        history = History(view, broker.metrics_url, interval_s=2.0)
        app = create_app(view, history, None, cluster_name=bootstrap)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               access_log=False, log_level="warning"))
        serving = threading.Thread(target=server.run, daemon=True)
        serving.start()
        stop = threading.Event()
        producing = threading.Thread(target=keep_producing, args=(bootstrap, stop, rng))
        producing.start()
        try:
            deadline = time.monotonic() + 30
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.1)
            # the charts need a few samples; keep the member alive meanwhile
            until = time.monotonic() + CHARTS_S
            while time.monotonic() < until:
                member.poll(0.0)  # a member that does not read: its lag grows
                time.sleep(0.5)
            shoot(f"http://127.0.0.1:{port}", args.out)
        finally:
            stop.set()
            producing.join(30)
            member.close()
            server.should_exit = True
            serving.join(30)


def shoot(base: str, out: Path) -> None:
    pages = {
        "overview": "/",
        "topics": "/topics",
        "topic": "/topics/orders",
        "messages": "/topics/orders/messages?partition=&from=end&limit=20&format=auto",
        "group": "/groups/order-processor",
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(30_000)
        for name, path in pages.items():
            page.goto(base + path)
            charts = page.locator("canvas[data-series]")
            for i in range(charts.count()):  # wait until each chart has drawn its points
                page.wait_for_function(
                    "c => Number(c.dataset.points || 0) > 2", arg=charts.nth(i).element_handle())
            target = out / f"console-{name}.png"
            page.screenshot(path=str(target))
            print(f"wrote {target}")
        browser.close()


if __name__ == "__main__":
    main()
