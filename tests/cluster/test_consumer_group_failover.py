"""A consumer group (KIP-848) survives its coordinator: the group's records in its
__consumer_offsets partition (epochs, members, target and current assignments) are replayed
by the partition's next leader, which goes on where the killed one stopped, with the same
epochs, assignments and committed offsets; then librdkafka members keep consuming through a
second coordinator failover.

Three real ``samsa server`` processes on a real ZooKeeper (tests/cluster/processes.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka_frames import FrameClient

from samsa.coordinator.records import partition_for

from .processes import ContinuousProducer, ProcessCluster, new_leaders, process_cluster

pytestmark = pytest.mark.timeout(240)

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
NONE = 0
OFFSETS_TOPIC = "__consumer_offsets"
PARTITIONS = 3  # of __consumer_offsets
TOPIC = "input"
TOPIC_PARTITIONS = 4

SETTINGS = {
    "offsets.topic.num.partitions": str(PARTITIONS),
    "offsets.topic.replication.factor": "3",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with process_cluster(tmp_path_factory.mktemp("consumer-groups"), overrides=SETTINGS) as c:
        c.create_topic(TOPIC, TOPIC_PARTITIONS, 3)
        yield c


def coordinator(cluster: ProcessCluster, group: str) -> int:
    """The group's coordinator: its __consumer_offsets partition's leader, once FindCoordinator
    (asked of a running broker) names it (it has loaded the partition by then)."""
    def found() -> int | None:
        live = next(b for b in cluster.brokers.values() if b.running)
        with FrameClient(live.address) as client:
            response = client.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if response.error_code != NONE:
            return None
        state = cluster.state(OFFSETS_TOPIC, partition_for(group, PARTITIONS))
        return response.node_id if state is not None and state.leader == response.node_id \
            else None

    return int(cluster.wait(found, f"a coordinator for {group!r}", timeout=60,
                            topics=[OFFSETS_TOPIC]))


def heartbeat(client: FrameClient, group: str, member: str, epoch: int,
              owned: list[dict[str, Any]] | None = None) -> Any:
    joining = epoch == 0
    return client.request(CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 30000 if joining else -1,
        "subscribed_topic_names": [TOPIC] if joining else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if joining else owned,
    })


def parts(response: Any) -> list[dict[str, Any]]:
    return [{"topic_id": tp.topic_id, "partitions": sorted(tp.partitions)}
            for tp in response.assignment.topic_partitions]


def describe(client: FrameClient, group: str) -> Any:
    (described,) = client.request(CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": [group], "include_authorized_operations": False}).groups
    return described


def test_a_new_coordinator_goes_on_with_the_group(cluster: ProcessCluster) -> None:
    group = f"failover-{uuid.uuid4().hex[:6]}"
    first = coordinator(cluster, group)
    with FrameClient(cluster.broker(first).address) as c:
        a = heartbeat(c, group, "a", 0)
        b = heartbeat(c, group, "b", 0)
        assert (a.error_code, b.error_code) == (NONE, NONE)
        # a revokes what moves to b; then both are on the group's epoch, Stable
        revoke = heartbeat(c, group, "a", a.member_epoch, parts(a))
        a_parts = parts(revoke)
        done = heartbeat(c, group, "a", revoke.member_epoch, a_parts)
        b_done = heartbeat(c, group, "b", b.member_epoch, [])
        b_parts = parts(b_done)
        epoch = done.member_epoch
        assert b_done.member_epoch == epoch
        assert sorted(a_parts[0]["partitions"] + b_parts[0]["partitions"]) == list(
            range(TOPIC_PARTITIONS))
        before = describe(c, group)
        assert before.group_state == "Stable"
        committed = c.request(OFFSET_COMMIT, 9, {
            "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": "a",
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [{
                "partition_index": a_parts[0]["partitions"][0], "committed_offset": 42,
                "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert committed.topics[0].partitions[0].error_code == NONE

    cluster.kill(first)
    cluster.wait(new_leaders(cluster, OFFSETS_TOPIC, [partition_for(group, PARTITIONS)], first),
                 "a new leader of the group's partition", timeout=60, topics=[OFFSETS_TOPIC])
    second = coordinator(cluster, group)
    assert second != first
    with FrameClient(cluster.broker(second).address) as c:
        after = describe(c, group)
        assert (after.error_code, after.group_state, after.group_epoch,
                after.assignment_epoch) == (NONE, "Stable", before.group_epoch,
                                            before.assignment_epoch)
        assert {(m.member_id, m.member_epoch, m.assignment) for m in after.members} == {
            (m.member_id, m.member_epoch, m.assignment) for m in before.members}
        # the members heartbeat on, where they were: nothing moves
        again = heartbeat(c, group, "a", epoch, a_parts)
        assert (again.error_code, again.member_epoch, again.assignment) == (NONE, epoch, None)
        assert heartbeat(c, group, "b", epoch, b_parts).error_code == NONE
        (fetched,) = c.request(OFFSET_FETCH, 9, {"groups": [{
            "group_id": group, "member_id": "a", "member_epoch": epoch,
            "topics": [{"name": TOPIC, "partition_indexes": a_parts[0]["partitions"][:1]}]}],
            "require_stable": False}).groups
        assert fetched.error_code == NONE
        assert fetched.topics[0].partitions[0].committed_offset == 42
        # a leaves: the new coordinator bumps the epoch it replayed
        left = heartbeat(c, group, "a", -1)
        assert left.error_code == NONE
        assert describe(c, group).group_epoch == before.group_epoch + 1
    cluster.restart(first)


def test_consumers_read_everything_through_a_coordinator_failover(
        cluster: ProcessCluster) -> None:
    group = f"readers-{uuid.uuid4().hex[:6]}"
    producer = ContinuousProducer(cluster.bootstrap, TOPIC, TOPIC_PARTITIONS, rate_per_s=100)
    consumers = [Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                           "group.protocol": "consumer", "auto.offset.reset": "earliest",
                           "enable.auto.commit": True, "auto.commit.interval.ms": 200})
                 for _ in range(2)]
    seen: set[tuple[int, int]] = set()

    def poll(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for consumer in consumers:
                msg = consumer.poll(0.05)
                if msg is not None and msg.error() is None:
                    seen.add((msg.partition(), msg.offset()))

    stopped = False
    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        producer.start()
        poll(5)
        victim = coordinator(cluster, group)
        cluster.kill(victim)
        poll(10)
        producer.stop()
        stopped = True
        acked = {(p, o) for p, o, _ in producer.acked}
        assert acked, "nothing was produced"
        cluster.wait(lambda: (poll(1), acked <= seen)[1],
                     "the consumers to read every acknowledged record", timeout=90,
                     topics=[TOPIC, OFFSETS_TOPIC])
        survivor = coordinator(cluster, group)
        assert survivor != victim
        with FrameClient(cluster.broker(survivor).address) as c:
            described = describe(c, group)
        assert described.error_code == NONE and len(described.members) == 2
    finally:
        for consumer in consumers:
            consumer.close()
        if not stopped:
            producer.stop()
    cluster.restart(victim)
