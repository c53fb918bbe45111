"""The ACL authorizer, case by case, in the style of Kafka's StandardAuthorizerTest,
AuthorizerTest and BaseAuthorizerTest (authorizeByResourceType): literal, prefixed and wildcard
patterns, the wildcard principal, hosts, DENY over ALLOW, implied operations, super users,
allow.everyone.if.no.acl.found, the filters of DescribeAcls and DeleteAcls, and the config keys
that build it."""

from __future__ import annotations

import pytest

from samsa.config import BrokerConfig, ConfigError
from samsa.errors import ErrorCode
from samsa.security import AclAuthorizer, authorizer_from_config
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
from samsa.security.authorizer import parse_super_users

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
READ, WRITE, DESCRIBE, ALL = Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL
HOST = "192.168.0.1"
CONCRETE_OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)]


def acl(resource_type: ResourceType, name: str, pattern_type: PatternType, principal: str,
        host: str, operation: AclOperation, permission: AclPermissionType) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


def authorizer(*bindings: AclBinding, super_users: tuple[str, ...] = ("User:superman",),
               allow_everyone: bool = False) -> AclAuthorizer:
    auth = AclAuthorizer(super_users, allow_everyone)
    assert auth.add(bindings) == [None] * len(bindings)
    return auth


def allowed(auth: AclAuthorizer, user: str, pairs: list[tuple[AclOperation, str]],
            resource_type: ResourceType = TOPIC, host: str = HOST) -> list[bool]:
    return [auth.authorize(f"User:{user}", host, op, resource_type, name) for op, name in pairs]


# --- StandardAuthorizerTest ---------------------------------------------------------------------


def foo_acl(op: AclOperation, permission: AclPermissionType) -> AclBinding:
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", op, permission)


def test_find_result_implication() -> None:
    for op in (DESCRIBE, READ, WRITE, Op.DELETE, Op.ALTER):  # these imply DESCRIBE
        assert allowed(authorizer(foo_acl(op, ALLOW)), "bob", [(DESCRIBE, "foo_bar")]) == [True]
    assert allowed(authorizer(foo_acl(Op.CREATE, ALLOW)), "bob", [(DESCRIBE, "foo_bar")]) \
        == [False]
    # DENY entries imply nothing: a DENY READ leaves DESCRIBE to an ALLOW.
    for op in (READ, WRITE, Op.DELETE, Op.ALTER):
        auth = authorizer(foo_acl(op, DENY), foo_acl(DESCRIBE, ALLOW))
        assert allowed(auth, "bob", [(DESCRIBE, "foo_bar"), (op, "foo_bar")]) == [True, False]
    auth = authorizer(foo_acl(DESCRIBE, DENY), foo_acl(READ, ALLOW))
    assert allowed(auth, "bob", [(DESCRIBE, "foo_bar"), (READ, "foo_bar")]) == [False, True]
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert allowed(authorizer(foo_acl(op, ALLOW)), "bob",
                       [(Op.DESCRIBE_CONFIGS, "foo_bar")]) == [True]
    auth = authorizer(foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW))
    assert allowed(auth, "bob", [(Op.DESCRIBE_CONFIGS, "foo_bar"),
                                 (Op.ALTER_CONFIGS, "foo_bar")]) == [True, False]


def test_find_result_principal_matching() -> None:
    auth = authorizer(foo_acl(READ, ALLOW),
                      acl(GROUP, "bar", LITERAL, "User:*", "*", READ, DENY),
                      acl(GROUP, "bar", LITERAL, "User:alice", "*", READ, ALLOW))
    assert allowed(auth, "bob", [(READ, "foo_bar")]) == [True]
    assert allowed(auth, "alice", [(READ, "foo_bar")]) == [False]
    assert allowed(auth, "alice", [(READ, "bar")], GROUP) == [False]  # the wildcard's DENY wins
    # Only User:* is a wildcard; principals of other types are compared whole.
    group_wide = authorizer(acl(TOPIC, "t", LITERAL, "Group:*", "*", READ, ALLOW))
    assert group_wide.authorize("Group:ops", HOST, READ, TOPIC, "t") is False
    assert group_wide.authorize("Group:*", HOST, READ, TOPIC, "t") is True
    assert group_wide.authorize("User:ops", HOST, READ, TOPIC, "t") is False


def test_simple_authorizations() -> None:
    auth = authorizer(foo_acl(READ, ALLOW), foo_acl(WRITE, ALLOW),
                      acl(GROUP, "bar", LITERAL, "User:*", "*", Op.DESCRIBE_CONFIGS, ALLOW),
                      acl(GROUP, "bar", LITERAL, "User:*", "*", Op.ALTER_CONFIGS, ALLOW))
    assert allowed(auth, "bob", [(READ, "foo_")]) == [True]
    assert allowed(auth, "fred", [(Op.ALTER_CONFIGS, "bar")], GROUP) == [True]


