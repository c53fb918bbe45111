"""Replicated topics on three brokers and a real ZooKeeper: the controller places replicas and
elects leaders, followers replicate, clients produce with acks=all and read back everything,
and when a leader's broker goes another in-sync replica leads with nothing acknowledged lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from waiting import wait_for

import samsa
from samsa.records.batch import Compression, iter_headers
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[samsa.Broker]]:
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        brokers = []
        try:
            for i in (1, 2, 3):
                broker = samsa.Broker(tmp_path / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    "zookeeper.session.timeout.ms": 6000,
                    "replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 200,
                    "replica.lag.time.max.ms": 3000})
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 3,
                         what="every broker to see the others")
            yield brokers
        finally:
            for b in brokers:
                b.stop()


def bootstrap(brokers: list[samsa.Broker]) -> str:
    return ",".join(b.bootstrap_servers for b in brokers)


def leaders(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    meta = admin.list_topics(topic, timeout=15).topics[topic]
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in meta.partitions.values()}


def produce(servers: str, topic: str, values: list[bytes]) -> list[tuple[int, int, bytes]]:
    acked: list[tuple[int, int, bytes]] = []
    producer = Producer({"bootstrap.servers": servers, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60000})

    def done(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    for value in values:
        producer.produce(topic, value, on_delivery=done)
        producer.poll(0)
    assert producer.flush(90) == 0, "messages left unacknowledged"
    return acked


def read_all(servers: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "check",
                         "enable.partition.eof": True, "isolation.level": "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    ended: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"no end of partitions {ended}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    ended.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            out[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return out


def test_replicated_topic_survives_its_leaders_broker(cluster: list[samsa.Broker]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic("orders", 3, 3, config={"min.insync.replicas": "2"})])[
        "orders"].result(30)
    state = wait_for(lambda: (s := leaders(admin, "orders")) and all(
        leader >= 0 and len(isr) == 3 for leader, _, isr in s.values()) and s,
        timeout=30, what="leaders and full ISRs")
    assert {leader for leader, _, _ in state.values()} == {1, 2, 3}  # placement spreads them
    acked = produce(bootstrap(cluster), "orders", [f"m{i}".encode() for i in range(300)])
    assert len(acked) == 300
    # every replica holds the same bytes
    for p in range(3):
        logs = [b.server.replicas.partition("orders", p).log for b in cluster]
        wait_for(lambda logs=logs: len({lg.log_end_offset for lg in logs}) == 1,
                 what=f"partition {p}'s replicas to catch up")
        assert len({lg.read_batches(0) for lg in logs}) == 1

    # the leader of partition 0 goes: an in-sync replica takes over
    old_leader = state[0][0]
    victim = next(b for b in cluster if b.server.broker_id == old_leader)
    victim.stop()
    survivors = [b for b in cluster if b is not victim]
    admin = AdminClient({"bootstrap.servers": bootstrap(survivors)})
    wait_for(lambda: (s := leaders(admin, "orders")) and all(
        leader not in (-1, old_leader) for leader, _, _ in s.values()),
        timeout=30, what="new leaders on the surviving brokers")
    acked += produce(bootstrap(survivors), "orders",
                     [f"n{i}".encode() for i in range(300)])
    got = read_all(bootstrap(survivors), "orders", 3)
    for p in range(3):
        expected = [v for part, _, v in sorted(acked) if part == p]
        assert got[p] == expected, f"partition {p} differs from what was acknowledged"


def test_compression_type_in_a_cluster(cluster: list[samsa.Broker]) -> None:
    """The leader recompresses to the topic's compression.type; the followers copy its batches
    as they are (never recompressed), so every replica holds the same bytes, before and after
    the topic's codec is altered through ZooKeeper."""
    servers = bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("packed", 1, 3, config={"compression.type": "zstd"})])[
        "packed"].result(30)
    wait_for(lambda: (s := leaders(admin, "packed")) and all(
        leader >= 0 and len(isr) == 3 for leader, _, isr in s.values()),
        timeout=30, what="a leader and a full ISR")
    logs = [b.server.replicas.partition("packed", 0).log for b in cluster]

    def codecs_once_replicated(end: int) -> list[Compression]:
        wait_for(lambda: {lg.log_end_offset for lg in logs} == {end},
                 what="the replicas to catch up")
        stored = {lg.read_batches(0) for lg in logs}
        assert len(stored) == 1  # the same bytes on every replica
        return [h.compression for _, h in iter_headers(stored.pop())]

    acked = produce(servers, "packed", [f"z{i}".encode() * 20 for i in range(100)])
    assert set(codecs_once_replicated(100)) == {Compression.ZSTD}

    change = ConfigResource(ResourceType.TOPIC, "packed", incremental_configs=[ConfigEntry(
        "compression.type", "gzip", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(30)
    wait_for(lambda: all(lg.config.compression_type == "gzip" for lg in logs),
             what="the new config on every replica")
    acked += produce(servers, "packed", [f"g{i}".encode() * 20 for i in range(100)])
    codecs = codecs_once_replicated(200)
    assert codecs[0] == Compression.ZSTD and codecs[-1] == Compression.GZIP
    assert codecs == sorted(codecs, key=lambda c: c != Compression.ZSTD)
    assert read_all(servers, "packed", 1)[0] == [v for _, _, v in sorted(acked)]


def test_consumer_group_in_a_cluster(cluster: list[samsa.Broker]) -> None:
    """FindCoordinator names the leader of the group's __consumer_offsets partition (created
    on first use, replicated); a group member reads everything and commits, and a new member
    of the group starts after the committed offsets."""
    servers = bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("events", 3, 3)])["events"].result(30)
    wait_for(lambda: (s := leaders(admin, "events")) and all(
        leader >= 0 for leader, _, _ in s.values()), timeout=30, what="leaders")
    acked = produce(servers, "events", [f"e{i}".encode() for i in range(90)])

    def consume(expected: int, timeout: float) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": servers, "group.id": "readers",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["events"])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and len(got) < expected:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(msg.value())
            if got:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        return got

    first = consume(90, 60)
    assert sorted(first) == sorted(v for _, _, v in acked)
    meta = admin.list_topics("__consumer_offsets", timeout=15).topics["__consumer_offsets"]
    assert all(len(p.replicas) == 3 for p in meta.partitions.values())
    produce(servers, "events", [b"late"])
    assert consume(1, 30) == [b"late"]  # the group resumes after its committed offsets


def test_transactions_across_brokers(cluster: list[samsa.Broker]) -> None:
    """A transaction over partitions led by different brokers: the coordinator (the leader of
    the id's __transaction_state partition) sends WriteTxnMarkers to the other leaders; a
    read_committed consumer sees exactly the committed records, a read_uncommitted one all."""
    servers = bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("txn", 3, 3)])["txn"].result(30)
    state = wait_for(lambda: (s := leaders(admin, "txn")) and all(
        leader >= 0 and len(isr) == 3 for leader, _, isr in s.values()) and s,
        timeout=30, what="leaders")
    assert len({leader for leader, _, _ in state.values()}) == 3
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "spread"})
    producer.init_transactions(60)
    for commit in (True, False, True):
        producer.begin_transaction()
        for p in range(3):
            producer.produce("txn", f"{'c' if commit else 'a'}{p}".encode(), partition=p)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.flush(60)  # written to the logs, then aborted
            producer.abort_transaction(60)

    def read(isolation: str) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": servers, "group.id": f"r-{isolation}",
                             "enable.partition.eof": True, "isolation.level": isolation})
        consumer.assign([TopicPartition("txn", p, 0) for p in range(3)])
        got, ended = [], set()
        deadline = time.monotonic() + 60
        try:
            while len(ended) < 3:
                assert time.monotonic() < deadline, "no end of partitions"
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    ended.add(msg.partition())
                    continue
                got.append(msg.value())
        finally:
            consumer.close()
        return sorted(got)

    assert read("read_committed") == sorted([b"c0", b"c1", b"c2"] * 2)
    assert read("read_uncommitted") == sorted([b"c0", b"c1", b"c2"] * 2 + [b"a0", b"a1", b"a2"])
