"""End-to-end latency, from an event's generation to the warehouse (the paper: about 10 s).

A frontend stamps each event with the wall clock as it generates it (``event_time``); a row is
in the warehouse once the table version that holds it is committed. Each load run is recorded as
a :class:`LoadRecord` (its commit time and the offsets it loaded, per topic-partition), and a
row's latency is its load's commit time less its event time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.pipeline.table import Offsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class LoadRecord:
    version: int
    committed_ms: int  # wall clock, ms since the epoch
    start: Offsets
    end: Offsets


@dataclass(frozen=True)
class Latency:
    rows: int
    mean_s: float
    p50_s: float
    p99_s: float
    max_s: float
    #: (event second, mean latency in seconds), for the chart
    per_second: list[tuple[datetime, float]]


def latency(spark: SparkSession, table: Path, loads: list[LoadRecord]) -> Latency:
    from pyspark.sql import functions as F  # noqa: N812

    ranges = [
        (topic, partition, load.start.get(topic, {}).get(partition, 0), end, load.committed_ms)
        for load in loads for topic, parts in load.end.items()
        for partition, end in parts.items()
    ]
    spans = spark.createDataFrame(
        ranges, "r_topic string, r_partition int, r_start long, r_end long, committed_ms long")
    rows = spark.read.parquet(str(table))
    joined = rows.join(
        F.broadcast(spans),
        (rows["topic"] == spans["r_topic"]) & (rows["partition"] == spans["r_partition"])
        & (rows["offset"] >= spans["r_start"]) & (rows["offset"] < spans["r_end"]),
    ).withColumn("latency_s", (F.col("committed_ms") - F.unix_millis(F.col("event_time"))) / 1000.0)
    stats = joined.agg(
        F.count(F.lit(1)).alias("rows"),
        F.mean("latency_s").alias("mean"),
        F.percentile_approx("latency_s", [0.5, 0.99]).alias("p"),
        F.max("latency_s").alias("max"),
    ).first()
    if not stats["rows"]:
        return Latency(0, 0.0, 0.0, 0.0, 0.0, [])
    per_second = (
        joined.groupBy(F.date_trunc("second", "event_time").alias("second"))
        .agg(F.mean("latency_s").alias("latency"))
        .orderBy("second")
        .collect()
    )
    return Latency(stats["rows"], stats["mean"], stats["p"][0], stats["p"][1], stats["max"],
                   [(r.second, r.latency) for r in per_second])


def draw_latency_chart(result: Latency, path: Path) -> Path:
    """Mean end-to-end latency by the second its events were generated, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot([s for s, _ in result.per_second], [v for _, v in result.per_second], linewidth=1)
    ax.axhline(result.p50_s, linestyle="--", linewidth=0.8,
               label=f"median {result.p50_s:.1f} s")
    ax.set_title("End-to-end latency: frontend -> live -> mirror -> offline -> warehouse")
    ax.set_xlabel("event generated at (UTC)")
    ax.set_ylabel("seconds until loaded")
    ax.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path
