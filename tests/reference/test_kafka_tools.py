"""Kafka's command-line tools (the release pinned in pom.xml) against samsa, with their real
flags, their output checked as Kafka prints it: kafka-topics, kafka-configs, the console
producer and consumer, kafka-consumer-groups, the perf tests, kafka-delete-records,
kafka-get-offsets, kafka-transactions, kafka-reassign-partitions, kafka-leader-election,
kafka-log-dirs and kafka-acls.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.embedded import Broker

from .conftest import Kafka, Run

pytestmark = pytest.mark.timeout(300)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("kafka-tools")) as b:
        yield b


@pytest.fixture
def bs(broker: Broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def create_topic(broker: Broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(broker: Broker, topic: str, counts: dict[int, int], **config: object) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **config})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition,
                             timestamp=1_000_000 + i)
    assert producer.flush(30) == 0


def error_lines(run: Run) -> list[str]:
    """stderr without the clients' log lines."""
    return [line for line in run.stderr.splitlines()
            if line and not line.startswith(("[", "\t", "Caused by", "java."))]


def table(text: str) -> list[list[str]]:
    """A whitespace-aligned table's rows (the header first), blank lines dropped."""
    return [line.split() for line in text.splitlines() if line.strip()]


# --- kafka-topics --------------------------------------------------------------------------------


