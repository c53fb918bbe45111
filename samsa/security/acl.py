"""Kafka's ACL model: resource patterns, access control entries, bindings, the filters of
DescribeAcls and DeleteAcls, and what CreateAcls refuses.

The enums carry Kafka's wire codes (``org.apache.kafka.common.resource.ResourceType``,
``PatternType``, ``org.apache.kafka.common.acl.AclOperation``, ``AclPermissionType``); an
unknown code reads as ``UNKNOWN``, as Kafka's ``fromCode``. Names follow Kafka's
``SecurityUtils``: Pascal case (``DescribeConfigs``, ``TransactionalId``, ``Allow``), which is how
the ZooKeeper ACL store writes them.

The data classes take any enum value, ANY and UNKNOWN included, so a request's fields can be
held as sent; :func:`check_binding` and :func:`check_filter` are Kafka's checks of what
CreateAcls and DeleteAcls accept, raising a :class:`~samsa.errors.KafkaError` with Kafka's code
(INVALID_REQUEST) and message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

from samsa.errors import ErrorCode, KafkaError, error

WILDCARD_RESOURCE = "*"
"""A LITERAL pattern with this name matches every resource of its type."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
"""The principal of an entry that applies to every principal (Kafka has no other wildcard:
``Group:*`` is a principal like any other)."""
CLUSTER_NAME = "kafka-cluster"
"""The one resource of type CLUSTER (Kafka's ``Resource.CLUSTER_NAME``)."""
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"
"""Who a client is before (or without) authentication: every PLAINTEXT connection (Kafka's
``KafkaPrincipal.ANONYMOUS``)."""

E = TypeVar("E", bound="_KafkaEnum")


class _KafkaEnum(IntEnum):
    """An enum whose value is Kafka's wire code and whose code 0 is UNKNOWN."""

    @classmethod
    def from_code(cls: type[E], code: int) -> E:
        """Kafka's ``fromCode``: the member with this code, else UNKNOWN."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def from_name(cls: type[E], name: str) -> E:
        """Kafka's ``SecurityUtils`` lookup: the Pascal-case name (``DescribeConfigs``) or its
        upper case (``DESCRIBECONFIGS``, so any case without underscores), else UNKNOWN."""
        table = _NAMES.get(cls)
        if table is None:
            table = {}
            for member in cls:
                table[member.pascal_name] = member
                table[member.pascal_name.upper()] = member
            _NAMES[cls] = table
        found = table.get(name)
        if found is None:
            found = table.get(name.upper())
        return cls(found if found is not None else 0)

    @property
    def pascal_name(self) -> str:
        """Kafka's ``SecurityUtils.toPascalCase``: TRANSACTIONAL_ID -> TransactionalId."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_unknown(self) -> bool:
        return self.value == 0


_NAMES: dict[type, dict[str, _KafkaEnum]] = {}


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """A type a stored pattern can have (LITERAL, PREFIXED), not a filter's ANY or MATCH."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW entry for one of these operations also allows DESCRIBE (DESCRIBE_CONFIGS); a DENY
# entry denies only its own operation (StandardAuthorizerData.IMPLIES_DESCRIBE{,_CONFIGS}).
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), split at the first colon (Kafka's
    ``SecurityUtils.parseKafkaPrincipal``: ``User:`` and ``:x`` pass, ``alice`` does not)."""
    if not text or ":" not in text:
        raise ValueError(
            f"expected a string in format principalType:principalName but got {text}")
    kind, name = text.split(":", 1)
    return kind, name


# --- patterns, entries, bindings ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """Which resources an ACL is about: a LITERAL name (``*``: every resource of the type) or a
    PREFIXED name (every resource whose name starts with it)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    @property
    def is_unknown(self) -> bool:
        return self.resource_type.is_unknown or self.pattern_type.is_unknown


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``Type:name`` or ``User:*``), from where (an address or ``*``), what, ALLOW or DENY."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(
            self.principal, self.host, self.operation, self.permission_type)

    @property
    def is_unknown(self) -> bool:
        return self.operation.is_unknown or self.permission_type.is_unknown


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown


