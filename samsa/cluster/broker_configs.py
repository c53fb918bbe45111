"""Dynamic broker configs (Kafka's DynamicBrokerConfig): broker keys changed with AlterConfigs
and IncrementalAlterConfigs while the brokers run, for one broker (the resource name is its id)
or as the cluster's default (the empty name), applied without a restart.

Which keys may change, and at which level, is ``samsa.config.DYNAMIC_MODES`` (Kafka's lists);
a broker's value of a key is its own dynamic one, else the cluster's dynamic default, else the
static one (``BrokerConfig.get``). What uses a key registers a ``Reconfigurable`` here: it may
refuse a new value (``validate``, Kafka's validateReconfiguration: the request answers
INVALID_REQUEST "Invalid dynamic configuration") and is told once the value changed
(``reconfigure``).

Each level is stored whole, as Kafka's ZooKeeper keeps it (``/config/brokers/<id>``,
``/config/brokers/<default>``): a ``BrokerConfigStore`` writes it and tells this broker of each
change (``DynamicBrokerConfig.apply``), its own and, in cluster mode, every other broker's.

* ``LocalBrokerConfigStore`` (a single node): ``<metadata dir>/__samsa_broker_configs.json``,
  ``{"version":1,"brokers":{"<default>":{...},"1001":{...}}}``, written atomically before the
  change is applied; an I/O error takes the metadata dir offline and answers
  KAFKA_STORAGE_ERROR (the broker then halts, as for its topic store).
* ``samsa.zk.broker_configs.ZkBrokerConfigStore`` (cluster mode): the znodes and Kafka's change
  notifications, which every broker follows.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from samsa.cluster.entity_file import EntityConfigFile
from samsa.config import BrokerConfig, ConfigError, broker_key, check_dynamic
from samsa.errors import ErrorCode, KafkaError
from samsa.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeperInternals.DEFAULT_STRING
BROKER_CONFIGS_FILE = "__samsa_broker_configs.json"
INVALID_DYNAMIC_CONFIGURATION = "Invalid dynamic configuration"

Props = dict[str, str]


def entity_name(per_broker: bool, broker_id: int) -> str:
    """The stored entity of one level: the broker's id, or ``<default>``."""
    return str(broker_id) if per_broker else DEFAULT_ENTITY


@dataclass(frozen=True)
class Reconfigurable:
    """What uses some dynamic keys (Kafka's BrokerReconfigurable).

    ``validate(new)``: ConfigError if the broker cannot take ``new`` (the whole config as it
    would be); ``reconfigure(new, changed)``: the keys of ``changed`` (among ``keys``) have
    their new values in ``new``, the broker's config; may be a coroutine function."""

    name: str
    keys: frozenset[str]
    validate: Callable[[BrokerConfig], None] | None = None
    reconfigure: Callable[[BrokerConfig, set[str]], Awaitable[None] | None] | None = None


class BrokerConfigStore(ABC):
    """Where the dynamic configs of this broker and of the cluster are kept."""

    @abstractmethod
    async def start(self, broker_id: int,
                    apply: Callable[[str, Props], Awaitable[None]]) -> None:
        """Load this broker's entity and the default one, each through ``apply(entity,
        props)``, then tell every later change of either through it."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop following changes."""

    @abstractmethod
    async def write(self, entity: str, props: Props) -> None:
        """Replace ``entity``'s configs (KafkaError: nothing written); the change reaches
        ``apply`` before this returns."""


