"""A Kafka protocol connection from this broker to another (asyncio): the replica fetcher's to
a leader, the transaction coordinator's to a partition leader for its markers. One request at
a time, each bounded in time; the frames come from ``samsa.protocol.client``. Over TLS when
given the inter-broker listener's client context (``ssl_context``); authenticated with SASL
when given the inter-broker listener's mechanism and credentials (``sasl``: SaslHandshake v1
then SaslAuthenticate, as Kafka's SaslClientAuthenticator), and authenticated again on the
same connection before the session the broker granted ends (KIP-368).

Each response frame is read straight into a buffer the connection keeps and reuses (an
``asyncio.BufferedProtocol``): kio's decoder copies what it keeps, and ``request_frame`` (the
replica fetcher's hand-encoded Fetch) hands out a view of the frame that is valid until the
next request, so that a follower's records go from the socket to its log without a copy in
between."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Iterable
from typing import Any

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


class BrokerConnectionError(Exception):
    """The broker could not be reached, closed the connection, answered too late or answered
    something that cannot be read."""


# The receive buffer's first size; it grows to the largest response seen and is reused.
_INITIAL_BUFFER = 64 * 1024


class _Wire(asyncio.BufferedProtocol):
    """The bytes of one connection, one request at a time: each response frame is assembled in
    a buffer the socket reads into directly, which the next response reuses."""

    def __init__(self, loop: asyncio.AbstractEventLoop, address: str) -> None:
        self.loop = loop
        self.address = address
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray(_INITIAL_BUFFER)
        self._filled = 0
        self._size = -1  # the frame's, once its 4-byte prefix is in
        self.pending: asyncio.Future[memoryview | None] | None = None
        self.lost: str | None = None  # why the connection is unusable (None: it is usable)
        self._can_write: asyncio.Future[None] | None = None
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._filled == len(self._buf):  # the prefix said more than fits: grow
            self._grow(2 * len(self._buf))
        return memoryview(self._buf)[self._filled:]

    def _grow(self, size: int) -> None:
        # a new buffer rather than a resize: the last response's views may still be alive
        grown = bytearray(size)
        grown[:self._filled] = memoryview(self._buf)[:self._filled]
        self._buf = grown

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._size < 0:
            if self._filled < SIZE.size:
                return
            try:
                self._size = ClientCodec.frame_size(bytes(self._buf[:SIZE.size]))
            except ResponseError as exc:
                self.fail(f"{self.address}: {exc}")
                return
            if SIZE.size + self._size > len(self._buf):
                self._grow(SIZE.size + self._size)
        end = SIZE.size + self._size
        if self._filled < end:
            return
        pending, self.pending = self.pending, None
        if self._filled > end or pending is None or pending.done():
            # bytes nobody asked for (an answer to an abandoned request, a second frame)
            self.fail(f"{self.address}: unexpected bytes from the broker")
            return
        self._filled, self._size = 0, -1
        pending.set_result(memoryview(self._buf)[SIZE.size:end].toreadonly())

    def fail(self, reason: str) -> None:
        """The connection is unusable: the request in flight fails, the socket closes."""
        if self.lost is None:
            self.lost = reason
        pending, self.pending = self.pending, None
        if pending is not None and not pending.done():
            pending.set_exception(BrokerConnectionError(reason))
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(f"connection to {self.address} lost: "
                  + (repr(exc) if exc is not None else "closed by the broker"))
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        if self._can_write is None or self._can_write.done():
            self._can_write = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)

    async def drain(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            await self._can_write


class BrokerConnection:
    def __init__(self, wire: _Wire, client_id: str, address: str) -> None:
        self._wire = wire
        self.address = address
        self.codec = ClientCodec(client_id)
        self.versions: dict[int, tuple[int, int]] = {}
        self.sasl: SaslClientSettings | None = None
        self._reauthenticate_at: float | None = None  # time.monotonic()
        self._frame_in_flight = False  # request_frame's request is out: abandon answers it
        self._abandoned = False  # abandoned before request_frame sent its request

    @classmethod
    async def open(
        cls, host: str, port: int, client_id: str, timeout: float,
        require: Iterable[tuple[int, int, str]] = (), ssl_context: ssl.SSLContext | None = None,
        sasl: SaslClientSettings | None = None,
    ) -> BrokerConnection:
        """Connect (with TLS when ``ssl_context`` is given: the handshake counts in
        ``timeout``), learn the broker's versions (ApiVersions) and, with ``sasl``,
        authenticate; ``require``: (api key, version, name) that the broker must speak, or the
        connection is refused."""
        address = f"{host}:{port}"
        loop = asyncio.get_running_loop()
        try:
            _, wire = await asyncio.wait_for(
                loop.create_connection(lambda: _Wire(loop, address), host, port, ssl=ssl_context),
                timeout)
        except (OSError, TimeoutError) as exc:
            raise BrokerConnectionError(
                f"cannot connect to {address}: {getattr(exc, 'strerror', None) or exc!r}"
            ) from exc
        connection = cls(wire, client_id, address)
        try:
            response = await connection.request(*api_versions_request(), timeout)
            try:
                connection.versions = version_ranges(response)
            except ResponseError as exc:
                raise BrokerConnectionError(f"{address}: {exc}") from None
            for key, version, name in require:
                if choose_version(connection.versions, key, version, version) is None:
                    raise BrokerConnectionError(
                        f"the broker at {address} does not support {name} v{version}"
                    )
            if sasl is not None:
                connection.sasl = sasl
                await connection.authenticate(timeout)
        except BaseException:
            await connection.close()
            raise
        return connection

    async def authenticate(self, timeout: float) -> None:
        """The SASL exchange (again, on an authenticated connection: a re-authentication)."""
        settings = self.sasl
        assert settings is not None
        handshake = choose_version(self.versions, SASL_HANDSHAKE, 1, 1)
        authenticate = choose_version(self.versions, SASL_AUTHENTICATE, 0, 1)
        if handshake is None or authenticate is None:
            raise BrokerConnectionError(f"the broker at {self.address} does not support "
                                        "SaslHandshake v1 and SaslAuthenticate")
        exchange = sasl_exchange(settings, self.address, authenticate)
        try:
            request = next(exchange)
            while True:
                request = exchange.send(await self._exchange(*request, timeout))
        except StopIteration as done:
            lifetime_ms: int = done.value
        except SaslExchangeFailed as exc:
            raise BrokerConnectionError(str(exc)) from None
        self._reauthenticate_at = (time.monotonic() + lifetime_ms * REAUTHENTICATE_AT / 1000
                                   if lifetime_ms > 0 else None)

    async def request(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        """Send ``body`` and read its answer within ``timeout`` seconds (re-authenticating
        first when the SASL session nears its end)."""
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            await self.authenticate(timeout)
        return await self._exchange(api_key, version, body, timeout)

    async def request_frame(self, frame: bytes, api_key: int, timeout: float
                            ) -> memoryview | None:
        """Send a request frame the caller encoded (size prefix included, its correlation id
        from ``next_correlation_id``) and return its response frame (after the size prefix)
        within ``timeout`` seconds, or None when ``abandon`` was called meanwhile. The view
        is valid until the next request on this connection, which reuses the buffer."""
        self._abandoned = False
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            await self.authenticate(timeout)
            if self._abandoned:
                return None
        self._frame_in_flight = True
        try:
            return await self._send(frame, api_key, timeout)
        finally:
            self._frame_in_flight = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The transport's (``sockname``, ``peername``, ``ssl_object``, ...)."""
        transport = self._wire.transport
        return default if transport is None else transport.get_extra_info(name, default)

    def next_correlation_id(self) -> int:
        return self.codec.next_correlation_id()

    def abandon(self) -> None:
        """Give up on ``request_frame``'s request: it returns None, and the connection closes
        (its answer would still come); while it re-authenticates first, it returns None after
        that, without sending anything."""
        if not self._frame_in_flight:
            self._abandoned = True
            return
        wire = self._wire
        pending, wire.pending = wire.pending, None
        if pending is not None and not pending.done():
            pending.set_result(None)
        wire.fail(f"{self.address}: a request was abandoned")

    async def _send(self, frame: bytes, api_key: int, timeout: float) -> memoryview | None:
        wire = self._wire
        if wire.lost is not None:
            raise BrokerConnectionError(wire.lost)
        if wire.pending is not None:
            raise RuntimeError(f"{self.address}: a request is already in flight")
        loop = wire.loop
        pending = wire.pending = loop.create_future()

        def timed_out() -> None:
            if not pending.done():
                wire.fail(f"no answer from {self.address} within {timeout:g} s "
                          f"(api key {api_key})")

        deadline = loop.call_later(timeout, timed_out)
        try:
            assert wire.transport is not None
            wire.transport.write(frame)
            await wire.drain()
            answer = await pending
        except asyncio.CancelledError:  # a late answer must not meet the next request
            wire.fail(f"{self.address}: a request was cancelled")
            raise
        finally:
            deadline.cancel()
        return answer

    async def _exchange(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        frame, sent = self.codec.encode(api_key, version, body)
        answer = await self._send(frame, api_key, timeout)
        if answer is None:
            raise BrokerConnectionError(f"{self.address}: the request was abandoned")
        try:
            return self.codec.decode(sent, answer)
        except ResponseError as exc:
            raise BrokerConnectionError(f"{self.address}: {exc}") from exc

    async def close(self) -> None:
        wire = self._wire
        if wire.transport is not None and not wire.transport.is_closing():
            wire.transport.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(wire.closed), 5)
