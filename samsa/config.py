"""Configuration keys: Kafka's names, Kafka's defaults, defined once.

Two kinds of key live here:

* broker keys (``server.properties``), e.g. ``log.segment.bytes``;
* topic keys (``--config`` on a topic), e.g. ``segment.bytes``. Each topic key names the broker
  key that supplies its default, as Kafka does (``log.segment.bytes`` -> ``segment.bytes``).

Some broker keys have unit synonyms (``log.retention.hours`` / ``.minutes`` / ``.ms``); the most
precise one that is set wins, as in Kafka.

Values arrive as strings (properties files, the wire) or as Python values (embedded use) and are
parsed and validated here; a bad key or value raises :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import copy
import decimal
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A config key or value that is refused; the message names the key."""


class Type(Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"


Validator = Callable[[str, Any], None]


def at_least(minimum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: must be >= {minimum}"
            )

    return check


def between(lo: int | float, hi: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if not lo <= value <= hi:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: must be in [{lo}, {hi}]"
            )

    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v not in allowed:
                raise ConfigError(
                    f"Invalid value {v} for configuration {name}: "
                    f"must be one of {', '.join(allowed)}"
                )

    return check


ACL_AUTHORIZER_CLASS_NAMES = (
    "samsa.security.AclAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
"""What ``authorizer.class.name`` may name: samsa's ACL authorizer (samsa.security), under its own
name or either of Kafka's (ZooKeeper-era and KRaft), which decide the same way."""


def _authorizer_class(name: str, value: Any) -> None:
    if value and value not in ACL_AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: samsa has no pluggable "
            f"authorizers; leave it empty (no authorization) or name its ACL authorizer: "
            f"{', '.join(ACL_AUTHORIZER_CLASS_NAMES)}")


def _http_listener(name: str, value: Any) -> None:
    if value and parse_http_listener(value) is None:
        raise ConfigError(f"Invalid value {value!r} for configuration {name}: expected "
                          "http://HOST:PORT")


def parse_http_listener(value: str) -> tuple[str, int] | None:
    """``http://HOST:PORT`` as (host, port); None if it is not one."""
    match = re.fullmatch(r"http://(\[[0-9a-fA-F:]+\]|[^:/\s]*):(\d{1,5})/?", value.strip())
    if match is None or int(match.group(2)) > 65535:
        return None
    return match.group(1).strip("[]"), int(match.group(2))


def _principals(name: str, value: Any) -> None:
    for item in value.split(";"):
        item = item.strip()
        if item and ":" not in item:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: expected a string in format "
                f"principalType:principalName but got {item}")


CONSUMER_GROUP_ASSIGNORS = {
    "uniform": "uniform", "range": "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
"""What ``group.consumer.assignors`` may name: Kafka's built-in assignors, by name or class."""


def _consumer_assignors(name: str, value: Any) -> None:
    if not value:
        raise ConfigError(f"Invalid value {value} for configuration {name}: at least one "
                          "assignor is required")
    seen: set[str] = set()
    for item in value:
        resolved = CONSUMER_GROUP_ASSIGNORS.get(item)
        if resolved is None:
            raise ConfigError(f"Invalid value {item} for configuration {name}: Class cannot "
                              "be found (samsa has the built-in assignors uniform and range)")
        if resolved in seen:
            raise ConfigError(f"Invalid value {item} for configuration {name}: Assignor name "
                              f"'{resolved}' is already registered by another configured "
                              "assignor.")
        seen.add(resolved)


def _migration_policy(name: str, value: Any) -> None:
    if value.lower() not in ("disabled", "upgrade", "downgrade", "bidirectional"):
        raise ConfigError(f"Invalid value {value} for configuration {name}: String must be "
                          "one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, "
                          "BIDIRECTIONAL")


# Kafka's update modes of a dynamic broker key (DynamicBrokerConfig.dynamicConfigUpdateModes)
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"


_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def _throttled_replicas(name: str, value: Any) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker,...``."""
    if value == ["*"] or all(_REPLICA.fullmatch(item) for item in value):
        return
    raise ConfigError(
        f"Invalid value [{', '.join(value)}] for configuration {name}: {name} must be the "
        f"literal '*' or a list of replicas in the following format: "
        f"[partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class Key:
    """One configuration key."""

    name: str
    type: Type
    default: Any
    doc: str
    validator: Validator | None = None
    # For a broker key: the topic-level key whose default it supplies.
    topic: str | None = None
    # Less precise synonyms of this key and the factor that converts them to its unit,
    # in precedence order (e.g. log.retention.minutes x 60000 for log.retention.ms).
    synonyms: tuple[tuple[str, int], ...] = field(default=())
    # A password or what holds one (Kafka's PASSWORD type): DescribeConfigs hides its value.
    sensitive: bool = False
    # A broker key AlterConfigs may change while the broker runs: PER_BROKER (only for one
    # broker) or CLUSTER_WIDE (for one broker or as the cluster's default); None: read-only.
    # The topic defaults are dynamic without saying so here (DYNAMIC_MODES).
    dynamic: str | None = None

    def parse(self, value: Any) -> Any:
        """Parse a string or Python value into this key's type, then validate it."""
        try:
            parsed = _parse(self.type, value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"Invalid value {value!r} for configuration {self.name}: "
                f"expected a value of type {self.type.value}"
            ) from None
        if self.validator is not None and parsed is not None:
            self.validator(self.name, parsed)
        return parsed


def _parse(kind: Type, value: Any) -> Any:
    if value is None:
        return None
    if kind in (Type.INT, Type.LONG):
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, str):
            value = value.strip()
        number = int(value)
        limit = INT_MAX if kind is Type.INT else LONG_MAX
        if not -limit - 1 <= number <= limit:
            raise ValueError
        return number
    if kind is Type.DOUBLE:
        return float(value)
    if kind is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError
        return text == "true"
    if kind is Type.LIST:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return [str(item) for item in value]
    return str(value).strip() if isinstance(value, str) else str(value)


# compression.type: Kafka's BrokerCompressionType. "producer" keeps the producer's codec;
# the others are the codec every batch is stored with ("uncompressed": none).
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
# The codecs' levels (KIP-390), Kafka's defaults and ranges: gzip's -1 is zlib's default (6),
# lz4's default 9 is lz4's fast compressor (another level: its high compressor), zstd's from
# the zstd library (ZSTD_minCLevel to ZSTD_MAX_CLEVEL).
GZIP_DEFAULT_LEVEL = -1
LZ4_DEFAULT_LEVEL = 9
ZSTD_DEFAULT_LEVEL = 3


def _gzip_level(name: str, value: Any) -> None:
    if value != GZIP_DEFAULT_LEVEL and not 1 <= value <= 9:
        raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be "
                          f"between 1 and 9 or equal to {GZIP_DEFAULT_LEVEL}")


_COMPRESSION_TYPE_DOC = (
    "The codec batches are stored with: gzip, snappy, lz4, zstd, uncompressed (none), or "
    "producer (each batch keeps the producer's codec). A batch produced with another codec is "
    "recompressed on append.")


def _compression_keys(default_doc: bool) -> list[Key]:
    """compression.type and the three level keys: a topic's, or (``default_doc``) the
    broker's, whose names are the same (Kafka's ServerTopicConfigSynonyms.sameName)."""
    def doc(text: str, topic: str) -> str:
        return f"Default {topic}." if default_doc else text

    def key(name: str, type_: Type, default: Any, text: str, validator: Validator) -> Key:
        return Key(name, type_, default, doc(text, name), validator,
                   topic=name if default_doc else None)

    return [
        key("compression.type", Type.STRING, "producer", _COMPRESSION_TYPE_DOC,
            one_of(*COMPRESSION_TYPES)),
        key("compression.gzip.level", Type.INT, GZIP_DEFAULT_LEVEL,
            "The gzip level batches are recompressed with where compression.type is gzip: 1 "
            "to 9, or -1 (zlib's default).", _gzip_level),
        key("compression.lz4.level", Type.INT, LZ4_DEFAULT_LEVEL,
            "The lz4 level batches are recompressed with where compression.type is lz4: 1 to "
            "17.", between(1, 17)),
        key("compression.zstd.level", Type.INT, ZSTD_DEFAULT_LEVEL,
            "The zstd level batches are recompressed with where compression.type is zstd: "
            "-131072 to 22.", between(-131072, 22)),
    ]


