"""``samsa pipeline demo``: the whole pipeline against an embedded broker (``make demo``).

It lives above ``samsa.pipeline``, which stays client code that imports no broker (the Spark
executors import it); the CLI adds it to the ``pipeline`` group.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

import samsa
from samsa.pipeline.cli import (
    _master,
    audit_command,
    fails_in_one_line,
    generate_command,
    load_command,
    report_command,
)


@click.command("demo")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo"),
              show_default=True, help="Where the broker's log, the table and the chart go.")
@click.option("--events", type=click.IntRange(min=1), default=200_000, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["avro", "json"]), default="avro",
              show_default=True)
@_master
@click.pass_context
@fails_in_one_line
def demo_command(ctx: click.Context, workdir: Path, events: int, fmt: str, master: str) -> None:
    """Start an embedded broker, then generate, load, audit and report."""

    table = workdir / "warehouse" / "events"
    chart = workdir / "warehouse" / "report.png"
    began = time.monotonic()

    def step(title: str) -> None:
        click.secho(f"\n== {title} (at {time.monotonic() - began:.1f} s)", bold=True, err=True)

    step("starting an embedded samsa broker")
    with samsa.Broker(workdir / "broker") as broker:
        bootstrap = broker.bootstrap_servers
        click.echo(f"broker at {bootstrap}, log in {workdir / 'broker'}", err=True)
        step(f"1/4 generate: {events:,} activity events from 3 simulated frontends")
        ctx.invoke(generate_command, bootstrap_server=bootstrap, events=events, fmt=fmt)
        step("2/4 load: Spark batch job into Parquet by date and hour (Spark starts first)")
        ctx.invoke(load_command, bootstrap_server=bootstrap, table=table, master=master,
                   progress=True)
        step("3/4 audit: monitoring counts against loaded rows")
        ctx.invoke(audit_command, bootstrap_server=bootstrap, table=table, master=master)
        step("4/4 report")
        ctx.invoke(report_command, table=table, master=master, chart=chart)
    step("done")
    click.echo(f"broker log:    {workdir / 'broker'}\n"
               f"loaded table:  {table} (Parquet, spark.read.parquet)\n"
               f"report chart:  {chart}")
