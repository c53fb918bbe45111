"""What a handler gets besides the decoded request body: the request, the connection it came
on, and the broker's services through ``Broker``, the narrow interface handlers may use.
``KafkaServer`` (above the handlers) satisfies it; handlers import nothing above them, and
nothing in it depends on the mode (single node or ZooKeeper): topic administration answers
for both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from samsa.protocol.codec import Request
from samsa.security.acl import ANONYMOUS_PRINCIPAL

if TYPE_CHECKING:  # all from the layers below the handlers
    from samsa.cluster.acls import AclStore
    from samsa.cluster.broker_configs import DynamicBrokerConfig
    from samsa.cluster.producer_ids import ProducerIdManager
    from samsa.cluster.replicas import Replicas
    from samsa.cluster.scram import ScramCredentialStore
    from samsa.cluster.topic_admin import TopicAdmin
    from samsa.cluster.topics import TopicStore
    from samsa.config import BrokerConfig
    from samsa.coordinator.group_coordinator import GroupCoordinator
    from samsa.coordinator.txn_coordinator import TransactionCoordinator
    from samsa.security.authorizer import AclAuthorizer
    from samsa.security.principal import KafkaPrincipal
    from samsa.storage.manager import LogManager


class Peer(Protocol):
    """The connection a request came on: its address, the listener it came in on, and who
    the client is (authenticated before its first request: ``User:ANONYMOUS`` on PLAINTEXT,
    the client certificate's principal on SSL, the SASL user on SASL_PLAINTEXT and
    SASL_SSL). Authorization reads the principal as ``Type:name`` and the client's host from
    ``peer``."""

    peer: str
    principal: KafkaPrincipal

    @property
    def listener_name(self) -> str: ...


class Broker(Protocol):
    """The broker's services, as the handlers see them."""

    config: BrokerConfig
    broker_id: int
    cluster_id: str
    started: bool
    replicas: Replicas
    topic_admin: TopicAdmin
    log_manager: LogManager
    producer_ids: ProducerIdManager | None
    group_coordinator: GroupCoordinator | None
    txn_coordinator: TransactionCoordinator | None
    authorizer: AclAuthorizer | None  # None: authorizer.class.name is empty, all is allowed
    acl_store: AclStore | None  # where CreateAcls and DeleteAcls write (with an authorizer)
    scram_store: ScramCredentialStore | None  # SCRAM credentials (None until started)
    dynamic_config: DynamicBrokerConfig  # dynamic broker configs (AlterConfigs of brokers)

    @property
    def topics(self) -> TopicStore | None: ...


@dataclass(frozen=True, slots=True)
class RequestContext:
    server: Broker
    request: Request
    connection: Peer | None

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def client_id(self) -> str:
        return self.request.client_id

    @property
    def listener_name(self) -> str | None:
        """The listener the request came in on (None: no connection, as in the fuzzers)."""
        return getattr(self.connection, "listener_name", None)

    @property
    def principal(self) -> str:
        """Who sent the request, as ACLs name principals (``User:alice``); ``User:ANONYMOUS``
        without a connection."""
        return str(getattr(self.connection, "principal", ANONYMOUS_PRINCIPAL))

    @property
    def client_host(self) -> str:
        """Where from: the client's address as text (``127.0.0.1``), as ACLs name hosts."""
        connection = self.connection
        return "" if connection is None else connection.peer.rsplit(":", 1)[0]
