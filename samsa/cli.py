"""The ``samsa`` command. Each tool prints one line to stderr and exits non-zero on an error.

``server`` and ``dump-log`` live here; the client tools (``topics``, ``configs``, ``produce``,
``consume``, ``acls``, ...) live in ``samsa.tools``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

import click

from samsa import __version__
from samsa.config import parse_properties
from samsa.errors import KafkaError
from samsa.mirror.cli import mirror
from samsa.pipeline.cli import pipeline
from samsa.pipeline_demo import demo_command
from samsa.records.batch import Attr, BatchHeader, iter_headers
from samsa.records.control import read_marker
from samsa.records.record import decode_records
from samsa.registry.cli import schema_registry
from samsa.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from samsa.tools.acls import acls
from samsa.tools.cluster import cluster
from samsa.tools.configs import configs
from samsa.tools.console import consume, produce
from samsa.tools.groups import groups
from samsa.tools.leader_election import leader_election
from samsa.tools.log_dirs import log_dirs
from samsa.tools.offsets import delete_records, get_offsets
from samsa.tools.perf import consumer_perf_test, producer_perf_test
from samsa.tools.reassign_partitions import reassign_partitions
from samsa.tools.topics import topics
from samsa.tools.transactions import transactions

# Kafka's tools, as samsa subcommands
COMMANDS: tuple[click.Command, ...] = (
    topics, configs, produce, consume, groups, transactions, reassign_partitions,
    leader_election, log_dirs, get_offsets, delete_records, producer_perf_test,
    consumer_perf_test, acls, cluster, schema_registry, mirror,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="samsa")
def main() -> None:
    """samsa: Apache Kafka rebuilt in Python."""


@main.command("server")
@click.argument(
    "properties", required=False, type=click.Path(dir_okay=False, path_type=Path)
)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set a broker config key (Kafka's names), after the properties file.")
def server(properties: Path | None, overrides: tuple[str, ...]) -> None:
    """Run a broker: samsa server [server.properties] [--override key=value ...]"""
    props: dict[str, str] = {}
    if properties is not None:
        if not properties.is_file():
            raise click.UsageError(f"no such properties file: {properties}")
        props.update(parse_properties(properties.read_text().splitlines()))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--override takes key=value, got {item!r}")
        props[key.strip()] = value.strip()
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s"
    )
    asyncio.run(_serve(props))


async def _serve(props: dict[str, str]) -> None:
    from samsa.server.kafka_server import KafkaServer

    kafka = KafkaServer(props)
    await kafka.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    click.echo(f"samsa broker {kafka.broker_id} is ready: bootstrap.servers="
               f"{kafka.bootstrap_servers}", err=True)
    await stop.wait()
    click.echo("samsa broker shutting down", err=True)
    await kafka.stop()


@main.command("ui")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT",
              help="The cluster to show: host:port, comma separated.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="The console's HTTP port.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address the console listens on.")
@click.option("--command-config", "command_config",
              type=click.Path(dir_okay=False, path_type=Path),
              help="A properties file of client configs (SASL, TLS) for the cluster.")
@click.option("--metrics-url", metavar="URL",
              help="The broker's Prometheus endpoint (http://host:port/metrics).")
@click.option("--schema-registry", metavar="URL", help="A schema registry, to decode Avro.")
@click.option("--login-file", type=click.Path(dir_okay=False, path_type=Path),
              help="user:password lines: every page asks for a login.")
@click.option("--certfile", type=click.Path(dir_okay=False, path_type=Path),
              help="A PEM certificate (chain): serve HTTPS.")
@click.option("--keyfile", type=click.Path(dir_okay=False, path_type=Path),
              help="The PEM private key of --certfile.")
def ui(bootstrap_server: str, port: int, host: str, command_config: Path | None,
       metrics_url: str | None, schema_registry: str | None, login_file: Path | None,
       certfile: Path | None, keyfile: Path | None) -> None:
    """Serve the web console: samsa ui --bootstrap-server HOST:PORT [--port 8080]"""
    from samsa.console.serve import ConsoleOptions, build_config, serve
    from samsa.tools.common import parse_bootstrap, read_properties_file

    parse_bootstrap(bootstrap_server)
    options = ConsoleOptions(
        bootstrap_servers=bootstrap_server, host=host, port=port,
        client_config=read_properties_file(command_config, "--command-config") or None,
        metrics_url=metrics_url, schema_registry=schema_registry, login_file=login_file,
        certfile=certfile, keyfile=keyfile,
    )
    try:
        config = build_config(options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    logging.basicConfig(
        level=logging.WARNING, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s"
    )
    click.echo(f"samsa ui: {options.url} (cluster {bootstrap_server})", err=True)
    serve(config)


@main.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--print-data-log", is_flag=True, help="Print each record's key, value and headers.")
def dump_log(files: tuple[Path, ...], print_data_log: bool) -> None:
    """Print the batches (and records) of segment .log files, or the entries of .txnindex
    files, as kafka-dump-log does."""
    for path in files:
        if not path.is_file():
            raise click.UsageError(f"no such segment file: {path}")
        if path.suffix == TXN_INDEX_SUFFIX:
            click.echo(f"Dumping {path}")
            for t in TransactionIndex(path).entries:
                click.echo(f"version: 0 producerId: {t.producer_id} firstOffset: "
                           f"{t.first_offset} lastOffset: {t.last_offset} lastStableOffset: "
                           f"{t.last_stable_offset}")
            continue
        data = path.read_bytes()
        click.echo(f"Dumping {path}")
        end = 0
        for pos, h in iter_headers(data):
            end = pos + h.size
            # Kafka labels a batch's timestamps with its type; LogAppendTime records all carry
            # the batch's max timestamp (the broker's clock at append).
            time_type = "LogAppendTime" if h.log_append_time else "CreateTime"
            click.echo(
                f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count}"
                f" position: {pos} size: {h.size} magic: {h.magic}"
                f" compresscodec: {h.compression.name.lower()} crc: {h.crc}"
                f" isTransactional: {str(h.is_transactional).lower()}"
                f" isControl: {str(h.is_control).lower()}"
                f" deleteHorizonMs: {_delete_horizon(h)}"
                f" producerId: {h.producer_id} producerEpoch: {h.producer_epoch}"
                f" baseSequence: {h.base_sequence} partitionLeaderEpoch: {h.leader_epoch}"
                f" {time_type}: {h.max_timestamp}"
            )
            if print_data_log:
                try:
                    for r in decode_records(memoryview(data)[pos:end]):
                        headers = ",".join(f"{k}:{v!r}" for k, v in r.headers)
                        timestamp = h.max_timestamp if h.log_append_time else r.timestamp
                        if h.is_control:
                            marker = read_marker(memoryview(data)[pos:end])
                            if marker is not None:
                                click.echo(
                                    f"| offset: {r.offset} {time_type}: {timestamp}"
                                    f" endTxnMarker: {'COMMIT' if marker.commit else 'ABORT'}"
                                    f" coordinatorEpoch: {marker.coordinator_epoch}"
                                )
                                continue
                        click.echo(
                            f"| offset: {r.offset} {time_type}: {timestamp}"
                            f" key: {r.key!r} payload: {r.value!r} headers: [{headers}]"
                        )
                except KafkaError as exc:
                    click.echo(f"| cannot decode records: {exc}")
        if end != len(data):
            click.echo(f"Found {len(data) - end} trailing bytes at position {end} (a torn batch)")


def _delete_horizon(header: BatchHeader) -> str:
    """As kafka-dump-log prints it: set by the log cleaner on batches holding tombstones."""
    if header.attributes & Attr.DELETE_HORIZON:
        return f"OptionalLong[{header.base_timestamp}]"
    return "OptionalLong.empty"


for _command in COMMANDS:
    main.add_command(_command)
pipeline.add_command(demo_command)
main.add_command(pipeline)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def run() -> None:
    """Entry point that turns any uncaught error into one line on stderr."""
    try:
        main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"samsa: {_one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except (KafkaError, OSError, ValueError) as exc:
        click.echo(f"samsa: {_one_line(str(exc))}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    run()
