"""Topic administration: create, delete, grow and configure topics, the coordinators' internal
topics, and what Metadata and FindCoordinator tell clients of the cluster (its brokers, its
controller, each partition's leader and replicas). One interface with two implementations,
chosen once when the broker is built: ``LocalTopicAdmin`` here (a single node is a cluster of
one) and ``samsa.zk.topic_admin.ZkTopicAdmin`` (through ZooKeeper, as Kafka's AdminZkClient and
metadata cache). Handlers and coordinators ask the interface and never the mode.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from samsa.cluster.placement import check_target
from samsa.cluster.replicas import Replicas
from samsa.cluster.topics import Topic
from samsa.errors import ErrorCode, KafkaError

TP = tuple[str, int]
Outcome = tuple[ErrorCode, str | None]  # an error code and message per partition
NO_PARTITION = "The partition does not exist."


@dataclass(frozen=True, slots=True)
class Node:
    """A broker as clients reach it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class Reassigning:
    """A partition being moved (ListPartitionReassignments)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A partition as Metadata describes it (leader -1: none known, LEADER_NOT_AVAILABLE)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


class TopicAdmin(ABC):
    def __init__(self, replicas: Replicas) -> None:
        self.replicas = replicas

    @abstractmethod
    def live_brokers(self) -> dict[int, str | None]:
        """Broker id -> rack of the brokers alive."""

    @abstractmethod
    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None,
        internal: bool = False, replication_factor: int | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> Topic:
        """Create a topic (arguments already validated); TOPIC_ALREADY_EXISTS if it does."""

    @abstractmethod
    async def delete_topics(self, names: Sequence[str], timeout_ms: int) -> set[str]:
        """Delete topics; the names whose deletion did not complete within ``timeout_ms``."""

    @abstractmethod
    async def add_partitions(self, name: str, total: int,
                             assignment: Sequence[Sequence[int]] | None = None,
                             timeout_ms: int = 30000) -> None:
        """Grow a topic to ``total`` partitions (new replicas placed as Kafka places them, or
        as ``assignment`` says)."""

    @abstractmethod
    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """A topic's config overrides, applied here at once (and everywhere in a cluster)."""

    @abstractmethod
    def nodes(self, listener: str | None = None) -> list[Node]:
        """The brokers, as clients of ``listener`` reach them (Kafka's rule: a client is told
        the endpoints of the listener it connected on; brokers without that listener are
        left out). None: the inter-broker listener, as this broker reaches the others."""

    @abstractmethod
    def controller_id(self) -> int:
        """The controller's broker id (-1: none known)."""

    @abstractmethod
    def describe_partition(self, topic: str, index: int) -> PartitionView:
        """What Metadata says of a partition."""

    @abstractmethod
    def coordinator_node(self, topic: str, index: int, listener: str | None = None
                         ) -> tuple[Node | None, str]:
        """The broker that coordinates what lives in an internal topic's partition (its
        leader) as clients of ``listener`` reach it, or None and why
        (COORDINATOR_NOT_AVAILABLE; the topic is created on first use)."""

    @abstractmethod
    async def elect_leaders(self, election_type: int, wanted: Sequence[TP] | None
                            ) -> dict[TP, Outcome]:
        """ElectLeaders (0 preferred, 1 unclean) for ``wanted`` (None: every partition);
        KafkaError NOT_CONTROLLER where another broker must be asked."""

    @abstractmethod
    async def alter_reassignments(self, targets: Mapping[TP, tuple[int, ...] | None]
                                  ) -> dict[TP, Outcome]:
        """AlterPartitionReassignments (None cancels); KafkaError NOT_CONTROLLER where
        another broker must be asked."""

    @abstractmethod
    async def list_reassignments(self, wanted: Sequence[TP] | None) -> dict[TP, Reassigning]:
        """ListPartitionReassignments; KafkaError NOT_CONTROLLER where another broker must be
        asked."""

    def is_being_created(self, name: str) -> bool:
        """A topic whose creation is under way but not yet seen here (cluster mode)."""
        return False

    def ensure_internal_topic(self, name: str, partitions: int, segment_bytes: int,
                              replication_factor: int = 1,
                              compression_type: str = "producer") -> None:
        """A coordinator's compacted internal topic, created on first use with the
        replication factor capped by the live brokers. Its ``compression.type`` is set, as
        Kafka sets it, so that the broker's default does not recompress the coordinator's
        batches."""
        if self.replicas.store.get(name) is not None or self.is_being_created(name):
            return
        try:
            self.create_topic(name, partitions, {"cleanup.policy": "compact",
                                                 "segment.bytes": str(segment_bytes),
                                                 "compression.type": compression_type},
                              internal=True, replication_factor=min(
                                  replication_factor, len(self.live_brokers())))
        except KafkaError:
            pass  # another broker created it meanwhile


