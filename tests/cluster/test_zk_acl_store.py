"""The ZooKeeper ACL store (samsa/zk/acls.py) on a real ZooKeeper, without brokers: two stores,
as two brokers hold them, changing the same pattern at once lose nothing (conditional writes,
retried), each applies the other's changes from the notifications, and an emptied pattern's
node is deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from samsa.security.acl_store import decode_acls, resource_path
from samsa.security.authorizer import AclAuthorizer
from samsa.tools.zookeeper_server import ZooKeeperServer
from samsa.zk.acls import ZkAclStore
from samsa.zk.zk_client import ZkClient

pytestmark = pytest.mark.timeout(120)
PATTERN = ResourcePattern(ResourceType.TOPIC, "shared", PatternType.PREFIXED)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zk") as server:
        yield server


def binding(user: str) -> AclBinding:
    return AclBinding(PATTERN, AccessControlEntry(f"User:{user}", "*", AclOperation.READ,
                                                  AclPermissionType.ALLOW))


async def converged(stores: list[ZkAclStore], expected: set[AclBinding]) -> None:
    """Until every store's authorizer holds exactly ``expected`` (20 s at most)."""
    deadline = asyncio.get_running_loop().time() + 20
    while any(set(s.authorizer.acls()) != expected for s in stores):
        assert asyncio.get_running_loop().time() < deadline, [
            sorted(map(str, s.authorizer.acls())) for s in stores]
        await asyncio.sleep(0.05)


def test_two_stores_change_one_pattern_at_once(zookeeper: ZooKeeperServer) -> None:
    clients = [ZkClient(zookeeper.connect_string, 10000) for _ in range(2)]
    for client in clients:
        client.start()

    async def run() -> None:
        stores = [ZkAclStore(AclAuthorizer(), client) for client in clients]
        for store in stores:
            await store.start()
        try:
            users = [f"u{i}" for i in range(20)]
            results = await asyncio.gather(*(
                stores[i % 2].create([binding(user)]) for i, user in enumerate(users)))
            assert results == [[None]] * len(users)
            everyone = {binding(user) for user in users}
            data, _ = clients[0].client.get(resource_path(PATTERN))
            assert {AclBinding(PATTERN, e) for e in decode_acls(data)} == everyone
            await converged(stores, everyone)

            # deletions from both at once, each its half
            halves = [AclBindingFilter(PATTERN.to_filter(), binding(user).entry.to_filter())
                      for user in users]
            deleted = await asyncio.gather(*(
                stores[i % 2].delete([f]) for i, f in enumerate(halves)))
            assert [r.bindings for (r,) in deleted] == [[binding(u)] for u in users]
            await converged(stores, set())
            assert clients[1].client.exists(resource_path(PATTERN)) is None
        finally:
            for store in stores:
                await store.stop()

    try:
        asyncio.run(run())
    finally:
        for client in clients:
            client.close()
