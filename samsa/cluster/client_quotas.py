"""Client quotas: their entities, where they are kept, and DescribeClientQuotas /
AlterClientQuotas as Kafka answers them.

A quota entity is a user, a client id, or a user's client id, each either named or the
default (``<default>`` in Kafka's ZooKeeper paths, a null name on the wire); its quotas are the
keys of ``config.CLIENT_QUOTA_KEYS`` (``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``, ``controller_mutation_rate``). They are kept as Kafka keeps them in
ZooKeeper: the configs of ``/config/users/<user>``, ``/config/clients/<client id>`` and
``/config/users/<user>/clients/<client id>`` (names sanitized as Kafka's Sanitizer), the values
as text (``1024`` for the byte rates, Java's ``50.0`` for the others); a user's config also
holds its SCRAM credentials, which a quota change keeps.

* ``LocalQuotaStore`` (a single node): ``<metadata dir>/__samsa_client_quotas.json``,
  ``{"version":1,"entities":{"users/alice":{"producer_byte_rate":"1024"},...}}`` (Kafka's
  entity paths), written atomically before anything changes in memory; an I/O error takes the
  metadata dir offline and answers KAFKA_STORAGE_ERROR.
* ``samsa.zk.client_quotas.ZkQuotaStore`` (cluster mode): the znodes and their change
  notifications, which every broker follows.

Validation follows Kafka's controller (ClientQuotaControlManager and ClientQuotasImage, the
stricter of Kafka's two implementations): INVALID_REQUEST for an empty entity, an unknown
entity type, an empty name, an unknown key, a rate not above 0, a fractional byte rate, a key
twice in one entity's alteration, an entity twice in one request; Describe's filter refused
as a whole (INVALID_REQUEST, UNSUPPORTED_VERSION for an entity type Kafka does not know). An
entity refused changes nothing; the others of the request are applied. IP entities
(``connection_creation_rate``, KIP-612) are not supported: described, there are none; altered,
INVALID_REQUEST.
"""

from __future__ import annotations

import enum
import logging
import math
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.cluster.entity_file import EntityConfigFile
from samsa.config import CLIENT_QUOTA_KEYS, LONG_MAX, Type, java_double
from samsa.errors import ErrorCode, KafkaError
from samsa.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger(__name__)

QUOTAS_FILE = "__samsa_client_quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"  # ClientQuotaEntity's entity types
DEFAULT_NAME = "<default>"  # ZooKeeperInternals.DEFAULT_STRING, in paths
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match types


class Default(enum.Enum):
    """The default user or client id (null on the wire, ``<default>`` in paths)."""

    DEFAULT = DEFAULT_NAME

    def __str__(self) -> str:
        return DEFAULT_NAME


DEFAULT = Default.DEFAULT
Name = str | Default


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as one znode name (Java's URLEncoder,
    UTF-8: letters, digits and ``.-_`` kept, everything else %XX; ``*`` as %2A, space %20)."""
    out = []
    for byte in name.encode("utf-8"):
        c = chr(byte)
        out.append(c if c.isascii() and (c.isalnum() or c in ".-_") else f"%{byte:02X}")
    return "".join(out)


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (ValueError: not UTF-8 once unquoted)."""
    return urllib.parse.unquote(name, errors="strict")


def _path_name(name: Name) -> str:
    return DEFAULT_NAME if name is DEFAULT else sanitize(str(name))


