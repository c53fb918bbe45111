"""Kafka's Java client (the release pinned in pom.xml) against samsa: an idempotent producer, a
transactional one, classic consumer-group members reading read_committed and
read_uncommitted, a member of KIP-848's consumer group protocol, consume-transform-produce with
offsets in the transaction, the Admin client (topics, configs, partitions, offsets, records,
groups, ACLs), and Kafka's VerifiableProducer and VerifiableConsumer, the programs Kafka's own
system tests drive.

The Java side prints what it saw (``Clients.java``); what it says is checked against what is
expected and against the broker as another client (confluent-kafka) reads it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.embedded import Broker

from .conftest import Kafka

pytestmark = pytest.mark.timeout(300)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("java-client"), num_partitions=3) as b:
        yield b


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The ACL authorizer on; the PLAINTEXT clients are User:ANONYMOUS, a super user."""
    with Broker(tmp_path_factory.mktemp("java-client-acls"), config={
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS"}) as b:
        yield b


def lines(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line]


def create_topic(broker: Broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def read_all(broker: Broker, topic: str, partitions: int,
             isolation: str = "read_uncommitted") -> dict[int, list[tuple[int, str]]]:
    """Every record of each partition, as (offset, value), read by confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("r"),
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        while len(at_end) < partitions:
            msg = consumer.poll(10)
            assert msg is not None, f"nothing read from {topic} in 10 s"
            error, partition, offset, value = (msg.error(), msg.partition(), msg.offset(),
                                               msg.value())
            assert partition is not None
            if error is not None:
                assert error.code() == -191, error  # _PARTITION_EOF
                at_end.add(partition)
                continue
            assert offset is not None and value is not None
            found[partition].append((offset, value.decode()))
        return found
    finally:
        consumer.close()


def test_idempotent_producer(kafka: Kafka, broker: Broker) -> None:
    """acks=all, enable.idempotence, 5 requests in flight, small batches: each partition holds
    what was acknowledged at the offsets acknowledged, once each, in the order sent."""
    topic = unique("idempotent")
    create_topic(broker, topic, 3)
    out = kafka.clients("produce", "--bootstrap-server", broker.bootstrap_servers,
                        "--topic", topic, "--count", 600).ok()
    acked = lines(out)
    assert len(acked) == 600 and all(line[0] == "acked" for line in acked)
    sent: dict[int, list[tuple[int, str]]] = {0: [], 1: [], 2: []}
    for _, partition, offset, _key, value in acked:
        sent[int(partition)].append((int(offset), value))
    for records in sent.values():
        assert [o for o, _ in records] == list(range(len(records))), records
    assert all(sent.values()), "the keys spread over every partition"
    assert read_all(broker, topic, 3) == sent


def test_transactions_and_read_committed(kafka: Kafka, broker: Broker) -> None:
    """Three transactions on one partition, the middle aborted: a read_committed member sees
    the committed ones only, a read_uncommitted member all, both skip the markers, and the
    group's committed offset is past the last marker."""
    topic = unique("txn")
    create_topic(broker, topic, 1)
    bs = broker.bootstrap_servers
    out = kafka.clients("transactions", "--bootstrap-server", bs, "--topic", topic,
                        "--transactional-id", unique("tx")).ok()
    written = lines(out)
    committed = [v for kind, v in written if kind == "committed"]
    aborted = [v for kind, v in written if kind == "aborted"]
    assert committed == [f"a{i}" for i in range(5)] + [f"c{i}" for i in range(5)]
    assert aborted == [f"b{i}" for i in range(5)]
    # a0-a4 at 0-4, its commit marker at 5, b0-b4 at 6-10, abort marker 11, c0-c4 at 12-16
    # and the last marker at 17
    offsets = {**{f"a{i}": i for i in range(5)}, **{f"b{i}": 6 + i for i in range(5)},
               **{f"c{i}": 12 + i for i in range(5)}}

    out = kafka.clients("consume", "--bootstrap-server", bs, "--topic", topic,
                        "--group", unique("rc"), "--isolation", "read_committed").ok()
    assert lines(out) == (
        [["record", "0", str(offsets[v]), v] for v in committed] + [["committed", "0", "18"]])
    out = kafka.clients("consume", "--bootstrap-server", bs, "--topic", topic,
                        "--group", unique("ru"), "--isolation", "read_uncommitted").ok()
    every = [f"{x}{i}" for x in "abc" for i in range(5)]
    assert lines(out) == (
        [["record", "0", str(offsets[v]), v] for v in every] + [["committed", "0", "18"]])

    assert read_all(broker, topic, 1, "read_committed") == {
        0: [(offsets[v], v) for v in committed]}


def test_consumer_group_protocol(kafka: Kafka, broker: Broker) -> None:
    """A member of KIP-848's protocol (group.protocol=consumer): the broker assigns it every
    partition, it reads them all and commits with its member epoch, and the Admin client
    describes the group as a consumer group (ConsumerGroupDescribe)."""
    topic, group = unique("kip848"), unique("consumer-group")
    create_topic(broker, topic, 3)
    bs = broker.bootstrap_servers
    produced = lines(kafka.clients("produce", "--bootstrap-server", bs, "--topic", topic,
                                   "--count", 30).ok())
    ends = {p: 1 + max(int(o) for _, q, o, *_ in produced if int(q) == p) for p in range(3)}
    out = lines(kafka.clients("consume", "--bootstrap-server", bs, "--topic", topic,
                              "--group", group, "--protocol", "consumer").ok())
    records = [row for row in out if row[0] == "record"]
    assert sorted(row[3] for row in records) == sorted(f"v{i}" for i in range(30))
    assert [row for row in out if row[0] == "committed"] == [
        ["committed", str(p), str(ends[p])] for p in range(3)]
    (group_row,) = [row for row in out if row[0] == "group"]
    assert group_row == ["group", "Consumer", "Stable", "uniform", "1", "1"]
    (member,) = [row for row in out if row[0] == "member"]
    assert member == ["member", "1", "0,1,2", "0,1,2"]
    coordinator = broker.server.group_coordinator
    assert coordinator is not None
    assert group in coordinator.consumer_groups  # the member left when it closed
    assert not coordinator.consumer_groups[group].members


def test_consume_transform_produce(kafka: Kafka, broker: Broker) -> None:
    """A read_committed member copies records into another topic in transactions that also
    hold its offsets (sendOffsetsToTransaction with the member's group metadata)."""
    source, sink, group = unique("in"), unique("out"), unique("copier")
    create_topic(broker, source, 3)
    create_topic(broker, sink, 1)
    kafka.clients("produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", source,
                  "--count", 60).ok()
    out = kafka.clients("copy", "--bootstrap-server", broker.bootstrap_servers,
                        "--input", source, "--output", sink, "--group", group,
                        "--transactional-id", unique("copy"), "--count", 60).ok()
    assert lines(out) == [["copied", "60"]]
    copied = read_all(broker, sink, 1, "read_committed")[0]
    assert sorted(v for _, v in copied) == sorted(f"V{i}" for i in range(60))
    ends = {p: len(records) for p, records in read_all(broker, source, 3).items()}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(source, p) for p in range(3)], timeout=30)
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in offsets} == ends


