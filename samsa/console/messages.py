"""Reading messages for the console: a short-lived consumer per read, assigned to the
partitions at the offsets asked for (no group is joined, nothing is committed), stopped at
the limit, at the end of each partition or at the deadline, whichever comes first."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    TopicPartition,
)

from samsa.console.model import ConsoleError, Message
from samsa.tools.common import describe_error

STARTS = ("beginning", "end", "offset", "timestamp")
TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
# Never joined nor committed to: librdkafka wants a group.id for any consumer.
READER_GROUP = "samsa-console-reader"
# How many messages one consume() call hands back at most.
BATCH = 500


class Reader:
    """One read: builds its consumer, reads, closes it."""

    def __init__(self, config: Callable[[Mapping[str, Any]], dict[str, Any]],
                 timeout: float) -> None:
        self._config = config
        self.timeout = timeout

    def _consumer(self) -> Consumer:
        return Consumer(self._config({
            "group.id": READER_GROUP, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            # read what is shown: small fetches, a small local queue
            "fetch.max.bytes": 4 * 1024 * 1024, "max.partition.fetch.bytes": 1024 * 1024,
            "queued.max.messages.kbytes": 8 * 1024,
        }))

    def read(self, topic: str, ranges: Mapping[int, tuple[int, int]], limit: int
             ) -> list[Message]:
        """Up to ``limit`` messages of each partition, from its first offset until its stop
        offset (exclusive) or its end."""
        if not ranges:
            return []
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(topic, p, first) for p, (first, _) in
                             sorted(ranges.items())])
            found: list[Message] = []
            counts = dict.fromkeys(ranges, 0)
            open_ = set(ranges)
            deadline = time.monotonic() + self.timeout
            while open_:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if not found:
                        raise ConsoleError("REQUEST_TIMED_OUT: no messages read within "
                                           f"{self.timeout:g} s")
                    break
                for msg in _next(consumer, BATCH, min(remaining, 0.5)):
                    partition, offset = _int(msg.partition()), _int(msg.offset())
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            open_.discard(partition)
                            continue
                        raise ConsoleError(describe_error(error))
                    if partition not in open_:
                        continue
                    stop = ranges[partition][1]
                    if offset >= stop:
                        open_.discard(partition)
                        continue
                    found.append(to_message(msg))
                    counts[partition] += 1
                    if counts[partition] >= limit or offset + 1 >= stop:
                        open_.discard(partition)
            return found
        finally:
            consumer.close()

    def tail(self, topic: str, positions: Mapping[int, int], limit: int, wait_s: float
             ) -> list[Message]:
        """The messages from each partition's position: what is there now, else what
        arrives within ``wait_s``; at most ``limit``."""
        if not positions:
            return []
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(topic, p, o) for p, o in sorted(positions.items())])
            found: list[Message] = []
            at_end: set[int] = set()
            deadline = time.monotonic() + wait_s
            # after the deadline: the reads already under way may still end (what is there)
            hard_deadline = deadline + self.timeout
            while len(found) < limit:
                now = time.monotonic()
                if now >= hard_deadline or (now >= deadline and (found or at_end)):
                    break
                if found and at_end >= set(positions):
                    break
                for msg in _next(consumer, min(BATCH, limit - len(found)),
                                 max(0.01, min(deadline - now, 0.2))):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            at_end.add(_int(msg.partition()))
                            continue
                        raise ConsoleError(describe_error(error))
                    at_end.discard(_int(msg.partition()))
                    found.append(to_message(msg))
            return found
        finally:
            consumer.close()


def _next(consumer: Consumer, most: int, wait_s: float) -> list[Any]:
    """What is queued now (up to ``most``), else the first message within ``wait_s``:
    ``consume`` with a timeout waits for a whole batch, which a short read never fills."""
    batch = consumer.consume(most, timeout=0)
    if batch:
        return batch
    msg = consumer.poll(wait_s)
    return [] if msg is None else [msg]


def to_message(msg: Any) -> Message:
    kind, timestamp = msg.timestamp()
    headers = [(name, value) for name, value in (msg.headers() or [])]
    return Message(msg.topic(), msg.partition(), msg.offset(), timestamp,
                   TIMESTAMP_TYPES.get(kind, "NoTimestampType"), msg.key(), msg.value(),
                   headers)


def _int(value: int | None) -> int:
    return -1 if value is None else value