def test_deny_precedence_with_operation_all() -> None:
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:alice", "*", ALL, DENY),
                      acl(TOPIC, "foo", PREFIXED, "User:alice", "*", READ, ALLOW),
                      acl(TOPIC, "foo", LITERAL, "User:*", "*", ALL, DENY),
                      acl(TOPIC, "foo", PREFIXED, "User:*", "*", DESCRIBE, ALLOW))
    assert allowed(auth, "alice", [(WRITE, "foo"), (READ, "foo"), (DESCRIBE, "foo"),
                                   (READ, "foobar")]) == [False, False, False, True]
    assert allowed(auth, "bob", [(DESCRIBE, "foo"), (READ, "foo"), (WRITE, "foo"),
                                 (DESCRIBE, "foobaz"), (READ, "foobaz")]) \
        == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:*", "*", ALL, ALLOW),
                      acl(TOPIC, "bar", PREFIXED, "User:alice", "*", ALL, ALLOW),
                      acl(TOPIC, "baz", LITERAL, "User:bob", "*", ALL, ALLOW))
    assert allowed(auth, "alice", [(WRITE, "foo"), (Op.DESCRIBE_CONFIGS, "bar"),
                                   (DESCRIBE, "baz")]) == [True, True, False]
    assert allowed(auth, "bob", [(WRITE, "foo"), (READ, "bar"), (DESCRIBE, "baz")]) \
        == [True, False, True]
    assert allowed(auth, "malory", [(DESCRIBE, "foo"), (WRITE, "bar"), (READ, "baz")]) \
        == [True, False, False]


def test_host_address_acl_validation() -> None:
    host1, host2, local = "192.168.1.1", "192.168.1.2", "127.0.0.1"
    auth = authorizer(acl(TOPIC, "foo", LITERAL, "User:alice", host1, READ, DENY),
                      acl(TOPIC, "foo", LITERAL, "User:alice", "*", READ, ALLOW),
                      acl(TOPIC, "bar", LITERAL, "User:bob", host2, READ, ALLOW),
                      acl(TOPIC, "bar", LITERAL, "User:*", local, DESCRIBE, ALLOW))
    actions = [(READ, "foo"), (READ, "bar"), (DESCRIBE, "bar")]
    assert allowed(auth, "alice", actions, host=local) == [True, False, True]
    assert allowed(auth, "alice", actions, host=host1) == [False, False, False]
    assert allowed(auth, "alice", actions, host=host2) == [True, False, False]
    assert allowed(auth, "bob", actions, host=local) == [False, False, True]
    assert allowed(auth, "bob", actions, host=host1) == [False, False, False]
    assert allowed(auth, "bob", actions, host=host2) == [False, True, True]


def test_authorization_with_many_acls() -> None:
    auth = authorizer(acl(TOPIC, "green2", LITERAL, "User:*", "*", READ, ALLOW),
                      acl(TOPIC, "green", PREFIXED, "User:bob", "*", READ, ALLOW),
                      acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", READ, ALLOW),
                      acl(TOPIC, "betamax", LITERAL, "User:bob", "*", READ, ALLOW),
                      acl(TOPIC, "beta", PREFIXED, "User:*", "*", READ, ALLOW),
                      acl(TOPIC, "alpha", PREFIXED, "User:*", "*", READ, ALLOW),
                      acl(TOPIC, "alp", PREFIXED, "User:bob", "*", READ, DENY),
                      acl(GROUP, "*", LITERAL, "User:bob", "*", WRITE, ALLOW),
                      acl(GROUP, "wheel", LITERAL, "User:*", "*", WRITE, DENY))
    assert allowed(auth, "bob", [(READ, "green1")]) == [True]
    assert allowed(auth, "bob", [(WRITE, "wheel"), (WRITE, "arbitrary")], GROUP) == [False, True]
    assert allowed(auth, "bob", [(READ, "alpha"), (READ, "ala")]) == [False, False]


def test_prefix_acls() -> None:
    auth = authorizer(acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", ALL, ALLOW),
                      acl(TOPIC, "foobar", LITERAL, "User:bob", "*", ALL, ALLOW),
                      acl(TOPIC, "f", PREFIXED, "User:bob", "*", ALL, ALLOW))
    assert allowed(auth, "bob", [(WRITE, "foobarr"), (READ, "goobar"), (READ, "fooa")]) \
        == [True, False, True]
    assert allowed(auth, "alice", [(DESCRIBE, "fooa"), (WRITE, "bar"), (READ, "baz")]) \
        == [True, False, False]