def test_admin_client(kafka: Kafka, broker: Broker) -> None:
    prefix = unique("admin")
    topic, group = f"{prefix}-a", f"{prefix}-g"
    out = kafka.clients("admin", "--bootstrap-server", broker.bootstrap_servers,
                        "--prefix", prefix).ok()
    node = str(broker.server.broker_id)

    def partitions(count: int) -> list[list[str]]:
        return [["partition", topic, str(p), node, node, node] for p in range(count)]

    offsets = [
        ["offset", "earliest", "0", "-1"],
        # the first record stamped at or after 1005 (the records carry 1000 + i)
        ["offset", "for-time", "5", "1005"],
        ["offset", "latest", "10", "-1"],
        ["offset", "max-timestamp", "9", "1009"],
    ]
    assert lines(out) == [
        ["cluster", broker.server.cluster_id, node, "1"],
        ["listed", "true"],
        *partitions(2),
        ["config", "cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG"],
        ["config", "retention.ms", "604800000", "DEFAULT_CONFIG"],
        ["config", "max.message.bytes", "65536", "DYNAMIC_TOPIC_CONFIG"],
        *partitions(3),
        *offsets,
        ["deleted", "4"],
        [*offsets[0][:2], "4", "-1"], *offsets[1:],
        # a classic group with one member, then empty once it left (no protocol chosen)
        ["group", group, "Stable", "Classic", "range", "false", "1", node],
        ["member", "client", f"{topic}-0,{topic}-1,{topic}-2"],
        ["group-listed", group, "CLASSIC", "consumer", "STABLE"],
        ["group", group, "Empty", "Classic", "", "false", "0", node],
        ["group-offsets", f"{topic}-0=7/seven,{topic}-1=0/"],
        ["group-offsets", f"{topic}-1=0/"],
        ["group-listed", group, "false"],
        ["listed", "false"],
    ]


