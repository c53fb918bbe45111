"""A group's offsets are acknowledged only once its __consumer_offsets partition's ISR has
them: OffsetCommit (api 8) and TxnOffsetCommit (api 28) are appended as with acks=-1, and
answered COORDINATOR_NOT_AVAILABLE when offsets.commit.timeout.ms passes first (Kafka's
offsets.commit.required.acks=-1). An acknowledgement given before would be lost with the
coordinator: a new one, elected from the ISR, would not know the offsets, and the group (or the
transaction's consumer) would read that input again.

Three real ``samsa server`` processes on a real ZooKeeper (tests/cluster/processes.py). A
follower of the group's __consumer_offsets partition is frozen (SIGSTOP) while it stays
registered and in the ISR (a long session and lag time), so the leader cannot advance the
partition's high watermark: the commit must time out. Once thawed and caught up, the same
commit is acknowledged and OffsetFetch returns it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_frames import FrameClient

from samsa.coordinator.records import partition_for

from .processes import ProcessCluster, process_cluster, replica_records

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID = 8, 9, 10, 22
ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 25, 26, 28
NONE, COORDINATOR_NOT_AVAILABLE = 0, 15
GROUP_KEY, TXN_KEY = 0, 1

OFFSETS_TOPIC, TXN_TOPIC = "__consumer_offsets", "__transaction_state"
PARTITIONS = 3  # of each internal topic
COMMIT_TIMEOUT_MS = 2000
TOPIC = "input"

SETTINGS = {
    "offsets.commit.timeout.ms": str(COMMIT_TIMEOUT_MS),
    # the frozen follower stays registered and in the ISR for the whole test
    "zookeeper.session.timeout.ms": "30000",
    "replica.lag.time.max.ms": "60000",
    "offsets.topic.num.partitions": str(PARTITIONS),
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": str(PARTITIONS),
    "transaction.state.log.replication.factor": "3",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with process_cluster(tmp_path_factory.mktemp("offsets-durability"),
                         overrides=SETTINGS) as c:
        c.create_topic(TOPIC, 1, 3)
        yield c


def find_coordinator(cluster: ProcessCluster, key: str, key_type: int) -> int:
    """The coordinator's broker id, once FindCoordinator names one (the internal topic is
    created on the first lookup) and every partition of its topic has a full ISR."""
    topic = OFFSETS_TOPIC if key_type == GROUP_KEY else TXN_TOPIC

    def found(via: str) -> int | None:
        with FrameClient(via) as client:
            response = client.request(FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
        return response.node_id if response.error_code == NONE else None

    cluster.wait(lambda: found(cluster.bootstrap), f"a coordinator for {key!r}", timeout=60,
                 topics=[topic])
    cluster.wait_full_isr(topic, range(PARTITIONS), timeout=60)
    state = cluster.state(topic, partition_for(key, PARTITIONS))
    assert state is not None
    # the partition's leader coordinates once it has applied its leadership: asked itself,
    # it names itself (another broker may name it before its own ZooKeeper watch has fired,
    # and it would answer NOT_COORDINATOR until then)
    leader = cluster.broker(state.leader).address
    return int(cluster.wait(lambda: found(leader) == state.leader and state.leader,
                            f"{key!r}'s coordinator to be {topic}'s leader", topics=[topic]))


def follower_of(cluster: ProcessCluster, group: str) -> tuple[int, int, int]:
    """(the group's __consumer_offsets partition, its leader, a follower in its ISR)."""
    partition = partition_for(group, PARTITIONS)
    state = cluster.state(OFFSETS_TOPIC, partition)
    assert state is not None and state.leader > 0
    follower = next(b for b in state.isr if b != state.leader)
    return partition, state.leader, follower


def wait_caught_up(cluster: ProcessCluster, partition: int, leader: int, follower: int) -> None:
    """Until the thawed follower's copy of the partition has every record the leader's has."""
    def last(broker: int) -> int:
        records = replica_records(cluster.broker(broker), OFFSETS_TOPIC, partition)
        return records[-1][0] if records else -1

    cluster.wait(lambda: last(follower) == last(leader) >= 0,
                 f"broker {follower} to catch up on {OFFSETS_TOPIC}-{partition}",
                 topics=[OFFSETS_TOPIC])


def offset_commit(client: FrameClient, group: str, offset: int) -> int:
    """A standalone OffsetCommit v8 of TOPIC-0: its error code."""
    response = client.request(OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "retention_time": -1,
        "topics": [{"name": TOPIC, "partitions": [{
            "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
            "committed_metadata": ""}]}]})
    (code,) = [p.error_code for t in response.topics for p in t.partitions]
    return int(code)


def txn_offset_commit(client: FrameClient, txn: dict[str, Any], group: str, offset: int) -> int:
    """TxnOffsetCommit v3 of TOPIC-0 (no group generation): its error code."""
    response = client.request(TXN_OFFSET_COMMIT, 3, {
        **txn, "group_id": group, "generation_id": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [{
            "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
            "committed_metadata": "txn"}]}]})
    (code,) = [p.error_code for t in response.topics for p in t.partitions]
    return int(code)


