"""Checkpoints (MirrorCheckpointConnector + MirrorCheckpointTask): the source groups' committed
offsets, translated through the offset syncs, written to ``<source>.checkpoints.internal`` in
the target; with ``sync.group.offsets.enabled`` also committed to the target's groups that
have no active member, so a group can fail over and resume there."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from samsa.mirror import clients
from samsa.mirror.config import MirrorMakerConfig, SourceAndTarget
from samsa.mirror.metrics import FlowMetrics
from samsa.mirror.offset_syncs import OffsetSyncStore
from samsa.mirror.task import MirrorTask
from samsa.mirror.topics import ADMIN_TIMEOUT_S, TopicFilter, ensure_internal_topic
from samsa.tools.mirror_client import Checkpoint, OffsetSync, SchemaError, read_checkpoints

log = logging.getLogger(__name__)


class CheckpointFlow(MirrorTask):
    def __init__(self, config: MirrorMakerConfig, flow: SourceAndTarget, stop: threading.Event,
                 metrics: FlowMetrics) -> None:
        self.config, self.flow, self.stop, self.metrics = config, flow, stop, metrics
        self.filter = TopicFilter.of(config, flow)
        self.policy = self.filter.policy
        self.groups = config.get_pattern(flow, "groups")
        self.groups_exclude = config.get_pattern(flow, "groups.exclude")
        self.interval_s = config.get_int(flow, "emit.checkpoints.interval.seconds")
        self.sync_groups = config.get_bool(flow, "sync.group.offsets.enabled")
        self.sync_interval_s = config.get_int(flow, "sync.group.offsets.interval.seconds")
        self.store = OffsetSyncStore()
        self.checkpoints: dict[str, dict[tuple[str, int], Checkpoint]] = {}

    def _run(self) -> None:
        s, t, name = self.flow.source, self.flow.target, str(self.flow)
        self.source_admin = clients.admin(self.config, s, f"{name}-checkpoint-source-admin")
        self.target_admin = clients.admin(self.config, t, f"{name}-checkpoint-target-admin")
        self.checkpoints_topic = self.policy.checkpoints_topic(s)
        rf = self.config.get_int(self.flow, "checkpoints.topic.replication.factor")
        ensure_internal_topic(self.target_admin, self.checkpoints_topic, rf)
        for c in read_checkpoints(clients.config_for(self.config, t, "consumer",
                                                     f"{name}-checkpoints-reader"),
                                  self.checkpoints_topic):
            self.checkpoints.setdefault(c.group, {})[(c.topic, c.partition)] = c
        self.producer = clients.producer(self.config, t, f"{name}-checkpoints")
        syncs_alias = self.config.offset_syncs_cluster(self.flow)
        self.syncs_topic = self.policy.offset_syncs_topic(t)
        syncs_admin = self.source_admin if syncs_alias == s else self.target_admin
        ensure_internal_topic(syncs_admin, self.syncs_topic, self.config.get_int(
            self.flow, "offset-syncs.topic.replication.factor"))
        self.syncs = clients.consumer(self.config, syncs_alias, f"{name}-offset-syncs-reader", {
            "group.id": f"mm2-offset-syncs-reader.{self.flow}", "enable.partition.eof": True,
            "isolation.level": "read_committed"})
        self.syncs.assign([TopicPartition(self.syncs_topic, 0, OFFSET_BEGINNING)])
        try:
            next_checkpoint = next_sync = time.monotonic()
            while not self.stop.is_set():
                self._read_syncs()
                now = time.monotonic()
                if self.store.read_to_end and now >= next_checkpoint:
                    self.emit_checkpoints()
                    next_checkpoint = now + self.interval_s
                if self.sync_groups and self.store.read_to_end and now >= next_sync:
                    self.sync_group_offsets()
                    next_sync = now + self.sync_interval_s
        finally:
            self.syncs.close()
            self.producer.flush(10)

    def _read_syncs(self) -> None:
        for msg in self.syncs.consume(1000, timeout=0.2):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.store.read_to_end = True
                continue
            try:
                self.store.add(OffsetSync.deserialize(msg.key(), msg.value()))
            except SchemaError:
                log.info("%s: skipped an offset sync that does not parse", self.flow)

    def _wanted_group(self, group: str) -> bool:
        if group.startswith("mm2-"):  # the mirror's own groups
            return False
        return (self.groups is not None and self.groups.fullmatch(group) is not None
                and not (self.groups_exclude is not None
                         and self.groups_exclude.fullmatch(group)))

    def source_groups(self) -> list[str]:
        listed = self.source_admin.list_consumer_groups().result(timeout=ADMIN_TIMEOUT_S)
        return sorted(g.group_id for g in listed.valid if self._wanted_group(g.group_id))

    def _group_offsets(self, admin: Any, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        result = futures[group].result(timeout=ADMIN_TIMEOUT_S)
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "")
                for tp in result.topic_partitions or [] if tp.offset >= 0 and tp.error is None}

    def _rename(self, topic: str) -> str:
        """MirrorCheckpointTask.renameTopicPartition: ``t`` -> ``A.t``; a topic that came from
        the target (``B.t`` in A, mirrored back to B) -> its original name ``t``."""
        if self.policy.topic_source(topic) == self.flow.target:
            return self.policy.original_topic(topic)
        return self.policy.format_remote_topic(self.flow.source, topic)

    def checkpoints_for(self, group: str) -> list[Checkpoint]:
        found = []
        last = self.checkpoints.get(group, {})
        for (topic, partition), (offset, metadata) in self._group_offsets(
                self.source_admin, group).items():
            if not self.filter.filter_matches(topic):
                continue
            downstream = self.store.translate_downstream(topic, partition, offset)
            if downstream is None or downstream < 0:
                continue
            c = Checkpoint(group, self._rename(topic), partition, offset, downstream, metadata)
            previous = last.get((c.topic, c.partition))
            if (previous is None or c.upstream_offset < previous.upstream_offset
                    or c.downstream_offset > previous.downstream_offset):
                found.append(c)
        return found

    def emit_checkpoints(self) -> None:
        try:
            groups = self.source_groups()
        except KafkaException as exc:
            log.warning("%s: cannot list the groups of %s: %s", self.flow, self.flow.source, exc)
            return
        emitted = 0
        for group in groups:
            try:
                new = self.checkpoints_for(group)
            except KafkaException as exc:
                log.warning("%s: cannot read the offsets of group %s: %s", self.flow, group, exc)
                continue
            for c in new:
                self.producer.produce(self.checkpoints_topic, c.record_value(), c.record_key(),
                                      partition=0)
                self.checkpoints.setdefault(group, {})[(c.topic, c.partition)] = c
            emitted += len(new)
        if emitted:
            self.producer.flush(30)
            self.metrics.checkpoints += emitted

    def sync_group_offsets(self) -> None:
        """Commit the checkpoints to the target's groups that are empty or do not exist, where
        they are ahead of what the group has there (MirrorCheckpointTask.syncGroupOffset)."""
        groups = [g for g in self.checkpoints if self._wanted_group(g)]
        if not groups:
            return
        states = {}
        for group, future in self.target_admin.describe_consumer_groups(groups).items():
            try:
                states[group] = future.result(timeout=ADMIN_TIMEOUT_S).state
            except KafkaException:
                states[group] = None
        for group in groups:
            if states[group] not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
                continue
            current = self._group_offsets(self.target_admin, group)
            offsets = [TopicPartition(c.topic, c.partition, c.downstream_offset,
                                      metadata=c.metadata)
                       for (topic, partition), c in self.checkpoints[group].items()
                       if current.get((topic, partition), (-1, ""))[0] < c.downstream_offset]
            if not offsets:
                continue
            futures = self.target_admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, offsets)])
            try:
                futures[group].result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:  # a member joined meanwhile (UNKNOWN_MEMBER_ID, ...)
                log.info("%s: group %s's offsets not synced: %s", self.flow, group, exc)
