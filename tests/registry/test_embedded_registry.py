"""``samsa.Broker(schema_registry=True)``: a registry beside the embedded broker, used
synchronously and asynchronously, stopped with the broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from samsa.embedded import Broker

from .helpers import Http, record


def _refused(url: str) -> bool:
    try:
        Http(url).get("/")
    except OSError:
        return True
    return False


def test_sync_registry_stops_with_the_broker(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", schema_registry=True) as broker:
        url = broker.schema_registry_url
        assert url.startswith("http://127.0.0.1:")
        assert Http(url).register("s", record("R", ("a", "int"))).body == {"id": 1}
    assert _refused(url)


def test_no_registry_unless_asked(tmp_path: Path) -> None:
    with Broker(tmp_path / "data") as broker, pytest.raises(ValueError, match="schema_registry"):
        broker.schema_registry_url  # noqa: B018


def test_async_registry(tmp_path: Path) -> None:
    async def main() -> str:
        async with Broker(tmp_path / "data", schema_registry=True) as broker:
            url = broker.schema_registry_url
            answer = await asyncio.to_thread(Http(url).register, "s", record("R", ("a", "int")))
            assert answer.body == {"id": 1}
            return url

    url = asyncio.run(main())
    assert _refused(url)
