"""Kafka's group coordinator: classic groups (joins, syncs, heartbeats, leaves), consumer
groups (KIP-848's ConsumerGroupHeartbeat), committed offsets.

``GroupCoordinator`` is what the broker and the handlers use. It composes four parts that
share one group table: ``GroupStore`` (group_store.py: the groups in memory and their records
in ``__consumer_offsets``, loaded back when the broker starts or leads a partition),
``GroupMembership`` (group_membership.py and group_rebalance.py: the classic member requests
and the rebalances), ``ConsumerGroupManager`` (consumer_heartbeat.py: consumer groups), and
``OffsetStore`` (group_offsets.py: committed offsets). It runs the one timer they share:
members whose session expired leave, and offsets past their retention expire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from samsa.config import CONSUMER_GROUP_ASSIGNORS, BrokerConfig, ConfigError
from samsa.coordinator.consumer_group import ConsumerGroup
from samsa.coordinator.consumer_heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    HeartbeatRequest,
    TopicView,
)
from samsa.coordinator.group import Group
from samsa.coordinator.group_membership import GroupMembership
from samsa.coordinator.group_offsets import OffsetEntry, OffsetStore, TopicPartition
from samsa.coordinator.group_rebalance import Response, join_error
from samsa.coordinator.group_store import OFFSETS_TOPIC, GroupStore, now_ms
from samsa.coordinator.records import OffsetValue
from samsa.coordinator.writer import PartitionWriter
from samsa.errors import ErrorCode

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "now_ms"]

log = logging.getLogger(__name__)

_EXPIRY_TICK_S = 0.25


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, writer: PartitionWriter,
                 partition_exists: Callable[[str, int], bool],
                 topics: Callable[[], TopicView | None] = lambda: None) -> None:
        """``writer`` reaches the __consumer_offsets partitions; ``partition_exists`` says
        whether the cluster has a partition offsets are committed for; ``topics``: the
        cluster's topics (consumer groups subscribe to them and their regexes match them)."""
        c = config
        self.store = GroupStore(writer, c.get("offsets.topic.num.partitions"),
                                c.get("offsets.commit.timeout.ms") / 1000)
        self.membership = GroupMembership(
            self.store,
            initial_delay_ms=c.get("group.initial.rebalance.delay.ms"),
            min_session_ms=c.get("group.min.session.timeout.ms"),
            max_session_ms=c.get("group.max.session.timeout.ms"),
            max_size=c.get("group.max.size"),
        )
        self.consumer = ConsumerGroupManager(self.store, consumer_group_config(c), topics)
        self.consumer.conversion.on_downgrade = self._downgraded
        self.offsets = OffsetStore(
            self.store, partition_exists, consumer=self.consumer,
            metadata_max_bytes=c.get("offset.metadata.max.bytes"),
            retention_ms=c.get("offsets.retention.minutes") * 60_000,
        )
        self.retention_check_s = c.get("offsets.retention.check.interval.ms") / 1000
        self._task: asyncio.Task[None] | None = None

    @property
    def groups(self) -> dict[str, Group]:
        return self.store.groups

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self.store.consumer_groups

    @property
    def writer(self) -> PartitionWriter:
        return self.store.writer

    @property
    def num_partitions(self) -> int:
        return self.store.num_partitions

    @property
    def min_session_ms(self) -> int:
        return self.membership.min_session_ms

    @property
    def retention_ms(self) -> int:
        return self.offsets.retention_ms

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Load every group and offset from __consumer_offsets, start the expiry timer."""
        self.store.load(self.writer.hosted())
        self.membership.start_sessions(self.groups.values())
        self.consumer.start_sessions(self.consumer_groups.values())
        self._task = asyncio.get_running_loop().create_task(self._expire_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.membership.abort_waiters()

    async def _expire_loop(self) -> None:
        loop = asyncio.get_running_loop()
        last_retention = loop.time()
        while True:
            await asyncio.sleep(_EXPIRY_TICK_S)
            try:
                now = loop.time()
                self.membership.expire_sessions(now)
                self.consumer.expire(now)
                if now - last_retention >= self.retention_check_s:
                    last_retention = now
                    self.expire_offsets(now_ms())
            except Exception:
                log.exception("group expiry failed; retrying at the next tick")

    # --- partitions of __consumer_offsets ------------------------------------------------------

    def ensure_offsets_topic(self) -> None:
        self.store.ensure_topic()

    def load_partition(self, index: int) -> None:
        """Cluster mode: this broker became the leader of a __consumer_offsets partition:
        read the groups stored there. Their members' sessions start now: they have been
        heartbeating to the previous coordinator, not to this one."""
        self.store.load([index])
        self.membership.start_sessions(self.store.groups_in(index))
        self.consumer.start_sessions(self.store.consumer_groups_in(index))

    def unload_partition(self, index: int) -> None:
        """Cluster mode: this broker stopped leading a __consumer_offsets partition. Its groups
        go (the new leader loads them); members waiting in a join or a sync are told
        NOT_COORDINATOR and find the new coordinator."""
        for group in self.store.unload(index):
            self.membership.release(group)

    def coordinates(self, group_id: str) -> bool:
        """Whether this broker coordinates the group: always on a single node; in cluster mode
        only while it leads the group's __consumer_offsets partition. Elsewhere a group
        request is answered NOT_COORDINATOR (the client finds the coordinator again), never
        from a state that another broker now owns or that this broker never loaded."""
        return self.store.coordinates(group_id)

    async def wait_replicated(self, group_id: str) -> ErrorCode | None:
        """Cluster mode: wait until what was written for the group reached the ISR of its
        __consumer_offsets partition (Kafka's offsets.commit.required.acks=-1), at most
        offsets.commit.timeout.ms; None when it did, else the error the client should get
        (Kafka's: COORDINATOR_NOT_AVAILABLE on a timeout, NOT_COORDINATOR after a move)."""
        return await self.store.wait_replicated(group_id)

    async def acknowledged(self, group_id: str, codes: dict[TopicPartition, ErrorCode]
                           ) -> dict[TopicPartition, ErrorCode]:
        """An offset commit's answer (OffsetCommit, TxnOffsetCommit): ``codes`` once what they
        acknowledge reached the ISR (``wait_replicated``); if it did not, each acknowledged
        entry gets the replication failure instead."""
        if not any(code == ErrorCode.none for code in codes.values()):
            return codes
        failed = await self.wait_replicated(group_id)
        if failed is None:
            return codes
        return {key: failed if code == ErrorCode.none else code for key, code in codes.items()}

    def complete_txn_offsets(self, index: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker reached __consumer_offsets partition ``index``: its pending
        offsets there become committed offsets (where nothing newer was committed since), or
        are dropped."""
        self.store.complete_txn_offsets(index, producer_id, commit)

    def _downgraded(self, group: Group) -> None:
        """A consumer group became this classic group: its members' sessions start and a
        classic rebalance begins (Kafka's convertToClassicGroup)."""
        self.membership.start_sessions([group])
        self.membership.rebalance.prepare(group)

    # --- members -------------------------------------------------------------------------------

    async def join(
        self, *, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
        protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int, client_id: str,
        client_host: str, version: int,
    ) -> Response:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and self.coordinates(group_id):
            if consumer.members:  # a classic member of a consumer group
                if not self.min_session_ms <= session_ms <= self.membership.max_session_ms:
                    return join_error(ErrorCode.invalid_session_timeout, member_id)
                return await self.consumer.classic.join(
                    consumer, member_id=member_id, instance_id=instance_id,
                    protocol_type=protocol_type, protocols=protocols, session_ms=session_ms,
                    rebalance_ms=rebalance_ms, client_id=client_id, client_host=client_host,
                    version=version)
            # an empty consumer group becomes a classic group (its offsets stay)
            self.store.write_and_apply(group_id, self.consumer.delete_records(consumer))
        return await self.membership.join(
            group_id=group_id, member_id=member_id, instance_id=instance_id,
            protocol_type=protocol_type, protocols=protocols, session_ms=session_ms,
            rebalance_ms=rebalance_ms, client_id=client_id, client_host=client_host,
            version=version)

    async def sync(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> Response:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and self.coordinates(group_id):
            return self.consumer.classic.sync(
                consumer, generation=generation, member_id=member_id, instance_id=instance_id,
                protocol_type=protocol_type, protocol_name=protocol_name)
        return await self.membership.sync(
            group_id=group_id, generation=generation, member_id=member_id,
            instance_id=instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=assignments)

    def heartbeat(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and self.coordinates(group_id):
            return self.consumer.classic.heartbeat(consumer, generation=generation,
                                                   member_id=member_id, instance_id=instance_id)
        return self.membership.heartbeat(group_id=group_id, generation=generation,
                                         member_id=member_id, instance_id=instance_id)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """Remove each (member id, instance id); one error code per member."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and self.coordinates(group_id):
            return self.consumer.classic.leave(consumer, members)
        return self.membership.leave(group_id, members)

    # --- consumer groups (KIP-848) ---------------------------------------------------------------

    async def consumer_heartbeat(
        self, request: HeartbeatRequest, *, version: int, client_id: str, client_host: str,
        describable: Callable[[set[str]], set[str]] | None = None,
    ) -> Response:
        """ConsumerGroupHeartbeat; ``describable`` keeps the topics the member may DESCRIBE."""
        return await self.consumer.heartbeat(request, version=version, client_id=client_id,
                                             client_host=client_host, describable=describable)

    def describe_consumer_group(self, group_id: str) -> Response:
        """One group of ConsumerGroupDescribe."""
        return self.consumer.describe(group_id)

    # --- offsets -------------------------------------------------------------------------------

    def commit(
        self, *, group_id: str, generation: int, member_id: str, instance_id: str | None,
        offsets: list[OffsetEntry], version: int,
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit (topic, partition, offset, leader epoch, metadata) entries; ``generation``
        is a consumer group member's epoch."""
        return self.offsets.commit(group_id=group_id, generation=generation,
                                   member_id=member_id, instance_id=instance_id,
                                   offsets=offsets, version=version)

    def txn_commit(
        self, *, group_id: str, producer_id: int, producer_epoch: int, generation: int,
        member_id: str, instance_id: str | None, offsets: list[OffsetEntry],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: offsets written with the producer's id and epoch as a transactional
        batch, applied when the transaction's marker reaches the group's partition."""
        return self.offsets.txn_commit(
            group_id=group_id, producer_id=producer_id, producer_epoch=producer_epoch,
            generation=generation, member_id=member_id, instance_id=instance_id,
            offsets=offsets)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions with a transactional offset commit still pending (KIP-447)."""
        return self.offsets.unstable_offsets(group_id)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetValue | None]:
        return self.offsets.fetch_offsets(group_id, partitions)

    def fetch_offsets_error(self, group_id: str, member_id: str | None,
                            member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+ from a member of a consumer group: whether its member id and epoch
        may fetch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        group = self.consumer_groups.get(group_id)
        return None if group is None else self.consumer.fetch_error(group, member_id,
                                                                     member_epoch)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        return self.offsets.delete_offsets(group_id, partitions)

    def expire_offsets(self, at_ms: int) -> None:
        """offsets.retention.minutes: expire what is past it at ``at_ms``."""
        self.offsets.expire_offsets(at_ms)

    def delete_group(self, group_id: str) -> ErrorCode:
        return self.offsets.delete_group(group_id)


_CONSUMER_GROUP_BOUNDS = (
    # (key, bound, the key must be: ">=" or "<=" or "<" the bound's value)
    ("group.consumer.max.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     ">="),
    ("group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", ">="),
    ("group.consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "<="),
    ("group.consumer.max.session.timeout.ms", "group.consumer.min.session.timeout.ms", ">="),
    ("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", ">="),
    ("group.consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms", "<="),
    ("group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms", "<"),
)
_WORDS = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}


def consumer_group_config(c: BrokerConfig) -> ConsumerGroupConfig:
    """The group.consumer.* keys, checked against each other as Kafka's
    GroupCoordinatorConfig does (ConfigError)."""
    for key, bound, op in _CONSUMER_GROUP_BOUNDS:
        value, limit = c.get(key), c.get(bound)
        ok = value >= limit if op == ">=" else value <= limit if op == "<=" else value < limit
        if not ok:
            raise ConfigError(f"{key} must be {_WORDS[op]} {bound}")
    return ConsumerGroupConfig(
        session_timeout_ms=c.get("group.consumer.session.timeout.ms"),
        heartbeat_interval_ms=c.get("group.consumer.heartbeat.interval.ms"),
        max_size=c.get("group.consumer.max.size"),
        assignors=tuple(CONSUMER_GROUP_ASSIGNORS[a] for a in c.get("group.consumer.assignors")),
        regex_refresh_interval_ms=c.get("group.consumer.regex.refresh.interval.ms"),
        migration_policy=c.get("group.consumer.migration.policy").lower(),
        classic_max_size=c.get("group.max.size"),
    )
