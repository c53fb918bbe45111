"""The ZooKeeper config manager (samsa/zk/config_manager.py) on a real ZooKeeper, without
brokers: what one manager writes reaches the other's handlers through Kafka's change
notifications, a handler registered late gets every entity (a user's client ids too),
writers of different keys of one entity keep each other's keys, and the SCRAM store rides on
it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.tools.zookeeper_server import ZooKeeperServer
from samsa.zk.config_manager import (
    ZkConfigManager,
    alter_entity_config,
    read_entity_config,
)
from samsa.zk.scram import ZkScramStore
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import decode_config_change, decode_entity_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zk") as server:
        yield server


@pytest.fixture
def clients(zookeeper: ZooKeeperServer) -> Iterator[list[ZkClient]]:
    made = [ZkClient(zookeeper.connect_string, 10000) for _ in range(2)]
    for client in made:
        client.start()
    yield made
    for client in made:
        client.client.stop()
        client.client.close()


async def until(predicate, what: str, timeout: float = 20.0) -> None:  # noqa: ANN001
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.05)


def test_changes_reach_every_manager(clients: list[ZkClient]) -> None:
    zk_a, zk_b = clients
    # written before anyone follows: loaded at registration
    alter_entity_config(zk_a, "users", "alice", lambda c: {**c, "producer_byte_rate": "1024"})
    alter_entity_config(zk_a, "users", "alice/clients/app",
                        lambda c: {**c, "consumer_byte_rate": "2048"})
    alter_entity_config(zk_a, "clients", "%3Cdefault%3E",  # a client id named <default>
                        lambda c: {**c, "request_percentage": "50.0"})

    async def run() -> None:
        managers = [ZkConfigManager(zk_a), ZkConfigManager(zk_b)]
        seen: list[dict[tuple[str, str], dict[str, str]]] = [{}, {}]
        for manager, got in zip(managers, seen, strict=True):
            for kind in ("users", "clients"):
                await manager.register(kind, lambda name, config, got=got, kind=kind:
                                       got.__setitem__((kind, name), config))
        try:
            assert seen[1] == {
                ("users", "alice"): {"producer_byte_rate": "1024"},
                ("users", "alice/clients/app"): {"consumer_byte_rate": "2048"},
                ("clients", "%3Cdefault%3E"): {"request_percentage": "50.0"},
            }
            # a change through one manager's client reaches the other's handlers
            await asyncio.get_running_loop().run_in_executor(
                None, alter_entity_config, zk_a, "clients", "<default>",
                lambda c: {"producer_byte_rate": "10"})
            await until(lambda: seen[1].get(("clients", "<default>")) ==
                        {"producer_byte_rate": "10"}, "the default client's config")
            await asyncio.get_running_loop().run_in_executor(
                None, alter_entity_config, zk_b, "users", "alice", lambda c: {})
            await until(lambda: seen[0].get(("users", "alice")) == {}, "alice emptied")
        finally:
            for manager in managers:
                await manager.stop()

    asyncio.run(run())
    # Kafka's layout: the notifications name the entity paths
    paths = {decode_config_change(zk_a.client.get(f"/config/changes/{c}")[0]).entity_path
             for c in zk_a.client.get_children("/config/changes")}
    assert {"users/alice", "users/alice/clients/app", "clients/<default>"} <= paths


def test_writers_of_different_keys_keep_each_others(clients: list[ZkClient]) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        writes = [
            loop.run_in_executor(None, alter_entity_config, clients[i % 2], "users", "bob",
                                 lambda c, i=i: {**c, f"key{i}": str(i)})
            for i in range(20)]
        await asyncio.gather(*writes)

    asyncio.run(run())
    config, version = read_entity_config(clients[0], "users", "bob")
    assert config == {f"key{i}": str(i) for i in range(20)}
    assert version is not None and version >= 19


def test_scram_credentials_keep_the_users_other_keys(clients: list[ZkClient]) -> None:
    async def run() -> None:
        manager_a, manager_b = ZkConfigManager(clients[0]), ZkConfigManager(clients[1])
        store_a = ZkScramStore(clients[0], manager_a)
        store_b = ZkScramStore(clients[1], manager_b)
        await store_a.start()
        await store_b.start()
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, alter_entity_config, clients[0], "users", "carol",
                lambda c: {**c, "producer_byte_rate": "1000"})
            await store_a.set_passwords({"carol": "secret"}, ["SCRAM-SHA-256"])
            await until(lambda: store_b.lookup("carol", "SCRAM-SHA-256") is not None,
                        "carol's credential on the other store")
            data, _ = clients[1].client.get("/config/users/carol")
            assert set(decode_entity_config(data).config) == {"producer_byte_rate",
                                                              "SCRAM-SHA-256"}
        finally:
            await manager_a.stop()
            await manager_b.stop()

    asyncio.run(run())
