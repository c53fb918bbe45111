"""A leadership change must not leave acks=all waiting for a follower's long poll.

Three in-process brokers on a real ZooKeeper, with followers' fetches that wait up to
``replica.fetch.wait.max.ms`` = 15 s at their leader for data. Broker 3 follows ``moves-1``
from broker 2, so its fetcher for broker 2 sits in such a long poll when the controlled
shutdown of broker 1 hands ``moves-0`` to broker 2. An acks=all produce to the new leader
needs broker 3 to fetch ``moves-0`` from it: the answer must come in a few seconds, not when
the long poll that does not name the partition expires.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

import samsa
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(180)

TOPIC = "moves"
FETCH_WAIT_MS = 15000
CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.fetch.wait.max.ms": FETCH_WAIT_MS,
    "replica.socket.timeout.ms": 30000,
    "replica.fetch.backoff.ms": 200,
    "replica.lag.time.max.ms": 30000,
    "controlled.shutdown.retry.backoff.ms": 200,
    "auto.leader.rebalance.enable": False,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[samsa.Broker]]:
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        brokers: list[samsa.Broker] = []
        try:
            for i in (1, 2, 3):
                broker = samsa.Broker(tmp_path / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string, **CONFIG})
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 3,
                         what="every broker to see the others")
            yield brokers
        finally:
            for b in brokers:
                b.stop()


def produce_one(servers: str, partition: int) -> float:
    """Seconds until an acks=all record to ``partition`` is acknowledged."""
    producer = Producer({"bootstrap.servers": servers, "acks": "all",
                         "message.timeout.ms": 60000})
    failed: list[object] = []
    started = time.monotonic()
    producer.produce(TOPIC, b"x", partition=partition,
                     on_delivery=lambda err, _msg: err is not None and failed.append(err))
    assert producer.flush(60) == 0, "not acknowledged within 60 s"
    assert not failed, failed
    return time.monotonic() - started


def leads(broker: samsa.Broker, partition: int) -> bool:
    p = broker.server.replicas.partition(TOPIC, partition)
    return p is not None and p.is_leader


def follows(broker: samsa.Broker, partition: int, leader: int) -> bool:
    p = broker.server.replicas.partition(TOPIC, partition)
    return p is not None and not p.is_leader and p.leader_id == leader


def test_acks_all_answers_soon_after_a_leader_change(cluster: list[samsa.Broker]) -> None:
    one, two, three = cluster
    servers = ",".join(b.bootstrap_servers for b in cluster)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(TOPIC, 2, replica_assignment=[[1, 2, 3], [2, 3, 1]])])[
        TOPIC].result(30)
    wait_for(lambda: leads(one, 0) and leads(two, 1) and all(
        len(b.server.replicas.partition(TOPIC, p).isr) == 3  # type: ignore[union-attr]
        for b, p in ((one, 0), (two, 1))), timeout=30, what="leaders and full ISRs")
    produce_one(servers, 0)
    # the followers of moves-1 fetched this record and went back to waiting at broker 2
    produce_one(servers, 1)

    one.stop()  # controlled shutdown: moves-0 goes to broker 2, broker 1 leaves its ISR
    wait_for(lambda: leads(two, 0) and follows(three, 0, 2), timeout=30,
             what="broker 2 to lead moves-0 and broker 3 to follow it")
    took = produce_one(f"{two.bootstrap_servers},{three.bootstrap_servers}", 0)
    assert took < 5, (
        f"acks=all to the new leader took {took:.1f} s (replica.fetch.wait.max.ms is "
        f"{FETCH_WAIT_MS / 1000:g} s): broker 3 fetched moves-0 only when its long poll ended")