def test_kafka_topics(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic = unique("orders")
    node = broker.server.broker_id
    out = kafka.tool("kafka-topics", *bs, "--create", "--topic", topic, "--partitions", 2,
                     "--replication-factor", 1, "--config", "retention.ms=3600000",
                     "--config", "cleanup.policy=compact").ok()
    assert out == f"Created topic {topic}.\n"
    run = kafka.tool("kafka-topics", *bs, "--create", "--topic", topic)
    assert run.rc == 1
    assert (f"Error while executing topic command : Topic '{topic}' already exists."
            in run.stdout)
    kafka.tool("kafka-topics", *bs, "--alter", "--topic", topic, "--partitions", 3).ok()

    out = kafka.tool("kafka-topics", *bs, "--describe", "--topic", topic).ok()
    first, *rest = out.splitlines()
    match = re.fullmatch(
        rf"Topic: {topic}\tTopicId: (\S{{22}})\tPartitionCount: 3\tReplicationFactor: 1\t"
        r"Configs: cleanup.policy=compact,retention.ms=3600000", first)
    assert match, first
    # Metadata has no eligible leader replicas (KIP-966): Kafka prints N/A
    assert rest == [f"\tTopic: {topic}\tPartition: {p}\tLeader: {node}\tReplicas: {node}\t"
                    f"Isr: {node}\tElr: N/A\tLastKnownElr: N/A" for p in range(3)]

    listed = kafka.tool("kafka-topics", *bs, "--list", "--exclude-internal").ok().splitlines()
    assert topic in listed and not [t for t in listed if t.startswith("__")]
    assert kafka.tool("kafka-topics", *bs, "--delete", "--topic", topic).ok() == ""
    assert topic not in kafka.tool("kafka-topics", *bs, "--list").ok().splitlines()


# --- kafka-configs -------------------------------------------------------------------------------


def test_kafka_configs(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic = unique("configured")
    create_topic(broker, topic, 1)
    topic_args = [*bs, "--entity-type", "topics", "--entity-name", topic]
    out = kafka.tool("kafka-configs", *topic_args, "--alter", "--add-config",
                     "retention.ms=1000,cleanup.policy=[compact,delete]").ok()
    assert out == f"Completed updating config for topic {topic}.\n"
    kafka.tool("kafka-configs", *topic_args, "--alter", "--delete-config", "retention.ms").ok()
    out = kafka.tool("kafka-configs", *topic_args, "--describe").ok()
    assert out == (
        f"Dynamic configs for topic {topic} are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n")

    run = kafka.tool("kafka-configs", *topic_args, "--alter", "--add-config", "no.such.key=1")
    assert run.rc == 1
    assert ("org.apache.kafka.common.errors.InvalidConfigurationException: "
            "Unknown topic config name: no.such.key") in run.stderr

    out = kafka.tool("kafka-configs", *bs, "--entity-type", "brokers", "--entity-name",
                     broker.server.broker_id, "--describe", "--all").ok()
    lines = out.splitlines()
    assert lines[0] == f"All configs for broker {broker.server.broker_id} are:"
    for line in ("  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}",
                 "  log.retention.hours=168 sensitive=false "
                 "synonyms={DEFAULT_CONFIG:log.retention.hours=168}"):
        assert line in lines


# --- console producer and consumer ---------------------------------------------------------------


def test_console_producer_and_consumer(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic = unique("console")
    create_topic(broker, topic, 1)
    lines = [f"key-{i}:value {i}" for i in range(20)] + ["empty:"]
    run = kafka.tool("kafka-console-producer", *bs, "--topic", topic,
                     "--reader-property", "parse.key=true",
                     "--reader-property", "key.separator=:", stdin="\n".join(lines) + "\n")
    assert run.ok() == ""
    run = kafka.tool("kafka-console-consumer", *bs, "--topic", topic, "--from-beginning",
                     "--max-messages", len(lines),
                     "--formatter-property", "print.key=true",
                     "--formatter-property", "print.offset=true",
                     "--formatter-property", "key.separator=|")
    assert run.ok().splitlines() == [f"Offset:{i}|{line.replace(':', '|', 1)}"
                                     for i, line in enumerate(lines)]
    assert f"Processed a total of {len(lines)} messages" in run.stderr.splitlines()
    out = kafka.tool("kafka-console-consumer", *bs, "--topic", topic, "--partition", 0,
                     "--offset", 18, "--max-messages", 3).ok()
    assert out.splitlines() == ["value 18", "value 19", ""]

    # a group member: the group's offsets are committed as it reads
    group = unique("console")
    out = kafka.tool("kafka-console-consumer", *bs, "--topic", topic, "--group", group,
                     "--max-messages", 5, "--command-property", "auto.offset.reset=earliest").ok()
    assert out.splitlines() == [line.split(":", 1)[1] for line in lines[:5]]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        consumer.close()
    assert committed[0].offset == 5


# --- kafka-consumer-groups -----------------------------------------------------------------------


GROUP_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                "CONSUMER-ID", "HOST", "CLIENT-ID"]


def test_kafka_consumer_groups(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic, group = unique("grouped"), unique("group")
    create_topic(broker, topic, 3)
    produce(broker, topic, {0: 10, 1: 6, 2: 0})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "client.id": "reader", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        read = 0
        while read < 16:
            msg = consumer.poll(10)
            assert msg is not None, "the group member read nothing in 10 s"
            if not msg.error():
                read += 1
        consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 6)],
                        asynchronous=False)

        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group)
                     .ok())
        assert rows[0] == GROUP_HEADER
        member = rows[1][6]
        assert member.startswith("reader-")
        assert sorted(rows[1:]) == [
            [group, topic, "0", "4", "10", "6", member, "/127.0.0.1", "reader"],
            [group, topic, "1", "6", "6", "0", member, "/127.0.0.1", "reader"],
            [group, topic, "2", "-", "0", "-", member, "/127.0.0.1", "reader"],
        ]
        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group,
                                "--state").ok())
        node = broker.server.broker_id
        assert rows == [
            ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [group, broker.bootstrap_servers, f"({node})", "range", "Stable", "1"]]
        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group,
                                "--members").ok())
        assert rows == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                        [group, member, "/127.0.0.1", "reader", "3"]]
        # refused while the group has members (Kafka's tool prints the error, exits 0 and
        # resets nothing)
        out = kafka.tool("kafka-consumer-groups", *bs, "--reset-offsets", "--group", group,
                         "--topic", topic, "--to-earliest", "--execute").ok()
        assert out.splitlines()[:3] == [
            "", f"Error: Assignments can only be reset if the group '{group}' is inactive, but "
            "the current state is Stable.", ""]
        assert table(out)[1:] == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    finally:
        consumer.close()

    run = kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in run.stderr.splitlines()
    assert sorted(table(run.ok())) == [
        GROUP_HEADER, [group, topic, "0", "4", "10", "6", "-", "-", "-"],
        [group, topic, "1", "6", "6", "0", "-", "-", "-"]]
    reset = ["--reset-offsets", "--group", group, "--topic", f"{topic}:0,1"]
    rows = table(kafka.tool("kafka-consumer-groups", *bs, *reset, "--shift-by", -3,
                            "--dry-run").ok())
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert sorted(rows[1:]) == [[group, topic, "0", "1"], [group, topic, "1", "3"]]
    rows = table(kafka.tool("kafka-consumer-groups", *bs, *reset, "--to-offset", 2,
                            "--execute").ok())
    assert sorted(rows[1:]) == [[group, topic, "0", "2"], [group, topic, "1", "2"]]
    rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group,
                            "--offsets").ok())
    assert sorted(rows[1:]) == [[group, topic, "0", "2", "10", "8", "-", "-", "-"],
                                [group, topic, "1", "2", "6", "4", "-", "-", "-"]]
    out = kafka.tool("kafka-consumer-groups", *bs, "--delete", "--group", group).ok()
    assert out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    assert group not in kafka.tool("kafka-consumer-groups", *bs, "--list").ok().split()


