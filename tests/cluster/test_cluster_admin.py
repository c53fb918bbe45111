"""Topic administration and leadership moves on a three-broker cluster with a real ZooKeeper:
DeleteTopics, CreatePartitions and config changes through ZooKeeper, preferred leader
election (ElectLeaders and auto.leader.rebalance.enable), partition reassignment
(AlterPartitionReassignments / ListPartitionReassignments), controlled shutdown, and a deposed
controller's writes refused."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import KafkaAdminClient
from kazoo.client import KazooClient
from waiting import wait_for

import samsa
from samsa.coordinator.records import partition_for
from samsa.records.batch import iter_headers
from samsa.records.control import read_marker
from samsa.tools.zookeeper_server import ZooKeeperServer
from samsa.zk.zk_client import ControllerMovedError, ZkClient
from samsa.zk.zk_data import PartitionState
from tests.cluster.test_replicated_topics import produce, read_all

pytestmark = pytest.mark.timeout(180)

BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 200,
    "replica.lag.time.max.ms": 3000,
    "controlled.shutdown.retry.backoff.ms": 200,
}


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zk") as server:
        yield server


def start(tmp_path: Path, zookeeper: ZooKeeperServer, broker_id: int,
          **extra: object) -> samsa.Broker:
    broker = samsa.Broker(tmp_path / f"b{broker_id}", config={
        "broker.id": broker_id, "zookeeper.connect": zookeeper.connect_string,
        **BROKER_CONFIG, **extra})
    broker.start()
    return broker


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[list[samsa.Broker]]:
    brokers: list[samsa.Broker] = []
    try:
        for i in (1, 2, 3):
            brokers.append(start(tmp_path, zookeeper, i))
        for b in brokers:
            wait_for(lambda b=b: len(b.server.membership.brokers) == 3,
                     what="every broker to see the others")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def servers(brokers: list[samsa.Broker]) -> str:
    return ",".join(b.bootstrap_servers for b in brokers if b.server.started)


def state_of(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    meta = admin.list_topics(topic, timeout=15).topics[topic]
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in meta.partitions.values()}


def create(admin: AdminClient, topic: str, partitions: int, factor: int, **configs: str) -> None:
    admin.create_topics([NewTopic(topic, partitions, factor, config=configs)])[topic].result(30)
    wait_for(lambda: (s := state_of(admin, topic)) and len(s) == partitions and all(
        leader >= 0 and len(isr) == factor for leader, _, isr in s.values()),
        timeout=30, what=f"{topic}'s leaders and full ISRs")


def controller_of(brokers: list[samsa.Broker]) -> samsa.Broker:
    return next(b for b in brokers if b.server.started and b.server.membership.is_controller)


def test_delete_topic_removes_it_from_zookeeper_and_every_replica(
        cluster: list[samsa.Broker], zookeeper: ZooKeeperServer) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "doomed", 3, 3)
    produce(servers(cluster), "doomed", [b"x"] * 30)
    dirs = [b.server.log_manager.dirs[0] for b in cluster]
    assert all(any(Path(d).glob("doomed-*")) for d in dirs)
    admin.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(30)
    # the answer comes once the broker asked has seen it; every broker follows
    for b in cluster:
        wait_for(lambda b=b: b.server.topics.get("doomed") is None
                 and not any(Path(b.server.log_manager.dirs[0]).glob("doomed-*")),
                 timeout=20, what=f"broker {b.server.broker_id} to delete its replicas")
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start()
    try:
        assert not zk.exists("/brokers/topics/doomed")
        assert not zk.exists("/config/topics/doomed")
        assert zk.get_children("/admin/delete_topics") == []
    finally:
        zk.stop()
    assert "doomed" not in admin.list_topics(timeout=10).topics
    # the name can be used again, with nothing left of the old topic
    create(admin, "doomed", 1, 3)
    assert read_all(servers(cluster), "doomed", 1) == {0: []}


def test_a_broker_away_during_a_deletion_drops_the_topic_when_it_comes_back(
        cluster: list[samsa.Broker], tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "gone", 1, 3)
    produce(servers(cluster), "gone", [b"y"] * 10)
    away = cluster[2]
    away.stop()
    admin = AdminClient({"bootstrap.servers": servers(cluster[:2])})
    admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(30)
    assert any(Path(away.server.log_manager.dirs[0]).glob("gone-*"))
    cluster[2] = start(tmp_path, zookeeper, 3)
    wait_for(lambda: not any(Path(cluster[2].server.log_manager.dirs[0]).glob("gone-*")),
             timeout=20, what="the returning broker to delete the deleted topic's log")
    assert cluster[2].server.topics.get("gone") is None


def test_create_partitions_places_new_replicas_and_elects_their_leaders(
        cluster: list[samsa.Broker]) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "growing", 2, 2)
    admin.create_partitions([NewPartitions("growing", 5)])["growing"].result(30)
    state = wait_for(lambda: (s := state_of(admin, "growing")) and len(s) == 5 and all(
        leader >= 0 and len(isr) == 2 for leader, _, isr in s.values()) and s,
        timeout=30, what="the new partitions' leaders")
    assert all(len(set(replicas)) == 2 for _, replicas, _ in state.values())
    for b in cluster:
        wait_for(lambda b=b: b.server.topics.get("growing").partitions == 5,
                 what=f"broker {b.server.broker_id} to know 5 partitions")
    producer = Producer({"bootstrap.servers": servers(cluster), "acks": "all"})
    for p in range(5):
        producer.produce("growing", f"v{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    assert read_all(servers(cluster), "growing", 5) == {p: [f"v{p}".encode()] for p in range(5)}
    # a manual assignment of the new partition
    admin.create_partitions([NewPartitions("growing", 6, replica_assignment=[[3, 1]])])[
        "growing"].result(30)
    wait_for(lambda: state_of(admin, "growing").get(5, (-1, [], []))[:2] == (3, [3, 1]),
             timeout=30, what="partition 5 on brokers 3 and 1, led by 3")
    bad = admin.create_partitions([NewPartitions("growing", 7, replica_assignment=[[3, 9]])])
    with pytest.raises(Exception, match="INVALID_REPLICA_ASSIGNMENT"):
        bad["growing"].result(30)


def test_topic_config_changes_reach_every_broker(cluster: list[samsa.Broker]) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "tuned", 1, 3)
    resource = ConfigResource("topic", "tuned", incremental_configs=[
        ConfigEntry("retention.ms", "12345",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    for b in cluster:
        wait_for(lambda b=b: b.server.replicas.topic_log_config("tuned").retention_ms == 12345,
                 what=f"broker {b.server.broker_id} to apply retention.ms")
        wait_for(lambda b=b: b.server.replicas.partition(
                     "tuned", 0).log.config.retention_ms == 12345,
                 what=f"broker {b.server.broker_id}'s log to apply retention.ms")


def test_preferred_leader_election_moves_leadership_back(
        cluster: list[samsa.Broker], tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "pref", 3, 3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in state_of(admin, "pref").items()}
    # broker 1 goes and comes back: the partitions it preferred are led elsewhere
    victim = cluster[0]
    victim.stop()
    wait_for(lambda: all(leader != 1 for leader, _, _ in state_of(
        AdminClient({"bootstrap.servers": servers(cluster[1:])}), "pref").values()),
        timeout=30, what="leaders away from broker 1")
    cluster[0] = start(tmp_path, zookeeper, 1)
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    wait_for(lambda: all(len(isr) == 3 for _, _, isr in state_of(admin, "pref").values()),
             timeout=30, what="broker 1 back in every ISR")
    moved = [p for p, (leader, _, _) in state_of(admin, "pref").items()
             if leader != preferred[p]]
    assert moved, "broker 1 led nothing before it went"
    result = admin.elect_leaders(ElectionType.PREFERRED,
                                 [CkTopicPartition("pref", p) for p in range(3)]).result(30)
    errors = {tp.partition: err for tp, err in result.items()}
    for p in range(3):
        if p in moved:
            assert errors[p] is None, errors
        else:
            assert errors[p] is not None and errors[p].name() == "ELECTION_NOT_NEEDED"
    wait_for(lambda: all(leader == preferred[p] for p, (leader, _, _) in state_of(
        admin, "pref").items()), timeout=20, what="preferred leaders")
    # kafka-python's admin finds the controller by itself
    client = KafkaAdminClient(bootstrap_servers=servers(cluster))
    try:
        client.elect_leaders(0, {"pref": [0]}, raise_errors=False)
    finally:
        client.close()


def test_auto_leader_rebalance_moves_leaders_back(tmp_path: Path,
                                                  zookeeper: ZooKeeperServer) -> None:
    settings = {"leader.imbalance.check.interval.seconds": 1}
    brokers = [start(tmp_path, zookeeper, i, **settings) for i in (1, 2, 3)]
    try:
        for b in brokers:
            wait_for(lambda b=b: len(b.server.membership.brokers) == 3, what="the cluster")
        admin = AdminClient({"bootstrap.servers": servers(brokers)})
        create(admin, "balanced", 3, 3)
        preferred = {p: r[0] for p, (_, r, _) in state_of(admin, "balanced").items()}
        victim_id = next(b for b in brokers if not b.server.membership.is_controller
                         ).server.broker_id
        index = victim_id - 1
        brokers[index].stop()
        wait_for(lambda: all(leader != victim_id for leader, _, _ in state_of(
            AdminClient({"bootstrap.servers": servers(brokers)}), "balanced").values()),
            timeout=30, what="leaders away from the stopped broker")
        brokers[index] = start(tmp_path, zookeeper, victim_id, **settings)
        admin = AdminClient({"bootstrap.servers": servers(brokers)})
        wait_for(lambda: all(leader == preferred[p] for p, (leader, _, _) in state_of(
            admin, "balanced").items()), timeout=40,
            what="the rebalance to give the preferred leaders back")
    finally:
        for b in brokers:
            b.stop()


def test_reassignment_moves_replicas_with_a_running_producer(
        cluster: list[samsa.Broker], tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "moving", 1, 2)
    leader, replicas, _ = state_of(admin, "moving")[0]
    first = produce(servers(cluster), "moving", [f"a{i}".encode() for i in range(500)])
    spare = ({1, 2, 3} - set(replicas)).pop()
    target = [spare, leader if leader != replicas[0] else replicas[1]]
    # the leader leaves the replica set: leadership moves too
    target = [spare, next(r for r in replicas if r != leader)]
    client = KafkaAdminClient(bootstrap_servers=servers(cluster))
    try:
        client.alter_partition_reassignments({TopicPartition("moving", 0): target})
        wait_for(lambda: state_of(admin, "moving")[0][1] == target
                 and set(state_of(admin, "moving")[0][2]) == set(target)
                 and state_of(admin, "moving")[0][0] in target,
                 timeout=40, what=f"the partition on {target}")
        assert client.list_partition_reassignments() == {}
        # cancelling with nothing in progress is an error per partition
        result = client.alter_partition_reassignments({TopicPartition("moving", 0): None})
        assert result == {TopicPartition("moving", 0):
                          kafka_errors.NoReassignmentInProgressError}
    finally:
        client.close()
    gone = next(b for b in cluster if b.server.broker_id == leader)
    wait_for(lambda: gone.server.replicas.partition("moving", 0) is None
             and not any(Path(gone.server.log_manager.dirs[0]).glob("moving-*")),
             timeout=20, what="the old replica's log deleted")
    more = produce(servers(cluster), "moving", [f"b{i}".encode() for i in range(500)])
    values = read_all(servers(cluster), "moving", 1)[0]
    assert values == [v for _, _, v in sorted(first + more, key=lambda a: a[1])]


def test_invalid_reassignments_are_refused(cluster: list[samsa.Broker]) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "fixed", 1, 2)
    client = KafkaAdminClient(bootstrap_servers=servers(cluster))
    try:
        tp = TopicPartition("fixed", 0)
        for target in ([1, 1], [1, 7]):  # an empty list never leaves kafka-python
            result = client.alter_partition_reassignments({tp: target})
            assert result == {tp: kafka_errors.InvalidReplicationAssignmentError}, target
        missing = TopicPartition("fixed", 5)
        result = client.alter_partition_reassignments({missing: [1, 2]})
        assert result == {missing: kafka_errors.UnknownTopicOrPartitionError}
        assert client.list_partition_reassignments() == {}
    finally:
        client.close()


def test_controlled_shutdown_moves_leadership_before_the_broker_stops(
        cluster: list[samsa.Broker]) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "calm", 3, 3, **{"min.insync.replicas": "2"})
    victim = next(b for b in cluster if not b.server.membership.is_controller)
    vid = victim.server.broker_id
    led = [p for p, (leader, _, _) in state_of(admin, "calm").items() if leader == vid]
    assert led
    controller = controller_of(cluster)
    victim.stop()
    # the moves were written before the broker left (its session closes at the end)
    zk = controller.server.membership.zk
    for p in range(3):
        found = zk.partition_state("calm", p)
        assert found is not None
        state: PartitionState = found[0]
        assert state.leader != vid and vid not in state.isr, (p, state)
    rest = [b for b in cluster if b is not victim]
    acked = produce(servers(rest), "calm", [f"c{i}".encode() for i in range(300)])
    assert len(acked) == 300


def test_a_deposed_controllers_writes_are_refused(
    cluster: list[samsa.Broker], zookeeper: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A controller that lost its epoch without noticing (a long pause) cannot write: its
    next decision fails the /controller_epoch version check and it stops acting. As /controller
    still names it, it gives that up (Kafka's maybeResign) and a new election runs."""
    # the controller's warning is captured whatever an earlier test in this process did to
    # the loggers' levels
    caplog.set_level(logging.WARNING, logger="samsa.zk.controller")
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "fenced", 1, 3)
    controller = controller_of(cluster)
    zk = ZkClient(zookeeper.connect_string, 6000)
    zk.start()
    try:
        state, version = zk.partition_state("fenced", 0)
        epoch, fence = zk.controller_epoch()
        # as if another broker had won an election meanwhile: the epoch znode moves on
        zk.client.set("/controller_epoch", str(epoch + 1).encode(), version=fence)
        with pytest.raises(ControllerMovedError):
            zk.update_partition_state("fenced", 0, PartitionState(
                state.leader, state.leader_epoch + 1, state.isr, epoch), version, fence)
        assert zk.partition_state("fenced", 0) == (state, version)
        # the real controller's next decision (a broker's controlled shutdown) is refused the
        # same way; it resigns, and the controller elected next answers the stopping broker
        victim = next(b for b in cluster if b is not controller
                      and b.server.broker_id != state.leader)
        victim.stop()
        # an election after the resignation (the stopping broker may win it, then go)
        assert zk.controller_epoch()[0] >= epoch + 2
        wait_for(lambda: "stopping as controller" in caplog.text, timeout=30,
                 what="the deposed controller's warning")
        after, _ = zk.partition_state("fenced", 0)
        assert after.controller_epoch >= epoch + 2  # written by a new controller only
        assert after.leader == state.leader
        assert victim.server.broker_id not in after.isr
    finally:
        zk.close()


