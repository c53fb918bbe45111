"""``ClusterView`` against a real embedded broker, with data produced and consumed by
confluent-kafka clients."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from waiting import wait_for

from samsa.console.cluster_view import ClusterView
from samsa.console.model import ConsoleError, NotFound
from samsa.embedded import Broker

pytestmark = pytest.mark.timeout(180)

WAIT_S = 30.0


@pytest.fixture
def view(samsa_broker: Broker) -> Iterator[ClusterView]:
    cluster = ClusterView(samsa_broker.bootstrap_servers, timeout_s=10.0)
    yield cluster
    cluster.close()


def produce(broker: Broker, topic: str, count: int, partitions: int = 1,
            start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f'{{"n": {i}}}'.encode(),
                         partition=i % partitions, headers=[("seq", str(i).encode())])
    assert producer.flush(WAIT_S) == 0


def commit(broker: Broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Committed offsets of a group without members (a standalone commit)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def test_overview_topics_and_topic_detail(view: ClusterView, samsa_broker: Broker) -> None:
    view.create_topic("orders", partitions=3)
    view.create_topic("empty")
    produce(samsa_broker, "orders", 30, partitions=3)

    overview = view.overview()
    assert overview.cluster_id
    assert [b.port for b in overview.brokers] == [samsa_broker.port]
    assert overview.brokers[0].controller and overview.controller_id == overview.brokers[0].id
    assert overview.partitions >= 4 and overview.offline == 0 and overview.under_replicated == 0

    by_name = {t.name: t for t in view.topics()}
    orders = by_name["orders"]
    assert (orders.partitions, orders.replication, orders.messages) == (3, 1, 30)
    assert orders.size_bytes is not None and orders.size_bytes > 30 * 8
    assert by_name["empty"].messages == 0 and by_name["empty"].size_bytes == 0

    detail = view.topic("orders")
    assert detail.topic_id and not detail.internal
    assert [(p.partition, p.log_start, p.high_watermark) for p in detail.partitions] == [
        (0, 0, 10), (1, 0, 10), (2, 0, 10)]
    assert all(p.leader == overview.brokers[0].id and p.isr == p.replicas == [p.leader]
               and p.size_bytes and p.size_bytes > 0 for p in detail.partitions)
    assert sum(p.size_bytes or 0 for p in detail.partitions) == orders.size_bytes
    configs = {c.name: c for c in detail.configs}
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default
    assert configs["cleanup.policy"].source == "DEFAULT_CONFIG"

    with pytest.raises(NotFound):
        view.topic("nope")


def test_alter_configs_valid_and_invalid(view: ClusterView) -> None:
    view.create_topic("t", configs={"retention.ms": "60000"})
    assert {c.name: c.source for c in view.topic("t").configs}["retention.ms"] == \
        "DYNAMIC_TOPIC_CONFIG"
    view.alter_topic_configs("t", {"retention.bytes": "1048576"}, ["retention.ms"])
    configs = {c.name: c for c in view.topic("t").configs}
    assert configs["retention.bytes"].value == "1048576"
    assert configs["retention.bytes"].source == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"].source == "DEFAULT_CONFIG"

    with pytest.raises(ConsoleError, match=r"^INVALID_CONFIG: .*retention\.ms"):
        view.alter_topic_configs("t", {"retention.ms": "soon"}, [])
    assert {c.name: c.value for c in view.topic("t").configs}["retention.ms"] != "soon"


def test_create_add_partitions_delete_records_delete(view: ClusterView,
                                                     samsa_broker: Broker) -> None:
    view.create_topic("t", partitions=2)
    with pytest.raises(ConsoleError, match="^TOPIC_ALREADY_EXISTS"):
        view.create_topic("t")
    view.add_partitions("t", 4)
    assert len(view.topic("t").partitions) == 4
    with pytest.raises(ConsoleError, match="^INVALID_PARTITIONS"):
        view.add_partitions("t", 2)

    produce(samsa_broker, "t", 40, partitions=4)
    assert view.delete_records("t", {0: 4}) == {0: 4}
    starts = {p.partition: p.log_start for p in view.topic("t").partitions}
    assert starts == {0: 4, 1: 0, 2: 0, 3: 0}
    with pytest.raises(ConsoleError, match="^OFFSET_OUT_OF_RANGE"):
        view.delete_records("t", {1: 99})
    assert view.delete_records("t") == {0: 10, 1: 10, 2: 10, 3: 10}
    assert {t.name: t.messages for t in view.topics()}["t"] == 0

    view.delete_topic("t")
    wait_for(lambda: "t" not in {t.name for t in view.topics()}, WAIT_S, "t deleted")
    with pytest.raises(NotFound):
        view.delete_topic("t")


def test_read_messages_from_a_partition(view: ClusterView, samsa_broker: Broker) -> None:
    view.create_topic("t", partitions=2)
    before = int(time.time() * 1000)
    produce(samsa_broker, "t", 20, partitions=2)  # 10 per partition: even seqs in 0
    after = int(time.time() * 1000) + 1

    def offsets(start: str, value: int | None = None, limit: int = 50) -> list[int]:
        found = view.read_messages("t", 0, start, value, limit)
        assert all(m.partition == 0 and m.topic == "t" for m in found)
        return [m.offset for m in found]

    assert offsets("beginning", limit=3) == [0, 1, 2]
    assert offsets("beginning") == list(range(10))
    assert offsets("end", limit=3) == [7, 8, 9]
    assert offsets("offset", 6, limit=3) == [6, 7, 8]
    assert offsets("offset", 8) == [8, 9]
    assert offsets("offset", 10) == []  # the end: nothing yet
    assert offsets("timestamp", before, limit=2) == [0, 1]
    assert offsets("timestamp", after) == []
    first = view.read_messages("t", 0, "beginning", limit=1)[0]
    assert (first.key, first.value, first.headers) == (b"k0", b'{"n": 0}', [("seq", b"0")])
    assert first.timestamp_type == "CreateTime" and before <= first.timestamp_ms < after

    with pytest.raises(NotFound):
        view.read_messages("t", 7, "beginning")
    with pytest.raises(NotFound):
        view.read_messages("gone", None, "beginning")


def test_read_messages_from_a_whole_topic(view: ClusterView, samsa_broker: Broker) -> None:
    view.create_topic("t", partitions=3)
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    base = int(time.time() * 1000) - 100_000
    for i in range(30):  # distinct timestamps: the merged order is known
        producer.produce("t", value=str(i).encode(), partition=i % 3, timestamp=base + i * 10)
    assert producer.flush(WAIT_S) == 0

    def values(start: str, value: int | None = None, limit: int = 50) -> list[int]:
        return [int(m.value or b"") for m in view.read_messages("t", None, start, value, limit)]

    assert values("beginning", limit=7) == list(range(7))
    assert values("beginning") == list(range(30))
    assert values("end", limit=5) == list(range(25, 30))
    assert values("offset", 8, limit=4) == [24, 25, 26, 27]  # offset 8 of each partition
    assert values("timestamp", base + 150, limit=3) == [15, 16, 17]


def test_tail_and_produce(view: ClusterView, samsa_broker: Broker) -> None:
    view.create_topic("t", partitions=2)
    produce(samsa_broker, "t", 4, partitions=2)
    positions = view.end_offsets("t")
    assert positions == {0: 2, 1: 2}
    assert view.tail("t", None, positions, wait_s=0.3) == []

    partition, offset = view.produce("t", 1, b"key", b"value", [("a", b"1"), ("b", b"")])
    assert (partition, offset) == (1, 2)
    (tailed,) = view.tail("t", None, positions, wait_s=5.0)
    assert (tailed.partition, tailed.offset, tailed.key, tailed.value) == (1, 2, b"key",
                                                                          b"value")
    assert tailed.headers == [("a", b"1"), ("b", b"")]
    assert view.tail("t", 1, {1: 3}, wait_s=0.2) == []
    # a message arriving while the tail waits
    timer = threading.Timer(0.5, lambda: view.produce("t", 0, None, b"late", []))
    timer.start()
    late = view.tail("t", 0, {0: 2}, wait_s=10.0)
    timer.join()
    assert [(m.offset, m.key, m.value) for m in late] == [(2, None, b"late")]
    with pytest.raises(NotFound):
        view.produce("missing", None, None, b"x", [])


def test_groups_lag_reset_and_delete(view: ClusterView, samsa_broker: Broker) -> None:
    view.create_topic("t", partitions=2)
    produce(samsa_broker, "t", 20, partitions=2)
    commit(samsa_broker, "idle", {("t", 0): 3, ("t", 1): 10})

    summary = {g.group_id: g for g in view.groups()}["idle"]
    assert (summary.state, summary.members, summary.lag) == ("Empty", 0, 7)
    assert summary.type == "Classic"
    detail = view.group("idle")
    assert [(o.partition, o.committed, o.log_end, o.lag) for o in detail.offsets] == [
        (0, 3, 10, 7), (1, 10, 10, 0)]
    assert view.lags()["idle"] == 7

    planned = view.reset_offsets("idle", "t", "to-earliest", None, execute=False)
    assert [(r.partition, r.current, r.new) for r in planned] == [(0, 3, 0), (1, 10, 0)]
    assert view.group("idle").offsets[0].committed == 3  # a dry run changes nothing
    shifted = view.reset_offsets("idle", None, "shift-by", "-2", execute=True)
    assert [(r.partition, r.current, r.new) for r in shifted] == [(0, 3, 1), (1, 10, 8)]
    assert [o.committed for o in view.group("idle").offsets] == [1, 8]
    assert [r.new for r in view.reset_offsets("idle", "t", "to-offset", "5", False)] == [5, 5]
    assert [r.new for r in view.reset_offsets("idle", "t", "to-latest", None, False)] == [10, 10]
    assert [r.new for r in view.reset_offsets("idle", "t", "to-current", None, False)] == [1, 8]
    assert [r.new for r in view.reset_offsets("idle", "t", "by-duration", "PT1H", False)] == \
        [0, 0]
    assert [r.new for r in view.reset_offsets(
        "idle", "t", "to-datetime", "2999-01-01T00:00:00.000", False)] == [10, 10]
    with pytest.raises(ConsoleError, match="--shift-by takes an integer"):
        view.reset_offsets("idle", "t", "shift-by", "two", False)
    with pytest.raises(ConsoleError, match="--by-duration takes"):
        view.reset_offsets("idle", "t", "by-duration", "an hour", False)
    with pytest.raises(ConsoleError, match="reset mode takes one of"):
        view.reset_offsets("idle", "t", "to-nowhere", None, False)

    # an active group: members, assignments, and Kafka refuses the reset
    stop = threading.Event()
    consumer = Consumer({"bootstrap.servers": samsa_broker.bootstrap_servers,
                         "group.id": "active", "auto.offset.reset": "earliest",
                         "client.id": "console-test"})
    consumer.subscribe(["t"])

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.1)

    def stable() -> bool:
        try:
            group = view.group("active")
        except NotFound:  # not joined yet
            return False
        return group.state == "Stable" and bool(group.members)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        wait_for(stable, WAIT_S, "the group is stable")
        active = view.group("active")
        (member,) = active.members
        assert member.client_id == "console-test"
        assert sorted(member.assignment) == [("t", 0), ("t", 1)]
        assert active.protocol and active.coordinator is not None
        with pytest.raises(ConsoleError, match="can only be reset if the group 'active' is "
                                               "inactive, but the current state is Stable"):
            view.reset_offsets("active", "t", "to-earliest", None, execute=True)
        with pytest.raises(ConsoleError, match="^NON_EMPTY_GROUP"):
            view.delete_group("active")
    finally:
        stop.set()
        poller.join(WAIT_S)
        consumer.close()

    view.delete_group("idle")
    with pytest.raises(NotFound):
        view.group("idle")
    with pytest.raises(NotFound):
        view.delete_group("idle")


def test_transactions(view: ClusterView, samsa_broker: Broker) -> None:
    view.create_topic("t", partitions=2)
    assert view.transactions() == []
    producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers,
                         "transactional.id": "tx-1", "transaction.timeout.ms": 60000})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce("t", value=b"in a transaction", partition=1)
    producer.flush(WAIT_S)
    try:
        (ongoing,) = wait_for(lambda: [t for t in view.transactions() if t.state == "Ongoing"],
                              WAIT_S, "an ongoing transaction")
        assert ongoing.transactional_id == "tx-1" and ongoing.timeout_ms == 60000
        assert ongoing.producer_id >= 0 and ongoing.topics == [("t", 1)]
        # read_committed: what is in the open transaction is not shown yet
        assert view.read_messages("t", 1, "beginning") == []
    finally:
        producer.commit_transaction(WAIT_S)
    (done,) = wait_for(lambda: [t for t in view.transactions() if t.state == "CompleteCommit"],
                       WAIT_S, "the committed transaction")
    assert done.topics == []
    assert [m.value for m in view.read_messages("t", 1, "beginning")] == [b"in a transaction"]


def test_acls_without_an_authorizer(view: ClusterView) -> None:
    with pytest.raises(ConsoleError, match="no authorizer is enabled.*SECURITY_DISABLED"):
        view.acls()


@pytest.mark.samsa_broker(config={"authorizer.class.name": "samsa.security.AclAuthorizer",
                                  "super.users": "User:ANONYMOUS"})
def test_acls_with_an_authorizer(view: ClusterView, samsa_broker: Broker) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    assert view.acls() == []
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers})
    futures = admin.create_acls([
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                   "*", AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "User:bob",
                   "10.0.0.1", AclOperation.ALL, AclPermissionType.DENY)])
    for future in futures.values():
        future.result(WAIT_S)
    assert [(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
             a.operation, a.permission) for a in view.acls()] == [
        ("GROUP", "app-", "PREFIXED", "User:bob", "10.0.0.1", "ALL", "DENY"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")]


def test_a_broker_that_is_down(tmp_path: Path) -> None:
    with socket.socket() as sock:  # bound, never listening: refused, and nobody else's
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        view = ClusterView(f"127.0.0.1:{port}", timeout_s=3.0)
        try:
            for call in (view.overview, view.topics, view.groups, view.transactions,
                         lambda: view.topic("t"), lambda: view.read_messages("t", 0, "end")):
                started = time.monotonic()
                with pytest.raises(ConsoleError, match="cannot connect to any bootstrap"):
                    call()
                assert time.monotonic() - started < 10.0
        finally:
            view.close()


def test_a_broker_that_stops(tmp_path: Path) -> None:
    broker = Broker(tmp_path / "data")
    broker.start()
    view = ClusterView(broker.bootstrap_servers, timeout_s=3.0)
    try:
        view.create_topic("t")
        assert [t.name for t in view.topics()] == ["t"]
        broker.stop()
        started = time.monotonic()
        with pytest.raises(ConsoleError):
            view.topics()
        assert time.monotonic() - started < 10.0
    finally:
        view.close()
        broker.stop()