# --- topic keys -----------------------------------------------------------------------------

TOPIC_KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("segment.bytes", Type.INT, 1024 * 1024 * 1024,
            "Segment file size at which the log rolls a new segment.", at_least(14)),
        Key("segment.ms", Type.LONG, 7 * 24 * 3600 * 1000,
            "Time after which a segment is rolled even if not full.", at_least(1)),
        Key("segment.index.bytes", Type.INT, 10 * 1024 * 1024,
            "Maximum size of a segment's offset index; a full index rolls the segment.",
            at_least(8)),
        Key("index.interval.bytes", Type.INT, 4096,
            "Bytes of log between two entries of the sparse offset index.", at_least(0)),
        Key("retention.ms", Type.LONG, 7 * 24 * 3600 * 1000,
            "How long a segment is kept; -1 keeps it forever.", at_least(-1)),
        Key("retention.bytes", Type.LONG, -1,
            "Bytes a partition may hold before old segments are deleted; -1 for no limit."),
        Key("flush.messages", Type.LONG, LONG_MAX,
            "Messages appended to a partition before it is fsynced.", at_least(1)),
        Key("flush.ms", Type.LONG, LONG_MAX,
            "Maximum time between two fsyncs of a partition.", at_least(0)),
        Key("max.message.bytes", Type.INT, 1024 * 1024 + 12,
            "Largest record batch the topic accepts.", at_least(0)),
        Key("message.timestamp.type", Type.STRING, "CreateTime",
            "Whether a record's timestamp is the producer's (CreateTime) or the broker's "
            "(LogAppendTime).", one_of("CreateTime", "LogAppendTime")),
        Key("message.timestamp.before.max.ms", Type.LONG, LONG_MAX,
            "CreateTime topics: a record whose timestamp is further in the past than this "
            "is refused (INVALID_TIMESTAMP).", at_least(0)),
        Key("message.timestamp.after.max.ms", Type.LONG, 60 * 60 * 1000,
            "CreateTime topics: a record whose timestamp is further in the future than this "
            "is refused (INVALID_TIMESTAMP; Kafka 4's default, one hour).", at_least(0)),
        Key("cleanup.policy", Type.LIST, ["delete"],
            "delete: retention by time and size; compact: keep the last value per key; "
            "compact,delete: both.", one_of("delete", "compact")),
        Key("delete.retention.ms", Type.LONG, 24 * 3600 * 1000,
            "How long a tombstone (a null value) of a compacted topic stays readable after the "
            "cleaner has passed it.", at_least(0)),
        Key("min.cleanable.dirty.ratio", Type.DOUBLE, 0.5,
            "Share of a compacted log not yet cleaned above which the cleaner cleans it.",
            between(0, 1)),
        Key("min.compaction.lag.ms", Type.LONG, 0,
            "Minimum time a message stays uncompacted.", at_least(0)),
        Key("max.compaction.lag.ms", Type.LONG, LONG_MAX,
            "Maximum time a message stays ineligible for compaction.", at_least(1)),
        Key("file.delete.delay.ms", Type.LONG, 60000,
            "Time a deleted segment's files are kept open for readers still using them.",
            at_least(0)),
        Key("min.insync.replicas", Type.INT, 1,
            "Fewest in-sync replicas an acks=all produce needs (NOT_ENOUGH_REPLICAS below).",
            at_least(1)),
        Key("message.format.version", Type.STRING, "3.0-IV1",
            "Deprecated (Kafka 3.0): accepted with a warning, no effect; batches are always "
            "written in record format v2, as Kafka 3.x does once the inter-broker protocol is "
            "3.0 or later."),
        Key("unclean.leader.election.enable", Type.BOOLEAN, False,
            "Let a replica outside the ISR lead when no in-sync replica is left (records may "
            "be lost)."),
        # Kafka 4.4's topic keys samsa takes and lists without acting on them.
        Key("preallocate", Type.BOOLEAN, False,
            "Kafka preallocates a new segment's file; accepted, no effect (samsa's segments "
            "grow as they are written)."),
        Key("segment.jitter.ms", Type.LONG, 0,
            "Kafka subtracts a random jitter up to this from segment.ms; accepted, no effect "
            "(segments roll at segment.ms).", at_least(0)),
        Key("max.decompressed.message.bytes", Type.INT, 2147483639,
            "Kafka 4.4's bound on a batch's decompressed size; accepted, no effect.",
            at_least(0)),
        Key("errors.deadletterqueue.group.enable", Type.BOOLEAN, False,
            "Kafka 4.4's dead letter queue of share groups; accepted, no effect (samsa has no "
            "share groups)."),
        *_compression_keys(default_doc=False),
        Key("leader.replication.throttled.replicas", Type.LIST, [],
            "Replicas whose fetches from their leader are throttled to "
            "leader.replication.throttled.rate on the leader's side while they are out of the "
            "ISR: partition:broker,... (the broker being the leader) or * for all.",
            _throttled_replicas),
        Key("follower.replication.throttled.replicas", Type.LIST, [],
            "Replicas whose fetching is throttled to follower.replication.throttled.rate on "
            "the follower's side while they are out of the ISR: partition:broker,... (the "
            "broker being the follower) or * for all.", _throttled_replicas),
    ]
}


# --- security keys --------------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's names: JKS is parsed so that its refusal can name the key (samsa.security.ssl_factory)
STORE_TYPES = ("JKS", "PKCS12", "PEM")

# Broker keys that a listener may override as listener.name.<listener, lower case>.<key>,
# as Kafka's listener-prefixed configs (SASL's keys join them with SASL).
SSL_KEYS: tuple[Key, ...] = (
    Key("ssl.keystore.type", Type.STRING, "JKS",
        "File format of the key store: PEM or PKCS12 (JKS is refused: convert it).",
        one_of(*STORE_TYPES)),
    Key("ssl.keystore.location", Type.STRING, None,
        "The key store file: this broker's private key and certificate chain."),
    Key("ssl.keystore.password", Type.STRING, None,
        "Password of the key store file (PKCS12; not with PEM, whose key has "
        "ssl.key.password).", sensitive=True),
    Key("ssl.key.password", Type.STRING, None,
        "Password of the private key (PEM: of the encrypted key; PKCS12: when it differs "
        "from the store's).", sensitive=True),
    Key("ssl.keystore.certificate.chain", Type.STRING, None,
        "The certificate chain in PEM, inline (ssl.keystore.type=PEM)."),
    Key("ssl.keystore.key", Type.STRING, None,
        "The private key in PEM, inline (ssl.keystore.type=PEM).", sensitive=True),
    Key("ssl.truststore.type", Type.STRING, "JKS",
        "File format of the trust store: PEM or PKCS12 (JKS is refused: convert it).",
        one_of(*STORE_TYPES)),
    Key("ssl.truststore.location", Type.STRING, None,
        "The trust store file: the certificates of the CAs whose certificates are trusted."),
    Key("ssl.truststore.password", Type.STRING, None,
        "Password of the trust store file (PKCS12).", sensitive=True),
    Key("ssl.truststore.certificates", Type.STRING, None,
        "Trusted certificates in PEM, inline (ssl.truststore.type=PEM)."),
    Key("ssl.client.auth", Type.STRING, "none",
        "Whether the broker asks clients for a certificate: required, requested or none.",
        one_of("required", "requested", "none")),
    Key("ssl.enabled.protocols", Type.LIST, ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted.", one_of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")),
    Key("ssl.protocol", Type.STRING, "TLSv1.3",
        "The newest TLS version offered (TLS and TLSv1.3: 1.3; TLSv1.2: 1.2).",
        one_of("TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")),
    Key("ssl.cipher.suites", Type.LIST, [],
        "TLS 1.2 cipher suites allowed (IANA names as Kafka's, or OpenSSL's); empty: "
        "OpenSSL's defaults. TLS 1.3's suites are OpenSSL's own."),
    Key("ssl.endpoint.identification.algorithm", Type.STRING, "https",
        "https: the inter-broker client checks that the other broker's certificate names "
        "the host it connects to; empty: no check."),
    Key("ssl.principal.mapping.rules", Type.STRING, "DEFAULT",
        "How a client certificate's distinguished name becomes the principal's name: "
        "RULE:pattern/replacement/[LU], ..., DEFAULT (the whole name)."),
)

