"""A Kafka protocol connection from this broker to another (asyncio): the replica fetcher's to
a leader, the transaction coordinator's to a partition leader for its markers. One request at
a time, each bounded in time; the frames come from ``samsa.protocol.client``. Over TLS when
given the inter-broker listener's client context (``ssl_context``)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Iterable
from typing import Any

from samsa.protocol.client import (
    SIZE,
    ClientCodec,
    ResponseError,
    api_versions_request,
    choose_version,
    version_ranges,
)


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

    @classmethod
    async def open(
        cls, host: str, port: int, client_id: str, timeout: float,
        require: Iterable[tuple[int, int, str]] = (), ssl_context: ssl.SSLContext | None = None,
    ) -> BrokerConnection:
        """Connect (with TLS when ``ssl_context`` is given: the handshake counts in
        ``timeout``) and learn the broker's versions (ApiVersions); ``require``: (api key,
        version, name) that the broker must speak, or the connection is refused."""
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
        except BaseException:
            await connection.close()
            raise
        return connection

    async def request(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        """Send ``body`` and read its answer within ``timeout`` seconds."""
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
