"""``samsa configs``: kafka-configs.sh for topics, brokers and users (--describe, --alter).

For brokers, as kafka-configs: ``--entity-name <id>`` (or ``--broker``) is one broker's dynamic
configs, ``--entity-default`` (or ``--broker-defaults``) the cluster's default; ``--describe``
lists the dynamic ones (``--all``: every config), and without a name every broker's then the
default's ("Default configs for brokers in the cluster are:"); ``--alter`` sends the whole new
set (the current dynamic configs, those added, less those deleted) with AlterConfigs, to the
broker named (librdkafka cannot name the default's empty resource, so the broker configs go
over ``samsa.tools.wire``).

For users, the SCRAM credentials (KIP-554, through the admin client's
Describe/AlterUserScramCredentials): ``--add-config 'SCRAM-SHA-256=[iterations=8192,
password=alice-secret]'`` (iterations 4096 by default; the client salts and hashes the
password, which never reaches the broker), ``--delete-config SCRAM-SHA-256``, and
``--describe`` printing kafka-configs' lines ("SCRAM credential configs for user-principal
'alice' are SCRAM-SHA-256=iterations=8192"). samsa has no client quotas, the other configs of
users in Kafka."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.alter_configs.v0.request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource

from samsa.errors import ErrorCode, kafka_name
from samsa.tools.admin import connect_admin, raise_errors, results, source_id, source_name
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    bootstrap_option,
    command_config_option,
    describe_error,
    handle_client_errors,
    read_properties_file,
)
from samsa.tools.wire import Wire, WirePool, WireSecurity, error_text

ENTITY_TYPES = {"topics": ResourceType.TOPIC, "brokers": ResourceType.BROKER,
                "users": ResourceType.UNKNOWN}  # users: SCRAM credentials, not config resources
SINGULAR = {"topics": "topic", "brokers": "broker", "users": "user"}
SCRAM_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
                    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
DEFAULT_SCRAM_ITERATIONS = 4096  # kafka-configs' DefaultScramIterations
MIN_SCRAM_ITERATIONS = 4096
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
# the Java exception kafka-configs names when it cannot describe a user's credentials
_EXCEPTIONS = {"RESOURCE_NOT_FOUND": "ResourceNotFoundException",
               "DUPLICATE_RESOURCE": "DuplicateResourceException",
               "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
               "UNSUPPORTED_VERSION": "UnsupportedVersionException"}
# Commas and equals signs inside [...] belong to the value: k1=v1,k2=[a,b],k3=v3.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_SPLIT_PAIRS = re.compile("," + _OUTSIDE_BRACKETS)
_SPLIT_KEY = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS)


def parse_add_config(values: Iterable[str]) -> dict[str, str]:
    """Kafka's --add-config syntax: ``k1=v1,k2=[v1,v2],k3=v3`` (brackets are dropped)."""
    configs: dict[str, str] = {}
    for value in values:
        for pair in _SPLIT_PAIRS.split(value):
            parts = _SPLIT_KEY.split(pair)
            if len(parts) != 2 or not parts[0].strip():
                raise click.UsageError(
                    'invalid entity config: all configs to be added must be in the format '
                    f'"key=val", got {pair!r}'
                )
            configs[parts[0].strip()] = re.sub(r"[\[\]]", "", parts[1]).strip()
    return configs


def parse_delete_config(values: Iterable[str]) -> list[str]:
    keys: list[str] = []
    for value in values:
        for key in value.split(","):
            key = key.strip()
            if not key:
                raise click.UsageError(f"--delete-config takes k1,k2,..., got {value!r}")
            if key not in keys:
                keys.append(key)
    return keys


@click.command("configs")
@bootstrap_option
@click.option("--entity-type", "entity_type", type=click.Choice(sorted(ENTITY_TYPES)),
              help="The kind of entity: topics, brokers or users.")