class DynamicBrokerConfig:
    """This broker's dynamic configs: validated, stored, applied (Kafka's
    DynamicBrokerConfig and the broker side of ZkAdminManager's broker alters)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = -1
        self.store: BrokerConfigStore | None = None
        self._reconfigurables: list[Reconfigurable] = []
        self._lock = asyncio.Lock()

    def register(self, reconfigurable: Reconfigurable) -> None:
        self._reconfigurables.append(reconfigurable)

    async def start(self, broker_id: int, store: BrokerConfigStore) -> None:
        """Load the stored configs and follow their changes (before the listeners open)."""
        self.broker_id, self.store = broker_id, store
        await store.start(broker_id, self.apply)

    async def stop(self) -> None:
        if self.store is not None:
            await self.store.stop()

    # --- the admin APIs' side -----------------------------------------------------------------

    def current(self, per_broker: bool) -> Props:
        """This broker's dynamic configs, or the cluster's defaults, as stored."""
        return self.config.dynamic_props(per_broker)

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """KafkaError (INVALID_REQUEST, Kafka's message) unless ``props`` may replace this
        broker's dynamic configs (``per_broker``) or the cluster's defaults."""
        try:
            parsed = check_dynamic(props, per_broker)
        except ConfigError as exc:
            raise KafkaError(str(exc), ErrorCode.invalid_request) from None
        candidate = self.config.with_dynamic(per_broker, props, parsed)
        changed = {name for name in set(parsed) | set(self.current(per_broker))
                   if candidate.get(name) != self.config.get(name)}
        for reconfigurable in self._reconfigurables:
            if reconfigurable.validate is None or not reconfigurable.keys & changed:
                continue
            try:
                reconfigurable.validate(candidate)
            except Exception as exc:  # as Kafka: any failure refuses the change
                log.info("Validation of dynamic config update of %s failed: %s",
                         sorted(reconfigurable.keys & changed), exc)
                raise KafkaError(INVALID_DYNAMIC_CONFIGURATION,
                                 ErrorCode.invalid_request) from None
        sensitive = [name for name in props if (key := broker_key(name)) and key.sensitive]
        if sensitive:  # samsa has no password.encoder.secret to store them with
            name = str(self.broker_id) if per_broker else ""
            raise KafkaError(f"Invalid config value for resource ConfigResource(type=BROKER, "
                             f"name='{name}'): Password encoder secret not configured",
                             ErrorCode.invalid_config)

    async def alter(self, per_broker: bool, props: Mapping[str, str],
                    validate_only: bool) -> None:
        """Replace one level's configs: validated, then (unless ``validate_only``) stored and
        applied here; KafkaError with Kafka's error otherwise, nothing changed."""
        self.validate(props, per_broker)
        if validate_only:
            return
        if self.store is None:
            raise KafkaError("the broker is starting", ErrorCode.unknown_server_error)
        what = f"broker {self.broker_id}" if per_broker else "brokers"
        log.info("Updating %s with new configuration : %s", what,
                 ",".join(f"{k} -> {_loggable(k, v)}" for k, v in props.items()))
        await self.store.write(entity_name(per_broker, self.broker_id), dict(props))

    # --- the stores' side ---------------------------------------------------------------------

    async def apply(self, entity: str, props: Props) -> None:
        """``entity``'s configs are now ``props`` (loaded, written here, or changed by another
        broker): those of this broker or the default become the broker's, and what uses a key
        whose value changed is reconfigured. Other brokers' entities are ignored."""
        if entity == DEFAULT_ENTITY:
            per_broker = False
        elif entity.strip() == str(self.broker_id):
            per_broker = True
        else:
            return
        async with self._lock:
            changed = self.config.set_dynamic(per_broker, props)
            if not changed:
                return
            log.info("Dynamic %s configs changed: %s", "broker" if per_broker else "default",
                     ", ".join(sorted(changed)))
            for reconfigurable in self._reconfigurables:
                hit = reconfigurable.keys & changed
                if not hit or reconfigurable.reconfigure is None:
                    continue
                try:
                    done = reconfigurable.reconfigure(self.config, hit)
                    if inspect.isawaitable(done):
                        await done
                except Exception:
                    log.exception("reconfiguring %s for %s failed", reconfigurable.name,
                                  ", ".join(sorted(hit)))


def _loggable(name: str, value: str) -> str:
    key = broker_key(name)
    return "[hidden]" if key is not None and key.sensitive else value


class LocalBrokerConfigStore(BrokerConfigStore):
    """A single node's dynamic configs, in its metadata dir."""

    def __init__(self, directory: Path, failures: LogDirFailureChannel | None = None) -> None:
        self.file = EntityConfigFile(directory, BROKER_CONFIGS_FILE, "brokers", failures)
        self._entities: dict[str, Props] = {}
        self._apply: Callable[[str, Props], Awaitable[None]] | None = None

    async def start(self, broker_id: int,
                    apply: Callable[[str, Props], Awaitable[None]]) -> None:
        self._apply = apply
        self._entities = self.file.read()
        for entity in (DEFAULT_ENTITY, str(broker_id)):
            if entity in self._entities:
                await apply(entity, dict(self._entities[entity]))

    async def stop(self) -> None:
        pass

    async def write(self, entity: str, props: Props) -> None:
        entities = {**self._entities, entity: dict(props)}
        if not props:
            entities.pop(entity)
        self.file.write(entities)
        self._entities = entities
        assert self._apply is not None
        await self._apply(entity, dict(props))

