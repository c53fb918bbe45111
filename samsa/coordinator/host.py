"""The broker's services as the coordinators see them: ``KafkaServer`` (above the
coordinators) satisfies ``CoordinatorHost``; the coordinators import nothing above them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # all from the coordinators' layer or below
    from samsa.cluster.producer_ids import ProducerIdManager
    from samsa.cluster.replicas import Replicas
    from samsa.cluster.topic_admin import TopicAdmin
    from samsa.config import BrokerConfig
    from samsa.coordinator.group_coordinator import GroupCoordinator
    from samsa.security.channel import InterBrokerSecurity


class CoordinatorHost(Protocol):
    config: BrokerConfig
    broker_id: int
    replicas: Replicas
    topic_admin: TopicAdmin
    producer_ids: ProducerIdManager | None
    group_coordinator: GroupCoordinator | None  # the transaction coordinator completes offsets
    # how this broker reaches the others (the markers go to the inter-broker listener)
    inter_broker: InterBrokerSecurity
