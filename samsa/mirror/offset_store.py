"""Where a flow's progress lives: ``mm2-offsets.<source>.internal`` in the target cluster.

Why a topic in the target and not the source group's committed offsets: the mirror's progress
must survive the loss of the source cluster, and under ``exactly.once.support = enabled`` it
has to be written in the same transaction as the copied records, which only a topic of the
target cluster can be (a Kafka broker refuses a transactional offset commit for partitions of
topics it does not have, and the source topics are not in the target). It is also where
Kafka's MM2 keeps it: Connect's offsets topic of the target herder, with Connect's JSON key
``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]`` and value
``{"offset":N}``, N being the source offset of the last record copied.

The topic is compacted with one partition; readers read it to its end with read_committed, so
an aborted transaction's progress is never seen.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from samsa.tools.mirror_client import high_watermark

CONNECTOR_NAME = "MirrorSourceConnector"


def offsets_topic(source_alias: str) -> str:
    return f"mm2-offsets.{source_alias}.internal"


def offset_key(source_alias: str, topic: str, partition: int) -> bytes:
    return json.dumps([CONNECTOR_NAME, {"cluster": source_alias, "partition": partition,
                                        "topic": topic}], separators=(",", ":")).encode()


def offset_value(offset: int) -> bytes:
    return json.dumps({"offset": offset}, separators=(",", ":")).encode()


def produce_offsets(producer: Producer, source_alias: str,
                    offsets: dict[tuple[str, int], int]) -> None:
    """Queue one progress record per source partition: ``offset`` is the last copied."""
    topic = offsets_topic(source_alias)
    for (t, p), offset in offsets.items():
        producer.produce(topic, offset_value(offset), offset_key(source_alias, t, p), partition=0)


def read_offsets(consumer_config: dict[str, Any], source_alias: str,
                 timeout_s: float = 30.0) -> dict[tuple[str, int], int]:
    """The latest stored progress of every source partition of ``source_alias``."""
    topic = offsets_topic(source_alias)
    consumer = Consumer({**consumer_config, "group.id": f"mm2-offsets-reader.{source_alias}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    offsets: dict[tuple[str, int], int] = {}
    try:
        high = high_watermark(consumer, TopicPartition(topic, 0), timeout_s)
        if high <= 0:
            return offsets
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end in {timeout_s:g} s")
            msgs: list[Any] = consumer.consume(1000, timeout=0.5)  # records: no None getters
            done = False
            for msg in msgs:
                if msg.error():
                    # partition EOF: the last stable offset, read_committed's end
                    done = done or msg.error().code() == KafkaError._PARTITION_EOF
                    continue
                try:
                    key = json.loads(msg.key())
                    cluster, t, p = key[1]["cluster"], key[1]["topic"], key[1]["partition"]
                except (ValueError, TypeError, KeyError, IndexError):
                    continue
                if cluster != source_alias or key[0] != CONNECTOR_NAME:
                    continue
                if msg.value() is None:
                    offsets.pop((t, p), None)
                else:
                    offsets[(t, p)] = int(json.loads(msg.value())["offset"])
            if done:
                return offsets
    finally:
        consumer.close()
