"""Topic administration through ZooKeeper, as Kafka's AdminZkClient: new topics and partitions
are placed on the live brokers and written to ``/brokers/topics``, deletions requested under
``/admin/delete_topics``, config overrides written to ``/config/topics``. Every broker (this
one too) learns of them through its replica manager's watches, so the calls that change the
topic store wait until this broker has seen the change."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence

from samsa.cluster.placement import assign_replicas
from samsa.cluster.replicas import Replicas
from samsa.cluster.topic_admin import TopicAdmin, wait_until
from samsa.cluster.topics import Topic
from samsa.errors import ErrorCode, KafkaError
from samsa.zk.membership import ClusterMembership
from samsa.zk.zk_data import ReplicaAssignment, TopicAssignment


class ZkTopicAdmin(TopicAdmin):
    def __init__(self, replicas: Replicas, membership: ClusterMembership,
                 default_replication_factor: int) -> None:
        super().__init__(replicas)
        self.membership = membership
        self.default_replication_factor = default_replication_factor
        # the topics this broker's replica manager has seen in /brokers/topics (set when the
        # broker joins the cluster)
        self.assigned: Mapping[str, TopicAssignment] = {}

    def live_brokers(self) -> dict[int, str | None]:
        return {b: info.rack for b, info in sorted(self.membership.brokers.items())}

    def is_being_created(self, name: str) -> bool:
        return name in self.assigned

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None,
        internal: bool = False, replication_factor: int | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> Topic:
        """Placed on the live brokers (or as ``assignment`` says) and written to ZooKeeper;
        the brokers open the logs when they see it (the ``Topic`` returned has the id
        written)."""
        factor = replication_factor or self.default_replication_factor
        placed = assignment or assign_replicas(self.live_brokers(), partitions, factor)
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs or {}), internal)
        written = TopicAssignment(
            {p: ReplicaAssignment(tuple(r)) for p, r in placed.items()}, topic.topic_id)
        if not self.membership.zk.create_topic(name, written, dict(configs or {})):
            raise KafkaError(f"Topic '{name}' already exists.", ErrorCode.topic_already_exists)
        return topic

    async def delete_topics(self, names: Sequence[str], timeout_ms: int) -> set[str]:
        """The controller deletes them from ZooKeeper, every broker its replicas; this waits
        until this broker has seen it, as Kafka's DelayedDeleteTopics does."""
        zk = self.membership.zk
        loop = asyncio.get_running_loop()
        for name in names:
            await loop.run_in_executor(None, zk.request_topic_deletion, name)
        store = self.replicas.store
        return await wait_until(lambda: {n for n in names if store.get(n)}, timeout_ms)

    async def add_partitions(self, name: str, total: int,
                             assignment: Sequence[Sequence[int]] | None = None,
                             timeout_ms: int = 30000) -> None:
        zk = self.membership.zk
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, zk.topic_assignment_versioned, name)
        if found is None:
            raise KafkaError(f"Topic {name} does not exist.",
                             ErrorCode.unknown_topic_or_partition)
        current, version = found
        existing = len(current.partitions)
        if assignment is not None:
            added = {existing + i: list(r) for i, r in enumerate(assignment)}
        else:
            first = current.partitions[0].replicas
            brokers = sorted(self.live_brokers())
            start = next((i for i, b in enumerate(brokers) if b >= first[0]), 0)
            added = assign_replicas(self.live_brokers(), total - existing, len(first),
                                    fixed_start_index=start, start_partition_id=existing)
        partitions = dict(current.partitions)
        partitions.update({p: ReplicaAssignment(tuple(r)) for p, r in added.items()})
        new = TopicAssignment(partitions, current.topic_id)
        if await loop.run_in_executor(None, zk.set_topic_assignment, name, new,
                                      version) is None:
            raise KafkaError(f"The partitions of {name} changed meanwhile; try again.",
                             ErrorCode.reassignment_in_progress)
        store = self.replicas.store
        await wait_until(lambda: set() if (t := store.get(name)) is None
                         or t.partitions >= total else {name}, timeout_ms)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """In ZooKeeper, where every broker reads them; applied here at once."""
        self.membership.zk.set_topic_configs(name, dict(configs))
        self.replicas.apply_topic_configs(name, configs)
