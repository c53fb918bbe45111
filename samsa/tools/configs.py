"""``samsa configs``: kafka-configs.sh for topics, brokers, users and clients (--describe,
--alter).

For brokers, as kafka-configs: ``--entity-name <id>`` (or ``--broker``) is one broker's dynamic
configs, ``--entity-default`` (or ``--broker-defaults``) the cluster's default; ``--describe``
lists the dynamic ones (``--all``: every config), and without a name every broker's then the
default's ("Default configs for brokers in the cluster are:"); ``--alter`` sends the whole new
set (the current dynamic configs, those added, less those deleted) with AlterConfigs, to the
broker named (librdkafka cannot name the default's empty resource, so the broker configs go
over ``samsa.tools.wire``).

For users and clients, their quotas (``samsa.tools.client_quotas``: ``--entity-type users
--entity-name alice [--entity-type clients --entity-name app] --alter --add-config
'producer_byte_rate=1024,consumer_byte_rate=2048'``, ``--entity-default`` or
``--user-defaults`` / ``--client-defaults`` for the defaults, ``--delete-config``, and
``--describe`` printing "Quota configs for user-principal 'alice' are
producer_byte_rate=1024.0"); for users also the SCRAM credentials (KIP-554, through the admin
client's Describe/AlterUserScramCredentials): ``--add-config 'SCRAM-SHA-256=[iterations=8192,
password=alice-secret]'`` (iterations 4096 by default; the client salts and hashes the
password, which never reaches the broker), ``--delete-config SCRAM-SHA-256``, and
``--describe`` printing kafka-configs' lines ("SCRAM credential configs for user-principal
'alice' are SCRAM-SHA-256=iterations=8192"), never both in one --alter, as kafka-configs."""

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
from samsa.tools import client_quotas
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
                # users and clients: quotas and SCRAM credentials, not config resources
                "users": ResourceType.UNKNOWN, "clients": ResourceType.UNKNOWN}
SINGULAR = {"topics": "topic", "brokers": "broker", "users": "user", "clients": "client"}
SCRAM_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
                    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
