"""Client quotas in ZooKeeper, as a ZooKeeper-mode Kafka keeps them: the configs of
``/config/users/<user>``, ``/config/clients/<client id>`` and
``/config/users/<user>/clients/<client id>`` (``<default>`` for the defaults), each change
announced by a ``/config/changes/config_change_<seq>`` notification. Every broker loads them
at start and follows the notifications through the broker's ``ZkConfigManager``, so a change
made through any broker, or by Kafka's own tools, is applied by all. Describe reads ZooKeeper,
as Kafka's ZkAdminManager does; writes are conditional on the node's version and keep the
entity's other keys (a user's SCRAM credentials).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import KazooException

from samsa.cluster.client_quotas import (
    ClientQuotaStore,
    QuotaEntity,
    QuotaValues,
    quota_values,
)
from samsa.errors import ErrorCode, KafkaError
from samsa.zk.config_manager import (
    ConfigHandler,
    ZkConfigManager,
    alter_entity_config,
    fetch_all,
)
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import ZkDataError

log = logging.getLogger(__name__)

ENTITY_TYPES = ("users", "clients")
T = TypeVar("T")


def _entity(entity_type: str, name: str) -> QuotaEntity | None:
    try:
        return QuotaEntity.from_path(entity_type, name)
    except ValueError:
        log.warning("ignoring /config/%s/%s: bad entity name", entity_type, name)
        return None


class ZkQuotaStore(ClientQuotaStore):
    def __init__(self, zk: ZkClient, config_manager: ZkConfigManager) -> None:
        super().__init__()
        self.zk = zk
        self.config_manager = config_manager

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(None, function, *args)
        except (KazooException, ZkDataError, OSError) as exc:
            raise KafkaError(f"ZooKeeper: {exc}", ErrorCode.unknown_server_error) from exc

    def _handler(self, entity_type: str) -> ConfigHandler:
        def changed(name: str, config: dict[str, str]) -> None:
            entity = _entity(entity_type, name)
            if entity is not None:
                self._apply(entity, config)
        return changed

    async def start(self) -> None:
        for entity_type in ENTITY_TYPES:
            await self.config_manager.register(entity_type, self._handler(entity_type))
        if self._quotas:
            log.info("loaded the client quotas of %d entities from ZooKeeper",
                     len(self._quotas))

    async def stop(self) -> None:
        pass  # the config manager is the mode's, stopped with it

    async def entities(self) -> dict[QuotaEntity, QuotaValues]:
        def read() -> dict[tuple[str, str], dict[str, str]]:
            return {(entity_type, name): config
                    for entity_type in ENTITY_TYPES
                    for name, config in fetch_all(self.zk, entity_type).items()}

        found: dict[QuotaEntity, QuotaValues] = {}
        for (entity_type, name), config in (await self._run(read)).items():
            entity = _entity(entity_type, name)
            values = quota_values(config, f"/config/{entity_type}/{name}")
            if entity is not None and values:
                found[entity] = values
        return found

    async def write(self, entity: QuotaEntity,
                    change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        entity_type, name = entity.path
        new = await self._run(alter_entity_config, self.zk, entity_type, name, change)
        self._apply(entity, new)
