"""Topic selection and the topic, partition and config sync of a flow (MirrorSourceConnector's
part): which source topics are mirrored, the remote topics created with the source's partition
count, new partitions added, and topic configs copied."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from samsa.mirror.config import MirrorMakerConfig, SourceAndTarget
from samsa.tools.mirror_client import DefaultReplicationPolicy

log = logging.getLogger(__name__)
K = TypeVar("K")

ADMIN_TIMEOUT_S = 60.0
# Kafka's error names for a topic being created twice (two workers, or a restart)
_ALREADY_EXISTS = ("TOPIC_ALREADY_EXISTS",)


@dataclass
class TopicFilter:
    """MM2's DefaultTopicFilter and MirrorSourceConnector.shouldReplicateTopic."""

    flow: SourceAndTarget
    policy: DefaultReplicationPolicy
    include: re.Pattern[str] | None
    exclude: re.Pattern[str] | None
    heartbeats_replication: bool

    @classmethod
    def of(cls, config: MirrorMakerConfig, flow: SourceAndTarget) -> TopicFilter:
        return cls(flow, config.policy(flow.source), config.get_pattern(flow, "topics"),
                   config.get_pattern(flow, "topics.exclude"),
                   config.get_bool(flow, "heartbeats.replication.enabled"))

    def filter_matches(self, topic: str) -> bool:
        """The topics/topics.exclude lists alone (what checkpoints look at)."""
        return (self.include is not None and self.include.fullmatch(topic) is not None
                and not (self.exclude is not None and self.exclude.fullmatch(topic)))

    def should_replicate(self, topic: str) -> bool:
        return ((self.filter_matches(topic)
                 or (self.heartbeats_replication and self.policy.is_heartbeats_topic(topic)))
                and not self.policy.is_internal_topic(topic) and not self.is_cycle(topic))

    def is_cycle(self, topic: str) -> bool:
        """Whether the topic came from the target (directly or through other clusters): what
        keeps active/active A<->B from mirroring A.t back into A."""
        seen = set()
        while topic not in seen:
            seen.add(topic)
            source = self.policy.topic_source(topic)
            if source is None:
                return False
            if source == self.flow.target:
                return True
            upstream = self.policy.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False
            topic = upstream
        return False

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.flow.source, topic)


def _errors(futures: Mapping[K, Future[Any]]) -> dict[K, KafkaException]:
    failed = {}
    for key, future in futures.items():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            failed[key] = exc
    return failed


def partition_counts(admin: AdminClient, topics: Iterable[str] | None = None) -> dict[str, int]:
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    wanted = None if topics is None else set(topics)
    return {name: len(t.partitions) for name, t in metadata.topics.items()
            if t.error is None and (wanted is None or name in wanted)}


def ensure_topics(admin: AdminClient, wanted: dict[str, int], replication_factor: int,
                  configs: dict[str, dict[str, str]] | None = None) -> None:
    """Create the missing topics and add partitions to those with fewer than wanted."""
    existing = partition_counts(admin)
    new = [NewTopic(name, count, replication_factor, config=(configs or {}).get(name, {}))
           for name, count in wanted.items() if name not in existing]
    grow = [NewPartitions(name, count) for name, count in wanted.items()
            if name in existing and existing[name] < count]
    if new:
        failed = _errors(admin.create_topics(new, operation_timeout=ADMIN_TIMEOUT_S))
        for exc in failed.values():
            if exc.args[0].name() not in _ALREADY_EXISTS:
                raise exc
        wait_for_leaders(admin, {t.topic: t.num_partitions for t in new})
    if grow:
        failed = _errors(admin.create_partitions(grow, operation_timeout=ADMIN_TIMEOUT_S))
        for exc in failed.values():
            if exc.args[0].name() != "INVALID_PARTITIONS":  # another worker grew it first
                raise exc


def wait_for_leaders(admin: AdminClient, topics: dict[str, int]) -> None:
    """Until the cluster's metadata shows every partition of the new topics with a leader (in
    a multi-broker cluster that takes a moment, and clients that look earlier cache the
    topic as unknown)."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    for topic, count in topics.items():
        while True:
            md = admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics.get(topic)
            if (md is not None and md.error is None and len(md.partitions) >= count
                    and all(p.leader >= 0 for p in md.partitions.values())):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} has no leader for every partition after "
                                   f"{ADMIN_TIMEOUT_S:g} s")
            time.sleep(0.1)


def capped_replication(admin: AdminClient, wanted: int) -> int:
    """A replication factor the cluster can meet: -1 (the broker's default) or at most its
    broker count (MM2's defaults of 2 and 3 do not fit a one-broker test cluster)."""
    if wanted == -1:
        return -1
    brokers = len(admin.list_topics(timeout=30).brokers)
    if wanted > brokers:
        log.warning("replication factor %d capped to the %d broker(s) of the cluster", wanted,
                    brokers)
    return max(1, min(wanted, brokers))


def ensure_internal_topic(admin: AdminClient, name: str, replication_factor: int) -> None:
    """One compacted partition, the replication factor capped to what the cluster has."""
    ensure_topics(admin, {name: 1}, capped_replication(admin, replication_factor),
                  {name: {"cleanup.policy": "compact"}})


def source_topic_configs(admin: AdminClient, topics: Iterable[str],
                         exclude: re.Pattern[str] | None) -> dict[str, dict[str, str]]:
    """The configs to copy (MirrorSourceConnector.targetConfig): set on the topic (not
    defaults, not the broker's static ones), neither read-only nor sensitive, not excluded."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    if not resources:
        return {}
    result: dict[str, dict[str, str]] = {}
    for resource, future in admin.describe_configs(resources).items():
        try:
            entries = future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("cannot describe the configs of %s: %s", resource.name, exc)
            continue
        result[resource.name] = {
            name: entry.value for name, entry in entries.items()
            if not entry.is_default and not entry.is_read_only and not entry.is_sensitive
            and int(getattr(entry.source, "value", entry.source)) == 1  # DYNAMIC_TOPIC_CONFIG
            and entry.value is not None
            and not (exclude is not None and exclude.fullmatch(name))
        }
    return result


def sync_topic_configs(admin: AdminClient, wanted: dict[str, dict[str, str]]) -> None:
    """Set the source's configs on the remote topics where they differ."""
    if not wanted:
        return
    current = {}
    for resource, future in admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, t) for t in wanted]).items():
        try:
            current[resource.name] = {n: e.value for n, e in
                                      future.result(timeout=ADMIN_TIMEOUT_S).items()}
        except KafkaException:
            current[resource.name] = {}
    changes = []
    for topic, configs in wanted.items():
        entries = [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET)
                   for n, v in configs.items() if current.get(topic, {}).get(n) != v]
        if entries:
            changes.append(ConfigResource(ConfigResource.Type.TOPIC, topic,
                                          incremental_configs=entries))
    if not changes:
        return
    failed = _errors(admin.incremental_alter_configs(changes))
    for resource, exc in failed.items():
        log.warning("cannot alter the configs of %s: %s", resource, exc)