# SASL (samsa.security.sasl): Kafka's keys and defaults. A listener overrides them as
# listener.name.<listener>.<key>; the keys of one mechanism (MECHANISM_KEYS) also as
# listener.name.<listener>.<mechanism, lower case>.<key>, e.g.
# listener.name.sasl_ssl.plain.sasl.jaas.config.
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_KEYS: tuple[Key, ...] = (
    Key("sasl.enabled.mechanisms", Type.LIST, ["GSSAPI"],
        "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER. Kafka's default, GSSAPI (Kerberos), is not in samsa: a SASL listener "
        "left with only GSSAPI is refused at start.", one_of(*SASL_MECHANISMS)),
    Key("sasl.jaas.config", Type.STRING, None,
        "A mechanism's JAAS login module and options, Kafka's syntax: "
        "'<LoginModule class> required key=\"value\" ...;' (PLAIN: user_<name>=\"<password>\" "
        "per user; username/password: this broker's own credentials toward the others).",
        sensitive=True),
    Key("sasl.server.callback.handler.class", Type.STRING, None,
        "OAUTHBEARER's token validator, by Kafka's class names: "
        "OAuthBearerUnsecuredValidatorCallbackHandler (the default: unsigned tokens, for "
        "development) or OAuthBearerValidatorCallbackHandler (signed JWTs checked against "
        "sasl.oauthbearer.jwks.endpoint.url)."),
    Key("sasl.server.max.receive.size", Type.INT, 524288,
        "Largest frame a client may send before it is authenticated; a larger one fails the "
        "authentication.", at_least(1)),
    Key("connections.max.reauth.ms", Type.LONG, 0,
        "Session lifetime of a SASL connection (KIP-368): the client re-authenticates on "
        "the connection before it ends, else the broker closes the connection at its next "
        "request; 0 for no limit (an OAUTHBEARER token's expiry still ends it).",
        at_least(0)),
    Key("sasl.oauthbearer.jwks.endpoint.url", Type.STRING, None,
        "Where OAuthBearerValidatorCallbackHandler finds the keys that sign tokens: a JWKS "
        "file (file://) or URL (http:// or https://)."),
    Key("sasl.oauthbearer.jwks.endpoint.refresh.ms", Type.LONG, 3600000,
        "How often keys from a JWKS URL are fetched again (also when a token names a key "
        "not yet known).", at_least(1)),
    Key("sasl.oauthbearer.expected.audience", Type.LIST, [],
        "Audiences a token must name one of (its aud claim); empty: not checked."),
    Key("sasl.oauthbearer.expected.issuer", Type.STRING, None,
        "The issuer a token must name (its iss claim); unset: not checked."),
    Key("sasl.oauthbearer.sub.claim.name", Type.STRING, "sub",
        "The claim that names the token's principal."),
    Key("sasl.oauthbearer.scope.claim.name", Type.STRING, "scope",
        "The claim that lists the token's scopes."),
    Key("sasl.oauthbearer.clock.skew.seconds", Type.INT, 30,
        "Clock skew allowed between the token's issuer and the broker.", at_least(0)),
)
MECHANISM_KEYS = frozenset({
    "sasl.jaas.config", "sasl.server.callback.handler.class", "connections.max.reauth.ms",
    *(k.name for k in SASL_KEYS if k.name.startswith("sasl.oauthbearer.")),
})
LISTENER_PREFIX = "listener.name."
# keys a listener may set for itself (listener.name.<listener>.<key>): its TLS and SASL, and
# its own connection limit
LISTENER_KEYS = frozenset(k.name for k in (*SSL_KEYS, *SASL_KEYS)) | {"max.connections"}


# --- broker keys ----------------------------------------------------------------------------

