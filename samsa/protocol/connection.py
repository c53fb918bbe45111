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

from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from samsa.errors import ErrorCode, kafka_name
from samsa.protocol.build import to_ms
from samsa.protocol.client import (
    SIZE,
    ClientCodec,
    ResponseError,
    api_versions_request,
    choose_version,
    version_ranges,
)
from samsa.security.sasl.errors import SaslError
from samsa.security.sasl.listener import SaslClientSettings

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# re-authenticate once this share of the session granted is over (Kafka's clients: 85-95%)
REAUTHENTICATE_AT = 0.85


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
        answer = await self._exchange(
            SASL_HANDSHAKE, handshake, SaslHandshakeRequest(mechanism=settings.mechanism),
            timeout)
        if answer.error_code != ErrorCode.none:
            raise BrokerConnectionError(
                f"{self.address}: SASL handshake for {settings.mechanism}: "
                f"{kafka_name(answer.error_code)} (enabled: {', '.join(answer.mechanisms)})")
        client = settings.new_client()
        message: bytes | None = client.first_message()
        lifetime_ms = 0
        while message is not None:
            answer = await self._exchange(SASL_AUTHENTICATE, authenticate,
                                          SaslAuthenticateRequest(auth_bytes=message), timeout)
            if answer.error_code != ErrorCode.none:
                raise BrokerConnectionError(
                    f"{self.address}: SASL {settings.mechanism} authentication as "
                    f"{settings.username} failed: {kafka_name(answer.error_code)}: "
                    f"{answer.error_message}")
            lifetime_ms = to_ms(answer.session_lifetime) if authenticate >= 1 else 0
            try:
                message = client.evaluate(bytes(answer.auth_bytes))
            except SaslError as exc:
                raise BrokerConnectionError(f"{self.address}: SASL {settings.mechanism}: "
                                            f"{exc}") from None
        if not client.complete:
            raise BrokerConnectionError(f"{self.address}: SASL {settings.mechanism} exchange "
                                        "ended before it completed")
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
