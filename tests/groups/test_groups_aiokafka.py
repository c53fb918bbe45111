"""Consumer groups with aiokafka members: joins and a leave under load (eager range).
aiokafka has no cooperative rebalancing, so no cooperative-sticky test here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import samsa

from .conftest import join_leave_scenario

pytestmark = pytest.mark.timeout(90)

CLIENT = "aiokafka"


def test_join_and_leave_exactly_once(broker: samsa.Broker, members: Callable) -> None:
    join_leave_scenario(CLIENT, broker.bootstrap_servers, members)