BROKER_KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("listeners", Type.LIST, ["PLAINTEXT://127.0.0.1:9092"],
            "Comma-separated listener URIs the broker binds, NAME://host:port; each name is a "
            "security protocol or a name listener.security.protocol.map maps to one."),
        Key("advertised.listeners", Type.LIST, None,
            "Listener URIs given to clients in Metadata and registered in ZooKeeper, by "
            "listener name (default: listeners)."),
        Key("listener.security.protocol.map", Type.LIST,
            ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT",
             "SASL_SSL:SASL_SSL"],
            "Listener name -> security protocol, NAME:PROTOCOL,... (e.g. INTERNAL:SSL)."),
        Key("inter.broker.listener.name", Type.STRING, None,
            "The listener brokers use among themselves (replica fetchers, transaction "
            "markers); unset: the listener named after security.inter.broker.protocol."),
        Key("security.inter.broker.protocol", Type.STRING, "PLAINTEXT",
            "Security protocol between brokers (only one of this and "
            "inter.broker.listener.name may be set).", one_of(*SECURITY_PROTOCOLS)),
        *SSL_KEYS,
        *SASL_KEYS,
        Key("sasl.mechanism.inter.broker.protocol", Type.STRING, "GSSAPI",
            "The SASL mechanism brokers authenticate to each other with, where the "
            "inter-broker listener is SASL_PLAINTEXT or SASL_SSL: PLAIN, SCRAM-SHA-256, "
            "SCRAM-SHA-512 or OAUTHBEARER (unsecured tokens); Kafka's default, GSSAPI, is "
            "refused.", one_of(*SASL_MECHANISMS)),
        Key("connection.failed.authentication.delay.ms", Type.INT, 100,
            "How long a connection whose authentication failed waits before its answer is "
            "sent and it is closed (slows down password guessing).", at_least(0)),
        Key("broker.id", Type.INT, -1,
            "This broker's id; -1 generates one (1001 and up) and keeps it in meta.properties.",
            at_least(-1)),
        Key("zookeeper.connect", Type.STRING, None,
            "ZooKeeper ensemble of a cluster: host:port[,host:port...][/chroot]; unset, the "
            "broker runs alone."),
        Key("zookeeper.session.timeout.ms", Type.INT, 18000,
            "ZooKeeper session timeout: a broker gone this long leaves the cluster.",
            at_least(1)),
        Key("zookeeper.connection.timeout.ms", Type.INT, None,
            "How long to wait for the first ZooKeeper connection (default: the session "
            "timeout).", at_least(1)),
        Key("broker.rack", Type.STRING, None, "This broker's rack, registered in ZooKeeper."),
        Key("min.insync.replicas", Type.INT, 1, "Default min.insync.replicas.", at_least(1),
            topic="min.insync.replicas"),
        Key("replica.lag.time.max.ms", Type.LONG, 30000,
            "A follower that has not caught up with its leader for this long leaves the ISR.",
            at_least(1)),
        Key("unclean.leader.election.enable", Type.BOOLEAN, False,
            "Default unclean.leader.election.enable.", topic="unclean.leader.election.enable"),
        Key("replica.fetch.max.bytes", Type.INT, 1048576,
            "Bytes a follower asks for per partition in one fetch.", at_least(0)),
        Key("replica.fetch.response.max.bytes", Type.INT, 10485760,
            "Bytes a follower asks for in one fetch.", at_least(0)),
        Key("replica.fetch.wait.max.ms", Type.INT, 500,
            "How long a follower's fetch waits for data at the leader.", at_least(0)),
        Key("replica.fetch.min.bytes", Type.INT, 1,
            "Bytes a follower's fetch waits for.", at_least(1)),
        Key("replica.fetch.backoff.ms", Type.INT, 1000,
            "Pause of a follower after a fetch error.", at_least(0)),
        Key("replication.quota.window.num", Type.INT, 11,
            "Samples the replication throttles measure their rate over.", at_least(1)),
        Key("replication.quota.window.size.seconds", Type.INT, 1,
            "The time span of each sample of the replication throttles.", at_least(1)),
        Key("replica.high.watermark.checkpoint.interval.ms", Type.LONG, 5000,
            "The frequency with which the high watermark is saved out to disk."),
        Key("replica.socket.timeout.ms", Type.INT, 30000,
            "Deadline of a follower's request to its leader (at least "
            "replica.fetch.wait.max.ms).", at_least(1)),
        Key("auto.leader.rebalance.enable", Type.BOOLEAN, True,
            "The controller moves leadership back to preferred replicas when a broker leads "
            "too few of the partitions it prefers."),
        Key("leader.imbalance.check.interval.seconds", Type.LONG, 300,
            "How often the controller checks the leader imbalance.", at_least(1)),
        Key("leader.imbalance.per.broker.percentage", Type.INT, 10,
            "Share of a broker's preferred partitions led elsewhere that starts a preferred "
            "leader election.", between(0, 100)),
        Key("controlled.shutdown.enable", Type.BOOLEAN, True,
            "A stopping broker asks the controller to move its leaderships away first."),
        Key("controlled.shutdown.max.retries", Type.INT, 3,
            "Controlled shutdown attempts before the broker stops anyway.", at_least(0)),
        Key("controlled.shutdown.retry.backoff.ms", Type.LONG, 5000,
            "Pause between controlled shutdown attempts.", at_least(0)),
        Key("num.partitions", Type.INT, 1, "Partitions of an auto-created topic.", at_least(1)),
        Key("default.replication.factor", Type.INT, 1,
            "Replication factor of an auto-created topic.", at_least(1)),
        Key("auto.create.topics.enable", Type.BOOLEAN, True,
            "Create a topic when a client asks for its metadata and it does not exist."),
        Key("delete.topic.enable", Type.BOOLEAN, True, "Allow DeleteTopics."),
        Key("socket.request.max.bytes", Type.INT, 100 * 1024 * 1024,
            "Largest request frame; a larger one closes the connection.", at_least(1)),
        # Kafka's default for both is 102400; samsa's is -1 (the operating system's): on
        # Linux a buffer size set on a socket turns the kernel's autotuning of it off
        Key("socket.send.buffer.bytes", Type.INT, -1,
            "SO_SNDBUF of the listeners' sockets (-1: the operating system's, autotuned).",
            at_least(-1)),
        Key("socket.receive.buffer.bytes", Type.INT, -1,
            "SO_RCVBUF of the listeners' sockets (-1: the operating system's, autotuned).",
            at_least(-1)),
        Key("max.connections.per.ip", Type.INT, INT_MAX,
            "Connections one address may have open; more are closed when accepted.",
            at_least(0), dynamic=CLUSTER_WIDE),
        Key("max.connections.per.ip.overrides", Type.STRING, "",
            "Per-address limits over max.connections.per.ip: host:count,...", dynamic=CLUSTER_WIDE),
        Key("max.connections", Type.INT, INT_MAX,
            "Connections the broker keeps open (the inter-broker listener's not counted "
            "against it); more are closed when accepted.", at_least(0), dynamic=CLUSTER_WIDE),
        Key("connections.max.idle.ms", Type.LONG, 10 * 60 * 1000,
            "A connection with no request or response for this long is closed.", at_least(1)),
        # client quotas (samsa/server/quotas.py): the windows their rates are measured over
        Key("quota.window.num", Type.INT, 11,
            "Samples kept by the client quotas' rates (10 whole windows and the current one).",
            at_least(1)),
        Key("quota.window.size.seconds", Type.INT, 1,
            "The time span of each sample of the client quotas' rates.", at_least(1)),
        Key("controller.quota.window.num", Type.INT, 11,
            "Samples of the controller mutation quotas (their token buckets hold this many "
            "windows of the rate).", at_least(1)),
        Key("controller.quota.window.size.seconds", Type.INT, 1,
            "The time span of each sample of the controller mutation quotas.", at_least(1)),
        # Kafka's thread pools: an event loop has none of them. Accepted (so that Kafka's own
        # server.properties starts samsa) and shown by DescribeConfigs, with no effect.
        Key("log.message.format.version", Type.STRING, "3.0-IV1",
            "Deprecated (Kafka 3.0): accepted with a warning, no effect (the default of "
            "message.format.version).", topic="message.format.version"),
        Key("num.network.threads", Type.INT, 3,
            "Kafka's network threads: accepted, no effect (one event loop serves every "
            "connection).", at_least(1), dynamic=CLUSTER_WIDE),
        Key("num.io.threads", Type.INT, 8,
            "Kafka's request handler threads: accepted, no effect (requests are handled on "
            "the event loop).", at_least(1), dynamic=CLUSTER_WIDE),
        Key("num.recovery.threads.per.data.dir", Type.INT, 2,
            "Kafka's log recovery threads: accepted, no effect (logs are recovered one after "
            "another at start).", at_least(1), dynamic=CLUSTER_WIDE),
        Key("background.threads", Type.INT, 10,
            "Kafka's background threads: accepted, no effect (retention and flushes run as "
            "event-loop tasks).", at_least(1), dynamic=CLUSTER_WIDE),
        Key("share.coordinator.state.topic.replication.factor", Type.INT, 3,
            "Kafka's share groups (KIP-932): accepted, no effect (samsa has no share groups).",
            at_least(1)),
        Key("share.coordinator.state.topic.min.isr", Type.INT, 2,
            "Kafka's share groups (KIP-932): accepted, no effect (samsa has no share groups).",
            at_least(1)),
        Key("queued.max.requests", Type.INT, 500,
            "Kafka's request queue bound: accepted, no effect (each connection reads no "
            "further while 8 MiB of its requests wait).", at_least(1)),
        Key("offsets.commit.timeout.ms", Type.INT, 5000,
            "How long an offset commit waits for the ISR of its __consumer_offsets partition "
            "(cluster mode).", at_least(1)),
        Key("offsets.topic.num.partitions", Type.INT, 50,
            "Partitions of __consumer_offsets (cannot change once the topic exists).",
            at_least(1)),
        Key("offsets.topic.replication.factor", Type.INT, 3,
            "Replication factor of __consumer_offsets (capped by the live brokers).",
            at_least(1)),
        Key("offsets.topic.segment.bytes", Type.INT, 100 * 1024 * 1024,
            "segment.bytes of __consumer_offsets.", at_least(1)),
        Key("offsets.retention.minutes", Type.INT, 7 * 24 * 60,
            "How long the committed offsets of an empty group are kept.", at_least(1)),
        Key("offsets.retention.check.interval.ms", Type.LONG, 600000,
            "How often committed offsets are checked for expiry.", at_least(1)),
        Key("offset.metadata.max.bytes", Type.INT, 4096,
            "Largest metadata string a client may commit with an offset."),
        Key("group.initial.rebalance.delay.ms", Type.INT, 3000,
            "How long an empty group's first rebalance waits for more members.", at_least(0)),
        Key("group.min.session.timeout.ms", Type.INT, 6000,
            "Smallest session.timeout.ms a group member may ask for."),
        Key("group.max.session.timeout.ms", Type.INT, 1800000,
            "Largest session.timeout.ms a group member may ask for."),
        Key("group.max.size", Type.INT, 2**31 - 1, "Most members a group may have.",
            at_least(1)),
        # the consumer group protocol (KIP-848), Kafka's GroupCoordinatorConfig
        Key("group.consumer.session.timeout.ms", Type.INT, 45000,
            "How long a member of a consumer group (group.protocol=consumer) may go without a "
            "heartbeat before it is fenced from the group.", at_least(1)),
        Key("group.consumer.min.session.timeout.ms", Type.INT, 45000,
            "Lower bound of group.consumer.session.timeout.ms.", at_least(1)),
        Key("group.consumer.max.session.timeout.ms", Type.INT, 60000,
            "Upper bound of group.consumer.session.timeout.ms.", at_least(1)),
        Key("group.consumer.heartbeat.interval.ms", Type.INT, 5000,
            "How often the members of a consumer group heartbeat (told in every "
            "ConsumerGroupHeartbeat response).", at_least(1)),
        Key("group.consumer.min.heartbeat.interval.ms", Type.INT, 5000,
            "Lower bound of group.consumer.heartbeat.interval.ms.", at_least(1)),
        Key("group.consumer.max.heartbeat.interval.ms", Type.INT, 15000,
            "Upper bound of group.consumer.heartbeat.interval.ms.", at_least(1)),
        Key("group.consumer.max.size", Type.INT, 2**31 - 1,
            "Most members a consumer group may have (group.max.size is the classic "
            "protocol's).", at_least(1)),
        Key("group.consumer.assignors", Type.LIST, ["uniform", "range"],
            "The server-side assignors consumer groups may use, by name (uniform, range) or "
            "Kafka's class name; the first is the default when no member names one.",
            _consumer_assignors),
        Key("group.consumer.migration.policy", Type.STRING, "bidirectional",
            "Which online conversions between classic and consumer groups are allowed: "
            "disabled (also no classic members in consumer groups), upgrade, downgrade or "
            "bidirectional.",
            _migration_policy),
        Key("group.consumer.regex.refresh.interval.ms", Type.INT, 600000,
            "How often the topics that consumer groups' subscribed regexes match are resolved "
            "again (also when topics are created or deleted).", at_least(1)),
        Key("producer.id.expiration.ms", Type.INT, 86400000,
            "Time after its last write that an idempotent producer's state is dropped.",
            at_least(1), dynamic=CLUSTER_WIDE),
        Key("transaction.max.timeout.ms", Type.INT, 900000,
            "Largest transaction.timeout.ms a transactional producer may ask for.",
            at_least(1)),
        Key("transactional.id.expiration.ms", Type.INT, 604800000,
            "Time without a transaction after which a transactional id's state is dropped.",
            at_least(1)),
        Key("transaction.abort.timed.out.transaction.cleanup.interval.ms", Type.INT, 10000,
            "How often the coordinator aborts transactions that passed their timeout.",
            at_least(1)),
        Key("transaction.remove.expired.transaction.cleanup.interval.ms", Type.INT, 3600000,
            "How often transactional ids past transactional.id.expiration.ms are removed.",
            at_least(1)),
        Key("transaction.state.log.num.partitions", Type.INT, 50,
            "Partitions of __transaction_state (cannot change once the topic exists).",
            at_least(1)),
        Key("transaction.state.log.replication.factor", Type.INT, 3,
            "Replication factor of __transaction_state (capped by the live brokers).",
            at_least(1)),
        Key("transaction.state.log.min.isr", Type.INT, 2,
            "min.insync.replicas of __transaction_state.", at_least(1)),
        Key("transaction.state.log.segment.bytes", Type.INT, 100 * 1024 * 1024,
            "segment.bytes of __transaction_state.", at_least(1)),
        Key("prometheus.listener", Type.STRING, "",
            "Where the broker serves its metrics in Prometheus's text format, at /metrics: "
            "http://HOST:PORT (port 0: any free port). Empty: no metrics are kept or served.",
            _http_listener),
        Key("authorizer.class.name", Type.STRING, "",
            "The authorizer the broker checks requests with: empty for none (every request is "
            "allowed), else the ACL authorizer, named samsa.security.AclAuthorizer or by the "
            "class name of Kafka's (kafka.security.authorizer.AclAuthorizer, "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer).", _authorizer_class),
        Key("super.users", Type.STRING, None,
            "Semicolon-separated principals (User:name) that the authorizer allows every "
            "operation on every resource from every host, whatever the ACLs say.", _principals),
        Key("allow.everyone.if.no.acl.found", Type.BOOLEAN, False,
            "If true, the authorizer allows every request on a resource that no ACL matches "
            "(for any principal, host or operation); if false, such requests are denied."),
        Key("log.dirs", Type.LIST, None,
            "Directories where partition logs live (falls back to log.dir)."),
        Key("log.dir", Type.STRING, "/tmp/kafka-logs",
            "The data directory used when log.dirs is not set."),
        Key("log.segment.bytes", Type.INT, 1024 * 1024 * 1024,
            "Default segment.bytes.", at_least(14), topic="segment.bytes"),
        Key("log.roll.ms", Type.LONG, None, "Default segment.ms.", at_least(1),
            topic="segment.ms", synonyms=(("log.roll.hours", 3600 * 1000),)),
        Key("log.roll.hours", Type.INT, 24 * 7, "Default segment.ms, in hours.", at_least(1)),
        Key("log.index.size.max.bytes", Type.INT, 10 * 1024 * 1024,
            "Default segment.index.bytes.", at_least(8), topic="segment.index.bytes"),
        Key("log.index.interval.bytes", Type.INT, 4096,
            "Default index.interval.bytes.", at_least(0), topic="index.interval.bytes"),
        Key("log.retention.ms", Type.LONG, None, "Default retention.ms.", at_least(-1),
            topic="retention.ms",
            synonyms=(("log.retention.minutes", 60 * 1000), ("log.retention.hours", 3600 * 1000))),
        Key("log.retention.minutes", Type.INT, None, "Default retention.ms, in minutes."),
        Key("log.retention.hours", Type.INT, 24 * 7, "Default retention.ms, in hours."),
        Key("log.retention.bytes", Type.LONG, -1, "Default retention.bytes.",
            topic="retention.bytes"),
        Key("log.retention.check.interval.ms", Type.LONG, 5 * 60 * 1000,
            "How often segments are checked for deletion by retention.", at_least(1)),
        Key("log.flush.interval.messages", Type.LONG, LONG_MAX, "Default flush.messages.",
            at_least(1), topic="flush.messages"),
        Key("log.flush.interval.ms", Type.LONG, None,
            "Default flush.ms (falls back to log.flush.scheduler.interval.ms).", at_least(0),
            topic="flush.ms"),
        Key("log.flush.scheduler.interval.ms", Type.LONG, LONG_MAX,
            "How often the flusher checks whether a log needs an fsync."),
        Key("log.flush.offset.checkpoint.interval.ms", Type.INT, 60000,
            "How often the recovery point of every log is checkpointed.", at_least(0)),
        Key("log.flush.start.offset.checkpoint.interval.ms", Type.INT, 60000,
            "How often the log start offset of every log is checkpointed.", at_least(0)),
        Key("message.max.bytes", Type.INT, 1024 * 1024 + 12, "Default max.message.bytes.",
            at_least(0), topic="max.message.bytes"),
        Key("log.message.timestamp.type", Type.STRING, "CreateTime",
            "Default message.timestamp.type.", one_of("CreateTime", "LogAppendTime"),
            topic="message.timestamp.type"),
        Key("log.message.timestamp.before.max.ms", Type.LONG, LONG_MAX,
            "Default message.timestamp.before.max.ms.", at_least(0),
            topic="message.timestamp.before.max.ms"),
        Key("log.message.timestamp.after.max.ms", Type.LONG, 60 * 60 * 1000,
            "Default message.timestamp.after.max.ms.", at_least(0),
            topic="message.timestamp.after.max.ms"),
        Key("log.cleanup.policy", Type.LIST, ["delete"], "Default cleanup.policy.",
            one_of("delete", "compact"), topic="cleanup.policy"),
        Key("log.segment.delete.delay.ms", Type.LONG, 60000, "Default file.delete.delay.ms.",
            at_least(0), topic="file.delete.delay.ms"),
        Key("log.cleaner.enable", Type.BOOLEAN, True,
            "Run the log cleaner (compaction of cleanup.policy=compact topics)."),
        Key("log.cleaner.threads", Type.INT, 1, "Threads that clean logs.", at_least(0),
            dynamic=CLUSTER_WIDE),
        Key("log.cleaner.dedupe.buffer.size", Type.LONG, 128 * 1024 * 1024,
            "Memory for the key -> offset map of all cleaner threads (128 bytes an entry).",
            at_least(0), dynamic=CLUSTER_WIDE),
        Key("log.cleaner.io.buffer.load.factor", Type.DOUBLE, 0.9,
            "How full the dedupe map may get.", between(0, 1), dynamic=CLUSTER_WIDE),
        Key("log.cleaner.backoff.ms", Type.LONG, 15000,
            "How long a cleaner thread sleeps when no log needs cleaning.", at_least(0),
            dynamic=CLUSTER_WIDE),
        Key("log.cleaner.delete.retention.ms", Type.LONG, 24 * 3600 * 1000,
            "Default delete.retention.ms.", at_least(0), topic="delete.retention.ms"),
        Key("log.cleaner.min.cleanable.ratio", Type.DOUBLE, 0.5,
            "Default min.cleanable.dirty.ratio.", between(0, 1),
            topic="min.cleanable.dirty.ratio"),
        Key("log.cleaner.min.compaction.lag.ms", Type.LONG, 0,
            "Default min.compaction.lag.ms.", at_least(0), topic="min.compaction.lag.ms"),
        Key("log.cleaner.max.compaction.lag.ms", Type.LONG, LONG_MAX,
            "Default max.compaction.lag.ms.", at_least(1), topic="max.compaction.lag.ms"),
        *_compression_keys(default_doc=True),
    ]
}


