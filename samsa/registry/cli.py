"""``samsa schema-registry``: run a schema registry (as Confluent's
``schema-registry-start schema-registry.properties``).

    samsa schema-registry --bootstrap-server 127.0.0.1:9092 [--listeners http://127.0.0.1:8081]
    samsa schema-registry schema-registry.properties [--override key=value ...]
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from pathlib import Path
from types import FrameType

import click

from samsa.config import parse_properties
from samsa.registry.errors import RegistryError
from samsa.registry.server import RegistryConfigError, SchemaRegistry

_CONNECT_TIMEOUT_S = 5.0


def _check_reachable(bootstrap: str) -> None:
    """One line at once when nothing listens at the bootstrap addresses (librdkafka would
    retry until its timeouts)."""
    problems = []
    for item in bootstrap.split(","):
        host, _, port = item.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)),
                                          timeout=_CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            problems.append(f"{item} ({exc.strerror or exc})")
    raise click.ClickException(f"cannot connect to any bootstrap server: {', '.join(problems)}")


@click.command("schema-registry")
@click.argument("properties", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT",
              help="The Kafka cluster holding the schemas topic (kafkastore.bootstrap.servers).")
@click.option("--listeners", metavar="http://HOST:PORT",
              help="Where to serve the REST API (default http://0.0.0.0:8081).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set a registry config key (Confluent's names), after the properties file.")
def schema_registry(properties: Path | None, bootstrap_server: str | None,
                    listeners: str | None, overrides: tuple[str, ...]) -> None:
    """Run a schema registry speaking Confluent's REST API, its state in the _schemas topic."""
    props: dict[str, str] = {}
    if properties is not None:
        try:
            props.update(parse_properties(properties.read_text().splitlines()))
        except OSError as exc:
            raise click.UsageError(f"cannot read {properties}: {exc.strerror or exc}") from exc
    if bootstrap_server is not None:
        props["kafkastore.bootstrap.servers"] = bootstrap_server
    if listeners is not None:
        props["listeners"] = listeners
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--override takes key=value, got {item!r}")
        props[key.strip()] = value.strip()
    if not props.get("kafkastore.bootstrap.servers"):
        raise click.UsageError("give --bootstrap-server HOST:PORT or a properties file with "
                               "kafkastore.bootstrap.servers")
    try:
        registry = SchemaRegistry(props)
    except RegistryConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    _check_reachable(registry.bootstrap)
    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping)
    try:
        registry.start()
    except (RegistryConfigError, RegistryError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"samsa schema registry is ready: {registry.url} (topic {registry.topic}, "
               f"primary: {registry.wait_for_primary(0) or 'none yet'})", err=True)
    while not stop.wait(1.0):
        pass
    click.echo("samsa schema registry shutting down", err=True)
    registry.stop()
