"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topic configs are the keys of ``samsa.config.TOPIC_KEYS``: a topic's overrides are kept in the
topic store and laid over the broker's defaults (``log.segment.bytes`` -> ``segment.bytes``...).
Broker configs are static (``server.properties``) or dynamic (``samsa.cluster.broker_configs``):
the keys Kafka lets change while the broker runs (``samsa.config.DYNAMIC_MODES``), for one broker
(the resource name is its id: a broker answers only for itself, as Kafka's clients send such a
resource to the broker it names) or as the cluster's default (the empty name). Each entry says
where its value comes from, with Kafka's synonyms in Kafka's order: this broker's dynamic value,
the dynamic default, the static value, the default.

Config sources and types use Kafka's numbers (DescribeConfigsResponse.ConfigSource and
ConfigType).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.cluster.topics import topic_name_problem
from samsa.config import (
    BROKER_KEYS,
    DEPRECATED,
    DYNAMIC_MODES,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    Key,
    LogConfig,
    Type,
    broker_key,
    listener_key,
    warn_deprecated,
)
from samsa.errors import ErrorCode, KafkaError, error
from samsa.handlers.authz import MESSAGES, authorize
from samsa.handlers.context import Broker, RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.alter_configs.v2.request import AlterConfigsRequest, AlterConfigsResource
    from kio.schema.describe_configs.v4.request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterConfigsResource as IncrementalAlterConfigsResource,
    )
    from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest

    # A resource of AlterConfigs or of IncrementalAlterConfigs (the same but for the operation)
    AlterResource = AlterConfigsResource | IncrementalAlterConfigsResource

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG
SOURCE_DYNAMIC_BROKER = 2  # DYNAMIC_BROKER_CONFIG
SOURCE_DYNAMIC_DEFAULT = 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# DescribeConfigsResponse.ConfigType
CONFIG_TYPES: dict[Type, int] = {
    Type.BOOLEAN: 1,
    Type.STRING: 2,
    Type.INT: 3,
    Type.LONG: 5,
    Type.DOUBLE: 6,
    Type.LIST: 7,
}

# IncrementalAlterConfigs operations (AlterConfigOp.OpType)
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

R = TypeVar("R", "AlterConfigsResource", "IncrementalAlterConfigsResource")


def config_string(value: Any) -> str | None:
    """A config value as Kafka writes it on the wire (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


# --- synonyms -------------------------------------------------------------------------------------


def _broker_synonym_group(name: str) -> list[str]:
    """The broker keys that set the same thing as ``name``, most precise first
    (Kafka's DynamicBrokerConfig.brokerConfigSynonyms: a listener's override, then its key)."""
    override = listener_key(name)
    if override is not None:
        return [name, override[2]]
    for key in BROKER_KEYS.values():
        group = [key.name, *(s for s, _ in key.synonyms)]
        if key.name == "log.flush.interval.ms":
            group.append("log.flush.scheduler.interval.ms")
        if name in group and len(group) > 1:
            return group
    return [name]


def _synonyms(config: BrokerConfig, names: Iterable[str]) -> list[dict[str, Any]]:
    """Synonym entries of broker keys, Kafka's order (ConfigHelper.configSynonyms): this
    broker's dynamic values, the dynamic defaults, the static values, the defaults. A password
    is never sent (Kafka: null), only that it is set."""
    names = list(names)
    found: list[dict[str, Any]] = []
    for values, source in ((config.dynamic_props(True), SOURCE_DYNAMIC_BROKER),
                           (config.dynamic_props(False), SOURCE_DYNAMIC_DEFAULT),
                           (config.static_values(), SOURCE_STATIC_BROKER)):
        found += [{"name": n, "value": _shown(n, values[n]), "source": source}
                  for n in names if n in values]
    found += [{"name": n, "value": config_string(BROKER_KEYS[n].default),
               "source": SOURCE_DEFAULT}
              for n in names if n in BROKER_KEYS and BROKER_KEYS[n].default is not None]
    return found


def _shown(name: str, value: Any) -> str | None:
    key = broker_key(name)
    return None if key is not None and key.sensitive else config_string(value)


def _broker_key_for_topic_key(name: str) -> str | None:
    for key in BROKER_KEYS.values():
        if key.topic == name:
            return key.name
    return None


def _entry(
    key: Key, value: Any, synonyms: list[dict[str, Any]], read_only: bool,
    include_synonyms: bool, include_documentation: bool,
) -> dict[str, Any]:
    return {
        "name": key.name,
        "value": None if key.sensitive else config_string(value),
        "read_only": read_only,
        "config_source": synonyms[0]["source"] if synonyms else SOURCE_DEFAULT,
        "is_sensitive": key.sensitive,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": CONFIG_TYPES.get(key.type, 0),
        "documentation": key.doc if include_documentation else None,
    }


# --- authorization -------------------------------------------------------------------------------


def _refusal(ctx: RequestContext, operation: AclOperation, resource_type: int,
             name: str) -> ErrorCode | None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker's configs
    (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED); None when allowed (or not a type checked here:
    the handlers refuse those as INVALID_REQUEST)."""
    if ctx.server.authorizer is None:
        return None
    if resource_type == RESOURCE_TOPIC:
        allowed = authorize(ctx, operation, ResourceType.TOPIC, name)
        return None if allowed else ErrorCode.topic_authorization_failed
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
        allowed = authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)
        return None if allowed else ErrorCode.cluster_authorization_failed
    return None