@click.option("--entity-name", "entity_name", help="The topic name, broker id or user name.")
@click.option("--topic", help="Short for --entity-type topics --entity-name TOPIC.")
@click.option("--broker", help="Short for --entity-type brokers --entity-name ID.")
@click.option("--user", help="Short for --entity-type users --entity-name USER.")
@click.option("--entity-default", "entity_default", is_flag=True,
              help="With --entity-type brokers: the cluster's default broker configs.")
@click.option("--broker-defaults", "broker_defaults", is_flag=True,
              help="Short for --entity-type brokers --entity-default.")
@click.option("--describe", is_flag=True, help="Print the entity's configs.")
@click.option("--alter", is_flag=True, help="Change the entity's configs.")
@click.option("--all", "describe_all", is_flag=True,
              help="With --describe: every config, not only the dynamic ones.")
@click.option("--add-config", "add_config", multiple=True, metavar="K1=V1,K2=[V2,V3]",
              help="Configs to set, with --alter.")
@click.option("--add-config-file", "add_config_file",
              type=click.Path(dir_okay=False, path_type=Path),
              help="A properties file of configs to set, with --alter.")
@click.option("--delete-config", "delete_config", multiple=True, metavar="K1,K2",
              help="Configs to remove, with --alter.")
@command_config_option
@handle_client_errors
def configs(
    bootstrap_server: str, entity_type: str | None, entity_name: str | None,
    topic: str | None, broker: str | None, user: str | None, entity_default: bool,
    broker_defaults: bool, describe: bool, alter: bool, describe_all: bool,
    add_config: tuple[str, ...], add_config_file: Path | None, delete_config: tuple[str, ...],
    command_config: Path | None,
) -> None:
    """Describe and alter topic and broker configs and users' SCRAM credentials, as
    kafka-configs.sh does."""
    if broker_defaults:
        if entity_type is not None or entity_name is not None or entity_default:
            raise click.UsageError("--broker-defaults can't be combined with --entity-*")
        entity_type, entity_default = "brokers", True
    entity_type, entity_name = _entity(entity_type, entity_name, topic, broker, user)
    if entity_default:
        if entity_type != "brokers":
            raise click.UsageError("--entity-default is only supported for --entity-type "
                                   "brokers in samsa")
        if entity_name is not None:
            raise click.UsageError("only one of --entity-name or --entity-default may be given")
        entity_name = ""
    if describe == alter:
        raise click.UsageError("exactly one of --describe or --alter is required")
    additions = parse_add_config(add_config)
    additions.update(read_properties_file(add_config_file, "--add-config-file"))
    deletions = parse_delete_config(delete_config)
    if describe and (additions or deletions or add_config_file):
        raise click.UsageError("--add-config and --delete-config can only be used with --alter")
    if alter and describe_all:
        raise click.UsageError("--all can only be used with --describe")
    if alter and entity_name is None:
        raise click.UsageError("--alter requires --entity-name")
    if alter and not (additions or deletions):
        raise click.UsageError(
            "at least one of --add-config, --add-config-file or --delete-config is required"
            " with --alter"
        )
    extra = read_properties_file(command_config, "--command-config")
    if entity_type == "brokers":
        security = WireSecurity.from_properties(extra, "samsa configs")
        with WirePool(bootstrap_server, REQUEST_TIMEOUT_S, "samsa-configs", security) as pool:
            if describe:
                names = ([_broker_name(entity_name)] if entity_name is not None
                         else [str(node.node_id) for node in pool.brokers()] + [""])
                for name in names:
                    _describe_broker(pool, name, describe_all)
            else:
                assert entity_name is not None
                _alter_broker(pool, _broker_name(entity_name), additions, deletions)
        return
    if entity_type == "users":
        scram = _scram_alterations(entity_name, additions, deletions) if alter else []
        admin, _ = connect_admin(bootstrap_server, "samsa-configs", extra)
        if describe:
            _describe_users(admin, entity_name)
        else:
            assert entity_name is not None
            _alter_users(admin, entity_name, scram)
        return
    admin, metadata = connect_admin(bootstrap_server, "samsa-configs", extra)
    resource_type = ENTITY_TYPES[entity_type]
    if describe:
        names = _names_to_describe(entity_type, entity_name, metadata)
        for name in names:
            _describe(admin, entity_type, resource_type, name, describe_all)
        return
    assert entity_name is not None
    _alter(admin, entity_type, resource_type, entity_name, additions, deletions)


