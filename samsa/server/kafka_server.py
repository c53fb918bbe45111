"""The broker process: listeners, request dispatch, partitions, background work, shutdown.

``KafkaServer`` is asyncio-only; ``samsa.Broker`` (embedded.py) wraps it for synchronous code.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from samsa.cluster.acls import AclStore
from samsa.cluster.broker_configs import DynamicBrokerConfig, Reconfigurable
from samsa.cluster.client_quotas import ClientQuotaStore
from samsa.cluster.partition_writer import LogPartitionWriter
from samsa.cluster.producer_ids import ProducerIdManager
from samsa.cluster.replicas import Replicas
from samsa.cluster.replication_quota import RATE_KEYS
from samsa.cluster.scram import ScramCredentialStore
from samsa.cluster.topic_admin import TopicAdmin
from samsa.cluster.topics import TopicStore
from samsa.config import (
    BROKER_KEYS,
    DYNAMIC_MODES,
    DYNAMIC_SECURITY_KEYS,
    LISTENER_PREFIX,
    BrokerConfig,
    ConfigError,
    parse_http_listener,
)
from samsa.coordinator.group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from samsa.coordinator.txn_coordinator import TXN_STATE_TOPIC, TransactionCoordinator
from samsa.durable import write_atomically
from samsa.errors import CloseConnection, ErrorCode, KafkaStorageError
from samsa.handlers import load_handlers
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import APIS
from samsa.metrics import BrokerMetrics
from samsa.protocol import response_writer
from samsa.protocol.codec import (
    MalformedRequestError,
    Request,
    decode_request,
    peek_key_and_version,
)
from samsa.protocol.fast import FAST_RESPONSES, encode_fast
from samsa.security.authorizer import AclAuthorizer, authorizer_from_config
from samsa.security.channel import InterBrokerSecurity, ListenerSecurity
from samsa.security.listeners import EndPoint, ListenerConfig
from samsa.security.sasl.scram import ScramCredential
from samsa.security.ssl_factory import keystore_identity
from samsa.server.connection import Connection
from samsa.server.connection_limits import ConnectionLimits
from samsa.server.modes import Mode, SingleNode
from samsa.server.prometheus import BrokerCollector, PrometheusEndpoint
from samsa.server.quotas import ClientQuotas
from samsa.server.sasl import SaslServerAuthenticator
from samsa.storage.log_cleaner import LogCleaner
from samsa.storage.manager import LogManager
from samsa.zk.controller import Controller
from samsa.zk.membership import ClusterMembership
from samsa.zk.replica_manager import ReplicaManager
from samsa.zk.support import ZkSupport

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
META_PROPERTIES = "meta.properties"
_TICK_SECONDS = 1.0

# The dynamic broker keys each part of the broker reads (Kafka's reconfigurables): the topic
# defaults (DynamicLogConfig), the cleaner's (LogCleaner.ReconfigurableConfigs, less
# message.max.bytes, which samsa's cleaner does not size buffers by), the thread counts (Kafka's
# thread pools and network threads: checked as Kafka checks them, no effect here), the
# connection quotas (SocketServer).
LOG_KEYS = frozenset(n for n in DYNAMIC_MODES if n in BROKER_KEYS and BROKER_KEYS[n].topic)
CLEANER_KEYS = frozenset({"log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                          "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms"})
THREAD_KEYS = frozenset({"num.io.threads", "num.network.threads",
                         "num.recovery.threads.per.data.dir", "background.threads"})
CONNECTION_KEYS = frozenset({"max.connections.per.ip", "max.connections.per.ip.overrides",
                             "max.connections"})


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def set_buffer_sizes(sockets: Iterable[socket.socket], send: int, receive: int) -> None:
    """socket.send.buffer.bytes / socket.receive.buffer.bytes on listening sockets, which the
    connections they accept inherit (-1: the operating system's)."""
    for sock in sockets:
        if send != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send)
        if receive != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive)


def halt_process(message: str) -> NoReturn:
    """Kafka's Exit.halt(1) after a fatal log line: no clean shutdown, nothing more written."""
    log.critical("%s", message)
    logging.shutdown()  # the line reaches the log before the process goes
    os._exit(1)


