"""The two ways a broker runs, behind one interface (``Mode``), chosen once when the broker is
built: ``SingleNode`` here (a cluster of one, no ZooKeeper) or ``samsa.zk.support.ZkSupport``
(``zookeeper.connect`` set). Nothing else in the broker asks which mode it is in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from samsa.cluster.acls import AclStore, FileAclStore
from samsa.cluster.broker_configs import BrokerConfigStore, LocalBrokerConfigStore
from samsa.cluster.client_quotas import ClientQuotaStore, LocalQuotaStore
from samsa.cluster.replicas import Replicas
from samsa.cluster.scram import LocalScramStore, ScramCredentialStore
from samsa.cluster.topic_admin import LocalTopicAdmin, TopicAdmin
from samsa.config import BrokerConfig
from samsa.security.authorizer import AclAuthorizer
from samsa.security.listeners import EndPoint
from samsa.storage.log_dir_failure import LogDirFailureChannel

if TYPE_CHECKING:
    from samsa.zk.controller import Controller
    from samsa.zk.membership import ClusterMembership
    from samsa.zk.replica_manager import ReplicaManager

FIRST_GENERATED_BROKER_ID = 1001


class Mode(Protocol):
    @property
    def single_node(self) -> bool: ...

    @property
    def topic_admin(self) -> TopicAdmin: ...

    # ZooKeeper mode's parts (None on a single node), for tools and tests that look inside
    @property
    def membership(self) -> ClusterMembership | None: ...

    @property
    def controller(self) -> Controller | None: ...

    @property
    def replica_manager(self) -> ReplicaManager | None: ...

    async def connect(self) -> None:
        """Before anything else (ZooKeeper's session)."""

    async def generate_broker_id(self) -> int:
        """A broker id for a broker configured with broker.id=-1 and no stored id."""

    async def cluster_id(self, stored: str | None, new: str) -> str:
        """The cluster id (``stored``: the one in meta.properties; ``new``: a fresh one)."""

    def producer_id_blocks(self, broker_id: int) -> Callable[[], tuple[int, int]] | None:
        """Where blocks of producer ids come from (None: the local block file alone)."""

    def open_replicas(self) -> None:
        """Open the replicas the broker hosts at start."""

    def acl_store(self, authorizer: AclAuthorizer) -> AclStore:
        """Where the authorizer's ACLs are kept (built only when there is an authorizer)."""
    def scram_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                    ) -> ScramCredentialStore:
        """Where SCRAM credentials are kept (a single node: its metadata dir)."""

    def quota_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                    ) -> ClientQuotaStore:
        """Where client quotas are kept (a single node: its metadata dir)."""

    def broker_config_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                            ) -> BrokerConfigStore:
        """Where the dynamic broker configs are kept (a single node: its metadata dir)."""

    def unclean_default_enabled(self) -> None:
        """The broker default unclean.leader.election.enable turned on while running."""

    async def join(self, broker_id: int, endpoints: Sequence[EndPoint]) -> None:
        """Once listening: join the cluster (``endpoints``: the advertised listeners)."""

    def log_dir_failed(self, partitions: list[tuple[str, int]]) -> None:
        """A log directory failed and these partitions went offline here (more may stay
        online in other directories): stop replicating them, tell the controller."""

    async def shut_down(self) -> None:
        """Before the listeners close (controlled shutdown)."""

    async def stop(self) -> None:
        """After the listeners closed (and when the start failed)."""


class SingleNode:
    """One broker, no ZooKeeper: it leads every partition, coordinates everything and is the
    controller."""

    single_node = True
    membership = None
    controller = None
    replica_manager = None

    def __init__(self, config: BrokerConfig, replicas: Replicas,
                 address: Callable[[str | None], tuple[str, int] | None]) -> None:
        self.replicas = replicas
        self.topic_admin = LocalTopicAdmin(replicas, config.get("broker.rack"), address)

    async def connect(self) -> None:
        pass

    async def generate_broker_id(self) -> int:
        return FIRST_GENERATED_BROKER_ID

    async def cluster_id(self, stored: str | None, new: str) -> str:
        return stored or new

    def producer_id_blocks(self, broker_id: int) -> Callable[[], tuple[int, int]] | None:
        return None

    def open_replicas(self) -> None:
        self.replicas.open_all_local()

    def acl_store(self, authorizer: AclAuthorizer) -> AclStore:
        """A file in the metadata dir (the first log dir), beside the topics."""
        manager = self.replicas.log_manager
        return FileAclStore(authorizer, manager.dirs[0], manager.failures)
    def scram_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                    ) -> ScramCredentialStore:
        return LocalScramStore(metadata_dir, failures)

    def quota_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                    ) -> ClientQuotaStore:
        return LocalQuotaStore(metadata_dir, failures)

    def broker_config_store(self, metadata_dir: Path, failures: LogDirFailureChannel
                            ) -> BrokerConfigStore:
        return LocalBrokerConfigStore(metadata_dir, failures)

    def unclean_default_enabled(self) -> None:
        pass  # a single node's replicas are all in sync

    async def join(self, broker_id: int, endpoints: Sequence[EndPoint]) -> None:
        pass

    def log_dir_failed(self, partitions: list[tuple[str, int]]) -> None:
        pass  # no other replica to lead them: they stay offline until the restart

    async def shut_down(self) -> None:
        pass

    async def stop(self) -> None:
        pass