def test_kafka_consumer_groups_of_the_consumer_protocol(kafka: Kafka, broker: Broker,
                                                        bs: list[str]) -> None:
    """A KIP-848 group (group.protocol=consumer) as Kafka's tool lists and describes it:
    its type, epochs, and each member's current and target assignment."""
    topic, group = unique("kip848"), unique("consumer-group")
    create_topic(broker, topic, 2)
    produce(broker, topic, {0: 3, 1: 2})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "group.protocol": "consumer", "client.id": "reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        read = 0
        while read < 5:
            msg = consumer.poll(10)
            assert msg is not None, "the group member read nothing in 10 s"
            if not msg.error():
                read += 1
        consumer.commit(asynchronous=False)
        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--list", "--type").ok())
        assert rows[0] == ["GROUP", "TYPE"] and [group, "Consumer"] in rows
        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group,
                                "--state", "--verbose").ok())
        node = broker.server.broker_id
        assert rows == [
            ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
             "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
            [group, broker.bootstrap_servers, f"({node})", "uniform", "Stable", "1", "1", "1"]]
        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group,
                                "--members", "--verbose").ok())
        assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                           "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                           "TARGET-ASSIGNMENT"]
        assert rows[1][2:] == ["/127.0.0.1", "reader", "2", "1", f"{topic}:0,1", "1",
                               f"{topic}:0,1"]
        rows = table(kafka.tool("kafka-consumer-groups", *bs, "--describe", "--group", group)
                     .ok())
        assert sorted(row[:6] for row in rows[1:]) == [[group, topic, "0", "3", "3", "0"],
                                                       [group, topic, "1", "2", "2", "0"]]
    finally:
        consumer.close()
    out = kafka.tool("kafka-consumer-groups", *bs, "--delete", "--group", group).ok()
    assert out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."


# --- perf tests ----------------------------------------------------------------------------------


PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th.")


def test_perf_tests(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic = unique("perf")
    create_topic(broker, topic, 2)
    # transactions of about 100 ms each
    out = kafka.tool("kafka-producer-perf-test", *bs, "--topic", topic, "--num-records", 5000,
                     "--record-size", 200, "--throughput", -1, "--command-property", "acks=all",
                     "linger.ms=5", "--transactional-id", unique("perf"),
                     "--transaction-duration-ms", 100).ok()
    summary = PRODUCER_SUMMARY.fullmatch(out.splitlines()[-1])
    assert summary, out
    assert int(summary.group(1)) == 5000 and float(summary.group(2)) > 0

    out = kafka.tool("kafka-consumer-perf-test", *bs, "--topic", topic, "--num-records", 5000,
                     "--timeout", 30000).ok()
    header, values = out.splitlines()[-2:]
    fields = dict(zip(header.split(", "), values.split(", "), strict=True))
    assert int(fields["data.consumed.in.nMsg"]) == 5000
    # 5000 records of 200 bytes
    assert float(fields["data.consumed.in.MB"]) == pytest.approx(5000 * 200 / 1024 / 1024,
                                                                 abs=1e-4)


# --- kafka-get-offsets and kafka-delete-records --------------------------------------------------


def test_get_offsets_and_delete_records(kafka: Kafka, broker: Broker, bs: list[str],
                                        tmp_path: Path) -> None:
    topic = unique("offsets")
    create_topic(broker, topic, 2)
    produce(broker, topic, {0: 8, 1: 3})
    offsets = ["kafka-get-offsets", *bs, "--topic", topic, "--time"]
    assert kafka.tool(*offsets, "latest").ok() == f"{topic}:0:8\n{topic}:1:3\n"
    # the timestamps were 1000000 + i: the last record of each partition has the largest
    assert kafka.tool(*offsets, "max-timestamp").ok() == f"{topic}:0:7\n{topic}:1:2\n"

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 5},
        {"topic": topic, "partition": 1, "offset": 9}]}))
    out = kafka.tool("kafka-delete-records", *bs, "--offset-json-file", plan).ok()
    lines = out.splitlines()
    assert lines[:2] == ["Executing records delete operation",
                         "Records delete operation completed:"]
    assert sorted(lines[2:]) == [
        f"partition: {topic}-0\tlow_watermark: 5",
        f"partition: {topic}-1\terror: org.apache.kafka.common.errors."
        "OffsetOutOfRangeException: The requested offset is not within the range of offsets "
        "maintained by the server."]
    assert kafka.tool(*offsets, "earliest").ok() == f"{topic}:0:5\n{topic}:1:0\n"


