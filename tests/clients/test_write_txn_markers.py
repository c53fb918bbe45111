"""WriteTxnMarkers (27): what kafka-transactions' ``abort`` sends to end a hanging transaction
on a partition. The marker is written, the last stable offset moves past the transaction and a
read_committed consumer skips its records; a fenced epoch and an unknown partition get Kafka's
errors."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode

import samsa

from .conftest import RawClient

pytestmark = pytest.mark.timeout(60)

WRITE_TXN_MARKERS, LIST_OFFSETS = 27, 2


def lso(client: RawClient, topic: str) -> int:
    response = client.request(LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1,
                                                    "current_leader_epoch": -1}]}],
    })
    return response.topics[0].partitions[0].offset


def read_committed(broker: samsa.Broker, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rc",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                return values
            values.append(msg.value())
    finally:
        consumer.close()
    raise AssertionError("no end of partition within 15 s")


def test_abort_marker_ends_a_hanging_transaction(broker: samsa.Broker, raw) -> None:
    version = 1  # v0 is gone from Kafka's schemas (KIP-896) and from kio
    topic = "hanging"
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, b"before")
    plain.flush(10)
    txn = Producer({"bootstrap.servers": broker.bootstrap_servers,
                    "transactional.id": f"hang-{version}"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce(topic, b"hanging", partition=0)
    txn.flush(10)
    client = raw()
    assert lso(client, topic) == 1
    described = broker.server.replicas.partition(topic, 0).log.producer_state.ongoing
    ((pid, first),) = described.items()
    assert first == 1
    epoch = broker.server.replicas.partition(topic, 0).log.producer_state.entry(pid).epoch
    response = client.request(WRITE_TXN_MARKERS, version, {"markers": [
        {"producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
         "coordinator_epoch": 0,
         "topics": [{"name": topic, "partition_indexes": [0]},
                    {"name": "no-such-topic", "partition_indexes": [0]}]},
    ]})
    (result,) = response.markers
    codes = {(t.name, p.partition_index): p.error_code for t in result.topics
             for p in t.partitions}
    assert codes == {(topic, 0): ErrorCode.none,
                     ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
    assert lso(client, topic) == 3  # past the record and the marker
    assert read_committed(broker, topic) == [b"before"]
    # a marker of an older epoch than the partition has seen is refused
    stale = client.request(WRITE_TXN_MARKERS, version, {"markers": [
        {"producer_id": pid, "producer_epoch": epoch - 1, "transaction_result": True,
         "coordinator_epoch": 0, "topics": [{"name": topic, "partition_indexes": [0]}]},
    ]})
    assert stale.markers[0].topics[0].partitions[0].error_code == (
        ErrorCode.invalid_producer_epoch
    )