def _from_path(name: str) -> Name:
    return DEFAULT if name == DEFAULT_NAME else desanitize(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A user (``client_id`` None), a client id (``user`` None) or a user's client id."""

    user: Name | None = None
    client_id: Name | None = None

    def components(self) -> list[tuple[str, str | None]]:
        """(entity type, name; None: the default), as the wire names them."""
        out: list[tuple[str, str | None]] = []
        if self.user is not None:
            out.append((USER, None if self.user is DEFAULT else str(self.user)))
        if self.client_id is not None:
            out.append((CLIENT_ID, None if self.client_id is DEFAULT else str(self.client_id)))
        return out

    @property
    def path(self) -> tuple[str, str]:
        """(entity type, sanitized entity name) as in Kafka's ZooKeeper paths:
        ``("users", "alice/clients/app")``."""
        if self.user is not None:
            name = _path_name(self.user)
            if self.client_id is not None:
                name += f"/clients/{_path_name(self.client_id)}"
            return "users", name
        assert self.client_id is not None
        return "clients", _path_name(self.client_id)

    @classmethod
    def from_path(cls, entity_type: str, name: str) -> QuotaEntity | None:
        """The entity of a ZooKeeper path (None: not a client quota entity); ValueError for
        a name that cannot be desanitized."""
        if entity_type == "clients" and "/" not in name:
            return cls(client_id=_from_path(name))
        if entity_type != "users":
            return None
        parts = name.split("/")
        if len(parts) == 1:
            return cls(user=_from_path(parts[0]))
        if len(parts) == 3 and parts[1] == "clients":
            return cls(user=_from_path(parts[0]), client_id=_from_path(parts[2]))
        return None

    def __str__(self) -> str:
        """As Kafka's ClientQuotaEntity prints itself in its error messages."""
        entries = ", ".join(f"{t}={'null' if n is None else n}" for t, n in self.components())
        return f"ClientQuotaEntity(entries={{{entries}}})"


QuotaValues = dict[str, float]
QuotaListener = Callable[[QuotaEntity, QuotaValues], None]


class QuotaRequestError(KafkaError):
    """A DescribeClientQuotas filter refused as a whole."""


def quota_values(config: Mapping[str, str], where: str = "?") -> QuotaValues:
    """The quota keys of an entity's config as numbers (its other keys, such as SCRAM
    credentials, left out); an unreadable value is logged and skipped."""
    values: QuotaValues = {}
    for key, text in config.items():
        if key not in CLIENT_QUOTA_KEYS:
            continue
        try:
            values[key] = float(text)
        except ValueError:
            log.warning("ignoring %s=%r of %s: not a number", key, text, where)
    return values


def value_text(key: str, value: float) -> str:
    """How Kafka's ZkAdminManager writes a quota: a whole number for the LONG keys, Java's
    double otherwise."""
    if CLIENT_QUOTA_KEYS[key].type is Type.LONG:
        return str(int(value + 1e-6))
    return java_double(value)


# --- the requests' validation ---------------------------------------------------------------


@dataclass(frozen=True)
class Alteration:
    """One entry of AlterClientQuotas: the entity as sent, and (key, value; None: remove)."""

    components: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class AlterResult:
    components: tuple[tuple[str, str | None], ...]
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _entity_of(components: Sequence[tuple[str, str | None]]) -> tuple[QuotaEntity | None, str]:
    """Kafka's validateEntity and configKeysForEntityType: the entity, or why not."""
    entries = dict(components)  # AlterClientQuotasRequest.entries: the last name of a type wins
    if not entries:
        return None, "Invalid empty client quota entity"
    for entity_type, name in entries.items():
        if entity_type not in (USER, CLIENT_ID, IP):
            return None, f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return None, f"Empty {entity_type} not supported"
    if IP in entries:
        if USER in entries or CLIENT_ID in entries:
            return None, ("Invalid quota entity combination, IP entity shouldnot be combined "
                          "with User or ClientId")
        return None, "IP quotas (connection_creation_rate) are not supported by samsa"

    def named(entity_type: str) -> Name | None:
        if entity_type not in entries:
            return None
        given = entries[entity_type]
        return DEFAULT if given is None else given

    return QuotaEntity(named(USER), named(CLIENT_ID)), ""


def _value_problem(key: str, value: float) -> str | None:
    """Kafka's validateQuotaKeyValue."""
    known = CLIENT_QUOTA_KEYS.get(key)
    if known is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:  # NaN too
        return f"Quota {key} must be greater than 0"
    if known.type is Type.LONG:
        if value > LONG_MAX:
            return f"Proposed value for {key} is too large for a LONG."
        if abs(math.fmod(value, 1.0)) > 1e-6:
            return f"{key} cannot be a fractional value."
    return None


def _matches(entity: QuotaEntity, exact: Mapping[str, str | None], specified: set[str],
             strict: bool) -> bool:
    """ClientQuotasImage.matches."""
    entries = dict(entity.components())
    if strict and len(entries) != len(exact) + len(specified):
        return False
    for entity_type, name in exact.items():
        if entity_type not in entries or entries[entity_type] != name:
            return False
    return all(entity_type in entries for entity_type in specified)


def check_filter(components: Sequence[tuple[str, int, str | None]]
                 ) -> tuple[dict[str, str | None], set[str]]:
    """DescribeClientQuotas' filter, checked as ClientQuotasImage.describe checks it:
    (exact names by type, None for the default; the types that need only be present).
    QuotaRequestError: the whole request is refused."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaRequestError("Invalid empty entity type.", ErrorCode.invalid_request)
        if entity_type in exact or entity_type in specified:
            raise QuotaRequestError(f"Entity type {entity_type} cannot appear more than once "
                                    "in the filter.", ErrorCode.invalid_request)
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(f"Unsupported entity type {entity_type}",
                                    ErrorCode.unsupported_version)
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaRequestError("Request specified MATCH_TYPE_EXACT, but set match "
                                        "string to null.", ErrorCode.invalid_request)
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaRequestError("Request specified MATCH_TYPE_DEFAULT, but also "
                                        "specified a match string.", ErrorCode.invalid_request)
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaRequestError("Request specified MATCH_TYPE_SPECIFIED, but also "
                                        "specified a match string.", ErrorCode.invalid_request)
            specified.add(entity_type)
        else:
            raise QuotaRequestError(f"Unknown match type {match_type}",
                                    ErrorCode.invalid_request)
    if (IP in exact or IP in specified) and (
            {USER, CLIENT_ID} & (set(exact) | specified)):
        raise QuotaRequestError("Invalid entity filter component combination. IP filter "
                                "component should not be used with user or clientId filter "
                                "component.", ErrorCode.invalid_request)
    return exact, specified


# --- the stores ------------------------------------------------------------------------------


class ClientQuotaStore(ABC):
    """Where the quotas are kept; ``listeners`` (the broker's quota managers) are told every
    entity's quotas at start and at each change, whichever broker made it."""

    def __init__(self) -> None:
        self.listeners: list[QuotaListener] = []
        self._quotas: dict[QuotaEntity, QuotaValues] = {}  # what this broker applies

    def _apply(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        values = quota_values(config, str(entity))
        if values == self._quotas.get(entity, {}):
            return
        if values:
            self._quotas[entity] = values
        else:
            self._quotas.pop(entity, None)
        for listener in self.listeners:
            listener(entity, dict(values))

    def applied(self) -> dict[QuotaEntity, QuotaValues]:
        """The quotas this broker applies now."""
        return {e: dict(v) for e, v in self._quotas.items()}

    @abstractmethod
    async def start(self) -> None:
        """Load every entity's quotas (before the listeners open)."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop following changes."""

    @abstractmethod
    async def entities(self) -> dict[QuotaEntity, QuotaValues]:
        """Every entity that has quotas, as stored now (what Describe answers from)."""

    @abstractmethod
    async def write(self, entity: QuotaEntity,
                    change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Replace the entity's config with ``change(its config)`` (KafkaError: not
        written) and apply it here."""

    # --- the admin APIs ---------------------------------------------------------------------

    async def describe(self, components: Sequence[tuple[str, int, str | None]], strict: bool
                       ) -> list[tuple[QuotaEntity, QuotaValues]]:
        """DescribeClientQuotas: the entities the filter matches, with their quotas
        (QuotaRequestError: the filter is refused)."""
        exact, specified = check_filter(components)
        found = await self.entities()
        return [(entity, values) for entity, values in found.items()
                if _matches(entity, exact, specified, strict)]

    async def alter(self, alterations: Sequence[Alteration], validate_only: bool
                    ) -> list[AlterResult]:
        """AlterClientQuotas, as Kafka's controller checks and applies it: one result per
        entity. An entity named twice is refused whole ("Ignoring duplicate entity"; Kafka
        applies its first alteration and answers the error)."""
        Key = QuotaEntity | tuple[tuple[str, str | None], ...]
        checked: list[tuple[Key, QuotaEntity | None, tuple[tuple[str, str | None], ...],
                            str, Alteration]] = []
        seen: dict[Key, int] = {}
        for alteration in alterations:
            entity, problem = _entity_of(alteration.components)
            shown = (tuple(entity.components()) if entity is not None
                     else tuple(dict(alteration.components).items()))
            key: Key = entity if entity is not None else shown
            seen[key] = seen.get(key, 0) + 1
            checked.append((key, entity, shown, problem, alteration))
        results: dict[Key, AlterResult] = {}
        for key, entity, shown, problem, alteration in checked:
            if key in results:
                continue
            if seen[key] > 1:
                results[key] = AlterResult(shown, ErrorCode.invalid_request,
                                           f"Ignoring duplicate entity {entity or shown}")
            elif entity is None:
                results[key] = AlterResult(shown, ErrorCode.invalid_request, problem)
            else:
                results[key] = await self._alter_one(entity, shown, alteration.ops,
                                                     validate_only)
        return list(results.values())

    async def _alter_one(self, entity: QuotaEntity, shown: tuple[tuple[str, str | None], ...],
                         ops: Sequence[tuple[str, float | None]], validate_only: bool
                         ) -> AlterResult:
        changes: dict[str, float | None] = {}
        for key, value in ops:
            if key in changes:
                return AlterResult(shown, ErrorCode.invalid_request,
                                   f"Duplicate quota key {key} not updating quota for this "
                                   f"entity {entity}")
            changes[key] = value
        for key, value in changes.items():
            if value is not None:
                problem = _value_problem(key, value)
                if problem is not None:
                    return AlterResult(shown, ErrorCode.invalid_request, problem)
        if validate_only:
            return AlterResult(shown)

        def change(config: dict[str, str]) -> dict[str, str]:
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value_text(key, value)
            return config

        try:
            await self.write(entity, change)
        except KafkaError as exc:
            log.info("Error encountered while updating client quotas of %s: %s", entity, exc)
            return AlterResult(shown, exc.code, str(exc))
        return AlterResult(shown)


class LocalQuotaStore(ClientQuotaStore):
    """A single node's quotas, in its metadata dir."""

    def __init__(self, directory: Path, failures: LogDirFailureChannel | None = None) -> None:
        super().__init__()
        self.file = EntityConfigFile(directory, QUOTAS_FILE, "entities", failures)
        self._configs: dict[str, dict[str, str]] = {}  # "users/alice" -> its quotas, as text

    async def start(self) -> None:
        for path, config in self.file.read().items():
            entity_type, _, name = path.partition("/")
            try:
                entity = QuotaEntity.from_path(entity_type, name)
            except ValueError:
                entity = None
            if entity is None:
                log.warning("ignoring %s in %s: not a client quota entity", path, self.file.path)
                continue
            self._configs[path] = config
            self._apply(entity, config)

    async def stop(self) -> None:
        pass

    async def entities(self) -> dict[QuotaEntity, QuotaValues]:
        return self.applied()

    async def write(self, entity: QuotaEntity,
                    change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        path = "/".join(entity.path)
        new = change(dict(self._configs.get(path, {})))
        configs = {**self._configs, path: new}
        if not new:
            configs.pop(path)
        self.file.write(configs)
        self._configs = configs
        self._apply(entity, new)