# --- kafka-transactions --------------------------------------------------------------------------


def test_kafka_transactions(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic, txn = unique("txn"), unique("open")
    create_topic(broker, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": txn})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    node = str(broker.server.broker_id)

    rows = table(kafka.tool("kafka-transactions", *bs, "list").ok())
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    mine = [row for row in rows if row[0] == txn]
    assert len(mine) == 1 and mine[0][1] == node and mine[0][3] == "Ongoing"
    producer_id = mine[0][2]

    rows = table(kafka.tool("kafka-transactions", *bs, "describe", "--transactional-id", txn)
                 .ok())
    assert rows[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                       "TransactionState", "TransactionTimeoutMs",
                       "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                       "TopicPartitions"]
    coordinator, tid, pid, epoch, state, timeout, start, duration, partitions = rows[1]
    assert (coordinator, tid, pid, epoch, state, timeout, partitions) == (
        node, txn, producer_id, "0", "Ongoing", "60000", f"{topic}-0")
    assert int(start) > 0 and int(duration) >= 0

    describe_producers = [*bs, "describe-producers", "--topic", topic, "--partition", "0"]
    rows = table(kafka.tool("kafka-transactions", *describe_producers).ok())
    assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                       "LastTimestamp", "CurrentTransactionStartOffset"]
    assert [row[:4] + row[5:] for row in rows[1:]] == [[producer_id, "0", "-1", "2", "0"]]

    # nothing hangs: the coordinator knows the open transaction
    rows = table(kafka.tool("kafka-transactions", *bs, "find-hanging", "--broker-id", node,
                            "--max-transaction-timeout", 0).ok())
    assert rows == [["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                     "StartOffset", "LastTimestamp", "Duration(min)"]]

    # an abort marker written by the tool (WriteTxnMarkers) closes it on the partition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": unique("rc"), "isolation.level": "read_committed"})
    try:
        # a read_committed ListOffsets answers the last stable offset
        stable = TopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(stable, timeout=30) == (0, 0)
        kafka.tool("kafka-transactions", *bs, "abort", "--topic", topic, "--partition", 0,
                   "--start-offset", 0).ok()
        rows = table(kafka.tool("kafka-transactions", *describe_producers).ok())
        assert [row[:4] + row[5:] for row in rows[1:]] == [
            [producer_id, "0", "0", "2", "None"]]
        # the three records and the marker, all stable now
        assert consumer.get_watermark_offsets(stable, timeout=30) == (0, 4)
    finally:
        consumer.close()


# --- kafka-reassign-partitions, kafka-leader-election, kafka-log-dirs ----------------------------


def test_kafka_reassign_partitions(kafka: Kafka, broker: Broker, bs: list[str],
                                   tmp_path: Path) -> None:
    topic = unique("moved")
    create_topic(broker, topic, 2)
    node = broker.server.broker_id
    data_dir = str(broker.data_dir)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    out = kafka.tool("kafka-reassign-partitions", *bs, "--topics-to-move-json-file", topics,
                     "--broker-list", node, "--generate").ok()
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [node], "log_dirs": [data_dir]}
        for p in range(2)]}
    assert lines[3] == "Proposed partition reassignment configuration"
    assert json.loads(lines[4]) == {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [node], "log_dirs": ["any"]}
        for p in range(2)]}

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [node]}]}))
    out = kafka.tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", plan,
                     "--execute").ok()
    assert out.splitlines()[-1] == f"Successfully started partition reassignment for {topic}-0"
    out = kafka.tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", plan,
                     "--verify", "--preserve-throttles").ok()
    assert out.splitlines() == ["Status of partition reassignment:",
                                f"Reassignment of partition {topic}-0 is completed.", ""]
    assert kafka.tool("kafka-reassign-partitions", *bs, "--list").ok() == (
        "No partition reassignments found.\n")


def test_kafka_reassign_partitions_verify_clears_throttles(
        kafka: Kafka, broker: Broker, bs: list[str], tmp_path: Path) -> None:
    topic = unique("verified")
    create_topic(broker, topic, 1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [broker.server.broker_id]}]}))
    kafka.tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", plan,
               "--execute").ok()
    out = kafka.tool("kafka-reassign-partitions", *bs, "--reassignment-json-file", plan,
                     "--verify").ok()
    assert out.splitlines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.", "",
        f"Clearing broker-level throttles on broker {broker.server.broker_id}",
        f"Clearing topic-level throttles on topic {topic}"]


