"""Entity configs in ZooKeeper, as a ZooKeeper-mode Kafka keeps and follows them: Kafka's
``ZkConfigManager`` (every broker loads all entities of a type at start, then follows the
change notifications) and the writing half of ``AdminZkClient.changeConfigs``.

An entity's config is ``/config/<entity type>/<sanitized name>`` =
``{"version":1,"config":{...}}`` (``zk_data.EntityConfig``); users and client ids are
sanitized as Kafka's Sanitizer, ``<default>`` names the default entity, and a user's client
ids are ``/config/users/<user>/clients/<client id>`` (entity type ``users``, name
``<user>/clients/<client id>``). Every change is announced by a
``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":
"<entity type>/<name>"}``; whichever broker (or ``kafka-configs --zookeeper``) wrote it,
each broker's manager reads the named entity again and hands its config to the handlers
registered for the type. Notifications older than 15 minutes are deleted, as Kafka's
listener deletes them.

Users of it register a handler per entity type (``await manager.register("users",
handler)``): the handler is called on the event loop with every entity of the type at once
(for ``users``, the user/client-id entities too, as Kafka's), then with each changed entity,
an entity whose node is gone having an empty config. Several handlers may share a type (the
SCRAM credentials and the client quotas both live in ``/config/users``). Writes go through
``alter_entity_config``: a read-modify-write conditional on the node's version (redone when
another writer changed it meanwhile), so writers of different keys of one entity keep each
other's keys.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from samsa.errors import ErrorCode, KafkaError
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    ConfigChangeNotification,
    EntityConfig,
    ZkDataError,
    config_change_create_path,
    config_entity_path,
    config_entity_type_path,
    decode_config_change,
    decode_entity_config,
    encode_config_change,
    encode_entity_config,
)

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_S = 15 * 60  # Kafka's ZkConfigManager changeExpirationMs
USER_CLIENTS = "clients"  # /config/users/<user>/clients/<client id>
_WRITE_ATTEMPTS = 20

EntityConfigs = dict[str, dict[str, str]]  # sanitized entity name -> its config
ConfigHandler = Callable[[str, dict[str, str]], None]
"""Called on the event loop with (the sanitized entity name, its whole config now)."""
T = TypeVar("T")


def _sequence(name: str) -> int:
    try:
        return int(name[len(CONFIG_CHANGE_PREFIX):])
    except ValueError:
        return -1


def read_entity_config(zk: ZkClient, entity_type: str, name: str
                       ) -> tuple[dict[str, str], int | None]:
    """An entity's config and its znode version (an empty config and None: no node)."""
    path = config_entity_path(entity_type, name)
    try:
        data, stat = zk.client.get(path)
    except NoNodeError:
        return {}, None
    return dict(decode_entity_config(data, path=path).config), stat.version


def write_entity_config(zk: ZkClient, entity_type: str, name: str, config: dict[str, str],
                        version: int | None) -> None:
    """Set the entity's config (``version``: the node's, as read; None: create it, with its
    parents) and announce the change (BadVersionError / NodeExistsError: it changed)."""
    path = config_entity_path(entity_type, name)
    data = encode_entity_config(EntityConfig(config))
    if version is None:
        zk.client.create(path, data, makepath=True)
    else:
        zk.client.set(path, data, version=version)
    zk.client.create(config_change_create_path(),
                     encode_config_change(ConfigChangeNotification(f"{entity_type}/{name}")),
                     sequence=True, makepath=True)


