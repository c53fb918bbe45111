"""The partitions this broker hosts (Kafka's ReplicaManager, less the ZooKeeper watches): opening
and dropping replicas, their topics' configs, the one check for requests only a leader may
answer, the leadership changes the coordinators listen to, and moves between log directories
(``mover``, ``log_dir_mover.LogDirMover``). Both modes use it: a single node
opens every partition of every topic as its leader; in cluster mode ``samsa.zk.replica_manager``
opens the replicas assigned here and applies the controller's states to them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from samsa.cluster.log_dir_mover import LogDirMover
from samsa.cluster.partition import Partition
from samsa.cluster.replication_quota import ReplicationQuotas
from samsa.cluster.topics import Topic, TopicStore
from samsa.config import LogConfig
from samsa.errors import ErrorCode, KafkaError, KafkaStorageError
from samsa.metrics import BrokerMetrics
from samsa.storage.log import Log
from samsa.storage.manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class Replicas:
    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metrics: BrokerMetrics | None = None  # what ISR changes count into
        self.broker_id = -1
        self.topics: TopicStore | None = None  # set at start, once the data dir is known
        # told (topic, index, leads) when this broker starts or stops leading a partition
        self.on_leadership: Callable[[str, int, bool], None] | None = None
        # told when a partition's log is deleted here (the log cleaner forgets it)
        self.on_drop: Callable[[TopicPartition], None] | None = None
        # told of replicas that could not be opened because their log is (or may be) in an
        # offline log directory (the broker tells the controller, as of a failed directory's)
        self.on_offline: Callable[[list[TopicPartition]], None] | None = None
        # replicas moving between this broker's log directories (AlterReplicaLogDirs)
        self.mover = LogDirMover(self)
        # the replication throttles (leader.replication.throttled.rate, ...)
        self.quotas = ReplicationQuotas(log_manager.config)

    def start(self, broker_id: int, topics: TopicStore) -> None:
        self.broker_id, self.topics = broker_id, topics

    @property
    def store(self) -> TopicStore:
        assert self.topics is not None, "the replicas are not started"
        return self.topics

    # --- looking partitions up ---------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def partition_exists(self, topic: str, index: int) -> bool:
        """Whether the cluster has this partition, hosted here or not (the topic store holds
        every topic of the cluster, each with its partition count)."""
        found = self.topics.get(topic) if self.topics is not None else None
        return found is not None and 0 <= index < found.partitions

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1,
                         require_leader: bool = True
                         ) -> tuple[Partition | None, ErrorCode | None]:
        """The partition a request that only its leader may answer is about (produce, fetch,
        ListOffsets, OffsetForLeaderEpoch, DeleteRecords), or the error to answer instead:
        NOT_LEADER_OR_FOLLOWER where the cluster has the partition but this broker does not
        lead it (or has not learned who does), UNKNOWN_TOPIC_OR_PARTITION where the cluster
        has no such partition, KAFKA_STORAGE_ERROR where its log is in an offline log
        directory, as Kafka's ReplicaManager answers."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if self.log_manager.is_offline((topic, index)):
                return None, ErrorCode.kafka_storage_error
            return None, (ErrorCode.not_leader_or_follower if self.partition_exists(topic, index)
                          else ErrorCode.unknown_topic_or_partition)
        return partition, partition.leader_error(current_leader_epoch, require_leader)

    def coordinator_partition(self, name: str, index: int) -> Partition:
        """The local leader of an internal topic's partition, where a coordinator writes;
        NOT_COORDINATOR when this broker does not lead it (cluster mode)."""
        partition = self.partition(name, index)
        if partition is None or (partition.replicated and not partition.is_leader):
            raise KafkaError(f"this broker does not lead {name}-{index}",
                             ErrorCode.not_coordinator)
        return partition

    # --- opening and dropping ----------------------------------------------------------------

    def topic_log_config(self, topic: str) -> LogConfig:
        overrides = {}
        if self.topics is not None and (t := self.topics.get(topic)) is not None:
            overrides = t.configs
        return LogConfig.from_props(overrides, defaults=self.log_manager.defaults)

    def open_all_local(self) -> None:
        """A single node: every partition of every stored topic, led here; logs of topics that
        no longer exist are deleted."""
        store = self.store
        wanted = {(t.name, p) for t in store.topics.values() for p in range(t.partitions)}
        for tp in list(self.log_manager.logs):
            if tp not in wanted:
                log.warning("deleting log %s-%d: its topic no longer exists", *tp)
                self.log_manager.delete(*tp)
        for topic in store.topics.values():
            self.open_local(topic, is_new=False)

    def open_local(self, topic: Topic, *, is_new: bool = True) -> None:
        """A single node: the topic's partitions, led here (``is_new``: the topic, or the
        partitions not opened yet, are being created: see ``LogManager.get_or_create``)."""
        config = self.topic_log_config(topic.name)
        for p in range(topic.partitions):
            if (topic.name, p) not in self.partitions:
                log_ = self._open_log(topic.name, p, config, is_new)
                if log_ is not None:
                    partition = Partition(topic.name, p, log_, broker_id=self.broker_id)
                    partition.metrics = self.metrics
                    self.partitions[(topic.name, p)] = partition

    def _open_log(self, name: str, index: int, config: LogConfig, is_new: bool) -> Log | None:
        try:
            return self.log_manager.get_or_create(name, index, config, is_new=is_new)
        except KafkaStorageError as exc:
            log.error("%s-%d: not opened: %s", name, index, exc)
            if self.log_manager.is_offline((name, index)) and self.on_offline is not None:
                self.on_offline([(name, index)])
            return None

    def open_replica(self, name: str, index: int, replicas: tuple[int, ...],
                     *, is_new: bool = True) -> Partition | None:
        """Cluster mode: open (or create) the log of one replica hosted here. It leads nothing
        until the controller's state for it is applied (``Partition.leader_error``). None when
        its log is (or may be) in an offline directory, or cannot be created in any
        (``is_new``: the replica is being created, by a new topic or partition or a
        reassignment: see ``LogManager.get_or_create``)."""
        partition = self.partitions.get((name, index))
        if partition is None:
            log_ = self._open_log(name, index, self.topic_log_config(name), is_new)
            if log_ is None:
                return None
            partition = Partition(
                name, index, log_, broker_id=self.broker_id, replicas=replicas,
                high_watermark=self.log_manager.checkpointed_high_watermark(name, index))
            partition.metrics = self.metrics
            self.partitions[(name, index)] = partition
        return partition

    def drop_topic(self, name: str) -> None:
        """This broker's replicas of a topic and its entry in the topic store, gone."""
        self.drop_replicas(name)
        self.store.delete(name)

    def drop_replicas(self, name: str) -> None:
        """This broker's replicas of a topic, gone; the topic stays in the store (cluster
        mode: it is being deleted, and is until every replica has deleted its copy)."""
        topic = self.store.get(name)
        indexes = {p for t, p in list(self.log_manager.logs) + list(self.partitions) if t == name}
        if topic is not None:
            indexes |= set(range(topic.partitions))
        for p in sorted(indexes):
            self.drop_partition(name, p)

    def drop_partition(self, name: str, index: int) -> None:
        self.mover.cancel((name, index))
        partition = self.partitions.pop((name, index), None)
        if partition is not None:
            partition.close()
        self.log_manager.delete(name, index)
        if self.on_drop is not None:
            self.on_drop((name, index))

    def apply_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        store = self.store
        if store.get(name) is None:
            return
        store.set_configs(name, dict(configs))
        config = self.topic_log_config(name)
        for (t, _), partition in self.partitions.items():
            if t == name:
                partition.log.update_config(config)

    def topic_defaults_changed(self) -> None:
        """The broker's topic defaults changed (dynamic broker configs): every hosted log takes
        its topic's config anew (Kafka's DynamicLogConfig.updateLogsConfig)."""
        self.log_manager.defaults = self.log_manager.config.topic_defaults()
        configs: dict[str, LogConfig] = {}
        for (topic, _), partition in self.partitions.items():
            if topic not in configs:
                configs[topic] = self.topic_log_config(topic)
            partition.log.update_config(configs[topic])

    # --- offline log directories -------------------------------------------------------------

    def handle_log_dir_failure(self, directory: Path) -> list[TopicPartition]:
        """The partitions whose logs are in ``directory``, which failed, go offline here
        (Kafka's ReplicaManager.handleLogDirFailure): requests about them answer
        KAFKA_STORAGE_ERROR, waiting fetches and acks=all produces answer now, and a
        coordinator whose partition this broker led lets it go. Returns them."""
        self.mover.dir_failed(directory)
        gone = sorted(tp for tp in self.partitions if self.log_manager.dir_of(tp) == directory)
        for tp in gone:
            partition = self.partitions.pop(tp)
            led = partition.is_leader
            partition.go_offline()
            if led and self.on_leadership is not None:
                self.on_leadership(tp[0], tp[1], False)
        return gone

    # --- leadership --------------------------------------------------------------------------

    def became_leader(self, name: str, index: int) -> None:
        """Cluster mode: this broker now leads ``name``-``index``."""
        if self.partition(name, index) is not None and self.on_leadership is not None:
            self.on_leadership(name, index, True)

    def stopped_leading(self, name: str, index: int) -> None:
        """Cluster mode: another broker leads ``name``-``index`` now."""
        if self.on_leadership is not None:
            self.on_leadership(name, index, False)

    def shrink_isrs(self, lag_time_max_ms: int) -> None:
        """Followers behind for replica.lag.time.max.ms leave the ISR of the partitions this
        broker leads (checked every tick, as Kafka checks every half of that time)."""
        for partition in self.partitions.values():
            if partition.replicated and partition.is_leader:
                gone = partition.shrink_isr(lag_time_max_ms)
                if gone:
                    if self.metrics is not None:
                        self.metrics.isr_shrinks += 1
                    log.info("%s-%d: ISR shrinking to %s (out: %s)", partition.topic,
                             partition.index, sorted(partition.wanted_isr), sorted(gone))

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint``: every hosted partition's high watermark, which
        a restarted replica starts from (``replica.high.watermark.checkpoint.interval.ms``
        and at shutdown)."""
        self.log_manager.checkpoint_high_watermarks(
            {tp: p.high_watermark for tp, p in self.partitions.items() if not p.closed})

    def wake_all(self) -> None:
        """Long-polls answer now with what they have (the broker is stopping)."""
        for partition in self.partitions.values():
            partition.wake_waiters()