def test_kafka_leader_election(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic = unique("elected")
    create_topic(broker, topic, 2)
    out = kafka.tool("kafka-leader-election", *bs, "--election-type", "preferred", "--topic",
                     topic, "--partition", 1).ok()
    assert out == f"Valid replica already elected for partitions {topic}-1\n"
    out = kafka.tool("kafka-leader-election", *bs, "--election-type", "unclean",
                     "--all-topic-partitions").ok()
    assert out.startswith("Valid replica already elected for partitions ")
    elected = out.strip().split("partitions ", 1)[1].split(", ")
    assert {f"{topic}-0", f"{topic}-1"} <= set(elected)
    run = kafka.tool("kafka-leader-election", *bs, "--election-type", "preferred", "--topic",
                     unique("absent"), "--partition", 0)
    assert run.rc == 1
    assert re.search(r"Error completing leader election \(PREFERRED\) for partition: \S+-0: "
                     r"org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
                     run.stdout)


def test_kafka_log_dirs(kafka: Kafka, broker: Broker, bs: list[str]) -> None:
    topic = unique("sized")
    create_topic(broker, topic, 2)
    produce(broker, topic, {0: 5, 1: 0})
    out = kafka.tool("kafka-log-dirs", *bs, "--describe", "--topic-list", topic).ok()
    lines = out.splitlines()
    node = broker.server.broker_id
    assert lines[:2] == ["Querying brokers for log directories information",
                         f"Received log directory information from brokers {node}"]
    described = json.loads(lines[2])
    assert described["version"] == 1
    [entry] = described["brokers"]
    assert entry["broker"] == node
    [log_dir] = entry["logDirs"]
    assert log_dir["logDir"] == str(broker.data_dir) and log_dir["error"] is None
    partitions = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(partitions) == {f"{topic}-0", f"{topic}-1"}
    assert partitions[f"{topic}-1"]["size"] == 0 < partitions[f"{topic}-0"]["size"]
    segment = next((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert partitions[f"{topic}-0"]["size"] == segment.stat().st_size
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in partitions.values())


# --- kafka-acls ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The ACL authorizer on; the tools connect as User:ANONYMOUS, a super user."""
    with Broker(tmp_path_factory.mktemp("kafka-tools-acls"), config={
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS"}) as b:
        yield b


def acl(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return (f"\t(principal={principal}, host={host}, operation={operation}, "
            f"permissionType={permission})")


def test_kafka_acls(kafka: Kafka, acl_broker: Broker) -> None:
    bs = ["--bootstrap-server", acl_broker.bootstrap_servers]
    topic, group = unique("orders"), unique("readers")
    topic_pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    group_pattern = f"ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)"
    out = kafka.tool("kafka-acls", *bs, "--add", "--allow-principal", "User:alice",
                     "--operation", "Write", "--topic", topic).ok()
    assert out.splitlines() == [f"Adding ACLs for resource `{topic_pattern}`: ",
                                " " + acl("User:alice", "WRITE"), ""]
    kafka.tool("kafka-acls", *bs, "--add", "--consumer", "--allow-principal", "User:bob",
               "--topic", topic, "--group", group).ok()
    kafka.tool("kafka-acls", *bs, "--add", "--deny-principal", "User:mallory", "--deny-host",
               "10.0.0.1", "--operation", "All", "--topic", topic).ok()

    def listed(*args: str) -> dict[str, set[str]]:
        """--list's blocks: resource pattern -> its entries."""
        out = kafka.tool("kafka-acls", *bs, "--list", *args).ok()
        blocks: dict[str, set[str]] = {}
        current = ""
        for line in out.splitlines():
            header = re.fullmatch(r"Current ACLs for resource `(.*)`:\s*", line)
            if line.startswith("ACLs for principal "):
                continue
            if header:
                current = header.group(1)
                blocks[current] = set()
            elif line.strip():
                blocks[current].add(line.strip())
        return blocks

    assert listed("--topic", topic) == {topic_pattern: {
        acl("User:alice", "WRITE").strip(), acl("User:bob", "READ").strip(),
        acl("User:bob", "DESCRIBE").strip(),
        acl("User:mallory", "ALL", "DENY", "10.0.0.1").strip()}}
    assert listed("--group", group) == {group_pattern: {acl("User:bob", "READ").strip()}}

    kafka.tool("kafka-acls", *bs, "--remove", "--force", "--allow-principal", "User:bob",
               "--operation", "Read", "--operation", "Describe", "--topic", topic).ok()
    assert listed("--principal", "User:bob") == {group_pattern: {acl("User:bob",
                                                                     "READ").strip()}}
    authorizer = acl_broker.server.authorizer
    assert authorizer is not None
    assert len([b for b in authorizer.acls() if topic in str(b)]) == 2
