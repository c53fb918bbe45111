"""Dynamic broker configs in ZooKeeper, as a ZooKeeper-mode Kafka keeps them: the config of the
broker entity, ``/config/brokers/<broker id>`` (one broker's) and ``/config/brokers/<default>``
(the cluster's default) = ``{"version":1,"config":{...}}``, each change announced by a
``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":
"brokers/<id or <default>>"}`` (AdminZkClient.changeBrokerConfig).

Every broker follows them through the broker's ``ZkConfigManager`` (its ``brokers`` handler,
Kafka's BrokerConfigHandler): a change of the default, or of its own entity, made through any
broker or written by ``kafka-configs --zookeeper``, reaches it; other brokers' entities are
ignored. A write replaces the entity's whole config (AlterConfigs' and IncrementalAlterConfigs'
result), conditionally on the node's version, and is applied at once by the broker that made
it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kazoo.exceptions import KazooException

from samsa.cluster.broker_configs import BrokerConfigStore, Props
from samsa.errors import ErrorCode, KafkaError
from samsa.zk.config_manager import ZkConfigManager, alter_entity_config
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import ZkDataError

log = logging.getLogger(__name__)

BROKERS = "brokers"  # Kafka's ConfigType.BROKER


class ZkBrokerConfigStore(BrokerConfigStore):
    def __init__(self, zk: ZkClient, config_manager: ZkConfigManager) -> None:
        self.zk = zk
        self.config_manager = config_manager
        self._apply: Callable[[str, Props], Awaitable[None]] | None = None
        # the applications of changes, in the order they came (the manager's handler is
        # synchronous; applying may wait for the log cleaner's threads)
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self, broker_id: int,
                    apply: Callable[[str, Props], Awaitable[None]]) -> None:
        self._apply = apply
        await self.config_manager.register(BROKERS, self._changed)
        await self._settled()

    def _changed(self, name: str, config: dict[str, str]) -> None:
        """The config manager's handler of broker entities (on the event loop)."""
        assert self._apply is not None
        task = asyncio.get_running_loop().create_task(self._apply(name, dict(config)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _settled(self) -> None:
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def stop(self) -> None:
        await self._settled()

    async def write(self, entity: str, props: Props) -> None:
        new = dict(props)
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, alter_entity_config, self.zk, BROKERS, entity, lambda _current: new)
        except (KazooException, ZkDataError, OSError) as exc:
            raise KafkaError(f"ZooKeeper: {exc}", ErrorCode.unknown_server_error) from exc
        assert self._apply is not None
        await self._apply(entity, new)
