"""Cluster membership in ZooKeeper mode: who the brokers are and which one is controller.

With ``zookeeper.connect`` set, the broker (KafkaServer) asks this for its cluster id and
broker id at start-up, registers once its listeners are bound, and takes part in the
controller election. Watches keep ``brokers`` and ``controller_id`` current; they fire on
kazoo's threads and are moved onto the broker's event loop. When the controller's znode goes
(its broker died or its session expired) every live broker runs the election again: one wins,
with the next controller epoch.

The controller's duties are in controller.py; the replicas' side in replica_manager.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from samsa.config import ConfigError
from samsa.zk.zk_client import ZkClient, ZkError
from samsa.zk.zk_data import BrokerInfo, Endpoint

log = logging.getLogger(__name__)

T = TypeVar("T")
RESERVED_BROKER_MAX_ID = 1000  # Kafka's reserved.broker.max.id: generated ids start above it
_REFRESH_RETRY_S = 1.0  # a failed read of the live brokers is tried again after this


class ClusterMembership:
    def __init__(self, connect: str, session_timeout_ms: int,
                 connection_timeout_ms: int | None, rack: str | None) -> None:
        self.zk = ZkClient(connect, session_timeout_ms, connection_timeout_ms)
        self.rack = rack
        self.broker_id = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id: int | None = None
        self.controller_epoch = 0  # the epoch this broker won, while it is controller
        self.controller_fence = -1  # /controller_epoch's znode version after that win
        self._loop: asyncio.AbstractEventLoop | None = None
        self._endpoints: tuple[Endpoint, ...] = ()
        self._closed = False
        self._session_lost = False
        self._refreshing = False  # a read of the live brokers is under way
        self._refresh_again = False  # they changed meanwhile: read them once more
        self.zk.session_listeners.append(self._on_session_state)
        # called on the loop when this broker wins an election (epoch, fence) or loses it
        self.on_controllership: Callable[[tuple[int, int] | None], None] | None = None

    @property
    def is_controller(self) -> bool:
        return self.controller_id == self.broker_id

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._loop is not None
        return await self._loop.run_in_executor(None, fn, *args)

    async def connect(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await self._call(self.zk.start)
        except ZkError as exc:
            raise ConfigError(str(exc)) from None

    async def cluster_id(self, stored: str | None, proposed: str) -> str:
        """The cluster's id from ZooKeeper (created once); a broker whose meta.properties
        names another cluster refuses to start, as Kafka does."""
        found = await self._call(self.zk.get_or_create_cluster_id, stored or proposed)
        if stored is not None and stored != found:
            raise ConfigError(
                f"The Cluster ID {found} doesn't match stored clusterId {stored} in "
                "meta.properties. The broker is trying to join the wrong cluster."
            )
        return found

    async def generate_broker_id(self) -> int:
        """Kafka's generated broker id: reserved.broker.max.id + the version of
        /brokers/seqid after bumping it (unique across the cluster)."""
        stat = await self._call(self.zk.client.set, "/brokers/seqid", b"")
        return RESERVED_BROKER_MAX_ID + stat.version

    async def register(self, broker_id: int, endpoints: tuple[Endpoint, ...]) -> None:
        """Register this broker, then watch the brokers and the controller (which runs the
        election now and whenever /controller goes)."""
        self.broker_id = broker_id
        self._endpoints = endpoints
        info = BrokerInfo(broker_id, endpoints, rack=self.rack)
        try:
            await self._call(self.zk.register_broker, info)
        except ZkError as exc:
            raise ConfigError(str(exc)) from None
        self.brokers = await self._call(self.zk.live_brokers)
        self.zk.watch_brokers(self._on_brokers)
        self.zk.watch_controller(self._on_controller)
        await self._elect()

    def _on_session_state(self, state: str) -> None:
        """A lost (expired) session took this broker's ephemeral znodes with it: once a new
        session is up, register again and rejoin the election, as Kafka's broker does."""
        if state == "LOST":
            self._session_lost = True
            if self._loop is not None and not self._closed:
                self._loop.call_soon_threadsafe(self._resign_after_expiry)
        elif state == "CONNECTED" and self._session_lost and self._loop is not None:
            self._session_lost = False
            if not self._closed:
                self._loop.call_soon_threadsafe(
                    lambda: asyncio.ensure_future(self._reregister()))

    async def _reregister(self) -> None:
        if self._closed or self.broker_id < 0:
            return
        log.warning("ZooKeeper session expired: registering broker %d again", self.broker_id)
        info = BrokerInfo(self.broker_id, self._endpoints, rack=self.rack)
        try:
            await self._call(self.zk.register_broker, info)
        except ZkError as exc:
            log.error("could not register again: %s", exc)
            return
        self.brokers = await self._call(self.zk.live_brokers)
        self._resign_after_expiry()
        # the controller may have changed while the session was away, and the watch stays
        # silent when the new /controller has the version the old one had (both 0):
        # Metadata must name the current one
        current = await self._call(self.zk.controller_id)
        if current is None:
            await self._elect()
        else:
            self.controller_id = current

    def _resign_after_expiry(self) -> None:
        """A controller's win went with its session: stop acting as controller (its writes
        would be refused by the epoch check anyway)."""
        if self.controller_id == self.broker_id:
            self.controller_id = None
            log.warning("broker %d is no longer the controller (its session expired)",
                        self.broker_id)
            if self.on_controllership is not None:
                self.on_controllership(None)

    def _on_brokers(self, ids: list[int]) -> None:
        if self._loop is not None and not self._closed:
            self._loop.call_soon_threadsafe(self._refresh_brokers)

    def _refresh_brokers(self) -> None:
        """Read the live brokers again, one read at a time: two reads on the executor's
        threads can finish out of order, and an older list landing last stayed until the next
        registration (brokers registering together at a cluster's start left a broker out of
        another's Metadata). A change seen during a read is read again after it."""
        if self._closed:
            return
        if self._refreshing:
            self._refresh_again = True
            return
        assert self._loop is not None
        self._refreshing, self._refresh_again = True, False
        loop = self._loop
        task = loop.run_in_executor(None, self.zk.live_brokers)

        def done(f: asyncio.Future[dict[int, BrokerInfo]]) -> None:
            self._refreshing = False
            if f.cancelled():
                pass
            elif (failure := f.exception()) is None:
                self.brokers = f.result()
            elif not self._closed:
                # else the list stays stale until the next registration, which may never come
                log.warning("reading the live brokers from ZooKeeper failed (%s); again in "
                            "%g s", failure, _REFRESH_RETRY_S)
                loop.call_later(_REFRESH_RETRY_S, self._refresh_brokers)
            if self._refresh_again:
                self._refresh_brokers()

        task.add_done_callback(done)

    def _on_controller(self, controller: int | None) -> None:
        if self._loop is None or self._closed:
            return

        def update() -> None:
            if self._closed:
                return
            was = self.controller_id == self.broker_id
            self.controller_id = controller
            if was and controller != self.broker_id and self.on_controllership is not None:
                self.on_controllership(None)
            if controller is None:
                asyncio.ensure_future(self._elect())

        self._loop.call_soon_threadsafe(update)

    async def _elect(self) -> None:
        if self._closed:
            return
        won = await self._call(self.zk.try_become_controller, self.broker_id)
        if won is not None:
            self.controller_epoch, self.controller_fence = won
            self.controller_id = self.broker_id
            log.info("broker %d is the controller (epoch %d)", self.broker_id, won[0])
            if self.on_controllership is not None:
                self.on_controllership(won)
        else:
            self.controller_id = await self._call(self.zk.controller_id)

    async def close(self) -> None:
        """Controlled shutdown of the membership: resign as controller, end the session (the
        broker's ephemeral znode goes with it)."""
        self._closed = True
        if self.broker_id >= 0:
            await self._call(self.zk.resign_controller, self.broker_id)
        await self._call(self.zk.close)