def alter_entity_config(zk: ZkClient, entity_type: str, name: str,
                        change: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
    """``change(the current config)`` written in its place, conditionally on the node's
    version (read and redone when another writer changed it meanwhile); the new config.
    Blocking: run it off the event loop. KafkaError when it keeps changing."""
    for attempt in range(_WRITE_ATTEMPTS):
        current, version = read_entity_config(zk, entity_type, name)
        new = change(dict(current))
        try:
            write_entity_config(zk, entity_type, name, new, version)
            return new
        except (BadVersionError, NodeExistsError):
            # changed meanwhile: read it again, after a pause that spreads out the writers
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
    raise KafkaError(f"the config of {entity_type}/{name} kept changing",
                     ErrorCode.unknown_server_error)


def _children(zk: ZkClient, path: str) -> list[str]:
    try:
        return list(zk.client.get_children(path))
    except NoNodeError:
        return []


def fetch_all_entity_configs(zk: ZkClient, entity_type: str) -> EntityConfigs:
    """Every ``/config/<entity type>/<name>`` (AdminZkClient.fetchAllEntityConfigs); an
    unreadable one is logged and left out."""
    found: EntityConfigs = {}
    for name in _children(zk, config_entity_type_path(entity_type)):
        try:
            config, _ = read_entity_config(zk, entity_type, name)
        except ZkDataError as exc:
            log.warning("ignoring /config/%s/%s: %s", entity_type, name, exc)
            continue
        found[name] = config
    return found


def fetch_all_child_entity_configs(zk: ZkClient, root_type: str, child_type: str
                                   ) -> EntityConfigs:
    """Every ``/config/<root type>/<name>/<child type>/<child>``, by the name
    ``<name>/<child type>/<child>`` (AdminZkClient.fetchAllChildEntityConfigs)."""
    found: EntityConfigs = {}
    root = config_entity_type_path(root_type)
    for name in _children(zk, root):
        for child in _children(zk, f"{root}/{name}/{child_type}"):
            full = f"{name}/{child_type}/{child}"
            try:
                config, _ = read_entity_config(zk, root_type, full)
            except ZkDataError as exc:
                log.warning("ignoring /config/%s/%s: %s", root_type, full, exc)
                continue
            found[full] = config
    return found


def fetch_all(zk: ZkClient, entity_type: str) -> EntityConfigs:
    """What a handler of ``entity_type`` is given at start (ZkConfigManager.startup): every
    entity of the type, and for users their client ids' entities too."""
    found = fetch_all_entity_configs(zk, entity_type)
    if entity_type == "users":
        found.update(fetch_all_child_entity_configs(zk, "users", USER_CLIENTS))
    return found


class ZkConfigManager:
    """One per broker: follows ``/config/changes`` for the registered entity types."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._handlers: dict[str, list[ConfigHandler]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()  # a registration's load and the follower's reads
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_seen = -1  # the newest notification handled
        self._stopped = False

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        assert self._loop is not None
        return await self._loop.run_in_executor(None, function, *args)

    async def register(self, entity_type: str, handler: ConfigHandler) -> None:
        """Give ``handler`` every entity of ``entity_type`` now, then each change (the first
        registration starts following the notifications). Raises what reading ZooKeeper
        raises (KazooException, OSError): the broker does not start without its configs."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        async with self._lock:
            if self._task is None:
                await self._run(self._skip_existing)
            loaded = await self._run(fetch_all, self.zk, entity_type)
            for name, config in loaded.items():
                self._call(handler, entity_type, name, config)
            self._handlers.setdefault(entity_type, []).append(handler)
            if self._task is None:
                self._task = self._loop.create_task(self._follow())
                self.zk.client.ChildrenWatch(CONFIG_CHANGES_PATH, self._on_changes)

    def _skip_existing(self) -> None:
        """The notifications up to now count as handled: every entity is loaded whole."""
        self.zk.client.ensure_path(CONFIG_CHANGES_PATH)
        changes = self.zk.client.get_children(CONFIG_CHANGES_PATH)
        self._last_seen = max((_sequence(c) for c in changes), default=-1)

    @staticmethod
    def _call(handler: ConfigHandler, entity_type: str, name: str,
              config: dict[str, str]) -> None:
        try:
            handler(name, dict(config))
        except Exception:
            log.exception("applying the config of %s/%s failed", entity_type, name)

    def _on_changes(self, _children: list[str]) -> bool:
        """kazoo's thread: wake the follower on the event loop."""
        loop = self._loop
        if self._stopped or loop is None or loop.is_closed():
            return False  # the watch ends
        loop.call_soon_threadsafe(self._wake.set)
        return True

    async def _follow(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            async with self._lock:
                try:
                    changed = await self._run(self._read_changes, set(self._handlers))
                except (KazooException, OSError) as exc:
                    log.warning("cannot read the config change notifications: %s", exc)
                    changed = None
                if changed is not None:
                    for (entity_type, name), config in changed.items():
                        for handler in self._handlers.get(entity_type, ()):
                            self._call(handler, entity_type, name, config)
            if changed is None:
                await asyncio.sleep(1.0)
                self._wake.set()

    def _read_changes(self, types: set[str]) -> dict[tuple[str, str], dict[str, str]]:
        """The entities of ``types`` named by notifications not handled yet, with their
        configs now; old notifications deleted (Kafka's purgeObsoleteNotifications)."""
        client = self.zk.client
        children = sorted(client.get_children(CONFIG_CHANGES_PATH), key=_sequence)
        named: list[tuple[str, str]] = []
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
                if change.entity_type in types:
                    named.append((change.entity_type, change.entity_name))
            if stat.ctime / 1000 < now - NOTIFICATION_EXPIRY_S:
                try:
                    client.delete(path)
                except NoNodeError:
                    pass
        changed: dict[tuple[str, str], dict[str, str]] = {}
        for entity_type, name in dict.fromkeys(named):
            try:
                changed[(entity_type, name)] = read_entity_config(self.zk, entity_type, name)[0]
            except (ZkDataError, ValueError) as exc:
                log.warning("ignoring the config of %s/%s: %s", entity_type, name, exc)
        return changed

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
