"""``samsa pipeline load``: the batch load job, exactly once, into Parquet by event date and hour.

One run reads every activity topic-partition from the offsets the table's current version
stored (a partition the table has not seen: from its log start) up to the high watermarks taken
when the run starts, decodes the events on the tasks (``decode.decode_events``), appends them as
Parquet partitioned by ``date`` and ``hour`` to a new version of the table and commits that
version together with the new offsets (``table.Table``). A run that fails or is killed commits
nothing, so running it again loads the same rows once.

The read is the ``samsa`` data source's own (``SamsaBatchReader``: its offset plan on the
driver, its ``read`` on the tasks), called from the tasks of a ``mapInArrow`` that decodes what
it reads there: the messages go from the fetched batches to the table's columns without
becoming Spark rows in between (through ``format("samsa")`` they would cross into the JVM and
back before being decoded).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, TopicPartition

from samsa.pipeline.decode import EVENT_COLUMNS, decode_events
from samsa.pipeline.events import DEFAULT_TOPICS, Topics
from samsa.pipeline.schemas import registered_schemas
from samsa.pipeline.table import Offsets, Table
from samsa.spark.source import SamsaBatchReader, kafka_schema
from samsa.tools.common import client_config, spark_log_level
from samsa.tools.mirror_client import DefaultReplicationPolicy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

METADATA_TIMEOUT_S = 30.0


class LoadError(RuntimeError):
    """The load cannot start (a topic is missing, the broker does not answer)."""


@dataclass(frozen=True)
class LoadResult:
    version: int
    rows: int
    seconds: float
    start: Offsets
    end: Offsets

    @property
    def loaded(self) -> bool:
        return self.rows > 0


def watermarks(bootstrap: str, topics: list[str]) -> tuple[Offsets, Offsets]:
    """``(log start offsets, high watermarks)`` of every partition of ``topics``."""
    consumer = Consumer(
        client_config(
            bootstrap,
            "samsa-pipeline-load",
            {"group.id": "samsa-pipeline-load", "enable.auto.commit": False},
            short_timeouts=False,
        )
    )
    try:
        metadata = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        lows: Offsets = {}
        highs: Offsets = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None:
                raise LoadError(f"topic {topic} does not exist: run `samsa pipeline generate` "
                                "first, or check --topic-prefix")
            for partition in sorted(meta.partitions):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S, cached=False
                )
                lows.setdefault(topic, {})[partition] = low
                highs.setdefault(topic, {})[partition] = high
        return lows, highs
    finally:
        consumer.close()


def activity_topics(topics: Topics, sources: Sequence[str] = ()) -> list[str]:
    """The activity topics, or their remote names in a cluster that mirrors ``sources``."""
    if not sources:
        return topics.all_activity
    policy = DefaultReplicationPolicy()
    return [policy.format_remote_topic(alias, topic)
            for alias in sources for topic in topics.all_activity]


def load(
    spark: SparkSession,
    bootstrap: str,
    table_path: Path,
    *,
    topics: Topics = DEFAULT_TOPICS,
    fail_on_data_loss: bool = True,
    sources: Sequence[str] = (),
    schema_registry_url: str | None = None,
    read_committed: bool = False,
) -> LoadResult:
    """Load what arrived since the last load into the table at ``table_path``.

    ``sources``: the aliases of the clusters mirrored into this one; the load reads their
    remote topics (``live1.page_views``, MM2's DefaultReplicationPolicy) instead of the local
    ones. ``schema_registry_url``: the writer schemas are resolved there, once per schema id on
    this driver, and go to the tasks with the job. ``read_committed``: read only committed
    transactions (a mirror with exactly.once.support)."""
    began = time.monotonic()
    names = activity_topics(topics, sources)
    writers = None if schema_registry_url is None else registered_schemas(schema_registry_url)
    table = Table(table_path)
    with table.locked():
        base = table.current()
        lows, highs = watermarks(bootstrap, names)
        start: Offsets = {
            t: {p: base.offsets.get(t, {}).get(p, lows[t][p]) for p in parts}
            for t, parts in highs.items()
        }
        if all(start[t][p] >= high for t, parts in highs.items() for p, high in parts.items()):
            return LoadResult(base.number, 0, time.monotonic() - began, start, start)
        staging = table.begin(base)
        counter = spark.sparkContext.accumulator(0)
        # the data source's own reader: its driver resolves the offsets (failOnDataLoss
        # included) and its read() is what format("samsa")'s tasks run
        reader = SamsaBatchReader({
            "kafka.bootstrap.servers": bootstrap,
            "kafka.log_level": spark_log_level(),
            "assign": json.dumps({t: sorted(parts) for t, parts in highs.items()}),
            "startingOffsets": json.dumps(start),
            "endingOffsets": json.dumps(highs),
            "failOnDataLoss": str(fail_on_data_loss).lower(),
            "kafka.isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }, kafka_schema())
        ranges = reader.partitions()

        def read_and_decode(batches):  # type: ignore[no-untyped-def]
            for batch in batches:
                for index in batch.column("id").to_pylist():
                    for events in decode_events(reader.read(ranges[index]), writers):
                        counter.add(events.num_rows)
                        yield events

        (
            spark.range(len(ranges), numPartitions=len(ranges))
            .mapInArrow(read_and_decode, EVENT_COLUMNS)
            .write.mode("append")
            .partitionBy("date", "hour")
            # offsets and event times hardly repeat: a dictionary of them is built, hashed value
            # by value, only to be dropped when it fills (half the write's time for event_time,
            # stored as INT96)
            .option("parquet.enable.dictionary#offset", "false")
            .option("parquet.enable.dictionary#event_time", "false")
            .parquet(str(staging))
        )
        version = table.commit(staging, highs)
        return LoadResult(version.number, counter.value, time.monotonic() - began, start, highs)