async def wait_until(pending: Callable[[], set[str]], timeout_ms: int) -> set[str]:
    """What ``pending`` still returns after ``timeout_ms`` (checked every 20 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000
    left = pending()
    while left and loop.time() < deadline:
        await asyncio.sleep(0.02)
        left = pending()
    return left


class LocalTopicAdmin(TopicAdmin):
    """A single node: the topic store and this broker's logs are the whole cluster."""

    def __init__(self, replicas: Replicas, rack: str | None,
                 address: Callable[[str | None], tuple[str, int] | None]) -> None:
        """``address``: the (host, port) clients of a listener reach this broker on, once it
        listens (None: it has no such listener)."""
        super().__init__(replicas)
        self.rack = rack
        self.address = address

    def live_brokers(self) -> dict[int, str | None]:
        return {self.replicas.broker_id: self.rack}

    def _self(self, listener: str | None = None) -> Node | None:
        address = self.address(listener)
        if address is None:
            return None
        return Node(self.replicas.broker_id, address[0], address[1], self.rack)

    def nodes(self, listener: str | None = None) -> list[Node]:
        node = self._self(listener)
        return [node] if node is not None else []

    def controller_id(self) -> int:
        return self.replicas.broker_id

    def describe_partition(self, topic: str, index: int) -> PartitionView:
        node = self.replicas.broker_id
        partition = self.replicas.partition(topic, index)
        offline = (node,) if self.replicas.log_manager.is_offline((topic, index)) else ()
        return PartitionView(node, partition.leader_epoch if partition else 0, (node,), (node,),
                             offline)

    def coordinator_node(self, topic: str, index: int, listener: str | None = None
                         ) -> tuple[Node | None, str]:
        node = self._self(listener)
        return (node, "") if node is not None else (None, f"no listener {listener}")

    def _partitions(self) -> set[TP]:
        return {(t.name, p) for t in self.replicas.store.topics.values()
                for p in range(t.partitions)}

    async def elect_leaders(self, election_type: int, wanted: Sequence[TP] | None
                            ) -> dict[TP, Outcome]:
        """Every partition already has its only replica as leader."""
        known = self._partitions()
        return {tp: ((ErrorCode.election_not_needed,
                      "Leader election not needed for topic partition.") if tp in known
                     else (ErrorCode.unknown_topic_or_partition, NO_PARTITION))
                for tp in (sorted(known) if wanted is None else wanted)}

    async def alter_reassignments(self, targets: Mapping[TP, tuple[int, ...] | None]
                                  ) -> dict[TP, Outcome]:
        """Only a move onto this broker is possible, and it is already there."""
        known = self._partitions()
        results: dict[TP, Outcome] = {}
        for tp, target in targets.items():
            if tp not in known:
                results[tp] = (ErrorCode.unknown_topic_or_partition, NO_PARTITION)
            elif target is None:
                results[tp] = (ErrorCode.no_reassignment_in_progress,
                               f"No reassignment is in progress for topic {tp[0]} "
                               f"partition {tp[1]}")
            elif (problem := check_target(target, {self.replicas.broker_id})) is not None:
                results[tp] = (ErrorCode.invalid_replica_assignment, problem)
            else:
                results[tp] = (ErrorCode.none, None)
        return results

    async def list_reassignments(self, wanted: Sequence[TP] | None) -> dict[TP, Reassigning]:
        return {}

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None,
        internal: bool = False, replication_factor: int | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> Topic:
        topic = self.replicas.store.create(name, partitions, dict(configs or {}), internal)
        self.replicas.open_local(topic)
        return topic

    async def delete_topics(self, names: Sequence[str], timeout_ms: int) -> set[str]:
        for name in names:
            self.replicas.drop_topic(name)
        return set()

    async def add_partitions(self, name: str, total: int,
                             assignment: Sequence[Sequence[int]] | None = None,
                             timeout_ms: int = 30000) -> None:
        store = self.replicas.store
        store.set_partitions(name, total)
        topic = store.get(name)
        assert topic is not None
        self.replicas.open_local(topic)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.replicas.apply_topic_configs(name, configs)
