"""mm2.properties: MirrorMaker 2's keys, defaults and precedence.

A flow's setting is looked up as MM2's connectors see it: ``A->B.<key>`` first, then the
top-level ``<key>``, then MM2's default. A cluster's clients get ``<alias>.bootstrap.servers``,
the top-level and ``<alias>.``-prefixed client configs, and ``<alias>.producer.*`` /
``<alias>.consumer.*`` / ``<alias>.admin.*`` for one kind of client (librdkafka's names: most
of Kafka's client configs have the same name there).

Every error is a ``MirrorConfigError`` with one line naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.config import parse_properties
from samsa.tools.mirror_client import POLICY_CLASSES, DefaultReplicationPolicy

TOPICS_EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"
GROUPS_EXCLUDE_DEFAULT = r"console-consumer-.*, connect-.*, __.*"
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)

# MM2's connector settings with their defaults (MirrorSourceConfig, MirrorCheckpointConfig,
# MirrorHeartbeatConfig, MirrorConnectorConfig), plus Connect's worker keys samsa honours.
DEFAULTS: dict[str, str] = {
    "enabled": "false",
    "topics": ".*",
    "topics.exclude": TOPICS_EXCLUDE_DEFAULT,
    "groups": ".*",
    "groups.exclude": GROUPS_EXCLUDE_DEFAULT,
    "config.properties.exclude": CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
    "replication.factor": "2",
    "offset-syncs.topic.replication.factor": "3",
    "checkpoints.topic.replication.factor": "3",
    "heartbeats.topic.replication.factor": "3",
    "offset-syncs.topic.location": "source",
    "emit.offset-syncs.enabled": "true",
    "offset.lag.max": "100",
    "refresh.topics.enabled": "true",
    "refresh.topics.interval.seconds": "600",
    "refresh.groups.enabled": "true",
    "refresh.groups.interval.seconds": "600",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "600",
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    "heartbeats.replication.enabled": "true",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "60",
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "60",
    "consumer.poll.timeout.ms": "1000",
    "exactly.once.support": "disabled",
    "tasks.max": "1",
    # Connect's worker: how often source offsets are written to the offsets topic
    "offset.flush.interval.ms": "60000",
    "offset.storage.replication.factor": "3",
    # Connect's exactly-once source tasks: a transaction per poll, or per interval
    "transaction.boundary": "poll",
    "transaction.boundary.interval.ms": "",  # empty: offset.flush.interval.ms
}

# The keys MM2 renamed: the old name is read when the new one is not given.
DEPRECATED = {"topics.exclude": "topics.blacklist", "groups.exclude": "groups.blacklist",
              "config.properties.exclude": "config.properties.blacklist"}

BOOLEANS = {k for k, v in DEFAULTS.items() if v in ("true", "false")}
INTEGERS = {"replication.factor", "offset-syncs.topic.replication.factor",
            "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor",
            "offset.lag.max", "refresh.topics.interval.seconds", "refresh.groups.interval.seconds",
            "sync.topic.configs.interval.seconds", "emit.heartbeats.interval.seconds",
            "emit.checkpoints.interval.seconds", "sync.group.offsets.interval.seconds",
            "consumer.poll.timeout.ms", "tasks.max", "offset.flush.interval.ms",
            "offset.storage.replication.factor"}
# exactly.once.support: Connect's connector values (requested, required) and "enabled"/
# "disabled"; exactly.once.source.support: the worker's, which Kafka's MM2 docs set per target
EXACTLY_ONCE_VALUES = ("enabled", "required", "requested", "disabled")
SOURCE_SUPPORT_VALUES = ("enabled", "preparing", "disabled")

# Client configs that apply to every client of a cluster (the common ones of Kafka's
# CommonClientConfigs and the TLS/SASL ones), given top-level or as ``<alias>.<key>``.
CLIENT_KEYS = ("bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism",
               "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location",
               "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
               "ssl.endpoint.identification.algorithm", "socket.timeout.ms",
               "socket.connection.setup.timeout.ms", "metadata.max.age.ms",
               "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms")
CLIENT_KINDS = ("producer", "consumer", "admin")

_ALIAS = re.compile(r"^[A-Za-z0-9._-]+$")


class MirrorConfigError(ValueError):
    """A bad mm2.properties: one line naming the key."""


@dataclass(frozen=True)
class SourceAndTarget:
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


def compile_pattern_list(value: str) -> re.Pattern[str] | None:
    """MM2's comma-separated regex list as one pattern; an empty list matches nothing."""
    fields = [f.strip() for f in value.split(",") if f.strip()]
    if not fields:
        return None
    return re.compile("|".join(f"(?:{f})" for f in fields))


