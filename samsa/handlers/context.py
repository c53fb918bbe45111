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
    from samsa.cluster.producer_ids import ProducerIdManager
    from samsa.cluster.replicas import Replicas
    from samsa.cluster.topic_admin import TopicAdmin
    from samsa.cluster.topics import TopicStore
    from samsa.config import BrokerConfig
    from samsa.coordinator.group_coordinator import GroupCoordinator
    from samsa.coordinator.txn_coordinator import TransactionCoordinator
    from samsa.security.authorizer import AclAuthorizer
    from samsa.storage.manager import LogManager


class Peer(Protocol):
    """The connection a request came on. Authentication sets its ``principal`` attribute
    (``Type:name``) and it may name the client's ``host``; a connection without them is
    ``User:ANONYMOUS`` from the host of ``peer`` (``host:port``)."""

    peer: str


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
    def principal(self) -> str:
        """Who sent the request: the connection's principal, ``User:ANONYMOUS`` without one."""
        return getattr(self.connection, "principal", None) or ANONYMOUS_PRINCIPAL

    @property
    def client_host(self) -> str:
        """Where from: the client's address as text (``127.0.0.1``), as Kafka's ACLs name
        hosts."""
        connection = self.connection
        if connection is None:
            return ""
        host = getattr(connection, "host", None)
        return host if isinstance(host, str) else connection.peer.rsplit(":", 1)[0]
