"""confluent-kafka's producer and consumer with a listener's client config, for the TLS and
SASL tests: what was produced must come back."""

from __future__ import annotations

import time
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
