"""SCRAM credentials in ZooKeeper, as a ZooKeeper-mode Kafka keeps them: the config of the user
entity, ``/config/users/<sanitized user>`` = ``{"version":1,"config":{"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=4096"}}``, each change announced by a
``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":
"users/<sanitized user>"}`` (AdminZkClient.changeConfigs).

Every broker loads all users at start and then follows the notifications (Kafka's
ZkConfigManager): a new notification for ``users/<user>`` reloads that user, whichever broker
(or ``kafka-configs --zookeeper``) wrote it. As Kafka's notification listener, it deletes
notifications older than 15 minutes. Writes are conditional on the node's version (a
concurrent change to the same user is read again and redone).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from samsa.cluster.scram import ScramCredentialStore, UserConfig
from samsa.errors import ErrorCode, KafkaError
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    ConfigChangeNotification,
    EntityConfig,
    ZkDataError,
    config_change_create_path,
    config_entity_type_path,
    decode_config_change,
    decode_entity_config,
    desanitize,
    encode_config_change,
    encode_entity_config,
    sanitize,
    user_config_path,
)

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_S = 15 * 60  # Kafka's ZkConfigManager changeExpirationMs
_WRITE_ATTEMPTS = 10


def _sequence(name: str) -> int:
    try:
        return int(name[len(CONFIG_CHANGE_PREFIX):])
    except ValueError:
        return -1


def read_user_config(zk: ZkClient, user: str) -> tuple[UserConfig, int] | None:
    """The user entity's config and its znode version (None: no node)."""
    path = user_config_path(user)
    try:
        data, stat = zk.client.get(path)
    except NoNodeError:
        return None
    return dict(decode_entity_config(data, path=path).config), stat.version


def write_user_config(zk: ZkClient, user: str, config: UserConfig,
                      version: int | None) -> None:
    """Set (``version``: the node's, -1 any; None: create it) and announce the change, as
    AdminZkClient.changeConfigs does (BadVersionError / NodeExistsError: it changed)."""
    path = user_config_path(user)
    data = encode_entity_config(EntityConfig(config))
    if version is None:
        zk.client.create(path, data, makepath=True)
    else:
        zk.client.set(path, data, version=version)
    zk.client.create(config_change_create_path(),
                     encode_config_change(ConfigChangeNotification(f"users/{sanitize(user)}")),
                     sequence=True, makepath=True)


