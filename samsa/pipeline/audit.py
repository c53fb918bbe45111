"""``samsa pipeline audit``: reconcile the frontends' monitoring counts with the loaded rows.

As the paper's audit does: every producer counts the messages it published per topic and time
window and publishes the counts to the monitoring topic; the audit sums them per topic and
window and compares them with the rows of the loaded table (a ``load`` table or a ``stream``
output) whose event time falls in that window. A window with fewer rows than counted has lost
data, one with more has duplicates; so does a table holding one ``(topic, partition, offset)``
twice. Windows the frontends have not reported yet, or that were not loaded yet, show as
mismatches too: audit after the load has caught up.

In the deployment (live clusters mirrored into an offline one) the audit runs on the offline
cluster once per source cluster: ``live1.monitoring`` holds live1's frontends' counts of
``page_views``, which the warehouse holds as ``live1.page_views`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.pipeline.decode import MONITORING_COLUMNS, decode_monitoring
from samsa.pipeline.events import DEFAULT_TOPICS, Topics
from samsa.pipeline.schemas import registered_schemas
from samsa.tools.common import spark_log_level

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


K = TypeVar("K")


@dataclass(frozen=True)
class WindowCheck:
    topic: str
    window_start: int  # ms since the epoch, UTC
    window_ms: int
    monitored: int
    loaded: int
    cluster: str = ""  # the source cluster, in a deployment

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

    def totals(self, by: Callable[[WindowCheck], K]) -> dict[K, list[int]]:
        """Per ``by(window)``: [windows, monitored, loaded, mismatched windows]."""
        totals: dict[K, list[int]] = {}
        for w in self.windows:
            total = totals.setdefault(by(w), [0, 0, 0, 0])
            total[0] += 1
            total[1] += w.monitored
            total[2] += w.loaded
            total[3] += w.status != "ok"
        return totals


class AuditError(RuntimeError):
    """There is nothing to audit (no monitoring events, no table)."""


def audit_deployment(
    spark: SparkSession, bootstrap: str, table: Path, sources: Sequence[str], *,
    topics: Topics = DEFAULT_TOPICS, schema_registry_url: str | None = None,
    read_committed: bool = False,
) -> AuditResult:
    """The audit of each source cluster mirrored into ``bootstrap``, together."""
    writers = None if schema_registry_url is None else registered_schemas(schema_registry_url)
    results = [audit(spark, bootstrap, table, topics=topics, source=alias, writers=writers,
                     read_committed=read_committed) for alias in sources]
    return AuditResult([w for r in results for w in r.windows],
                       sum(r.duplicates for r in results), sum(r.rows for r in results))


def audit(
    spark: SparkSession, bootstrap: str, table: Path, *, topics: Topics = DEFAULT_TOPICS,
    source: str | None = None, writers: Mapping[int, Any] | None = None,
    read_committed: bool = False,
) -> AuditResult:
    """``source``: audit that cluster's topics as mirrored into ``bootstrap`` (``<source>.``
    before every name); ``writers``: the registered schemas by id."""
    from pyspark.sql import functions as F  # noqa: N812

    prefix = "" if source is None else f"{source}."
    monitoring_topic = prefix + topics.monitoring
    activity = [prefix + t for t in topics.all_activity]

    def decode(batches):  # type: ignore[no-untyped-def]
        return decode_monitoring(batches, writers)

    monitoring = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.log_level", spark_log_level())
        .option("kafka.isolation.level",
                "read_committed" if read_committed else "read_uncommitted")
        .option("subscribe", monitoring_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .select("topic", "partition", "offset", "value")
        .mapInArrow(decode, MONITORING_COLUMNS)
        .withColumn("topic", F.concat(F.lit(prefix), F.col("topic")))
        .where(F.col("topic").isin(activity))
        .groupBy("topic", "window_start", "window_ms")
        .agg(F.sum("count").alias("count"))
        .collect()
    )
    if not monitoring:
        raise AuditError(f"no monitoring events in topic {monitoring_topic}: nothing to audit")
    expected = {(r.topic, r.window_start, r.window_ms): r["count"] for r in monitoring}
    sizes = {w for _, _, w in expected}
    if len(sizes) > 1:
        raise AuditError(f"the monitoring events count in windows of several sizes "
                         f"({', '.join(f'{w} ms' for w in sorted(sizes))}): use one topic each")
    (window_ms,) = sizes
    if not Path(table).exists():
        raise AuditError(f"no table at {table}: run `samsa pipeline load` first")
    rows = spark.read.parquet(str(table)).where(F.col("topic").isin(activity))
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
        WindowCheck(topic, start, window_ms, expected.get(key, 0), loaded.get(key, 0),
                    source or "")
        for key in sorted(set(expected) | set(loaded))
        for topic, start, window_ms in [key]
    ]
    return AuditResult(windows, stats["rows"] - stats["distinct"], stats["rows"])

