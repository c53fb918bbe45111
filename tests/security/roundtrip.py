"""confluent-kafka's producer and consumer with a listener's client config, for the TLS and
SASL tests: what was produced must come back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer

DEADLINE = 20.0


def produce(config: dict[str, Any], topic: str, values: list[bytes]) -> None:
    producer = Producer({**config, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(DEADLINE) == 0


def consume(config: dict[str, Any], topic: str, count: int, group: str | None = None
            ) -> list[bytes]:
    """Up to ``count`` values of ``topic`` from its start, in a group of its own by default,
    within DEADLINE seconds."""
    consumer = Consumer({**config, "group.id": group or f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


ACKED, IN_TXN = 300, 30


def acked_and_transactional(producer: dict[str, Any], consumer: dict[str, Any], txn_id: str,
                            wait: Callable[[Callable[[], bool], str], None]) -> None:
    """Through a three-partition topic ``replicated`` (min.insync.replicas=3, one partition
    led by each broker): acks=all writes, answered only once both followers fetched them, and
    a transaction over the three partitions, whose markers go to the other leaders; a
    read_committed consumer (``consumer``) reads every one back. ``wait(predicate, what)``
    waits with the caller's deadline and details."""
    acked = Producer({**producer, "acks": "all", "linger.ms": 5})
    for i in range(ACKED):
        acked.produce("replicated", b"acked-%d" % i, partition=i % 3)
    assert acked.flush(DEADLINE) == 0
    txn = Producer({**producer, "transactional.id": txn_id})
    txn.init_transactions(DEADLINE)
    txn.begin_transaction()
    for i in range(IN_TXN):
        txn.produce("replicated", b"txn-%d" % i, partition=i % 3)
    txn.commit_transaction(DEADLINE)

    reader = Consumer({**consumer, "group.id": "reader", "auto.offset.reset": "earliest",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    reader.subscribe(["replicated"])
    got: set[bytes] = set()

    def read_all() -> bool:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            got.add(message.value())
        return len(got) == ACKED + IN_TXN

    try:
        wait(read_all, "every record, the committed transaction's included")
    finally:
        reader.close()
    assert got == ({b"acked-%d" % i for i in range(ACKED)}
                   | {b"txn-%d" % i for i in range(IN_TXN)})
