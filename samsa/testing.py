"""pytest plugin: the ``samsa_broker`` fixture, a fresh broker on a free loopback port.

    def test_roundtrip(samsa_broker):
        producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})

    @pytest.mark.samsa_broker(security_protocol="SSL", ssl_client_auth="required")
    def test_over_tls(samsa_broker):
        producer = Producer(samsa_broker.client_config())

    @pytest.mark.samsa_broker(security_protocol="SASL_SSL", users={"alice": "alice-secret"})
    def test_over_sasl(samsa_broker):
        producer = Producer(samsa_broker.client_config())   # SCRAM-SHA-256 as alice

The ``samsa_broker`` marker's keyword arguments go to ``samsa.Broker`` (broker config keys with
underscores for dots, ``security_protocol``, ``config``). Installed with samsa (entry point
``pytest11``); nothing else to configure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.embedded import Broker


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "samsa_broker(**options): options of the samsa_broker fixture's broker "
        "(samsa.Broker's keyword arguments, e.g. security_protocol='SSL', or 'SASL_SSL' and "
        "users={...})")


@pytest.fixture
def samsa_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    marker = request.node.get_closest_marker("samsa_broker")
    options = dict(marker.kwargs) if marker is not None else {}
    with Broker(tmp_path / "samsa-data", **options) as broker:
        yield broker
