"""``SchemaRegistry``: one registry instance, its store, its place in the primary election and
its HTTP listener (uvicorn on a thread of its own).

Its settings are Confluent Schema Registry's keys:

- ``listeners`` (default ``http://0.0.0.0:8081``; port 0: a free port),
- ``kafkastore.bootstrap.servers`` (required; ``PLAINTEXT://`` prefixes allowed),
- ``kafkastore.topic`` (default ``_schemas``),
- ``schema.compatibility.level`` (default ``backward``),
- ``host.name`` (the host of the URL other instances forward writes to; default: the
  listener's host, or the machine's name for a wildcard listener),
- ``schema.registry.group.id`` (default ``schema-registry``),
- ``leader.eligibility`` (default true; false: this instance never becomes the primary),
- ``kafkastore.timeout.ms`` (default 30000: how long a write waits to be read back),
- any other ``kafkastore.*`` key: a setting of the registry's Kafka clients, the prefix
  removed (``kafkastore.security.protocol``, ``kafkastore.ssl.ca.location``,
  ``kafkastore.sasl.mechanism``, ...).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import uvicorn

from samsa.config import parse_http_listener
from samsa.registry.app import RegistryApp
from samsa.registry.compatibility import DEFAULT_LEVEL, LEVELS
from samsa.registry.election import PrimaryElection
from samsa.registry.service import Registry
from samsa.registry.store import KafkaStore

log = logging.getLogger(__name__)

DEFAULT_LISTENER = "http://0.0.0.0:8081"
DEFAULT_TOPIC = "_schemas"
DEFAULT_GROUP = "schema-registry"
KNOWN_KEYS = ("listeners", "kafkastore.bootstrap.servers", "kafkastore.topic",
              "schema.compatibility.level", "host.name", "schema.registry.group.id",
              "leader.eligibility", "kafkastore.timeout.ms")
_START_TIMEOUT_S = 30.0


class RegistryConfigError(ValueError):
    """A registry setting that cannot be used (one line, for the command line)."""


def _bootstrap(value: str) -> str:
    servers = []
    for item in value.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RegistryConfigError(
                f"kafkastore.bootstrap.servers takes host:port[,host:port...], got {value!r}")
        servers.append(item)
    return ",".join(servers)


class SchemaRegistry:
    def __init__(self, config: Mapping[str, Any]) -> None:
        props = {k: str(v) for k, v in config.items()}
        bootstrap = props.get("kafkastore.bootstrap.servers", "").strip()
        if not bootstrap:
            raise RegistryConfigError("kafkastore.bootstrap.servers is required")
        self.bootstrap = _bootstrap(bootstrap)
        listener = props.get("listeners", DEFAULT_LISTENER).split(",")[0].strip()
        address = parse_http_listener(listener)
        if address is None:
            raise RegistryConfigError(f"listeners takes http://HOST:PORT, got {listener!r}")
        self.listen_host, self.listen_port = address[0] or "0.0.0.0", address[1]
        self.topic = props.get("kafkastore.topic", DEFAULT_TOPIC).strip()
        if not self.topic:
            raise RegistryConfigError("kafkastore.topic must not be empty")
        level = props.get("schema.compatibility.level", DEFAULT_LEVEL).strip().upper()
        if level not in LEVELS:
            raise RegistryConfigError(f"schema.compatibility.level takes one of "
                                      f"{', '.join(LEVELS).lower()}, got {level.lower()!r}")
        self.default_level = level
        self.host_name = props.get("host.name", "").strip() or None
        self.group_id = props.get("schema.registry.group.id", DEFAULT_GROUP).strip()
        eligible = props.get("leader.eligibility", "true").strip().lower()
        if eligible not in ("true", "false"):
            raise RegistryConfigError(f"leader.eligibility takes true or false, got {eligible!r}")
        self.eligible = eligible == "true"
        try:
            self.timeout_s = int(props.get("kafkastore.timeout.ms", "30000")) / 1000
        except ValueError:
            raise RegistryConfigError("kafkastore.timeout.ms takes a number of ms") from None
        self.client_extra = {
            k.removeprefix("kafkastore."): v for k, v in props.items()
            if k.startswith("kafkastore.") and k not in KNOWN_KEYS}
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.store: KafkaStore | None = None
        self.election: PrimaryElection | None = None
        self.port = self.listen_port

    @property
    def url(self) -> str:
        """Where this instance is reached: what other instances forward writes to."""
        host = self.host_name or self.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def is_primary(self) -> bool:
        return self.election is not None and self.election.is_primary

    def start(self) -> None:
        """Bind the listener, read the schemas topic, join the election, serve."""
        family = socket.AF_INET6 if ":" in self.listen_host else socket.AF_INET
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
        # without it each answer waits ~40 ms for the client's delayed ACK (Nagle)
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.listen_host, self.listen_port))
        except OSError as exc:
            sock.close()
            raise RegistryConfigError(f"cannot listen on {self.listen_host}:"
                                      f"{self.listen_port}: {exc.strerror or exc}") from exc
        sock.listen(128)
        self._socket = sock
        self.port = sock.getsockname()[1]
        try:
            self.store = KafkaStore(self.bootstrap, self.topic, f"schema-registry-{self.port}",
                                    self.client_extra, timeout_s=self.timeout_s)
            self.store.start()
            registry = Registry(self.store, self.default_level)
            self.election = PrimaryElection(self.bootstrap, self.topic, self.group_id,
                                            self.url, self.client_extra,
                                            eligible=self.eligible)
            self.election.start()
            if self.eligible and self.election.wait_for_primary(_START_TIMEOUT_S) is None:
                log.warning("no primary schema registry elected within %.0f s",
                            _START_TIMEOUT_S)
            app = RegistryApp(registry, self.election)
            self._serve(app)
        except BaseException:
            self.stop()
            raise

    def _serve(self, app: RegistryApp) -> None:
        config = uvicorn.Config(app.app, log_level="warning", access_log=False,
                                lifespan="off", timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        server, sock = self._server, self._socket
        assert sock is not None
        self._thread = threading.Thread(target=lambda: server.run(sockets=[sock]),
                                        name=f"schema-registry-http-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the schema registry's HTTP listener did not start on "
                                   f"port {self.port}")
            time.sleep(0.01)

    def wait_for_primary(self, timeout_s: float = _START_TIMEOUT_S) -> str | None:
        """The primary's URL once the group has one (None after ``timeout_s``)."""
        if self.election is None:
            return None
        return self.election.wait_for_primary(timeout_s)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self.election is not None:
            self.election.stop()
        if self.store is not None:
            self.store.stop()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> SchemaRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