def test_allow_everyone_if_no_acl_found() -> None:
    alice_reads = acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", READ, ALLOW)
    on = authorizer(alice_reads, super_users=("User:alice", "User:chris"), allow_everyone=True)
    assert allowed(on, "Bob", [(READ, "topic1"), (READ, "topic2")]) == [False, True]
    off = authorizer(alice_reads, super_users=("User:alice", "User:chris"))
    assert allowed(off, "Bob", [(READ, "topic1"), (READ, "topic2")]) == [False, False]


def test_any_acl_on_the_resource_counts_as_found() -> None:
    """'No ACL found' means no ACL of any principal, host, operation or permission matches the
    resource's name: literal, wildcard or prefix. Other resource types do not count."""
    for found in [acl(TOPIC, "topic", LITERAL, "User:someone-else", "10.9.9.9", WRITE, DENY),
                  acl(TOPIC, "*", LITERAL, "User:x", "*", Op.CREATE, ALLOW),
                  acl(TOPIC, "t", PREFIXED, "User:x", "*", Op.CREATE, ALLOW)]:
        assert allowed(authorizer(found, allow_everyone=True), "bob", [(READ, "topic")]) \
            == [False], found
    for unrelated in [acl(TOPIC, "topics", PREFIXED, "User:x", "*", ALL, DENY),  # longer
                      acl(TOPIC, "topics", LITERAL, "User:x", "*", ALL, DENY),
                      acl(GROUP, "*", LITERAL, "User:bob", "*", ALL, DENY)]:
        assert allowed(authorizer(unrelated, allow_everyone=True), "bob", [(READ, "topic")]) \
            == [True], unrelated


# --- AuthorizerTest -----------------------------------------------------------------------------

ALICE = "User:alice"
RESOURCE = ResourcePattern(TOPIC, "foo-1", LITERAL)
WILDCARD_RESOURCE = ResourcePattern(TOPIC, "*", LITERAL)
PREFIXED_RESOURCE = ResourcePattern(TOPIC, "foo", PREFIXED)
CLUSTER_RESOURCE = ResourcePattern(CLUSTER, "kafka-cluster", LITERAL)
ALLOW_READ = AccessControlEntry(ALICE, "*", READ, ALLOW)
ALLOW_WRITE = AccessControlEntry(ALICE, "*", WRITE, ALLOW)
DENY_READ = AccessControlEntry(ALICE, "*", READ, DENY)


def add(auth: AclAuthorizer, entries: set[AccessControlEntry] | list[AccessControlEntry],
        pattern: ResourcePattern = RESOURCE) -> None:
    assert auth.add([AclBinding(pattern, e) for e in entries]) == [None] * len(entries)


def remove(auth: AclAuthorizer, entries: set[AccessControlEntry] | list[AccessControlEntry],
           pattern: ResourcePattern = RESOURCE) -> None:
    filters = ([AclBinding(pattern, e).to_filter() for e in entries] if entries
               else [AclBindingFilter(pattern.to_filter())])
    for result in auth.remove(filters):
        assert result.error is None


def entries(auth: AclAuthorizer, pattern: ResourcePattern = RESOURCE) -> set[AccessControlEntry]:
    return {b.entry for b in auth.acls(AclBindingFilter(pattern.to_filter()))}


def test_authorize_refuses_filter_values() -> None:
    auth = authorizer()
    with pytest.raises(ValueError):
        auth.authorize(ALICE, HOST, Op.ANY, TOPIC, "t")
    with pytest.raises(ValueError):
        auth.authorize(ALICE, HOST, READ, ResourceType.ANY, "t")
    with pytest.raises(ValueError):
        auth.authorize_by_resource_type(ALICE, HOST, Op.UNKNOWN, TOPIC)


def test_authorize_with_empty_resource_name() -> None:
    auth = authorizer()
    assert not auth.authorize(ALICE, HOST, READ, GROUP, "")
    add(auth, [ALLOW_READ], ResourcePattern(GROUP, "*", LITERAL))
    assert auth.authorize(ALICE, HOST, READ, GROUP, "")


