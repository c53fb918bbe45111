"""Consumer groups with kafka-python members: joins and a leave under load (eager range), and
cooperative-sticky (kafka-python's KIP-429 CooperativeStickyAssignor) incremental rebalancing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import samsa

from .conftest import cooperative_scenario, join_leave_scenario

pytestmark = pytest.mark.timeout(90)

CLIENT = "kafka-python"


def test_join_and_leave_exactly_once(broker: samsa.Broker, members: Callable) -> None:
    join_leave_scenario(CLIENT, broker.bootstrap_servers, members)


def test_cooperative_sticky_revokes_only_moved_partitions(broker: samsa.Broker,
                                                         members: Callable) -> None:
    cooperative_scenario(CLIENT, broker.bootstrap_servers, members)
