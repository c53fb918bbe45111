"""``samsa pipeline``: generate, load, stream, audit, report, and demo (all of them in one go).

Spark, fastavro and matplotlib are imported inside the commands, so ``samsa --help`` stays fast
and works without the ``pipeline`` extra. Every failure, Spark's included, leaves as one line.
"""

from __future__ import annotations

import functools
import re
import signal
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click
from confluent_kafka import KafkaException

from samsa.tools.common import ToolError, bootstrap_option, check_reachable, describe_error

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_TABLE = Path("warehouse/events")
DEFAULT_STREAM_OUTPUT = Path("warehouse/events_stream")

# The exception classes whose message is the one line to show, wherever Spark wrapped them.
_OWN_ERRORS = re.compile(
    r"(?:SamsaSourceError|BadEventError|TableError|LoadError|StreamError|AuditError|ReportError"
    r"|GenerateError): (?P<message>[^\n]+)"
)


def one_line_error(exc: BaseException) -> str:
    """The line of ``exc`` worth showing: our own error inside Spark's wrapping, or its first."""
    if isinstance(exc, KafkaException):
        return describe_error(exc)
    text = str(exc)
    match = _OWN_ERRORS.search(text)
    if match is not None:
        return match["message"].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    return first if len(first) <= 400 else first[:400] + "..."


def fails_in_one_line(command: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except ImportError as exc:
            raise ToolError(f"{exc.name or exc} is not installed: pip install "
                            "'samsa[pipeline]'") from exc
        except Exception as exc:  # Spark and Py4J errors have no common base
            raise ToolError(one_line_error(exc)) from exc

    return wrapper


def table_text(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _topics(prefix: str) -> Any:
    from samsa.pipeline.events import Topics

    return Topics(prefix)


def _session(master: str, progress: bool = False) -> Any:
    from samsa.pipeline.session import spark_session

    return spark_session(master, progress=progress, quiet=True)


def _table_exists(table: Path) -> None:
    if not table.exists():
        raise ToolError(f"no table at {table}: run `samsa pipeline load` first")


_prefix = click.option("--topic-prefix", default="", show_default=True,
                       help="Prefix of the pipeline's topic names.")
_master = click.option("--master", default="local[*]", show_default=True,
                       help="Spark master URL.")
_table = click.option("--table", type=click.Path(path_type=Path), default=DEFAULT_TABLE,
                      show_default=True, help="The load job's table (a directory link).")


@click.group("pipeline")
def pipeline() -> None:
    """The 2011 paper's log pipeline on Spark: generate -> load -> audit -> report."""


@pipeline.command("generate")
@bootstrap_option
@_prefix
@click.option("--events", type=click.IntRange(min=0), default=100_000, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["avro", "json"]), default="avro",
              show_default=True, help="Avro with a schema id in each message, or JSON.")
@click.option("--frontends", type=click.IntRange(min=1), default=3, show_default=True,
              help="Simulated web servers, one producer each.")
@click.option("--users", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--span-minutes", type=click.FloatRange(min=0, min_open=True), default=120,
              show_default=True, help="Event times spread over the last N minutes.")
@click.option("--window-seconds", type=click.IntRange(min=1), default=60, show_default=True,
              help="Monitoring window.")
@click.option("--realtime", is_flag=True, help="Stamp events with the wall clock, at --rate.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=1000.0,
              show_default=True, help="Events per second with --realtime.")
@click.option("--partitions", type=click.IntRange(min=1), default=3, show_default=True,
              help="Partitions of topics this command creates.")
@click.option("--seed", type=int, default=None)
@fails_in_one_line
def generate_command(bootstrap_server: str, topic_prefix: str, events: int, fmt: str,
                     frontends: int, users: int, span_minutes: float, window_seconds: int,
                     realtime: bool, rate: float, partitions: int, seed: int | None) -> None:
    """Simulated frontends publish activity events and monitoring counts."""
    from samsa.pipeline.generate import generate

    check_reachable(bootstrap_server)
    began = time.monotonic()

    def progress(done: int, total: int) -> None:
        click.echo(f"generated {done:,}/{total:,} events ({time.monotonic() - began:.1f} s)",
                   err=True)

    result = generate(
        bootstrap_server, events=events, fmt=fmt, frontends=frontends, users=users,
        span_ms=int(span_minutes * 60_000), window_ms=window_seconds * 1000, realtime=realtime,
        rate=rate, seed=seed, topics=_topics(topic_prefix), partitions=partitions,
        progress=progress if events >= 100_000 else None,
    )
    seconds = time.monotonic() - began
    per_topic = ", ".join(f"{t} {n:,}" for t, n in sorted(result.per_topic.items()))
    click.echo(f"published {result.events:,} events ({per_topic}) and "
               f"{result.monitoring_events:,} monitoring events for {result.windows} windows "
               f"in {seconds:.1f} s ({fmt})")


@pipeline.command("load")
@bootstrap_option
@_prefix
@_table
@_master
@click.option("--fail-on-data-loss/--no-fail-on-data-loss", default=True, show_default=True,
              help="Fail when retention deleted records the load has not loaded yet.")
@click.option("--progress/--no-progress", default=False, help="Spark's stage progress bar.")
@fails_in_one_line
def load_command(bootstrap_server: str, topic_prefix: str, table: Path, master: str,
                 fail_on_data_loss: bool, progress: bool) -> None:
    """Load the new events into Parquet (by date and hour), exactly once."""
    from samsa.pipeline.load import load, watermarks
    from samsa.pipeline.table import Table

    check_reachable(bootstrap_server)
    # the checks that need no Spark come first: a bad table or topic fails in a second
    Table(table).current()
    watermarks(bootstrap_server, _topics(topic_prefix).all_activity)
    spark = _session(master, progress)
    result = load(spark, bootstrap_server, table, topics=_topics(topic_prefix),
                  fail_on_data_loss=fail_on_data_loss)
    if not result.loaded:
        click.echo(f"nothing new to load; {table} stays at version {result.version}")
        return
    rate = result.rows / result.seconds if result.seconds else 0.0
    click.echo(f"loaded {result.rows:,} rows into {table} (version {result.version}) in "
               f"{result.seconds:.1f} s, {rate:,.0f} rows/s")


@pipeline.command("stream")
@bootstrap_option
@_prefix
@_master
@click.option("--output", type=click.Path(path_type=Path), default=DEFAULT_STREAM_OUTPUT,
              show_default=True, help="Parquet output of the streaming query.")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None,
              help="Spark checkpoint location [default: OUTPUT.checkpoint].")
