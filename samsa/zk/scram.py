"""SCRAM credentials in ZooKeeper, as a ZooKeeper-mode Kafka keeps them: the config of the user
entity, ``/config/users/<sanitized user>`` = ``{"version":1,"config":{"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=4096"}}``, each change announced by a
``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":
"users/<sanitized user>"}`` (AdminZkClient.changeConfigs).

Every broker loads all users at start and then follows the notifications through the broker's
``ZkConfigManager`` (samsa/zk/config_manager.py), whichever broker (or ``kafka-configs
--zookeeper``) wrote them. Writes are conditional on the node's version (a concurrent change
to the same user, such as its quotas, is read again and redone) and keep the entity's other
keys.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kazoo.exceptions import KazooException

from samsa.cluster.scram import ScramCredentialStore, UserConfig
from samsa.errors import ErrorCode, KafkaError
from samsa.zk.config_manager import (
    ZkConfigManager,
    alter_entity_config,
    fetch_all_entity_configs,
    read_entity_config,
)
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import ZkDataError, desanitize, sanitize

log = logging.getLogger(__name__)

USERS = "users"
T = TypeVar("T")


def _is_scram(key: str) -> bool:
    return key.startswith("SCRAM-")


class ZkScramStore(ScramCredentialStore):
    def __init__(self, zk: ZkClient, config_manager: ZkConfigManager) -> None:
        super().__init__()
        self.zk = zk
        self.config_manager = config_manager
        self._loaded = False
        self._texts: dict[str, dict[str, str]] = {}  # each user's SCRAM keys, as stored

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)

    async def start(self) -> None:
        await self.config_manager.register(USERS, self._changed)
        self._loaded = True
        log.info("loaded the SCRAM credentials of %d users from ZooKeeper",
                 len(self._credentials))

    def _changed(self, name: str, config: dict[str, str]) -> None:
        """The config manager's handler of user entities (a user's client ids are not
        users: ``<user>/clients/<client id>``)."""
        if "/" in name:
            return
        try:
            user = desanitize(name)
        except ValueError:
            log.warning("ignoring /config/users/%s: bad user name", name)
            return
        scram = {k: v for k, v in config.items() if _is_scram(k)}
        if scram == self._texts.get(user, {}):
            return  # another key of the user changed (its quotas)
        if scram:
            self._texts[user] = scram
        else:
            self._texts.pop(user, None)
        self._apply(user, config)
        if self._loaded:
            log.info("SCRAM credentials of user %s changed (%s)", user,
                     ", ".join(sorted(self._credentials.get(user, {}))) or "none left")

    async def stop(self) -> None:
        pass  # the config manager is the mode's, stopped with it

    async def read_configs(self, users: Sequence[str] | None) -> dict[str, UserConfig]:
        def read() -> dict[str, UserConfig]:
            found: dict[str, UserConfig] = {}
            if users is None:
                for name, config in fetch_all_entity_configs(self.zk, USERS).items():
                    try:
                        found[desanitize(name)] = config
                    except ValueError:
                        continue
                return found
            for user in users:
                config, version = read_entity_config(self.zk, USERS, sanitize(user))
                if version is not None:
                    found[user] = config
            return found

        try:
            return await self._run(read)
        except (KazooException, ZkDataError, OSError) as exc:
            raise KafkaError(f"ZooKeeper: {exc}", ErrorCode.unknown_server_error) from exc

    async def write_config(self, user: str, config: UserConfig) -> None:
        """Replace the SCRAM keys of ``user``'s entity config with those of ``config``,
        keeping its other keys (quotas), conditionally on the node's version."""

        def change(current: dict[str, str]) -> dict[str, str]:
            merged = {k: v for k, v in current.items() if not _is_scram(k)}
            merged.update(config)
            return merged

        try:
            await self._run(alter_entity_config, self.zk, USERS, sanitize(user), change)
        except (KazooException, ZkDataError, OSError) as exc:
            raise KafkaError(f"ZooKeeper: {exc}", ErrorCode.unknown_server_error) from exc
        self._changed(sanitize(user), config)