def _entity(
    entity_type: str | None, entity_name: str | None, topic: str | None, broker: str | None,
    user: str | None = None,
) -> tuple[str, str | None]:
    """Resolve --entity-type/--entity-name and the --topic/--broker/--user shorthands."""
    shorthands = [s for s in (topic, broker, user) if s is not None]
    if len(shorthands) > 1:
        raise click.UsageError("only one of --topic, --broker or --user may be given")
    if shorthands and (entity_type is not None or entity_name is not None):
        raise click.UsageError("--topic, --broker and --user can't be combined with --entity-*")
    if topic is not None:
        entity_type, entity_name = "topics", topic
    elif broker is not None:
        entity_type, entity_name = "brokers", broker
    elif user is not None:
        entity_type, entity_name = "users", user
    if entity_type is None:
        raise click.UsageError("--entity-type is required (topics, brokers or users)")
    if entity_type == "users" and entity_name is not None and not entity_name:
        raise click.UsageError("--entity-name must not be empty")
    if entity_type == "brokers" and entity_name is not None and not _is_int(entity_name):
        raise click.UsageError(
            "the entity name for brokers must be a valid integer broker id, but it is:"
            f" {entity_name!r}"
        )
    if entity_type == "topics" and entity_name is not None and not entity_name:
        raise click.UsageError("--entity-name must not be empty")
    return entity_type, entity_name


def _is_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _names_to_describe(
    entity_type: str, entity_name: str | None, metadata: ClusterMetadata
) -> list[str]:
    if entity_name is not None:
        return [entity_name]
    return sorted(metadata.topics)


def _dynamic_source(entity_type: str) -> int:
    """Where a config set for this kind of entity comes from (Kafka's ConfigSource id)."""
    if entity_type == "topics":
        return ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return ConfigSource.DYNAMIC_BROKER_CONFIG.value


def _fetch(
    admin: AdminClient, entity_type: str, resource_type: ResourceType, name: str, all_: bool
) -> list[ConfigEntry]:
    futures = admin.describe_configs(
        [ConfigResource(resource_type, name)], request_timeout=REQUEST_TIMEOUT_S
    )
    described, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
    entries: dict[str, ConfigEntry] = next(iter(described.values()))
    source = _dynamic_source(entity_type)
    return sorted(
        (e for e in entries.values() if all_ or source_id(e.source) == source),
        key=lambda e: e.name,
    )


def _value(value: str | None) -> str:
    return "null" if value is None else value


def _describe(
    admin: AdminClient, entity_type: str, resource_type: ResourceType, name: str, all_: bool
) -> None:
    entries = _fetch(admin, entity_type, resource_type, name, all_)
    kind = "All" if all_ else "Dynamic"
    click.echo(f"{kind} configs for {SINGULAR[entity_type]} {name} are:")
    for entry in entries:
        synonyms = ", ".join(
            f"{source_name(s.source)}:{s.name}={_value(s.value)}"
            for s in entry.synonyms.values()
        )
        click.echo(
            f"  {entry.name}={_value(entry.value)} sensitive={str(entry.is_sensitive).lower()}"
            f" synonyms={{{synonyms}}}"
        )


