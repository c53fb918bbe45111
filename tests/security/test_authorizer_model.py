"""The authorizer against a model: random ACL sets and requests, every decision compared with a
plain linear scan over all the ACLs that states Kafka's rules directly (no index, no prefix
lengths, no grouping by principal). Names come from a small alphabet with ``*`` and the letters
of ``hardcode`` in it, so that literals, wildcards and prefixes collide often."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.security import AclAuthorizer
from samsa.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

Op, Perm = AclOperation, AclPermissionType
ALLOW, DENY = Perm.ALLOW, Perm.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED

# Few values of each, so that ACLs and requests meet often.
TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:alice"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
ACL_OPS = [Op.ALL, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
           Op.ALTER_CONFIGS, Op.CREATE]
ASKED_OPS = [op for op in ACL_OPS if op is not Op.ALL]
ASKED_PRINCIPALS = ["User:alice", "User:bob", "User:carol", "User:*", "Group:alice"]
ASKED_HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
IMPLIED = {Op.READ: Op.DESCRIBE, Op.WRITE: Op.DESCRIBE, Op.DELETE: Op.DESCRIBE,
           Op.ALTER: Op.DESCRIBE, Op.ALTER_CONFIGS: Op.DESCRIBE_CONFIGS}
names = st.text(alphabet="ah*", min_size=1, max_size=3)


def acl_sets(principals: list[str], hosts: list[str], ops: list[AclOperation],
             max_name: int) -> st.SearchStrategy[list[AclBinding]]:
    return st.lists(st.builds(
        lambda rt, name, pt, principal, host, op, perm: AclBinding(
            ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm)),
        st.sampled_from(TYPES), st.text(alphabet="ah*", min_size=1, max_size=max_name),
        st.sampled_from([LITERAL, PREFIXED]), st.sampled_from(principals),
        st.sampled_from(hosts), st.sampled_from(ops), st.sampled_from([ALLOW, DENY])),
        min_size=1, max_size=20)


bindings = acl_sets(PRINCIPALS, HOSTS, ACL_OPS, 3)
# Denser still, for authorize_by_resource_type, whose outcome turns on an ALLOW and a DENY of
# the same operation meeting (wildcard DENY, a DENY of the same literal, a DENY prefix).
dense_bindings = acl_sets(["User:alice", "User:*"], ["*", "10.0.0.1"],
                          [Op.ALL, Op.READ, Op.DESCRIBE], 2)
super_users = st.sets(st.sampled_from(["User:bob", "User:carol", "Group:alice"]), max_size=2)
Request = tuple[str, str, AclOperation, ResourceType, str]


@st.composite
def requests(draw: st.DrawFn, acls: list[AclBinding], count: int) -> list[Request]:
    """Requests aimed at the ACLs: most take one ACL and ask what it is about (a name its
    pattern matches, its principal and host where they are not wildcards, its operation or one
    it implies); the others are drawn at random."""
    asked = []
    for _ in range(draw(st.integers(1, count))):
        if acls and draw(st.integers(0, 3)):
            b = draw(st.sampled_from(acls))
            name = b.pattern.name
            if b.pattern.pattern_type is PREFIXED:
                name += draw(st.sampled_from(["", "a", "h~"]))
            elif name == "*":
                name = draw(st.sampled_from(["*", "a", "h~"]))
            principal = b.entry.principal
            if principal == "User:*":
                principal = draw(st.sampled_from(ASKED_PRINCIPALS))
            host = b.entry.host if b.entry.host != "*" else draw(st.sampled_from(ASKED_HOSTS))
            op = b.entry.operation
            if op is Op.ALL or draw(st.booleans()):
                op = draw(st.sampled_from(ASKED_OPS))
            elif op in IMPLIED and draw(st.booleans()):
                op = IMPLIED[op]
            asked.append((principal, host, op, b.pattern.resource_type, name))
        else:
            asked.append(draw(st.tuples(
                st.sampled_from(ASKED_PRINCIPALS), st.sampled_from(ASKED_HOSTS),
                st.sampled_from(ASKED_OPS + [Op.ALL, Op.IDEMPOTENT_WRITE]),
                st.sampled_from(TYPES), st.one_of(names, st.sampled_from(["hardcode", ""])))))
    return asked


# --- the model ----------------------------------------------------------------------------------


def pattern_matches(pattern: ResourcePattern, resource_type: ResourceType, name: str) -> bool:
    if pattern.resource_type != resource_type:
        return False
    if pattern.pattern_type is LITERAL:
        return pattern.name == name or pattern.name == "*"
    return name.startswith(pattern.name)


def entry_applies(entry: AccessControlEntry, principal: str, host: str, op: AclOperation,
                  permission: AclPermissionType, implied: bool = True) -> bool:
    if entry.permission_type != permission:
        return False
    if entry.principal not in (principal, "User:*") or entry.host not in (host, "*"):
        return False
    if entry.operation is Op.ALL or entry.operation == op:
        return True
    if implied and permission is ALLOW and op is Op.DESCRIBE:
        return entry.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    if implied and permission is ALLOW and op is Op.DESCRIBE_CONFIGS:
        return entry.operation is Op.ALTER_CONFIGS
    return False


def model_authorize(acls: list[AclBinding], supers: set[str], allow_if_none: bool,
                    principal: str, host: str, op: AclOperation, resource_type: ResourceType,
                    name: str, implied: bool = True) -> bool:
    if principal in supers:
        return True
    found = [b.entry for b in acls if pattern_matches(b.pattern, resource_type, name)]
    if not found:
        return allow_if_none
    if any(entry_applies(e, principal, host, op, DENY, implied) for e in found):
        return False
    return any(entry_applies(e, principal, host, op, ALLOW, implied) for e in found)


def model_by_type(acls: list[AclBinding], supers: set[str], allow_if_none: bool, principal: str,
                  host: str, op: AclOperation, resource_type: ResourceType) -> bool:
    """Kafka's rule restated: the resource 'hardcode' is allowed, or some resource of the type
    is allowed when only entries for this very operation (or ALL) count. Names from outside the
    ACLs' alphabet ("~") stand for every name no ACL mentions."""
    if model_authorize(acls, supers, allow_if_none, principal, host, op, resource_type,
                       "hardcode"):
        return True
    candidates = {"~"} | {b.pattern.name for b in acls} | {b.pattern.name + "~" for b in acls}
    return any(model_authorize(acls, set(), False, principal, host, op, resource_type, name,
                               implied=False)
               for name in candidates)


