"""Checked by mypy in make test: the broker class provides what the handlers (``Broker``) and
the coordinators (``CoordinatorHost``) are written against. Nothing imports this module."""

from __future__ import annotations

from samsa.coordinator.host import CoordinatorHost
from samsa.handlers.context import Broker
from samsa.server.kafka_server import KafkaServer


def _serves_the_handlers(server: KafkaServer) -> Broker:
    return server


def _serves_the_coordinators(server: KafkaServer) -> CoordinatorHost:
    return server