def test_topic_acl() -> None:
    user1, user2, user3 = ALICE, "User:rob", "User:batman"
    host1, host2 = "192.168.1.1", "192.168.1.2"
    auth = authorizer()
    add(auth, [AccessControlEntry(user1, host1, READ, ALLOW),
               AccessControlEntry(user1, host2, READ, ALLOW),
               AccessControlEntry(user1, host1, READ, DENY),
               AccessControlEntry(user1, host1, WRITE, ALLOW),
               AccessControlEntry(user1, "*", DESCRIBE, ALLOW),
               AccessControlEntry(user2, "*", READ, ALLOW),
               AccessControlEntry(user3, "*", WRITE, ALLOW)])
    name = RESOURCE.name
    assert auth.authorize(user1, host2, READ, TOPIC, name)
    assert not auth.authorize(user1, host1, READ, TOPIC, name)
    assert auth.authorize(user1, host1, WRITE, TOPIC, name)
    assert not auth.authorize(user1, host2, WRITE, TOPIC, name)
    assert auth.authorize(user1, host1, DESCRIBE, TOPIC, name)
    assert auth.authorize(user1, host2, DESCRIBE, TOPIC, name)
    assert not auth.authorize(user1, host1, Op.ALTER, TOPIC, name)
    assert not auth.authorize(user1, host2, Op.ALTER, TOPIC, name)
    assert auth.authorize(user2, host1, DESCRIBE, TOPIC, name)
    assert auth.authorize(user3, host1, DESCRIBE, TOPIC, name)
    assert auth.authorize(user2, host1, READ, TOPIC, name)
    assert auth.authorize(user3, host1, WRITE, TOPIC, name)


def test_deny_takes_precedence_and_allow_all() -> None:
    auth = authorizer()
    add(auth, [AccessControlEntry("User:*", "*", ALL, ALLOW),
               AccessControlEntry(ALICE, "192.168.2.1", ALL, DENY)])
    assert not auth.authorize(ALICE, "192.168.2.1", READ, TOPIC, RESOURCE.name)
    assert auth.authorize("User:random", "192.0.4.4", READ, TOPIC, RESOURCE.name)


def test_super_users_have_access() -> None:
    auth = AclAuthorizer(parse_super_users("User:superuser1; User:superuser2"))
    add(auth, [AccessControlEntry("User:*", "*", ALL, DENY)])
    for user in ("User:superuser1", "User:superuser2"):
        assert auth.authorize(user, "192.0.4.4", READ, TOPIC, RESOURCE.name)
        assert auth.authorize_by_resource_type(user, "192.0.4.4", READ, TOPIC)
    assert not auth.authorize("User:superuser3", "192.0.4.4", READ, TOPIC, RESOURCE.name)
    # A super user is a whole principal: the name alone, or another type, is not one.
    assert not auth.authorize("Group:superuser1", "192.0.4.4", READ, TOPIC, RESOURCE.name)


def test_wildcard_acls() -> None:
    auth = authorizer()
    host1 = "192.168.3.1"
    assert not auth.authorize(ALICE, host1, READ, TOPIC, RESOURCE.name)
    add(auth, [AccessControlEntry(ALICE, host1, READ, ALLOW)], WILDCARD_RESOURCE)
    assert auth.authorize(ALICE, host1, READ, TOPIC, RESOURCE.name)
    add(auth, [AccessControlEntry(ALICE, host1, WRITE, ALLOW)])
    assert auth.authorize(ALICE, host1, WRITE, TOPIC, RESOURCE.name)
    add(auth, [AccessControlEntry(ALICE, host1, WRITE, DENY)], WILDCARD_RESOURCE)
    assert not auth.authorize(ALICE, host1, WRITE, TOPIC, RESOURCE.name)


@pytest.mark.parametrize("parent, implied", [
    (ALL, set(CONCRETE_OPS)),
    (READ, {DESCRIBE}), (WRITE, {DESCRIBE}), (Op.DELETE, {DESCRIBE}), (Op.ALTER, {DESCRIBE}),
    (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}),
    (DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()), (Op.CREATE, set()),
    (Op.IDEMPOTENT_WRITE, set()),
])
def test_acl_inheritance_of_allow(parent: AclOperation, implied: set[AclOperation]) -> None:
    auth = authorizer()
    add(auth, [AccessControlEntry(ALICE, "*", parent, ALLOW)], CLUSTER_RESOURCE)
    for op in CONCRETE_OPS:
        assert auth.authorize(ALICE, HOST, op, CLUSTER, "kafka-cluster") is (
            op in implied or op == parent), op


@pytest.mark.parametrize("parent, denied", [
    (ALL, set(CONCRETE_OPS)), (DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()),
    (READ, set()), (Op.ALTER_CONFIGS, set()),
])
def test_acl_inheritance_of_deny(parent: AclOperation, denied: set[AclOperation]) -> None:
    auth = authorizer()
    add(auth, [AccessControlEntry(ALICE, "*", parent, DENY),
               AccessControlEntry(ALICE, "*", ALL, ALLOW)], CLUSTER_RESOURCE)
    for op in CONCRETE_OPS:
        assert auth.authorize(ALICE, HOST, op, CLUSTER, "kafka-cluster") is not (
            op in denied or op == parent), op


def test_access_allowed_by_wildcard_and_prefixed_resources() -> None:
    for pattern in (WILDCARD_RESOURCE, PREFIXED_RESOURCE):
        auth = authorizer()
        add(auth, [ALLOW_READ], pattern)
        assert auth.authorize(ALICE, HOST, READ, TOPIC, RESOURCE.name)


