"""``samsa mirror mm2.properties`` (connect-mirror-maker.sh)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

import click

from samsa.config import parse_http_listener
from samsa.mirror.config import MirrorConfigError, MirrorMakerConfig
from samsa.mirror.prometheus import serve
from samsa.mirror.runner import MirrorError, MirrorMaker
from samsa.tools.common import ToolError, check_reachable


@click.command("mirror")
@click.argument("properties", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--clusters", "clusters", default=None, metavar="ALIAS[,ALIAS...]",
              help="Run only the flows into these target clusters (default: all).")
@click.option("--worker-id", "worker_id", default=None,
              help="This worker's name among the workers sharing the config, kept across its "
                   "restarts: its static group membership (a restarted worker takes its "
                   "partitions back at once) and, under exactly.once.support=enabled, its "
                   "transactional.id. Default: 0 under exactly-once, none otherwise.")
@click.option("--metrics-listener", "metrics_listener", metavar="http://HOST:PORT",
              help="Serve the metrics (Prometheus' format, MM2's names) at this address.")
@click.option("--progress-interval", "progress_interval", type=click.FloatRange(min=0.1),
              default=10.0, show_default=True, help="Seconds between progress lines (stderr).")
def mirror(properties: Path, clusters: str | None, worker_id: str | None,
           metrics_listener: str | None, progress_interval: float) -> None:
    """Replicate topics between clusters as MirrorMaker 2: samsa mirror mm2.properties"""
    listener = None
    if metrics_listener is not None:
        listener = parse_http_listener(metrics_listener)
        if listener is None:
            raise click.UsageError(f"--metrics-listener takes http://HOST:PORT, got "
                                   f"{metrics_listener!r}")
    if not properties.is_file():
        raise click.UsageError(f"no such properties file: {properties}")
    try:
        config = MirrorMakerConfig.from_file(properties)
    except MirrorConfigError as exc:
        raise click.ClickException(f"{properties}: {exc}") from exc
    if not config.flows():
        raise click.ClickException(f"{properties}: no flow is enabled; set e.g. "
                                   f"{config.clusters[0]}->{config.clusters[-1]}.enabled = true")
    logging.basicConfig(level=logging.WARNING,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    names = [c.strip() for c in clusters.split(",")] if clusters else None
    try:
        maker = MirrorMaker(config, names, worker_id)
    except (MirrorError, MirrorConfigError) as exc:
        raise click.ClickException(str(exc)) from exc
    used = {f.source for f in config.flows()} | {f.target for f in config.flows()}
    for alias in config.clusters:
        if alias in used:  # fail fast, in one line, on a cluster nobody listens for
            try:
                check_reachable(config.client_config(alias, "admin")["bootstrap.servers"])
            except ToolError as exc:
                raise click.ClickException(f"cluster {alias}: {exc.message}") from exc

    def on_signal(signum: int, frame: FrameType | None) -> None:
        maker.stop_event.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    flows = ", ".join(dict.fromkeys(str(s.flow) for s in maker.sources))
    click.echo(f"samsa mirror: replicating {flows}", err=True)
    server = None
    if listener is not None:
        server = serve(maker.progress, *listener)
        host, port = str(server.server_address[0]), server.server_address[1]
        click.echo(f"samsa mirror: metrics at http://{host}:{port}/metrics", err=True)
    try:
        maker.run(progress_interval, lambda line: click.echo(line, err=True))
    except MirrorError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        if server is not None:
            server.shutdown()
    click.echo("samsa mirror: stopped", err=True)