def markers(log: object) -> list[int]:
    """The coordinator epochs of the transaction markers in a log, in order."""
    data = log.read_batches(0)  # type: ignore[attr-defined]
    found = []
    for pos, header in iter_headers(data):
        if header.is_control:
            marker = read_marker(memoryview(data)[pos:pos + header.size])
            assert marker is not None
            found.append(marker.coordinator_epoch)
    return found


def commit_one(bootstrap: str, txn_id: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction", partition=0)
    producer.commit_transaction(30)


def test_markers_carry_the_transaction_coordinators_epoch(cluster: list[samsa.Broker]) -> None:
    """Kafka's coordinator epoch: the leader epoch of the transactional id's
    __transaction_state partition, so the markers of a replaced coordinator can be told."""
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "txn-data", 1, 3)
    commit_one(servers(cluster), "epoch-txn", "txn-data")
    state_partition = partition_for("epoch-txn", 50)
    coordinator = next(b for b in cluster if (p := b.server.replicas.partition(
        "__transaction_state", state_partition)) is not None and p.is_leader)
    first_epoch = coordinator.server.replicas.partition(
        "__transaction_state", state_partition).leader_epoch
    coordinator.stop()  # controlled shutdown: another replica leads the state partition
    rest = [b for b in cluster if b is not coordinator]
    commit_one(servers(rest), "epoch-txn", "txn-data")
    now = next(b for b in rest if b.server.replicas.partition(
        "__transaction_state", state_partition).is_leader)
    second_epoch = now.server.replicas.partition(
        "__transaction_state", state_partition).leader_epoch
    assert second_epoch > first_epoch
    leader = next(b for b in rest if b.server.replicas.partition("txn-data", 0).is_leader)
    assert markers(leader.server.replicas.partition("txn-data", 0).log) == [
        first_epoch, second_epoch]


