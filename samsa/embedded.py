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
certificates. (SASL users will come as ``security_protocol="SASL_SSL", users=...``.)

    with samsa.Broker(security_protocol="SSL", ssl_client_auth="required") as broker:
        producer = Producer(broker.client_config())
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

from samsa.server.kafka_server import KafkaServer
from samsa.storage.log_cleaner import CleanerMetrics

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # samsa.security.ca (cryptography) is imported only for a TLS broker
    from samsa.security.ca import CertificateAuthority

_START_TIMEOUT = 60
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL")


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
        **overrides: Any,
    ) -> None:
        if security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}"
                             f" (SASL is not supported yet), got {security_protocol!r}")
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
        if security_protocol == "SSL":
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

    def bootstrap_for(self, listener: str) -> str:
        """host:port of one listener (by name: PLAINTEXT, SSL, INTERNAL, ...)."""
        return self.server.bootstrap_for(listener)

    def client_config(self, listener: str | None = None, client_certificate: bool | None = None,
                      **extra: Any) -> dict[str, Any]:
        """A confluent-kafka (librdkafka) client's settings for ``listener`` (default: the
        first one): the bootstrap servers and, on an SSL listener, ``security.protocol``, the
        CA and (``client_certificate``; by default where the listener's ``ssl.client.auth``
        asks for one) the client certificate. ``extra``: more settings, Kafka's names."""
        name = (listener or self.server.listeners[0].listener_name).upper()
        found: dict[str, Any] = {"bootstrap.servers": self.bootstrap_for(name)}
        if self.server.listener_config.protocols.get(name) == "SSL":
            if self.tls is None:
                raise ValueError("this broker has no throwaway CA: start it with "
                                 "security_protocol='SSL'")
            found.update({"security.protocol": "SSL", "ssl.ca.location": str(self.tls.ca_file)})
            if client_certificate is None:
                client_certificate = self.server.config.listener_get(
                    name, "ssl.client.auth") != "none"
            if client_certificate:
                found.update({"ssl.certificate.location": str(self.tls.client_cert_file),
                              "ssl.key.location": str(self.tls.client_key_file)})
        found.update(extra)
        return found

    def cleaner_metrics(self) -> CleanerMetrics | None:
        """The log cleaner's counters (None with ``log.cleaner.enable=false``)."""
        cleaner = self.server.cleaner
        return None if cleaner is None else cleaner.metrics

    # --- async use ------------------------------------------------------------------------

    async def __aenter__(self) -> Broker:
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
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

    def stop(self) -> None:
        """Graceful shutdown (flush, checkpoints, clean-shutdown marker)."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_START_TIMEOUT)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._temp:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.tls is not None:
            shutil.rmtree(self.tls.directory, ignore_errors=True)