DEFAULT_SCRAM_ITERATIONS = 4096  # kafka-configs' DefaultScramIterations
MIN_SCRAM_ITERATIONS = 4096
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
# the Java exception kafka-configs names when it cannot describe a user's credentials
_EXCEPTIONS = {"DUPLICATE_RESOURCE": "DuplicateResourceException",
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


class _ConfigsCommand(click.Command):
    """Keeps the command line: kafka-configs pairs each --entity-name or --entity-default
    with the --entity-type of the same rank, in the order they were given."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["samsa.configs.args"] = list(args)
        return super().parse_args(ctx, args)


def _entity_names(ctx: click.Context) -> list[str]:
    """The --entity-name values and --entity-default ("") in command-line order."""
    takes_value = {opt for param in ctx.command.params if isinstance(param, click.Option)
                   and not param.is_flag for opt in param.opts}
    args = ctx.meta.get("samsa.configs.args", [])
    names: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--entity-default":
            names.append("")
        elif arg == "--entity-name" and i + 1 < len(args):
            names.append(args[i + 1])
            i += 1
        elif arg.startswith("--entity-name="):
            names.append(arg.split("=", 1)[1])
        elif arg in takes_value:
            i += 1  # its value is not an option
        elif arg == "--":
            break
        i += 1
    return names


@click.command("configs", cls=_ConfigsCommand)
@bootstrap_option
@click.option("--entity-type", "entity_types", multiple=True,
              type=click.Choice(sorted(ENTITY_TYPES)),
              help="The kind of entity: topics, brokers, users or clients (users and clients "
                   "together: a user's client id).")
@click.option("--entity-name", "entity_names", multiple=True,
              help="The topic name, broker id, user name or client id.")
@click.option("--entity-default", "entity_default", is_flag=True,
              help="The default user, client id or broker (for its --entity-type).")
@click.option("--topic", help="Short for --entity-type topics --entity-name TOPIC.")
@click.option("--broker", help="Short for --entity-type brokers --entity-name ID.")
@click.option("--user", help="Short for --entity-type users --entity-name USER.")
@click.option("--client", help="Short for --entity-type clients --entity-name CLIENT_ID.")
@click.option("--user-defaults", "user_defaults", is_flag=True,
              help="Short for --entity-type users --entity-default.")
@click.option("--client-defaults", "client_defaults", is_flag=True,
              help="Short for --entity-type clients --entity-default.")
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
    bootstrap_server: str, entity_types: tuple[str, ...], entity_names: tuple[str, ...],
    entity_default: bool, topic: str | None, broker: str | None, user: str | None,
    client: str | None, user_defaults: bool, client_defaults: bool, broker_defaults: bool,
    describe: bool, alter: bool, describe_all: bool, add_config: tuple[str, ...],
    add_config_file: Path | None, delete_config: tuple[str, ...], command_config: Path | None,
) -> None:
    """Describe and alter topic and broker configs (one broker's or the cluster default's),
    users' and clients' quotas and users' SCRAM credentials, as kafka-configs.sh does."""
    del entity_names, entity_default  # read in command-line order from the context
    types, names = _entities(click.get_current_context(), entity_types, topic, broker, user,
                             client, user_defaults, client_defaults, broker_defaults)
    if describe == alter:
        raise click.UsageError("exactly one of --describe or --alter is required")
    additions = parse_add_config(add_config)
    additions.update(read_properties_file(add_config_file, "--add-config-file"))
    deletions = parse_delete_config(delete_config)
    if describe and (additions or deletions or add_config_file):
        raise click.UsageError("--add-config and --delete-config can only be used with --alter")
    if alter and describe_all:
        raise click.UsageError("--all can only be used with --describe")
    if alter and add_config and add_config_file:
        raise click.UsageError("Only one of --add-config or --add-config-file must be specified")
    extra = read_properties_file(command_config, "--command-config")
    if types[0] in ("users", "clients"):
        _users_and_clients(bootstrap_server, extra, types, names, alter, additions, deletions)
        return
    entity_type = types[0]
    entity_name = names[0] if names else None
    if entity_name == "" and entity_type != "brokers":
        raise click.UsageError(f"--entity-default is for users, clients and brokers, not "
                               f"{entity_type}")
    if alter and entity_name is None:
        raise click.UsageError("--alter requires --entity-name")
    if alter and not (additions or deletions):
        raise click.UsageError(
            "at least one of --add-config, --add-config-file or --delete-config is required"
            " with --alter"
        )
    if entity_type == "brokers":
        _brokers(bootstrap_server, extra, entity_name, describe, describe_all, additions,
                 deletions)
        return
    admin, metadata = connect_admin(bootstrap_server, "samsa-configs", extra)
    resource_type = ENTITY_TYPES[entity_type]
    if describe:
        for name in _names_to_describe(entity_type, entity_name, metadata):
            _describe(admin, entity_type, resource_type, name, describe_all)
        return
    assert entity_name is not None
    _alter(admin, entity_type, resource_type, entity_name, additions, deletions)


def _entities(
    ctx: click.Context, entity_types: tuple[str, ...], topic: str | None,
    broker: str | None, user: str | None, client: str | None, user_defaults: bool,
    client_defaults: bool, broker_defaults: bool,
) -> tuple[list[str], list[str]]:
    """kafka-configs' entityTypes and entityNames ("" for a default), checked as its
    checkArgs checks them."""
    flags = [(topic, "topics"), (client, "clients"), (user, "users"), (broker, "brokers")]
    defaults = [(client_defaults, "clients"), (user_defaults, "users"),
                (broker_defaults, "brokers")]
    generic = list(entity_types)
    names = _entity_names(ctx)
    shorthand_types = [t for v, t in flags if v is not None] + [t for on, t in defaults if on]
    if (generic or names) and shorthand_types:
        raise click.UsageError("--entity-{type,name,default} should not be used in "
                               "conjunction with specific entity flags")
    types = generic + shorthand_types
    names += [v for v, _ in flags if v is not None] + ["" for on, _ in defaults if on]
    duplicated = sorted({t for t in types if types.count(t) > 1})
    if duplicated:
        raise click.UsageError(f"Duplicate entity type(s) specified: {','.join(duplicated)}")
    if not types:
        raise click.UsageError("At least one entity type must be specified (--entity-type "
                               "topics, brokers, users or clients)")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise click.UsageError("Only 'users' and 'clients' entity types may be specified "
                               "together")
    if len(names) > len(types):
        raise click.UsageError("More entity names specified than entity types")
    for entity_type, name in zip(types, names, strict=False):
        if entity_type == "brokers" and name and not _is_int(name):
            raise click.UsageError(
                "the entity name for brokers must be a valid integer broker id, but it is:"
                f" {name!r}")
    return types, names


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
        return [str(int(entity_name))] if entity_type == "brokers" else [entity_name]
    if entity_type == "topics":
        return sorted(metadata.topics)
    return [str(b) for b in sorted(metadata.brokers)]


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


def _brokers(bootstrap: str, extra: dict[str, str], entity_name: str | None, describe: bool,
             describe_all: bool, additions: dict[str, str], deletions: list[str]) -> None:
    """Brokers' configs go over samsa.tools.wire: librdkafka cannot name the default's empty
    resource."""
    security = WireSecurity.from_properties(extra, "samsa configs")
    with WirePool(bootstrap, REQUEST_TIMEOUT_S, "samsa-configs", security) as pool:
        if describe:
            names = ([_broker_name(entity_name)] if entity_name is not None
                     else [str(node.node_id) for node in pool.brokers()] + [""])
            for name in names:
                _describe_broker(pool, name, describe_all)
        else:
            assert entity_name is not None
            _alter_broker(pool, _broker_name(entity_name), additions, deletions)


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


# --- users and clients: quotas and SCRAM credentials -------------------------------------------


def _users_and_clients(bootstrap: str, extra: dict[str, str], types: list[str],
                       names: list[str], alter: bool, additions: dict[str, str],
                       deletions: list[str]) -> None:
    """kafka-configs' describeClientQuotaAndUserScramCredentialConfigs and the users and
    clients half of its alterConfig."""
    if not alter:
        with client_quotas.pool(bootstrap, extra) as pool:
            for entity, values in sorted(client_quotas.describe(pool, types, names),
                                         key=lambda found: str(found[0])):
                click.echo(client_quotas.quota_line(entity, values))
        # SCRAM credentials only for users alone, not their defaults
        if "clients" not in types and "" not in names:
            admin, _ = connect_admin(bootstrap, "samsa-configs", extra)
            _describe_users(admin, names[0] if names else None)
        return
    if len(names) != len(types):
        raise click.UsageError("--entity-name or --entity-default must be specified with each "
                               "--entity-type for --alter")
    if not (additions or deletions):
        raise click.UsageError("At least one of --add-config, --add-config-file, or "
                               "--delete-config must be specified with --alter")
    quota_keys = [k for k in [*additions, *deletions] if client_quotas.is_quota_key(k)]
    scram_keys = [k for k in [*additions, *deletions] if k in SCRAM_MECHANISMS]
    unknown = [k for k in [*additions, *deletions] if k not in quota_keys + scram_keys]
    if types[0] == "clients" or len(types) == 2:
        if unknown or scram_keys:
            raise click.UsageError(
                "Only quota configs can be added or deleted for 'clients' using "
                f"--bootstrap-server. Unexpected config names: {', '.join(unknown + scram_keys)}")
    else:
        if unknown:
            raise click.UsageError(
                "Only quota and SCRAM credential configs can be added or deleted for 'users' "
                f"using --bootstrap-server. Unexpected config names: {', '.join(unknown)}")
        if scram_keys and "" in names:
            raise click.UsageError("The use of --entity-default or --user-defaults is not "
                                   "allowed with User SCRAM Credentials using "
                                   "--bootstrap-server.")
        if scram_keys and quota_keys:
            raise click.UsageError("Cannot alter both quota and SCRAM credential configs "
                                   "simultaneously for 'users' using --bootstrap-server.")
    if quota_keys:
        with client_quotas.pool(bootstrap, extra) as pool:
            client_quotas.alter(pool, types, names, additions, deletions)
    else:
        admin, _ = connect_admin(bootstrap, "samsa-configs", extra)
        _alter_users(admin, names[0], _scram_alterations(names[0], additions, deletions))
    if names[0]:
        click.echo(f"Completed updating config for {SINGULAR[types[0]]} {names[0]}.")
    else:
        click.echo(f"Completed updating default config for {types[0]} in the cluster.")


# --- users: SCRAM credentials ---------------------------------------------------------------


def _scram_alterations(user: str | None, additions: dict[str, str], deletions: list[str]
                       ) -> list[UserScramCredentialAlteration]:
    """kafka-configs' alterUserScramCredentialConfigs: ``SCRAM-SHA-256=[iterations=N,
    password=P]`` upserts (the client salts and hashes P), ``--delete-config SCRAM-SHA-256``
    deletes."""
    if user is None:
        raise click.UsageError("--alter requires --entity-name")
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


def _credentials_text(description: object) -> str:
    infos = sorted(getattr(description, "scram_credential_infos", []),
                   key=lambda info: info.mechanism.value)
    names = {m: n for n, m in SCRAM_MECHANISMS.items()}
    return ", ".join(f"{names.get(i.mechanism, i.mechanism.name)}=iterations={i.iterations}"
                     for i in infos)


def _describe_users(admin: AdminClient, user: str | None) -> None:
    """The SCRAM half of kafka-configs' describeClientQuotaAndUserScramCredentialConfigs."""
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
            if code == "RESOURCE_NOT_FOUND":
                continue  # no credentials: Kafka's admin client lists no such user
            exception = _EXCEPTIONS.get(code, "KafkaException")
            click.echo(f"Error retrieving SCRAM credential configs for user-principal "
                       f"'{name}': {exception}: {message or code}")
            continue
        click.echo(line.format(name, _credentials_text(description)))
