"""``samsa reassign-partitions`` with the reassignment file's ``log_dirs`` (Kafka's executeMoves
and verifyReplicaMoves), run as a subprocess: on one broker with two log directories a replica
moves where the file says and ``--verify`` follows it; in a ZooKeeper cluster of two brokers
with two log directories each, a replica reassigned onto a broker is created in the directory
the file names (the broker answers REPLICA_NOT_AVAILABLE until it hosts it, remembering the
directory, and the tool asks again), and a follower's replica moves while its leader takes
writes, then leads with all of them. Kafka's lines; every failure is one line.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

import samsa
from samsa.tools.zookeeper_server import ZooKeeperServer
from tests.cluster.test_replicated_topics import produce, read_all

from . import error_line, ok, unique
from . import samsa as run_samsa

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartitionReplica
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.timeout(180)


def reassign(bootstrap: str, *args: str | Path) -> Any:
    return run_samsa("reassign-partitions", "--bootstrap-server", bootstrap, *args)


def write_plan(path: Path, entries: list[tuple[str, int, list[int], list[str]]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": d} for t, p, r, d in entries]}))
    return path


def described_dirs(bootstrap: str, broker_id: int, topic: str) -> dict[str, list[str]]:
    """``samsa log-dirs --describe``: each log dir of the broker -> the topic's partitions
    there (``name-index``, ``(future)`` for a copy being made)."""
    out = ok(run_samsa("log-dirs", "--bootstrap-server", bootstrap, "--describe",
                       "--broker-list", str(broker_id), "--topic-list", topic))
    [broker] = json.loads(out.splitlines()[2])["brokers"]
    return {d["logDir"]: sorted(p["partition"] + (" (future)" if p["isFuture"] else "")
                                for p in d["partitions"]) for d in broker["logDirs"]}


# --- one broker ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[samsa.Broker, Path]]:
    root = tmp_path_factory.mktemp("single")
    with samsa.Broker(root, config={"log.dirs": f"{root / 'a'},{root / 'b'}"}) as broker:
        yield broker, root


def test_execute_moves_the_replica_to_the_named_dir_and_verify_follows(
        single: tuple[samsa.Broker, Path], tmp_path: Path) -> None:
    broker, root = single
    me = broker.server.broker_id
    topic = unique("dirs")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    values = [b"%d" % i for i in range(2000)]
    acked = produce(broker.bootstrap_servers, topic, values)
    here = {p: broker.server.log_manager.dir_of((topic, p)) for p in (0, 1)}
    there = {p: root / ("b" if here[p] == root / "a" else "a") for p in (0, 1)}
    file = write_plan(tmp_path / "plan.json", [
        (topic, 0, [me], [str(there[0])]), (topic, 1, [me], ["any"])])

    lines = ok(reassign(broker.bootstrap_servers, "--execute", "--reassignment-json-file",
                        file)).splitlines()
    assert lines[-2:] == [f"Successfully started partition reassignments for {topic}-0,{topic}-1",
                          f"Successfully started log directory move for: {topic}-0-{me}"]

    def verified() -> list[str]:
        out = ok(reassign(broker.bootstrap_servers, "--verify", "--reassignment-json-file",
                          file)).splitlines()
        return out if out[3].endswith("completed successfully.") else []

    # once nothing moves any more, Kafka's tool clears the replication throttles
    assert wait_for(verified, what="the move to complete") == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
        f"Reassignment of partition {topic}-1 is completed.",
        f"Reassignment of replica {topic}-0-{me} completed successfully.",
        f"Clearing broker-level throttles on broker {me}",
        f"Clearing topic-level throttles on topic {topic}"]
    dirs = described_dirs(broker.bootstrap_servers, me, topic)
    assert dirs[str(there[0])] == [f"{topic}-0"] + ([f"{topic}-1"] if here[1] == there[0]
                                                    else [])
    assert broker.server.log_manager.dir_of((topic, 1)) == here[1]  # "any": not moved
    assert read_all(broker.bootstrap_servers, topic, 2) == {
        p: [v for q, _, v in acked if q == p] for p in (0, 1)}

    # a replica the file puts where it is not, with no move running: Kafka's line
    stale = write_plan(tmp_path / "stale.json", [(topic, 1, [me], [str(there[1])])])
    out = ok(reassign(broker.bootstrap_servers, "--verify", "--preserve-throttles",
                      "--reassignment-json-file", stale))
    assert out.splitlines()[-1] == (f"Partition {topic}-1 on broker {me} is not being moved from"
                                    f" log dir {here[1]} to {there[1]}.")


def test_a_move_that_cannot_be_started_is_one_line(
        single: tuple[samsa.Broker, Path], tmp_path: Path) -> None:
    broker, root = single
    me = broker.server.broker_id
    topic = unique("nowhere")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    file = write_plan(tmp_path / "plan.json", [(topic, 0, [me], [str(root / "c")])])
    line = error_line(reassign(broker.bootstrap_servers, "--execute",
                               "--reassignment-json-file", file))
    assert line == (f"samsa: Error moving replica {topic}-0-{me} to log dir {root / 'c'}:"
                    " LOG_DIR_NOT_FOUND: The user-specified log directory is not found in the"
                    " broker config.")
    line = error_line(reassign(broker.bootstrap_servers, "--verify", "--timeout", "5",
                               "--reassignment-json-file", file))
    assert line == 'samsa: Option "[timeout]" can\'t be used with action "[verify]"'


# --- a cluster -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[samsa.Broker], Path]]:
    root = tmp_path_factory.mktemp("cluster")
    brokers: list[samsa.Broker] = []
    with ZooKeeperServer(root / "zk") as zookeeper:
        try:
            for i in (1, 2):
                dirs = f"{root / f'b{i}' / 'a'},{root / f'b{i}' / 'b'}"
                broker = samsa.Broker(root / f"b{i}", config={
                    "broker.id": i, "zookeeper.connect": zookeeper.connect_string,
                    "log.dirs": dirs, "zookeeper.session.timeout.ms": 6000,
                    "replica.fetch.wait.max.ms": 100, "replica.fetch.backoff.ms": 200,
                    "replica.lag.time.max.ms": 3000})
                broker.start()
                brokers.append(broker)
            for b in brokers:
                wait_for(lambda b=b: len(b.server.membership.brokers) == 2,
                         what="both brokers to see each other")
            yield brokers, root
        finally:
            for b in brokers:
                b.stop()


def servers(brokers: list[samsa.Broker]) -> str:
    return ",".join(b.bootstrap_servers for b in brokers)


def leader_of(brokers: list[samsa.Broker], topic: str) -> tuple[int, list[int]]:
    meta = AdminClient({"bootstrap.servers": servers(brokers)}).list_topics(topic, timeout=15)
    partition = meta.topics[topic].partitions[0]
    return partition.leader, sorted(partition.isrs)


def test_a_replica_is_created_in_the_named_dir_and_a_follower_moves_under_writes(
        cluster: tuple[list[samsa.Broker], Path], tmp_path: Path) -> None:
    brokers, root = cluster
    one, two = brokers
    topic = unique("follow")
    admin = AdminClient({"bootstrap.servers": servers(brokers)})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[2]])])[topic].result(30)
    wait_for(lambda: leader_of(brokers, topic) == (2, [2]), what="broker 2 to lead")
    before = produce(servers(brokers), topic, [b"first-%d" % i for i in range(3000)])

    # broker 1 hosts no replica of it yet: REPLICA_NOT_AVAILABLE, and the dir is remembered
    dir_b = root / "b1" / "b"
    kafka_admin = KafkaAdminClient(bootstrap_servers=servers(brokers))
    try:
        answer = kafka_admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1):
                                                     str(dir_b)})
        assert [e.errno for e in answer.values()] == [9]  # REPLICA_NOT_AVAILABLE
    finally:
        kafka_admin.close()
    # onto broker 1, in its dir b: the tool asks until broker 1 hosts the replica
    file = write_plan(tmp_path / "plan.json", [(topic, 0, [2, 1], ["any", str(dir_b)])])
    lines = ok(reassign(servers(brokers), "--execute", "--reassignment-json-file",
                        file)).splitlines()
    assert lines[-2:] == [f"Successfully started partition reassignment for {topic}-0",
                          f"Successfully started log directory move for: {topic}-0-1"]
    wait_for(lambda: leader_of(brokers, topic) == (2, [1, 2]), timeout=40,
             what="broker 1 in the ISR")

    def verified() -> list[str]:
        out = ok(reassign(servers(brokers), "--verify", "--preserve-throttles",
                          "--reassignment-json-file", file)).splitlines()
        done = out[1].endswith("is completed.") and out[-1].endswith("completed successfully.")
        return out if done else []

    assert wait_for(verified, timeout=40, what="the reassignment and the move")[1:] == [
        f"Reassignment of partition {topic}-0 is completed.",
        f"Reassignment of replica {topic}-0-1 completed successfully."]
    assert one.server.log_manager.dir_of((topic, 0)) == dir_b

    # broker 1's follower replica moves to its dir a while broker 2 takes writes
    acked: list[bytes] = []
    stop = threading.Event()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": servers(brokers), "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2})
        i = 0
        while not stop.is_set():
            producer.produce(topic, b"during-%d" % i,
                             on_delivery=lambda err, msg: err or acked.append(msg.value()))
            producer.poll(0)
            i += 1
            if i % 100 == 0:
                producer.flush(10)
        assert producer.flush(60) == 0

    writer = threading.Thread(target=keep_producing)
    writer.start()
    kafka_admin = KafkaAdminClient(bootstrap_servers=servers(brokers))
    try:
        wait_for(lambda: len(acked) > 300, what="the producer under way")
        dir_a = root / "b1" / "a"
        answer = kafka_admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1):
                                                     str(dir_a)})
        assert [e.errno for e in answer.values()] == [0]
        wait_for(lambda: described_dirs(servers(brokers), 1, topic) == {
            str(dir_a): [f"{topic}-0"], str(dir_b): []}, what="the follower's move")
        moved_at = len(acked)
        wait_for(lambda: len(acked) > moved_at + 300, what="writes after the move")
    finally:
        stop.set()
        writer.join(90)
        kafka_admin.close()
    wait_for(lambda: leader_of(brokers, topic) == (2, [1, 2]), what="broker 1 in sync")

    # broker 1 leads once broker 2 is gone, with every record
    two.stop()
    wait_for(lambda: leader_of([one], topic)[0] == 1, timeout=40, what="broker 1 to lead")
    got = read_all(one.bootstrap_servers, topic, 1)[0]
    assert got[:3000] == [v for _, _, v in before]
    assert len(set(got)) == len(got)
    assert set(acked) <= set(got[3000:])
