"""``samsa pipeline stream``: the load as a Structured Streaming query.

The query reads the activity topics with the samsa stream reader (from the earliest offsets on
its first run), decodes the events on the tasks and appends them to Parquet partitioned by
``date`` and ``hour`` with Spark's file sink. Spark's checkpoint holds the offsets of every
micro-batch and the sink's ``_spark_metadata`` log names the files of every committed one, so
a query stopped or killed and started again with the same checkpoint neither loses nor repeats
a row.

Two triggers: ``available-now`` reads what is there when it starts and stops; ``continuous``
runs a micro-batch every ``interval`` seconds until it is stopped (``stop`` set, a timeout, or
SIGINT / SIGTERM in the command).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.pipeline.decode import EVENT_COLUMNS, decode_events
from samsa.pipeline.events import DEFAULT_TOPICS, Topics
from samsa.tools.common import spark_log_level

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TRIGGERS = ("available-now", "continuous")


class StreamError(RuntimeError):
    """The streaming query failed."""


@dataclass(frozen=True)
class StreamResult:
    batches: int
    rows: int
    seconds: float


def stream(
    spark: SparkSession,
    bootstrap: str,
    output: Path,
    checkpoint: Path,
    *,
    topics: Topics = DEFAULT_TOPICS,
    trigger: str = "available-now",
    interval_s: float = 5.0,
    max_offsets_per_trigger: int | None = None,
    timeout_s: float | None = None,
    stop: threading.Event | None = None,
    fail_on_data_loss: bool = True,
) -> StreamResult:
    """Run the streaming load until it has read everything (available-now) or is stopped."""
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {trigger!r}: expected one of {', '.join(TRIGGERS)}")
    began = time.monotonic()
    reader = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.log_level", spark_log_level())
        .option("subscribe", ",".join(topics.all_activity))
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    writer = (
        reader.load()
        .select("topic", "partition", "offset", "value")
        .mapInArrow(decode_events, EVENT_COLUMNS)
        .writeStream.format("parquet")
        .partitionBy("date", "hour")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .queryName(f"samsa-pipeline-stream-{output.name}")
    )
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(interval_s * 1000)} milliseconds")
    query = writer.start()
    deadline = None if timeout_s is None else began + timeout_s
    rows_by_batch: dict[int, int] = {}  # Spark keeps only the last 100 progress reports

    def note_progress() -> None:
        for progress in query.recentProgress:
            if progress.numInputRows is not None:
                rows_by_batch[progress.batchId] = progress.numInputRows

    try:
        while query.isActive:
            note_progress()
            if stop is not None and stop.is_set():
                break
            if deadline is not None and time.monotonic() >= deadline:
                if trigger == "available-now":
                    raise StreamError(f"the available-now query did not finish in {timeout_s} s")
                break
            query.awaitTermination(0.5)
    finally:
        if query.isActive:
            query.stop()
    failure = query.exception()
    if failure is not None:
        raise StreamError(str(failure))
    note_progress()
    rows = sum(rows_by_batch.values())
    batches = sum(1 for n in rows_by_batch.values() if n)
    return StreamResult(batches, rows, time.monotonic() - began)
