"""Kafka's ZooKeeper data layout (ZooKeeper mode, Kafka 2.x/3.x): znode paths and JSON formats.

This is the pure data layer of cluster mode: no network, no ZooKeeper client. Every znode we
read or write has a path helper here and an ``encode_*`` (dataclass -> bytes) / ``decode_*``
(bytes -> dataclass) pair that follows ``kafka.zk.ZkData`` (Kafka 3.9) field by field:

* ``/cluster/id``: ``{"version":"1","id":"<cluster id>"}`` (the version is a string)
* ``/controller`` (ephemeral): ``{"version":2,"brokerid":N,"timestamp":"<ms>",
  "kraftControllerEpoch":-1}``; version 1 has no ``kraftControllerEpoch``
* ``/controller_epoch``: the epoch as decimal text, e.g. ``3``
* ``/brokers/ids/<id>`` (ephemeral): BrokerInfo, versions 1-5 (we write 5)
* ``/brokers/topics/<topic>``: replica assignment and topic id, versions 1-3 (we write 3)
* ``/brokers/topics/<topic>/partitions/<p>/state``: leader, leader epoch, ISR, controller epoch
* ``/config/<entity type>/<entity>``: ``{"version":1,"config":{"k":"v"}}`` (users and
  client ids sanitized as Kafka's Sanitizer: ``/config/users/alice%40example.com``)
* ``/config/changes/config_change_<seq>``: ``{"version":2,"entity_path":"topics/<t>"}``
* ``/admin/delete_topics/<topic>``: no data
* ``/brokers/seqid``: no data; its zk version is the last broker id generated
* ``/latest_producer_id_block``: ``{"version":1,"broker":N,"block_start":"0",
  "block_end":"999"}``, empty until the first block is taken
* ``/log_dir_event_notification/log_dir_event_<seq>``: ``{"version":1,"broker":N,"event":1}``,
  a broker's log directory failed (the controller reads and deletes them)

The znodes samsa does not use (the pre-KIP-455 ``/admin/reassign_partitions``,
``/admin/preferred_replica_election``, ISR change notifications) have their paths among the
persistent paths a broker creates, as Kafka's do, but no formats here.

Encoders write the fields Kafka 3.x writes as compact JSON (Jackson's form: no spaces,
non-ASCII as UTF-8). Key order carries no meaning (Kafka's own maps iterate in hash order) and
decoders never depend on it.

Decoders are strict about what they need (required fields present, JSON types exactly as Kafka
writes them: an ``Int`` field must be a JSON integer in int32 range, never a float or a string)
and tolerate fields they do not know, as Kafka's own decoders do. They are stricter than Kafka
where Kafka would silently make do: unknown version numbers, unparsable JSON (which some of
Kafka's decoders read as "empty"), a topic znode without ``partitions``, adding/removing
replicas of a partition that is not in ``partitions``, a partition listed twice. Anything
malformed raises ``ZkDataError`` (a ``ValueError``) naming the znode path and the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.cluster.client_quotas import desanitize, sanitize

__all__ = [
    "ADMIN_PATH",
    "BROKERS_PATH",
    "BROKER_IDS_PATH",
    "BROKER_SEQID_PATH",
    "CLUSTER_ID_PATH",
    "CLUSTER_PATH",
    "CONFIG_CHANGES_PATH",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_ENTITY_TYPES",
    "CONFIG_PATH",
    "CONSUMERS_PATH",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DELETE_TOPICS_PATH",
    "FEATURE_PATH",
    "INITIAL_CONTROLLER_EPOCH",
    "ISR_CHANGE_NOTIFICATION_PATH",
    "LEADER_RECOVERY_RECOVERED",
    "LEADER_RECOVERY_RECOVERING",
    "LOG_DIR_EVENT_NOTIFICATION_PATH",
    "LOG_DIR_EVENT_PREFIX",
    "LOG_DIR_FAILURE_EVENT",
    "NO_LEADER",
    "PERSISTENT_ZK_PATHS",
    "PREFERRED_REPLICA_ELECTION_PATH",
    "PRODUCER_ID_BLOCK_PATH",
    "PRODUCER_ID_BLOCK_SIZE",
    "REASSIGN_PARTITIONS_PATH",
    "SECURITY_PROTOCOLS",
    "TOPICS_PATH",
    "BrokerInfo",
    "ConfigChangeNotification",
    "ControllerInfo",
    "Endpoint",
    "EntityConfig",
    "FeatureRange",
    "PartitionState",
    "ProducerIdBlock",
    "ReplicaAssignment",
    "TopicAssignment",
    "ZkDataError",
    "broker_path",
    "config_change_create_path",
    "config_entity_path",
    "config_entity_type_path",
    "decode_broker_info",
    "decode_cluster_id",
    "decode_config_change",
    "decode_controller",
    "decode_controller_epoch",
    "decode_entity_config",
    "decode_log_dir_event_notification",
    "decode_partition_state",
    "decode_producer_id_block",
    "decode_topic_assignment",
    "delete_topic_path",
    "encode_broker_info",
    "encode_cluster_id",
    "encode_config_change",
    "encode_controller",
    "encode_controller_epoch",
    "encode_delete_topic",
    "encode_entity_config",
    "encode_log_dir_event_notification",
    "encode_partition_state",
    "encode_producer_id_block",
    "encode_topic_assignment",
    "kafka_uuid_from_string",
    "kafka_uuid_to_string",
    "log_dir_event_create_path",
    "log_dir_event_path",
    "partition_path",
    "partition_state_path",
    "partitions_path",
    "topic_config_path",
    "topic_path",
    "sanitize",
    "desanitize",
    "user_config_path",
]


class ZkDataError(ValueError):
    """A znode's data is not what Kafka writes there; the message names the path and field."""


