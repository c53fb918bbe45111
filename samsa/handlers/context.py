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
    from samsa.cluster.client_quotas import ClientQuotaStore
    from samsa.cluster.producer_ids import ProducerIdManager
    from samsa.cluster.replicas import Replicas
    from samsa.cluster.scram import ScramCredentialStore
    from samsa.cluster.topic_admin import TopicAdmin
    from samsa.cluster.topics import TopicStore
    from samsa.config import BrokerConfig
    from samsa.coordinator.group_coordinator import GroupCoordinator
    from samsa.coordinator.txn_coordinator import TransactionCoordinator
    from samsa.metrics import BrokerMetrics
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


class MutationQuota(Protocol):
    """A request's controller mutation quota (server/quotas.py)."""

    def record(self, permits: float) -> bool:
        """Take ``permits`` partitions; False: refused (THROTTLING_QUOTA_EXCEEDED)."""

    @property
    def throttle_time_ms(self) -> int: ...


class Quotas(Protocol):
    """What handlers ask of the client quotas: CreateTopics, CreatePartitions and
    DeleteTopics their controller mutation quota (strict for the versions that can refuse a
    topic). The byte rates and request time are dispatch's, not the handlers'."""

    def controller_mutation_quota(self, user: str, client_id: str,
                                  strict: bool) -> MutationQuota: ...


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
    metrics: BrokerMetrics | None  # None: no metrics are kept (no prometheus.listener)
    quota_store: ClientQuotaStore | None  # client quotas (None until started)

    @property
    def quotas(self) -> Quotas: ...
    dynamic_config: DynamicBrokerConfig  # dynamic broker configs (AlterConfigs of brokers)

    @property
    def topics(self) -> TopicStore | None: ...


@dataclass(slots=True)
class RequestContext:
    server: Broker
    request: Request
    connection: Peer | None
    # for the request metrics: seconds spent waiting on others (Kafka's RemoteTimeMs: the
    # followers for acks=all, new records for a long-poll), and the request's name there when
    # it is not the API's (FetchFollower)
    remote_s: float = 0.0
    metric_name: str | None = None

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
    def user(self) -> str:
        """The principal's name (``ANONYMOUS``), as the client quotas name users."""
        principal = getattr(self.connection, "principal", None)
        return principal.name if principal is not None else ANONYMOUS_PRINCIPAL.split(":", 1)[1]

    def mutation_quota(self, strict_since_version: int) -> MutationQuota:
        """This request's controller mutation quota: strict from ``strict_since_version``
        (Kafka's ControllerMutationQuotaManager.newQuotaFor), permissive before."""
        return self.server.quotas.controller_mutation_quota(
            self.user, self.client_id or "", self.version >= strict_since_version)

    @property
    def client_host(self) -> str:
        """Where from: the client's address as text (``127.0.0.1``), as ACLs name hosts."""
        connection = self.connection
        return "" if connection is None else connection.peer.rsplit(":", 1)[0]