def offset_fetch(client: FrameClient, group: str, *, stable: bool) -> tuple[int, int]:
    """OffsetFetch v8 of TOPIC-0: (the partition's error code, its committed offset)."""
    response = client.request(OFFSET_FETCH, 8, {
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                    "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        "require_stable": stable})
    (entry,) = response.groups
    assert entry.error_code == NONE, entry
    (p,) = [p for t in entry.topics for p in t.partitions]
    return int(p.error_code), int(p.committed_offset)


def timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


@pytest.mark.timeout(180)
def test_offset_commit_is_answered_once_the_isr_has_it(cluster: ProcessCluster) -> None:
    """With a follower of the group's partition frozen in the ISR, OffsetCommit times out
    with COORDINATOR_NOT_AVAILABLE after offsets.commit.timeout.ms; thawed and caught up, the
    retried commit is acknowledged and OffsetFetch returns it."""
    group = "durable-commit"
    coordinator = find_coordinator(cluster, group, GROUP_KEY)
    partition, leader, follower = follower_of(cluster, group)
    assert coordinator == leader
    with FrameClient(cluster.broker(coordinator).address, timeout=30) as client:
        # with the whole ISR running, a commit is acknowledged
        assert offset_commit(client, group, 3) == NONE
        assert offset_fetch(client, group, stable=False) == (NONE, 3)
        cluster.broker(follower).pause()
        try:
            code, took = timed(lambda: offset_commit(client, group, 7))
            assert code == COORDINATOR_NOT_AVAILABLE, (
                f"OffsetCommit answered {code} while broker {follower}, in the ISR of"
                f" {OFFSETS_TOPIC}-{partition}, was frozen")
            assert took >= COMMIT_TIMEOUT_MS / 1000 * 0.9, took
            state = cluster.state(OFFSETS_TOPIC, partition)
            assert state is not None and follower in state.isr and state.leader == leader, (
                f"the frozen follower must have stayed in the ISR: {state}")
        finally:
            cluster.broker(follower).resume()
        wait_caught_up(cluster, partition, leader, follower)
        assert offset_commit(client, group, 7) == NONE
        assert offset_fetch(client, group, stable=False) == (NONE, 7)


@pytest.mark.timeout(180)
def test_txn_offset_commit_is_answered_once_the_isr_has_it(cluster: ProcessCluster) -> None:
    """The same for a transaction's offsets: TxnOffsetCommit times out with
    COORDINATOR_NOT_AVAILABLE while a follower of the group's partition is frozen in its ISR
    (the producer must not end the transaction on offsets a new coordinator would not know);
    thawed and caught up, the retry is acknowledged, the transaction commits, and OffsetFetch
    with require_stable returns the offset."""
    group, txn_id = "durable-txn-commit", "durable-txn"
    txn_coordinator = find_coordinator(cluster, txn_id, TXN_KEY)
    coordinator = find_coordinator(cluster, group, GROUP_KEY)
    partition, leader, follower = follower_of(cluster, group)
    assert coordinator == leader
    # the transaction is set up before the freeze (the frozen broker may be a replica of
    # its __transaction_state partition too)
    with FrameClient(cluster.broker(txn_coordinator).address, timeout=30) as txns:
        def init() -> Any:
            response = txns.request(INIT_PRODUCER_ID, 4, {
                "transactional_id": txn_id, "transaction_timeout": 120_000,
                "producer_id": -1, "producer_epoch": -1})
            return response if response.error_code == NONE else None

        produced = cluster.wait(init, f"InitProducerId of {txn_id!r}", topics=[TXN_TOPIC])
        txn = {"transactional_id": txn_id, "producer_id": produced.producer_id,
               "producer_epoch": produced.producer_epoch}
        added = txns.request(ADD_OFFSETS_TO_TXN, 3, {**txn, "group_id": group})
        assert added.error_code == NONE, added

        with FrameClient(cluster.broker(coordinator).address, timeout=30) as client:
            cluster.broker(follower).pause()
            try:
                code, took = timed(lambda: txn_offset_commit(client, txn, group, 11))
                assert code == COORDINATOR_NOT_AVAILABLE, (
                    f"TxnOffsetCommit answered {code} while broker {follower}, in the ISR"
                    f" of {OFFSETS_TOPIC}-{partition}, was frozen")
                assert took >= COMMIT_TIMEOUT_MS / 1000 * 0.9, took
                state = cluster.state(OFFSETS_TOPIC, partition)
                assert state is not None and follower in state.isr and state.leader == leader, (
                    f"the frozen follower must have stayed in the ISR: {state}")
            finally:
                cluster.broker(follower).resume()
            wait_caught_up(cluster, partition, leader, follower)
            assert txn_offset_commit(client, txn, group, 11) == NONE

            ended = txns.request(END_TXN, 3, {**txn, "committed": True})
            assert ended.error_code == NONE, ended
            # the commit marker reaches the group's partition after EndTxn is answered:
            # until then require_stable answers UNSTABLE_OFFSET_COMMIT
            cluster.wait(lambda: offset_fetch(client, group, stable=True) == (NONE, 11),
                         f"{group!r}'s transactional offset to be stable",
                         topics=[OFFSETS_TOPIC])
