"""``samsa log-dirs``: kafka-log-dirs.sh.

``--describe`` asks each broker (``--broker-list 1,2``, default every broker) for its log
directories (DescribeLogDirs, over samsa's own wire client: confluent-kafka has no binding for
it) and prints what Kafka's LogDirsCommand prints, the partitions filtered by ``--topic-list``::

    Querying brokers for log directories information
    Received log directory information from brokers 1
    {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":1151,
    "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/var/lib/samsa"}]}],"version":1}

A directory that failed shows its error as Kafka's exception class name. Brokers that do not
exist, a broker that refuses (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster),
or one that cannot be reached: one ``samsa:`` line and exit status 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

from samsa.errors import ErrorCode
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    command_config_option,
    read_properties_file,
)
from samsa.tools.wire import WirePool, WireSecurity, error_text, exception_class

DESCRIBE_LOG_DIRS = 35
CLIENT_ID = "samsa-log-dirs"
def parse_ids(value: str | None, option: str) -> list[int] | None:
    if value is None or not value.strip():
        return None
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.UsageError(f"{option} must be comma-separated broker ids, "
                               f"got {value!r}") from None


def describe(pool: WirePool, broker_ids: list[int] | None, topics: set[str]
             ) -> tuple[list[int], dict[str, Any]]:
    nodes = {node.node_id: node for node in pool.brokers()}
    wanted = sorted(nodes) if broker_ids is None else broker_ids
    missing = [b for b in wanted if b not in nodes]
    if missing:
        raise ToolError(f"ERROR: The given brokers do not exist from --broker-list: "
                        f"{','.join(map(str, missing))}. Current existent brokers: "
                        f"{','.join(map(str, sorted(nodes)))}")
    brokers = []
    for broker_id in wanted:
        wire = pool.node(nodes[broker_id])
        version = wire.version(DESCRIBE_LOG_DIRS, 1, 4, "DescribeLogDirs")
        answer = wire.request(DESCRIBE_LOG_DIRS, version, DescribeLogDirsRequest(topics=None))
        code = getattr(answer, "error_code", ErrorCode.none)
        if code != ErrorCode.none:
            raise ToolError(f"broker {broker_id}: {error_text(code)}")
        brokers.append({"broker": broker_id, "logDirs": [{
            "partitions": [
                {"partition": f"{topic.name}-{p.partition_index}", "size": p.partition_size,
                 "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                for topic in result.topics if not topics or topic.name in topics
                for p in topic.partitions],
            "error": exception_class(result.error_code),
            "logDir": result.log_dir,
        } for result in answer.results]})
    return wanted, {"brokers": brokers, "version": 1}


@click.command("log-dirs")
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT",
              help="The broker(s) to connect to: host:port, comma separated.  [required]")
@command_config_option
@click.option("--describe", "describe_flag", is_flag=True,
              help="Describe the brokers' log directories.")
@click.option("--broker-list", "broker_list", metavar="0,1,...",
              help="The brokers to query (default: every broker).")
@click.option("--topic-list", "topic_list", metavar="t1,t2,...",
              help="Only these topics' partitions (default: every topic).")
def log_dirs(bootstrap_server: str | None, command_config: Path | None, describe_flag: bool,
             broker_list: str | None, topic_list: str | None) -> None:
    """Describe the brokers' log directories, as kafka-log-dirs.sh does."""
    _run(bootstrap_server, command_config, describe_flag, broker_list, topic_list)


def _run(bootstrap_server: str | None, command_config: Path | None, describe_flag: bool,
         broker_list: str | None, topic_list: str | None) -> None:
    if bootstrap_server is None:
        raise click.UsageError("Missing required argument \"[bootstrap-server]\"")
    if not describe_flag:
        raise click.UsageError("Missing required argument \"[describe]\"")
    broker_ids = parse_ids(broker_list, "--broker-list")
    topics = {t.strip() for t in (topic_list or "").split(",") if t.strip()}
    security = WireSecurity.from_properties(
        read_properties_file(command_config, "--command-config"), "samsa log-dirs")
    click.echo("Querying brokers for log directories information")
    with WirePool(bootstrap_server, REQUEST_TIMEOUT_S, CLIENT_ID, security) as pool:
        queried, described = describe(pool, broker_ids, topics)
    click.echo(f"Received log directory information from brokers "
               f"{','.join(map(str, queried))}")
    click.echo(json.dumps(described, separators=(",", ":")))
