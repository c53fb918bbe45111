"""How ACLs are stored, in Kafka's ZooKeeper layout (``kafka.zk.ZkAclStore``, ``ResourceZNode``,
``AclEntry``): pure encode and decode functions, so that the ZooKeeper store writes what Kafka's
tools and brokers read and a single-node store can keep the same nodes in a file.

One node per resource pattern, named by its type (Pascal case) and its name::

    /kafka-acl/Topic/orders                   LITERAL patterns (``*`` too)
    /kafka-acl-extended/prefixed/Group/app-   PREFIXED patterns

whose data lists the pattern's entries::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                          "operation":"Read","host":"*"}]}

A change to a pattern is announced by a sequential node ``acl_changes_<n>``: under
``/kafka-acl-changes`` for a LITERAL pattern (data ``TOPIC:orders``), under
``/kafka-acl-extended-changes`` for the others (a small JSON object).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any, TypeVar

from .acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
)

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACLS_VERSION = 1
CHANGE_EVENT_VERSION = 1

E = TypeVar("E", bound=IntEnum)


def acl_root(pattern_type: PatternType) -> str:
    """The root of a pattern type's nodes: /kafka-acl or /kafka-acl-extended/<type lower case>."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_ROOT
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_ROOT}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


ACL_ROOTS = (acl_root(PatternType.LITERAL), acl_root(PatternType.PREFIXED))
"""Where a loader looks: ``<root>/<ResourceType>/<name>`` below each."""


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{acl_root(pattern_type)}/{resource_type.pascal_name}"


def resource_path(pattern: ResourcePattern) -> str:
    """The node of a pattern's ACLs. The name is the last path element as it is (Kafka does not
    escape it): CreateAcls refuses names that cannot be one (``acl.storable_name``)."""
    if "/" in pattern.name or not pattern.name:
        raise ValueError(f"Invalid resource name for an ACL node: {pattern.name!r}")
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def pattern_from_path(path: str) -> ResourcePattern:
    """The pattern whose node this is (:func:`resource_path` reversed). A type Kafka does not
    know reads as UNKNOWN (Kafka's loader skips those, with a warning)."""
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        root = acl_root(pattern_type) + "/"
        if path.startswith(root):
            parts = path[len(root):].split("/")
            if len(parts) == 2 and parts[0] and parts[1]:
                return ResourcePattern(ResourceType.from_name(parts[0]), parts[1], pattern_type)
    raise ValueError(f"Not an ACL node: {path}")


def _entry_json(entry: AccessControlEntry) -> dict[str, str]:
    return {"principal": entry.principal, "permissionType": entry.permission_type.pascal_name,
            "operation": entry.operation.pascal_name, "host": entry.host}


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern node's data (Kafka's ``AclEntry.toJsonCompatibleMap``), entries in a stable
    order (Kafka keeps them in a set, so readers must not care)."""
    ordered = sorted(set(entries), key=lambda e: (e.principal, e.host, e.operation,
                                                  e.permission_type))
    body = {"version": ACLS_VERSION, "acls": [_entry_json(e) for e in ordered]}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def decode_acls(data: bytes | None) -> list[AccessControlEntry]:
    """A pattern node's entries (Kafka's ``AclEntry.fromBytes``): none for an empty node;
    ValueError for another version, a missing field or a principal that is not ``Type:name``;
    an operation or permission type Kafka does not name reads as UNKNOWN, as in Kafka."""
    if not data:
        return []
    body = json.loads(data)
    if body is None:
        return []
    if not isinstance(body, dict) or body.get("version") != ACLS_VERSION:
        raise ValueError(f"Unsupported ACL node version: {data!r}")
    entries = []
    for item in _list(body, "acls"):
        principal = _text(item, "principal")
        parse_principal(principal)
        entries.append(AccessControlEntry(
            principal, _text(item, "host"), AclOperation.from_name(_text(item, "operation")),
            AclPermissionType.from_name(_text(item, "permissionType"))))
    return entries


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise ValueError(f"ACL node field {key!r} is not a list")
    return value


def _text(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, str):
        raise ValueError(f"ACL entry field {key!r} is not a string")
    return value


def acl_nodes(bindings: Iterable[AclBinding]) -> dict[str, bytes]:
    """Every node the bindings make: path -> data, one per pattern."""
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    return {resource_path(pattern): encode_acls(entries)
            for pattern, entries in by_pattern.items()}


def bindings_from_nodes(nodes: Mapping[str, bytes | None]) -> list[AclBinding]:
    """The bindings stored in these nodes (path -> data); nodes of a resource type Kafka does
    not know are skipped, as Kafka's loader does."""
    bindings: list[AclBinding] = []
    for path, data in nodes.items():
        pattern = pattern_from_path(path)
        if pattern.resource_type is ResourceType.UNKNOWN:
            continue
        bindings.extend(AclBinding(pattern, entry) for entry in decode_acls(data))
    return bindings


# --- change notifications ---------------------------------------------------------------------


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The sequential node announcing a change to a pattern's ACLs: (path prefix to create
    with a sequence number, data). LITERAL: ``TOPIC:name`` under /kafka-acl-changes (Kafka's
    LiteralAclChangeStore, the enum's name); others: JSON under /kafka-acl-extended-changes."""
    if pattern.pattern_type is PatternType.LITERAL:
        data = f"{pattern.resource_type.name}:{pattern.name}".encode()
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", data
    if pattern.pattern_type is PatternType.PREFIXED:
        event = {"version": CHANGE_EVENT_VERSION, "resourceType": pattern.resource_type.name,
                 "name": pattern.name, "patternType": pattern.pattern_type.name}
        data = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
        return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", data
    raise ValueError(f"Invalid pattern type: {pattern.pattern_type.name}")


def pattern_from_change(changes_root: str, data: bytes) -> ResourcePattern:
    """The pattern a change node under ``changes_root`` announces (:func:`change_notification`
    reversed). Types are read as Kafka's ``fromString`` does (UNKNOWN when not a type)."""
    text = data.decode()
    if changes_root == LITERAL_CHANGES:
        if ":" not in text:
            raise ValueError(
                f"expected a string in format ResourceType:ResourceName but got {text}")
        kind, name = text.split(":", 1)
        return ResourcePattern(_by_enum_name(ResourceType, kind.upper()),
                               name, PatternType.LITERAL)
    if changes_root == EXTENDED_CHANGES:
        event = json.loads(text)
        if not isinstance(event, dict):
            raise ValueError(f"Failed to parse ACL change event: {text}")
        version = event.get("version")
        if not isinstance(version, int) or version > CHANGE_EVENT_VERSION:
            raise ValueError(f"Acl change event received for unsupported version: {version}")
        pattern_type = _by_enum_name(PatternType, _text(event, "patternType"))
        if not pattern_type.is_specific:
            raise ValueError(f"Invalid pattern type in ACL change event: {text}")
        return ResourcePattern(
            _by_enum_name(ResourceType, _text(event, "resourceType").upper()),
            _text(event, "name"), pattern_type)
    raise ValueError(f"Not an ACL change root: {changes_root}")


def _by_enum_name(enum: type[E], name: str) -> E:
    """Java's ``Enum.valueOf`` by the constant's name, else the enum's UNKNOWN (code 0)."""
    member = enum.__members__.get(name)
    return member if member is not None else enum(0)