# --- filters -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ResourcePatternFilter. ``resource_type`` ANY matches every type, ``name`` None
    every name. ``pattern_type``: ANY matches patterns of either type whose name *is* ``name``;
    MATCH matches the patterns that would apply to a resource called ``name`` (that literal
    name, the ``*`` wildcard, every prefix of it); LITERAL or PREFIXED only that type."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if (self.resource_type is not ResourceType.ANY
                and self.resource_type != pattern.resource_type):
            return False
        if (self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
                and self.pattern_type != pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        # MATCH
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        raise ValueError(f"Unsupported PatternType: {pattern.pattern_type.name}")

    @property
    def is_unknown(self) -> bool:
        return self.resource_type.is_unknown or self.pattern_type.is_unknown

    def indefinite_field(self) -> str | None:
        """Kafka's findIndefiniteField: why this filter may match more than one pattern."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    @property
    def matches_at_most_one(self) -> bool:
        return self.indefinite_field() is None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's AccessControlEntryFilter: None (principal, host) and ANY (operation, permission
    type) match anything; any other value only itself (``User:*`` and ``*`` included: a filter
    compares entries, it does not authorize)."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != entry.operation:
            return False
        return (self.permission_type is AclPermissionType.ANY
                or self.permission_type == entry.permission_type)

    @property
    def is_unknown(self) -> bool:
        return self.operation.is_unknown or self.permission_type.is_unknown

    def indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation is AclOperation.ANY:
            return "Operation is ANY"
        if self.operation is AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type is AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type is AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A DescribeAcls or DeleteAcls filter; ``AclBindingFilter()`` matches every binding."""

    pattern_filter: ResourcePatternFilter = field(default_factory=ResourcePatternFilter)
    entry_filter: AccessControlEntryFilter = field(default_factory=AccessControlEntryFilter)

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry)

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def indefinite_field(self) -> str | None:
        return self.pattern_filter.indefinite_field() or self.entry_filter.indefinite_field()

    @property
    def matches_at_most_one(self) -> bool:
        return self.indefinite_field() is None


# --- what CreateAcls and DeleteAcls accept ----------------------------------------------------

# ZooKeeper refuses these in a znode name (PathUtils.validatePath), and a binding's name is one
# (/kafka-acl/<type>/<name>): "/" is Kafka's own check; "." and ".." are relative paths.
_ZNODE_ILLEGAL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


def storable_name(name: str) -> bool:
    """Whether a resource name can be a znode name of the ACL store."""
    return "/" not in name and name not in (".", "..") and not _ZNODE_ILLEGAL.search(name)


def check_binding(binding: AclBinding) -> None:
    """Raise INVALID_REQUEST where Kafka refuses to create this binding, with Kafka's message:
    AclApis.handleCreateAcls (the CLUSTER resource's name, an empty name), then the controller's
    AclControlManager.validateNewAcl (types, operation, permission), then the ZooKeeper
    authorizer's checks (a ``Type:name`` principal; a name the store can hold)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise error(ErrorCode.invalid_request,
                    f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise error(ErrorCode.invalid_request, "Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise error(ErrorCode.invalid_request,
                    f"Invalid resourceType {pattern.resource_type.name}")
    if not pattern.pattern_type.is_specific:
        raise error(ErrorCode.invalid_request,
                    f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise error(ErrorCode.invalid_request, f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise error(ErrorCode.invalid_request,
                    f"Invalid permissionType {entry.permission_type.name}")
    try:
        parse_principal(entry.principal)
    except ValueError as e:
        raise error(ErrorCode.invalid_request, str(e)) from None
    if not storable_name(pattern.name):
        raise error(ErrorCode.invalid_request,
                    f"ACL binding contains invalid resource name: {pattern.name}")


def check_filter(binding_filter: AclBindingFilter) -> None:
    """Raise INVALID_REQUEST for a DeleteAcls filter with an UNKNOWN part (Kafka's
    AclControlManager.validateFilter); DescribeAcls refuses the same filters."""
    if binding_filter.pattern_filter.is_unknown:
        raise error(ErrorCode.invalid_request, "Unknown patternFilter.")
    if binding_filter.entry_filter.is_unknown:
        raise error(ErrorCode.invalid_request, "Unknown entryFilter.")


def create_error(binding: AclBinding) -> KafkaError | None:
    """:func:`check_binding` as a value: the error CreateAcls answers for it, or None."""
    try:
        check_binding(binding)
    except KafkaError as e:
        return e
    return None


# --- per resource type ---------------------------------------------------------------------------

SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}
"""The operations that mean something on each resource type (Kafka's
``AclEntry.supportedOperations``; what authorized-operations fields are computed over)."""

AUTHORIZATION_ERRORS: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}
"""The error a denied request answers, by the type of the resource it was denied on (Kafka's
``AclEntry.authorizationError``)."""
