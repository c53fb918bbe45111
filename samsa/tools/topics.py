"""``samsa topics``: kafka-topics.sh (--create, --list, --describe, --alter, --delete)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from confluent_kafka import TopicCollection, Uuid
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicDescription,
)

from samsa.cluster.topics import topic_name_problem
from samsa.tools.admin import connect_admin, raise_errors, results, source_id
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    bootstrap_option,
    command_config_option,
    handle_client_errors,
    parse_assignments,
    read_properties_file,
)

ACTIONS = ("create", "list", "describe", "alter", "delete")
MAX_REPLICATION_FACTOR = 32767
# Which options each action accepts (beyond --bootstrap-server and --command-config).
ALLOWED: dict[str, set[str]] = {
    "create": {"topic", "partitions", "replication_factor", "config", "if_not_exists"},
    "list": {"topic", "exclude_internal"},
    "describe": {"topic", "exclude_internal", "if_exists", "topics_with_overrides",
                 "under_replicated_partitions", "unavailable_partitions"},
    "alter": {"topic", "partitions", "if_exists"},
    "delete": {"topic", "if_exists"},
}
OPTION_NAMES = {
    "topic": "--topic", "partitions": "--partitions",
    "replication_factor": "--replication-factor", "config": "--config",
    "if_not_exists": "--if-not-exists", "if_exists": "--if-exists",
    "exclude_internal": "--exclude-internal", "topics_with_overrides": "--topics-with-overrides",
    "under_replicated_partitions": "--under-replicated-partitions",
    "unavailable_partitions": "--unavailable-partitions",
}
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def kafka_uuid(uuid: Uuid | None) -> str:
    """A topic id as Kafka prints it: URL-safe base64 of the 16 bytes, no padding."""
    if uuid is None:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    raw = uuid.get_most_significant_bits().to_bytes(8, "big", signed=True)
    raw += uuid.get_least_significant_bits().to_bytes(8, "big", signed=True)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def match_topics(pattern: str | None, names: Iterable[str]) -> list[str]:
    """Kafka's --topic for everything but --create: a name or a regular expression."""
    names = sorted(names)
    if pattern is None:
        return names
    try:
        regex = re.compile(pattern)
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if n == pattern or regex.fullmatch(n)]


@click.command("topics")
@bootstrap_option
@click.option("--create", is_flag=True, help="Create a topic.")
@click.option("--list", "list_", is_flag=True, help="List the topics.")
@click.option("--describe", is_flag=True, help="Describe topics.")
@click.option("--alter", is_flag=True, help="Add partitions to a topic.")
@click.option("--delete", is_flag=True, help="Delete topics.")
@click.option("--topic", help="The topic; a regular expression except with --create.")
@click.option("--partitions", type=int, help="Partitions to create, or to grow to (--alter).")
@click.option("--replication-factor", "replication_factor", type=int,
              help="Replication factor of a new topic.")
@click.option("--config", "config", multiple=True, metavar="KEY=VALUE",
              help="A topic config override for --create; repeatable.")
@click.option("--if-not-exists", "if_not_exists", is_flag=True,
              help="With --create: do nothing when the topic exists.")
@click.option("--if-exists", "if_exists", is_flag=True,
              help="With --alter, --delete, --describe: do nothing when the topic does not exist.")
@click.option("--exclude-internal", "exclude_internal", is_flag=True,
              help="Leave internal topics out of --list and --describe.")
@click.option("--topics-with-overrides", "topics_with_overrides", is_flag=True,
              help="With --describe: only topics that have config overrides.")
@click.option("--under-replicated-partitions", "under_replicated_partitions", is_flag=True,
              help="With --describe: only partitions whose ISR is smaller than the replicas.")
@click.option("--unavailable-partitions", "unavailable_partitions", is_flag=True,
              help="With --describe: only partitions without a leader.")
