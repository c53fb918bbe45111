"""``samsa pipeline report``: a small analytics report over the loaded events.

Top pages per hour (page views) and events per minute by type, computed with Spark over the
loaded table, returned as rows for a printed table and drawn into a PNG chart (matplotlib, no
display needed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Report:
    #: (date, hour, rank, page, views), the top ``top`` pages of every hour
    top_pages: list[tuple[str, int, int, str, int]]
    #: (minute, event_type, events)
    per_minute: list[tuple[datetime, str, int]]
    #: (page, views) of the ten most viewed pages of the whole table
    top_overall: list[tuple[str, int]]
    rows: int


class ReportError(RuntimeError):
    """Nothing to report on."""


def build_report(spark: SparkSession, table: Path, *, top: int = 3) -> Report:
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812

    if not Path(table).exists():
        raise ReportError(f"no table at {table}: run `samsa pipeline load` first")
    events = spark.read.parquet(str(table))
    rows = events.count()
    if rows == 0:
        raise ReportError(f"the table at {table} holds no events yet")
    by_hour = Window.partitionBy("date", "hour").orderBy(F.desc("views"), F.asc("page"))
    top_pages = (
        events.where(F.col("event_type") == "page_view")
        .groupBy("date", "hour", "page")
        .agg(F.count(F.lit(1)).alias("views"))
        .withColumn("rank", F.row_number().over(by_hour))
        .where(F.col("rank") <= top)
        .orderBy("date", "hour", "rank")
        .collect()
    )
    overall = (
        events.where(F.col("event_type") == "page_view")
        .groupBy("page")
        .agg(F.count(F.lit(1)).alias("views"))
        .orderBy(F.desc("views"), F.asc("page"))
        .limit(10)
        .collect()
    )
    per_minute = (
        events.groupBy(F.date_trunc("minute", "event_time").alias("minute"), "event_type")
        .count()
        .orderBy("minute", "event_type")
        .collect()
    )
    return Report(
        [(r.date, r.hour, r.rank, r.page, r.views) for r in top_pages],
        [(r.minute, r.event_type, r["count"]) for r in per_minute],
        [(r.page, r.views) for r in overall],
        rows,
    )


def draw_chart(report: Report, path: Path) -> Path:
    """Events per minute by type, and the most viewed pages overall, as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from collections import defaultdict

    import matplotlib.pyplot as plt

    series: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for minute, event_type, count in report.per_minute:
        series[event_type].append((minute, count))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), width_ratios=(2, 1))
    for event_type, points in sorted(series.items()):
        left.plot([m for m, _ in points], [c for _, c in points], label=event_type, linewidth=1)
    left.set_title("Events per minute")
    left.set_xlabel("event time (UTC)")
    left.set_ylabel("events")
    left.legend()
    fig.autofmt_xdate()
    pages = report.top_overall[::-1]
    right.barh([p for p, _ in pages], [c for _, c in pages])
    right.set_title("Most viewed pages")
    right.set_xlabel("views")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path
