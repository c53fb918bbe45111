"""``samsa.Broker``: a broker inside your Python process, for development and tests.

    with samsa.Broker(tmp_path) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    async with samsa.Broker(tmp_path, num_partitions=3) as broker: ...

Keyword arguments are broker config keys with dots written as underscores
(``log_segment_bytes=1048576``); ``config={"log.segment.bytes": ...}`` takes Kafka's names as
they are. By default the broker listens on a free loopback port and, as Kafka's test
harnesses do, sets ``group.initial.rebalance.delay.ms=0``. Used synchronously, it runs its
event loop in a background thread.

``security_protocol="SSL"`` starts it with one TLS listener instead, on a throwaway CA
(``samsa.security.ca``) and a broker certificate for 127.0.0.1, localhost and ::1, all in a
temporary directory removed at the end; ``ssl_client_auth="required"`` (Kafka's
``ssl.client.auth``) makes clients show a certificate of that CA. ``client_config()`` is what
a confluent-kafka client needs (``ssl.ca.location``, and a client certificate, CN=client,
where the broker asks for one); ``tls`` has the files and the CA, to issue other client
certificates.

``security_protocol="SASL_SSL"`` (or ``"SASL_PLAINTEXT"``) starts it with one SASL listener
(on the same throwaway CA for SASL_SSL) offering PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and
creates ``users`` (name -> password; by default one user, ``admin``, with a random password)
for all three: PLAIN's in the listener's JAAS config, SCRAM's credentials in the broker's
store, before the broker serves. ``sasl_mechanism`` is the one ``client_config()`` logs in with
(``OAUTHBEARER`` also enables Kafka's unsecured OAUTHBEARER validator, which trusts any
well-formed token: development only). ``client_config(user=...)`` logs in as another user.

    with samsa.Broker(security_protocol="SASL_SSL", users={"alice": "alice-secret"},
                      sasl_mechanism="SCRAM-SHA-256") as broker:
        producer = Producer(broker.client_config())

``schema_registry=True`` starts a schema registry beside the broker (``samsa.registry``: its
state in the broker's ``_schemas`` topic), on a free loopback port, stopped with the broker:

    with samsa.Broker(schema_registry=True) as broker:
        client = SchemaRegistryClient({"url": broker.schema_registry_url})
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.config import parse_http_listener
from samsa.server.kafka_server import KafkaServer
from samsa.storage.log_cleaner import CleanerMetrics

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # samsa.security.ca (cryptography) is imported only for a TLS broker
    from samsa.registry import SchemaRegistry  # and the registry only where one is started
    from samsa.security.ca import CertificateAuthority

_START_TIMEOUT = 60
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True)
class TlsFiles:
    """An SSL embedded broker's throwaway CA and files (PEM)."""

    directory: Path
    ca: CertificateAuthority
    ca_file: Path  # the CA certificate: the clients' trust store (ssl.ca.location)
    keystore_file: Path  # the broker's key and certificate chain
    client_cert_file: Path  # a client certificate of the CA (CN=client) and its key
    client_key_file: Path

    def issue_client(self, subject: str, name: str | None = None, **validity: Any
                     ) -> tuple[Path, Path]:
        """Another client certificate of this CA (``subject``: e.g. ``CN=alice,O=Example``;
        ``not_before`` / ``not_after`` as ``CertificateAuthority.issue``): (cert, key) files."""
        issued = self.ca.issue(subject, **validity)
        return issued.write(self.directory, name or f"client-{secrets.token_hex(4)}")


def _make_tls() -> TlsFiles:
    from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority

    directory = Path(tempfile.mkdtemp(prefix="samsa-tls-"))
    ca = CertificateAuthority()
    keystore = ca.issue("CN=localhost", hosts=LOCAL_HOSTS).write_keystore(
        directory / "broker-keystore.pem")
    cert, key = ca.issue("CN=client").write(directory, "client")
    return TlsFiles(directory, ca, ca.write(directory / "ca.pem"), keystore, cert, key)