@command_config_option
@handle_client_errors
def topics(
    bootstrap_server: str, create: bool, list_: bool, describe: bool, alter: bool,
    delete: bool, command_config: Path | None, **options: Any,
) -> None:
    """Create, list, describe, alter and delete topics, as kafka-topics.sh does."""
    chosen = [
        name for name, flag in zip(ACTIONS, (create, list_, describe, alter, delete), strict=True)
        if flag
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "exactly one of --create, --list, --describe, --alter or --delete is required"
        )
    action = chosen[0]
    for name, value in options.items():
        if value not in (None, False, ()) and name not in ALLOWED[action]:
            hint = (
                "; change topic configs with `samsa configs --alter`"
                if name == "config" and action == "alter" else ""
            )
            raise click.UsageError(
                f"option {OPTION_NAMES[name]} can't be used with --{action}{hint}"
            )
    extra = read_properties_file(command_config, "--command-config")
    topic: str | None = options["topic"]
    if action in ("create", "alter") and topic is None:
        raise click.UsageError(f"--{action} requires --topic")
    if action == "create":
        _validate_create(topic, options)
    if action == "alter" and options["partitions"] is None:
        raise click.UsageError(
            "--alter requires --partitions (change topic configs with `samsa configs --alter`)"
        )
    if action == "alter" and options["partitions"] < 1:
        raise click.UsageError("--partitions must be greater than 0")
    configs = parse_assignments(options["config"], "--config")

    admin, metadata = connect_admin(bootstrap_server, "samsa-topics", extra)
    if action == "create":
        assert topic is not None
        _create(admin, metadata, topic, options["partitions"], options["replication_factor"],
                configs, options["if_not_exists"])
        return
    names = match_topics(topic, metadata.topics)
    if options["exclude_internal"]:
        names = _without_internal(admin, names)
    if action == "list":
        for name in names:
            click.echo(name)
        return
    if not names:
        if topic is not None and not options["if_exists"]:
            raise ToolError(
                f"UNKNOWN_TOPIC_OR_PARTITION: Topic '{topic}' does not exist as expected"
            )
        return
    if action == "describe":
        _describe(admin, names, options)
    elif action == "alter":
        _alter(admin, names, options["partitions"])
    else:
        _delete(admin, names)


def _validate_create(topic: str | None, options: dict[str, Any]) -> None:
    assert topic is not None
    problem = topic_name_problem(topic)
    if problem is not None:
        raise click.UsageError(f"illegal topic name: {problem}")
    partitions = options["partitions"]
    if partitions is not None and partitions < 1:
        raise click.UsageError("--partitions must be greater than 0")
    rf = options["replication_factor"]
    if rf is not None and not 1 <= rf <= MAX_REPLICATION_FACTOR:
        raise click.UsageError(
            f"--replication-factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive"
        )


def _without_internal(admin: AdminClient, names: list[str]) -> list[str]:
    if not names:
        return names
    futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    descriptions, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
    return [n for n in names if n not in INTERNAL_TOPICS and not descriptions[n].is_internal]


def _create(
    admin: AdminClient, metadata: ClusterMetadata, topic: str, partitions: int | None,
    replication_factor: int | None, configs: dict[str, str], if_not_exists: bool,
) -> None:
    if if_not_exists and topic in metadata.topics:
        return
    new = NewTopic(
        topic,
        num_partitions=partitions if partitions is not None else -1,
        replication_factor=replication_factor if replication_factor is not None else -1,
        config=configs,
    )
    futures = admin.create_topics(
        [new], operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
    )
    _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    if errors and if_not_exists and all(e.startswith("TOPIC_ALREADY_EXISTS") for e in errors):
        return
    raise_errors(errors)
    click.echo(f"Created topic {topic}.")


def _describe(admin: AdminClient, names: list[str], options: dict[str, Any]) -> None:
    futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    descriptions, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
    overrides = _topic_overrides(admin, names)
    partition_filter = options["under_replicated_partitions"] or options["unavailable_partitions"]
    for name in names:
        description: TopicDescription = descriptions[name]
        configs = overrides.get(name, [])
        if options["topics_with_overrides"] and not configs:
            continue
        partitions = sorted(description.partitions, key=lambda p: p.id)
        if not partition_filter:
            rf = len(partitions[0].replicas) if partitions else 0
            click.echo(
                f"Topic: {name}\tTopicId: {kafka_uuid(description.topic_id)}"
                f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}"
                f"\tConfigs: {','.join(configs)}"
            )
        if options["topics_with_overrides"]:
            continue
        for p in partitions:
            leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else None
            replicas = [n.id for n in p.replicas]
            isr = [n.id for n in p.isr]
            if options["under_replicated_partitions"] and len(isr) >= len(replicas):
                continue
            if options["unavailable_partitions"] and leader is not None:
                continue
            click.echo(
                f"\tTopic: {name}\tPartition: {p.id}"
                f"\tLeader: {leader if leader is not None else 'none'}"
                f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}"
            )


def _topic_overrides(admin: AdminClient, names: list[str]) -> dict[str, list[str]]:
    """Each topic's dynamic (topic-level) configs as ``key=value``, sorted by key."""
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
    described, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
    overrides: dict[str, list[str]] = {}
    for resource, entries in described.items():
        overrides[resource.name] = [
            f"{entry.name}={entry.value}"
            for entry in sorted(entries.values(), key=lambda e: e.name)
            if source_id(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        ]
    return overrides


def _alter(admin: AdminClient, names: list[str], partitions: int) -> None:
    futures = admin.create_partitions(
        [NewPartitions(name, partitions) for name in names],
        operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S,
    )
    _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)


def _delete(admin: AdminClient, names: list[str]) -> None:
    internal = [n for n in names if n in INTERNAL_TOPICS]
    if internal:
        raise ToolError(
            f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for"
            " deletion."
        )
    futures = admin.delete_topics(
        names, operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
    )
    _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
