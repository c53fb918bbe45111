"""A broker's ZooKeeper session (kazoo) and the znodes it owns, in Kafka's layout (zk_data.py).

What a ZooKeeper-mode Kafka broker does at start-up, in order:

1. connect (``zookeeper.connect``, which may end in a chroot such as ``host:2181/kafka``,
   ``zookeeper.session.timeout.ms``, ``zookeeper.connection.timeout.ms``) and create the
   persistent paths;
2. read ``/cluster/id`` or create it once (a lost race reads the winner's id);
3. register itself as the ephemeral ``/brokers/ids/<id>`` (NODEEXISTS: the id is taken);
4. take part in the controller election: the ephemeral ``/controller`` and, in the same
   ZooKeeper transaction, ``/controller_epoch`` + 1 conditional on its version, so two
   brokers can never both believe they won the same epoch.

The controller's writes (partition states, assignments, deletions) go in a ZooKeeper
transaction with a check of the ``/controller_epoch`` version it won with, as Kafka's
``checkControllerAndGetDataAsync`` does: a deposed controller that has not noticed yet (a
long pause, a session that expired under it) gets ``ControllerMovedError`` instead of
overwriting its successor's decisions.

Watches (kazoo's threads) call back with plain values; the caller moves them onto its loop.
Every call here blocks on ZooKeeper: the broker runs them in an executor.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from samsa.zk.zk_data import (
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    INITIAL_CONTROLLER_EPOCH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    PERSISTENT_ZK_PATHS,
    PRODUCER_ID_BLOCK_PATH,
    TOPICS_PATH,
    BrokerInfo,
    ConfigChangeNotification,
    ControllerInfo,
    EntityConfig,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
    broker_path,
    config_change_create_path,
    decode_broker_info,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_entity_config,
    decode_log_dir_event_notification,
    decode_partition_state,
    decode_producer_id_block,
    decode_topic_assignment,
    delete_topic_path,
    encode_broker_info,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_delete_topic,
    encode_entity_config,
    encode_log_dir_event_notification,
    encode_partition_state,
    encode_producer_id_block,
    encode_topic_assignment,
    log_dir_event_create_path,
    log_dir_event_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)

log = logging.getLogger(__name__)


class ZkError(RuntimeError):
    """ZooKeeper cannot be used as the broker needs (one line for the user)."""


class ControllerMovedError(ZkError):
    """A controller write was refused: ``/controller_epoch`` moved past the epoch this broker
    won (another broker is controller now)."""


# Not Kafka's: its brokers send the ControlledShutdown request to the controller; here the
# request and its answer go through this znode (one ephemeral child per attempt).
CONTROLLED_SHUTDOWN_PATH = "/samsa/controlled_shutdown"
# Not Kafka's either: its controller sends StopReplica(delete=true) to every replica of a topic
# being deleted and waits for the answers; here each replica answers with a child
# <broker id> of /samsa/topic_deletions/<topic> holding the id of the topic it deleted.
TOPIC_DELETIONS_PATH = "/samsa/topic_deletions"
# Not Kafka's: after a log dir event Kafka's controller learns which replicas of the broker
# are offline from its answers to LeaderAndIsr (KAFKA_STORAGE_ERROR); here the broker lists
# them in /samsa/offline_replicas/<id> before it writes the event. The broker rewrites it
# (empty: deleted) before it registers, so the list is always its current process's. Every
# broker watches these lists for its Metadata answers (Kafka's UpdateMetadata carries them).
OFFLINE_REPLICAS_PATH = "/samsa/offline_replicas"

Fence = int | None  # the /controller_epoch znode version a controller write is checked against


class ZkClient:
    def __init__(self, connect: str, session_timeout_ms: int,
                 connection_timeout_ms: int | None = None) -> None:
        self.connect = connect
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self.session_listeners: list[Callable[[str], None]] = []
        self.client.add_listener(self._on_state)

    # --- session ---------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self.client.start(timeout=self.connection_timeout_s)
        except KazooTimeoutError:
            self.client.stop()
            raise ZkError(f"cannot connect to ZooKeeper at {self.connect} within "
                          f"{self.connection_timeout_s * 1000:.0f} ms "
                          "(zookeeper.connection.timeout.ms)") from None
        for path in PERSISTENT_ZK_PATHS:
            self.client.ensure_path(path)
        self.client.ensure_path(CONTROLLER_EPOCH_PATH)

    def close(self) -> None:
        try:
            self.client.stop()
        finally:
            self.client.close()

    @property
    def session_id(self) -> int | None:
        return self.client.client_id[0] if self.client.client_id else None

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            log.warning("ZooKeeper session to %s lost", self.connect)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection to %s suspended", self.connect)
        for listener in list(self.session_listeners):
            listener(state)

    # --- cluster id ------------------------------------------------------------------------------

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``/cluster/id``, created with ``proposed`` if there is none yet."""
        try:
            self.client.create(CLUSTER_ID_PATH, encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self.client.get(CLUSTER_ID_PATH)
            return decode_cluster_id(data)

    # --- brokers ---------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> None:
        """Create the ephemeral ``/brokers/ids/<id>``; a ZkError when the id is registered by
        another live broker (Kafka: "Error while creating ephemeral at /brokers/ids/N, node
        already exists")."""
        path = broker_path(info.broker_id)
        try:
            self.client.create(path, encode_broker_info(info), ephemeral=True)
        except NodeExistsError:
            raise ZkError(f"broker.id {info.broker_id} is already registered in ZooKeeper at "
                          f"{self.connect} ({path}) by a running broker") from None

    def live_brokers(self) -> dict[int, BrokerInfo]:
        brokers = {}
        for child in self.client.get_children(BROKER_IDS_PATH):
            try:
                broker_id = int(child)
                data, _ = self.client.get(f"{BROKER_IDS_PATH}/{child}")
                brokers[broker_id] = decode_broker_info(broker_id, data)
            except (ValueError, NoNodeError) as exc:  # gone meanwhile, or not ours to read
                log.debug("skipping %s/%s: %s", BROKER_IDS_PATH, child, exc)
        return brokers

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> None:
        """``callback(sorted live broker ids)`` now and at every change."""

        def on_change(children: list[str]) -> None:
            callback(sorted(int(c) for c in children if c.isdigit()))

        self.client.ChildrenWatch(BROKER_IDS_PATH, on_change)

    # --- controller ------------------------------------------------------------------------------

    def controller_epoch(self) -> tuple[int, int]:
        """(epoch, its znode version)."""
        data, stat = self.client.get(CONTROLLER_EPOCH_PATH)
        if not data:
            return INITIAL_CONTROLLER_EPOCH, stat.version
        return decode_controller_epoch(data), stat.version

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Kafka's election: create ``/controller`` and bump ``/controller_epoch`` (checked
        against the version just read) in one transaction. (the new epoch, the epoch znode's
        new version: the controller's fence) when this broker won, None when another broker
        is controller."""
        for _ in range(5):  # the epoch can move between the read and the transaction
            epoch, version = self.controller_epoch()
            txn = self.client.transaction()
            txn.create(CONTROLLER_PATH, encode_controller(ControllerInfo(broker_id)),
                       ephemeral=True)
            txn.set_data(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1),
                         version=version)
            results = txn.commit()
            failures = [r for r in results if isinstance(r, Exception)]
            if not failures:
                return epoch + 1, version + 1
            if any(isinstance(r, NodeExistsError) for r in results):
                return None
            log.info("controller epoch moved during the election (%s); retrying", failures)
        return None

    def controller_id(self) -> int | None:
        try:
            data, _ = self.client.get(CONTROLLER_PATH)
        except NoNodeError:
            return None
        try:
            return decode_controller(data).broker_id
        except ZkDataError as exc:
            log.warning("unreadable %s: %s", CONTROLLER_PATH, exc)
            return None

    def watch_controller(self, callback: Callable[[int | None], None]) -> None:
        """``callback(controller id or None)`` now and whenever ``/controller`` changes."""

        def on_change(data: bytes | None, _stat: object) -> None:
            controller = None
            if data:
                try:
                    controller = decode_controller(data).broker_id
                except ZkDataError as exc:
                    log.warning("unreadable %s: %s", CONTROLLER_PATH, exc)
            callback(controller)

        self.client.DataWatch(CONTROLLER_PATH, on_change)

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if this broker holds it (controlled shutdown)."""
        try:
            data, stat = self.client.get(CONTROLLER_PATH)
            if decode_controller(data).broker_id == broker_id:
                self.client.delete(CONTROLLER_PATH, version=stat.version)
        except (NoNodeError, ZkDataError, KazooException):
            pass

    # --- topics and partition states ------------------------------------------------------------

    def create_topic(self, name: str, assignment: TopicAssignment,
                     configs: dict[str, str]) -> bool:
        """Write a new topic as Kafka's AdminZkClient does: its configs, then its assignment
        (whose creation the controller and the brokers watch). False when it exists."""
        self.client.ensure_path(topic_config_path(name))
        self.client.set(topic_config_path(name), encode_entity_config(EntityConfig(configs)))
        try:
            self.client.create(topic_path(name), encode_topic_assignment(assignment),
                               makepath=True)
        except NodeExistsError:
            return False
        return True

    def topics(self) -> list[str]:
        return sorted(self.client.get_children(TOPICS_PATH))

    def topic_assignment(self, name: str) -> TopicAssignment | None:
        try:
            data, _ = self.client.get(topic_path(name))
        except NoNodeError:
            return None
        return decode_topic_assignment(data, path=topic_path(name))

    def topic_configs(self, name: str) -> dict[str, str]:
        try:
            data, _ = self.client.get(topic_config_path(name))
        except NoNodeError:
            return {}
        return dict(decode_entity_config(data, path=topic_config_path(name)).config)

    def partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int] | None:
        """(state, znode version), None when the partition has no state yet."""
        path = partition_state_path(topic, partition)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return None
        return decode_partition_state(data, path=path), stat.version

    def _fenced(self, fence: Fence, ops: Callable[[Any], None]) -> list[Any]:
        """Run ``ops(transaction)`` after a check of the controller epoch version ``fence``;
        the results of ``ops``' operations. ControllerMovedError when the epoch moved."""
        txn = self.client.transaction()
        if fence is not None:
            txn.check(CONTROLLER_EPOCH_PATH, fence)
        ops(txn)
        results = txn.commit()
        if fence is None:
            return results
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(
                f"{CONTROLLER_EPOCH_PATH} moved on: another broker is controller")
        return results[1:]

    def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                               fence: Fence = None) -> int | None:
        """The new znode's version (0), None when another writer created it first (or the
        topic is gone)."""
        self.client.ensure_path(partitions_path(topic) + f"/{partition}")
        results = self._fenced(fence, lambda txn: txn.create(
            partition_state_path(topic, partition), encode_partition_state(state)))
        return None if isinstance(results[0], Exception) else 0

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               version: int, fence: Fence = None) -> int | None:
        """Kafka's conditional update: the new version, None when the znode moved on since
        ``version`` (the caller reads it again)."""
        results = self._fenced(fence, lambda txn: txn.set_data(
            partition_state_path(topic, partition), encode_partition_state(state),
            version=version))
        if isinstance(results[0], Exception):
            return None
        return version + 1

    def topic_assignment_versioned(self, name: str) -> tuple[TopicAssignment, int] | None:
        try:
            data, stat = self.client.get(topic_path(name))
        except NoNodeError:
            return None
        return decode_topic_assignment(data, path=topic_path(name)), stat.version

    def set_topic_assignment(self, name: str, assignment: TopicAssignment, version: int,
                             fence: Fence = None) -> int | None:
        """Replace a topic's assignment (new partitions, a reassignment) if the znode is still
        at ``version``: the new version, or None."""
        results = self._fenced(fence, lambda txn: txn.set_data(
            topic_path(name), encode_topic_assignment(assignment), version=version))
        if isinstance(results[0], Exception):
            return None
        return version + 1

    def watch_topic_assignment(self, name: str,
                               callback: Callable[[TopicAssignment | None], bool]) -> None:
        """``callback(assignment or None when deleted)`` now and at every change, until it
        returns False."""
        path = topic_path(name)

        def on_change(data: bytes | None, _stat: object) -> bool:
            if data is None:
                return callback(None)
            try:
                return callback(decode_topic_assignment(data, path=path))
            except ZkDataError as exc:
                log.warning("unreadable %s: %s", path, exc)
                return True

        self.client.DataWatch(path, on_change)

    def watch_topic_configs(self, name: str,
                            callback: Callable[[dict[str, str] | None], bool]) -> None:
        """``callback(the topic's config overrides)`` now and at every change, until it
        returns False."""
        path = topic_config_path(name)

        def on_change(data: bytes | None, stat: object) -> bool:
            if stat is None:
                return callback(None)
            try:
                return callback(dict(decode_entity_config(data, path=path).config))
            except ZkDataError as exc:
                log.warning("unreadable %s: %s", path, exc)
                return True

        self.client.DataWatch(path, on_change)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Write a topic's overrides and a change notification, as AdminZkClient does (the
        brokers here watch the config znode itself; the notification is for other readers)."""
        self.client.ensure_path(topic_config_path(name))
        self.client.set(topic_config_path(name), encode_entity_config(EntityConfig(configs)))
        self.client.create(config_change_create_path(),
                           encode_config_change(ConfigChangeNotification(f"topics/{name}")),
                           sequence=True, makepath=True)

    # --- topic deletion --------------------------------------------------------------------------

    def request_topic_deletion(self, name: str) -> None:
        """``/admin/delete_topics/<topic>``: the controller deletes it (kafka-topics --delete)."""
        try:
            self.client.create(delete_topic_path(name), encode_delete_topic(), makepath=True)
        except NodeExistsError:
            pass

    def topic_deletion_requests(self) -> list[str]:
        return sorted(self._children(DELETE_TOPICS_PATH))

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> None:
        self.client.ensure_path(DELETE_TOPICS_PATH)
        self.client.ChildrenWatch(DELETE_TOPICS_PATH, lambda names: callback(sorted(names)))

    def delete_topic(self, name: str, fence: Fence = None) -> None:
        """The controller's last step of a deletion: the partition states, the assignment,
        the configs, the replicas' answers, then the deletion request."""
        for child in self._children(partitions_path(name)):
            for path in (f"{partitions_path(name)}/{child}/state",
                         f"{partitions_path(name)}/{child}"):
                self._fenced(fence, lambda txn, path=path: txn.delete(path))
        answers = f"{TOPIC_DELETIONS_PATH}/{name}"
        for path in (partitions_path(name), topic_path(name), topic_config_path(name),
                     *(f"{answers}/{child}" for child in self._children(answers)), answers,
                     delete_topic_path(name)):
            self._fenced(fence, lambda txn, path=path: txn.delete(path))

    def answer_topic_deletion(self, name: str, broker_id: int,
                              topic_id: uuid.UUID | None) -> None:
        """This broker deleted its replicas of the topic ``topic_id`` named ``name``."""
        path = f"{TOPIC_DELETIONS_PATH}/{name}/{broker_id}"
        data = str(topic_id or "").encode()
        try:
            self.client.create(path, data, makepath=True)
        except NodeExistsError:  # left from an older topic: a new child is what is watched
            self.client.delete(path)
            self.client.create(path, data, makepath=True)

    def topic_deletion_answers(self, name: str, topic_id: uuid.UUID | None) -> set[int]:
        """The brokers that deleted their replicas of this topic (not of an older topic of
        the same name)."""
        answered = set()
        for child in self._children(f"{TOPIC_DELETIONS_PATH}/{name}"):
            try:
                data, _ = self.client.get(f"{TOPIC_DELETIONS_PATH}/{name}/{child}")
            except NoNodeError:
                continue
            if data.decode(errors="replace") == str(topic_id or ""):
                answered.add(int(child))
        return answered

    def watch_topic_deletion_answers(self, name: str, callback: Callable[[], bool]) -> None:
        """``callback()`` at every answer, until it returns False or the answers are gone."""
        path = f"{TOPIC_DELETIONS_PATH}/{name}"
        self.client.ensure_path(path)
        self.client.ChildrenWatch(path, lambda _children: callback())

    def _children(self, path: str) -> list[str]:
        try:
            return self.client.get_children(path)
        except NoNodeError:
            return []

    def watch_topics(self, callback: Callable[[list[str]], None]) -> None:
        """``callback(sorted topic names)`` now and at every change."""
        self.client.ensure_path(TOPICS_PATH)
        self.client.ChildrenWatch(TOPICS_PATH, lambda children: callback(sorted(children)))

    def watch_partition_state(
        self, topic: str, partition: int,
        callback: Callable[[PartitionState | None, int], None],
    ) -> None:
        """``callback(state or None, version)`` now and whenever the state znode changes."""
        path = partition_state_path(topic, partition)

        def on_change(data: bytes | None, stat: object) -> None:
            if data is None or stat is None:
                callback(None, -1)
                return
            try:
                callback(decode_partition_state(data, path=path), stat.version)  # type: ignore[attr-defined]
            except ZkDataError as exc:
                log.warning("unreadable %s: %s", path, exc)

        self.client.DataWatch(path, on_change)

    # --- controlled shutdown ---------------------------------------------------------------------

    def request_controlled_shutdown(self, broker_id: int) -> str:
        """Ask the controller to move this broker's leaderships (an ephemeral, sequential
        request znode; the controller writes the answer into it). The znode's path."""
        return self.client.create(f"{CONTROLLED_SHUTDOWN_PATH}/{broker_id}-", b"",
                                  ephemeral=True, sequence=True, makepath=True)

    def controlled_shutdown_answer(self, path: str) -> list[tuple[str, int]] | None:
        """The partitions the broker still leads, once the controller answered."""
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return None
        if not data:
            return None
        return [(t, int(p)) for t, p in json.loads(data)["remaining"]]

    def controlled_shutdown_requests(self) -> list[str]:
        return sorted(self._children(CONTROLLED_SHUTDOWN_PATH))

    def watch_controlled_shutdowns(self, callback: Callable[[list[str]], None]) -> None:
        self.client.ensure_path(CONTROLLED_SHUTDOWN_PATH)
        self.client.ChildrenWatch(CONTROLLED_SHUTDOWN_PATH,
                                  lambda names: callback(sorted(names)))

    def pending_controlled_shutdown(self, name: str) -> int | None:
        """The broker id of an unanswered request, else None."""
        try:
            data, _ = self.client.get(f"{CONTROLLED_SHUTDOWN_PATH}/{name}")
        except NoNodeError:
            return None
        return None if data else int(name.split("-", 1)[0])

    def answer_controlled_shutdown(self, name: str, remaining: list[tuple[str, int]],
                                   fence: Fence) -> None:
        data = json.dumps({"version": 1, "remaining": remaining}).encode()
        self._fenced(fence, lambda txn: txn.set_data(f"{CONTROLLED_SHUTDOWN_PATH}/{name}", data))

    # --- log directory failures ------------------------------------------------------------------

    def set_offline_replicas(self, broker_id: int, partitions: list[tuple[str, int]]) -> None:
        """The replicas of ``broker_id`` in its offline log directories (none: the znode
        goes)."""
        path = f"{OFFLINE_REPLICAS_PATH}/{int(broker_id)}"
        if not partitions:
            try:
                self.client.delete(path)
            except NoNodeError:
                pass
            return
        data = json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p} for t, p in sorted(partitions)]}).encode()
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except NodeExistsError:
                self.client.set(path, data)

    def offline_replicas(self, broker_id: int) -> set[tuple[str, int]]:
        try:
            data, _ = self.client.get(f"{OFFLINE_REPLICAS_PATH}/{int(broker_id)}")
        except NoNodeError:
            return set()
        return self._decode_offline_replicas(broker_id, data)

    def watch_offline_replicas(
            self, callback: Callable[[int, set[tuple[str, int]]], None]) -> None:
        """``callback(broker id, its offline replicas)`` for every broker listed under
        ``/samsa/offline_replicas`` now, and at every change of its list (empty: the znode is
        gone). Every broker watches them: its Metadata lists them (Kafka's brokers learn them
        from the controller's UpdateMetadata requests)."""
        self.client.ensure_path(OFFLINE_REPLICAS_PATH)
        watched: set[str] = set()
        lock = threading.Lock()

        def watch(child: str) -> None:
            broker_id = int(child)
            path = f"{OFFLINE_REPLICAS_PATH}/{child}"

            def on_change(data: bytes | None, _stat: object) -> None:
                # kept for the life of the session: a deleted znode may come back
                callback(broker_id, self._decode_offline_replicas(broker_id, data))

            self.client.DataWatch(path, on_change)

        def on_children(children: list[str]) -> None:
            for child in children:
                if not child.isdigit():
                    continue
                with lock:
                    if child in watched:
                        continue
                    watched.add(child)
                watch(child)

        self.client.ChildrenWatch(OFFLINE_REPLICAS_PATH, on_children)

    @staticmethod
    def _decode_offline_replicas(broker_id: int, data: bytes | None) -> set[tuple[str, int]]:
        if not data:
            return set()
        try:
            return {(e["topic"], int(e["partition"])) for e in json.loads(data)["partitions"]}
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("unreadable offline replicas of broker %d: %s", broker_id, exc)
            return set()

    def notify_log_dir_event(self, broker_id: int) -> str:
        """Kafka's propagateLogDirEvent: a sequential ``log_dir_event_<seq>`` znode for the
        controller. Its path."""
        return self.client.create(log_dir_event_create_path(),
                                  encode_log_dir_event_notification(broker_id),
                                  sequence=True, makepath=True)

    def log_dir_events(self) -> list[str]:
        return sorted(n for n in self._children(LOG_DIR_EVENT_NOTIFICATION_PATH)
                      if n.startswith(LOG_DIR_EVENT_PREFIX))

    def watch_log_dir_events(self, callback: Callable[[list[str]], None]) -> None:
        self.client.ensure_path(LOG_DIR_EVENT_NOTIFICATION_PATH)
        self.client.ChildrenWatch(LOG_DIR_EVENT_NOTIFICATION_PATH, lambda names: callback(
            sorted(n for n in names if n.startswith(LOG_DIR_EVENT_PREFIX))))

    def log_dir_event_broker(self, name: str) -> int | None:
        """The broker of a log dir event (None: gone, or not readable)."""
        path = log_dir_event_path(name)
        try:
            data, _ = self.client.get(path)
        except NoNodeError:
            return None
        try:
            return decode_log_dir_event_notification(data, path=path)
        except ZkDataError as exc:
            log.warning("ignoring %s: %s", path, exc)
            return None

    def delete_log_dir_events(self, names: list[str], fence: Fence) -> None:
        """The controller handled these events (Kafka's deleteLogDirEventNotifications)."""
        for name in names:  # one gone already is no error (a result, not raised)
            self._fenced(fence, lambda txn, name=name: txn.delete(log_dir_event_path(name)))

    # --- producer ids ----------------------------------------------------------------------------

    def take_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """The next block of producer ids, unique in the cluster: Kafka's conditional update
        of ``/latest_producer_id_block``."""
        self.client.ensure_path(PRODUCER_ID_BLOCK_PATH)
        while True:
            data, stat = self.client.get(PRODUCER_ID_BLOCK_PATH)
            last = decode_producer_id_block(data)
            block = (ProducerIdBlock(broker_id, 0, 999) if last is None
                     else last.next_block(broker_id))
            try:
                self.client.set(PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block),
                                version=stat.version)
                return block
            except BadVersionError:
                continue  # another broker took one meanwhile