@pytest.mark.parametrize("pattern", [RESOURCE, WILDCARD_RESOURCE, PREFIXED_RESOURCE])
def test_add_and_delete_acls_on_one_pattern(pattern: ResourcePattern) -> None:
    others = {RESOURCE, WILDCARD_RESOURCE, PREFIXED_RESOURCE} - {pattern}
    auth = authorizer()
    add(auth, [ALLOW_READ, ALLOW_WRITE], pattern)
    add(auth, [ALLOW_WRITE, DENY_READ], pattern)  # adding is idempotent
    assert entries(auth, pattern) == {ALLOW_READ, ALLOW_WRITE, DENY_READ}
    assert len(auth) == 3
    for other in others:
        assert entries(auth, other) == set()
    remove(auth, [ALLOW_READ], pattern)
    assert entries(auth, pattern) == {ALLOW_WRITE, DENY_READ}
    remove(auth, [], pattern)
    assert auth.acls() == [] and len(auth) == 0


def test_authorize_with_prefixed_resource() -> None:
    auth = authorizer()
    for name, kind in [("a_other", LITERAL), ("a_other", PREFIXED), ("foo-7a1", PREFIXED),
                       ("foo-7a2", PREFIXED), ("foo-7a3-zzz", PREFIXED), ("fooo-7a", PREFIXED),
                       ("fo-7a", PREFIXED), ("fop-7a", PREFIXED), ("fon-7a", PREFIXED),
                       ("fon-", PREFIXED), ("z_other", PREFIXED), ("z_other", LITERAL)]:
        add(auth, [DENY_READ], ResourcePattern(TOPIC, name, kind))
    add(auth, [ALLOW_READ], PREFIXED_RESOURCE)
    assert auth.authorize(ALICE, HOST, READ, TOPIC, RESOURCE.name)


def test_single_character_resource_acls() -> None:
    auth = authorizer()
    add(auth, [ALLOW_READ], ResourcePattern(TOPIC, "f", LITERAL))
    assert auth.authorize(ALICE, HOST, READ, TOPIC, "f")
    assert not auth.authorize(ALICE, HOST, READ, TOPIC, "foo")
    add(auth, [ALLOW_READ], ResourcePattern(TOPIC, "_", PREFIXED))
    assert auth.authorize(ALICE, HOST, READ, TOPIC, "_foo")
    assert auth.authorize(ALICE, HOST, READ, TOPIC, "_")
    assert not auth.authorize(ALICE, HOST, READ, TOPIC, "foo_")


def test_get_acls_by_principal() -> None:
    auth = authorizer()
    add(auth, [AccessControlEntry(ALICE, "*", WRITE, ALLOW)])

    def of(principal: str) -> list[AclBinding]:
        return auth.acls(AclBindingFilter(entry_filter=AccessControlEntryFilter(principal)))

    assert len(of("User:*")) == 0 and len(of(ALICE)) == 1
    remove(auth, [])
    add(auth, [AccessControlEntry("User:*", "*", WRITE, ALLOW)])
    assert len(of("User:*")) == 1 and len(of(ALICE)) == 0


def test_acls_filter_and_delete() -> None:
    resource1 = ResourcePattern(TOPIC, "foo-1", LITERAL)
    resource2 = ResourcePattern(TOPIC, "bar-1", LITERAL)
    prefixed = ResourcePattern(TOPIC, "bar-", PREFIXED)
    acl1 = AclBinding(resource1, AccessControlEntry(ALICE, "*", READ, ALLOW))
    acl2 = AclBinding(resource1, AccessControlEntry(ALICE, "192.168.0.1", WRITE, ALLOW))
    acl3 = AclBinding(resource2, AccessControlEntry(ALICE, "*", DESCRIBE, ALLOW))
    acl4 = AclBinding(prefixed, AccessControlEntry("User:*", "*", READ, ALLOW))
    auth = authorizer(acl1, acl2, acl3, acl4)
    assert set(auth.acls(AclBindingFilter())) == {acl1, acl2, acl3, acl4}
    assert set(auth.acls(AclBindingFilter(resource1.to_filter()))) == {acl1, acl2}
    assert set(auth.acls(AclBindingFilter(prefixed.to_filter()))) == {acl4}
    matching = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, "bar-1",
                                                      PatternType.MATCH))
    assert set(auth.acls(matching)) == {acl3, acl4}
    any_bar = AclBindingFilter(ResourcePatternFilter(TOPIC, "bar-", PatternType.ANY))
    assert auth.acls(any_bar) == [acl4]

    results = auth.remove([matching, acl1.to_filter(), AclBindingFilter(resource2.to_filter()),
                           AclBindingFilter(ResourcePatternFilter(TOPIC, "baz",
                                                                  PatternType.ANY))])
    assert [r.error for r in results] == [None] * 4
    assert set(results[0].bindings) == {acl3, acl4}
    assert results[1].bindings == [acl1]
    # Every filter is matched against the ACLs before any is removed (as Kafka's controller).
    assert results[2].bindings == [acl3]
    assert results[3].bindings == []
    assert auth.acls() == [acl2] and len(auth) == 1


