"""``samsa leader-election``: kafka-leader-election.sh.

``--election-type PREFERRED|UNCLEAN`` (any case) and exactly one of ``--all-topic-partitions``,
``--topic T --partition P`` or ``--path-to-json-file F`` (Kafka's ``{"partitions": [{"topic":
"foo", "partition": 1}]}``). The request (ElectLeaders) goes through confluent-kafka's admin
client, which finds the controller itself. Output is Kafka's LeaderElectionCommand's, partitions
sorted::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-2
    Valid replica already elected for partitions t-1
    Error completing leader election (PREFERRED) for partition: t-3: NAME: message

A partition that could not be elected makes the exit status 1, with ``samsa: N replica(s) could
not be elected`` on stderr (Kafka's message). Every other failure is one ``samsa:`` line too.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import click
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

from samsa.errors import ErrorCode
from samsa.tools.admin import connect_admin
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    command_config_option,
    describe_error,
    parse_bootstrap,
    read_properties_file,
)
from samsa.tools.reassign_partitions import is_int32, read_json, tp_name

CLIENT_ID = "samsa-leader-election"
ELECTION_TYPES = {"PREFERRED": ElectionType.PREFERRED, "UNCLEAN": ElectionType.UNCLEAN}
TP = tuple[str, int]


def parse_election_data(data: Any, where: str) -> list[TP]:
    """Kafka's parseReplicaElectionData: the partitions of the JSON file, no repeats."""
    if not isinstance(data, dict):
        raise ToolError(f"{where}: Replica election data must be a JSON object with a"
                        " \"partitions\" field")
    if "partitions" not in data:
        raise ToolError(f"{where}: Replica election data is missing \"partitions\" field")
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise ToolError(f"{where}: \"partitions\" must be a list")
    partitions: list[TP] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ToolError(f"{where}: every partition must be a JSON object, got {entry!r}")
        for name in ("topic", "partition"):
            if name not in entry:
                raise ToolError(f"{where}: No such field exists: `{name}`")
        topic, partition = entry["topic"], entry["partition"]
        if not isinstance(topic, str):
            raise ToolError(f"{where}: `topic` must be a string, got {topic!r}")
        if not is_int32(partition):
            raise ToolError(f"{where}: `partition` must be an int32, got {partition!r}")
        partitions.append((topic, partition))
    repeated = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if repeated:
        raise ToolError("Replica election data contains duplicate partitions: "
                        f"[{', '.join(tp_name(tp) for tp in repeated)}]")
    return sorted(set(partitions))


def _error_text(error: object) -> str:
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    return describe_error(error)


def _not_needed(error: object) -> bool:
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    return isinstance(error, KafkaError) and error.code() == ErrorCode.election_not_needed


@click.command("leader-election")
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT",
              help="The broker(s) to connect to: host:port, comma separated.  [required]")
@command_config_option
@click.option("--election-type", "election_type",
              type=click.Choice(sorted(ELECTION_TYPES), case_sensitive=False),
              help="PREFERRED: move leadership to the preferred (first) replica when it is not"
                   " the leader; UNCLEAN: elect a leader from outside the ISR for a partition"
                   " without one.  [required]")
@click.option("--all-topic-partitions", "all_topic_partitions", is_flag=True,
              help="Every partition of the cluster.")
@click.option("--topic", help="The topic of the partition to elect a leader for.")
@click.option("--partition", type=click.IntRange(-(2**31), 2**31 - 1),
              help="With --topic, the partition.")
@click.option("--path-to-json-file", "path_to_json_file",
              type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The partitions: {\"partitions\": [{\"topic\": \"foo\", \"partition\": 1}]}.")
def leader_election(
    bootstrap_server: str | None, command_config: Path | None, election_type: str | None,
    all_topic_partitions: bool, topic: str | None, partition: int | None,
    path_to_json_file: Path | None,
) -> None:
    """Elect partition leaders, as kafka-leader-election.sh does."""
    missing = [name for name, value in (("bootstrap-server", bootstrap_server),
                                        ("election-type", election_type)) if value is None]
    if missing:
        raise click.UsageError(f"Missing required option(s): {', '.join(missing)}")
    assert bootstrap_server is not None and election_type is not None
    chosen = sum((topic is not None, all_topic_partitions, path_to_json_file is not None))
    if chosen != 1:
        raise click.UsageError("One and only one of the following options is required: "
                               "topic, all-topic-partitions, path-to-json-file")
    if topic is not None and partition is None:
        raise click.UsageError("Missing required option(s): partition")
    if topic is None and partition is not None:
        raise click.UsageError("Option partition is only allowed if topic is used")
    parse_bootstrap(bootstrap_server)
    kind = election_type.upper()

    partitions: list[TP] | None = None
    if path_to_json_file is not None:
        partitions = parse_election_data(read_json(path_to_json_file, "--path-to-json-file"),
                                         str(path_to_json_file))
    elif topic is not None:
        assert partition is not None
        partitions = [(topic, partition)]
    extra = read_properties_file(command_config, "--command-config")
    admin, _ = connect_admin(bootstrap_server, CLIENT_ID, extra)
    if partitions == []:
        return  # an empty file: nothing to elect, as Kafka
    # No request_timeout / operation_timeout: confluent-kafka 2.16's elect_leaders fails on
    # any keyword argument (SystemError); librdkafka's default is socket.timeout.ms.
    future = admin.elect_leaders(
        ELECTION_TYPES[kind],
        None if partitions is None else [TopicPartition(t, p) for t, p in partitions],
    )
    try:
        results = future.result(timeout=REQUEST_TIMEOUT_S + 5)
    except FutureTimeout:
        raise ToolError("Timeout waiting for election results") from None
    except KafkaException as exc:
        text = _error_text(exc)
        if text.startswith(("_TIMED_OUT", "TIMED_OUT", "REQUEST_TIMED_OUT")):
            raise ToolError(f"Timeout waiting for election results: {text}") from exc
        if text.startswith("CLUSTER_AUTHORIZATION_FAILED"):
            raise ToolError("Not authorized to perform leader election") from exc
        raise ToolError(text) from exc

    succeeded: list[TP] = []
    noop: list[TP] = []
    failed: dict[TP, str] = {}
    for tp, error in results.items():
        key = (tp.topic, tp.partition)
        if error is None:
            succeeded.append(key)
        elif _not_needed(error):
            noop.append(key)
        else:
            failed[key] = _error_text(error)
    if succeeded:
        click.echo(f"Successfully completed leader election ({kind}) for partitions "
                   + ", ".join(tp_name(tp) for tp in sorted(succeeded)))
    if noop:
        click.echo("Valid replica already elected for partitions "
                   + ", ".join(tp_name(tp) for tp in sorted(noop)))
    if failed:
        for tp in sorted(failed):
            click.echo(f"Error completing leader election ({kind}) for partition:"
                       f" {tp_name(tp)}: {failed[tp]}")
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
