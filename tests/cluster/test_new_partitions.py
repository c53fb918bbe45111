"""A partition's leader is known before anyone writes to it (issue 14).

Right after a topic is created, each broker learns of its partitions first and of their
leaders a little later (the controller writes one partition state after another). In that
window no broker may act as a leader it has not been told it is: produce, consumer fetches,
ListOffsets, OffsetForLeaderEpoch and DeleteRecords get NOT_LEADER_OR_FOLLOWER, and Metadata
names no leader it has not learned. These tests hammer every broker with writes from the
moment a topic with many partitions is created, then check that every acknowledged record is
in the leader's log at its offset, that each was acknowledged by the partition's real leader,
and that no follower ever had to truncate a new partition.

The transactional test writes to partitions that have no replica on the transaction's
coordinator (replication factor 1 over three brokers): AddPartitionsToTxn checks the cluster's
metadata, not the coordinator's own replicas.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.records.batch import iter_headers
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(240)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS = (
    0, 1, 2, 3, 23, 21)
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
REQUEST_TIMED_OUT = 7


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[samsa.Broker]]:
    tmp = tmp_path_factory.mktemp("new-partitions")
    with ZooKeeperServer(tmp / "zk") as zookeeper:
        brokers: list[samsa.Broker] = []
        try:
            for i in (1, 2, 3):
                broker = samsa.Broker(tmp / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    "zookeeper.session.timeout.ms": 6000,
                    "replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 200,
                    "replica.lag.time.max.ms": 10000, "group.initial.rebalance.delay.ms": 0,
                    "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
                    "transaction.state.log.min.isr": 1})
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 3, timeout=60,
                         what="every broker to see the others")
            yield brokers
        finally:
            for b in brokers:
                b.stop()


def bootstrap(brokers: list[samsa.Broker]) -> str:
    return ",".join(b.bootstrap_servers for b in brokers)


def settled_leaders(brokers: list[samsa.Broker], topic: str, partitions: int
                    ) -> dict[int, int]:
    """partition -> leader, once every broker applied every partition's state and the ISRs
    are full."""
    def leaders() -> dict[int, int] | None:
        found: dict[int, int] = {}
        for b in brokers:
            manager = b.server.replica_manager
            for p in range(partitions):
                info = manager.partitions.get((topic, p))
                if info is None or info.state is None or len(info.state.isr) != len(
                        info.replicas):
                    return None
                found[p] = info.state.leader
                local = b.server.replicas.partition(topic, p)
                if local is not None and b.server.broker_id in info.replicas and (
                        local.leader_id != info.state.leader):
                    return None
        return found
    return wait_for(leaders, timeout=60, what=f"every state of {topic} applied everywhere")


def produce_body(topic: str, partitions: int, tag: str, acks: int) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": 5000, "topic_data": [{
        "name": topic, "partition_data": [
            {"index": p, "records": encode_batch([RecordInput(f"{tag}-p{p}".encode())])}
            for p in range(partitions)]}]}


class Hammer(threading.Thread):
    """Writes a record to every partition of ``topic`` through one broker, again and again,
    from before the topic exists until ``stop`` is set; remembers what was acknowledged."""

    def __init__(self, broker: samsa.Broker, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.broker, self.topic, self.partitions = broker, topic, partitions
        self.stop = threading.Event()
        self.acked: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.answers: dict[int, int] = {}  # error code -> count
        self.error: BaseException | None = None
        self.rounds = 0

    def run(self) -> None:
        try:
            with FrameClient(self.broker.bootstrap_servers, timeout=30) as client:
                deadline = time.monotonic() + 120
                n = 0
                while not self.stop.is_set() and time.monotonic() < deadline:
                    tag = f"b{self.broker.server.broker_id}-{n}"
                    n += 1
                    self.rounds = n
                    response = client.request(PRODUCE, 9, produce_body(
                        self.topic, self.partitions, tag, acks=-1))
                    for result in response.responses[0].partition_responses:
                        code = result.error_code
                        self.answers[code] = self.answers.get(code, 0) + 1
                        if code == 0:
                            self.acked.append((result.index, result.base_offset,
                                               f"{tag}-p{result.index}".encode()))
        except BaseException as exc:  # reported by the test
            self.error = exc


def read_partition(broker: samsa.Broker, topic: str, partition: int) -> list[bytes]:
    out: list[bytes] = []
    with FrameClient(broker.bootstrap_servers) as client:
        offset = 0
        while True:
            response = client.request(FETCH, 11, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 22,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1,
                    "fetch_offset": offset, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 22}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            data = response.responses[0].partitions[0]
            assert data.error_code == 0, data
            records = data.records or b""
            got = False
            for pos, header in iter_headers(records):
                if pos + header.size > len(records):
                    break
                batch = records[pos:pos + header.size]
                for record in decode_records(batch):
                    if record.offset >= offset:
                        assert record.offset == len(out), (partition, record.offset, len(out))
                        out.append(record.value or b"")
                        got = True
                offset = header.base_offset + header.last_offset_delta + 1
            if not got and offset >= data.high_watermark:
                return out


def test_writes_to_new_partitions_only_reach_their_leader(
        cluster: list[samsa.Broker], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.cluster")
    partitions = 40
    for round_ in range(3):
        topic = f"burst{round_}"
        hammers = [Hammer(b, topic, partitions) for b in cluster]
        admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
        for h in hammers:
            h.start()
        admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
        leaders = settled_leaders(cluster, topic, partitions)
        done = [h.rounds for h in hammers]  # a few more writes once everything is settled
        wait_for(lambda hs=hammers, done=done: all(
                     h.rounds >= n + 3 or not h.is_alive() for h, n in zip(hs, done, strict=True)),
                 timeout=60, what="writes after the states settled")
        for h in hammers:
            h.stop.set()
        for h in hammers:
            h.join(60)
            assert h.error is None, h.error
            assert not h.is_alive()
        for h in hammers:
            broker_id = h.broker.server.broker_id
            # (REQUEST_TIMED_OUT: appended by the leader, not acknowledged in time)
            assert set(h.answers) <= {0, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
                                      REQUEST_TIMED_OUT}, h.answers
            wrong = [(p, o) for p, o, _ in h.acked if leaders[p] != broker_id]
            assert not wrong, f"broker {broker_id} acknowledged writes it does not lead: {wrong}"
        by_id = {b.server.broker_id: b for b in cluster}
        for p in range(partitions):
            log = read_partition(by_id[leaders[p]], topic, p)
            acked = sorted((o, v) for h in hammers for q, o, v in h.acked if q == p)
            for offset, value in acked:
                assert offset < len(log) and log[offset] == value, (
                    f"{topic}-{p}: acknowledged {value!r} at {offset}, the log has "
                    f"{log[offset] if offset < len(log) else 'nothing'!r} there")
            assert len({o for o, _ in acked}) == len(acked)
        assert sum(len(h.acked) for h in hammers) > 0
    truncations = [r.getMessage() for r in caplog.records if "truncat" in r.getMessage()
                   or "diverged" in r.getMessage()]
    assert not truncations, truncations


def _request_partition(client: FrameClient, api: int, topic: str) -> int:
    """The error code one request about partition 0 of ``topic`` gets."""
    if api == FETCH:
        r = client.request(FETCH, 11, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        return r.responses[0].partitions[0].error_code
    if api == LIST_OFFSETS:
        r = client.request(LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]})
        return r.topics[0].partitions[0].error_code
    if api == OFFSET_FOR_LEADER_EPOCH:
        r = client.request(OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                             "leader_epoch": 0}]}]})
        return r.topics[0].partitions[0].error_code
    if api == DELETE_RECORDS:
        r = client.request(DELETE_RECORDS, 1, {"timeout": 5000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}]})
        return r.topics[0].partitions[0].error_code
    r = client.request(PRODUCE, 9, produce_body(topic, 1, "x", acks=1))
    return r.responses[0].partition_responses[0].error_code


@pytest.mark.parametrize("api", [PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH,
                                 DELETE_RECORDS])
def test_followers_refuse_leader_requests(cluster: list[samsa.Broker], api: int) -> None:
    topic = f"followers-{api}"
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    leader = settled_leaders(cluster, topic, 1)[0]
    for b in cluster:
        with FrameClient(b.bootstrap_servers) as client:
            code = _request_partition(client, api, topic)
        expected = 0 if b.server.broker_id == leader else NOT_LEADER_OR_FOLLOWER
        assert code == expected, (b.server.broker_id, leader, code)


def test_a_replica_without_a_known_leader_refuses_leader_requests(
        cluster: list[samsa.Broker]) -> None:
    """The state of a partition arrives after the partition: until then it is no leader."""
    topic = "stateless"
    broker = cluster[0]
    manager = broker.server.replica_manager
    paused = threading.Event()
    original = manager._apply_state

    def hold(topic_: str, *args: Any, **kwargs: Any) -> None:
        if topic_ == topic:
            paused.set()
            return  # the state never arrives here
        original(topic_, *args, **kwargs)

    manager._apply_state = hold  # type: ignore[method-assign]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])])[
            topic].result(30)
        wait_for(lambda: broker.server.replicas.partition(topic, 0) is not None and paused.is_set(),
                 timeout=30, what="broker 1 to open the partition")
        with FrameClient(broker.bootstrap_servers) as client:
            for api in (PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS):
                assert _request_partition(client, api, topic) == NOT_LEADER_OR_FOLLOWER, api
            meta = client.request(METADATA, 8, {
                "topics": [{"name": topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False})
        entry = meta.topics[0].partitions[0]
        assert entry.leader_id == -1 and entry.error_code == LEADER_NOT_AVAILABLE, entry
    finally:
        manager._apply_state = original  # type: ignore[method-assign]


def test_transactions_over_partitions_on_every_broker(cluster: list[samsa.Broker]) -> None:
    """Replication factor 1: the coordinator hosts at most a third of the partitions."""
    topic = "txn-spread"
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    leaders = settled_leaders(cluster, topic, 6)
    assert set(leaders.values()) == {1, 2, 3}
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "transactional.id": "spread",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    for round_ in range(3):
        producer.begin_transaction()
        for p in range(6):
            producer.produce(topic, f"r{round_}-p{p}".encode(), partition=p)
        producer.commit_transaction(60)
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "spread-check",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(6)])
    got: dict[int, list[bytes]] = {p: [] for p in range(6)}
    ended: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(ended) < 6:
            assert time.monotonic() < deadline, ended
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:
                    ended.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    assert got == {p: [f"r{r}-p{p}".encode() for r in range(3)] for p in range(6)}
