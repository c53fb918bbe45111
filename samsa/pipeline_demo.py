"""``samsa pipeline demo``: the whole pipeline (``make demo``).

By default the paper's deployment (``pipeline_deployment``): two live clusters whose frontends
publish in live time, the mirror into the offline cluster, the schema registry, loads every few
seconds, the audit per source cluster and the end-to-end latency. ``--single-cluster``: the
pipeline on one embedded broker with fixed schema ids, events spread over two simulated hours.

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
@click.option("--events", type=click.IntRange(min=1), default=None,
              help="Events (per live cluster in the deployment) [default: 20,000 in the "
                   "deployment, 200,000 with --single-cluster].")
@click.option("--format", "fmt", type=click.Choice(["avro", "json"]), default="avro",
              show_default=True, help="With --single-cluster (the deployment writes Avro).")
@click.option("--single-cluster", is_flag=True,
              help="One embedded broker, fixed schema ids, no registry and no mirror.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=1000.0,
              show_default=True, help="Events per second per live cluster (deployment).")
@click.option("--load-interval", type=click.FloatRange(min=0.5), default=5.0,
              show_default=True, help="Seconds between load runs (deployment).")
@_master
@click.pass_context
@fails_in_one_line
def demo_command(ctx: click.Context, workdir: Path, events: int | None, fmt: str,
                 single_cluster: bool, rate: float, load_interval: float, master: str) -> None:
    """The paper's deployment (two live clusters, mirror, offline cluster, schema registry),
    or with --single-cluster one embedded broker: generate, load, audit and report."""
    if not single_cluster:
        run_deployment_demo(workdir, events or 20_000, rate, load_interval, master)
        return
    events = events or 200_000
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


def run_deployment_demo(workdir: Path, events: int, rate: float, load_interval: float,
                        master: str) -> None:
    from samsa.pipeline.audit import audit_deployment
    from samsa.pipeline.cli import _session, table_text
    from samsa.pipeline.latency import draw_latency_chart, latency
    from samsa.pipeline.report import build_report, draw_chart
    from samsa.pipeline_deployment import LIVE, Deployment

    table = workdir / "warehouse" / "events"
    chart = workdir / "warehouse" / "report.png"
    latency_chart = workdir / "warehouse" / "latency.png"
    began = time.monotonic()

    def step(title: str) -> None:
        click.secho(f"\n== {title} (at {time.monotonic() - began:.1f} s)", bold=True, err=True)

    def note(line: str) -> None:
        click.echo(f"  [{time.monotonic() - began:5.1f} s] {line}", err=True)

    step("starting Spark, live1, live2, offline + schema registry, and samsa mirror")
    spark = _session(master)
    with Deployment(workdir / "clusters") as deployment:
        for alias, broker in deployment.live.items():
            note(f"{alias} at {broker.bootstrap_servers}")
        note(f"offline at {deployment.offline_bootstrap}, schema registry at "
             f"{deployment.schema_registry_url}")
        note(f"samsa mirror {workdir / 'clusters' / 'mm2.properties'} "
             f"(log: {workdir / 'clusters' / 'mirror.log'})")
        step(f"1/4 frontends: {events:,} events per live cluster at {rate:,.0f}/s (activity "
             f"schema version 2 registered half way); loads every {load_interval:g} s")
        run = deployment.run(table, spark, events=events, rate=rate,
                             load_interval_s=load_interval, report=note)
        step("2/4 audit: the frontends' counts per topic, window and source cluster")
        result = audit_deployment(spark, deployment.offline_bootstrap, table, LIVE,
                                  schema_registry_url=deployment.schema_registry_url,
                                  read_committed=True)
    totals = result.totals(lambda w: (w.cluster, w.topic))
    click.echo(table_text(
        ("source", "topic", "windows", "monitored", "loaded", "mismatched windows"),
        [(c, t, *v) for (c, t), v in sorted(totals.items())],
    ))
    if not result.ok:
        raise click.ClickException(f"audit failed: {len(result.mismatches)} of "
                                   f"{len(result.windows)} windows mismatch, "
                                   f"{result.duplicates} duplicate rows")
    click.echo(f"audit passed: {result.rows:,} rows match the monitoring counts of "
               f"{len(result.windows)} windows from {len(LIVE)} live clusters")
    step("3/4 end-to-end latency: generated -> live -> mirror -> offline -> warehouse")
    lat = latency(spark, table, run.loads)
    click.echo(f"{lat.rows:,} rows over {len(run.loads)} loads: mean {lat.mean_s:.1f} s, "
               f"median {lat.p50_s:.1f} s, p99 {lat.p99_s:.1f} s, max {lat.max_s:.1f} s")
    draw_latency_chart(lat, latency_chart)
    step("4/4 report")
    draw_chart(build_report(spark, table), chart)
    step("done")
    click.echo(f"clusters:       {workdir / 'clusters'}\n"
               f"loaded table:   {table} (Parquet, spark.read.parquet)\n"
               f"report chart:   {chart}\n"
               f"latency chart:  {latency_chart}")
