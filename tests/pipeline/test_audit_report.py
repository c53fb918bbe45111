"""The audit and the report over a loaded table, with real PySpark and a real broker."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from pipeline_data import produced
from pyspark.sql import SparkSession

import samsa
from samsa.pipeline.audit import audit
from samsa.pipeline.cli import pipeline
from samsa.pipeline.events import Topics
from samsa.pipeline.generate import generate
from samsa.pipeline.load import load
from samsa.pipeline.report import build_report

MINUTE_MS = 60_000
START_MS = 1_763_798_400_000  # 2025-11-22 08:00 UTC


@pytest.fixture(scope="module")
def loaded(
    spark: SparkSession, broker: samsa.Broker, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Topics, Path]:
    """2,000 events over 30 minutes in 5-minute monitoring windows, loaded."""
    topics = Topics("audited-")
    generate(broker.bootstrap_servers, events=2000, topics=topics, seed=11, start_ms=START_MS,
             span_ms=30 * MINUTE_MS, window_ms=5 * MINUTE_MS, fmt="json")
    table = tmp_path_factory.mktemp("audited") / "events"
    assert load(spark, broker.bootstrap_servers, table, topics=topics).rows == 2000
    return topics, table


def copy_of(table: Path, tmp_path: Path) -> Path:
    """A plain-directory copy of the table's current version, to damage."""
    copy = tmp_path / "copy"
    shutil.copytree(table.resolve(), copy)
    return copy


def test_the_audit_passes_on_a_complete_load(
    spark: SparkSession, broker: samsa.Broker, loaded: tuple[Topics, Path]
) -> None:
    topics, table = loaded
    result = audit(spark, broker.bootstrap_servers, table, topics=topics)
    assert result.ok and result.duplicates == 0 and result.rows == 2000
    assert len(result.windows) == 3 * 6  # three topics, six 5-minute windows
    assert {w.window_start for w in result.windows} == {
        START_MS + i * 5 * MINUTE_MS for i in range(6)
    }
    assert sum(w.monitored for w in result.windows) == 2000


def test_the_audit_detects_lost_rows(
    spark: SparkSession, broker: samsa.Broker, loaded: tuple[Topics, Path], tmp_path: Path
) -> None:
    topics, table = loaded
    damaged = copy_of(table, tmp_path)
    victim = sorted(damaged.glob("date=*/hour=*/*.parquet"))[0]
    lost = spark.read.parquet(str(victim)).count()
    victim.unlink()

    result = audit(spark, broker.bootstrap_servers, damaged, topics=topics)

    assert not result.ok
    assert result.mismatches and {w.status for w in result.mismatches} == {"MISSING"}
    assert sum(w.monitored - w.loaded for w in result.mismatches) == lost


def test_the_audit_detects_duplicates(
    spark: SparkSession, broker: samsa.Broker, loaded: tuple[Topics, Path], tmp_path: Path
) -> None:
    topics, table = loaded
    damaged = copy_of(table, tmp_path)
    first = sorted(damaged.glob("date=*/hour=*/*.parquet"))[0]
    shutil.copy(first, first.with_name("part-99999-copy.parquet"))
    again = spark.read.parquet(str(first)).count()

    result = audit(spark, broker.bootstrap_servers, damaged, topics=topics)

    assert not result.ok and result.duplicates == again
    assert {w.status for w in result.mismatches} == {"EXTRA"}


def test_the_audit_command_exits_non_zero_on_a_mismatch(
    spark: SparkSession, broker: samsa.Broker, loaded: tuple[Topics, Path], tmp_path: Path
) -> None:
    topics, table = loaded
    damaged = copy_of(table, tmp_path)
    sorted(damaged.glob("date=*/hour=*/*.parquet"))[-1].unlink()
    args = ["audit", "--bootstrap-server", broker.bootstrap_servers, "--topic-prefix",
            topics.prefix, "--master", "local[2]", "--table"]

    failed = CliRunner().invoke(pipeline, [*args, str(damaged)])
    passed = CliRunner().invoke(pipeline, [*args, str(table)])

    assert failed.exit_code == 1, failed.output
    assert "MISSING" in failed.output and "audit failed:" in failed.output
    assert passed.exit_code == 0, passed.output
    assert "audit passed: 2,000 rows match the monitoring counts of 18 windows" in passed.output


def test_the_report_counts_what_was_loaded(
    spark: SparkSession, broker: samsa.Broker, loaded: tuple[Topics, Path], tmp_path: Path
) -> None:
    topics, table = loaded
    events = produced(broker.bootstrap_servers, topics).values()
    report = build_report(spark, table, top=3)

    views = Counter(e["page"] for e in events if e["event_type"] == "page_view")
    ranked = sorted(views.items(), key=lambda kv: (-kv[1], kv[0]))
    assert report.top_overall == ranked[:10]
    hour = {(r[3], r[4]) for r in report.top_pages if r[1] == 8}
    assert hour == set(ranked[:3])  # every event lies in 08:00-08:30
    per_minute = Counter(
        ((e["timestamp"] - START_MS) // MINUTE_MS, e["event_type"]) for e in events
    )
    assert {
        ((int(m.timestamp() * 1000) - START_MS) // MINUTE_MS, t): n
        for m, t, n in report.per_minute
    } == dict(per_minute)

    chart = tmp_path / "chart.png"
    result = CliRunner().invoke(
        pipeline, ["report", "--table", str(table), "--master", "local[2]", "--chart", str(chart)]
    )
    assert result.exit_code == 0, result.output
    assert "Top 3 pages per hour" in result.output and f"chart saved to {chart}" in result.output
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000