class Broker:
    def __init__(
        self,
        data_dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        security_protocol: str = "PLAINTEXT",
        users: Mapping[str, str] | None = None,
        sasl_mechanism: str = "SCRAM-SHA-256",
        schema_registry: bool = False,
        **overrides: Any,
    ) -> None:
        if security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}"
                             f", got {security_protocol!r}")
        if sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, "
                             f"got {sasl_mechanism!r}")
        sasl = security_protocol.startswith("SASL_")
        if users is not None and not sasl:
            raise ValueError("users= needs security_protocol='SASL_SSL' or 'SASL_PLAINTEXT'")
        # SASL users: name -> password (PLAIN and SCRAM)
        self.users: dict[str, str] = (
            dict(users) if users is not None else {"admin": secrets.token_urlsafe(12)}
        ) if sasl else {}
        self.sasl_mechanism = sasl_mechanism
        self._temp = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="samsa-")) if data_dir is None else Path(
            data_dir
        )
        self.security_protocol = security_protocol
        props: dict[str, Any] = {
            "log.dirs": str(self.data_dir),
            "listeners": f"{security_protocol}://127.0.0.1:0",
            # As Kafka's own test harnesses do: a test's first consumer should not wait 3 s.
            "group.initial.rebalance.delay.ms": 0,
        }
        self.tls: TlsFiles | None = None
        if sasl:
            from samsa.security.sasl.jaas import jaas_config

            mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
            if sasl_mechanism == "OAUTHBEARER":
                mechanisms.append("OAUTHBEARER")
            props.update({
                "sasl.enabled.mechanisms": ",".join(mechanisms),
                f"listener.name.{security_protocol.lower()}.plain.sasl.jaas.config": jaas_config(
                    _PLAIN_LOGIN_MODULE, {f"user_{u}": p for u, p in self.users.items()}),
            })
        if security_protocol in ("SSL", "SASL_SSL"):
            self.tls = _make_tls()
            props.update({
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.tls.keystore_file),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls.ca_file),
            })
        props.update(config or {})
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        try:
            self.server = KafkaServer(props)
        except BaseException:
            self._cleanup()
            raise
        # every log directory failed: a broker process halts, an embedded one stops serving
        self.server.halt = self._halt
        self.halted: str | None = None
        self._with_registry = schema_registry
        self.schema_registry: SchemaRegistry | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _halt(self, message: str) -> None:
        log.critical("%s", message)
        self.halted = message
        self._stopping = asyncio.get_running_loop().create_task(self.server.stop())

    @property
    def bootstrap_servers(self) -> str:
        return self.server.bootstrap_servers

    @property
    def port(self) -> int:
        return self.server.bound[0].port

    @property
    def metrics_url(self) -> str | None:
        """Where the metrics are served (``prometheus.listener``), None when they are off."""
        endpoint = self.server.prometheus
        if endpoint is None:
            return None
        host = parse_http_listener(self.server.config.get("prometheus.listener"))
        assert host is not None
        return f"http://{host[0] or '127.0.0.1'}:{endpoint.port}/metrics"

    @property
    def schema_registry_url(self) -> str:
        """The URL of the schema registry started with ``schema_registry=True``."""
        if self.schema_registry is None:
            raise ValueError("this broker has no schema registry: start it with "
                             "schema_registry=True")
        return self.schema_registry.url

    def _start_registry(self) -> None:
        if not self._with_registry:
            return
        from samsa.registry import SchemaRegistry

        settings = {f"kafkastore.{k}": v for k, v in self.client_config().items()}
        settings["listeners"] = "http://127.0.0.1:0"
        registry = SchemaRegistry(settings)
        registry.start()
        self.schema_registry = registry

    def _stop_registry(self) -> None:
        if self.schema_registry is not None:
            self.schema_registry.stop()
            self.schema_registry = None

    def bootstrap_for(self, listener: str) -> str:
        """host:port of one listener (by name: PLAINTEXT, SSL, INTERNAL, ...)."""
        return self.server.bootstrap_for(listener)

    def client_config(self, listener: str | None = None, client_certificate: bool | None = None,
                      user: str | None = None, sasl_mechanism: str | None = None,
                      **extra: Any) -> dict[str, Any]:
        """A confluent-kafka (librdkafka) client's settings for ``listener`` (default: the
        first one): the bootstrap servers, ``security.protocol``, on an SSL or SASL_SSL
        listener the CA and (``client_certificate``; by default where the listener's
        ``ssl.client.auth`` asks for one) the client certificate, on a SASL listener
        ``sasl.mechanism`` (``sasl_mechanism``, by default the broker's) and the credentials
        of ``user`` (default: the first of ``users``). ``extra``: more settings, Kafka's
        names."""
        name = (listener or self.server.listeners[0].listener_name).upper()
        protocol = self.server.listener_config.protocols.get(name, "PLAINTEXT")
        found: dict[str, Any] = {"bootstrap.servers": self.bootstrap_for(name)}
        if protocol != "PLAINTEXT":
            found["security.protocol"] = protocol
        if protocol.startswith("SASL_"):
            found.update(self._sasl_client_config(name, user, sasl_mechanism))
        if protocol in ("SSL", "SASL_SSL"):
            if self.tls is None:
                raise ValueError("this broker has no throwaway CA: start it with "
                                 "security_protocol='SSL' or 'SASL_SSL'")
            found["ssl.ca.location"] = str(self.tls.ca_file)
            if client_certificate is None:
                client_certificate = self.server.config.listener_get(
                    name, "ssl.client.auth") != "none"
            if client_certificate:
                found.update({"ssl.certificate.location": str(self.tls.client_cert_file),
                              "ssl.key.location": str(self.tls.client_key_file)})
        found.update(extra)
        return found

    def _sasl_client_config(self, listener: str, user: str | None,
                            mechanism: str | None) -> dict[str, Any]:
        security = self.server.security[listener]
        enabled = security.sasl.mechanisms if security.sasl is not None else ()
        if mechanism is None:
            mechanism = self.sasl_mechanism if self.sasl_mechanism in enabled else enabled[0]
        if user is None:
            if not self.users:
                raise ValueError("this broker has no SASL users: start it with users={...}")
            user = next(iter(self.users))
        if mechanism == "OAUTHBEARER":  # librdkafka's unsecured JWT, for the unsecured validator
            return {"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": True,
                    "sasl.oauthbearer.config": f"principal={user}"}
        if user not in self.users:
            raise KeyError(f"no SASL user {user!r} (users: {', '.join(self.users)})")
        return {"sasl.mechanism": mechanism, "sasl.username": user,
                "sasl.password": self.users[user]}

    async def _create_users(self) -> None:
        """The SCRAM credentials of ``users`` (PLAIN's are in the listener's JAAS config)."""
        store = self.server.scram_store
        if self.users and store is not None:
            await store.set_passwords(self.users)

    def cleaner_metrics(self) -> CleanerMetrics | None:
        """The log cleaner's counters (None with ``log.cleaner.enable=false``)."""
        cleaner = self.server.cleaner
        return None if cleaner is None else cleaner.metrics

    # --- async use ------------------------------------------------------------------------

    async def __aenter__(self) -> Broker:
        await self.server.start()
        try:
            await self._create_users()
            await asyncio.to_thread(self._start_registry)
        except BaseException:
            await self.server.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._stop_registry)
        await self.server.stop()
        self._cleanup()

    # --- sync use -------------------------------------------------------------------------

    def __enter__(self) -> Broker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the broker on its own event loop thread; returns once it serves requests."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            try:
                loop.run_until_complete(self._create_users())
            except BaseException as exc:
                failure.append(exc)
                loop.run_until_complete(self.server.stop())
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="samsa-broker", daemon=True)
        self._thread.start()
        if not ready.wait(_START_TIMEOUT):
            raise TimeoutError("samsa broker did not start within 60 s")
        if failure:
            raise failure[0]
        try:
            self._start_registry()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Graceful shutdown (flush, checkpoints, clean-shutdown marker)."""
        self._stop_registry()
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_START_TIMEOUT)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._temp:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.tls is not None:
            shutil.rmtree(self.tls.directory, ignore_errors=True)