# The quotas of a user, a client id or a user's client id (Kafka's QuotaConfigs, the entity
# configs of /config/users and /config/clients): set by AlterClientQuotas, never in
# server.properties. The defaults are "no quota".
CLIENT_QUOTA_KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("producer_byte_rate", Type.LONG, LONG_MAX,
            "A rate representing the upper bound (bytes/sec) for producer traffic."),
        Key("consumer_byte_rate", Type.LONG, LONG_MAX,
            "A rate representing the upper bound (bytes/sec) for consumer traffic."),
        Key("request_percentage", Type.DOUBLE, float(INT_MAX),
            "A percentage representing the upper bound of time spent for processing requests "
            "(samsa: of its event loop's time, see samsa/server/quotas.py)."),
        Key("controller_mutation_rate", Type.DOUBLE, float(INT_MAX),
            "The rate at which mutations are accepted for the create topics request, the "
            "create partitions request and the delete topics request. The rate is accumulated "
            "by the number of partitions created or deleted."),
    ]
}


# Broker keys that exist only as dynamic configs (Kafka's QuotaConfigs.brokerQuotaConfigs), set
# with AlterConfigs (kafka-configs --entity-type brokers), never in server.properties.
DYNAMIC_ONLY_KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("leader.replication.throttled.rate", Type.LONG, LONG_MAX,
            "Bytes a second this broker sends, as a leader, to followers of the partitions "
            "leader.replication.throttled.replicas names while they are out of the ISR (only "
            "set dynamically).", at_least(0), dynamic=CLUSTER_WIDE),
        Key("follower.replication.throttled.rate", Type.LONG, LONG_MAX,
            "Bytes a second this broker fetches, as a follower, of the partitions "
            "follower.replication.throttled.replicas names while it is out of their ISR (only "
            "set dynamically).", at_least(0), dynamic=CLUSTER_WIDE),
        Key("replica.alter.log.dirs.io.max.bytes.per.second", Type.LONG, LONG_MAX,
            "Bytes a second a replica moving between this broker's log directories "
            "(AlterReplicaLogDirs) is copied at, at most.", at_least(0),
            dynamic=CLUSTER_WIDE),
    ]
}