def _alter(
    admin: AdminClient, entity_type: str, resource_type: ResourceType, name: str,
    additions: dict[str, str], deletions: list[str],
) -> None:
    current = {e.name for e in _fetch(admin, entity_type, resource_type, name, False)}
    invalid = [key for key in deletions if key not in current]
    if invalid:
        raise ToolError(f"INVALID_CONFIG: Invalid config(s): {','.join(invalid)}")
    changes = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in additions.items()
    ] + [
        ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
        for key in deletions
    ]
    resource = ConfigResource(resource_type, name, incremental_configs=changes)
    futures = admin.incremental_alter_configs([resource], request_timeout=REQUEST_TIMEOUT_S)
    _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
    click.echo(f"Completed updating config for {SINGULAR[entity_type]} {name}.")


# --- brokers --------------------------------------------------------------------------------

DESCRIBE_CONFIGS, ALTER_CONFIGS = 32, 33
BROKER_RESOURCE = 4


def _broker_name(name: str) -> str:
    """A broker id as Kafka writes it (``01`` -> ``1``); the default stays empty."""
    return str(int(name)) if name else ""


def _broker_wire(pool: WirePool, name: str) -> Wire:
    """The connection a broker resource goes to, as Kafka's admin client sends it: the broker
    it names, any broker for the default."""
    if not name:
        return pool.bootstrap()
    node = next((n for n in pool.brokers() if n.node_id == int(name)), None)
    if node is None:
        raise ToolError(f"Broker {name} is not in the cluster")
    return pool.node(node)


def _broker_entries(pool: WirePool, name: str, all_: bool) -> list[Any]:
    """kafka-configs' getResourceConfig for a broker resource: its dynamic entries (this
    broker's, or the defaults'), every entry with ``all_``, sorted by name."""
    wire = _broker_wire(pool, name)
    wire.version(DESCRIBE_CONFIGS, 1, 1, "DescribeConfigs")
    response = wire.request(DESCRIBE_CONFIGS, 1, DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name=name,
                                           configuration_keys=None),),
        include_synonyms=True))
    result = response.results[0]
    if result.error_code != ErrorCode.none:
        raise ToolError(_failure(result.error_code, result.error_message))
    source = 3 if not name else 2  # DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG
    return sorted((e for e in result.configs if all_ or e.config_source == source),
                  key=lambda e: e.name)


def _failure(code: int, message: str | None) -> str:
    return f"{kafka_name(code)}: {message}" if message else error_text(code)


def _describe_broker(pool: WirePool, name: str, all_: bool) -> None:
    entries = _broker_entries(pool, name, all_)
    if not name:
        click.echo("Default configs for brokers in the cluster are:")
    else:
        click.echo(f"{'All' if all_ else 'Dynamic'} configs for broker {name} are:")
    for entry in entries:
        synonyms = ", ".join(f"{source_name(s.source)}:{s.name}={_value(s.value)}"
                             for s in entry.synonyms)
        click.echo(f"  {entry.name}={_value(entry.value)} "
                   f"sensitive={str(entry.is_sensitive).lower()} "
                   f"synonyms={{{synonyms}}}")


def _alter_broker(pool: WirePool, name: str, additions: dict[str, str],
                  deletions: list[str]) -> None:
    """kafka-configs' broker alter: the whole new set of dynamic configs with AlterConfigs."""
    old = {e.name: e.value for e in _broker_entries(pool, name, False)}
    invalid = [key for key in deletions if key not in old]
    if invalid:
        raise ToolError(f"INVALID_CONFIG: Invalid config(s): {','.join(invalid)}")
    new = {k: v for k, v in {**old, **additions}.items() if k not in deletions}
    hidden = [k for k, v in new.items() if v is None]
    if hidden:
        raise ToolError("INVALID_CONFIG: All sensitive broker config entries must be specified "
                        f"for --alter, missing entries: Set({', '.join(hidden)})")
    wire = _broker_wire(pool, name)
    wire.version(ALTER_CONFIGS, 0, 0, "AlterConfigs")
    response = wire.request(ALTER_CONFIGS, 0, AlterConfigsRequest(
        resources=(AlterConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name=name,
            configs=tuple(AlterableConfig(name=k, value=v) for k, v in new.items())),),
        validate_only=False))
    result = response.responses[0]
    if result.error_code != ErrorCode.none:
        raise ToolError(_failure(result.error_code, result.error_message))
    if name:
        click.echo(f"Completed updating config for broker {name}.")
    else:
        click.echo("Completed updating default config for brokers in the cluster.")