# --------------------------------------------------------------------------------------------
# Paths (ZkData.scala's *ZNode objects)
# --------------------------------------------------------------------------------------------

ADMIN_PATH = "/admin"
BROKERS_PATH = "/brokers"
CLUSTER_PATH = "/cluster"
CONFIG_PATH = "/config"
CONSUMERS_PATH = "/consumers"  # the old (pre-0.9) consumer's root; still created by brokers
FEATURE_PATH = "/feature"  # KIP-584 finalized features (not encoded here)

CLUSTER_ID_PATH = f"{CLUSTER_PATH}/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = f"{BROKERS_PATH}/ids"
TOPICS_PATH = f"{BROKERS_PATH}/topics"
BROKER_SEQID_PATH = f"{BROKERS_PATH}/seqid"
CONFIG_CHANGES_PATH = f"{CONFIG_PATH}/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS_PATH = f"{ADMIN_PATH}/delete_topics"
REASSIGN_PARTITIONS_PATH = f"{ADMIN_PATH}/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = f"{ADMIN_PATH}/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # LogDirEventNotificationSequenceZNode.LogDirFailureEvent
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"

#: Kafka's ConfigType.ALL (3.x): the entity types with a ``/config/<type>`` node.
CONFIG_ENTITY_TYPES: tuple[str, ...] = ("topics", "clients", "users", "brokers", "ips")

#: ZkData.PersistentZkPaths: what every broker creates (empty, if missing) at startup, in order.
PERSISTENT_ZK_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
) + tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_ENTITY_TYPES)

INITIAL_CONTROLLER_EPOCH = 0  # /controller_epoch is created with 0; the first controller has 1
NO_LEADER = -1  # LeaderAndIsr.NoLeader
LEADER_RECOVERY_RECOVERED = 0  # LeaderRecoveryState (KIP-704)
LEADER_RECOVERY_RECOVERING = 1
PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE

#: SecurityProtocol names (Kafka's enum; ``TRACE`` is long gone).
SECURITY_PROTOCOLS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _name(kind: str, name: str) -> str:
    """``name`` as one path component: not empty, no ``/``, not ``.``/``..``."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"invalid {kind} for a znode path: {name!r}")
    return name


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``: a broker's (ephemeral) registration."""
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``: the topic's replica assignment and id."""
    return f"{TOPICS_PATH}/{_name('topic', topic)}"


def partitions_path(topic: str) -> str:
    """``/brokers/topics/<topic>/partitions``."""
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<topic>/partitions/<partition>``."""
    return f"{partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<topic>/partitions/<partition>/state``: leader, epochs and ISR."""
    return f"{partition_path(topic, partition)}/state"


def config_entity_type_path(entity_type: str) -> str:
    """``/config/<entity type>`` (``topics``, ``clients``, ``users``, ``brokers``, ``ips``)."""
    return f"{CONFIG_PATH}/{_name('config entity type', entity_type)}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """``/config/<entity type>/<entity name>``; a sanitized name may hold ``/`` (user/client)."""
    if not isinstance(entity_name, str) or not entity_name:
        raise ValueError(f"invalid config entity name for a znode path: {entity_name!r}")
    return f"{config_entity_type_path(entity_type)}/{entity_name}"


def user_config_path(user: str) -> str:
    """``/config/users/<sanitized user>``: the user's quotas and SCRAM credentials."""
    return config_entity_path("users", sanitize(user))


def topic_config_path(topic: str) -> str:
    """``/config/topics/<topic>``: the topic's config overrides."""
    return config_entity_path("topics", _name("topic", topic))


def config_change_create_path() -> str:
    """``/config/changes/config_change_``: create a PERSISTENT_SEQUENTIAL node here."""
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<topic>``: marks the topic for deletion (no data)."""
    return f"{DELETE_TOPICS_PATH}/{_name('topic', topic)}"


def log_dir_event_create_path() -> str:
    """``/log_dir_event_notification/log_dir_event_``: create a PERSISTENT_SEQUENTIAL node
    here."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"


