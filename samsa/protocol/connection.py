"""A Kafka protocol connection from this broker to another (asyncio): the replica fetcher's to
a leader, the transaction coordinator's to a partition leader for its markers. One request at
a time, each bounded in time; the frames come from ``samsa.protocol.client``. Over TLS when
given the inter-broker listener's client context (``ssl_context``); authenticated with SASL
when given the inter-broker listener's mechanism and credentials (``sasl``: SaslHandshake v1
then SaslAuthenticate, as Kafka's SaslClientAuthenticator), and authenticated again on the
same connection before the session the broker granted ends (KIP-368)."""

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


class BrokerConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str,
        address: str,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.address = address
        self.codec = ClientCodec(client_id)
        self.versions: dict[int, tuple[int, int]] = {}
        self.sasl: SaslClientSettings | None = None
        self._reauthenticate_at: float | None = None  # time.monotonic()

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
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context), timeout)
        except (OSError, TimeoutError) as exc:
            raise BrokerConnectionError(
                f"cannot connect to {address}: {getattr(exc, 'strerror', None) or exc!r}"
            ) from exc
        connection = cls(reader, writer, client_id, address)
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

    async def _exchange(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        frame, sent = self.codec.encode(api_key, version, body)
        try:
            async with asyncio.timeout(timeout):
                self.writer.write(frame)
                await self.writer.drain()
                size = self.codec.frame_size(await self.reader.readexactly(SIZE.size))
                answer = await self.reader.readexactly(size)
            return self.codec.decode(sent, answer)
        except ResponseError as exc:
            raise BrokerConnectionError(f"{self.address}: {exc}") from exc
        except TimeoutError as exc:  # before OSError, of which it is a subclass
            raise BrokerConnectionError(
                f"no answer from {self.address} within {timeout:g} s (api key {api_key})"
            ) from exc
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise BrokerConnectionError(f"connection to {self.address} lost: {exc!r}") from exc

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()