# --- the properties -----------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(bindings, super_users, st.booleans(), st.data())
def test_authorize_matches_the_model(acls: list[AclBinding], supers: set[str],
                                     allow_if_none: bool, data: st.DataObject) -> None:
    auth = AclAuthorizer(supers, allow_if_none)
    auth.add(acls, validate=False)
    for principal, host, op, resource_type, name in data.draw(requests(acls, 20)):
        assert auth.authorize(principal, host, op, resource_type, name) == model_authorize(
            acls, supers, allow_if_none, principal, host, op, resource_type, name), (
            principal, host, op, resource_type, name)


@settings(max_examples=500, deadline=None)
@given(st.one_of(bindings, dense_bindings), super_users, st.booleans(), st.data())
def test_authorize_by_resource_type_matches_the_model(
        acls: list[AclBinding], supers: set[str], allow_if_none: bool,
        data: st.DataObject) -> None:
    auth = AclAuthorizer(supers, allow_if_none)
    auth.add(acls, validate=False)
    for principal, host, op, resource_type, _ in data.draw(requests(acls, 10)):
        assert auth.authorize_by_resource_type(principal, host, op, resource_type) == \
            model_by_type(acls, supers, allow_if_none, principal, host, op, resource_type), (
                principal, host, op, resource_type)


pattern_filters = st.builds(
    ResourcePatternFilter,
    st.sampled_from([ResourceType.ANY, *TYPES]),
    st.one_of(st.none(), names),
    st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]))
entry_filters = st.builds(
    AccessControlEntryFilter,
    st.one_of(st.none(), st.sampled_from(PRINCIPALS)),
    st.one_of(st.none(), st.sampled_from(HOSTS)),
    st.sampled_from([Op.ANY, *ACL_OPS]),
    st.sampled_from([Perm.ANY, ALLOW, DENY]))
binding_filters = st.builds(AclBindingFilter, pattern_filters, entry_filters)


@settings(max_examples=300, deadline=None)
@given(bindings, st.lists(binding_filters, min_size=1, max_size=4),
       st.data())
def test_describe_and_delete_match_a_scan(acls: list[AclBinding],
                                          filters: list[AclBindingFilter],
                                          data: st.DataObject) -> None:
    auth = AclAuthorizer()
    auth.add(acls, validate=False)
    stored = list(dict.fromkeys(acls))  # adding is idempotent
    assert len(auth) == len(stored)
    for f in filters:
        assert sorted(auth.acls(f), key=repr) == sorted(
            [b for b in stored if f.matches(b)], key=repr)

    results = auth.remove(filters)
    for f, result in zip(filters, results, strict=True):
        assert result.error is None
        assert sorted(result.bindings, key=repr) == sorted(
            [b for b in stored if f.matches(b)], key=repr)
    left = [b for b in stored if not any(f.matches(b) for f in filters)]
    assert sorted(auth.acls(), key=repr) == sorted(left, key=repr)
    assert len(auth) == len(left)
    # The index forgot exactly what was removed.
    for principal, host, op, resource_type, name in data.draw(requests(acls, 10)):
        assert auth.authorize(principal, host, op, resource_type, name) == model_authorize(
            left, set(), False, principal, host, op, resource_type, name)
