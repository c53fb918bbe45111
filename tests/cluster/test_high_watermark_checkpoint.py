"""A restarted leader exposes no more than was replicated: its high watermark comes back from
``replication-offset-checkpoint`` (at most its log end), not from its log end.

Two real ``samsa server`` processes on a real ZooKeeper (tests/cluster/processes.py). The
follower is frozen (SIGSTOP) while it stays in the ISR (a long lag time and session), so that
acks=1 records take the leader's log end past the high watermark; the leader stops cleanly
(no controlled shutdown: it must lead again) and starts again while the follower is still
frozen. Before the follower fetches, the leader's high watermark (ListOffsets latest, and what a
consumer's Fetch returns) must be what the follower had; once thawed, the follower fetches
the rest and the high watermark moves on to the log end.

Below the cluster, the hosted replicas alone: a replica opens at its checkpointed high
watermark clamped into its log, at its log start offset without one (a missing or corrupt
checkpoint), and a single node's partitions keep the log end as their high watermark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kafka_frames import FrameClient

from samsa.cluster.partition import Partition
from samsa.cluster.replicas import Replicas
from samsa.config import BrokerConfig
from samsa.records.batch import iter_headers
from samsa.records.record import RecordInput, encode_batch
from samsa.storage.manager import LogManager

from .processes import ProcessCluster, process_cluster

FETCH, LIST_OFFSETS = 1, 2
LATEST = -1
TOPIC = "hw"
LEADER, FOLLOWER = 1, 2
REPLICATED, UNREPLICATED = 10, 5

SETTINGS = {
    # the frozen follower stays registered and in the ISR for the whole test
    "zookeeper.session.timeout.ms": "30000",
    "replica.lag.time.max.ms": "60000",
    # the leader must still lead when it comes back: nothing moves its leadership away
    "controlled.shutdown.enable": "false",
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "2",
}


def produce(bootstrap: str, acks: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks,
                         "message.timeout.ms": 30000, "linger.ms": 0})
    failed: list[Any] = []
    for value in values:
        producer.produce(TOPIC, value, partition=0,
                         on_delivery=lambda err, _msg: err is not None and failed.append(err))
        producer.flush(30)  # one batch per record
    assert not failed, failed
    assert producer.flush(30) == 0


def latest_offset(client: FrameClient) -> tuple[int, int]:
    """(error code, offset) of ListOffsets latest: the high watermark."""
    response = client.request(LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": LATEST}]}]})
    p = response.topics[0].partitions[0]
    return p.error_code, p.offset


def consumer_fetch(client: FrameClient) -> tuple[int, int, int]:
    """(error code, high watermark, offset after the last record returned) of a consumer's
    Fetch from offset 0."""
    response = client.request(FETCH, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}]}]})
    p = response.responses[0].partitions[0]
    end = 0
    for _, header in iter_headers(memoryview(p.records or b"")):
        end = header.next_offset
    return p.error_code, p.high_watermark, end


@pytest.mark.timeout(150)
def test_a_restarted_leader_exposes_only_what_was_replicated(tmp_path: Path) -> None:
    with process_cluster(tmp_path, size=2, overrides=SETTINGS) as c:
        run(c)


def run(c: ProcessCluster) -> None:
    c.admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[LEADER, FOLLOWER]])])[
        TOPIC].result(30)
    c.wait_full_isr(TOPIC, [0])
    leader = c.broker(LEADER)
    produce(leader.address, "all", [b"r%d" % i for i in range(REPLICATED)])

    c.broker(FOLLOWER).pause()  # registered and in the ISR, fetching nothing
    produce(leader.address, "1", [b"u%d" % i for i in range(UNREPLICATED)])
    with FrameClient(leader.address, timeout=15) as client:
        assert latest_offset(client) == (0, REPLICATED), "acks=1 moved the high watermark"

    assert leader.proc is not None
    leader.proc.terminate()  # a clean stop, without moving the leadership
    assert leader.proc.wait(30) == 0, leader.log_tail()
    state = c.state(TOPIC, 0)
    assert state is not None and state.leader == LEADER and FOLLOWER in state.isr

    c.restart(LEADER)

    def answers() -> tuple[int, int] | None:
        with FrameClient(leader.address, timeout=15) as client:
            found = latest_offset(client)
        return found if found[0] == 0 else None

    _, high_watermark = c.wait(answers, f"broker {LEADER} to lead {TOPIC}-0 again",
                               topics=[TOPIC])
    assert FOLLOWER in c.registered(), "the frozen follower left: the test proves nothing"
    assert high_watermark == REPLICATED, (
        f"the restarted leader's high watermark is {high_watermark}: records the in-sync "
        f"follower never had ({REPLICATED}..{REPLICATED + UNREPLICATED - 1}) are exposed")
    with FrameClient(leader.address, timeout=15) as client:
        error, fetched_hw, fetched_end = consumer_fetch(client)
    assert (error, fetched_hw) == (0, REPLICATED)
    assert fetched_end <= REPLICATED, f"a consumer read up to offset {fetched_end}"

    c.broker(FOLLOWER).resume()  # it fetches the rest: now they are committed
    c.wait(lambda: answers() == (0, REPLICATED + UNREPLICATED),
           "the high watermark to reach the log end once the follower fetched it",
           topics=[TOPIC])


# --- the replicas alone -------------------------------------------------------------------------


def fill(partition: Partition, records: int) -> None:
    for i in range(records):
        partition.log.append(encode_batch([RecordInput(b"v%d" % i)]))


def open_replicas(path: Path) -> Replicas:
    manager = LogManager(BrokerConfig({"log.dirs": str(path)}))
    manager.startup()
    replicas = Replicas(manager)
    replicas.broker_id = LEADER
    return replicas


def test_replicas_open_at_their_checkpointed_high_watermark(tmp_path: Path) -> None:
    replicas = open_replicas(tmp_path)
    for index in range(3):
        partition = replicas.open_replica(TOPIC, index, (LEADER, FOLLOWER))
        assert partition.high_watermark == 0  # a new log: nothing committed yet
        fill(partition, 10)
        partition.make_leader((LEADER, FOLLOWER), {LEADER, FOLLOWER}, 1)
        partition.record_follower_fetch(FOLLOWER, 4 + index)  # committed: 4, 5, 6
    replicas.checkpoint_high_watermarks()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == (
        f"0\n3\n{TOPIC} 0 4\n{TOPIC} 1 5\n{TOPIC} 2 6\n")
    # after the checkpoint, the log start passes it (DeleteRecords, then the broker stops
    # before the next high watermark checkpoint; the log start offset's is written)
    last = replicas.partition(TOPIC, 2)
    assert last is not None
    last.record_follower_fetch(FOLLOWER, 10)
    last.log.delete_records_before(8)
    replicas.log_manager.shutdown()

    replicas = open_replicas(tmp_path)
    try:
        replicas.log_manager.get(TOPIC, 1).truncate_to(3)  # type: ignore[union-attr]
        opened = [replicas.open_replica(TOPIC, i, (LEADER, FOLLOWER)) for i in range(3)]
        # 4 as checkpointed; 5 cut to the log end 3; 8, the log start that passed it
        assert [p.high_watermark for p in opened] == [4, 3, 8]
        opened[0].make_leader((LEADER, FOLLOWER), {LEADER, FOLLOWER}, 2)
        assert opened[0].high_watermark == 4  # until the follower fetches
        opened[0].record_follower_fetch(FOLLOWER, 10)
        assert opened[0].high_watermark == 10
    finally:
        replicas.log_manager.shutdown()


def test_without_a_readable_checkpoint_a_replica_starts_at_its_log_start(
        tmp_path: Path) -> None:
    replicas = open_replicas(tmp_path)
    partition = replicas.open_replica(TOPIC, 0, (LEADER, FOLLOWER))
    fill(partition, 10)
    partition.log.delete_records_before(2)
    partition.make_leader((LEADER, FOLLOWER), {LEADER}, 1)  # alone in the ISR: all committed
    assert partition.high_watermark == 10
    replicas.checkpoint_high_watermarks()
    replicas.log_manager.shutdown()
    (tmp_path / "replication-offset-checkpoint").write_bytes(b"0\n1\nnot a checkpoint\n")

    replicas = open_replicas(tmp_path)
    try:
        partition = replicas.open_replica(TOPIC, 0, (LEADER, FOLLOWER))
        assert partition.high_watermark == 2
        # a single node's partition: everything its only replica appended is committed
        alone = Partition("single", 0, replicas.log_manager.get_or_create("single", 0),
                          broker_id=LEADER)
        fill(alone, 3)
        assert alone.high_watermark == 3
    finally:
        replicas.log_manager.shutdown()
