"""The leader's side of replication, over the wire: a partition made leader of replicas {1, 2}
on broker 1, with a follower speaking the protocol itself (Fetch with replica_id 2). The high
watermark is the ISR's smallest log end; consumers never read past it; acks=all waits for the
ISR; a follower that stops fetching leaves the ISR after replica.lag.time.max.ms and rejoins
once caught up; min.insync.replicas refuses acks=all below it; a non-leader refuses clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_frames import FrameClient
from kio.schema.errors import ErrorCode
from waiting import wait_for

import samsa
from samsa.cluster.partition import Partition
from samsa.records.record import RecordInput, decode_records, encode_batch

pytestmark = pytest.mark.timeout(60)

PRODUCE, FETCH = 0, 1
TOPIC = "replicated"
LEADER, FOLLOWER = 1, 2


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "b", config={"broker.id": LEADER,
                                              "replica.lag.time.max.ms": 1500}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"min.insync.replicas": "2"})])[
            TOPIC].result(15)
        yield b


def on_loop(broker: samsa.Broker, fn: Any) -> Any:
    async def run() -> Any:
        return fn()

    assert broker._loop is not None
    return asyncio.run_coroutine_threadsafe(run(), broker._loop).result(10)


def partition(broker: samsa.Broker) -> Partition:
    p = broker.server.replicas.partition(TOPIC, 0)
    assert p is not None
    return p


def lead(broker: samsa.Broker, isr: set[int]) -> None:
    on_loop(broker, lambda: partition(broker).make_leader((LEADER, FOLLOWER), isr, 1))


class Wire(FrameClient):
    def produce(self, value: bytes, acks: int = -1, timeout_ms: int = 5000) -> Any:
        batch = encode_batch([RecordInput(value)], timestamp=int(time.time() * 1000))
        response = self.request(PRODUCE, 9, {
            "transactional_id": None, "acks": acks, "timeout": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]},
            timeout=timeout_ms / 1000 + 10)
        return response.responses[0].partition_responses[0]

    def fetch(self, offset: int, replica_id: int = -1, max_wait_ms: int = 0) -> Any:
        response = self.request(FETCH, 12, {
            "replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        return response.responses[0].partitions[0]


def values(records: Any) -> list[bytes]:
    return [r.value for r in decode_records(bytes(records))] if records else []


@pytest.fixture
def wire(broker: samsa.Broker) -> Iterator[Wire]:
    with Wire(("127.0.0.1", broker.port)) as w:
        yield w


def test_acks_all_waits_for_the_follower_and_consumers_stop_at_the_high_watermark(
    broker: samsa.Broker, wire: Wire
) -> None:
    lead(broker, {LEADER, FOLLOWER})
    with Wire(("127.0.0.1", broker.port)) as producer:
        sent = producer.send(PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records":
                encode_batch([RecordInput(b"v0")], timestamp=int(time.time() * 1000))}]}]})
        wait_for(lambda: partition(broker).log.log_end_offset == 1, what="the append")
        with pytest.raises(TimeoutError):
            producer.recv_frame(timeout=0.5)  # not acknowledged: the follower has not got it
        consumer_view = wire.fetch(0)
        assert consumer_view.high_watermark == 0 and values(consumer_view.records) == []
        replica_view = wire.fetch(0, replica_id=FOLLOWER)  # the follower reads past the HW
        assert values(replica_view.records) == [b"v0"]
        assert replica_view.high_watermark == 0
        caught_up = wire.fetch(1, replica_id=FOLLOWER)  # its log now ends at 1
        assert caught_up.high_watermark == 1
        corr, response = producer.recv(PRODUCE, 9, timeout=10)
        assert corr == sent
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert values(wire.fetch(0).records) == [b"v0"]


def test_lagging_follower_leaves_the_isr_and_rejoins(broker: samsa.Broker, wire: Wire) -> None:
    lead(broker, {LEADER, FOLLOWER})
    assert wire.produce(b"a", acks=1).error_code == ErrorCode.none
    # the follower does not fetch: after replica.lag.time.max.ms it is out of the ISR
    wait_for(lambda: partition(broker).isr == {LEADER}, timeout=10,
             what="the ISR to shrink to the leader")
    assert partition(broker).high_watermark == 1  # the ISR is the leader alone now
    refused = wire.produce(b"b")  # acks=all with min.insync.replicas=2
    assert refused.error_code == ErrorCode.not_enough_replicas
    assert wire.produce(b"c", acks=1).error_code == ErrorCode.none
    # it catches up: fetching from the high watermark on brings it back
    wire.fetch(0, replica_id=FOLLOWER)
    wire.fetch(partition(broker).log.log_end_offset, replica_id=FOLLOWER)
    assert partition(broker).isr == {LEADER, FOLLOWER}
    assert wire.produce(b"d", acks=1).error_code == ErrorCode.none


def test_a_follower_leaving_the_isr_counts_until_the_store_has_it(
    broker: samsa.Broker, wire: Wire
) -> None:
    """With a store for the ISR (ZooKeeper in cluster mode), a lagging follower still holds
    the high watermark back until the smaller ISR is written: a leader deposed meanwhile (its
    write refused) never acknowledges what only it has."""
    asked: list[set[int]] = []

    def with_store() -> None:
        p = partition(broker)
        p.make_leader((LEADER, FOLLOWER), {LEADER, FOLLOWER}, 1)
        p.on_isr_change = lambda part: asked.append(part.wanted_isr)

    on_loop(broker, with_store)
    with Wire(("127.0.0.1", broker.port)) as producer:
        sent = producer.send(PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records":
                encode_batch([RecordInput(b"v0")], timestamp=int(time.time() * 1000))}]}]})
        wait_for(lambda: asked == [{LEADER}], timeout=10, what="the leader to ask for {1}")
        assert partition(broker).isr == {LEADER, FOLLOWER}
        assert partition(broker).high_watermark == 0
        with pytest.raises(TimeoutError):
            producer.recv_frame(timeout=0.5)  # not acknowledged while the write is pending
        on_loop(broker, lambda: partition(broker).isr_written({LEADER}))
        corr, response = producer.recv(PRODUCE, 9, timeout=10)
        assert corr == sent  # answered now, below the topic's min.insync.replicas=2
        assert response.responses[0].partition_responses[0].error_code == (
            ErrorCode.not_enough_replicas_after_append)
    assert partition(broker).isr == {LEADER} and partition(broker).high_watermark == 1


def test_a_new_leader_epoch_answers_fetches_waiting_with_the_old_one(
    broker: samsa.Broker, wire: Wire
) -> None:
    """The leader takes a new epoch (the controller moved the ISR, a reassignment): a fetch
    long-polling with the old epoch is answered FENCED_LEADER_EPOCH at once, as Kafka's
    DelayedFetch completes for a fenced epoch, not when its max wait ends."""
    lead(broker, {LEADER, FOLLOWER})
    wire.send(FETCH, 12, {
        "replica_id": FOLLOWER, "max_wait": 10000, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "partitions": [{
            "partition": 0, "current_leader_epoch": 1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    with pytest.raises(TimeoutError):
        wire.recv_frame(timeout=0.5)  # nothing to read: it waits
    started = time.monotonic()
    on_loop(broker, lambda: partition(broker).make_leader((LEADER, FOLLOWER), {LEADER}, 2))
    _, response = wire.recv(FETCH, 12, timeout=15)
    took = time.monotonic() - started
    assert took < 5, f"answered {took:.1f} s after the new epoch (its max wait is 10 s)"
    assert response.responses[0].partitions[0].error_code == ErrorCode.fenced_leader_epoch


def test_acks_all_times_out_when_the_isr_does_not_follow(
    broker: samsa.Broker, wire: Wire
) -> None:
    lead(broker, {LEADER, FOLLOWER})
    slow = wire.produce(b"x", acks=-1, timeout_ms=300)
    assert slow.error_code == ErrorCode.request_timed_out


def test_a_follower_refuses_clients(broker: samsa.Broker, wire: Wire) -> None:
    on_loop(broker, lambda: partition(broker).make_follower(FOLLOWER, (FOLLOWER, LEADER), 2))
    assert wire.produce(b"x", acks=1).error_code == ErrorCode.not_leader_or_follower
    assert wire.fetch(0).error_code == ErrorCode.not_leader_or_follower


def test_list_offsets_for_a_follower_is_the_log_end(broker: samsa.Broker, wire: Wire) -> None:
    """A follower asking for LATEST (to handle OFFSET_OUT_OF_RANGE) gets the log end offset;
    a consumer gets the high watermark."""
    lead(broker, {LEADER, FOLLOWER})
    assert wire.produce(b"a", acks=1).error_code == ErrorCode.none

    def latest(replica_id: int) -> int:
        response = wire.request(2, 5, {"replica_id": replica_id, "isolation_level": 0,
                                       "topics": [{"name": TOPIC, "partitions": [
                                           {"partition_index": 0, "timestamp": -1,
                                            "current_leader_epoch": -1}]}]})
        return response.topics[0].partitions[0].offset

    assert latest(-1) == 0
    assert latest(FOLLOWER) == 1


def test_a_follower_takes_the_leaders_batches_whatever_their_size(tmp_path: Path) -> None:
    """max.message.bytes applies to producers, not to batches copied from the leader (it may
    have been lowered after they were written)."""
    from samsa.config import LogConfig
    from samsa.storage.log import Log

    leader = Log(tmp_path / "leader", LogConfig())
    leader.append(encode_batch([RecordInput(b"x" * 5000)], timestamp=int(time.time() * 1000)))
    follower = Log(tmp_path / "follower", LogConfig(max_message_bytes=1000))
    follower.append(leader.read_batches(0), assign_offsets=False)
    assert follower.read_batches(0) == leader.read_batches(0)
