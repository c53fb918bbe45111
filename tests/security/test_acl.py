"""Kafka's ACL model: the enums' wire codes and names, the filters of DescribeAcls and
DeleteAcls (Kafka's ResourcePatternFilterTest, AclBindingTest), and what CreateAcls and DeleteAcls
refuse (AclApis, AclControlManager.validateNewAcl / validateFilter, the ZooKeeper authorizer)."""

from __future__ import annotations

import pytest

from samsa.errors import ErrorCode, KafkaError
from samsa.security.acl import (
    AUTHORIZATION_ERRORS,
    SUPPORTED_OPERATIONS,
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
    check_binding,
    check_filter,
    create_error,
    parse_principal,
    storable_name,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ANY, MATCH = PatternType.ANY, PatternType.MATCH
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ = AclOperation.READ


def test_wire_codes_are_kafkas() -> None:
    assert [(m.name, m.value) for m in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(m.name, m.value) for m in PatternType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [(m.name, m.value) for m in AclOperation] == [
        ("UNKNOWN", 0), ("ANY", 1), ("ALL", 2), ("READ", 3), ("WRITE", 4), ("CREATE", 5),
        ("DELETE", 6), ("ALTER", 7), ("DESCRIBE", 8), ("CLUSTER_ACTION", 9),
        ("DESCRIBE_CONFIGS", 10), ("ALTER_CONFIGS", 11), ("IDEMPOTENT_WRITE", 12),
        ("CREATE_TOKENS", 13), ("DESCRIBE_TOKENS", 14)]
    assert [(m.name, m.value) for m in AclPermissionType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]


def test_an_unknown_code_reads_as_unknown() -> None:
    assert ResourceType.from_code(8) is ResourceType.UNKNOWN
    assert PatternType.from_code(-1) is PatternType.UNKNOWN
    assert AclOperation.from_code(15) is AclOperation.UNKNOWN
    assert AclPermissionType.from_code(4) is AclPermissionType.UNKNOWN
    assert AclOperation.from_code(10) is AclOperation.DESCRIBE_CONFIGS


def test_names_are_securityutils_pascal_case() -> None:
    assert ResourceType.TRANSACTIONAL_ID.pascal_name == "TransactionalId"
    assert AclOperation.DESCRIBE_CONFIGS.pascal_name == "DescribeConfigs"
    assert AclOperation.IDEMPOTENT_WRITE.pascal_name == "IdempotentWrite"
    assert AclPermissionType.ALLOW.pascal_name == "Allow"
    # Lookup: the Pascal name, else its upper case (so any case, but no underscores).
    assert AclOperation.from_name("DescribeConfigs") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.from_name("DESCRIBECONFIGS") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.from_name("describeConfigs") is AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.from_name("DESCRIBE_CONFIGS") is AclOperation.UNKNOWN
    assert ResourceType.from_name("topic") is TOPIC
    assert AclPermissionType.from_name("nope") is AclPermissionType.UNKNOWN


def test_principals_are_split_at_the_first_colon() -> None:
    assert parse_principal("User:alice") == ("User", "alice")
    assert parse_principal("User:CN=a,O=b:c") == ("User", "CN=a,O=b:c")
    assert parse_principal("User:") == ("User", "")
    for bad in ("alice", ""):
        with pytest.raises(ValueError, match="principalType:principalName but got"):
            parse_principal(bad)


# --- ResourcePatternFilter (Kafka's ResourcePatternFilterTest) ----------------------------------


def pf(resource_type: ResourceType, name: str | None, pattern_type: PatternType) \
        -> ResourcePatternFilter:
    return ResourcePatternFilter(resource_type, name, pattern_type)


def rp(resource_type: ResourceType, name: str, pattern_type: PatternType) -> ResourcePattern:
    return ResourcePattern(resource_type, name, pattern_type)


@pytest.mark.parametrize("the_filter, pattern, expected", [
    (pf(TOPIC, "Name", LITERAL), rp(GROUP, "Name", LITERAL), False),
    (pf(TOPIC, "Different", PREFIXED), rp(TOPIC, "Name", PREFIXED), False),
    (pf(TOPIC, "NAME", LITERAL), rp(TOPIC, "Name", LITERAL), False),
    (pf(TOPIC, "Name", LITERAL), rp(TOPIC, "Name", PREFIXED), False),
    (pf(ResourceType.ANY, "Name", PREFIXED), rp(TOPIC, "Name", PREFIXED), True),
    (pf(TOPIC, None, PREFIXED), rp(TOPIC, "Name", PREFIXED), True),
    (pf(TOPIC, None, ANY), rp(TOPIC, "Name", PREFIXED), True),
    (pf(TOPIC, None, MATCH), rp(TOPIC, "Name", PREFIXED), True),
    (pf(TOPIC, "Name", LITERAL), rp(TOPIC, "Name", LITERAL), True),
    (pf(TOPIC, "Name", ANY), rp(TOPIC, "Name", LITERAL), True),
    (pf(TOPIC, "Name", MATCH), rp(TOPIC, "Name", LITERAL), True),
    (pf(TOPIC, "Name-something", MATCH), rp(TOPIC, "Name", LITERAL), False),
    (pf(TOPIC, "*", LITERAL), rp(TOPIC, "*", LITERAL), True),
    (pf(TOPIC, "Name", LITERAL), rp(TOPIC, "*", LITERAL), False),
    (pf(TOPIC, "*", LITERAL), rp(TOPIC, "Name", LITERAL), False),
    (pf(TOPIC, "Name", ANY), rp(TOPIC, "*", LITERAL), False),
    (pf(TOPIC, "Name", MATCH), rp(TOPIC, "*", LITERAL), True),
    (pf(TOPIC, "Name", PREFIXED), rp(TOPIC, "Name", PREFIXED), True),
    (pf(TOPIC, "Name", PREFIXED), rp(TOPIC, "Name-something", PREFIXED), False),
    (pf(TOPIC, "Name-something", PREFIXED), rp(TOPIC, "Name", PREFIXED), False),
    (pf(TOPIC, "Name-something", ANY), rp(TOPIC, "Name", PREFIXED), False),
    (pf(TOPIC, "Name-something", MATCH), rp(TOPIC, "Name", PREFIXED), True),
    # A filter with an UNKNOWN part matches nothing.
    (pf(ResourceType.UNKNOWN, None, ANY), rp(TOPIC, "Name", LITERAL), False),
    (pf(TOPIC, None, PatternType.UNKNOWN), rp(TOPIC, "Name", LITERAL), False),
])
def test_resource_pattern_filter(the_filter: ResourcePatternFilter, pattern: ResourcePattern,
                                 expected: bool) -> None:
    assert the_filter.matches(pattern) is expected


def test_indefinite_fields() -> None:
    assert pf(ResourceType.ANY, "a", LITERAL).indefinite_field() == "Resource type is ANY."
    assert pf(TOPIC, None, LITERAL).indefinite_field() == "Resource name is NULL."
    assert pf(TOPIC, "a", MATCH).indefinite_field() == "Resource pattern type is MATCH."
    assert pf(TOPIC, "a", ANY).matches_at_most_one  # as Kafka: ANY is not indefinite
    entry = AccessControlEntryFilter("User:a", "*", READ, AclPermissionType.ANY)
    assert entry.indefinite_field() == "Permission type is ANY"
    assert AclBindingFilter().indefinite_field() == "Resource type is ANY."
    binding = AclBinding(rp(TOPIC, "a", LITERAL), AccessControlEntry("User:a", "*", READ, ALLOW))
    assert binding.to_filter().matches_at_most_one


# --- AccessControlEntryFilter and AclBindingFilter (Kafka's AclBindingTest) ---------------------

ACL1 = AclBinding(rp(TOPIC, "mytopic", LITERAL),
                  AccessControlEntry("User:ANONYMOUS", "", AclOperation.ALL, ALLOW))
ACL2 = AclBinding(rp(TOPIC, "mytopic", LITERAL),
                  AccessControlEntry("User:*", "", READ, ALLOW))
ACL3 = AclBinding(rp(TOPIC, "mytopic2", LITERAL),
                  AccessControlEntry("User:ANONYMOUS", "127.0.0.1", READ, DENY))
ANY_ANONYMOUS = AclBindingFilter(ResourcePatternFilter(),
                                 AccessControlEntryFilter("User:ANONYMOUS", None))
ANY_DENY = AclBindingFilter(ResourcePatternFilter(),
                            AccessControlEntryFilter(permission_type=DENY))
ANY_MYTOPIC = AclBindingFilter(ResourcePatternFilter(TOPIC, "mytopic", LITERAL),
                               AccessControlEntryFilter())


def test_binding_filters_match() -> None:
    assert AclBindingFilter().matches(ACL1) and AclBindingFilter().matches(ACL3)
    assert ANY_ANONYMOUS.matches(ACL1)
    assert not ANY_ANONYMOUS.matches(ACL2)  # a filter compares principals, User:* is not a joker
    assert ANY_ANONYMOUS.matches(ACL3)
    assert not ANY_DENY.matches(ACL1) and not ANY_DENY.matches(ACL2) and ANY_DENY.matches(ACL3)
    assert ANY_MYTOPIC.matches(ACL1) and ANY_MYTOPIC.matches(ACL2)
    assert not ANY_MYTOPIC.matches(ACL3)
    for acl in (ACL1, ACL2, ACL3):
        assert acl.to_filter().matches(acl)
    assert not ACL1.to_filter().matches(ACL2)
    assert AclBindingFilter(entry_filter=AccessControlEntryFilter(host="127.0.0.1")).matches(ACL3)
    assert not AclBindingFilter(
        entry_filter=AccessControlEntryFilter(host="*")).matches(ACL3)


def test_unknown_parts() -> None:
    assert not ACL1.is_unknown
    assert AclBinding(rp(TOPIC, "a", PatternType.UNKNOWN), ACL1.entry).is_unknown
    assert AclBinding(ACL1.pattern, AccessControlEntry(
        "User:a", "*", AclOperation.UNKNOWN, ALLOW)).is_unknown
    assert AclBindingFilter(entry_filter=AccessControlEntryFilter(
        permission_type=AclPermissionType.UNKNOWN)).is_unknown


# --- what CreateAcls refuses ---------------------------------------------------------------------


def binding(resource_type: ResourceType = TOPIC, name: str = "t",
            pattern_type: PatternType = LITERAL, principal: str = "User:alice",
            host: str = "*", operation: AclOperation = READ,
            permission: AclPermissionType = ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


@pytest.mark.parametrize("good", [
    binding(),
    binding(name="*"),
    binding(name="t", pattern_type=PREFIXED),
    binding(CLUSTER, "kafka-cluster", operation=AclOperation.ALL),
    binding(CLUSTER, "kafka-cluster", PREFIXED),
    binding(principal="User:*", permission=DENY),
    binding(principal="Group:ops"),
    binding(principal="User:"),  # Kafka's parser takes it
    binding(host="10.0.0.1"),
    binding(host="my-host"),  # Kafka checks no host (one that is not an address never matches)
    binding(ResourceType.TRANSACTIONAL_ID, "tx", operation=AclOperation.WRITE),
    binding(ResourceType.USER, "bob", operation=AclOperation.CREATE_TOKENS),
    binding(GROUP, "g", operation=AclOperation.IDEMPOTENT_WRITE),  # meaningless, not refused
])
def test_create_accepts(good: AclBinding) -> None:
    check_binding(good)
    assert create_error(good) is None


@pytest.mark.parametrize("bad, message", [
    (binding(CLUSTER, "*"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (binding(CLUSTER, "other"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (binding(name=""), "Invalid empty resource name"),
    (binding(ResourceType.ANY), "Invalid resourceType ANY"),
    (binding(ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (binding(pattern_type=ANY), "Invalid patternType ANY"),
    (binding(pattern_type=MATCH), "Invalid patternType MATCH"),
    (binding(pattern_type=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
    (binding(operation=AclOperation.ANY), "Invalid operation ANY"),
    (binding(operation=AclOperation.UNKNOWN), "Invalid operation UNKNOWN"),
    (binding(permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
    (binding(permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (binding(principal="alice"),
     "expected a string in format principalType:principalName but got alice"),
    (binding(principal=""), "expected a string in format principalType:principalName but got "),
    (binding(name="a/b"), "ACL binding contains invalid resource name: a/b"),
    (binding(GROUP, ".."), "ACL binding contains invalid resource name: .."),
    (binding(GROUP, "a\x00b"), "ACL binding contains invalid resource name"),
])
def test_create_refuses_with_invalid_request(bad: AclBinding, message: str) -> None:
    with pytest.raises(KafkaError) as raised:
        check_binding(bad)
    assert raised.value.code is ErrorCode.invalid_request
    assert str(raised.value).startswith(message)
    error = create_error(bad)
    assert error is not None and error.code is ErrorCode.invalid_request


def test_storable_names() -> None:
    assert storable_name("orders.v1-x_y") and storable_name("a..b") and storable_name("ü")
    for bad in ("a/b", ".", "..", "a\x1fb", "\x7f", "\ue000", "\ufff0"):
        assert not storable_name(bad), bad


def test_delete_filters_with_an_unknown_part_are_refused() -> None:
    check_filter(AclBindingFilter())
    check_filter(AclBindingFilter(ResourcePatternFilter(TOPIC, "x", MATCH)))
    for bad, message in [
        (AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)), "Unknown patternFilter."),
        (AclBindingFilter(ResourcePatternFilter(pattern_type=PatternType.UNKNOWN)),
         "Unknown patternFilter."),
        (AclBindingFilter(entry_filter=AccessControlEntryFilter(
            operation=AclOperation.UNKNOWN)), "Unknown entryFilter."),
        (AclBindingFilter(entry_filter=AccessControlEntryFilter(
            permission_type=AclPermissionType.UNKNOWN)), "Unknown entryFilter."),
    ]:
        with pytest.raises(KafkaError, match=message) as raised:
            check_filter(bad)
        assert raised.value.code is ErrorCode.invalid_request


def test_tables_per_resource_type() -> None:
    assert SUPPORTED_OPERATIONS[ResourceType.TRANSACTIONAL_ID] == {
        AclOperation.DESCRIBE, AclOperation.WRITE}
    assert AclOperation.IDEMPOTENT_WRITE in SUPPORTED_OPERATIONS[CLUSTER]
    assert AclOperation.ALL not in set().union(*SUPPORTED_OPERATIONS.values())
    assert AUTHORIZATION_ERRORS[TOPIC] is ErrorCode.topic_authorization_failed
    assert AUTHORIZATION_ERRORS[ResourceType.TRANSACTIONAL_ID] is \
        ErrorCode.transactional_id_authorization_failed
    assert ResourceType.USER not in AUTHORIZATION_ERRORS