class ZkScramStore(ScramCredentialStore):
    def __init__(self, zk: ZkClient) -> None:
        super().__init__()
        self.zk = zk
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_seen = -1  # the newest notification handled
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    async def _run(self, function, *args):  # noqa: ANN001, ANN202
        assert self._loop is not None
        return await self._loop.run_in_executor(None, function, *args)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        loaded = await self._run(self._load_all)
        for user, config in loaded.items():
            self._apply(user, config)
        log.info("loaded the SCRAM credentials of %d users from ZooKeeper",
                 len(self._credentials))
        self._task = self._loop.create_task(self._follow())
        self.zk.client.ChildrenWatch(CONFIG_CHANGES_PATH, self._on_changes)

    def _load_all(self) -> dict[str, UserConfig]:
        """Every user entity's config; the notifications up to now count as handled."""
        client = self.zk.client
        client.ensure_path(CONFIG_CHANGES_PATH)
        changes = client.get_children(CONFIG_CHANGES_PATH)
        self._last_seen = max((_sequence(c) for c in changes), default=-1)
        root = config_entity_type_path("users")
        configs: dict[str, UserConfig] = {}
        try:
            names = client.get_children(root)
        except NoNodeError:
            return configs
        for name in names:
            try:
                user = desanitize(name)
                found = read_user_config(self.zk, user)
            except (ZkDataError, ValueError) as exc:
                log.warning("ignoring /config/users/%s: %s", name, exc)
                continue
            if found is not None:
                configs[user] = found[0]
        return configs

    def _on_changes(self, _children: list[str]) -> bool:
        """kazoo's thread: wake the follower on the event loop."""
        if self._stopped or self._loop is None or self._loop.is_closed():
            return False  # the watch ends
        self._loop.call_soon_threadsafe(self._wake.set)
        return True

    async def _follow(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            try:
                changed = await self._run(self._read_changes)
            except (KazooException, OSError) as exc:
                log.warning("cannot read the config change notifications: %s", exc)
                await asyncio.sleep(1.0)
                self._wake.set()
                continue
            for user, config in changed.items():
                self._apply(user, config)
                log.info("SCRAM credentials of user %s changed (%s)", user,
                         ", ".join(sorted(self._credentials.get(user, {}))) or "none left")

    def _read_changes(self) -> dict[str, UserConfig]:
        """The users named by notifications not handled yet, with their configs now; old
        notifications deleted (Kafka's purgeObsoleteNotifications)."""
        client = self.zk.client
        children = sorted(client.get_children(CONFIG_CHANGES_PATH), key=_sequence)
        users: list[str] = []
        now = time.time()
        for child in children:
            path = f"{CONFIG_CHANGES_PATH}/{child}"
            sequence = _sequence(child)
            try:
                data, stat = client.get(path)
            except NoNodeError:
                continue
            if sequence > self._last_seen:
                self._last_seen = sequence
                try:
                    change = decode_config_change(data, path=path)
                except ZkDataError as exc:
                    log.warning("ignoring %s: %s", path, exc)
                    continue
                entity = change.entity_name
                if change.entity_type == "users" and "/" not in entity:
                    try:
                        users.append(desanitize(entity))
                    except ValueError:
                        log.warning("ignoring %s: bad user name %s", path, entity)
            if stat.ctime / 1000 < now - NOTIFICATION_EXPIRY_S:
                try:
                    client.delete(path)
                except NoNodeError:
                    pass
        changed: dict[str, UserConfig] = {}
        for user in dict.fromkeys(users):
            try:
                found = read_user_config(self.zk, user)
            except ZkDataError as exc:
                log.warning("ignoring the config of user %s: %s", user, exc)
                continue
            changed[user] = found[0] if found is not None else {}
        return changed

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def read_configs(self, users: Sequence[str] | None) -> dict[str, UserConfig]:
        def read() -> dict[str, UserConfig]:
            if users is None:
                return self._load_all_configs()
            found: dict[str, UserConfig] = {}
            for user in users:
                config = read_user_config(self.zk, user)
                if config is not None:
                    found[user] = config[0]
            return found

        try:
            return await self._run(read)
        except (KazooException, ZkDataError, OSError) as exc:
            raise KafkaError(f"ZooKeeper: {exc}", ErrorCode.unknown_server_error) from exc

    def _load_all_configs(self) -> dict[str, UserConfig]:
        root = config_entity_type_path("users")
        found: dict[str, UserConfig] = {}
        try:
            names = self.zk.client.get_children(root)
        except NoNodeError:
            return found
        for name in names:
            try:
                user = desanitize(name)
                config = read_user_config(self.zk, user)
            except (ZkDataError, ValueError):
                continue
            if config is not None:
                found[user] = config[0]
        return found

    async def write_config(self, user: str, config: UserConfig) -> None:
        """Replace the SCRAM keys of ``user``'s entity config with those of ``config``,
        keeping its other keys (quotas), conditionally on the node's version."""

        def write() -> None:
            for _ in range(_WRITE_ATTEMPTS):
                found = read_user_config(self.zk, user)
                current, version = found if found is not None else ({}, None)
                merged = {k: v for k, v in current.items() if not k.startswith("SCRAM-")}
                merged.update(config)
                try:
                    write_user_config(self.zk, user, merged, version)
                    return
                except (BadVersionError, NodeExistsError):
                    continue  # changed meanwhile: read it again
            raise KafkaError(f"the config of user {user} kept changing",
                             ErrorCode.unknown_server_error)

        try:
            await self._run(write)
        except (KazooException, ZkDataError, OSError) as exc:
            raise KafkaError(f"ZooKeeper: {exc}", ErrorCode.unknown_server_error) from exc
        self._apply(user, config)