# Topic defaults that are not dynamic (Kafka's DynamicLogConfig.NonReconfigrableLogConfigs).
_NON_RECONFIGURABLE_LOG_CONFIGS = frozenset({"message.format.version"})
def _dynamic_modes() -> dict[str, str]:
    """Every dynamic broker key and its update mode: the keys marked so, the dynamic-only keys,
    and the topic defaults, each under its most precise name (log.retention.ms, not .hours),
    as Kafka's DynamicLogConfig.ReconfigurableConfigs."""
    modes: dict[str, str] = {}
    for key in (*BROKER_KEYS.values(), *DYNAMIC_ONLY_KEYS.values()):
        if key.dynamic is not None:
            modes[key.name] = key.dynamic
        elif key.topic is not None and key.topic not in _NON_RECONFIGURABLE_LOG_CONFIGS:
            modes[key.name] = CLUSTER_WIDE
    return modes


DYNAMIC_MODES = _dynamic_modes()


def broker_key(name: str) -> Key | None:
    """A broker key by name, static or dynamic-only; a listener's override
    (``listener.name.<listener>.<key>``) is its key's."""
    found = BROKER_KEYS.get(name) or DYNAMIC_ONLY_KEYS.get(name)
    if found is None and (override := listener_key(name)) is not None:
        found = BROKER_KEYS[override[2]]
    return found


# Keys of Kafka's KRaft mode, with what samsa takes instead: samsa is a single node or a
# ZooKeeper cluster, so a KRaft server.properties needs these lines replaced, not ignored.
KRAFT_ONLY: dict[str, str] = {
    "process.roles": "remove it: samsa is one broker on its own, or brokers coordinated by "
                     "ZooKeeper (zookeeper.connect)",
    "node.id": "use broker.id",
    "controller.quorum.voters": "use zookeeper.connect for a cluster, nothing for one broker",
    "controller.quorum.bootstrap.servers": "use zookeeper.connect for a cluster, nothing for "
                                           "one broker",
    "controller.listener.names": "remove it and the CONTROLLER listener: samsa has no "
                                 "controller listener (the controller is elected in ZooKeeper)",
    "metadata.log.dir": "remove it: topics live in log.dirs (a single node) or ZooKeeper",
    "metadata.log.segment.bytes": "remove it: samsa keeps no metadata log",
    "metadata.log.max.record.bytes.between.snapshots": "remove it: samsa keeps no metadata log",
    "sasl.mechanism.controller.protocol": "remove it: samsa has no controller listener",
    "early.start.listeners": "remove it: samsa has no controller listener",
}


# Keys Kafka 3.x still accepts with a deprecation warning (removed in 4.0): existing configs
# carry them, and refusing them would stop a broker or a topic creation for nothing.
DEPRECATED = frozenset({"log.message.format.version", "message.format.version"})


def warn_deprecated(props: Iterable[str], where: str) -> None:
    """One warning per deprecated key among ``props``."""
    for name in props:
        if name in DEPRECATED:
            log.warning("%s: %s is deprecated since Kafka 3.0 and has no effect (record "
                        "format v2 is always written)", where, name)


def _check_known(props: Mapping[str, Any], table: Mapping[str, Key], what: str) -> None:
    for name in props:
        if name in table:
            continue
        if what == "broker" and name in KRAFT_ONLY:
            raise ConfigError(f"{name} is a KRaft-only configuration: {KRAFT_ONLY[name]}")
        if what == "broker" and name in DYNAMIC_ONLY_KEYS:
            raise ConfigError(f"{name} can only be set dynamically (kafka-configs --alter "
                              f"--entity-type brokers), not in the broker's configuration")
        raise ConfigError(f"Unknown {what} configuration {name!r}")


