"""``samsa pipeline audit``: reconcile the frontends' monitoring counts with the loaded rows.

As the paper's audit does: every producer counts the messages it published per topic and time
window and publishes the counts to the monitoring topic; the audit sums them per topic and
window and compares them with the rows of the loaded table (a ``load`` table or a ``stream``
output) whose event time falls in that window. A window with fewer rows than counted has lost
data, one with more has duplicates; so does a table holding one ``(topic, partition, offset)``
twice. Windows the frontends have not reported yet, or that were not loaded yet, show as
mismatches too: audit after the load has caught up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.pipeline.decode import MONITORING_COLUMNS, decode_monitoring
from samsa.pipeline.events import DEFAULT_TOPICS, Topics
from samsa.tools.common import spark_log_level

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class WindowCheck:
    topic: str
    window_start: int  # ms since the epoch, UTC
    window_ms: int
    monitored: int
    loaded: int

    @property
    def status(self) -> str:
        if self.loaded == self.monitored:
            return "ok"
        return "MISSING" if self.loaded < self.monitored else "EXTRA"


@dataclass(frozen=True)
class AuditResult:
    windows: list[WindowCheck]
    duplicates: int  # rows beyond the first of one (topic, partition, offset)
    rows: int

    @property
    def mismatches(self) -> list[WindowCheck]:
        return [w for w in self.windows if w.status != "ok"]

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.duplicates == 0


class AuditError(RuntimeError):
    """There is nothing to audit (no monitoring events, no table)."""


def audit(
    spark: SparkSession, bootstrap: str, table: Path, *, topics: Topics = DEFAULT_TOPICS
) -> AuditResult:
    from pyspark.sql import functions as F  # noqa: N812

    monitoring = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.log_level", spark_log_level())
        .option("subscribe", topics.monitoring)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .select("topic", "partition", "offset", "value")
        .mapInArrow(decode_monitoring, MONITORING_COLUMNS)
        .where(F.col("topic").isin(topics.all_activity))
        .groupBy("topic", "window_start", "window_ms")
        .agg(F.sum("count").alias("count"))
        .collect()
    )
    if not monitoring:
        raise AuditError(f"no monitoring events in topic {topics.monitoring}: nothing to audit")
    expected = {(r.topic, r.window_start, r.window_ms): r["count"] for r in monitoring}
    sizes = {w for _, _, w in expected}
    if len(sizes) > 1:
        raise AuditError(f"the monitoring events count in windows of several sizes "
                         f"({', '.join(f'{w} ms' for w in sorted(sizes))}): use one topic each")
    (window_ms,) = sizes
    if not Path(table).exists():
        raise AuditError(f"no table at {table}: run `samsa pipeline load` first")
    rows = spark.read.parquet(str(table)).where(F.col("topic").isin(topics.all_activity))
    millis = F.unix_millis(F.col("event_time"))
    counted = (
        rows.groupBy("topic", (millis - F.pmod(millis, F.lit(window_ms))).alias("start"))
        .count()
        .collect()
    )
    loaded = {(r.topic, r.start, window_ms): r["count"] for r in counted}
    stats = rows.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_distinct("topic", "partition", "offset").alias("distinct"),
    ).first()
    windows = [
        WindowCheck(topic, start, window_ms, expected.get(key, 0), loaded.get(key, 0))
        for key in sorted(set(expected) | set(loaded))
        for topic, start, window_ms in [key]
    ]
    return AuditResult(windows, stats["rows"] - stats["distinct"], stats["rows"])