def test_admin_client_acls(kafka: Kafka, acl_broker: Broker) -> None:
    prefix = unique("acl")
    out = kafka.clients("admin-acls", "--bootstrap-server", acl_broker.bootstrap_servers,
                        "--prefix", prefix).ok()
    group = f"GROUP {prefix}- PREFIXED User:alice * READ ALLOW"
    read = f"TOPIC {prefix}-orders LITERAL User:alice * READ ALLOW"
    write = f"TOPIC {prefix}-orders LITERAL User:alice * WRITE ALLOW"
    deny = f"TOPIC {prefix}-orders LITERAL User:mallory 10.0.0.1 ALL DENY"
    assert lines(out) == [
        ["acl", "all", group], ["acl", "all", read], ["acl", "all", write],
        ["acl", "all", deny],
        ["acl", "topic", read], ["acl", "topic", write], ["acl", "topic", deny],
        # MATCH: the prefixed pattern covers the group named
        ["acl", "match-group", group],
        ["acl", "alice-read", group], ["acl", "alice-read", read],
        ["deleted", "2"],
        ["acl", "all", group], ["acl", "all", deny],
    ]
    authorizer = acl_broker.server.authorizer
    assert authorizer is not None
    assert len([a for a in authorizer.acls() if prefix in str(a)]) == 2


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_verifiable_producer_and_consumer(kafka: Kafka, broker: Broker) -> None:
    """Kafka's system tests' check: every record the producer saw acknowledged is consumed,
    at the offset acknowledged, and the consumer's last commit is each partition's end."""
    topic, group = unique("verifiable"), unique("vg")
    create_topic(broker, topic, 3)
    bs = broker.bootstrap_servers
    produced = events(kafka.tool("kafka-verifiable-producer", "--bootstrap-server", bs,
                                 "--topic", topic, "--max-messages", 900, "--acks", -1,
                                 "--repeating-keys", 30).ok())
    assert produced[0]["name"] == "startup_complete"
    tool_data = [e for e in produced if e["name"] == "tool_data"]
    assert [(e["sent"], e["acked"]) for e in tool_data] == [(900, 900)]
    acked = {(e["partition"], e["offset"]): e["value"] for e in produced
             if e["name"] == "producer_send_success"}
    assert len(acked) == 900 and sorted(acked.values(), key=int) == [str(i) for i in range(900)]
    assert {p for p, _ in acked} == {0, 1, 2}

    consumed = events(kafka.tool("kafka-verifiable-consumer", "--bootstrap-server", bs,
                                 "--topic", topic, "--group-id", group, "--max-messages", 900,
                                 "--verbose").ok())
    names = [e["name"] for e in consumed]
    assert names[0] == "startup_complete" and "partitions_assigned" in names
    records = [e for e in consumed if e["name"] == "record_data"]
    assert {(e["partition"], e["offset"]): e["value"] for e in records} == acked
    assert len(records) == 900
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)
    last: dict[int, int] = {}
    for commit in commits:
        for entry in commit["offsets"]:
            last[entry["partition"]] = entry["offset"]
    ends = {p: 1 + max(o for q, o in acked if q == p) for p in range(3)}
    assert last == ends