class KafkaServer:
    def __init__(self, config: BrokerConfig | Mapping[str, Any] | None = None) -> None:
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig(config)
        cluster = bool(self.config.get("zookeeper.connect"))
        self.listener_config = ListenerConfig.from_config(self.config, cluster)
        self.listeners: list[EndPoint] = list(self.listener_config.listeners)
        # each listener's TLS context and principal rules, and this broker's client side to
        # the others: built here, so that a bad key store fails the start with one line
        self.security = {e.listener_name: ListenerSecurity.build(self.config, e)
                         for e in self.listeners}
        self.inter_broker = InterBrokerSecurity.build(self.config, self.listener_config,
                                                      self.security)
        # SCRAM credentials (the metadata dir or ZooKeeper), opened at start
        self.scram_store: ScramCredentialStore | None = None
        # client quotas: where they are kept (opened at start) and what enforces them
        self.quota_store: ClientQuotaStore | None = None
        self.quotas = ClientQuotas(self.config)
        load_handlers()
        # kept only when they are served (prometheus.listener): otherwise nothing is counted
        self.metrics: BrokerMetrics | None = (
            BrokerMetrics() if self.config.get("prometheus.listener") else None)
        self.prometheus: PrometheusEndpoint | None = None
        self.log_manager = LogManager(
            self.config, topic_config=lambda topic: self.replicas.topic_log_config(topic))
        self.replicas = Replicas(self.log_manager)
        if self.metrics is not None:
            self.log_manager.flush_timer = self.metrics.log_flush
            self.replicas.metrics = self.metrics
        self.replicas.on_leadership = self._leadership_changed
        self.log_manager.failures.listeners.append(self._log_dir_offline)
        # what a broker whose every log directory failed does (samsa.Broker stops instead)
        self.halt: Callable[[str], None] = halt_process
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failed_dirs: set[Path] = set()  # handled by _handle_log_dir_failure
        self.connections: set[Connection] = set()
        # a single node has no inter-broker traffic: max.connections covers every listener
        self.connection_limits = ConnectionLimits.from_config(
            self.config, self.inter_broker.listener_name if cluster else None)
        # dynamic broker configs: loaded at start, changed by AlterConfigs
        self.dynamic_config = DynamicBrokerConfig(self.config)
        self._register_reconfigurables()
        self.broker_id = self.config.get("broker.id")
        self.cluster_id = ""
        self.bound: list[EndPoint] = []
        self.producer_ids: ProducerIdManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.cleaner: LogCleaner | None = None
        # authorization (handlers/authz.py): None when authorizer.class.name is empty
        self.authorizer: AclAuthorizer | None = authorizer_from_config(self.config)
        self.acl_store: AclStore | None = None
        # the mode is decided here, once: nothing below asks which it is
        self.mode: Mode = (
            ZkSupport(self.config, self.replicas, self.inter_broker) if cluster
            else SingleNode(self.config, self.replicas, self._address))
        self.topic_admin: TopicAdmin = self.mode.topic_admin
        # Kafka's metadata.log.dir (by default the first of log.dirs): where a single node
        # keeps its topics and producer id blocks, as a KRaft node keeps its metadata log. A
        # broker whose metadata dir fails halts (KIP-858), whatever other dirs are good. In
        # cluster mode they live in ZooKeeper: the first dir is a log dir like the others.
        self.metadata_dir: Path | None = (self.log_manager.dirs[0] if self.mode.single_node
                                          else None)
        self.replicas.on_offline = self.mode.log_dir_failed
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task] = []
        self._flushing: set[tuple[str, int]] = set()
        self.started = False
        self._stopped: asyncio.Future[None] | None = None  # done when the stop under way is

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.mode.connect()
        try:
            await self._start()
        except BaseException:
            if self.prometheus is not None:
                await self.prometheus.stop()
            if self.acl_store is not None:
                await self.acl_store.stop()
            if self.scram_store is not None:
                await self.scram_store.stop()
            if self.quota_store is not None:
                await self.quota_store.stop()
            await self.dynamic_config.stop()
            await self.mode.stop()
            if self.cleaner is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.cleaner.shutdown)
            self.log_manager.abandon()  # the directory locks go; nothing more is written
            raise

    async def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        manager = self.log_manager
        failures = manager.failures
        # a directory that cannot be created, read or locked is offline from here on
        manager.open_dirs()
        await self._load_meta_properties()
        self._check_metadata_dir()
        # topics first: the logs open with their topic's config overrides
        first_dir = manager.dirs[0]
        self.replicas.start(self.broker_id, self._open_topic_store(first_dir))
        self.scram_store = self.mode.scram_store(first_dir, failures)
        await self.scram_store.start()
        self.quota_store = self.mode.quota_store(first_dir, failures)
        self.quota_store.listeners.append(self.quotas.update)
        await self.quota_store.start()
        # the dynamic configs before the logs open: they may change the topic defaults
        await self.dynamic_config.start(self.broker_id,
                                        self.mode.broker_config_store(first_dir, failures))
        self._check_metadata_dir()
        manager.load_logs()  # a directory whose logs fail to load goes offline
        blocks = self.mode.producer_id_blocks(self.broker_id)
        try:
            self.producer_ids = ProducerIdManager(first_dir, blocks, failures)
        except KafkaStorageError:
            pass  # the metadata dir failed: the check below says so
        self._check_metadata_dir()
        self.mode.open_replicas()
        self._start_cleaner(asyncio.get_running_loop())
        c = self.config
        self.group_coordinator = GroupCoordinator(c, LogPartitionWriter(
            self.replicas, self.topic_admin, OFFSETS_TOPIC,
            c.get("offsets.topic.num.partitions"), c.get("offsets.topic.segment.bytes"),
            c.get("offsets.topic.replication.factor"), single_node=self.mode.single_node,
        ), self.replicas.partition_exists, lambda: self.replicas.topics)
        self.group_coordinator.start()
        # after the groups: completing a half-ended transaction reaches their offsets
        self.txn_coordinator = TransactionCoordinator(self, LogPartitionWriter(
            self.replicas, self.topic_admin, TXN_STATE_TOPIC,
            c.get("transaction.state.log.num.partitions"),
            c.get("transaction.state.log.segment.bytes"),
            c.get("transaction.state.log.replication.factor"), single_node=self.mode.single_node,
            compression_type="uncompressed",  # Kafka's TransactionStateManager sets it so
        ))
        await self.txn_coordinator.start()
        if self.authorizer is not None:  # the ACLs, before any request is decided
            self.acl_store = self.mode.acl_store(self.authorizer)
            await self.acl_store.start()
        loop = asyncio.get_running_loop()
        max_request = self.config.get("socket.request.max.bytes")
        for listener in self.listeners:
            # the listener's security as it is when a connection comes (its TLS stores may
            # change: dynamic broker configs)
            server = await loop.create_server(
                lambda name=listener.listener_name: self._new_connection(
                    max_request, self.security[name]),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
            )
            set_buffer_sizes(server.sockets, self.config.get("socket.send.buffer.bytes"),
                             self.config.get("socket.receive.buffer.bytes"))
            port = server.sockets[0].getsockname()[1]
            self.bound.append(EndPoint(listener.listener_name, listener.security_protocol,
                                       listener.host, port))
            self._servers.append(server)
        await self.mode.join(self.broker_id, self.advertised)
        if self.metrics is not None:
            await self._serve_metrics()
        self._tasks.append(loop.create_task(self._background()))
        self.started = True
        for directory in self.log_manager.failures.offline_dirs:  # failed while starting
            self._handle_log_dir_failure(directory)
        log.info("samsa broker %d started on %s (cluster %s)", self.broker_id,
                 ", ".join(str(b) for b in self.bound), self.cluster_id)

    async def _serve_metrics(self) -> None:
        assert self.metrics is not None
        address = parse_http_listener(self.config.get("prometheus.listener"))
        assert address is not None  # the key's validator checked it
        self.prometheus = PrometheusEndpoint(BrokerCollector(self, self.metrics))
        await self.prometheus.start(*address)
        log.info("metrics at http://%s:%d/metrics", address[0] or "0.0.0.0",
                 self.prometheus.port)

    def _open_topic_store(self, directory: Path) -> TopicStore:
        """The topic store: a single node's topics, kept in its metadata dir (the store of
        record: its I/O errors are the metadata dir's failure); in cluster mode a cache of what
        ZooKeeper holds, kept in the first log dir while that is online."""
        cache = self.metadata_dir is None
        try:
            return TopicStore(directory, self.log_manager.failures, cache=cache)
        except KafkaStorageError:
            self._check_metadata_dir()
            raise

    def _check_metadata_dir(self) -> None:
        """A single node does not start without its metadata dir, as Kafka's broker does not
        start with an I/O error in its metadata log directory."""
        if self.metadata_dir is not None and self.log_manager.failures.is_offline(
                self.metadata_dir):
            raise KafkaStorageError(f"Encountered I/O error in metadata log directory "
                                    f"{self.metadata_dir}. Cannot continue.")

    def _start_cleaner(self, loop: asyncio.AbstractEventLoop) -> None:
        c = self.config
        if not c.get("log.cleaner.enable") or c.get("log.cleaner.threads") < 1:
            return

        def on_loop(swap: Callable[[], bool]) -> bool:
            """Run a segment swap on the event loop, where appends and reads happen."""
            done: concurrent.futures.Future[bool] = concurrent.futures.Future()

            def call() -> None:
                try:
                    done.set_result(swap())
                except BaseException as exc:
                    done.set_exception(exc)

            loop.call_soon_threadsafe(call)
            return done.result()

        self.cleaner = LogCleaner(
            self.log_manager,
            threads=c.get("log.cleaner.threads"),
            dedupe_buffer_size=c.get("log.cleaner.dedupe.buffer.size"),
            load_factor=c.get("log.cleaner.io.buffer.load.factor"),
            backoff_ms=c.get("log.cleaner.backoff.ms"),
            run_swap=on_loop,
        )
        self.cleaner.start()
        self.replicas.on_drop = self.cleaner.forget

    # --- dynamic broker configs -------------------------------------------------------------

    def _register_reconfigurables(self) -> None:
        """What reads each dynamic broker key, checked and told when it changes (Kafka's
        DynamicBrokerConfig.addReconfigurables). producer.id.expiration.ms needs none: the
        log manager reads it at each expiry pass."""
        dynamic = self.dynamic_config
        dynamic.register(Reconfigurable("logs", LOG_KEYS, reconfigure=self._log_defaults_changed))
        dynamic.register(Reconfigurable("log cleaner", CLEANER_KEYS, self._validate_cleaner,
                                        self._reconfigure_cleaner))
        dynamic.register(Reconfigurable("thread pools", THREAD_KEYS, self._validate_threads))
        dynamic.register(Reconfigurable(
            "connection quotas", CONNECTION_KEYS,
            lambda new: ConnectionLimits.check(new),
            lambda new, _k: self.connection_limits.update(new)))
        dynamic.register(Reconfigurable(
            "replication quotas", RATE_KEYS,
            reconfigure=lambda new, _k: self.replicas.quotas.update(new)))
        for endpoint in self.listeners:
            if endpoint.uses_tls:
                prefix = f"{LISTENER_PREFIX}{endpoint.listener_name.lower()}."
                dynamic.register(Reconfigurable(
                    f"listener {endpoint.listener_name}",
                    frozenset(prefix + key for key in DYNAMIC_SECURITY_KEYS),
                    lambda new, e=endpoint: self._validate_tls(new, e),
                    lambda new, _k, e=endpoint: self._reconfigure_tls(new, e)))

    def _log_defaults_changed(self, new: BrokerConfig, keys: set[str]) -> None:
        """Kafka's DynamicLogConfig.reconfigure: every log takes the new defaults, and the
        default turning unclean leader election on lets the controller use it at once."""
        self.replicas.topic_defaults_changed()
        if "unclean.leader.election.enable" in keys and new.get(
                "unclean.leader.election.enable"):
            self.mode.unclean_default_enabled()

    def _validate_tls(self, new: BrokerConfig, endpoint: EndPoint) -> None:
        """A listener's new TLS stores load, and its certificate names the same subject and
        alternative names as the one it replaces (Kafka's SslFactory check)."""
        ListenerSecurity.build(new, endpoint)
        name = endpoint.listener_name
        old, now = keystore_identity(self.config, name), keystore_identity(new, name)
        if old is not None and now is not None:
            if old[0] != now[0]:
                raise ConfigError(f"Keystore DistinguishedName does not match: existing="
                                  f"{{subject={old[0]}}}, new={{subject={now[0]}}}")
            if old[1] != now[1]:
                raise ConfigError(f"Keystore SubjectAltNames do not match: existing="
                                  f"{{subjectAltName={list(old[1])}}}, "
                                  f"new={{subjectAltName={list(now[1])}}}")

    def _reconfigure_tls(self, new: BrokerConfig, endpoint: EndPoint) -> None:
        """New connections to the listener get the new stores (those open keep theirs)."""
        self.security[endpoint.listener_name] = ListenerSecurity.build(new, endpoint)
        log.info("listener %s: new TLS key and trust stores", endpoint.listener_name)

    def _validate_threads(self, new: BrokerConfig) -> None:
        """Kafka's DynamicThreadPool check: at least 1, half to double the current count."""
        for name in sorted(THREAD_KEYS):
            value, old = new.get(name), self.config.get(name)
            if value == old:
                continue
            problem = f"Dynamic thread count update validation failed for {name}={value}"
            if value <= 0:
                raise ConfigError(f"{problem}, value should be at least 1")
            if value < old // 2:
                raise ConfigError(f"{problem}, value should be at least half the current "
                                  f"value {old}")
            if value > old * 2:
                raise ConfigError(f"{problem}, value should not be greater than double the "
                                  f"current value {old}")

    def _validate_cleaner(self, new: BrokerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration (a running cleaner's thread count)."""
        if self.cleaner is None:
            return
        threads, current = new.get("log.cleaner.threads"), self.cleaner.thread_count
        if threads < 1:
            raise ConfigError("Log cleaner threads should be at least 1")
        if threads < current // 2:
            raise ConfigError("Log cleaner threads cannot be reduced to less than half the "
                              f"current value {current}")
        if threads > current * 2:
            raise ConfigError("Log cleaner threads cannot be increased to more than double the "
                              f"current value {current}")

    async def _reconfigure_cleaner(self, new: BrokerConfig, _keys: set[str]) -> None:
        cleaner = self.cleaner
        if cleaner is None:
            return
        await asyncio.get_running_loop().run_in_executor(None, lambda: cleaner.reconfigure(
            threads=new.get("log.cleaner.threads"),
            dedupe_buffer_size=new.get("log.cleaner.dedupe.buffer.size"),
            load_factor=new.get("log.cleaner.io.buffer.load.factor"),
            backoff_ms=new.get("log.cleaner.backoff.ms")))

    def _new_connection(self, max_request: int, security: ListenerSecurity) -> Connection:
        connection = Connection(self.dispatch, max_request, self._connection_closed, security,
                                self._admit)
        if security.sasl is not None:
            connection.authenticator = SaslServerAuthenticator(
                connection, security.sasl, self._scram_credential, self.dispatch)
        self.connections.add(connection)
        return connection

    def _admit(self, connection: Connection) -> str | None:
        return self.connection_limits.admit(connection, connection.host,
                                            connection.listener_name)

    def _connection_closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self.connection_limits.release(connection)

    def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: a connection that neither sent a request nor got a
        response for that long is closed (a long-poll fetch in progress is not idle)."""
        idle_s = self.config.get("connections.max.idle.ms") / 1000
        now = time.monotonic()
        for connection in list(self.connections):
            if not connection.busy and now - connection.last_active > idle_s:
                log.debug("closing idle connection from %s (connections.max.idle.ms)",
                          connection.peer)
                connection.close()

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        store = self.scram_store
        return None if store is None else store.lookup(user, mechanism)

    async def _load_meta_properties(self) -> None:
        """meta.properties, in every log dir online: read (the first value of each key wins),
        then written with this broker's id and cluster id. A dir where either fails with an I/O
        error goes offline (Kafka's broker metadata checkpoints)."""
        found: dict[str, str] = {}
        failures = self.log_manager.failures
        for directory in self.log_manager.live_dirs:
            path = directory / META_PROPERTIES
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            except OSError as exc:
                failures.maybe_add_offline_log_dir(directory, f"reading {META_PROPERTIES}", exc)
                continue
            for line in text.splitlines():
                if "=" in line and not line.startswith("#"):
                    key, value = line.split("=", 1)
                    found.setdefault(key.strip(), value.strip())
        stored_id = int(found["broker.id"]) if "broker.id" in found else None
        if self.broker_id == -1:
            if stored_id is not None:
                self.broker_id = stored_id
            else:
                self.broker_id = await self.mode.generate_broker_id()
        elif stored_id is not None and stored_id != self.broker_id:
            raise ConfigError(
                f"Invalid value {self.broker_id} for configuration broker.id: the data in "
                f"{self.log_manager.dirs[0]} belongs to broker {stored_id}"
            )
        stored_cluster = found.get("cluster.id")
        self.cluster_id = await self.mode.cluster_id(stored_cluster, new_cluster_id())
        text = f"version=0\nbroker.id={self.broker_id}\ncluster.id={self.cluster_id}\n"
        for directory in self.log_manager.live_dirs:
            try:
                write_atomically(directory / META_PROPERTIES, text.encode())
            except OSError as exc:
                failures.maybe_add_offline_log_dir(directory, f"writing {META_PROPERTIES}", exc)
        if not self.log_manager.live_dirs:
            raise KafkaStorageError("Shutdown broker because all log dirs in "
                                    f"{', '.join(str(d) for d in self.log_manager.dirs)} "
                                    "have failed")

    async def stop(self) -> None:
        """Graceful shutdown: stop accepting, finish in-flight requests, flush, mark clean.
        A call while another stop is under way (an embedded broker's halt) returns when that
        one has finished, its logs closed and its directory locks released."""
        if self._stopped is not None:
            await asyncio.shield(self._stopped)
            return
        if not self.started:
            return
        self.started = False
        self._stopped = asyncio.get_running_loop().create_future()
        try:
            await self._shut_down()
        finally:
            self._stopped.set_result(None)
            self._stopped = None

    async def _shut_down(self) -> None:
        await self.mode.shut_down()
        for server in self._servers:
            server.close()
        if self.prometheus is not None:
            await self.prometheus.stop()
        self.replicas.wake_all()
        await asyncio.gather(*(c.drain_and_close() for c in list(self.connections)))
        if self.txn_coordinator is not None:
            await self.txn_coordinator.stop()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.replicas.mover.stop()
        for server in self._servers:
            await server.wait_closed()
        if self.acl_store is not None:
            await self.acl_store.stop()
        if self.scram_store is not None:
            await self.scram_store.stop()
        if self.quota_store is not None:
            await self.quota_store.stop()
        await self.dynamic_config.stop()
        await self.mode.stop()
        if self.cleaner is not None:  # joined off the loop: its swaps run on the loop
            await asyncio.get_running_loop().run_in_executor(None, self.cleaner.shutdown)
        self.replicas.checkpoint_high_watermarks()
        self.log_manager.shutdown()
        log.info("samsa broker %d stopped cleanly", self.broker_id)

    # --- background work ------------------------------------------------------------------------

    async def _background(self) -> None:
        loop = asyncio.get_running_loop()
        c = self.config
        every = {
            "retention": c.get("log.retention.check.interval.ms") / 1000,
            "recovery": c.get("log.flush.offset.checkpoint.interval.ms") / 1000,
            "start": c.get("log.flush.start.offset.checkpoint.interval.ms") / 1000,
            "high_watermark": c.get("replica.high.watermark.checkpoint.interval.ms") / 1000,
        }
        last = dict.fromkeys(every, loop.time())
        while True:
            await asyncio.sleep(_TICK_SECONDS)
            now = loop.time()
            try:
                for tp, log_ in list(self.log_manager.logs.items()):
                    try:
                        log_.maybe_flush_by_time()
                    except KafkaStorageError:
                        continue  # its directory is offline now
                    if log_.recovery_point < log_.active.base_offset and tp not in self._flushing:
                        self._flushing.add(tp)
                        loop.run_in_executor(None, log_.flush_rolled).add_done_callback(
                            lambda f, tp=tp: self._flush_done(tp, f)
                        )
                self.replicas.shrink_isrs(self.config.get("replica.lag.time.max.ms"))
                self._close_idle_connections()
                if now - last["retention"] >= every["retention"]:
                    last["retention"] = now
                    self.log_manager.cleanup()
                if now - last["recovery"] >= every["recovery"]:
                    last["recovery"] = now
                    self.log_manager.checkpoint_recovery_points()
                if now - last["start"] >= every["start"]:
                    last["start"] = now
                    self.log_manager.checkpoint_log_start_offsets()
                if now - last["high_watermark"] >= every["high_watermark"]:
                    last["high_watermark"] = now
                    self.replicas.checkpoint_high_watermarks()
            except Exception:
                log.exception("background log maintenance failed; retrying at the next tick")

    def _flush_done(self, tp: tuple[str, int], done: asyncio.Future[None]) -> None:
        self._flushing.discard(tp)
        error = None if done.cancelled() else done.exception()
        # a KafkaStorageError took its directory offline (the failure channel logged it)
        if error is not None and not isinstance(error, KafkaStorageError):
            log.error("flushing the rolled segments of %s-%d failed; retrying at the next tick",
                      *tp, exc_info=error)

    # --- log directory failures -----------------------------------------------------------------

    def _log_dir_offline(self, directory: Path) -> None:
        """A log directory went offline (any thread: the error may have happened in a flush
        or the cleaner): handled on the event loop, as Kafka's LogDirFailureHandler does."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._handle_log_dir_failure, directory)

    def _handle_log_dir_failure(self, directory: Path) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: the directory's partitions go offline
        here, its logs close, the controller is told (so that leadership moves to other
        in-sync replicas); with no directory left online the broker halts."""
        if not self.started or directory in self._failed_dirs:
            return  # before the start is over: handled at its end
        self._failed_dirs.add(directory)
        log.warning("Stopping serving replicas in dir %s", directory)
        partitions = self.replicas.handle_log_dir_failure(directory)
        self.log_manager.handle_log_dir_failure(directory)
        if not self.log_manager.live_dirs:
            dirs = ", ".join(str(d) for d in self.log_manager.dirs)
            self.halt(f"Shutdown broker because all log dirs in {dirs} have failed")
            return
        if directory == self.metadata_dir:
            self.halt(f"Shutdown broker because the metadata log dir {directory} has failed")
            return
        self.mode.log_dir_failed(partitions)
        log.warning("Stopped serving replicas in dir %s: %d partitions offline here (%s)",
                    directory, len(partitions),
                    ", ".join(f"{t}-{p}" for t, p in partitions[:20])
                    + (", ..." if len(partitions) > 20 else ""))

    # --- requests -------------------------------------------------------------------------------

    async def dispatch(
        self, frame: bytes | memoryview, connection: Connection
    ) -> list[Any] | None:
        try:
            request = decode_request(frame)
        except MalformedRequestError as exc:
            key, version = peek_key_and_version(frame) if len(frame) >= 4 else (-1, -1)
            if key == API_VERSIONS_KEY and not self._supported(key, version):
                return self._api_versions_fallback(frame)
            raise CloseConnection(str(exc)) from None
        key, version = request.api_key, request.api_version
        if key == API_VERSIONS_KEY and not self._supported(key, version):
            return self._api_versions_fallback(frame, request.correlation_id)
        api = APIS.get(key)
        if api is None or not api.supports(version) or request.body is None:
            raise CloseConnection(f"unsupported api key {key} version {version}")
        ctx = RequestContext(self, request, connection)
        metrics = self.metrics
        if metrics is None:
            if self.quotas.active:  # client quotas (server/quotas.py), once any is set
                return await self.quotas.dispatch(ctx, api, connection, self._encode)
            return self._encode(request, await api.handle(ctx, request.body))
        started = time.monotonic()
        if self.quotas.active:
            chunks = await self.quotas.dispatch(ctx, api, connection, self._encode)
        else:
            chunks = self._encode(request, await api.handle(ctx, request.body))
        name = ctx.metric_name or api.name
        connection.timing = (metrics.requests.get((name, version))
                             or metrics.request(name, version),
                             started, time.monotonic(), ctx.remote_s)
        return chunks

    @staticmethod
    def _encode(request: Request, data: dict[str, Any] | None) -> list[Any] | None:
        """A handler's answer as response chunks (None: no response, acks=0)."""
        if data is None:
            return None
        key, version = request.api_key, request.api_version
        if key in FAST_RESPONSES:
            return [encode_fast(key, version, request.correlation_id, data)]
        return response_writer.encode(key, version, request.correlation_id, data)

    @staticmethod
    def _supported(key: int, version: int) -> bool:
        api = APIS.get(key)
        return api is not None and api.supports(version)

    def _api_versions_fallback(self, frame: bytes, correlation_id: int | None = None) -> list[Any]:
        """An ApiVersions version we do not know: answer v0 with UNSUPPORTED_VERSION and our
        ApiVersions range (KIP-511), header v0, without parsing the body."""
        if correlation_id is None:
            if len(frame) < 8:
                raise CloseConnection("ApiVersions request too short for a header")
            correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
        api = APIS[API_VERSIONS_KEY]
        data = {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": [{"api_key": api.key, "min_version": api.min_version,
                          "max_version": api.max_version}],
        }
        return response_writer.encode(API_VERSIONS_KEY, 0, correlation_id, data)

    # --- topics -----------------------------------------------------------------------------------

    def _leadership_changed(self, name: str, index: int, leads: bool) -> None:
        """Cluster mode: a coordinator whose state lives in ``name``-``index`` loads it when
        this broker starts leading the partition and lets it go when another broker does."""
        coordinator = {OFFSETS_TOPIC: self.group_coordinator,
                       TXN_STATE_TOPIC: self.txn_coordinator}.get(name)
        if coordinator is None:
            return
        if leads:
            coordinator.load_partition(index)
        else:
            coordinator.unload_partition(index)

    # ZooKeeper mode's parts (None on a single node), for tools and tests that look inside
    @property
    def membership(self) -> ClusterMembership | None:
        return self.mode.membership

    @property
    def controller(self) -> Controller | None:
        return self.mode.controller

    @property
    def replica_manager(self) -> ReplicaManager | None:
        return self.mode.replica_manager

    @property
    def topics(self) -> TopicStore | None:
        """Every topic of the cluster (this broker's view), once started."""
        return self.replicas.topics

    @property
    def advertised(self) -> list[EndPoint]:
        """What Metadata tells clients and ZooKeeper other brokers, by listener:
        advertised.listeners (else listeners), a port of 0 being the bound one and an
        unspecified host 127.0.0.1."""
        bound = {b.listener_name: b.port for b in self.bound}
        return [
            EndPoint(a.listener_name, a.security_protocol,
                     a.host if a.host not in ("", "0.0.0.0") else "127.0.0.1",
                     a.port or bound.get(a.listener_name, 0))
            for a in self.listener_config.advertised
        ]

    def _address(self, listener: str | None) -> tuple[str, int] | None:
        """(host, port) of this broker on ``listener`` (None: the inter-broker listener, else
        the first advertised), as clients of that listener are told; None: not advertised."""
        advertised = self.advertised
        name = listener or self.inter_broker.listener_name
        found = next((a for a in advertised if a.listener_name == name), None)
        if found is None and listener is None:
            found = advertised[0]
        return (found.host, found.port) if found is not None else None

    def bootstrap_for(self, listener: str) -> str:
        """host:port of ``listener`` (a listener name, e.g. SSL)."""
        address = self._address(listener.upper())
        if address is None:
            raise KeyError(f"no advertised listener {listener}")
        return f"{address[0]}:{address[1]}"

    @property
    def bootstrap_servers(self) -> str:
        """host:port of the first advertised listener."""
        first = self.advertised[0]
        return f"{first.host}:{first.port}"
