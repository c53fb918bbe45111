"""``samsa topics`` and ``samsa configs`` against an embedded broker."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.embedded import Broker

from . import error_line, free_port, kafka_uuid, ok, samsa, unique

DEFAULT_PARTITIONS = 2
TOPIC_LINE = re.compile(
    r"^Topic: (?P<name>\S+)\tTopicId: (?P<id>[A-Za-z0-9_-]{22})\tPartitionCount: (?P<count>\d+)"
    r"\tReplicationFactor: (?P<rf>\d+)\tConfigs: (?P<configs>.*)$"
)
PARTITION_LINE = re.compile(
    r"^\tTopic: (?P<name>\S+)\tPartition: (?P<partition>\d+)\tLeader: (?P<leader>\S+)"
    r"\tReplicas: (?P<replicas>\S+)\tIsr: (?P<isr>\S+)$"
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("tools-admin"), num_partitions=DEFAULT_PARTITIONS) as b:
        yield b


@pytest.fixture
def bs(broker: Broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def describe(bs: list[str], *args: str) -> list[str]:
    return ok(samsa("topics", *bs, "--describe", *args)).splitlines()


# --- topics ----------------------------------------------------------------------------------


def test_create_list_describe(broker: Broker, bs: list[str]) -> None:
    topic = unique("created")
    out = ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 3,
                   "--replication-factor", 1, "--config", "retention.ms=100000",
                   "--config", "cleanup.policy=compact"))
    assert out == f"Created topic {topic}.\n"
    assert topic in ok(samsa("topics", *bs, "--list")).splitlines()

    lines = describe(bs, "--topic", topic)
    assert len(lines) == 4, lines
    head = TOPIC_LINE.match(lines[0])
    assert head is not None, lines[0]
    assert head["name"] == topic
    assert head["count"] == "3" and head["rf"] == "1"
    assert head["configs"] == "cleanup.policy=compact,retention.ms=100000"
    assert broker.server.topics is not None
    stored = broker.server.topics.get(topic)
    assert stored is not None
    assert head["id"] == kafka_uuid(stored.topic_id)
    node = str(broker.server.broker_id)
    for index, line in enumerate(lines[1:]):
        part = PARTITION_LINE.match(line)
        assert part is not None, line
        assert part["name"] == topic and part["partition"] == str(index)
        assert part["leader"] == part["replicas"] == part["isr"] == node


def test_create_uses_broker_default_partitions(bs: list[str]) -> None:
    topic = unique("default")
    ok(samsa("topics", *bs, "--create", "--topic", topic))
    head = TOPIC_LINE.match(describe(bs, "--topic", topic)[0])
    assert head is not None
    assert head["count"] == str(DEFAULT_PARTITIONS)
    assert head["configs"] == ""


def test_create_existing_topic(bs: list[str]) -> None:
    topic = unique("twice")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    line = error_line(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    assert line.startswith("samsa: TOPIC_ALREADY_EXISTS"), line
    assert ok(samsa("topics", *bs, "--create", "--topic", topic, "--if-not-exists")) == ""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--replication-factor", "2"], "samsa: INVALID_REPLICATION_FACTOR"),
        (["--config", "no.such.config=1"], "samsa: INVALID_CONFIG"),
        (["--config", "retention.ms=soon"], "samsa: INVALID_CONFIG"),
    ],
)
def test_create_refused_by_broker(bs: list[str], args: list[str], expected: str) -> None:
    topic = unique("refused")
    line = error_line(samsa("topics", *bs, "--create", "--topic", topic, *args))
    assert line.startswith(expected), line
    assert topic not in ok(samsa("topics", *bs, "--list")).splitlines()


def test_list_with_regex(bs: list[str]) -> None:
    prefix = unique("rx")
    for suffix in ("a", "b"):
        ok(samsa("topics", *bs, "--create", "--topic", f"{prefix}-{suffix}", "--partitions", 1))
    out = ok(samsa("topics", *bs, "--list", "--topic", f"{prefix}-.*"))
    assert out.splitlines() == [f"{prefix}-a", f"{prefix}-b"]
    assert ok(samsa("topics", *bs, "--list", "--topic", f"{prefix}-a")) == f"{prefix}-a\n"
    out = ok(samsa("topics", *bs, "--list", "--exclude-internal", "--topic", f"{prefix}-.*"))
    assert out.splitlines() == [f"{prefix}-a", f"{prefix}-b"]


def test_alter_adds_partitions(bs: list[str]) -> None:
    topic = unique("grow")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    ok(samsa("topics", *bs, "--alter", "--topic", topic, "--partitions", 4))
    lines = describe(bs, "--topic", topic)
    head = TOPIC_LINE.match(lines[0])
    assert head is not None and head["count"] == "4"
    assert [PARTITION_LINE.match(line)["partition"] for line in lines[1:]] == ["0", "1", "2", "3"]
    # Keyed records spread over the new partitions too (40 fixed keys over 4 partitions).
    lines = "".join(f"key{i}:value{i}\n" for i in range(40))
    ok(samsa("produce", *bs, "--topic", topic, "--property", "parse.key=true",
             "--property", "key.separator=:", stdin=lines))
    out = ok(samsa("consume", *bs, "--topic", topic, "--partition", 3, "--offset", "earliest",
                   "--timeout-ms", 1500))
    assert out and set(out.splitlines()) <= {f"value{i}" for i in range(40)}

    line = error_line(samsa("topics", *bs, "--alter", "--topic", topic, "--partitions", 2))
    assert line.startswith("samsa: INVALID_PARTITIONS"), line
    line = error_line(samsa("topics", *bs, "--alter", "--topic", unique("none"),
                            "--partitions", 2))
    assert line.startswith("samsa: UNKNOWN_TOPIC_OR_PARTITION"), line
    assert ok(samsa("topics", *bs, "--alter", "--topic", unique("none"), "--partitions", 2,
                    "--if-exists")) == ""


def test_delete(bs: list[str]) -> None:
    topic = unique("doomed")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    ok(samsa("produce", *bs, "--topic", topic, stdin="gone\n"))
    ok(samsa("topics", *bs, "--delete", "--topic", topic))
    assert topic not in ok(samsa("topics", *bs, "--list")).splitlines()
    line = error_line(samsa("topics", *bs, "--delete", "--topic", topic))
    assert line.startswith("samsa: UNKNOWN_TOPIC_OR_PARTITION"), line
    assert ok(samsa("topics", *bs, "--delete", "--topic", topic, "--if-exists")) == ""


def test_delete_by_regex(bs: list[str]) -> None:
    prefix = unique("bulk")
    keep = unique("keep")
    for name in (f"{prefix}-1", f"{prefix}-2", keep):
        ok(samsa("topics", *bs, "--create", "--topic", name, "--partitions", 1))
    ok(samsa("topics", *bs, "--delete", "--topic", f"{prefix}-.*"))
    listed = ok(samsa("topics", *bs, "--list")).splitlines()
    assert keep in listed
    assert not [t for t in listed if t.startswith(prefix)]


def test_describe_missing_topic(bs: list[str]) -> None:
    topic = unique("missing")
    line = error_line(samsa("topics", *bs, "--describe", "--topic", topic))
    assert line == f"samsa: UNKNOWN_TOPIC_OR_PARTITION: Topic '{topic}' does not exist as expected"
    assert ok(samsa("topics", *bs, "--describe", "--topic", topic, "--if-exists")) == ""
    # Describing must not auto-create it.
    assert topic not in ok(samsa("topics", *bs, "--list")).splitlines()


def test_describe_all_and_filters(bs: list[str]) -> None:
    plain = unique("plain")
    tuned = unique("tuned")
    ok(samsa("topics", *bs, "--create", "--topic", plain, "--partitions", 1))
    ok(samsa("topics", *bs, "--create", "--topic", tuned, "--partitions", 1,
             "--config", "segment.ms=3600000"))
    everything = describe(bs)
    heads = [TOPIC_LINE.match(line)["name"] for line in everything if line.startswith("Topic:")]
    assert plain in heads and tuned in heads
    assert heads == sorted(heads)

    overrides = describe(bs, "--topics-with-overrides", "--topic", f"({plain}|{tuned})")
    assert len(overrides) == 1
    head = TOPIC_LINE.match(overrides[0])
    assert head is not None and head["name"] == tuned and head["configs"] == "segment.ms=3600000"
    # One healthy node: nothing under-replicated, nothing unavailable.
    assert describe(bs, "--under-replicated-partitions") == []
    assert describe(bs, "--unavailable-partitions") == []


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--list", "--describe"],
        ["--create"],
        ["--create", "--topic", "bad name"],
        ["--create", "--topic", "x" * 250],
        ["--create", "--topic", "t", "--partitions", "0"],
        ["--create", "--topic", "t", "--replication-factor", "0"],
        ["--create", "--topic", "t", "--partitions", "many"],
        ["--create", "--topic", "t", "--config", "noequals"],
        ["--list", "--partitions", "3"],
        ["--delete", "--if-not-exists", "--topic", "t"],
        ["--alter", "--topic", "t"],
        ["--alter", "--topic", "t", "--partitions", "3", "--config", "a=b"],
        ["--describe", "--no-such-flag"],
    ],
)
def test_usage_errors(bs: list[str], args: list[str]) -> None:
    result = samsa("topics", *bs, *args)
    error_line(result)
    assert result.stdout == ""


def test_bootstrap_server_is_required_and_checked() -> None:
    assert "--bootstrap-server" in error_line(samsa("topics", "--list"))
    error_line(samsa("topics", "--bootstrap-server", "no-port-here", "--list"))
    error_line(samsa("topics", "--bootstrap-server", "localhost:99999", "--list"))


# --- configs ---------------------------------------------------------------------------------


def config_lines(bs: list[str], *args: str) -> list[str]:
    return ok(samsa("configs", *bs, "--describe", *args)).splitlines()


def test_configs_add_describe_delete(bs: list[str]) -> None:
    topic = unique("cfg")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    assert config_lines(bs, "--entity-type", "topics", "--entity-name", topic) == [
        f"Dynamic configs for topic {topic} are:"
    ]
    out = ok(samsa("configs", *bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
                   "--add-config", "retention.ms=123456,cleanup.policy=[compact,delete]"))
    assert out == f"Completed updating config for topic {topic}.\n"

    lines = config_lines(bs, "--entity-type", "topics", "--entity-name", topic)
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    entries = dict(
        re.match(r"^  (\S+?)=(\S*) sensitive=(\w+) synonyms=\{(.*)\}$", line).group(1, 2)
        for line in lines[1:]
    )
    assert entries == {"cleanup.policy": "compact,delete", "retention.ms": "123456"}
    assert "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=123456" in lines[2]
    head = TOPIC_LINE.match(describe(bs, "--topic", topic)[0])
    assert head is not None
    assert head["configs"] == "cleanup.policy=compact,delete,retention.ms=123456"

    # The --topic shorthand, and deleting one key.
    out = ok(samsa("configs", *bs, "--topic", topic, "--alter", "--delete-config",
                   "cleanup.policy"))
    assert out == f"Completed updating config for topic {topic}.\n"
    lines = config_lines(bs, "--topic", topic)
    assert [line.split("=")[0].strip() for line in lines[1:]] == ["retention.ms"]

    # Overwrite and delete in one go.
    ok(samsa("configs", *bs, "--topic", topic, "--alter", "--add-config", "segment.ms=600000",
             "--delete-config", "retention.ms"))
    lines = config_lines(bs, "--topic", topic)
    assert [line.split(" ")[2] for line in lines[1:]] == ["segment.ms=600000"]


def test_configs_describe_all(bs: list[str]) -> None:
    topic = unique("cfgall")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1,
             "--config", "retention.ms=5000"))
    lines = config_lines(bs, "--topic", topic, "--all")
    assert lines[0] == f"All configs for topic {topic} are:"
    names = [line.split("=")[0].strip() for line in lines[1:]]
    assert names == sorted(names)
    assert {"retention.ms", "segment.bytes", "cleanup.policy"} <= set(names)
    assert "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG" in "\n".join(
        lines
    )


def test_configs_take_effect(bs: list[str]) -> None:
    topic = unique("small")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    ok(samsa("configs", *bs, "--topic", topic, "--alter", "--add-config",
             "max.message.bytes=300"))
    line = error_line(samsa("produce", *bs, "--topic", topic, stdin="x" * 2000 + "\n"))
    assert "MESSAGE_TOO_LARGE" in line, line


def test_configs_errors(bs: list[str]) -> None:
    topic = unique("cfgerr")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    line = error_line(samsa("configs", *bs, "--topic", topic, "--alter",
                            "--delete-config", "retention.ms"))
    assert line == "samsa: INVALID_CONFIG: Invalid config(s): retention.ms"
    line = error_line(samsa("configs", *bs, "--topic", topic, "--alter",
                            "--add-config", "no.such.config=1"))
    assert line.startswith("samsa: INVALID_CONFIG"), line
    line = error_line(samsa("configs", *bs, "--topic", topic, "--alter",
                            "--add-config", "retention.ms=never"))
    assert line.startswith("samsa: INVALID_CONFIG"), line
    missing = unique("nocfg")
    line = error_line(samsa("configs", *bs, "--topic", missing, "--describe"))
    assert line.startswith("samsa: UNKNOWN_TOPIC_OR_PARTITION"), line
    line = error_line(samsa("configs", *bs, "--topic", missing, "--alter",
                            "--add-config", "retention.ms=1"))
    assert line.startswith("samsa: UNKNOWN_TOPIC_OR_PARTITION"), line


def test_configs_describe_every_topic(bs: list[str]) -> None:
    topic = unique("every")
    ok(samsa("topics", *bs, "--create", "--topic", topic, "--partitions", 1))
    lines = config_lines(bs, "--entity-type", "topics")
    assert f"Dynamic configs for topic {topic} are:" in lines


def test_configs_broker(broker: Broker, bs: list[str]) -> None:
    node = str(broker.server.broker_id)
    lines = config_lines(bs, "--entity-type", "brokers", "--entity-name", node)
    assert lines[0] == f"Dynamic configs for broker {node} are:"
    lines = config_lines(bs, "--broker", node, "--all")
    assert lines[0] == f"All configs for broker {node} are:"
    assert any(line.startswith("  num.partitions=2 ") for line in lines), lines
    lines = config_lines(bs, "--entity-type", "brokers")
    assert lines[0] == f"Dynamic configs for broker {node} are:"


@pytest.mark.parametrize(
    "args",
    [
        ["--describe"],
        ["--entity-type", "topics", "--entity-name", "t"],
        ["--entity-type", "topics", "--entity-name", "t", "--describe", "--alter"],
        ["--entity-type", "clients", "--entity-name", "u", "--alter", "--add-config",
         "retention.ms=10"],
        ["--entity-type", "users", "--alter", "--add-config", "SCRAM-SHA-256=[password=x]"],
        ["--entity-type", "users", "--entity-default", "--alter", "--add-config",
         "SCRAM-SHA-256=[password=x]"],
        ["--entity-type", "topics", "--entity-type", "users", "--describe"],
        ["--entity-type", "topics", "--entity-default", "--describe"],
        ["--user", "u", "--topic", "t", "--describe"],
        ["--entity-type", "brokers", "--entity-name", "one", "--describe"],
        ["--entity-type", "topics", "--alter", "--add-config", "a=1"],
        ["--entity-type", "topics", "--entity-name", "t", "--alter"],
        ["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "a"],
        ["--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "a=1=2"],
        ["--entity-type", "topics", "--entity-name", "t", "--describe", "--add-config", "a=1"],
        ["--topic", "t", "--broker", "1", "--describe"],
        ["--topic", "t", "--entity-type", "topics", "--describe"],
    ],
)
def test_configs_usage_errors(bs: list[str], args: list[str]) -> None:
    result = samsa("configs", *bs, *args)
    error_line(result)
    assert result.stdout == ""


# --- unreachable brokers ---------------------------------------------------------------------

TOOL_ARGS = {
    "topics": ["topics", "--list"],
    "configs": ["configs", "--entity-type", "topics", "--describe"],
    "produce": ["produce", "--topic", "t"],
    "consume": ["consume", "--topic", "t", "--timeout-ms", "1000"],
}


@pytest.mark.parametrize("tool", sorted(TOOL_ARGS))
def test_unreachable_broker(tool: str) -> None:
    args = TOOL_ARGS[tool]
    started = time.monotonic()
    result = samsa(args[0], "--bootstrap-server", f"127.0.0.1:{free_port()}", *args[1:],
                   stdin="x\n")
    line = error_line(result)
    assert "cannot connect" in line, line
    assert result.stdout == ""
    assert time.monotonic() - started < 30


def test_listener_that_never_answers(tmp_path: Path) -> None:
    """A port that accepts connections but never speaks Kafka: bounded by the metadata timeout."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        for _ in range(10_000):
            if stop.is_set():
                return
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        line = error_line(samsa("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list"))
        assert "cannot get metadata" in line, line
        assert time.monotonic() - started < 40
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
