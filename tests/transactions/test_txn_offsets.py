"""Offsets committed inside transactions against the group's other offsets: a later plain
commit wins over an older transactional one (also after a restart), and an empty group whose
only offsets are pending in a transaction is not expired under them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import samsa

pytestmark = pytest.mark.timeout(90)


def setup_topic(broker: samsa.Broker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)


def assigned_consumer(broker: samsa.Broker, group: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    return consumer


def committed(broker: samsa.Broker, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed"})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return tp.offset
    finally:
        consumer.close()


def test_later_plain_commit_wins_over_an_older_transactional_one(tmp_path: Path) -> None:
    """TxnOffsetCommit at 10, then OffsetCommit at 20, then the transaction commits: the
    group's offset is 20, as in Kafka, and stays 20 after a restart."""
    with samsa.Broker(tmp_path / "d") as broker:
        setup_topic(broker, "in")
        consumer = assigned_consumer(broker, "g-order", "in")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": "order-txn"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 10)],
                                             consumer.consumer_group_metadata(), 15)
        consumer.commit(offsets=[TopicPartition("in", 0, 20)], asynchronous=False)
        producer.commit_transaction(15)
        consumer.close()
        assert committed(broker, "g-order", "in") == 20
    with samsa.Broker(tmp_path / "d") as broker:
        assert committed(broker, "g-order", "in") == 20


def test_pending_offsets_keep_an_empty_group_alive(tmp_path: Path) -> None:
    """The offset expiry timer must not delete a group whose only offsets are pending in an
    open transaction: they are its committed offsets once the transaction commits."""
    with samsa.Broker(tmp_path / "d", offsets_retention_check_interval_ms=100) as broker:
        setup_topic(broker, "in2")
        consumer = assigned_consumer(broker, "g-pending", "in2")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": "pending-txn"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("in2", 0, 42)],
                                             consumer.consumer_group_metadata(), 15)
        time.sleep(1.0)  # ten expiry checks
        producer.commit_transaction(15)
        consumer.close()
        assert committed(broker, "g-pending", "in2") == 42
