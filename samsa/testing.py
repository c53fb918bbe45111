"""pytest plugin: the ``samsa_broker`` fixture, a fresh broker on a free loopback port.

    def test_roundtrip(samsa_broker):
        producer = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})

Installed with samsa (entry point ``pytest11``); nothing to configure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.embedded import Broker


@pytest.fixture
def samsa_broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path / "samsa-data") as broker:
        yield broker
