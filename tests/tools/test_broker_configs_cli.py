"""``samsa configs --entity-type brokers`` (kafka-configs.sh) against an embedded broker: one
broker's dynamic configs (``--entity-name``, ``--broker``) and the cluster's default
(``--entity-default``, ``--broker-defaults``) altered and described with kafka-configs' lines,
kept across a restart; refusals are one line with Kafka's error and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.embedded import Broker

from . import error_line, ok, samsa

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path / "data") as b:
        yield b


def configs(b: Broker, *args: str) -> list[str]:
    return ok(samsa("configs", "--bootstrap-server", b.bootstrap_servers, *args)).splitlines()


def refused(b: Broker, *args: str) -> str:
    result = samsa("configs", "--bootstrap-server", b.bootstrap_servers, *args)
    assert result.stdout == ""
    return error_line(result)


def test_alter_and_describe_a_broker_and_the_default(broker: Broker) -> None:
    node = str(broker.server.broker_id)
    assert configs(broker, "--entity-type", "brokers", "--entity-name", node, "--alter",
                   "--add-config", "log.retention.ms=5000,log.cleanup.policy=[delete,compact]"
                   ) == [f"Completed updating config for broker {node}."]
    assert configs(broker, "--entity-type", "brokers", "--entity-default", "--alter",
                   "--add-config", "log.retention.ms=7000,log.retention.bytes=999") == [
        "Completed updating default config for brokers in the cluster."]

    assert configs(broker, "--broker", node, "--describe") == [
        f"Dynamic configs for broker {node} are:",
        "  log.cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  log.retention.ms=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=5000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    default = [
        "Default configs for brokers in the cluster are:",
        "  log.retention.bytes=999 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "log.retention.bytes=999}",
        "  log.retention.ms=7000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "log.retention.ms=7000}",
    ]
    assert configs(broker, "--broker-defaults", "--describe") == default
    every = configs(broker, "--entity-type", "brokers", "--describe")
    assert every[0] == f"Dynamic configs for broker {node} are:"
    assert every[-3:] == default
    everything = configs(broker, "--broker", node, "--describe", "--all")
    assert everything[0] == f"All configs for broker {node} are:"
    assert any(line.startswith("  log.retention.bytes=999 ") for line in everything)
    assert any(line.startswith("  num.partitions=1 ") for line in everything)

    assert configs(broker, "--broker", node, "--alter", "--delete-config", "log.retention.ms"
                   ) == [f"Completed updating config for broker {node}."]
    assert configs(broker, "--broker", node, "--describe") == [
        f"Dynamic configs for broker {node} are:",
        "  log.cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
    ]


def test_configs_are_kept_across_a_restart(tmp_path: Path) -> None:
    with Broker(tmp_path / "data") as b:
        node = str(b.server.broker_id)
        configs(b, "--broker", node, "--alter", "--add-config",
                "follower.replication.throttled.rate=100000")
        configs(b, "--broker-defaults", "--alter", "--add-config", "max.connections=1000")
    with Broker(tmp_path / "data") as b:
        assert configs(b, "--broker", node, "--describe") == [
            f"Dynamic configs for broker {node} are:",
            "  follower.replication.throttled.rate=100000 sensitive=false synonyms={"
            "DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=100000}",
        ]
        assert configs(b, "--broker-defaults", "--describe")[1].startswith(
            "  max.connections=1000 ")
        assert b.server.replicas.quotas.follower.bound == 100000
        assert b.server.connection_limits.total == 1000


@pytest.mark.parametrize(("change", "expected"), [
    (["--add-config", "broker.id=5"],
     "samsa: INVALID_REQUEST: Cannot update these configs dynamically: Set(broker.id)"),
    (["--add-config", "leader.replication.throttled.rate=-100"],
     "samsa: INVALID_REQUEST: Invalid value -100 for configuration "
     "leader.replication.throttled.rate: must be >= 0"),
    (["--add-config", "no.such.config=1"],
     "samsa: INVALID_REQUEST: Unknown broker configuration 'no.such.config'"),
    (["--add-config", "log.retention.ms=soon"],
     "samsa: INVALID_REQUEST: Invalid value 'soon' for configuration log.retention.ms: "
     "expected a value of type long"),
    (["--delete-config", "log.retention.bytes"],
     "samsa: INVALID_CONFIG: Invalid config(s): log.retention.bytes"),
])
@pytest.mark.parametrize("target", [["--broker", "ID"], ["--broker-defaults"]])
def test_refusals_are_one_line_and_change_nothing(
    broker: Broker, target: list[str], change: list[str], expected: str
) -> None:
    target = [str(broker.server.broker_id) if t == "ID" else t for t in target]
    configs(broker, *target, "--alter", "--add-config", "log.retention.ms=5000")
    assert refused(broker, *target, "--alter", *change) == expected
    per_broker = target[0] == "--broker"
    assert broker.server.config.dynamic_props(per_broker) == {"log.retention.ms": "5000"}


def test_another_brokers_id_is_refused(broker: Broker) -> None:
    assert refused(broker, "--broker", "77", "--describe") == (
        "samsa: Broker 77 is not in the cluster")
    assert refused(broker, "--entity-type", "topics", "--entity-default", "--describe")
