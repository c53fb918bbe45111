"""A broker's partitions in ZooKeeper mode: which it hosts, and whether it leads or follows.

Watches (kazoo threads, moved onto the broker's event loop):

* ``/brokers/topics``: a new topic enters the broker's TopicStore with its id and configs,
  and the logs of the partitions this broker is a replica of are opened;
* ``/admin/delete_topics``: a topic marked for deletion loses its local replicas at once, and
  the controller is told (Kafka's StopReplica with delete=true and its answer); the topic
  stays known until the controller, told by every live replica, has removed it;
* ``/samsa/offline_replicas``: every broker's replicas in failed log directories, which
  Metadata lists as offline (Kafka's brokers have them from the controller's UpdateMetadata);
* every partition's state znode: the cluster's metadata (leader, leader epoch, ISR), which
  Metadata answers from. For a local replica the state is applied: the leader makes its
  partition leader (``Partition.make_leader``), the others follow it (``make_follower`` plus
  the ``ReplicaFetcher`` of that leader broker). A state from an older controller epoch than
  the last one seen for the partition is ignored (a deposed controller).

A leader's ISR changes (``Partition.on_isr_change``) are written back to the state znode,
conditional on the version the broker last saw, as Kafka's ZooKeeper-mode leaders do.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException

from samsa.cluster.partition import Partition
from samsa.cluster.replica_fetcher import ReplicaFetcher
from samsa.cluster.replicas import Replicas
from samsa.errors import KafkaStorageError
from samsa.zk.leader_election import isr_change
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import NO_LEADER, PartitionState, ReplicaAssignment, TopicAssignment

if TYPE_CHECKING:
    from samsa.config import BrokerConfig
    from samsa.security.channel import InterBrokerSecurity
    from samsa.zk.membership import ClusterMembership

log = logging.getLogger(__name__)


@dataclass
class PartitionInfo:
    replicas: tuple[int, ...]
    state: PartitionState | None = None
    version: int = -1


class ReplicaManager:
    def __init__(self, broker_id: int, config: BrokerConfig, replicas: Replicas,
                 membership: ClusterMembership,
                 inter_broker: InterBrokerSecurity | None = None) -> None:
        """``inter_broker``: the listener the fetchers connect to, and how (None:
        PLAINTEXT)."""
        self._broker_id = broker_id
        self.inter_broker_listener = inter_broker.listener_name if inter_broker else "PLAINTEXT"
        self.inter_broker_ssl = inter_broker.ssl_context if inter_broker else None
        self.inter_broker_sasl = inter_broker.sasl if inter_broker else None
        self.config = config
        self.replicas = replicas
        self.membership = membership
        self.zk: ZkClient = membership.zk
        self.assignments: dict[str, TopicAssignment] = {}
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tokens: dict[str, object] = {}  # a topic's watches stop when its token goes
        self._synced = False
        self.shutting_down = False
        self.deleting: set[str] = set()  # marked for deletion, their replicas deleted here
        # broker -> its replicas in failed log directories (/samsa/offline_replicas)
        self.offline_replicas: dict[int, frozenset[tuple[str, int]]] = {}

    @property
    def broker_id(self) -> int:
        return self._broker_id

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch the topics (blocking: run it in an executor); events go to ``loop``."""
        self._loop = loop
        self.zk.watch_offline_replicas(
            lambda broker, found: self._to_loop(self._offline_replicas_changed, broker, found))
        self.zk.watch_topic_deletions(self._on_deletions)
        self.zk.watch_topics(self._on_topics)

    def _offline_replicas_changed(self, broker: int, found: set[tuple[str, int]]) -> None:
        if found:
            self.offline_replicas[broker] = frozenset(found)
        else:
            self.offline_replicas.pop(broker, None)

    async def stop(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()),
                             return_exceptions=True)
        self.fetchers.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _to_loop(self, fn: Any, *args: Any) -> None:
        if self._loop is not None and not self._closed:
            self._loop.call_soon_threadsafe(fn, *args)

    # --- topics --------------------------------------------------------------------------------

    def _on_topics(self, names: list[str]) -> None:  # kazoo thread
        found = {}
        for name in names:
            if name not in self.assignments:
                assignment = self.zk.topic_assignment(name)
                if assignment is not None:
                    found[name] = (assignment, self.zk.topic_configs(name))
        self._to_loop(self._sync_topics, set(names), found)

    def _sync_topics(self, names: set[str],
                     found: dict[str, tuple[TopicAssignment, dict[str, str]]]) -> None:
        if self._closed:
            return
        for name in sorted(set(self.assignments) - names):
            log.info("topic %s was deleted: deleting its local replicas", name)
            self._remove_topic(name)
        # the topics of the first look existed before this broker started: their replicas
        # are not new (a log the broker cannot find may be in an offline log dir)
        first = not self._synced
        if first:  # first look: what was deleted or moved away while down
            self._synced = True
            self._drop_stale_logs(names, found)
        for name, (assignment, configs) in sorted(found.items()):
            self._add_topic(name, assignment, configs, is_new=not first)

    def _drop_stale_logs(self, names: set[str],
                         found: dict[str, tuple[TopicAssignment, dict[str, str]]]) -> None:
        store = self.replicas.store
        assert store is not None
        for name, topic in list(store.topics.items()):
            known = found.get(name)
            if name not in names or (known is not None and known[0].topic_id is not None
                                     and known[0].topic_id != topic.topic_id):
                log.warning("deleting the local replicas of topic %s: it was deleted "
                            "(or recreated) while this broker was away", name)
                self.replicas.drop_topic(name)
        for name, index in list(self.replicas.log_manager.logs):
            known = found.get(name)
            if known is None or self.broker_id not in known[0].partitions.get(
                    index, ReplicaAssignment(())).replicas:
                if name in self.assignments:
                    continue
                log.warning("deleting log %s-%d: not a replica of it any more", name, index)
                self.replicas.drop_partition(name, index)

    def _add_topic(self, name: str, assignment: TopicAssignment, configs: dict[str, str],
                   is_new: bool = True) -> None:
        if name in self.assignments or name in self.deleting or self._closed:
            return
        self.assignments[name] = assignment
        store = self.replicas.store
        if store.get(name) is None:
            store.create(name, len(assignment.partitions), configs,
                                 internal=name.startswith("__"), topic_id=assignment.topic_id)
        token = object()
        self._tokens[name] = token
        watches = [self._add_partition(name, index, replicas.replicas, token, is_new)
                   for index, replicas in sorted(assignment.partitions.items())]

        def on_assignment(new: TopicAssignment | None) -> bool:
            if self._tokens.get(name) is not token or new is None:
                return False
            self._to_loop(self._assignment_changed, name, new, token)
            return True

        def on_configs(new: dict[str, str] | None) -> bool:
            if self._tokens.get(name) is not token or new is None:
                return False
            self._to_loop(self._configs_changed, name, new, token)
            return True

        def register() -> None:
            for watch in watches:
                watch()
            self.zk.watch_topic_assignment(name, on_assignment)
            self.zk.watch_topic_configs(name, on_configs)

        assert self._loop is not None
        self._loop.run_in_executor(None, register)

    def _add_partition(self, name: str, index: int, replicas: tuple[int, ...],
                       token: object, is_new: bool = True) -> Callable[[], None]:
        """Track a partition (open it when this broker is a replica; ``is_new``: the
        partition is being created); the returned call registers its state watch
        (blocking)."""
        self.partitions[(name, index)] = PartitionInfo(replicas)
        if self.broker_id in replicas:
            self.replicas.open_replica(name, index, replicas, is_new=is_new)

        def watch(state: PartitionState | None, version: int) -> bool:
            if self._tokens.get(name) is not token:
                return False
            self._to_loop(self._apply_state, name, index, state, version)
            return True

        return lambda: self.zk.watch_partition_state(name, index, watch)

    def _assignment_changed(self, name: str, assignment: TopicAssignment, token: object) -> None:
        """New partitions, or a partition's replicas changed (a reassignment)."""
        if self._tokens.get(name) is not token or name in self.deleting or self._closed:
            return
        old = self.assignments[name]
        if old.topic_id is not None and assignment.topic_id != old.topic_id:
            return  # recreated under the same name: the topics watch sees the deletion
        self.assignments[name] = assignment
        store = self.replicas.store
        assert store is not None
        if (topic := store.get(name)) is not None and topic.partitions < len(
                assignment.partitions):
            store.set_partitions(name, len(assignment.partitions))
        watches = []
        for index, replicas in sorted(assignment.partitions.items()):
            info = self.partitions.get((name, index))
            if info is None:
                watches.append(self._add_partition(name, index, replicas.replicas, token))
            elif info.replicas != replicas.replicas:
                info.replicas = replicas.replicas
                self._replicas_changed(name, index, info)
        if watches:
            assert self._loop is not None
            self._loop.run_in_executor(None, lambda: [w() for w in watches])

    def _replicas_changed(self, name: str, index: int, info: PartitionInfo) -> None:
        if self.broker_id in info.replicas:
            self.replicas.open_replica(name, index, info.replicas)
            if info.state is not None:
                self._apply_state(name, index, info.state, info.version, again=True)
            return
        partition = self.replicas.partition(name, index)
        if partition is not None:
            log.info("%s-%d: no longer a replica here: deleting the local log", name, index)
            if partition.replicated and partition.is_leader:
                self.replicas.stopped_leading(name, index)
            self._stop_following(partition)
            self.replicas.drop_partition(name, index)

    def _configs_changed(self, name: str, configs: dict[str, str], token: object) -> None:
        if self._tokens.get(name) is token and not self._closed:
            self.replicas.apply_topic_configs(name, configs)

    def _remove_topic(self, name: str) -> None:
        self._tokens.pop(name, None)
        assignment = self.assignments.pop(name, None)
        for index in (assignment.partitions if assignment is not None else ()):
            self.partitions.pop((name, index), None)
            partition = self.replicas.partition(name, index)
            if partition is not None:
                self._stop_following(partition)
        self.replicas.drop_topic(name)

    def stop_following_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """Partitions gone offline here (their log directory failed): no longer fetched."""
        for fetcher in self.fetchers.values():
            for topic, index in partitions:
                fetcher.remove_partition(topic, index)

    # --- topic deletion -------------------------------------------------------------------------

    def _on_deletions(self, names: list[str]) -> None:  # kazoo thread
        self._to_loop(self._sync_deletions, {n: self.zk.topic_assignment(n) for n in names})

    def _sync_deletions(self, requested: dict[str, TopicAssignment | None]) -> None:
        if self._closed:
            return
        done = self.deleting - set(requested)
        self.deleting -= done
        for name in sorted(done):
            if name in self.assignments:  # whatever the topics watch saw: it is gone
                self._remove_topic(name)
        assert self._loop is not None
        if done:  # a topic of the same name may be there already: read it afresh
            self._loop.run_in_executor(None, lambda: self._on_topics(self.zk.topics()))
        for name, assignment in sorted(requested.items()):
            if name in self.deleting:
                continue
            self.deleting.add(name)
            if assignment is not None:
                log.info("topic %s is marked for deletion: deleting its local replicas", name)
            for partition in [p for (t, _), p in self.replicas.partitions.items() if t == name]:
                self._stop_following(partition)
            self.replicas.drop_replicas(name)
            if assignment is not None and any(self.broker_id in a.replicas
                                              for a in assignment.partitions.values()):
                self._spawn(self._answer_deletion(name, assignment.topic_id))

    async def _answer_deletion(self, name: str, topic_id: uuid.UUID | None) -> None:
        """Tell the controller that this broker's replicas of the topic are deleted (the
        deletion waits for it: retried until told)."""
        assert self._loop is not None
        while not self._closed and name in self.deleting:
            try:
                await self._loop.run_in_executor(None, self.zk.answer_topic_deletion, name,
                                                 self.broker_id, topic_id)
                return
            except Exception as exc:
                log.warning("topic %s: cannot tell the controller that its replicas here are "
                            "deleted (%r); retrying", name, exc)
                await asyncio.sleep(1)

    def stop_fetchers(self) -> None:
        """Controlled shutdown: stop following (the controller takes this broker out of the
        ISRs it is in)."""
        self.shutting_down = True
        for fetcher in self.fetchers.values():
            for key in list(fetcher.partitions):
                fetcher.remove_partition(*key)

    # --- partition states ----------------------------------------------------------------------

    def _apply_state(self, topic: str, index: int, state: PartitionState | None,
                     version: int, again: bool = False) -> None:
        info = self.partitions.get((topic, index))
        if info is None or state is None or self._closed:
            return
        if (not again and info.state is not None
                and state.controller_epoch < info.state.controller_epoch):
            log.warning("%s-%d: ignoring a state from controller epoch %d (seen %d)", topic,
                        index, state.controller_epoch, info.state.controller_epoch)
            return
        info.state, info.version = state, version
        partition = self.replicas.partition(topic, index)
        if partition is None or self.broker_id not in info.replicas:
            return
        if state.leader == self.broker_id:
            self._stop_following(partition)
            isr = {r for r in state.isr if r in info.replicas} | {self.broker_id}
            if not (partition.is_leader and partition.replicated
                    and partition.leader_epoch == state.leader_epoch):
                try:
                    partition.make_leader(info.replicas, isr, state.leader_epoch)
                except KafkaStorageError as exc:  # its directory goes offline
                    log.error("%s-%d: cannot lead: %s", topic, index, exc)
                    return
                partition.on_isr_change = self._isr_changed
                log.info("%s-%d: leading at epoch %d, ISR %s", topic, index,
                         state.leader_epoch, list(state.isr))
                self.replicas.became_leader(topic, index)
            else:
                partition.isr = isr
                partition.isr_written(isr)
                partition.update_replicas(info.replicas)
            if isr != set(state.isr):  # a replica that is gone: write the ISR without it
                self._isr_changed(partition)
        else:
            was_leader = partition.replicated and partition.is_leader
            partition.make_follower(state.leader, info.replicas, state.leader_epoch)
            if was_leader:
                log.info("%s-%d: leader %d at epoch %d; this broker follows", topic, index,
                         state.leader, state.leader_epoch)
                self.replicas.stopped_leading(topic, index)
            self._stop_following(partition)
            if state.leader != NO_LEADER and not self.shutting_down:
                self._follow(partition, state.leader, state.leader_epoch)

    def _stop_following(self, partition: Partition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove_partition(partition.topic, partition.index)

    def _follow(self, partition: Partition, leader: int, epoch: int) -> None:
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            membership = self.membership
            info = membership.brokers.get(leader) if membership is not None else None
            endpoint = info.endpoint(self.inter_broker_listener) if info is not None else None
            if endpoint is None:
                log.warning("%s-%d: leader %d is not registered yet (or has no listener %s); "
                            "retrying", partition.topic, partition.index, leader,
                            self.inter_broker_listener)
                assert self._loop is not None
                self._loop.call_later(0.5, self._retry_follow, partition, leader, epoch)
                return
            c = self.config
            fetcher = ReplicaFetcher(
                self.broker_id, (endpoint.host or "127.0.0.1", endpoint.port),
                leader_id=leader,
                fetch_max_bytes=c.get("replica.fetch.max.bytes"),
                fetch_response_max_bytes=c.get("replica.fetch.response.max.bytes"),
                fetch_wait_max_ms=c.get("replica.fetch.wait.max.ms"),
                fetch_min_bytes=c.get("replica.fetch.min.bytes"),
                fetch_backoff_ms=c.get("replica.fetch.backoff.ms"),
                socket_timeout_ms=c.get("replica.socket.timeout.ms"),
                ssl_context=self.inter_broker_ssl, sasl=self.inter_broker_sasl,
                quota=self.replicas.quotas.follower,
            )
            self.fetchers[leader] = fetcher
            fetcher.start()
        fetcher.add_partition(partition, epoch)

    def _retry_follow(self, partition: Partition, leader: int, epoch: int) -> None:
        info = self.partitions.get((partition.topic, partition.index))
        if (not self._closed and info is not None and info.state is not None
                and info.state.leader == leader and info.state.leader_epoch == epoch):
            self._follow(partition, leader, epoch)

    # --- ISR changes of the partitions this broker leads ---------------------------------------

    def _isr_changed(self, partition: Partition) -> None:
        self._spawn(self._write_isr(partition))

    async def _write_isr(self, partition: Partition) -> None:
        try:
            await self._write_isr_once(partition)
        except KazooException as exc:  # no session (cut off from ZooKeeper): the ISR stays
            # as ZooKeeper has it, the high watermark held back; the controller decides now
            log.warning("%s-%d: cannot write the ISR to ZooKeeper: %r", partition.topic,
                        partition.index, exc)

    async def _write_isr_once(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        assert self._loop is not None
        for _ in range(5):
            info = self.partitions.get(key)
            if info is None or info.state is None or info.state.leader != self.broker_id:
                return
            new = isr_change(info.state, partition.wanted_isr)
            if new is None:
                partition.isr_written(set(info.state.isr))
                return
            version = await self._loop.run_in_executor(
                None, self.zk.update_partition_state, partition.topic, partition.index, new,
                info.version)
            if version is not None:
                info.state, info.version = new, version
                partition.isr_written(set(new.isr))
                log.info("%s-%d: ISR %s written", partition.topic, partition.index,
                         list(new.isr))
                if set(new.isr) == partition.wanted_isr:
                    return
                continue  # the ISR changed again while it was being written
            found = await self._loop.run_in_executor(
                None, self.zk.partition_state, partition.topic, partition.index)
            if found is None:
                return
            info.state, info.version = found
        log.warning("%s-%d: could not write the ISR (the state kept changing)", *key)
