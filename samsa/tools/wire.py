"""Kafka requests over a socket of samsa's own, for the APIs confluent-kafka has no binding
for: OffsetDelete (``samsa groups --delete-offsets``), the transaction admin APIs (``samsa
transactions``) and the partition reassignment APIs (``samsa reassign-partitions``).
``WirePool`` keeps one connection per broker under one deadline.

``WireSecurity.from_properties`` reads a tool's ``--command-config`` (librdkafka's names):
``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; for TLS ``ssl.ca.location``
(else the system's CAs), ``ssl.certificate.location`` / ``ssl.key.location`` (and
``ssl.key.password``), ``ssl.endpoint.identification.algorithm`` (``https``, the default: the
broker's certificate must name the host; empty or ``none``: not checked) and
``enable.ssl.certificate.verification``; for SASL ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512), ``sasl.username`` and ``sasl.password``. A SASL connection sends ApiVersions,
then SaslHandshake v1 and SaslAuthenticate (the client side of ``samsa.security.sasl``, as the
broker's inter-broker client), and authenticates again when the session the broker granted
nears its end. Anything else (GSSAPI, OAUTHBEARER, PEM strings, keystores) is a one-line
error."""

from __future__ import annotations

import dataclasses
import importlib
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kio.index import load_request_schema
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)

from samsa.errors import ErrorCode, kafka_name
from samsa.protocol.client import (
    REAUTHENTICATE_AT,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SIZE,
    ClientCodec,
    ResponseError,
    SaslExchangeFailed,
    api_versions_request,
    choose_version,
    sasl_exchange,
    version_ranges,
)
from samsa.security.sasl.listener import SaslClientSettings
from samsa.tools.common import CONNECT_TIMEOUT_S, ToolError, parse_bootstrap

CLIENT_ID = "samsa-consumer-groups"
TP = tuple[str, int]


FIND_COORDINATOR, OFFSET_DELETE, METADATA = 10, 47, 3
# SaslAuthenticate versions this client sends (v1+: the broker tells the session's lifetime)
KIO_SASL_AUTHENTICATE = (0, 2)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WIRE_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# librdkafka settings this client cannot honour: refused rather than ignored
_UNSUPPORTED_SSL = ("ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem", "ssl.keystore.location",
                    "ssl.ca.certificate.stores", "ssl.engine.location")
# Metadata from v4 (the first that can refuse to auto-create the topics asked about) to the
# newest kio reads.
KIO_METADATA = (4, 12)
_RETRY_BACKOFF_S = 0.2
# The request versions this client can build: FindCoordinator v0-v3 carry one key, v4+ a list.
KIO_FIND_COORDINATOR = (0, 6)
_RETRY = frozenset({
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
})
# Kafka's messages (Errors.java) for the errors OffsetDelete and DeleteRecords answer with.
_MESSAGES = {
    ErrorCode.offset_out_of_range:
        "The requested offset is not within the range of offsets maintained by the server.",
    ErrorCode.not_leader_or_follower: "For requests intended only for the leader, this error "
        "indicates that the broker is not the current leader. For requests intended for any "
        "replica, this error indicates that the broker is not a replica of the topic partition.",
    ErrorCode.group_id_not_found: "The group id does not exist.",
    ErrorCode.non_empty_group: "The group is not empty.",
    ErrorCode.invalid_group_id: "The configured groupId is invalid.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_subscribed_to_topic: "The consumer group is actively subscribed to the topic",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.coordinator_load_in_progress:
        "The coordinator is loading and hence can't process requests.",
}


def kafka_message(code: int) -> str | None:
    """Kafka's message for an error code, where this table has it."""
    try:
        return _MESSAGES.get(ErrorCode(code))
    except ValueError:
        return None


def error_text(code: int) -> str:
    """``NAME: Kafka's message`` for an error code."""
    return f"{kafka_name(code)}: {kafka_message(code) or ''}".rstrip(": ")


# Kafka's exception classes where the name is not the error's in camel case + "Exception"
_EXCEPTIONS = {ErrorCode.kafka_storage_error: "KafkaStorageException",
               ErrorCode.unknown_server_error: "UnknownServerException"}


def exception_class(code: int) -> str | None:
    """The class name of Kafka's exception for an error code (what LogDirsCommand and
    DeleteRecordsCommand print); None for no error."""
    if code == ErrorCode.none:
        return None
    try:
        name = _EXCEPTIONS.get(ErrorCode(code))
    except ValueError:
        name = None
    if name is None:
        camel = "".join(word.capitalize() for word in kafka_name(code).split("_"))
        name = f"{camel.removesuffix('Error')}Exception"
    return f"org.apache.kafka.common.errors.{name}"


class AuthenticationFailed(ToolError):
    """The broker refused the credentials (or the TLS handshake failed): no other broker
    would take them either, so this is not retried elsewhere."""


