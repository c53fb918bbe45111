"""The ACL authorizer: Kafka's ``StandardAuthorizer`` (and the ZooKeeper-era ``AclAuthorizer``,
whose decisions are the same), in memory and sans IO.

A request is allowed when its principal is a super user; otherwise the ACLs that apply to the
resource are those of its type whose pattern matches its name: the LITERAL pattern of that
name, the LITERAL wildcard ``*``, and every PREFIXED pattern the name starts with. Among those,
an entry applies when its principal is the request's or ``User:*``, its host the request's or
``*``, and its operation the one asked for, ``ALL``, or (ALLOW entries only) one that implies it:
READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS. Any DENY
that applies wins; else any ALLOW that applies allows; else, when no ACL at all matched the
resource (whoever and whatever it is for), ``allow.everyone.if.no.acl.found`` decides, and
when some did the request is denied.

Every method is synchronous and runs to completion, so on one asyncio loop each call sees and
leaves a consistent state; callers on other threads must hand their calls to the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from samsa.config import ACL_AUTHORIZER_CLASS_NAMES, BrokerConfig, ConfigError
from samsa.errors import KafkaError

from .acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_binding,
    check_filter,
    parse_principal,
)

# The resource name authorize_by_resource_type asks about first (Kafka's Authorizer default
# method uses the same one): a super user, a wildcard ALLOW or allow.everyone.if.no.acl.found
# allow it, and then the type.
_PROBE_NAME = "hardcode"

# A filter of a type and a name, of one of these pattern types, matches only these patterns.
_EXACT_KINDS = {
    PatternType.LITERAL: (PatternType.LITERAL,),
    PatternType.PREFIXED: (PatternType.PREFIXED,),
    PatternType.ANY: (PatternType.LITERAL, PatternType.PREFIXED),
}

# One resource pattern's entries, by principal: authorize looks up two principals, not all.
_Entries = dict[str, dict[AccessControlEntry, None]]


@dataclass
class _Patterns:
    """The patterns of one resource type that have ACLs: LITERAL names (``*`` among them),
    PREFIXED names, and how many prefixes there are of each length (a name is checked against
    the prefixes by slicing it at those lengths, one dict lookup each)."""

    literal: dict[str, _Entries] = field(default_factory=dict)
    prefixed: dict[str, _Entries] = field(default_factory=dict)
    prefix_lengths: dict[int, int] = field(default_factory=dict)

    def matching(self, name: str) -> list[_Entries]:
        found = []
        entries = self.literal.get(name)
        if entries:
            found.append(entries)
        if name != WILDCARD_RESOURCE:
            entries = self.literal.get(WILDCARD_RESOURCE)
            if entries:
                found.append(entries)
        if self.prefix_lengths:
            size = len(name)
            for length in self.prefix_lengths:
                if length <= size:
                    entries = self.prefixed.get(name[:length])
                    if entries:
                        found.append(entries)
        return found


@dataclass(frozen=True)
class AclDeleteResult:
    """What one DeleteAcls filter did: the bindings it matched (and removed), or its error."""

    bindings: list[AclBinding]
    error: KafkaError | None = None


def _check_action(operation: AclOperation, resource_type: ResourceType) -> None:
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"cannot authorize on resource type {resource_type.name}")
    if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"cannot authorize operation {operation.name}")


def _applies(entry: AccessControlEntry, operation: AclOperation) -> bool:
    """Whether the entry's operation covers ``operation`` (StandardAuthorizerData.findResult,
    principal and host aside)."""
    if entry.operation is AclOperation.ALL:
        return True
    if entry.permission_type is AclPermissionType.ALLOW:
        if operation is AclOperation.DESCRIBE:
            return entry.operation in IMPLIES_DESCRIBE
        if operation is AclOperation.DESCRIBE_CONFIGS:
            return entry.operation in IMPLIES_DESCRIBE_CONFIGS
    return entry.operation == operation


class AclAuthorizer:
    """ACLs in memory, indexed by resource type and name; see the module's docstring."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # Every ACL, by pattern (what acls() and remove() look through).
        self._acls: dict[ResourcePattern, dict[AccessControlEntry, None]] = {}
        self._index: dict[ResourceType, _Patterns] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    # --- changing the ACLs --------------------------------------------------------------------

    def add(self, bindings: Iterable[AclBinding], *,
            validate: bool = True) -> list[KafkaError | None]:
        """CreateAcls: add each binding that passes :func:`~samsa.security.acl.check_binding`
        (an ACL already there is not an error), and answer each one's error or None.

        ``validate=False`` is for ACLs read back from a store, taken as they are (Kafka loads an
        entry with an unknown operation or permission type; it counts as an ACL of its resource
        and applies to no request); their pattern must still be LITERAL or PREFIXED of a
        concrete resource type, else ValueError."""
        results: list[KafkaError | None] = []
        for binding in bindings:
            if validate:
                try:
                    check_binding(binding)
                except KafkaError as e:
                    results.append(e)
                    continue
            else:
                pattern = binding.pattern
                if not pattern.pattern_type.is_specific or pattern.resource_type in (
                        ResourceType.ANY, ResourceType.UNKNOWN):
                    raise ValueError(f"not a pattern an ACL can have: {pattern}")
            self._insert(binding)
            results.append(None)
        return results

    def remove(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls: every filter is matched against the ACLs as they were before the call
        (a binding two filters match is listed under both, as Kafka's controller answers), then
        every matched binding is removed. A filter with an UNKNOWN part answers INVALID_REQUEST
        (:func:`~samsa.security.acl.check_filter`) and removes nothing."""
        results = self.matching(filters)
        for result in results:
            for binding in result.bindings:
                self._discard(binding)
        return results

    def matching(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """What :meth:`remove` would answer for these filters, removing nothing (a store that
        must write the change elsewhere first asks this, then applies what it wrote)."""
        results = []
        for binding_filter in filters:
            try:
                check_filter(binding_filter)
            except KafkaError as e:
                results.append(AclDeleteResult([], e))
                continue
            results.append(AclDeleteResult(self.acls(binding_filter)))
        return results

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Make ``entries`` the ACLs of ``pattern`` (none: it has no ACLs any more), taken as
        read back from a store (``add(validate=False)``): how a store applies what it holds for
        one pattern, its own changes and other brokers' alike."""
        for entry in list(self._acls.get(pattern, ())):
            self._discard(AclBinding(pattern, entry))
        self.add((AclBinding(pattern, entry) for entry in entries), validate=False)

    def _insert(self, binding: AclBinding) -> None:
        pattern, entry = binding.pattern, binding.entry
        entries = self._acls.setdefault(pattern, {})
        if entry in entries:
            return
        entries[entry] = None
        self._count += 1
        patterns = self._index.setdefault(pattern.resource_type, _Patterns())
        if pattern.pattern_type is PatternType.LITERAL:
            by_principal = patterns.literal.setdefault(pattern.name, {})
        else:
            if pattern.name not in patterns.prefixed:
                size = len(pattern.name)
                patterns.prefix_lengths[size] = patterns.prefix_lengths.get(size, 0) + 1
            by_principal = patterns.prefixed.setdefault(pattern.name, {})
        by_principal.setdefault(entry.principal, {})[entry] = None

    def _discard(self, binding: AclBinding) -> None:
        pattern, entry = binding.pattern, binding.entry
        entries = self._acls.get(pattern)
        if entries is None or entry not in entries:
            return
        del entries[entry]
        if not entries:
            del self._acls[pattern]
        self._count -= 1
        patterns = self._index[pattern.resource_type]
        table = (patterns.literal if pattern.pattern_type is PatternType.LITERAL
                 else patterns.prefixed)
        by_principal = table[pattern.name]
        principal_entries = by_principal[entry.principal]
        del principal_entries[entry]
        if not principal_entries:
            del by_principal[entry.principal]
        if not by_principal:
            del table[pattern.name]
            if pattern.pattern_type is PatternType.PREFIXED:
                size = len(pattern.name)
                patterns.prefix_lengths[size] -= 1
                if not patterns.prefix_lengths[size]:
                    del patterns.prefix_lengths[size]
        if not patterns.literal and not patterns.prefixed:
            del self._index[pattern.resource_type]

    # --- reading them -------------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """DescribeAcls: the bindings the filter matches (all of them without one), grouped by
        pattern."""
        if binding_filter is None:
            binding_filter = AclBindingFilter()
        pattern_filter, entry_filter = binding_filter.pattern_filter, binding_filter.entry_filter
        kind = pattern_filter.pattern_type
        if (pattern_filter.name is not None and kind in _EXACT_KINDS
                and pattern_filter.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)):
            # At most two patterns can match: look them up.
            exact = (ResourcePattern(pattern_filter.resource_type, pattern_filter.name, k)
                     for k in _EXACT_KINDS[kind])
            candidates = [(p, self._acls[p]) for p in exact if p in self._acls]
        else:
            candidates = [(p, entries) for p, entries in self._acls.items()
                          if pattern_filter.matches(p)]
        return [AclBinding(pattern, entry) for pattern, entries in candidates
                for entry in entries if entry_filter.matches(entry)]

    # --- deciding -----------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """May ``principal`` (``Type:name``), connected from ``host`` (the client's address as
        text), perform ``operation`` on the resource ``name`` of ``resource_type``?"""
        _check_action(operation, resource_type)
        if principal in self.super_users:
            return True
        patterns = self._index.get(resource_type)
        matching = patterns.matching(name) if patterns is not None else []
        if not matching:
            return self.allow_everyone_if_no_acl_found
        principals = ((principal,) if principal == WILDCARD_PRINCIPAL
                      else (principal, WILDCARD_PRINCIPAL))
        allowed = False
        for by_principal in matching:
            for who in principals:
                entries = by_principal.get(who)
                if not entries:
                    continue
                for entry in entries:
                    if entry.host != host and entry.host != WILDCARD_HOST:
                        continue
                    if not _applies(entry, operation):
                        continue
                    if entry.permission_type is AclPermissionType.DENY:
                        return False
                    if entry.permission_type is AclPermissionType.ALLOW:
                        allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May ``principal`` perform ``operation`` on at least one resource of this type?
        (Used where a request may create what it names: transactional and idempotent
        producers, CreateTopics' implicit checks.) Kafka's ``Authorizer.authorizeByResourceType``
        as StandardAuthorizer inherits it: allowed if :meth:`authorize` allows the resource
        ``hardcode``; denied by a LITERAL ``*`` DENY; else allowed by a LITERAL ``*`` ALLOW, a
        LITERAL ALLOW whose name no LITERAL DENY names and no PREFIXED DENY prefixes, or a
        PREFIXED ALLOW no PREFIXED DENY prefixes (itself included). Unlike :meth:`authorize`,
        only entries for this operation or ALL count here (no implied DESCRIBE)."""
        _check_action(operation, resource_type)
        if self.authorize(principal, host, operation, resource_type, _PROBE_NAME):
            return True
        patterns = self._index.get(resource_type)
        if patterns is None:
            return False
        principals = ((principal,) if principal == WILDCARD_PRINCIPAL
                      else (principal, WILDCARD_PRINCIPAL))

        def permissions(by_principal: _Entries) -> set[AclPermissionType]:
            found = set()
            for who in principals:
                for entry in by_principal.get(who, ()):
                    if ((entry.host == host or entry.host == WILDCARD_HOST)
                            and entry.operation in (operation, AclOperation.ALL)):
                        found.add(entry.permission_type)
            return found

        deny_literal, allow_literal = set(), []
        wildcard_allow = False
        for name, by_principal in patterns.literal.items():
            found = permissions(by_principal)
            if AclPermissionType.DENY in found:
                if name == WILDCARD_RESOURCE:
                    return False
                deny_literal.add(name)
            if AclPermissionType.ALLOW in found:
                if name == WILDCARD_RESOURCE:
                    wildcard_allow = True
                else:
                    allow_literal.append(name)
        deny_prefixed, allow_prefixed = set(), []
        for name, by_principal in patterns.prefixed.items():
            found = permissions(by_principal)
            if AclPermissionType.DENY in found:
                deny_prefixed.add(name)
            if AclPermissionType.ALLOW in found:
                allow_prefixed.append(name)
        if wildcard_allow:
            return True

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixed for i in range(1, len(name) + 1))

        return (any(name not in deny_literal and not dominated(name) for name in allow_literal)
                or any(not dominated(name) for name in allow_prefixed))


# --- configuration -------------------------------------------------------------------------------


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons, blanks around them and empty ones
    ignored, each ``Type:name`` (StandardAuthorizer.getConfiguredSuperUsers)."""
    users = set()
    for item in (value or "").split(";"):
        item = item.strip()
        if item:
            try:
                parse_principal(item)
            except ValueError as e:
                raise ConfigError(f"Invalid value {value} for configuration super.users: {e}") \
                    from None
            users.add(item)
    return frozenset(users)


def authorizer_from_config(config: BrokerConfig) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, configured with ``super.users`` and
    ``allow.everyone.if.no.acl.found``; None when it is empty (no authorization)."""
    name = config.get("authorizer.class.name")
    if not name:
        return None
    if name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise ConfigError(f"Invalid value {name} for configuration authorizer.class.name: "
                          f"samsa's authorizer is one of {', '.join(ACL_AUTHORIZER_CLASS_NAMES)}")
    return AclAuthorizer(parse_super_users(config.get("super.users")),
                         config.get("allow.everyone.if.no.acl.found"))
