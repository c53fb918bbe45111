"""Fixtures of the registry's tests: a registry beside a real embedded broker (the
``samsa_broker`` fixture) and an HTTP client of its REST API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.embedded import Broker
from samsa.registry import SchemaRegistry

from .helpers import Http, start_registry


@pytest.fixture
def registry(samsa_broker: Broker) -> Iterator[SchemaRegistry]:
    found = start_registry(samsa_broker)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture
def http(registry: SchemaRegistry) -> Http:
    return Http(registry.url)