# --- describing ----------------------------------------------------------------------------------


def topic_config_entries(
    server: Broker,
    overrides: Mapping[str, Any],
    names: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[dict[str, Any]]:
    """DescribeConfigs entries of a topic with these overrides (validated already): every topic
    key, or only ``names``, with its effective value, source and synonyms."""
    effective = LogConfig.from_props(overrides, defaults=server.log_manager.defaults).to_props()
    wanted = set(names) if names else None
    entries = []
    for name, key in TOPIC_KEYS.items():
        if wanted is not None and name not in wanted:
            continue
        if name in DEPRECATED and name not in overrides and wanted is None:
            continue  # Kafka 4 removed it: listed only where a topic still sets it
        synonyms: list[dict[str, Any]] = []
        if name in overrides:
            synonyms.append(
                {"name": name, "value": config_string(effective[name]), "source": SOURCE_TOPIC}
            )
        broker_key = _broker_key_for_topic_key(name)
        if broker_key is not None:
            synonyms += _synonyms(server.config, _broker_synonym_group(broker_key))
        entries.append(_entry(key, effective[name], synonyms, False, include_synonyms,
                              include_documentation))
    return entries


def broker_config_entries(
    server: Broker,
    names: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[dict[str, Any]]:
    """DescribeConfigs entries of this broker: every broker key with its effective value (and
    the dynamic-only keys that are set), read-only unless the key is dynamic.

    The synonyms are Kafka's: the key's group (log.retention.ms/minutes/hours...), dynamic and
    static values before defaults, from the first entry that names the key itself on."""
    config = server.config
    wanted = set(names) if names else None
    # the dynamic-only keys and listeners' overrides that are set, under their own names
    dynamic_only = [dataclasses.replace(k, name=n)
                    for n in sorted(set(config.dynamic_props(True))
                                    | set(config.dynamic_props(False)))
                    if (k := broker_key(n)) is not None and n not in BROKER_KEYS]
    entries = []
    for key in [*BROKER_KEYS.values(), *dynamic_only]:
        name = key.name
        if wanted is not None and name not in wanted:
            continue
        synonyms = _synonyms(config, _broker_synonym_group(name))
        while synonyms and synonyms[0]["name"] != name:
            synonyms.pop(0)
        # broker.id -1 means "generate one": show the id this broker runs with.
        value = server.broker_id if name == "broker.id" else config.get(name)
        entries.append(_entry(key, value, synonyms, name not in DYNAMIC_MODES,
                              include_synonyms, include_documentation))
    return entries


def default_broker_config_entries(
    server: Broker,
    names: Iterable[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[dict[str, Any]]:
    """DescribeConfigs entries of the cluster's default (the empty broker name): the dynamic
    defaults that are set, with only their own synonyms (Kafka's ConfigHelper)."""
    wanted = set(names) if names else None
    entries = []
    for name, value in server.config.dynamic_props(False).items():
        key = broker_key(name)
        if key is None or (wanted is not None and name not in wanted):
            continue
        synonyms = [s for s in _synonyms(server.config, _broker_synonym_group(name))
                    if s["source"] == SOURCE_DYNAMIC_DEFAULT]
        entries.append(_entry(key, value, synonyms, name not in DYNAMIC_MODES,
                              include_synonyms, include_documentation))
    return entries


def _check_broker_name(server: Broker, name: str) -> None:
    try:
        broker_id = int(name)
    except ValueError:
        raise error(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != server.broker_id:
        raise error(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {server.broker_id} or empty string, "
            f"but received {name}",
        )


def _existing_topic_overrides(server: Broker, name: str) -> dict[str, str]:
    problem = topic_name_problem(name)
    if problem:
        raise error(ErrorCode.invalid_topic_exception, problem)
    assert server.topics is not None
    topic = server.topics.get(name)
    if topic is None:
        raise error(
            ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        )
    return dict(topic.configs)


def _describe_one(
    ctx: RequestContext, resource: DescribeConfigsResource, synonyms: bool, docs: bool
) -> list[dict[str, Any]]:
    server = ctx.server
    names = resource.configuration_keys
    if resource.resource_type == RESOURCE_TOPIC:
        overrides = _existing_topic_overrides(server, resource.resource_name)
        return topic_config_entries(server, overrides, names, synonyms, docs)
    if resource.resource_type == RESOURCE_BROKER:
        if resource.resource_name == "":
            return default_broker_config_entries(server, names, synonyms, docs)
        _check_broker_name(server, resource.resource_name)
        return broker_config_entries(server, names, synonyms, docs)
    raise error(
        ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}"
    )


@api(32, "DescribeConfigs", 1, 4)
async def describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> dict[str, Any]:
    synonyms = bool(request.include_synonyms)
    docs = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources or ():
        result: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        refused = _refusal(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                           resource.resource_name)
        if refused is not None:
            result.update(error_code=refused, error_message=MESSAGES[refused])
            results.append(result)
            continue
        try:
            result["configs"] = _describe_one(ctx, resource, synonyms, docs)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return {"throttle_time": 0, "results": results}


# --- altering ------------------------------------------------------------------------------------


def _validate_topic_configs(server: Broker, configs: Mapping[str, str]) -> None:
    try:
        LogConfig.from_props(configs, defaults=server.log_manager.defaults)
    except ConfigError as exc:
        raise error(ErrorCode.invalid_config, str(exc)) from None
    warn_deprecated(configs, "topic configuration")


def _check_alter_broker_name(server: Broker, name: str) -> None:
    """A per-broker alter names this broker (Kafka's validateResourceNameIsCurrentNodeId)."""
    try:
        broker_id = int(name)
    except ValueError:
        raise error(
            ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}"
        ) from None
    if broker_id != server.broker_id:
        raise error(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {server.broker_id}, but received {name}",
        )


def _current_configs(server: Broker, resource: AlterResource) -> dict[str, str]:
    """Checks common to both alter APIs (Kafka's order: duplicate keys, null values, the
    resource), then what the resource has now: a topic's overrides, or the dynamic configs of
    this broker or of the cluster's default."""
    names = [c.name for c in resource.configs or ()]
    if len(set(names)) != len(names):
        raise error(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs or ()
             if getattr(c, "config_operation", OP_SET) != OP_DELETE and c.value is None]
    if nulls:
        raise error(
            ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
        )
    if resource.resource_type == RESOURCE_BROKER:
        if resource.resource_name != "":
            _check_alter_broker_name(server, resource.resource_name)
        return server.dynamic_config.current(per_broker=resource.resource_name != "")
    if resource.resource_type != RESOURCE_TOPIC:
        raise error(
            ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}"
        )
    return _existing_topic_overrides(server, resource.resource_name)


def _duplicates(resources: Iterable[AlterResource]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for resource in resources:
        ident = (resource.resource_type, resource.resource_name)
        (duplicates if ident in seen else seen).add(ident)
    return duplicates


def _alter_result(resource: AlterResource, failure: KafkaError | None = None) -> dict[str, Any]:
    return {
        "error_code": failure.code if failure else ErrorCode.none,
        "error_message": failure.message if failure else None,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def _legacy_new_configs(server: Broker, resource: AlterConfigsResource) -> dict[str, str]:
    """AlterConfigs: the resource's whole new set of configs."""
    _current_configs(server, resource)
    # every value (nulls were refused above): the filter tells the type checker so
    return {c.name: c.value for c in resource.configs or () if c.value is not None}


def _list_parts(value: str | None, key: Key) -> list[str]:
    if value is None:
        value = config_string(key.default)
    return [part for part in (value or "").split(",") if part]


def _incremental_new_configs(
    server: Broker, resource: IncrementalAlterConfigsResource
) -> dict[str, str]:
    """IncrementalAlterConfigs: what the resource has now with the operations applied."""
    current = _current_configs(server, resource)
    for change in resource.configs or ():
        if change.config_operation not in _OP_NAMES:
            raise error(
                ErrorCode.invalid_request, f"Unknown operations type {change.config_operation}"
            )
    topic = resource.resource_type == RESOURCE_TOPIC
    new = dict(current)
    for change in resource.configs or ():
        name, op, value = change.name, change.config_operation, change.value
        if op == OP_DELETE:
            new.pop(name, None)
            continue
        assert value is not None  # refused above: only DELETE may have a null value
        if op == OP_SET:
            new[name] = value
        else:
            key = TOPIC_KEYS.get(name) if topic else broker_key(name)
            if key is None and topic:
                raise error(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
            if key is None or key.type is not Type.LIST:
                raise error(
                    ErrorCode.invalid_config,
                    f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.",
                )
            parts = _list_parts(new.get(name), key)
            for item in filter(None, value.split(",")):
                if op == OP_APPEND and item not in parts:
                    parts.append(item)
                elif op == OP_SUBTRACT and item in parts:
                    parts.remove(item)
            new[name] = ",".join(parts)
    return new


async def _apply(server: Broker, resource: AlterResource, configs: dict[str, str],
                 validate_only: bool) -> None:
    """Check the resource's new configs, then (unless ``validate_only``) make them its own."""
    if resource.resource_type == RESOURCE_BROKER:
        await server.dynamic_config.alter(resource.resource_name != "", configs, validate_only)
        return
    _validate_topic_configs(server, configs)
    if not validate_only:
        server.topic_admin.set_topic_configs(resource.resource_name, configs)


async def _alter(
    ctx: RequestContext, requested: Sequence[R] | None, validate_only: bool,
    new_configs: Callable[[Broker, R], dict[str, str]],
) -> dict[str, Any]:
    server = ctx.server
    resources = list(requested or ())
    duplicates = _duplicates(resources)
    responses = []
    for resource in resources:
        if (resource.resource_type, resource.resource_name) in duplicates:
            responses.append(_alter_result(resource, error(
                ErrorCode.invalid_request, "Each resource must appear at most once.")))
            continue
        refused = _refusal(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type,
                           resource.resource_name)
        if refused is not None:
            responses.append({**_alter_result(resource), "error_code": refused})
            continue
        try:
            await _apply(server, resource, new_configs(server, resource), validate_only)
        except KafkaError as exc:
            responses.append(_alter_result(resource, exc))
            continue
        responses.append(_alter_result(resource))
    return {"throttle_time": 0, "responses": responses}


@api(33, "AlterConfigs", 0, 2)
async def alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> dict[str, Any]:
    """Replace the whole set of configs of each topic (its overrides: keys left out return to
    defaults) or broker level (its dynamic configs)."""
    return await _alter(ctx, request.resources, bool(request.validate_only),
                        _legacy_new_configs)


@api(44, "IncrementalAlterConfigs", 0, 1)
async def incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> dict[str, Any]:
    """SET / DELETE / APPEND / SUBTRACT single keys of each topic's overrides or broker
    level's dynamic configs."""
    return await _alter(ctx, request.resources, bool(request.validate_only),
                        _incremental_new_configs)