# --- users: SCRAM credentials ---------------------------------------------------------------


def _scram_alterations(user: str | None, additions: dict[str, str], deletions: list[str]
                       ) -> list[UserScramCredentialAlteration]:
    """kafka-configs' alterUserScramCredentialConfigs: ``SCRAM-SHA-256=[iterations=N,
    password=P]`` upserts (the client salts and hashes P), ``--delete-config SCRAM-SHA-256``
    deletes."""
    if user is None:
        raise click.UsageError("--alter requires --entity-name")
    others = [k for k in [*additions, *deletions] if k not in SCRAM_MECHANISMS]
    if others:
        raise click.UsageError(
            f"samsa has no client quotas: only {', '.join(SCRAM_MECHANISMS)} can be set for "
            f"users, got {', '.join(others)}")
    alterations: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(user, SCRAM_MECHANISMS[name]) for name in deletions]
    for name, value in additions.items():
        match = _SCRAM_CREDENTIAL.fullmatch(value)
        if match is None:
            raise click.UsageError(f"Invalid credential property {name}={value}")
        iterations = (int(match.group(1)) if match.group(1) not in (None, "", "-1")
                      else DEFAULT_SCRAM_ITERATIONS)
        if iterations < MIN_SCRAM_ITERATIONS:
            raise click.UsageError(f"Iterations {iterations} is less than the minimum "
                                   f"{MIN_SCRAM_ITERATIONS} required for {name}")
        alterations.append(UserScramCredentialUpsertion(
            user, ScramCredentialInfo(SCRAM_MECHANISMS[name], iterations),
            match.group(2).encode()))
    return alterations


def _alter_users(admin: AdminClient, user: str,
                 alterations: list[UserScramCredentialAlteration]) -> None:
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=REQUEST_TIMEOUT_S)
    _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
    raise_errors(errors)
    click.echo(f"Completed updating config for user {user}.")


def _credentials_text(description: object) -> str:
    infos = sorted(getattr(description, "scram_credential_infos", []),
                   key=lambda info: info.mechanism.value)
    names = {m: n for n, m in SCRAM_MECHANISMS.items()}
    return ", ".join(f"{names.get(i.mechanism, i.mechanism.name)}=iterations={i.iterations}"
                     for i in infos)


def _describe_users(admin: AdminClient, user: str | None) -> None:
    """kafka-configs' describeClientQuotaAndUserScramCredentialConfigs (no quotas here)."""
    line = "SCRAM credential configs for user-principal '{}' are {}"
    if user is None:
        future = admin.describe_user_scram_credentials(request_timeout=REQUEST_TIMEOUT_S)
        described, errors = results({None: future}, REQUEST_TIMEOUT_S + 5)
        raise_errors(errors)
        for name, description in sorted(described[None].items()):
            click.echo(line.format(name, _credentials_text(description)))
        return
    futures = admin.describe_user_scram_credentials([user], request_timeout=REQUEST_TIMEOUT_S)
    for name, future in futures.items():
        try:
            description = future.result(timeout=REQUEST_TIMEOUT_S + 5)
        except KafkaException as exc:
            # (librdkafka leaves a stray byte after this error's message)
            text = "".join(c for c in describe_error(exc) if c.isprintable())
            code, _, message = text.partition(": ")
            exception = _EXCEPTIONS.get(code, "KafkaException")
            click.echo(f"Error retrieving SCRAM credential configs for user-principal "
                       f"'{name}': {exception}: {message or code}")
            continue
        click.echo(line.format(name, _credentials_text(description)))