class MirrorMakerConfig:
    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = {k.strip(): v.strip() for k, v in props.items()}
        clusters = self.props.get("clusters", "")
        self.clusters = [c.strip() for c in clusters.split(",") if c.strip()]
        if not self.clusters:
            raise MirrorConfigError("clusters: missing; name the cluster aliases, e.g. "
                                    "clusters = A, B")
        for alias in self.clusters:
            if not _ALIAS.match(alias):
                raise MirrorConfigError(f"clusters: bad alias {alias!r} (letters, digits, "
                                        "'.', '_' and '-' only)")
            if not self.props.get(f"{alias}.bootstrap.servers"):
                raise MirrorConfigError(f"{alias}.bootstrap.servers: missing for cluster "
                                        f"{alias!r}")
        if len(set(self.clusters)) != len(self.clusters):
            raise MirrorConfigError(f"clusters: an alias is given twice in {clusters!r}")
        for key in self.props:
            if "->" in key:
                pair = key.split(".", 1)[0]
                source, _, target = pair.partition("->")
                for alias in (source, target):
                    if alias not in self.clusters:
                        raise MirrorConfigError(f"{key}: {alias!r} is not one of the clusters "
                                                f"({', '.join(self.clusters)})")
        for flow in self.flows():
            self._check(flow)

    @classmethod
    def from_file(cls, path: Path) -> MirrorMakerConfig:
        try:
            text = path.read_text()
        except OSError as exc:
            raise MirrorConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return cls(parse_properties(text.splitlines()))

    # -- flows ---------------------------------------------------------------------------------

    def flows(self) -> list[SourceAndTarget]:
        """The replication flows: every ``A->B.enabled = true`` of the clusters."""
        return [SourceAndTarget(s, t) for s in self.clusters for t in self.clusters
                if s != t and self.get_bool(SourceAndTarget(s, t), "enabled")]

    def heartbeat_pairs(self) -> list[SourceAndTarget]:
        """MM2's cluster pairs: every ordered pair, enabled or not, whose heartbeats are on
        (a flow A->B needs B->A's heartbeats in A to replicate them to B)."""
        pairs = []
        for s in self.clusters:
            for t in self.clusters:
                pair = SourceAndTarget(s, t)
                if s != t and (self.get_bool(pair, "enabled")
                               or self.get_bool(pair, "emit.heartbeats.enabled")):
                    pairs.append(pair)
        return pairs

    def get(self, flow: SourceAndTarget | None, key: str) -> str:
        if flow is not None:
            for name in (key, DEPRECATED.get(key)):
                if name and f"{flow}.{name}" in self.props:
                    return self.props[f"{flow}.{name}"]
        for name in (key, DEPRECATED.get(key)):
            if name and name in self.props:
                return self.props[name]
        if key not in DEFAULTS:
            raise KeyError(key)
        return DEFAULTS[key]

    def _key_for(self, flow: SourceAndTarget | None, key: str) -> str:
        if flow is not None and f"{flow}.{key}" in self.props:
            return f"{flow}.{key}"
        return key

    def get_bool(self, flow: SourceAndTarget | None, key: str) -> bool:
        value = self.get(flow, key).lower()
        if value not in ("true", "false"):
            raise MirrorConfigError(f"{self._key_for(flow, key)}: expected true or false, got "
                                    f"{value!r}")
        return value == "true"

    def get_int(self, flow: SourceAndTarget | None, key: str) -> int:
        value = self.get(flow, key)
        try:
            return int(value)
        except ValueError:
            raise MirrorConfigError(f"{self._key_for(flow, key)}: expected an integer, got "
                                    f"{value!r}") from None

    def get_pattern(self, flow: SourceAndTarget, key: str) -> re.Pattern[str] | None:
        value = self.get(flow, key)
        try:
            return compile_pattern_list(value)
        except re.error as exc:
            raise MirrorConfigError(f"{self._key_for(flow, key)}: bad regex in {value!r}: "
                                    f"{exc}") from None

    def source_support(self, target: str) -> str:
        """``exactly.once.source.support`` of a target cluster (Kafka's MM2 docs:
        ``us-east.exactly.once.source.support = enabled``), or the top-level one."""
        return self.props.get(f"{target}.exactly.once.source.support",
                              self.props.get("exactly.once.source.support", "disabled")).lower()

    def exactly_once(self, flow: SourceAndTarget) -> bool:
        """Transactions into the target: the target's exactly.once.source.support is enabled
        (as Kafka's MM2), or the flow's exactly.once.support is enabled or required."""
        return (self.source_support(flow.target) == "enabled"
                or self.get(flow, "exactly.once.support").lower() in ("enabled", "required"))

    def transaction_interval_ms(self, flow: SourceAndTarget) -> int | None:
        """None: a transaction per poll (transaction.boundary=poll)."""
        if self.get(flow, "transaction.boundary").lower() != "interval":
            return None
        if self.get(flow, "transaction.boundary.interval.ms") == "":
            return self.get_int(flow, "offset.flush.interval.ms")
        value = self.get_int(flow, "transaction.boundary.interval.ms")
        if value < 1:
            raise MirrorConfigError(f"{self._key_for(flow, 'transaction.boundary.interval.ms')}"
                                    f": must be at least 1, got {value}")
        return value

    def _check(self, flow: SourceAndTarget) -> None:
        for key in BOOLEANS:
            self.get_bool(flow, key)
        for key in INTEGERS:
            value = self.get_int(flow, key)
            # a replication factor of -1 is the broker's default.replication.factor
            if value < 1 and not (key.endswith("replication.factor") and value == -1):
                raise MirrorConfigError(f"{self._key_for(flow, key)}: must be at least 1, got "
                                        f"{value}")
        for key in ("topics", "topics.exclude", "groups", "groups.exclude",
                    "config.properties.exclude"):
            self.get_pattern(flow, key)
        eos = self.get(flow, "exactly.once.support").lower()
        if eos not in EXACTLY_ONCE_VALUES:
            raise MirrorConfigError(f"{self._key_for(flow, 'exactly.once.support')}: expected "
                                    f"one of {', '.join(EXACTLY_ONCE_VALUES)}, got {eos!r}")
        support = self.source_support(flow.target)
        if support not in SOURCE_SUPPORT_VALUES:
            key = (f"{flow.target}.exactly.once.source.support"
                   if f"{flow.target}.exactly.once.source.support" in self.props
                   else "exactly.once.source.support")
            raise MirrorConfigError(f"{key}: expected one of {', '.join(SOURCE_SUPPORT_VALUES)}"
                                    f", got {support!r}")
        boundary = self.get(flow, "transaction.boundary").lower()
        if boundary not in ("poll", "interval"):
            raise MirrorConfigError(f"{self._key_for(flow, 'transaction.boundary')}: expected "
                                    f"poll or interval, got {boundary!r}")
        self.transaction_interval_ms(flow)
        location = self.get(flow, "offset-syncs.topic.location").lower()
        if location not in ("source", "target"):
            raise MirrorConfigError(f"{self._key_for(flow, 'offset-syncs.topic.location')}: "
                                    f"expected source or target, got {location!r}")
        self.policy(flow.source)

    # -- the replication policy ------------------------------------------------------------------

    def policy(self, source_alias: str | None = None) -> DefaultReplicationPolicy:
        name = self.props.get("replication.policy.class",
                              "org.apache.kafka.connect.mirror.DefaultReplicationPolicy")
        cls = POLICY_CLASSES.get(name)
        if cls is None:
            raise MirrorConfigError(f"replication.policy.class: unknown class {name!r} (samsa "
                                    "has DefaultReplicationPolicy and IdentityReplicationPolicy)")
        separator = self.props.get("replication.policy.separator", ".")
        internal = self.props.get("replication.policy.internal.topic.separator.enabled", "true")
        if not separator:
            raise MirrorConfigError("replication.policy.separator: must not be empty")
        kwargs: dict[str, Any] = {"separator": separator,
                                  "internal_topic_separator_enabled": internal.lower() != "false"}
        if cls is not DefaultReplicationPolicy:
            kwargs["source_cluster_alias"] = self.props.get("source.cluster.alias", source_alias)
        return cls(**kwargs)

    # -- clients ---------------------------------------------------------------------------------

    def client_config(self, alias: str, kind: str) -> dict[str, str]:
        """librdkafka config for one kind of client (producer, consumer, admin) of a cluster."""
        config: dict[str, str] = {}
        for key in CLIENT_KEYS:
            if key in self.props:
                config[key] = self.props[key]
        for key in CLIENT_KEYS:
            if f"{alias}.{key}" in self.props:
                config[key] = self.props[f"{alias}.{key}"]
        for prefix in (f"{kind}.", f"{alias}.{kind}."):
            for key, value in self.props.items():
                if key.startswith(prefix) and "->" not in key and key not in DEFAULTS:
                    config[key[len(prefix):]] = value
        return config

    def offset_syncs_cluster(self, flow: SourceAndTarget) -> str:
        """The cluster holding the flow's offset syncs (MM2's offset-syncs.topic.location)."""
        location = self.get(flow, "offset-syncs.topic.location").lower()
        return flow.source if location == "source" else flow.target