def test_a_coordinator_that_stops_leading_lets_its_groups_go(
        cluster: list[samsa.Broker]) -> None:
    """Moving the group's __consumer_offsets partition away from its coordinator: the old
    coordinator forgets the group, the new one has it, and the consumer's commits go on."""
    admin = AdminClient({"bootstrap.servers": servers(cluster)})
    create(admin, "work", 1, 3)
    produce(servers(cluster), "work", [f"w{i}".encode() for i in range(20)])
    consumer = Consumer({"bootstrap.servers": servers(cluster), "group.id": "movers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["work"])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value())
        consumer.commit(asynchronous=False)
        index = partition_for("movers", 50)
        old = next(b for b in cluster if (p := b.server.replicas.partition(
            "__consumer_offsets", index)) is not None and p.is_leader)
        assert "movers" in old.server.group_coordinator.groups
        target = [b.server.broker_id for b in cluster if b is not old]
        client = KafkaAdminClient(bootstrap_servers=servers(cluster))
        try:
            client.alter_partition_reassignments(
                {TopicPartition("__consumer_offsets", index): target})
        finally:
            client.close()
        wait_for(lambda: "movers" not in old.server.group_coordinator.groups, timeout=30,
                 what="the old coordinator to let the group go")
        new = wait_for(lambda: next((b for b in cluster if (p := b.server.replicas.partition(
            "__consumer_offsets", index)) is not None and p.is_leader
            and "movers" in b.server.group_coordinator.groups), None),
            timeout=30, what="the new coordinator to load the group")
        assert new is not old
        # the consumer finds the new coordinator by itself; librdkafka may take a few tries
        # (it can loop on "nodename change" while connecting to it) and, if that outlasts its
        # session, rejoin and read again from the last commit: at least once, nothing lost
        deadline = time.monotonic() + 60
        done = False
        while not done and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append(msg.value())
            if set(seen) >= {f"w{i}".encode() for i in range(20)}:
                try:  # explicit: after a rejoin the consumer's position may be behind
                    consumer.commit(offsets=[CkTopicPartition("work", 0, 20)],
                                    asynchronous=False)
                    done = True
                except KafkaException as exc:
                    assert exc.args[0].retriable() or exc.args[0].code() in (
                        KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION,
                        KafkaError.REBALANCE_IN_PROGRESS), exc
        assert done, "no commit reached the new coordinator"
        assert set(seen) == {f"w{i}".encode() for i in range(20)}
        committed = consumer.committed([CkTopicPartition("work", 0)], timeout=15)
        assert committed[0].offset == 20
    finally:
        consumer.close()
