"""``samsa acls`` (kafka-acls.sh) end to end: the console script against an embedded broker
with the ACL authorizer. The tool connects as User:ANONYMOUS (PLAINTEXT), so the broker lists
it in super.users."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.embedded import Broker
from samsa.security.acl import AclOperation, ResourceType

from . import error_line, free_port, ok, samsa, unique

TOPIC_LINE = ("Current ACLs for resource "
              "`ResourcePattern(resourceType={}, name={}, patternType={})`: ")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("tools-acls"), config={
            "authorizer.class.name": "samsa.security.AclAuthorizer",
            "super.users": "User:ANONYMOUS"}) as b:
        yield b


@pytest.fixture
def bs(broker: Broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def entry(principal: str, operation: str, permission: str = "ALLOW", host: str = "*") -> str:
    return (f"(principal={principal}, host={host}, operation={operation}, "
            f"permissionType={permission})")


def block(header: str, *entries: str) -> str:
    """kafka-acls' layout: the header line, a space and a tab before the first entry, a tab
    before the others, a space after the last, a blank line."""
    return f"{header}\n \t" + "\n\t".join(entries) + " \n\n"


def test_add_prints_and_lists_as_kafka_acls(broker: Broker, bs: list[str]) -> None:
    topic = unique("orders")
    out = ok(samsa("acls", *bs, "--add", "--allow-principal", "User:alice",
                   "--operation", "Read", "--operation", "write", "--topic", topic))
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    entries = (entry("User:alice", "READ"), entry("User:alice", "WRITE"))
    assert out == (block(f"Adding ACLs for resource `{pattern}`: ", *entries)
                   + block(f"Current ACLs for resource `{pattern}`: ", *entries))
    assert broker.server.authorizer is not None
    assert broker.server.authorizer.authorize("User:alice", "10.0.0.1", AclOperation.WRITE,
                                              ResourceType.TOPIC, topic)
    listed = ok(samsa("acls", *bs, "--list", "--topic", topic))
    assert listed == block(f"Current ACLs for resource `{pattern}`: ", *entries)


def test_deny_with_hosts_and_prefixes(broker: Broker, bs: list[str]) -> None:
    prefix = unique("app")
    ok(samsa("acls", *bs, "--add", "--deny-principal", "User:mallory", "--deny-host",
             "10.1.1.1", "--operation", "Describe", "--group", prefix,
             "--resource-pattern-type", "prefixed"))
    authorizer = broker.server.authorizer
    assert authorizer is not None
    assert authorizer.acls()
    listed = ok(samsa("acls", *bs, "--list", "--group", f"{prefix}-1",
                      "--resource-pattern-type", "match"))
    pattern = f"ResourcePattern(resourceType=GROUP, name={prefix}, patternType=PREFIXED)"
    assert listed == block(f"Current ACLs for resource `{pattern}`: ",
                           entry("User:mallory", "DESCRIBE", "DENY", "10.1.1.1"))


def test_producer_and_consumer_conveniences(broker: Broker, bs: list[str]) -> None:
    topic, group, txn = unique("t"), unique("g"), unique("x")
    ok(samsa("acls", *bs, "--add", "--producer", "--idempotent", "--allow-principal",
             "User:pat", "--topic", topic, "--transactional-id", txn))
    ok(samsa("acls", *bs, "--add", "--consumer", "--allow-principal", "User:con",
             "--topic", topic, "--group", group))
    authorizer = broker.server.authorizer
    assert authorizer is not None

    def ops(principal: str, resource_type: ResourceType, name: str) -> set[AclOperation]:
        return {b.entry.operation for b in authorizer.acls()
                if b.entry.principal == principal and b.pattern.resource_type == resource_type
                and b.pattern.name == name}

    Op = AclOperation
    assert ops("User:pat", ResourceType.TOPIC, topic) == {Op.WRITE, Op.DESCRIBE, Op.CREATE}
    assert ops("User:pat", ResourceType.TRANSACTIONAL_ID, txn) == {Op.WRITE, Op.DESCRIBE}
    assert ops("User:pat", ResourceType.CLUSTER, "kafka-cluster") == {Op.IDEMPOTENT_WRITE}
    assert ops("User:con", ResourceType.TOPIC, topic) == {Op.READ, Op.DESCRIBE}
    assert ops("User:con", ResourceType.GROUP, group) == {Op.READ}
    listed = ok(samsa("acls", *bs, "--list", "--topic", topic, "--principal", "User:con"))
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert listed == "ACLs for principal `User:con`\n" + block(
        f"Current ACLs for resource `{pattern}`: ", entry("User:con", "DESCRIBE"),
        entry("User:con", "READ"))


def test_remove_asks_unless_forced(broker: Broker, bs: list[str]) -> None:
    topic = unique("doomed")
    ok(samsa("acls", *bs, "--add", "--allow-principal", "User:alice", "--allow-principal",
             "User:bob", "--operation", "Read", "--topic", topic))
    kept = ok(samsa("acls", *bs, "--remove", "--topic", topic, stdin="n\n"))
    assert kept.startswith("Are you sure you want to delete all ACLs for resource filter "
                           f"`ResourcePattern(resourceType=TOPIC, name={topic}, "
                           "patternType=LITERAL)`? (y/n)\n")
    authorizer = broker.server.authorizer
    assert authorizer is not None

    def principals() -> set[str]:
        return {b.entry.principal for b in authorizer.acls() if b.pattern.name == topic}

    assert principals() == {"User:alice", "User:bob"}
    ok(samsa("acls", *bs, "--remove", "--allow-principal", "User:alice", "--operation", "Read",
             "--topic", topic, stdin="y\n"))
    assert principals() == {"User:bob"}
    ok(samsa("acls", *bs, "--remove", "--force", "--topic", topic))
    assert principals() == set()
    assert ok(samsa("acls", *bs, "--list", "--topic", topic)) == ""


def test_list_everything(broker: Broker, bs: list[str]) -> None:
    name = unique("everything")
    ok(samsa("acls", *bs, "--add", "--allow-principal", "User:*", "--cluster", "--operation",
             "DescribeConfigs"))
    ok(samsa("acls", *bs, "--add", "--allow-principal", "User:eve", "--transactional-id", name))
    out = ok(samsa("acls", *bs, "--list"))
    assert TOPIC_LINE.format("CLUSTER", "kafka-cluster", "LITERAL") in out
    assert TOPIC_LINE.format("TRANSACTIONAL_ID", name, "LITERAL") in out
    assert entry("User:*", "DESCRIBE_CONFIGS") in out and entry("User:eve", "ALL") in out


@pytest.mark.parametrize(("args", "message"), [
    (["--topic", "t"], "Command must include exactly one action"),
    (["--add", "--list", "--topic", "t"], "Command must include exactly one action"),
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName"),
    (["--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
     "ResourceType TOPIC only supports operations"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
     "Unknown operation: Fly"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type",
      "match"], "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["--add", "--producer", "--allow-principal", "User:a", "--group", "g"],
     "With --producer you must specify a --topic"),
    (["--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"],
     "With --consumer you must specify a --topic and a --group"),
    (["--remove", "--principal", "User:a", "--topic", "t"],
     "The --principal option is only available if --list is set"),
])
def test_usage_errors_are_one_line(bs: list[str], args: list[str], message: str) -> None:
    line = error_line(samsa("acls", *bs, *args))
    assert message in line, line


def test_a_broker_without_an_authorizer(tmp_path_factory: pytest.TempPathFactory) -> None:
    with Broker(tmp_path_factory.mktemp("no-authorizer")) as plain:
        line = error_line(samsa("acls", "--bootstrap-server", plain.bootstrap_servers, "--add",
                                "--allow-principal", "User:a", "--topic", "t"))
    assert line == "samsa: SECURITY_DISABLED: No Authorizer is configured."


def test_an_unreachable_broker() -> None:
    line = error_line(samsa("acls", "--bootstrap-server", f"127.0.0.1:{free_port()}",
                            "--list"))
    assert line.startswith("samsa: cannot connect to any bootstrap server"), line


def test_the_tool_meets_the_brokers_acls(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Without ALTER on the cluster the broker refuses the tool's CreateAcls."""
    with Broker(tmp_path_factory.mktemp("not-super"), config={
            "authorizer.class.name": "samsa.security.AclAuthorizer"}) as secured:
        line = error_line(samsa("acls", "--bootstrap-server", secured.bootstrap_servers,
                                "--add", "--allow-principal", "User:a", "--topic", "t"))
    assert line == "samsa: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed."
