"""Checked by mypy in make test: the broker class provides what the handlers (``Broker``) and
the coordinators (``CoordinatorHost``) are written against, and both modes are a ``Mode``.
Nothing imports this module."""

from __future__ import annotations

from samsa.coordinator.host import CoordinatorHost
from samsa.handlers.context import Broker
from samsa.server.kafka_server import KafkaServer
from samsa.server.modes import Mode, SingleNode
from samsa.zk.support import ZkSupport


def _serves_the_handlers(server: KafkaServer) -> Broker:
    return server


def _serves_the_coordinators(server: KafkaServer) -> CoordinatorHost:
    return server


def _single_node_is_a_mode(mode: SingleNode) -> Mode:
    return mode


def _zookeeper_is_a_mode(mode: ZkSupport) -> Mode:
    return mode
