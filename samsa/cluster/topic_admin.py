"""Topic administration: create, delete, grow and configure topics, the coordinators' internal
topics, and the live brokers. One interface with two implementations, chosen once when the
broker is built: ``LocalTopicAdmin`` here (a single node is a cluster of one) and
``samsa.zk.topic_admin.ZkTopicAdmin`` (through ZooKeeper, as Kafka's AdminZkClient). Handlers
and coordinators ask the interface and never the mode.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

from samsa.cluster.replicas import Replicas
from samsa.cluster.topics import Topic
from samsa.errors import KafkaError


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

    def is_being_created(self, name: str) -> bool:
        """A topic whose creation is under way but not yet seen here (cluster mode)."""
        return False

    def ensure_internal_topic(self, name: str, partitions: int, segment_bytes: int,
                              replication_factor: int = 1) -> None:
        """A coordinator's compacted internal topic, created on first use with the
        replication factor capped by the live brokers."""
        if self.replicas.store.get(name) is not None or self.is_being_created(name):
            return
        try:
            self.create_topic(name, partitions, {"cleanup.policy": "compact",
                                                 "segment.bytes": str(segment_bytes)},
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

    def __init__(self, replicas: Replicas, rack: str | None) -> None:
        super().__init__(replicas)
        self.rack = rack

    def live_brokers(self) -> dict[int, str | None]:
        return {self.replicas.broker_id: self.rack}

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