@click.option("--trigger", type=click.Choice(["available-now", "continuous"]),
              default="available-now", show_default=True)
@click.option("--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="Seconds between micro-batches with --trigger continuous.")
@click.option("--max-offsets-per-trigger", type=click.IntRange(min=1), default=None,
              help="Spark's maxOffsetsPerTrigger.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop after this many seconds.")
@fails_in_one_line
def stream_command(bootstrap_server: str, topic_prefix: str, master: str, output: Path,
                   checkpoint: Path | None, trigger: str, interval: float,
                   max_offsets_per_trigger: int | None, timeout: float | None) -> None:
    """The load as a Structured Streaming query with a checkpoint."""
    from samsa.pipeline.stream import stream

    check_reachable(bootstrap_server)
    if checkpoint is None:
        checkpoint = output.with_name(output.name + ".checkpoint")
    spark = _session(master)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if trigger == "continuous":
        click.echo(f"streaming into {output} every {interval:g} s; Ctrl-C stops", err=True)
    result = stream(spark, bootstrap_server, output, checkpoint, topics=_topics(topic_prefix),
                    trigger=trigger, interval_s=interval,
                    max_offsets_per_trigger=max_offsets_per_trigger, timeout_s=timeout, stop=stop)
    click.echo(f"streamed {result.rows:,} rows in {result.batches} micro-batches into {output} "
               f"in {result.seconds:.1f} s (checkpoint {checkpoint})")


@pipeline.command("audit")
@bootstrap_option
@_prefix
@_table
@_master
@click.option("--all", "show_all", is_flag=True, help="Print every window, not only mismatches.")
@fails_in_one_line
def audit_command(bootstrap_server: str, topic_prefix: str, table: Path, master: str,
                  show_all: bool) -> None:
    """Reconcile the monitoring counts with the loaded rows; exit 1 on a mismatch."""
    from samsa.pipeline.audit import audit
    from samsa.pipeline.load import watermarks

    check_reachable(bootstrap_server)
    watermarks(bootstrap_server, [_topics(topic_prefix).monitoring])
    _table_exists(table)
    result = audit(_session(master), bootstrap_server, table, topics=_topics(topic_prefix))
    shown = result.windows if show_all else result.mismatches
    if shown:
        click.echo(table_text(
            ("topic", "window (UTC)", "monitored", "loaded", "status"),
            [(w.topic, _utc(w.window_start), w.monitored, w.loaded, w.status) for w in shown],
        ))
    totals = result.totals(lambda w: w.topic)
    click.echo(table_text(
        ("topic", "windows", "monitored", "loaded", "mismatched windows"),
        [(t, *v) for t, v in sorted(totals.items())],
    ))
    if result.duplicates:
        click.echo(f"{result.duplicates:,} rows repeat a (topic, partition, offset) already loaded")
    if not result.ok:
        raise ToolError(f"audit failed: {len(result.mismatches)} of {len(result.windows)} "
                        f"windows mismatch, {result.duplicates} duplicate rows")
    click.echo(f"audit passed: {result.rows:,} rows match the monitoring counts of "
               f"{len(result.windows)} windows")


@pipeline.command("report")
@_table
@_master
@click.option("--chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to save the PNG chart [default: report.png next to the table].")
@click.option("--top", type=click.IntRange(min=1), default=3, show_default=True,
              help="Pages per hour in the table.")
@fails_in_one_line
def report_command(table: Path, master: str, chart: Path | None, top: int) -> None:
    """Top pages per hour and events per minute, as a table and a PNG chart."""
    from samsa.pipeline.report import build_report, draw_chart

    _table_exists(table)
    report = build_report(_session(master), table, top=top)
    click.echo(f"Top {top} pages per hour (page views)")
    click.echo(table_text(("date", "hour", "rank", "page", "views"), report.top_pages))
    per_type: dict[str, list[int]] = {}
    for _, event_type, count in report.per_minute:
        per_type.setdefault(event_type, []).append(count)
    click.echo("\nEvents per minute")
    click.echo(table_text(
        ("event type", "minutes", "min", "mean", "max", "total"),
        [(t, len(c), min(c), f"{sum(c) / len(c):.1f}", max(c), sum(c))
         for t, c in sorted(per_type.items())],
    ))
    path = draw_chart(report, chart or table.parent / "report.png")
    click.echo(f"\nchart saved to {path}")
