"""Topic administration through ZooKeeper, as Kafka's AdminZkClient: new topics and partitions
are placed on the live brokers and written to ``/brokers/topics``, deletions requested under
``/admin/delete_topics``, config overrides written to ``/config/topics``. Every broker (this
one too) learns of them through its replica manager's watches, so the calls that change the
topic store wait until this broker has seen the change."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from samsa.cluster.placement import assign_replicas
from samsa.cluster.replicas import Replicas
from samsa.cluster.topic_admin import (
    TP,
    Node,
    Outcome,
    PartitionView,
    Reassigning,
    TopicAdmin,
    wait_until,
)
from samsa.cluster.topics import Topic
from samsa.errors import ErrorCode, KafkaError
from samsa.zk.controller import Controller, NotControllerError
from samsa.zk.membership import ClusterMembership
from samsa.zk.replica_manager import ReplicaManager
from samsa.zk.zk_data import ReplicaAssignment, TopicAssignment

T = TypeVar("T")
NOT_CONTROLLER = "This is not the correct controller for this cluster."


class ZkTopicAdmin(TopicAdmin):
    def __init__(self, replicas: Replicas, membership: ClusterMembership,
                 default_replication_factor: int, inter_broker_listener: str = "PLAINTEXT"
                 ) -> None:
        super().__init__(replicas)
        self.membership = membership
        self.default_replication_factor = default_replication_factor
        self.inter_broker_listener = inter_broker_listener
        # what this broker has seen of the topics and partition states (set when the broker
        # joins the cluster)
        self.manager: ReplicaManager | None = None
        self.controller: Controller | None = None  # this broker's, active or not

    def live_brokers(self) -> dict[int, str | None]:
        return {b: info.rack for b, info in sorted(self.membership.brokers.items())}

    def is_being_created(self, name: str) -> bool:
        return self.manager is not None and name in self.manager.assignments

    def _node(self, broker_id: int, listener: str | None = None) -> Node | None:
        info = self.membership.brokers.get(broker_id)
        endpoint = (info.endpoint(listener or self.inter_broker_listener)
                    if info is not None else None)
        if info is None or endpoint is None:
            return None
        return Node(broker_id, endpoint.host or "", endpoint.port, info.rack)

    def nodes(self, listener: str | None = None) -> list[Node]:
        return [n for b in sorted(self.membership.brokers)
                if (n := self._node(b, listener)) is not None]

    def controller_id(self) -> int:
        found = self.membership.controller_id
        return found if found is not None else -1

    def describe_partition(self, topic: str, index: int) -> PartitionView:
        """As this broker's view of the controller's partition state znode has it. Offline
        replicas (Kafka's MetadataResponse ``offline_replicas``): those of brokers not live,
        and those in a failed log directory of their broker (this broker knows its own at
        once, the others' from ``/samsa/offline_replicas``)."""
        manager = self.manager
        info = manager.partitions.get((topic, index)) if manager else None
        if manager is None or info is None or info.state is None:
            return PartitionView(-1, -1, info.replicas if info else (), ())
        live = self.membership.brokers
        here = self.replicas.broker_id
        tp = (topic, index)
        offline_here = self.replicas.log_manager.is_offline(tp)  # a failed log dir

        def offline(r: int) -> bool:
            if r not in live:
                return True
            if r == here:
                return offline_here
            return tp in manager.offline_replicas.get(r, ())

        return PartitionView(info.state.leader, info.state.leader_epoch, info.replicas,
                             tuple(info.state.isr), tuple(r for r in info.replicas if offline(r)))

    def coordinator_node(self, topic: str, index: int, listener: str | None = None
                         ) -> tuple[Node | None, str]:
        if not self.is_being_created(topic):
            return None, f"{topic} is being created"
        assert self.manager is not None
        info = self.manager.partitions.get((topic, index))
        leader = info.state.leader if info is not None and info.state is not None else -1
        node = self._node(leader, listener)
        if node is None and leader >= 0 and leader in self.membership.brokers:
            return None, f"the coordinator has no listener {listener}"
        return (node, "") if node is not None else (None, "the coordinator has no leader yet")

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
        """Every live replica deletes its copy, then the controller the topic's znodes; this
        waits until this broker has seen the topic go, as Kafka's DelayedDeleteTopics does
        (a topic of the same name created since is another topic)."""
        zk = self.membership.zk
        loop = asyncio.get_running_loop()
        store = self.replicas.store
        ids = {n: t.topic_id for n in names if (t := store.get(n)) is not None}
        for name in names:
            await loop.run_in_executor(None, zk.request_topic_deletion, name)
        return await wait_until(lambda: {n for n in names if (t := store.get(n)) is not None
                                         and t.topic_id == ids.get(n)}, timeout_ms)

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

    # --- requests only the controller answers ------------------------------------------------

    async def _on_controller(self, fn: Callable[[Controller], Callable[..., T]],
                             *args: Any) -> T:
        """Run a controller method; KafkaError(NOT_CONTROLLER) on the other brokers."""
        controller = self.controller
        if controller is None:
            raise KafkaError(NOT_CONTROLLER, ErrorCode.not_controller)
        try:
            return await asyncio.wrap_future(controller.call(fn(controller), *args))
        except NotControllerError:
            raise KafkaError(NOT_CONTROLLER, ErrorCode.not_controller) from None

    async def elect_leaders(self, election_type: int, wanted: Sequence[TP] | None
                            ) -> dict[TP, Outcome]:
        return await self._on_controller(lambda c: c.elect_leaders, election_type,
                                         None if wanted is None else list(wanted))

    async def alter_reassignments(self, targets: Mapping[TP, tuple[int, ...] | None]
                                  ) -> dict[TP, Outcome]:
        return await self._on_controller(lambda c: c.alter_reassignments, dict(targets))

    async def list_reassignments(self, wanted: Sequence[TP] | None) -> dict[TP, Reassigning]:
        found = await self._on_controller(lambda c: c.list_reassignments,
                                          None if wanted is None else list(wanted))
        return {tp: Reassigning(a.replicas, a.adding_replicas, a.removing_replicas)
                for tp, a in found.items()}