def test_delete_with_an_unknown_filter_answers_its_error_and_goes_on() -> None:
    auth = authorizer(acl(TOPIC, "t", LITERAL, ALICE, "*", READ, ALLOW))
    bad = AclBindingFilter(entry_filter=AccessControlEntryFilter(
        operation=AclOperation.UNKNOWN))
    first, second = auth.remove([bad, AclBindingFilter()])
    assert first.bindings == [] and first.error is not None
    assert first.error.code is ErrorCode.invalid_request
    assert second.error is None and len(second.bindings) == 1
    assert len(auth) == 0


def test_add_answers_each_bindings_error() -> None:
    auth = AclAuthorizer()
    good = acl(TOPIC, "t", LITERAL, ALICE, "*", READ, ALLOW)
    bad = acl(TOPIC, "t", PatternType.MATCH, ALICE, "*", READ, ALLOW)
    results = auth.add([good, bad, good])
    assert results[0] is None and results[2] is None
    assert results[1] is not None and results[1].code is ErrorCode.invalid_request
    assert auth.acls() == [good]


def test_stored_acls_load_without_create_checks() -> None:
    """ACLs read back from a store are taken as they are: a cluster wildcard (Kafka's tools can
    write one), an entry with an operation this version does not know (never applies, but counts
    as an ACL of its resource)."""
    auth = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    auth.add([acl(CLUSTER, "*", LITERAL, ALICE, "*", ALL, ALLOW),
              acl(TOPIC, "t", LITERAL, ALICE, "*", Op.UNKNOWN, ALLOW)], validate=False)
    assert auth.authorize(ALICE, HOST, Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster")
    assert not auth.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert auth.authorize(ALICE, HOST, READ, TOPIC, "u")
    with pytest.raises(ValueError):
        auth.add([acl(TOPIC, "t", PatternType.MATCH, ALICE, "*", READ, ALLOW)], validate=False)


def test_matching_is_what_remove_would_answer_and_removes_nothing() -> None:
    kept = acl(TOPIC, "t", LITERAL, ALICE, "*", READ, ALLOW)
    doomed = acl(TOPIC, "t", PREFIXED, ALICE, "*", WRITE, ALLOW)
    auth = authorizer(kept, doomed)
    filters = [doomed.to_filter(), AclBindingFilter(entry_filter=AccessControlEntryFilter(
        operation=AclOperation.UNKNOWN))]
    planned = auth.matching(filters)
    assert len(auth) == 2
    assert [(r.bindings, r.error and r.error.code) for r in planned] == [
        ([doomed], None), ([], ErrorCode.invalid_request)]
    assert [(r.bindings, r.error and r.error.code) for r in auth.remove(filters)] == [
        (r.bindings, r.error and r.error.code) for r in planned]
    assert auth.acls() == [kept]


def test_replace_sets_one_patterns_acls() -> None:
    """What a store applies for a pattern: its entries as stored now (none: it has none)."""
    pattern = ResourcePattern(TOPIC, "t", PREFIXED)
    other = acl(TOPIC, "t", LITERAL, ALICE, "*", READ, ALLOW)
    auth = authorizer(other, AclBinding(pattern, AccessControlEntry(ALICE, "*", WRITE, ALLOW)))
    auth.replace(pattern, [AccessControlEntry(ALICE, "*", READ, DENY),
                           AccessControlEntry("User:bob", "*", Op.UNKNOWN, ALLOW)])
    assert sorted(auth.acls(AclBindingFilter(pattern.to_filter())), key=str) == sorted([
        AclBinding(pattern, AccessControlEntry(ALICE, "*", READ, DENY)),
        AclBinding(pattern, AccessControlEntry("User:bob", "*", Op.UNKNOWN, ALLOW))], key=str)
    assert not auth.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert not auth.authorize(ALICE, HOST, WRITE, TOPIC, "tx")
    auth.replace(pattern, [])
    assert auth.acls() == [other] and len(auth) == 1
    assert auth.authorize(ALICE, HOST, READ, TOPIC, "t")


# --- authorizeByResourceType (BaseAuthorizerTest) -----------------------------------------------

USER1, USER2 = "User:user1", "User:user2"
H1, H2 = "192.168.1.1", "192.168.1.2"


def by_type(auth: AclAuthorizer, principal: str, host: str, op: AclOperation,
            resource_type: ResourceType = TOPIC) -> bool:
    return auth.authorize_by_resource_type(principal, host, op, resource_type)


def test_by_type_multiple_add_and_remove() -> None:
    auth = authorizer()
    resource1 = ResourcePattern(TOPIC, "sb1-x", LITERAL)
    deny_read = AccessControlEntry(USER1, H1, READ, DENY)
    allow_read = AccessControlEntry(USER1, H1, READ, ALLOW)
    for _ in range(3):
        assert not by_type(auth, USER1, H1, READ)
        add(auth, [allow_read], resource1)
        assert by_type(auth, USER1, H1, READ)
        for _ in range(3):
            add(auth, [deny_read], resource1)
            assert not by_type(auth, USER1, H1, READ)
            remove(auth, [deny_read], resource1)
            add(auth, [allow_read], resource1)
            assert by_type(auth, USER1, H1, READ)
        remove(auth, [allow_read], resource1)
        assert not by_type(auth, USER1, H1, READ)


def test_by_type_unrelated_deny_does_not_dominate_allow() -> None:
    auth = authorizer()
    resource1 = ResourcePattern(TOPIC, "sb1-x", LITERAL)
    resource2 = ResourcePattern(TOPIC, "sb2-x", LITERAL)
    resource3 = ResourcePattern(GROUP, "s", PREFIXED)
    add(auth, [AccessControlEntry(USER1, H1, READ, DENY),
               AccessControlEntry(USER2, H1, READ, DENY),
               AccessControlEntry(USER1, H2, WRITE, DENY),
               AccessControlEntry(USER2, H2, READ, DENY),
               AccessControlEntry(USER1, H2, READ, ALLOW)], resource1)
    add(auth, [AccessControlEntry(USER1, H2, READ, DENY)], resource2)
    add(auth, [AccessControlEntry(USER1, H2, READ, DENY)], resource3)
    assert not by_type(auth, USER1, H1, READ, TOPIC)
    assert not by_type(auth, USER1, H1, READ, GROUP)
    assert not by_type(auth, USER1, H1, READ, TXN)
    assert not by_type(auth, USER1, H1, READ, CLUSTER)
    assert by_type(auth, USER1, H2, READ, TOPIC)


def test_by_type_deny_takes_precedence() -> None:
    auth = authorizer()
    resource1 = ResourcePattern(TOPIC, "sb1-x", LITERAL)
    add(auth, [AccessControlEntry(USER1, H1, WRITE, ALLOW)], resource1)
    assert by_type(auth, USER1, H1, WRITE)
    add(auth, [AccessControlEntry(USER1, H1, WRITE, DENY)], resource1)
    assert not by_type(auth, USER1, H1, WRITE)


def test_by_type_prefixed_deny_dominates() -> None:
    auth = authorizer()
    allow = AccessControlEntry(USER1, H1, READ, ALLOW)
    deny = AccessControlEntry(USER1, H1, READ, DENY)

    def group(prefix: str) -> ResourcePattern:
        return ResourcePattern(GROUP, prefix, PREFIXED)

    add(auth, [allow], group("abcde"))
    assert by_type(auth, USER1, H1, READ, GROUP)
    add(auth, [deny], group("abcd"))
    assert not by_type(auth, USER1, H1, READ, GROUP)
    add(auth, [allow], group("abc"))
    assert by_type(auth, USER1, H1, READ, GROUP)
    add(auth, [deny], group("a"))
    assert not by_type(auth, USER1, H1, READ, GROUP)
    add(auth, [allow], group("ab"))
    assert not by_type(auth, USER1, H1, READ, GROUP)


def test_by_type_wildcard_deny_dominates() -> None:
    auth = authorizer()
    allow = AccessControlEntry(USER1, H1, WRITE, ALLOW)
    deny = AccessControlEntry(USER1, H1, WRITE, DENY)
    add(auth, [allow], ResourcePattern(GROUP, "hello", PREFIXED))
    assert by_type(auth, USER1, H1, WRITE, GROUP)
    add(auth, [deny], ResourcePattern(GROUP, "*", LITERAL))
    assert not by_type(auth, USER1, H1, WRITE, GROUP)
    add(auth, [allow], ResourcePattern(GROUP, "*", LITERAL))
    assert not by_type(auth, USER1, H1, WRITE, GROUP)
    add(auth, [allow], ResourcePattern(GROUP, "aloha", LITERAL))
    assert not by_type(auth, USER1, H1, WRITE, GROUP)


def test_by_type_with_all_operation() -> None:
    auth = authorizer()
    resource1 = ResourcePattern(TOPIC, "sb1-x", LITERAL)
    assert not by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, H1, WRITE, DENY),
               AccessControlEntry(USER1, H1, ALL, ALLOW)], resource1)
    assert by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, H1, ALL, DENY)], resource1)
    assert not by_type(auth, USER1, H1, READ)


