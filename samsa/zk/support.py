"""ZooKeeper mode, as the broker sees it (Kafka's ``ZkSupport``): the session, broker ids and the
cluster id from ZooKeeper, registration and the controller election, the replica manager's
watches, topic administration through ZooKeeper, and controlled shutdown. The broker builds
this or ``samsa.server.modes.SingleNode`` once, at start, and never asks which it has."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from samsa.cluster.broker_configs import BrokerConfigStore
from samsa.cluster.replicas import Replicas
from samsa.config import BrokerConfig, LogConfig
from samsa.security.authorizer import AclAuthorizer
from samsa.security.channel import InterBrokerSecurity
from samsa.security.listeners import EndPoint
from samsa.storage.log_dir_failure import LogDirFailureChannel
from samsa.zk.acls import ZkAclStore
from samsa.zk.broker_configs import ZkBrokerConfigStore
from samsa.zk.client_quotas import ZkQuotaStore
from samsa.zk.config_manager import ZkConfigManager
from samsa.zk.controlled_shutdown import ask_controlled_shutdown
from samsa.zk.controller import Controller
from samsa.zk.membership import ClusterMembership
from samsa.zk.replica_manager import ReplicaManager
from samsa.zk.scram import ZkScramStore
from samsa.zk.topic_admin import ZkTopicAdmin
from samsa.zk.zk_data import Endpoint

log = logging.getLogger(__name__)


class ZkSupport:
    single_node = False

    def __init__(self, config: BrokerConfig, replicas: Replicas,
                 inter_broker: InterBrokerSecurity) -> None:
        """``inter_broker``: the listener the brokers reach each other on, and how."""
        self.config = config
        self.replicas = replicas
        self.inter_broker = inter_broker
        self.membership = ClusterMembership(
            config.get("zookeeper.connect"), config.get("zookeeper.session.timeout.ms"),
            config.get("zookeeper.connection.timeout.ms"), config.get("broker.rack"))
        self.topic_admin = ZkTopicAdmin(replicas, self.membership,
                                        config.get("default.replication.factor"),
                                        inter_broker.listener_name)
        # entity configs (/config/users, /config/clients, ...) and their change notifications:
        # one follower per broker, each user of it registering the entity types it applies
        self.config_manager = ZkConfigManager(self.membership.zk)
        self.controller: Controller | None = None
        self.replica_manager: ReplicaManager | None = None
        self.broker_id = -1
        self._tasks: set[asyncio.Task[None]] = set()
        self._notify_pending = False  # a notification that has not read the list yet

    async def connect(self) -> None:
        await self.membership.connect()

    async def generate_broker_id(self) -> int:
        """Unique across the cluster (``/brokers/seqid``)."""
        return await self.membership.generate_broker_id()

    async def cluster_id(self, stored: str | None, new: str) -> str:
        return await self.membership.cluster_id(stored, new)

    def producer_id_blocks(self, broker_id: int) -> Callable[[], tuple[int, int]]:
        """Blocks of producer ids from ``/latest_producer_id_block`` (unique in the cluster)."""
        zk = self.membership.zk

        def take_block() -> tuple[int, int]:
            block = zk.take_producer_id_block(broker_id)
            return block.block_start, block.block_end

        return take_block

    def open_replicas(self) -> None:
        """Nothing yet: the replica manager opens the replicas assigned here once it joins."""

    def acl_store(self, authorizer: AclAuthorizer) -> ZkAclStore:
        """Kafka's ACL znodes and change notifications, shared by every broker."""
        return ZkAclStore(authorizer, self.membership.zk)
    def scram_store(self, metadata_dir: Path, failures: LogDirFailureChannel) -> ZkScramStore:
        """SCRAM credentials in ZooKeeper (/config/users), followed through the config change
        notifications."""
        return ZkScramStore(self.membership.zk, self.config_manager)

    def quota_store(self, metadata_dir: Path, failures: LogDirFailureChannel) -> ZkQuotaStore:
        """Client quotas in ZooKeeper (/config/users, /config/clients), followed through the
        config change notifications."""
        return ZkQuotaStore(self.membership.zk, self.config_manager)

    def broker_config_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                            ) -> BrokerConfigStore:
        """Dynamic broker configs in ZooKeeper (/config/brokers), followed through the config
        change notifications."""
        return ZkBrokerConfigStore(self.membership.zk, self.config_manager)

    def unclean_default_enabled(self) -> None:
        """The controller, if this broker is it, elects the offline partitions it now may."""
        if self.controller is not None and self.controller.active:
            self.controller.unclean_default_enabled()

    async def join(self, broker_id: int, endpoints: Sequence[EndPoint]) -> None:
        """Register (``endpoints``: the advertised listeners), take part in the election (the
        winner runs the controller), and apply the cluster's partition states to the local
        replicas."""
        membership = self.membership
        self.broker_id = broker_id

        def unclean(topic: str) -> bool:
            return LogConfig.from_props(membership.zk.topic_configs(topic),
                                        defaults=self.replicas.log_manager.defaults
                                        ).unclean_leader_election_enable

        controller = self.controller = Controller(membership.zk, broker_id, self.config.get,
                                                  unclean)

        def controllership(won: tuple[int, int] | None) -> None:
            if won is None:
                controller.deactivate()
            else:
                controller.activate(*won)

        membership.on_controllership = controllership
        loop = asyncio.get_running_loop()
        # what the controller may know of an earlier process's offline replicas is over
        await loop.run_in_executor(None, membership.zk.set_offline_replicas, broker_id,
                                   self.replicas.log_manager.offline_partitions())
        await membership.register(broker_id, tuple(
            Endpoint(e.listener_name, e.security_protocol, e.host, e.port) for e in endpoints))
        manager = self.replica_manager = ReplicaManager(broker_id, self.config, self.replicas,
                                                        membership, self.inter_broker)
        self.topic_admin.manager = manager
        self.topic_admin.controller = controller
        await loop.run_in_executor(None, manager.start, loop)

    def log_dir_failed(self, partitions: list[tuple[str, int]]) -> None:
        """Stop following the partitions gone offline, then tell the controller: this broker's
        offline replicas in ``/samsa/offline_replicas/<id>``, then Kafka's log dir event
        notification. The controller takes them out of their ISRs and elects other leaders
        where they led."""
        if self.replica_manager is not None:
            self.replica_manager.stop_following_partitions(partitions)
        if self._notify_pending:  # it will write the list as it is by then: one suffices
            return
        self._notify_pending = True
        task = asyncio.get_running_loop().create_task(self._notify_log_dir_failure())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify_log_dir_failure(self) -> None:
        zk = self.membership.zk
        loop = asyncio.get_running_loop()
        for attempt in range(10):
            self._notify_pending = False
            offline = self.replicas.log_manager.offline_partitions()
            try:
                await loop.run_in_executor(None, zk.set_offline_replicas, self.broker_id,
                                           offline)
                path = await loop.run_in_executor(None, zk.notify_log_dir_event,
                                                  self.broker_id)
            except Exception as exc:  # ZooKeeper unreachable for now: try again
                log.warning("could not tell the controller of the failed log directory "
                            "(attempt %d): %s", attempt + 1, exc)
                await asyncio.sleep(1.0)
                continue
            log.info("told the controller of %d offline replicas (%s)", len(offline), path)
            return
        log.error("gave up telling the controller of the failed log directory")

    async def shut_down(self) -> None:
        """Kafka's controlled shutdown (``controlled.shutdown.enable``): stop following, ask the
        controller to move this broker's leaderships to other in-sync replicas (retried while
        some remain), then wait (briefly) to see them go, so requests in flight get
        NOT_LEADER_OR_FOLLOWER and clients move on before the listeners close."""
        manager = self.replica_manager
        if manager is None or not self.config.get("controlled.shutdown.enable"):
            return
        manager.stop_fetchers()
        retries = self.config.get("controlled.shutdown.max.retries")
        backoff = self.config.get("controlled.shutdown.retry.backoff.ms") / 1000
        for attempt in range(retries + 1):
            try:
                remaining = await ask_controlled_shutdown(
                    self.broker_id, self.membership, self.controller)
            except Exception as exc:  # no controller, or it went: try again
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                remaining = None
            if remaining == []:
                break
            if remaining:
                log.info("controlled shutdown: %d partitions have no other in-sync replica "
                         "yet", len(remaining))
            if attempt < retries:
                await asyncio.sleep(backoff)
        else:
            log.warning("controlled shutdown did not move every leadership; stopping anyway")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 3.0
        while loop.time() < deadline and any(
                p.replicated and p.is_leader and len(p.replicas) > 1 and len(p.isr) > 1
                for p in self.replicas.partitions.values()):
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """After the listeners closed: stop the fetchers, the controller, the session."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.config_manager.stop()
        if self.replica_manager is not None:
            await self.replica_manager.stop()
        if self.controller is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.controller.close)
        await self.membership.close()