def log_dir_event_path(name: str) -> str:
    """``/log_dir_event_notification/<name>`` (``name``: ``log_dir_event_<seq>``)."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{_name('log dir event', name)}"


# --------------------------------------------------------------------------------------------
# Key order: how Kafka's Scala 2.13 / Java maps iterate, so our bytes equal Kafka's
# --------------------------------------------------------------------------------------------

def _dump(obj: Any) -> bytes:
    """Jackson's compact output: no whitespace, non-ASCII as UTF-8, control characters escaped."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


# --------------------------------------------------------------------------------------------
# Strict JSON reading with errors that name the znode and field
# --------------------------------------------------------------------------------------------

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT_TEXT = re.compile(r"[+-]?[0-9]+")  # what Integer.parseInt / Long.parseLong accept


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Reader:
    """Typed access to one JSON object, raising ZkDataError with path and field."""

    __slots__ = ("obj", "path", "where")

    def __init__(self, obj: Any, path: str, where: str = "") -> None:
        self.path = path
        self.where = where
        if not isinstance(obj, dict):
            raise self.fail(f"expected a JSON object, got {_kind(obj)}")
        self.obj: dict[str, Any] = obj

    def fail(self, message: str, key: str | None = None) -> ZkDataError:
        loc = self.field_name(key)
        return ZkDataError(f"{self.path}: {f'field {loc!r}: ' if loc else ''}{message}")

    def field_name(self, key: str | None) -> str:
        """``key`` inside this object, as a dotted path from the top-level object."""
        if key is None:
            return self.where
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self.obj

    def raw(self, key: str) -> Any:
        if key not in self.obj:
            raise self.fail("missing", key)
        return self.obj[key]

    def int32(self, key: str) -> int:
        return _int(self.raw(key), _INT32, self, key)

    def opt_int32(self, key: str) -> int | None:
        """Absent -> None; present must be an int32 (not null)."""
        return self.int32(key) if key in self.obj else None

    def string(self, key: str) -> str:
        v = self.raw(key)
        if not isinstance(v, str):
            raise self.fail(f"expected a string, got {_kind(v)}", key)
        return v

    def opt_nullable_string(self, key: str) -> str | None:
        v = self.obj.get(key)
        if v is not None and not isinstance(v, str):
            raise self.fail(f"expected a string or null, got {_kind(v)}", key)
        return v

    def int_text(self, key: str, bounds: tuple[int, int] = _INT64) -> int:
        """A number Kafka writes as a JSON string (timestamps, producer id bounds)."""
        v = self.string(key)
        return _parse_int_text(v, bounds, lambda m: self.fail(m, key))

    def int_list(self, key: str) -> tuple[int, ...]:
        return _int_list(self.raw(key), self, key)

    def obj_at(self, key: str) -> _Reader:
        v = self.raw(key)
        if not isinstance(v, dict):
            raise self.fail(f"expected a JSON object, got {_kind(v)}", key)
        return _Reader(v, self.path, self.field_name(key))

    def array(self, key: str) -> list[Any]:
        v = self.raw(key)
        if not isinstance(v, list):
            raise self.fail(f"expected a JSON array, got {_kind(v)}", key)
        return v

    def version(self, supported: Iterable[int]) -> int:
        v = self.int32("version")
        allowed = tuple(supported)
        if v not in allowed:
            raise self.fail(f"unsupported version {v} (supported: "
                            f"{', '.join(map(str, allowed))})", "version")
        return v


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {json.dumps(v)}"
    if isinstance(v, (int, float)):
        return f"number {v!r}"
    if isinstance(v, str):
        return f"string {v[:60]!r}"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _int(v: Any, bounds: tuple[int, int], r: _Reader, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise r.fail(f"expected an integer, got {_kind(v)}", key)
    if not bounds[0] <= v <= bounds[1]:
        raise r.fail(f"integer {v} out of range", key)
    return v


def _int_list(v: Any, r: _Reader, key: str) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise r.fail(f"expected an array of integers, got {_kind(v)}", key)
    return tuple(_int(x, _INT32, r, f"{key}[{i}]") for i, x in enumerate(v))


def _parse_int_text(text: str, bounds: tuple[int, int],
                    fail: Callable[[str], ZkDataError]) -> int:
    if not _INT_TEXT.fullmatch(text):
        raise fail(f"expected a decimal integer, got {text[:60]!r}")
    if len(text.lstrip("+-0")) > 19:  # past int64 (and int()'s digit limit): no need to parse
        raise fail(f"integer {text[:60]} out of range")
    n = int(text)
    if not bounds[0] <= n <= bounds[1]:
        raise fail(f"integer {text} out of range")
    return n


def _parse(data: bytes | bytearray | memoryview | None, path: str) -> _Reader:
    """Parse a znode's data as one JSON object."""
    if data is None or len(data) == 0:
        raise ZkDataError(f"{path}: no data (expected a JSON object)")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ZkDataError(f"{path}: data is not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise ZkDataError(f"{path}: data is not JSON ({e}): {text[:80]!r}") from None
    return _Reader(obj, path)


def _text(data: bytes | bytearray | memoryview | None, path: str) -> str:
    if data is None:
        raise ZkDataError(f"{path}: no data")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ZkDataError(f"{path}: data is not UTF-8 ({e.reason} at byte {e.start})") from None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_int32(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (
            _INT32[0] <= value <= _INT32[1]):
        raise ValueError(f"{what} must be an int32, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Topic ids: Kafka's Uuid.toString is URL-safe base64 of the 16 bytes, no padding
# --------------------------------------------------------------------------------------------


_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]*={0,2}")


def kafka_uuid_to_string(u: uuid.UUID) -> str:
    """A UUID as Kafka prints it (``Uuid.toString``): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def kafka_uuid_from_string(s: str) -> uuid.UUID:
    """``Uuid.fromString``: URL-safe base64 (padding optional) of exactly 16 bytes."""
    if not isinstance(s, str) or len(s) > 24 or not _UUID_TEXT.fullmatch(s) or (
            "=" in s and len(s) % 4):
        raise ValueError(f"not a base64 Kafka UUID: {s!r}")
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"not a base64 Kafka UUID: {s!r}") from None
    if len(raw) != 16:
        raise ValueError(f"{s!r} decodes to {len(raw)} bytes, a Kafka UUID has 16")
    return uuid.UUID(bytes=raw)


# --------------------------------------------------------------------------------------------
# /cluster/id
# --------------------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """``{"version":"1","id":"<cluster id>"}`` (the version is a JSON string here)."""
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes, *, path: str = CLUSTER_ID_PATH) -> str:
    """The cluster id. Version ``"1"`` (Kafka's string) or ``1`` is accepted; Kafka reads only
    ``id``, so a missing version is tolerated too."""
    r = _parse(data, path)
    version = r.obj.get("version", "1")
    if version != "1" and not (type(version) is int and version == 1):
        raise r.fail(f"unsupported version {version!r}", "version")
    cluster_id = r.string("id")
    if not cluster_id:
        raise r.fail("empty cluster id", "id")
    return cluster_id


# --------------------------------------------------------------------------------------------
# /controller, /controller_epoch
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """``/controller``: the active controller's broker id.

    ``kraft_controller_epoch`` is written (as -1 by a ZK controller) from version 2 on (KIP-866,
    Kafka 3.4); ``None`` when read from version 1. ``timestamp_ms`` is None when encoding means
    "now", and when a (hand-written) znode had no timestamp.
    """

    broker_id: int
    timestamp_ms: int | None = None
    kraft_controller_epoch: int | None = -1
    version: int = 2


def encode_controller(c: ControllerInfo) -> bytes:
    """v2: ``{"version":2,"brokerid":N,"timestamp":"<ms>","kraftControllerEpoch":E}``;
    v1 leaves out ``kraftControllerEpoch``."""
    _check_int32(c.broker_id, "broker id")
    ts = str(_now_ms() if c.timestamp_ms is None else c.timestamp_ms)
    if c.version == 1:
        if c.kraft_controller_epoch not in (None, -1):
            raise ValueError("a v1 /controller znode has no kraftControllerEpoch")
        return _dump({"version": 1, "brokerid": c.broker_id, "timestamp": ts})
    if c.version != 2:
        raise ValueError(f"cannot write /controller version {c.version} (1 or 2)")
    epoch = -1 if c.kraft_controller_epoch is None else c.kraft_controller_epoch
    _check_int32(epoch, "kraftControllerEpoch")
    return _dump({"version": 2, "brokerid": c.broker_id, "timestamp": ts,
                  "kraftControllerEpoch": epoch})


def decode_controller(data: bytes, *, path: str = CONTROLLER_PATH) -> ControllerInfo:
    """Versions 1 and 2. Needs ``brokerid``; ``kraftControllerEpoch`` is read when present."""
    r = _parse(data, path)
    version = r.version((1, 2))
    broker_id = r.int32("brokerid")
    ts = r.int_text("timestamp") if r.has("timestamp") else None
    kraft_epoch = r.opt_int32("kraftControllerEpoch")
    return ControllerInfo(broker_id, ts, kraft_epoch, version)


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch``: the epoch as decimal text, e.g. ``b"3"``."""
    return str(_check_int32(epoch, "controller epoch")).encode("ascii")


def decode_controller_epoch(data: bytes, *, path: str = CONTROLLER_EPOCH_PATH) -> int:
    """The epoch from its decimal text (``Integer.parseInt``: optional sign, no spaces)."""
    text = _text(data, path)
    return _parse_int_text(text, _INT32, lambda m: ZkDataError(f"{path}: {m}"))


# --------------------------------------------------------------------------------------------
# /brokers/ids/<id>
# --------------------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")  # URI_PARSE_REGEXP


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener. ``host`` None means the wildcard (written as ``LISTENER://:9092``)."""

    listener_name: str
    security_protocol: str
    host: str | None
    port: int

    def connection_string(self) -> str:
        """``EndPoint.connectionString``: ``NAME://host:port``, IPv6 hosts in brackets."""
        if self.host is None:
            hostport = f":{self.port}"
        elif ":" in self.host:
            hostport = f"[{self.host}]:{self.port}"
        else:
            hostport = f"{self.host}:{self.port}"
        return f"{self.listener_name}://{hostport}"


@dataclass(frozen=True, slots=True)
class FeatureRange:
    """A supported feature's version range (``SupportedVersionRange``), from BrokerInfo v5."""

    min_version: int
    max_version: int


#: When a v2/v3 registration has no listener_security_protocol_map, listener names are
#: security protocol names (SocketServerConfigs.DEFAULT_NAME_TO_SECURITY_PROTO).
_DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker's registration, ``/brokers/ids/<broker_id>`` (the id is not in the JSON).

    We write version 5 (what Kafka 2.7+ brokers write); versions 1-5 are read. The top-level
    ``host``/``port`` of the JSON are not fields: Kafka derives them from the first endpoint whose
    security protocol is PLAINTEXT (``null``/``-1`` when there is none) and never reads them back
    (except in v1, which has no ``endpoints``). ``rack`` is left out of the JSON when None.
    ``features`` is ``{}`` on a ZooKeeper-mode broker. ``timestamp_ms`` None encodes "now".
    """

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    features: dict[str, FeatureRange] = field(default_factory=dict)
    version: int = 5
    timestamp_ms: int | None = None

    def plaintext_endpoint(self) -> Endpoint | None:
        """The first endpoint with security protocol PLAINTEXT (the JSON's host and port)."""
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    def endpoint(self, listener_name: str) -> Endpoint | None:
        """The endpoint of listener ``listener_name`` (Kafka's Broker.node(listenerName))."""
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker_info(b: BrokerInfo) -> bytes:
    """BrokerIdZNode.encode for versions 2-5 (what BrokerInfo.apply picks): version, host,
    port, endpoints, jmx_port, timestamp; rack from v3 when set; listener_security_protocol_map
    from v4; features from v5."""
    if b.version not in (2, 3, 4, 5):
        raise ValueError(f"cannot write a broker registration of version {b.version} (2-5)")
    _check_int32(b.broker_id, "broker id")
    _check_int32(b.jmx_port, "jmx_port")
    if not b.endpoints:
        raise ValueError("a broker registration needs at least one endpoint")
    for e in b.endpoints:
        if e.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {e.security_protocol!r}")
        if not e.listener_name or e.listener_name != e.listener_name.upper():
            raise ValueError(f"listener names are upper case, got {e.listener_name!r}")
        _check_int32(e.port, "port")
    plain = b.plaintext_endpoint()
    ts = _now_ms() if b.timestamp_ms is None else b.timestamp_ms
    values: dict[str, Any] = {
        "version": b.version,
        "host": plain.host if plain else None,
        "port": plain.port if plain else -1,
        "endpoints": [e.connection_string() for e in b.endpoints],
        "jmx_port": b.jmx_port,
        "timestamp": str(ts),
    }
    if b.rack is not None and b.version >= 3:
        values["rack"] = b.rack
    if b.version >= 4:
        protocols = {e.listener_name: e.security_protocol for e in b.endpoints}  # toMap
        values["listener_security_protocol_map"] = protocols
    if b.version >= 5:
        for name, rng in b.features.items():
            if not 0 <= rng.min_version <= rng.max_version <= 0x7FFF:
                raise ValueError(f"feature {name!r}: bad version range {rng}")
        values["features"] = {  # Collectors.toMap (HashMap) of mkMap (LinkedHashMap)
            name: {"min_version": b.features[name].min_version,
                   "max_version": b.features[name].max_version}
            for name in b.features}
    return _dump(values)


def decode_broker_info(broker_id: int, data: bytes, *, path: str | None = None) -> BrokerInfo:
    """BrokerIdZNode.decode: versions 1-5.

    v1 has only ``host``/``port`` (one PLAINTEXT endpoint); v2+ has ``endpoints`` and, from v4,
    ``listener_security_protocol_map`` (without it, listener names must be protocol names). An
    endpoint whose listener has no protocol is an error, as in Kafka. ``jmx_port`` is required;
    ``rack`` may be absent or null; ``features`` may be absent or null.
    """
    path = path or broker_path(broker_id)
    r = _parse(data, path)
    version = r.version(range(1, 6))
    jmx_port = r.int32("jmx_port")
    if version == 1:
        host = r.string("host")
        endpoints: tuple[Endpoint, ...] = (
            Endpoint("PLAINTEXT", "PLAINTEXT", host or None, r.int32("port")),)
    else:
        protocols = _DEFAULT_PROTOCOL_MAP
        if r.has("listener_security_protocol_map"):
            m = r.obj_at("listener_security_protocol_map")
            protocols = {}
            for name in m.obj:
                proto = m.string(name)
                if proto.upper() not in SECURITY_PROTOCOLS:
                    raise m.fail(f"unknown security protocol {proto!r}", name)
                protocols[name] = proto.upper()  # SecurityProtocol.forName
        raw = r.array("endpoints")
        parsed = []
        for i, s in enumerate(raw):
            key = f"endpoints[{i}]"
            if not isinstance(s, str):
                raise r.fail(f"expected a string, got {_kind(s)}", key)
            parsed.append(_parse_endpoint(s, protocols, r, key))
        endpoints = tuple(parsed)
        if r.has("host"):
            r.opt_nullable_string("host")
        if r.has("port"):
            r.int32("port")
    rack = r.opt_nullable_string("rack")
    features: dict[str, FeatureRange] = {}
    if r.obj.get("features") is not None:
        fr = r.obj_at("features")
        for name in fr.obj:
            ranges = fr.obj_at(name)
            lo, hi = ranges.int32("min_version"), ranges.int32("max_version")
            if not 0 <= lo <= hi <= 0x7FFF:
                raise fr.fail(f"bad version range [{lo}, {hi}]", name)
            features[name] = FeatureRange(lo, hi)
    ts = r.int_text("timestamp") if r.has("timestamp") else None
    return BrokerInfo(broker_id, endpoints, rack, jmx_port, features, version, ts)


def _parse_endpoint(s: str, protocols: Mapping[str, str], r: _Reader, key: str) -> Endpoint:
    m = _ENDPOINT.fullmatch(s)
    if not m:
        raise r.fail(f"cannot parse {s[:80]!r} as a broker endpoint", key)
    name = m.group(1).upper()  # ListenerName.normalised
    if not name:
        raise r.fail(f"endpoint {s!r} has no listener name", key)
    port = int(m.group(3))
    if not _INT32[0] <= port <= _INT32[1]:
        raise r.fail(f"port of {s!r} out of range", key)
    proto = protocols.get(name)
    if proto is None:
        raise r.fail(f"no security protocol defined for listener {name}", key)
    return Endpoint(name, proto, m.group(2) or None, port)


# --------------------------------------------------------------------------------------------
# /brokers/topics/<topic>
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's replicas and, during a reassignment (KIP-455), those being added and
    removed (both included in ``replicas``)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: the topic id (v3, Kafka 2.8+) and each partition's replicas.

    Versions: 1 has only ``partitions``; 2 adds ``adding_replicas``/``removing_replicas``; 3 adds
    ``topic_id`` (left out when the topic has none). We write 3.
    """

    partitions: dict[int, ReplicaAssignment]
    topic_id: uuid.UUID | None = None
    version: int = 3


def encode_topic_assignment(t: TopicAssignment) -> bytes:
    """TopicZNode.encode (version 3; 1 and 2 write their subsets). Only partitions with adding
    or removing replicas appear in ``adding_replicas``/``removing_replicas``."""
    if t.version not in (1, 2, 3):
        raise ValueError(f"cannot write a topic znode of version {t.version} (1-3)")
    replicas: dict[str, list[int]] = {}
    adding: dict[str, list[int]] = {}
    removing: dict[str, list[int]] = {}
    for p, a in t.partitions.items():
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= _INT32[1]:
            raise ValueError(f"partition ids are non-negative int32, got {p!r}")
        key = str(p)
        replicas[key] = [_check_int32(x, "replica") for x in a.replicas]
        if a.adding_replicas:
            adding[key] = [_check_int32(x, "replica") for x in a.adding_replicas]
        if a.removing_replicas:
            removing[key] = [_check_int32(x, "replica") for x in a.removing_replicas]
    if t.version == 1:
        if adding or removing or t.topic_id is not None:
            raise ValueError("a v1 topic znode has only partitions")
        return _dump({"version": 1, "partitions": replicas})
    values: dict[str, Any] = {
        "version": t.version,
        "partitions": replicas,
        "adding_replicas": adding,
        "removing_replicas": removing,
    }
    if t.topic_id is not None:
        if t.version < 3:
            raise ValueError("topic_id needs a v3 topic znode")
        values["topic_id"] = kafka_uuid_to_string(t.topic_id)
    return _dump(values)


def decode_topic_assignment(data: bytes, *, path: str = f"{TOPICS_PATH}/<topic>"
                            ) -> TopicAssignment:
    """TopicZNode.decode, versions 1-3: ``partitions`` (required), ``adding_replicas`` and
    ``removing_replicas`` (optional, only for partitions in ``partitions``), ``topic_id``
    (optional, base64 Kafka UUID)."""
    r = _parse(data, path)
    version = r.version((1, 2, 3))
    parts = r.obj_at("partitions")
    extra = {k: r.obj_at(k) for k in ("adding_replicas", "removing_replicas") if r.has(k)}
    result: dict[int, ReplicaAssignment] = {}
    for key in parts.obj:
        p = _partition_key(key, parts)
        if p in result:
            raise parts.fail(f"partition {p} appears twice", key)
        add, rem = (extra[k].int_list(key) if k in extra and extra[k].has(key) else ()
                    for k in ("adding_replicas", "removing_replicas"))
        result[p] = ReplicaAssignment(parts.int_list(key), add, rem)
    for k, e in extra.items():
        for key in e.obj:
            if _partition_key(key, e) not in result:
                raise e.fail(f"{k} for partition {key}, which is not in partitions", key)
    topic_id = None
    if r.has("topic_id"):
        text = r.string("topic_id")
        try:
            topic_id = kafka_uuid_from_string(text)
        except ValueError as err:
            raise r.fail(str(err), "topic_id") from None
    return TopicAssignment(result, topic_id, version)


def _partition_key(key: str, r: _Reader) -> int:
    if not _INT_TEXT.fullmatch(key):
        raise r.fail(f"partition id {key!r} is not an integer", key)
    p = int(key)
    if not 0 <= p <= _INT32[1]:
        raise r.fail(f"partition id {key} out of range", key)
    return p


# --------------------------------------------------------------------------------------------
# /brokers/topics/<topic>/partitions/<p>/state
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's leader and ISR as the controller last wrote them (LeaderIsrAndControllerEpoch).

    ``leader`` is -1 when the partition has no leader. ``leader_recovery_state`` (KIP-704, Kafka
    3.2+) is 0 (RECOVERED) or 1 (RECOVERING); it is in the JSON only when not RECOVERED, and the
    JSON version stays 1 either way. The znode's zk version (Kafka's ``partitionEpoch``) comes
    from the ZooKeeper stat, not from the data.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED


def encode_partition_state(s: PartitionState) -> bytes:
    """``{"controller_epoch":N,"leader":N,"version":1,"leader_epoch":N,"isr":[...]}`` (plus
    ``leader_recovery_state`` when RECOVERING)."""
    if s.leader_recovery_state not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
        raise ValueError(f"unknown leader recovery state {s.leader_recovery_state}")
    values: dict[str, Any] = {
        "version": 1,
        "leader": _check_int32(s.leader, "leader"),
        "leader_epoch": _check_int32(s.leader_epoch, "leader_epoch"),
        "controller_epoch": _check_int32(s.controller_epoch, "controller_epoch"),
        "isr": [_check_int32(x, "isr") for x in s.isr],
    }
    if s.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        values["leader_recovery_state"] = s.leader_recovery_state
    return _dump(values)


def decode_partition_state(data: bytes, *, path: str = f"{TOPICS_PATH}/<topic>/partitions/<p>"
                                                     "/state") -> PartitionState:
    """TopicPartitionStateZNode.decode: version 1 with ``leader``, ``leader_epoch``, ``isr``,
    ``controller_epoch`` and the optional ``leader_recovery_state``."""
    r = _parse(data, path)
    r.version((1,))
    recovery = LEADER_RECOVERY_RECOVERED
    if r.has("leader_recovery_state"):
        recovery = r.int32("leader_recovery_state")
        if recovery not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
            raise r.fail(f"unknown leader recovery state {recovery}", "leader_recovery_state")
    return PartitionState(r.int32("leader"), r.int32("leader_epoch"), r.int_list("isr"),
                          r.int32("controller_epoch"), recovery)


# --------------------------------------------------------------------------------------------
# /config/<type>/<name> and /config/changes/config_change_<seq>
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """``/config/<entity type>/<entity>``: the entity's config overrides (strings only)."""

    config: dict[str, str] = field(default_factory=dict)


def encode_entity_config(c: EntityConfig) -> bytes:
    """``{"version":1,"config":{"k":"v",...}}``."""
    for k, v in c.config.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"config keys and values are strings, got {k!r}: {v!r}")
    return _dump({"version": 1, "config": dict(c.config)})


def decode_entity_config(data: bytes | None, *, path: str = f"{CONFIG_PATH}/<type>/<name>"
                         ) -> EntityConfig:
    """ConfigEntityZNode.decode. A node without data (a parent such as ``/config/users/<u>``
    made for ``/config/users/<u>/clients/<c>``) has an empty config, as in Kafka."""
    if data is None or len(data) == 0:
        return EntityConfig({})
    r = _parse(data, path)
    r.version((1,))
    cfg = r.obj_at("config")
    return EntityConfig({k: cfg.string(k) for k in cfg.obj})


_V1_CHANGE_TYPES = ("topics", "clients")


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """A ``/config/changes/config_change_<seq>`` notification: whose config changed.

    ``entity_path`` is ``<entity type>/<sanitized entity name>``, e.g. ``topics/orders`` or
    ``users/alice/clients/app``. Version 2 writes it as is; version 1 (read for old data) had
    ``entity_type`` and ``entity_name`` (topics and clients only).
    """

    entity_path: str
    version: int = 2

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    @property
    def entity_name(self) -> str:
        return self.entity_path.split("/", 1)[1]


def _check_entity_path(p: str) -> None:
    head, sep, tail = p.partition("/")
    if not head or not sep or not tail:
        raise ValueError(f"an entity path is <entity type>/<entity name>, got {p!r}")


def encode_config_change(n: ConfigChangeNotification) -> bytes:
    """``{"version":2,"entity_path":"topics/<t>"}`` (v1: ``entity_type`` and ``entity_name``)."""
    _check_entity_path(n.entity_path)
    if n.version == 2:
        return _dump({"version": 2, "entity_path": n.entity_path})
    if n.version == 1:
        if n.entity_type not in _V1_CHANGE_TYPES:
            raise ValueError("a v1 config change is for topics or clients only")
        return _dump({"version": 1, "entity_type": n.entity_type, "entity_name": n.entity_name})
    raise ValueError(f"cannot write a config change notification of version {n.version}")


def decode_config_change(data: bytes, *, path: str = f"{CONFIG_CHANGES_PATH}/"
                                                     f"{CONFIG_CHANGE_PREFIX}<seq>"
                         ) -> ConfigChangeNotification:
    """Versions 1 and 2, checked as ZkConfigManager checks them."""
    r = _parse(data, path)
    version = r.version((1, 2))
    if version == 2:
        entity_path = r.string("entity_path")
        try:
            _check_entity_path(entity_path)
        except ValueError as e:
            raise r.fail(str(e), "entity_path") from None
        return ConfigChangeNotification(entity_path, 2)
    entity_type = r.string("entity_type")
    if entity_type not in _V1_CHANGE_TYPES:
        raise r.fail(f"a v1 notification is for 'topics' or 'clients', got {entity_type!r}",
                     "entity_type")
    entity_name = r.string("entity_name")
    if not entity_name:
        raise r.fail("empty entity name", "entity_name")
    return ConfigChangeNotification(f"{entity_type}/{entity_name}", 1)


# --------------------------------------------------------------------------------------------
# /admin/delete_topics/*
# --------------------------------------------------------------------------------------------


def encode_delete_topic() -> bytes:
    """``/admin/delete_topics/<topic>`` carries no data (Kafka creates it with null)."""
    return b""


# --------------------------------------------------------------------------------------------
# /latest_producer_id_block
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The last block of producer ids handed out (ProducerIdsBlock): ``[block_start,
    block_end]`` inclusive, taken by ``broker_id``. Blocks are 1000 ids; the first is 0-999."""

    broker_id: int
    block_start: int
    block_end: int

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The block after this one, for ``broker_id``."""
        return ProducerIdBlock(broker_id, self.block_end + 1, self.block_end + size)


def encode_producer_id_block(b: ProducerIdBlock) -> bytes:
    """``{"version":1,"broker":N,"block_start":"<first id>","block_end":"<last id>"}`` (the ids
    as JSON strings)."""
    _check_int32(b.broker_id, "broker id")
    if not 0 <= b.block_start <= b.block_end <= _INT64[1] or b.size > _INT32[1]:
        raise ValueError(f"bad producer id block [{b.block_start}, {b.block_end}]")
    return _dump({"version": 1, "broker": b.broker_id, "block_start": str(b.block_start),
                  "block_end": str(b.block_end)})


def decode_producer_id_block(data: bytes | None, *, path: str = PRODUCER_ID_BLOCK_PATH
                             ) -> ProducerIdBlock | None:
    """ProducerIdBlockZNode.parseProducerIdBlockData. None when the node has no data yet: the
    broker creates it empty at startup and the first block is then 0-999."""
    if data is None or len(data) == 0:
        return None
    r = _parse(data, path)
    r.version((1,))
    broker_id = r.int32("broker")
    start, end = r.int_text("block_start"), r.int_text("block_end")
    if end < start or end - start + 1 > _INT32[1]:
        raise r.fail(f"bad block [{start}, {end}]", "block_end")
    return ProducerIdBlock(broker_id, start, end)


# --------------------------------------------------------------------------------------------
# /log_dir_event_notification/log_dir_event_<seq>
# --------------------------------------------------------------------------------------------


def encode_log_dir_event_notification(broker_id: int, event: int = LOG_DIR_FAILURE_EVENT
                                      ) -> bytes:
    """``{"version":1,"broker":N,"event":1}``: broker N has a log directory that failed
    (LogDirEventNotificationSequenceZNode.encode)."""
    _check_int32(broker_id, "broker id")
    return _dump({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event_notification(data: bytes | None, *,
                                      path: str = f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/"
                                                  f"{LOG_DIR_EVENT_PREFIX}<seq>") -> int:
    """The broker id of a log dir event (Kafka reads only ``broker``)."""
    r = _parse(data, path)
    r.version((1,))
    return r.int32("broker")