def test_by_type_with_all_hosts() -> None:
    auth = authorizer()
    resource1 = ResourcePattern(TOPIC, "sb1-x", LITERAL)
    resource2 = ResourcePattern(TOPIC, "sb2-x", LITERAL)
    assert not by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, H1, READ, ALLOW)], resource1)
    assert by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, "*", READ, DENY)], resource1)
    assert not by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, H1, READ, DENY)], resource2)
    assert not by_type(auth, USER1, H1, READ)
    assert not by_type(auth, USER1, H2, READ)
    add(auth, [AccessControlEntry(USER1, "*", READ, ALLOW)], resource2)
    assert by_type(auth, USER1, H2, READ)
    add(auth, [AccessControlEntry(USER1, "*", READ, DENY)], resource2)
    assert not by_type(auth, USER1, H2, READ)


def test_by_type_with_all_principals() -> None:
    auth = authorizer()
    resource1 = ResourcePattern(TOPIC, "sb1-x", LITERAL)
    resource2 = ResourcePattern(TOPIC, "sb2-x", LITERAL)
    assert not by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, H1, READ, ALLOW)], resource1)
    assert by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry("User:*", H1, READ, DENY)], resource1)
    assert not by_type(auth, USER1, H1, READ)
    add(auth, [AccessControlEntry(USER1, H1, READ, DENY)], resource2)
    assert not by_type(auth, USER1, H1, READ)
    assert not by_type(auth, USER2, H1, READ)
    add(auth, [AccessControlEntry("User:*", H1, READ, ALLOW)], resource2)
    assert by_type(auth, USER2, H1, READ)
    add(auth, [AccessControlEntry("User:*", H1, READ, DENY)], resource2)
    assert not by_type(auth, USER2, H1, READ)