def _scala_set(names: Iterable[str]) -> str:
    """Names as Kafka's messages print a Scala set of them."""
    return f"Set({', '.join(names)})"


# The TLS stores a listener's connections are made with (Kafka's SslConfigs.RECONFIGURABLE_CONFIGS):
# dynamic per broker, only with a listener's prefix (listener.name.<listener>.ssl.keystore...).
DYNAMIC_SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})


def dynamic_listener_key(name: str) -> str | None:
    """``listener.name.<listener>.<key>`` of a key a listener may change dynamically: the
    name with the listener in lower case (as Kafka's prefix); else None."""
    found = listener_key(name)
    if found is None or found[1] or found[2] not in DYNAMIC_SECURITY_KEYS:
        return None
    return f"{LISTENER_PREFIX}{found[0]}.{found[2]}"


def check_dynamic(props: Mapping[str, Any], per_broker: bool) -> dict[str, Any]:
    """Kafka's DynamicBrokerConfig.validateConfigs: the dynamic broker configs ``props`` parsed
    (a listener's key under its name with the listener in lower case), or ConfigError with
    Kafka's message (an unknown key, which Kafka would keep as a custom config for plugins
    samsa does not have, is refused as in server.properties). ``per_broker``: for one broker,
    else as the cluster's default."""
    listener_props = {name: dynamic_listener_key(name) for name in props
                      if listener_key(name) is not None}
    fixed = [name for name, normal in listener_props.items() if normal is None]
    others = {name: v for name, v in props.items() if name not in listener_props}
    _check_known(others, {**BROKER_KEYS, **DYNAMIC_ONLY_KEYS}, "broker")
    fixed += [name for name in others
              if name not in DYNAMIC_MODES and name not in DYNAMIC_SECURITY_KEYS]
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    unprefixed = [name for name in others if name in DYNAMIC_SECURITY_KEYS]
    if unprefixed:
        raise ConfigError("These security configs can be dynamically updated only per-listener "
                          f"using the listener prefix: {_scala_set(unprefixed)}")
    parsed = {}
    for name, value in props.items():
        key = broker_key(name)
        assert key is not None
        parsed[listener_props.get(name) or name] = key.parse(value)
    if not per_broker:
        only = [name for name in props
                if name in listener_props or DYNAMIC_MODES[name] == PER_BROKER]
        if only:
            raise ConfigError("Cannot update these configs at default cluster level, broker id "
                              f"must be specified: {_scala_set(only)}")
    return parsed


