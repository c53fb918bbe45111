"""What the pipeline tests compare: the events a broker holds (read without Spark) and the
rows a loaded table holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from samsa.pipeline.events import ACTIVITY_SCHEMA_ID, Topics, decode

TIMEOUT_S = 30.0


def produced(bootstrap: str, topics: Topics) -> dict[tuple[str, int, int], dict[str, Any]]:
    """Every activity event in the broker: ``(topic, partition, offset) -> event``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pipeline-tests",
                         "enable.auto.commit": False})
    events: dict[tuple[str, int, int], dict[str, Any]] = {}
    try:
        metadata = consumer.list_topics(timeout=TIMEOUT_S)
        for topic in topics.all_activity:
            for partition in metadata.topics[topic].partitions:
                tp = TopicPartition(topic, partition)
                low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, partition, low)])
                offset = low
                while offset < high:
                    msgs = consumer.consume(min(1000, high - offset), timeout=TIMEOUT_S)
                    assert msgs, f"no messages from {topic}-{partition} at {offset}"
                    for msg in msgs:
                        assert msg.error() is None, msg.error()
                        event = decode(msg.value(), ACTIVITY_SCHEMA_ID)
                        event["key"] = msg.key()
                        events[(topic, partition, msg.offset())] = event
                        offset = msg.offset() + 1
    finally:
        consumer.close()
    return events


def loaded_keys(spark: Any, table: Path) -> list[tuple[str, int, int]]:
    """The table's (topic, partition, offset) of every row, duplicates kept, sorted."""
    rows = spark.read.parquet(str(table)).select("topic", "partition", "offset").collect()
    return sorted((r.topic, r.partition, r.offset) for r in rows)