@dataclasses.dataclass(frozen=True)
class WireSecurity:
    """How ``Wire`` reaches a listener: its security protocol, the TLS context (SSL,
    SASL_SSL) and the SASL login (SASL_PLAINTEXT, SASL_SSL)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslClientSettings | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str], tool: str) -> WireSecurity:
        """From a ``--command-config`` (librdkafka's names); a one-line ToolError for a
        setting this client cannot honour."""
        given = props.get("security.protocol", "PLAINTEXT").strip()
        protocol = given.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ToolError(f"{tool}: unsupported security.protocol={given} "
                            f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        context = _ssl_context(props, tool) if protocol.endswith("SSL") else None
        sasl = _sasl_settings(props, tool) if protocol.startswith("SASL_") else None
        return cls(protocol, context, sasl)


def _ssl_context(props: Mapping[str, str], tool: str) -> ssl.SSLContext:
    for key in _UNSUPPORTED_SSL:
        if props.get(key, "").strip():
            raise ToolError(f"{tool}: {key} is not supported (use ssl.ca.location, "
                            "ssl.certificate.location and ssl.key.location: PEM files)")
    ca = props.get("ssl.ca.location", "").strip()
    try:
        context = ssl.create_default_context(cafile=ca or None)
        cert = props.get("ssl.certificate.location", "").strip()
        key = props.get("ssl.key.location", "").strip()
        if bool(cert) != bool(key):
            raise ToolError(f"{tool}: ssl.certificate.location and ssl.key.location go "
                            "together (a client certificate and its private key)")
        if cert:
            context.load_cert_chain(cert, key, props.get("ssl.key.password") or None)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ToolError(f"{tool}: cannot load the TLS files: "
                        f"{getattr(exc, 'strerror', None) or exc}") from exc
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise ToolError(f"{tool}: ssl.endpoint.identification.algorithm takes https or none, "
                        f"got {algorithm!r}")
    context.check_hostname = algorithm == "https"
    verify = props.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise ToolError(f"{tool}: enable.ssl.certificate.verification takes true or false, "
                        f"got {verify!r}")
    if verify == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _sasl_settings(props: Mapping[str, str], tool: str) -> SaslClientSettings:
    # librdkafka's default mechanism is GSSAPI; "sasl.mechanisms" is its older alias
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms")
                 or "GSSAPI").strip().upper()
    if mechanism not in WIRE_MECHANISMS:
        raise ToolError(f"{tool}: sasl.mechanism={mechanism} is not supported "
                        f"(one of {', '.join(WIRE_MECHANISMS)})")
    user, password = props.get("sasl.username"), props.get("sasl.password")
    if not user or password is None:
        raise ToolError(f"{tool}: {mechanism} needs sasl.username and sasl.password")
    return SaslClientSettings(mechanism, user, password)


class Wire:
    """A blocking connection for the requests confluent-kafka lacks: plain TCP, or TLS
    and/or SASL as ``security`` says."""

    def __init__(self, host: str, port: int, deadline: float, client_id: str = CLIENT_ID,
                 security: WireSecurity | None = None) -> None:
        self.address = f"{host}:{port}"
        self.deadline = deadline
        self.codec = ClientCodec(client_id)
        self.security = security or WireSecurity()
        self._reauthenticate_at: float | None = None  # time.monotonic()
        try:
            self.sock = socket.create_connection(
                (host, port), timeout=min(CONNECT_TIMEOUT_S, self._remaining())
            )
        except OSError as exc:
            raise ToolError(f"cannot connect to {self.address}: {exc.strerror or exc}") from exc
        try:
            if self.security.ssl_context is not None:
                self._wrap(self.security.ssl_context, host)
            response = self.request(*api_versions_request())
            if response.error_code != ErrorCode.none:
                raise ToolError(
                    f"ApiVersions to {self.address}: {error_text(response.error_code)}"
                )
            self.versions = version_ranges(response)
            if self.security.sasl is not None:
                self._authenticate(self.security.sasl)
        except ToolError:
            self.sock.close()
            raise

    def _wrap(self, context: ssl.SSLContext, host: str) -> None:
        """The TLS handshake, within the deadline."""
        try:
            self.sock.settimeout(min(CONNECT_TIMEOUT_S, self._remaining()))
            self.sock = context.wrap_socket(self.sock, server_hostname=host)
        except TimeoutError as exc:
            raise ToolError(f"REQUEST_TIMED_OUT: no TLS handshake with {self.address} in time"
                            ) from exc
        except ssl.SSLCertVerificationError as exc:
            raise AuthenticationFailed(f"TLS handshake with {self.address} failed: "
                                       f"{exc.verify_message or exc.reason}") from exc
        except ssl.SSLError as exc:
            raise AuthenticationFailed(f"TLS handshake with {self.address} failed: "
                                       f"{exc.reason or exc}") from exc
        except OSError as exc:
            raise ToolError(f"TLS handshake with {self.address} failed: "
                            f"{exc.strerror or exc}") from exc

    def _authenticate(self, settings: SaslClientSettings) -> None:
        """SaslHandshake v1 then SaslAuthenticate (``protocol.client.sasl_exchange``)."""
        self.version(SASL_HANDSHAKE, 1, 1, "SaslHandshake v1")
        version = self.version(SASL_AUTHENTICATE, *KIO_SASL_AUTHENTICATE, "SaslAuthenticate")
        exchange = sasl_exchange(settings, self.address, version)
        try:
            request = next(exchange)
            while True:
                request = exchange.send(self._exchange(*request))
        except StopIteration as done:
            lifetime_ms: int = done.value
        except SaslExchangeFailed as exc:
            raise AuthenticationFailed(str(exc)) from None
        self._reauthenticate_at = (time.monotonic() + lifetime_ms * REAUTHENTICATE_AT / 1000
                                   if lifetime_ms > 0 else None)

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _remaining(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise ToolError(f"REQUEST_TIMED_OUT: no answer from {self.address} in time")
        return remaining

    def version(self, api_key: int, lowest: int, highest: int, name: str) -> int:
        """The highest version both sides speak; a one-line error when there is none."""
        chosen = choose_version(self.versions, api_key, lowest, highest)
        if chosen is None:
            raise ToolError(
                f"UNSUPPORTED_VERSION: the broker at {self.address} does not support {name}"
            )
        return chosen

    def request(
        self, api_key: int, version: int, body: Any, response_schema: type | None = None
    ) -> Any:
        """Send ``body``, read the answer (as ``response_schema`` when given: a variant of
        kio's schema, e.g. for fields kio cannot read as Kafka writes them). Authenticates
        again first when the SASL session nears its end."""
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            assert self.security.sasl is not None
            self._authenticate(self.security.sasl)
        return self._exchange(api_key, version, body, response_schema)

    def _exchange(
        self, api_key: int, version: int, body: Any, response_schema: type | None = None
    ) -> Any:
        frame, sent = self.codec.encode(api_key, version, body, response_schema)
        try:
            self.sock.settimeout(self._remaining())
            self.sock.sendall(frame)
            answer = self._read(self.codec.frame_size(self._read(SIZE.size)))
            return self.codec.decode(sent, answer)
        except ResponseError as exc:
            raise ToolError(f"{self.address}: {exc}") from exc
        except TimeoutError as exc:  # before OSError, of which it is a subclass
            raise ToolError(f"REQUEST_TIMED_OUT: no answer from {self.address} in time") from exc
        except OSError as exc:
            raise ToolError(
                f"no answer from {self.address}: {getattr(exc, 'strerror', None) or exc}"
            ) from exc

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            self.sock.settimeout(self._remaining())
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ToolError(f"{self.address} closed the connection")
            data += chunk
        return bytes(data)

    def find_coordinator(self, group_id: str) -> tuple[int, str, int]:
        """(error code, host, port) of the group's coordinator."""
        version = self.version(FIND_COORDINATOR, *KIO_FIND_COORDINATOR, "FindCoordinator")
        schema = load_request_schema(FIND_COORDINATOR, version)
        if version >= 4:
            response = self.request(
                FIND_COORDINATOR, version, schema(key_type=0, coordinator_keys=(group_id,))
            )
            if not response.coordinators:
                return ErrorCode.coordinator_not_available, "", 0
            found = response.coordinators[0]
        elif version >= 1:
            found = self.request(FIND_COORDINATOR, version, schema(key=group_id, key_type=0))
        else:
            found = self.request(FIND_COORDINATOR, version, schema(key=group_id))
        return found.error_code, found.host, found.port


def offset_delete(
    bootstrap: str, group_id: str, partitions: Sequence[TP], timeout: float,
    security: WireSecurity | None = None,
) -> tuple[int, dict[TP, int]]:
    """OffsetDelete at the group's coordinator: (top-level error code, error code per partition).

    Retries (until the timeout) while the coordinator is unknown, moving or loading."""
    deadline = time.monotonic() + timeout
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequest(group_id=group_id, topics=tuple(
        OffsetDeleteRequestTopic(name=topic, partitions=tuple(
            OffsetDeleteRequestPartition(partition_index=p) for p in sorted(ps)
        ))
        for topic, ps in sorted(topics.items())
    ))
    last_error: int = ErrorCode.coordinator_not_available
    problems: list[str] = []
    while True:
        for host, port in parse_bootstrap(bootstrap):
            try:
                code, by_partition = _offset_delete_once(host, port, request, deadline,
                                                         security)
            except ToolError as exc:
                if isinstance(exc, AuthenticationFailed) or exc.message.startswith(
                        ("UNSUPPORTED_VERSION", "REQUEST_TIMED_OUT")):
                    raise
                problems.append(exc.message)
                continue
            if code not in _RETRY:
                return code, by_partition
            last_error = code
        if time.monotonic() + _RETRY_BACKOFF_S >= deadline:
            break
        time.sleep(_RETRY_BACKOFF_S)
    if problems:
        raise ToolError(problems[-1])
    raise ToolError(f"{error_text(last_error)} (group '{group_id}', after {timeout:g} s)")


def _offset_delete_once(
    host: str, port: int, request: OffsetDeleteRequest, deadline: float,
    security: WireSecurity | None,
) -> tuple[int, dict[TP, int]]:
    """FindCoordinator through (host, port), then OffsetDelete at the coordinator."""
    with Wire(host, port, deadline, security=security) as wire:
        code, coordinator_host, coordinator_port = wire.find_coordinator(request.group_id)
        if code != ErrorCode.none:
            return code, {}
        if (coordinator_host, coordinator_port) == (host, port):
            response = _send_offset_delete(wire, request)
        else:
            with Wire(coordinator_host, coordinator_port, deadline,
                      security=security) as coordinator:
                response = _send_offset_delete(coordinator, request)
    return response.error_code, {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def _send_offset_delete(wire: Wire, request: OffsetDeleteRequest) -> Any:
    version = wire.version(OFFSET_DELETE, 0, 0, "OffsetDelete")
    return wire.request(OFFSET_DELETE, version, request)


# --- a pool of connections -------------------------------------------------------------------


def build_entity(schema: type, **values: Any) -> Any:
    """An entity of ``schema`` from the values its version has (the others are dropped)."""
    names = {f.name for f in dataclasses.fields(schema)}
    return schema(**{k: v for k, v in values.items() if k in names})


@dataclasses.dataclass(frozen=True, order=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class WirePool:
    """Connections to the cluster's brokers, all bounded by one deadline."""

    def __init__(self, bootstrap: str, timeout: float, client_id: str = CLIENT_ID,
                 security: WireSecurity | None = None) -> None:
        self.addresses = parse_bootstrap(bootstrap)
        self.deadline = time.monotonic() + timeout
        self.client_id = client_id
        self.security = security
        self._wires: dict[tuple[str, int], Wire] = {}

    def __enter__(self) -> WirePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for wire in self._wires.values():
            wire.sock.close()
        self._wires.clear()

    def connect(self, host: str, port: int) -> Wire:
        wire = self._wires.get((host, port))
        if wire is None:
            wire = self._wires[(host, port)] = Wire(host, port, self.deadline, self.client_id,
                                                    self.security)
        return wire

    def node(self, node: Node) -> Wire:
        return self.connect(node.host, node.port)

    def forget(self, wire: Wire) -> None:
        """Drop a connection (after an error that calls for a fresh look at the cluster)."""
        for key, known in list(self._wires.items()):
            if known is wire:
                wire.sock.close()
                del self._wires[key]

    def bootstrap(self) -> Wire:
        """A connection to the first bootstrap server that answers."""
        problems = []
        for host, port in self.addresses:
            try:
                return self.connect(host, port)
            except AuthenticationFailed:
                raise
            except ToolError as exc:
                problems.append(exc.message.removeprefix("cannot connect to "))
        raise ToolError(f"cannot connect to any bootstrap server: {'; '.join(problems)}")

    def expired(self) -> bool:
        """Whether the deadline leaves no time for another try."""
        return time.monotonic() + _RETRY_BACKOFF_S >= self.deadline

    def pause(self) -> bool:
        """Sleep before a retry; False when the deadline leaves no time for one."""
        if self.expired():
            return False
        time.sleep(_RETRY_BACKOFF_S)
        return True

    def metadata(self, topics: Sequence[str] | None) -> Any:
        """A Metadata response for these topics (None: all; empty: only the brokers); never
        creates a topic."""
        wire = self.bootstrap()
        try:
            version = wire.version(METADATA, *KIO_METADATA, "Metadata")
            module = importlib.import_module(f"kio.schema.metadata.v{version}.request")
            request = build_entity(
                module.MetadataRequest,
                topics=None if topics is None else tuple(
                    build_entity(module.MetadataRequestTopic, name=t, topic_id=None)
                    for t in topics),
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
            return wire.request(METADATA, version, request)
        except ToolError:
            self.forget(wire)
            raise

    def brokers(self, metadata: Any | None = None) -> list[Node]:
        """The brokers (from ``metadata``, else from a new Metadata request), by id."""
        response = self.metadata(()) if metadata is None else metadata
        return sorted(Node(b.node_id, b.host, b.port, getattr(b, "rack", None))
                      for b in response.brokers)