def listener_key(name: str) -> tuple[str, str, str] | None:
    """``listener.name.<listener>.<key>`` -> (listener, "", key) for a key a listener may
    override (LISTENER_KEYS), ``listener.name.<listener>.<mechanism>.<key>`` -> (listener,
    mechanism, key) for a key of one SASL mechanism (MECHANISM_KEYS); else None. The listener
    and the mechanism in lower case, as Kafka's prefixes."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, key = name[len(LISTENER_PREFIX):].partition(".")
    if not listener:
        return None
    if key in LISTENER_KEYS:
        return listener.lower(), "", key
    mechanism, _, key = key.partition(".")
    if mechanism.upper() in SASL_MECHANISMS and key in MECHANISM_KEYS:
        return listener.lower(), mechanism.lower(), key
    return None


class BrokerConfig:
    """The broker's configuration: every key of BROKER_KEYS, explicitly set or defaulted,
    and the per-listener overrides (``listener.name.<listener>.<key>``)."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        props = dict(props or {})
        # (listener, mechanism or "", key) -> value
        self._listener: dict[tuple[str, str, str], Any] = {}
        for name in list(props):
            found = listener_key(name)
            if found is not None:
                self._listener[found] = BROKER_KEYS[found[2]].parse(props.pop(name))
        _check_known(props, BROKER_KEYS, "broker")
        self._explicit = {name: BROKER_KEYS[name].parse(v) for name, v in props.items()}
        warn_deprecated(self._explicit, "broker configuration")
        # The dynamic configs over them (Kafka's DynamicBrokerConfig): this broker's own
        # (per_broker True) over the cluster's defaults (False), as stored and parsed.
        self._dynamic_text: dict[bool, dict[str, str]] = {True: {}, False: {}}
        self._dynamic: dict[bool, dict[str, Any]] = {True: {}, False: {}}

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was given (not defaulted) in the static configuration."""
        return self._explicit.get(name) is not None

    def static_values(self) -> dict[str, Any]:
        """The keys of the static configuration (server.properties), parsed."""
        return {name: v for name, v in self._explicit.items() if v is not None}

    def dynamic_props(self, per_broker: bool) -> dict[str, str]:
        """The dynamic configs of this broker (``per_broker``) or the cluster's defaults, as
        stored."""
        return dict(self._dynamic_text[per_broker])

    def with_dynamic(self, per_broker: bool, props: Mapping[str, str],
                     parsed: Mapping[str, Any]) -> BrokerConfig:
        """A copy of this config whose dynamic configs of one level are ``props`` (checked
        already: ``parsed``), to validate a change against."""
        other = copy.copy(self)
        other._dynamic_text = {**self._dynamic_text, per_broker: dict(props)}
        other._dynamic = {**self._dynamic, per_broker: dict(parsed)}
        return other

    def set_dynamic(self, per_broker: bool, props: Mapping[str, str]) -> set[str]:
        """Replace this broker's dynamic configs (``per_broker``) or the cluster's defaults with
        ``props``, as stored (ZooKeeper, the metadata dir); what is not a valid dynamic config
        there is left out with an error, as Kafka's fromPersistentProps does. Returns the keys
        whose value changed."""
        where = "broker" if per_broker else "default cluster"
        text: dict[str, str] = {}
        parsed: dict[str, Any] = {}
        for name, value in props.items():
            try:
                parsed.update(check_dynamic({name: value}, per_broker))
            except ConfigError as exc:
                log.error("Dynamic %s config %s ignored: %s", where, name, exc)
                continue
            text[name] = value
        names = set(self._dynamic[per_broker]) | set(parsed)
        before = {name: self.get(name) for name in names}
        self._dynamic_text[per_broker] = text
        self._dynamic[per_broker] = parsed
        return {name for name in names if self.get(name) != before[name]}

    def listener_get(self, listener: str, name: str) -> Any:
        """``name`` as listener ``listener`` sees it: its ``listener.name.<listener>.`` override
        (the listener name in lower case, as Kafka's prefix), else the broker's value."""
        value = self.listener_override(listener, name)
        return self.get(name) if value is None else value

    def listener_override(self, listener: str, name: str) -> Any:
        """The ``listener.name.<listener>.<name>`` value, dynamic or static; None if unset."""
        value = self._dynamic[True].get(f"{LISTENER_PREFIX}{listener.lower()}.{name}")
        if value is None:
            value = self._listener.get((listener.lower(), "", name))
        return value

    def mechanism_get(self, listener: str, mechanism: str, name: str) -> Any:
        """``name`` as one SASL mechanism of ``listener`` sees it (Kafka's ConfigurationUtils):
        ``listener.name.<listener>.<mechanism>.<name>``, else the listener's, else the
        broker's value."""
        value = self._listener.get((listener.lower(), mechanism.lower(), name))
        return self.listener_get(listener, name) if value is None else value

    def mechanism_source(self, listener: str, mechanism: str, name: str) -> str | None:
        """The key ``mechanism_get`` found ``name`` under (None: not set anywhere)."""
        lis, mech = listener.lower(), mechanism.lower()
        if self._listener.get((lis, mech, name)) is not None:
            return f"{LISTENER_PREFIX}{lis}.{mech}.{name}"
        if self._listener.get((lis, "", name)) is not None:
            return f"{LISTENER_PREFIX}{lis}.{name}"
        return name if self.is_set(name) else None

    def get(self, name: str) -> Any:
        """The value of a broker key: dynamic for this broker, else the cluster's dynamic
        default, else static (the most precise synonym set wins), else Kafka's default."""
        for layer in (self._dynamic[True], self._dynamic[False]):
            value = layer.get(name)
            if value is not None:
                return value
        key = BROKER_KEYS.get(name)
        if key is None and name in DYNAMIC_ONLY_KEYS:
            return DYNAMIC_ONLY_KEYS[name].default
        if key is None:  # a listener's override: listener.name.<listener>.[<mechanism>.]<key>
            found = listener_key(name)
            if found is None:
                raise KeyError(name)
            return self.mechanism_get(*found)
        if name in self._explicit and self._explicit[name] is not None:
            return self._explicit[name]
        for synonym, factor in key.synonyms:
            value = self._explicit.get(synonym)
            if value is not None:
                return value * factor
        if key.default is None and key.synonyms:
            synonym, factor = key.synonyms[-1]
            return BROKER_KEYS[synonym].default * factor
        return key.default

    @property
    def log_dirs(self) -> list[str]:
        return self.get("log.dirs") or [self.get("log.dir")]

    def topic_defaults(self) -> dict[str, Any]:
        """Defaults of every topic key, as this broker's configuration sets them."""
        defaults = {name: key.default for name, key in TOPIC_KEYS.items()}
        for key in BROKER_KEYS.values():
            if key.topic is not None:
                value = self.get(key.name)
                if value is None and key.name == "log.flush.interval.ms":
                    value = self.get("log.flush.scheduler.interval.ms")
                if value is not None:
                    defaults[key.topic] = value
        return defaults


@dataclass(frozen=True)
class LogConfig:
    """The effective configuration of one partition log (topic keys, parsed)."""

    segment_bytes: int = TOPIC_KEYS["segment.bytes"].default
    segment_ms: int = TOPIC_KEYS["segment.ms"].default
    segment_index_bytes: int = TOPIC_KEYS["segment.index.bytes"].default
    index_interval_bytes: int = TOPIC_KEYS["index.interval.bytes"].default
    retention_ms: int = TOPIC_KEYS["retention.ms"].default
    retention_bytes: int = TOPIC_KEYS["retention.bytes"].default
    flush_messages: int = TOPIC_KEYS["flush.messages"].default
    flush_ms: int = TOPIC_KEYS["flush.ms"].default
    max_message_bytes: int = TOPIC_KEYS["max.message.bytes"].default
    message_timestamp_type: str = TOPIC_KEYS["message.timestamp.type"].default
    message_timestamp_before_max_ms: int = TOPIC_KEYS["message.timestamp.before.max.ms"].default
    message_timestamp_after_max_ms: int = TOPIC_KEYS["message.timestamp.after.max.ms"].default
    cleanup_policy: tuple[str, ...] = tuple(TOPIC_KEYS["cleanup.policy"].default)
    delete_retention_ms: int = TOPIC_KEYS["delete.retention.ms"].default
    min_cleanable_dirty_ratio: float = TOPIC_KEYS["min.cleanable.dirty.ratio"].default
    min_compaction_lag_ms: int = TOPIC_KEYS["min.compaction.lag.ms"].default
    max_compaction_lag_ms: int = TOPIC_KEYS["max.compaction.lag.ms"].default
    file_delete_delay_ms: int = TOPIC_KEYS["file.delete.delay.ms"].default
    min_insync_replicas: int = TOPIC_KEYS["min.insync.replicas"].default
    unclean_leader_election_enable: bool = TOPIC_KEYS["unclean.leader.election.enable"].default
    preallocate: bool = TOPIC_KEYS["preallocate"].default
    segment_jitter_ms: int = TOPIC_KEYS["segment.jitter.ms"].default
    max_decompressed_message_bytes: int = TOPIC_KEYS["max.decompressed.message.bytes"].default
    errors_deadletterqueue_group_enable: bool = (
        TOPIC_KEYS["errors.deadletterqueue.group.enable"].default)
    message_format_version: str = TOPIC_KEYS["message.format.version"].default
    compression_type: str = TOPIC_KEYS["compression.type"].default
    compression_gzip_level: int = TOPIC_KEYS["compression.gzip.level"].default
    compression_lz4_level: int = TOPIC_KEYS["compression.lz4.level"].default
    compression_zstd_level: int = TOPIC_KEYS["compression.zstd.level"].default
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()

    @classmethod
    def from_props(
        cls, props: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Build from topic keys (``{"segment.bytes": "1048576"}``) over broker defaults."""
        props = dict(props or {})
        for name in props:
            if name not in TOPIC_KEYS:
                # Kafka's LogConfig.validateNames: CreateTopics, AlterConfigs and
                # IncrementalAlterConfigs answer INVALID_CONFIG with this message
                raise ConfigError(f"Unknown topic config name: {name}")
        merged = dict(defaults or {})
        merged.update({name: TOPIC_KEYS[name].parse(v) for name, v in props.items()})
        values: dict[str, Any] = {}
        for name, value in merged.items():
            value = TOPIC_KEYS[name].parse(value)
            values[name.replace(".", "_")] = tuple(value) if isinstance(value, list) else value
        return cls(**values)

    def to_props(self) -> dict[str, Any]:
        """This config as topic keys, for DescribeConfigs and persistence."""
        out: dict[str, Any] = {}
        for name in TOPIC_KEYS:
            value = getattr(self, name.replace(".", "_"))
            out[name] = ",".join(value) if isinstance(value, tuple) else value
        return out

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Retention by time and size applies (cleanup.policy delete or compact,delete)."""
        return "delete" in self.cleanup_policy

    def leader_throttled(self, partition: int, broker_id: int) -> bool:
        """Whether broker ``broker_id``, leading ``partition``, throttles its followers'
        fetches of it (leader.replication.throttled.replicas names it, or is ``*``)."""
        return bool(self.leader_replication_throttled_replicas) and _names(
            self._leader_throttled, partition, broker_id)

    def follower_throttled(self, partition: int, broker_id: int) -> bool:
        """Whether broker ``broker_id``, following ``partition``, throttles its fetches of it
        (follower.replication.throttled.replicas)."""
        return bool(self.follower_replication_throttled_replicas) and _names(
            self._follower_throttled, partition, broker_id)

    @cached_property
    def _leader_throttled(self) -> frozenset[tuple[int, int]] | None:
        return _replica_set(self.leader_replication_throttled_replicas)

    @cached_property
    def _follower_throttled(self) -> frozenset[tuple[int, int]] | None:
        return _replica_set(self.follower_replication_throttled_replicas)


def _replica_set(items: tuple[str, ...]) -> frozenset[tuple[int, int]] | None:
    """A throttled-replicas list as (partition, broker) pairs; None: ``*``, every replica."""
    if items == ("*",):
        return None
    pairs = (item.split(":") for item in items)
    return frozenset((int(p), int(b)) for p, b in pairs)


def _names(replicas: frozenset[tuple[int, int]] | None, partition: int, broker: int) -> bool:
    return replicas is None or (partition, broker) in replicas


def parse_properties(lines: Iterable[str]) -> dict[str, str]:
    """Parse a Java-style .properties file body (key=value or key: value, # comments)."""
    props: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                break
        else:
            raise ConfigError(f"line {number}: expected key=value, got {line!r}")
        props[key.strip()] = value.strip()
    return props


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it (``1024.0``, ``1.0E7``, ``5.0E-4``): how
    Kafka stores a DOUBLE quota in ZooKeeper and how kafka-configs prints quota values."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    shortest = decimal.Decimal(repr(magnitude)).normalize()
    if 1e-3 <= magnitude < 1e7:
        text = format(shortest, "f")
        return sign + (text if "." in text else text + ".0")
    digits = "".join(map(str, shortest.as_tuple().digits))
    exponent = shortest.adjusted()
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