def test_by_type_no_acl_found_override() -> None:
    auth = authorizer(allow_everyone=True)
    assert by_type(auth, ALICE, HOST, READ) and by_type(auth, ALICE, HOST, WRITE)


def test_by_type_counts_only_the_operation_itself() -> None:
    """Kafka's scan compares operations exactly (or ALL): a READ does not give DESCRIBE here,
    except through the probe of the resource named 'hardcode', which authorize answers."""
    auth = authorizer(acl(TOPIC, "t", LITERAL, ALICE, "*", READ, ALLOW))
    assert not by_type(auth, ALICE, HOST, DESCRIBE)
    auth.add([acl(TOPIC, "*", LITERAL, ALICE, "*", READ, ALLOW)])
    assert by_type(auth, ALICE, HOST, DESCRIBE)


# --- configuration ------------------------------------------------------------------------------


def test_super_users_config() -> None:
    assert parse_super_users(None) == set()
    assert parse_super_users(" ") == set()
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ConfigError, match="principalType:principalName but got bob"):
        parse_super_users("bob;:alice")


def test_no_authorizer_by_default() -> None:
    assert authorizer_from_config(BrokerConfig()) is None
    assert authorizer_from_config(BrokerConfig({"authorizer.class.name": ""})) is None
    assert BrokerConfig().get("allow.everyone.if.no.acl.found") is False


@pytest.mark.parametrize("name", ["samsa.security.AclAuthorizer",
                                  "kafka.security.authorizer.AclAuthorizer",
                                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer"])
def test_authorizer_from_config(name: str) -> None:
    config = BrokerConfig({"authorizer.class.name": f" {name} ",
                           "super.users": "User:admin; User:ops",
                           "allow.everyone.if.no.acl.found": " true"})
    auth = authorizer_from_config(config)
    assert isinstance(auth, AclAuthorizer)
    assert auth.super_users == {"User:admin", "User:ops"}
    assert auth.allow_everyone_if_no_acl_found is True
    assert auth.authorize("User:anyone", HOST, READ, TOPIC, "t")


def test_the_config_refuses_what_it_cannot_build() -> None:
    with pytest.raises(ConfigError, match="authorizer.class.name.*no pluggable authorizers"):
        BrokerConfig({"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(ConfigError, match="super.users.*but got bob"):
        BrokerConfig({"super.users": "User:alice;bob"})
    with pytest.raises(ConfigError, match="allow.everyone.if.no.acl.found"):
        BrokerConfig({"allow.everyone.if.no.acl.found": "maybe"})


def test_samsa_name_is_the_class() -> None:
    import importlib

    module, _, name = "samsa.security.AclAuthorizer".rpartition(".")
    assert getattr(importlib.import_module(module), name) is AclAuthorizer
