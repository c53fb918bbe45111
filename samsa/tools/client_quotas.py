"""The client quotas of ``samsa configs`` (kafka-configs' quota half for users and clients),
through DescribeClientQuotas and AlterClientQuotas, which confluent-kafka has no binding for.

An entity is the ``--entity-type users|clients`` given, each with its ``--entity-name`` or
``--entity-default`` (both types for a user's client id); ``--describe`` prints kafka-configs'
lines, ``Quota configs for user-principal 'alice', client-id 'app' are
producer_byte_rate=1024.0`` (values as Java prints a double), and ``--alter`` sets
(``--add-config producer_byte_rate=1024``) and removes (``--delete-config``) quotas."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from samsa.config import CLIENT_QUOTA_KEYS, java_double
from samsa.errors import ErrorCode, kafka_name
from samsa.tools.common import REQUEST_TIMEOUT_S, ToolError
from samsa.tools.wire import WirePool, WireSecurity, build_entity

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
CLIENT_ID = "samsa-configs"
ENTITY_TYPE = {"users": "user", "clients": "client-id"}  # kafka-configs' -> the wire's
_PRINTED = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2

Entity = list[tuple[str, str | None]]  # (the wire's entity type, name; None: the default)


def is_quota_key(key: str) -> bool:
    return key in CLIENT_QUOTA_KEYS


def _schema(api: str, version: int, name: str) -> Any:
    return getattr(importlib.import_module(f"kio.schema.{api}.v{version}.request"), name)


def _components(types: Sequence[str], names: Sequence[str]) -> list[tuple[str, int, str | None]]:
    """kafka-configs' filter: a name is an exact match, "" the default, none any name."""
    out: list[tuple[str, int, str | None]] = []
    for i, entity_type in enumerate(types):
        if i >= len(names):
            out.append((ENTITY_TYPE[entity_type], _SPECIFIED, None))
        elif names[i] == "":
            out.append((ENTITY_TYPE[entity_type], _DEFAULT, None))
        else:
            out.append((ENTITY_TYPE[entity_type], _EXACT, names[i]))
    return out


def describe(pool: WirePool, types: Sequence[str], names: Sequence[str]
             ) -> list[tuple[Entity, dict[str, float]]]:
    """The entities the given types and names match (strictly: no other entity types)."""
    wire = pool.bootstrap()
    version = wire.version(DESCRIBE_CLIENT_QUOTAS, 0, 1, "DescribeClientQuotas")
    request = build_entity(
        _schema("describe_client_quotas", version, "DescribeClientQuotasRequest"),
        components=tuple(build_entity(
            _schema("describe_client_quotas", version, "ComponentData"),
            entity_type=t, match_type=m, match=n) for t, m, n in _components(types, names)),
        strict=True)
    response = wire.request(DESCRIBE_CLIENT_QUOTAS, version, request)
    if response.error_code != ErrorCode.none:
        raise ToolError(f"{kafka_name(response.error_code)}: {response.error_message or ''}"
                        .rstrip(": "))
    return [([(e.entity_type, e.entity_name) for e in entry.entity],
             {v.key: float(v.value) for v in entry.values})
            for entry in response.entries or ()]


def quota_line(entity: Entity, values: dict[str, float]) -> str:
    """kafka-configs' describeQuotaConfigs line."""
    names = dict(entity)
    parts = [f"{_PRINTED[t]} '{names[t]}'" if names[t] is not None else f"the default {_PRINTED[t]}"
             for t in ("user", "client-id", "ip") if t in names]
    entries = ", ".join(f"{k}={java_double(v)}" for k, v in sorted(values.items()))
    return f"Quota configs for {', '.join(parts)} are {entries}"


def alter(pool: WirePool, types: Sequence[str], names: Sequence[str],
          additions: dict[str, str], deletions: Sequence[str]) -> None:
    """kafka-configs' alterQuotaConfigs: the deleted keys must be set; one alteration."""
    current = describe(pool, types, names)
    old = current[0][1] if current else {}
    invalid = [key for key in deletions if key not in old]
    if invalid:
        raise ToolError(f"INVALID_CONFIG: Invalid config(s): {','.join(invalid)}")
    ops: list[tuple[str, float | None]] = []
    for key, text in additions.items():
        try:
            ops.append((key, float(text)))
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: {text}"
                            ) from None
    ops += [(key, None) for key in deletions]
    wire = pool.bootstrap()
    version = wire.version(ALTER_CLIENT_QUOTAS, 0, 1, "AlterClientQuotas")
    api = "alter_client_quotas"
    request = build_entity(
        _schema(api, version, "AlterClientQuotasRequest"),
        entries=(build_entity(
            _schema(api, version, "EntryData"),
            entity=tuple(build_entity(_schema(api, version, "EntityData"),
                                      entity_type=ENTITY_TYPE[t], entity_name=n or None)
                         for t, n in zip(types, names, strict=True)),
            ops=tuple(build_entity(_schema(api, version, "OpData"), key=k,
                                   value=0.0 if v is None else v, remove=v is None)
                      for k, v in ops)),),
        validate_only=False)
    response = wire.request(ALTER_CLIENT_QUOTAS, version, request)
    for entry in response.entries:
        if entry.error_code != ErrorCode.none:
            raise ToolError(f"{kafka_name(entry.error_code)}: {entry.error_message or ''}"
                            .rstrip(": "))


def pool(bootstrap: str, props: dict[str, str]) -> WirePool:
    return WirePool(bootstrap, REQUEST_TIMEOUT_S, CLIENT_ID,
                    WireSecurity.from_properties(props, "samsa configs"))
