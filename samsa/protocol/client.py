"""The client side of Kafka's protocol, without I/O: encode a request, match and decode its
response, choose a version both sides speak.

The transports over it: ``samsa.protocol.connection.BrokerConnection`` (asyncio: the replica
fetcher, the transaction coordinator's markers) and ``samsa.tools.wire.Wire`` (blocking: the
command-line tools). Each turns ``ResponseError`` into its own error.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.serial import entity_reader

from samsa.errors import ErrorCode, kafka_name
from samsa.protocol.build import to_ms
from samsa.protocol.codec import encode_message
from samsa.security.sasl.errors import SaslError
from samsa.security.sasl.listener import SaslClientSettings

API_VERSIONS = 18
SIZE = struct.Struct(">i")
# The most a response frame may claim before it is taken for garbage (Kafka's clients have no
# limit; a broker that answers a gigabyte is broken, not busy).
MAX_RESPONSE_BYTES = 1 << 30

VersionRanges = Mapping[int, tuple[int, int]]


class ResponseError(Exception):
    """An answer that cannot be read or does not answer the request sent."""


@dataclass(frozen=True, slots=True)
class Sent:
    """A request on its way: what its response must carry and how to read it."""

    correlation_id: int
    api_key: int
    api_version: int
    response_schema: Any


class ClientCodec:
    """Correlation ids and the frames of one connection's requests and responses."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._correlation = itertools.count(1)

    def encode(
        self, api_key: int, version: int, body: Any, response_schema: Any = None
    ) -> tuple[bytes, Sent]:
        """The size-prefixed frame of ``body`` (a kio request entity of ``version``).

        ``response_schema`` reads the answer instead of kio's own (a variant for fields kio
        cannot read as Kafka writes them)."""
        correlation = self.next_correlation_id()
        header = type(body).__header_schema__(
            request_api_key=api_key, request_api_version=version,
            correlation_id=correlation, client_id=self.client_id,
        )
        payload = encode_message(header) + encode_message(body)
        schema = response_schema or load_response_schema(api_key, version)
        return SIZE.pack(len(payload)) + payload, Sent(correlation, api_key, version, schema)

    def next_correlation_id(self) -> int:
        """The correlation id of the next request (each taken once)."""
        return next(self._correlation)

    @staticmethod
    def frame_size(prefix: bytes) -> int:
        """The size of the response frame that follows its 4-byte ``prefix``."""
        (size,) = SIZE.unpack(prefix)
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise ResponseError(f"a response frame of {size} bytes")
        return size

    @staticmethod
    def decode(sent: Sent, frame: bytes | memoryview) -> Any:
        """The response entity in ``frame`` (the bytes after the size prefix)."""
        schema = sent.response_schema
        try:
            header, used = entity_reader(schema.__header_schema__)(frame, 0)
            if header.correlation_id != sent.correlation_id:
                raise ResponseError(
                    f"answered correlation id {header.correlation_id}, "
                    f"expected {sent.correlation_id}"
                )
            response, _ = entity_reader(schema)(frame, used)
        except ResponseError:
            raise
        except Exception as exc:  # a malformed answer, whatever kio's reader raises
            raise ResponseError(
                f"cannot read the answer (api key {sent.api_key} v{sent.api_version}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return response


def api_versions_request() -> tuple[int, int, ApiVersionsRequest]:
    """(api key, version, body) of the first request on a connection: ApiVersions v0, which
    every broker answers."""
    return API_VERSIONS, 0, ApiVersionsRequest()


def version_ranges(response: Any) -> dict[int, tuple[int, int]]:
    """The (min, max) version of each API key in an ApiVersions ``response``."""
    if response.error_code != ErrorCode.none:
        raise ResponseError(f"ApiVersions: {kafka_name(response.error_code)}")
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def choose_version(ranges: VersionRanges, api_key: int, lowest: int, highest: int) -> int | None:
    """The highest version in [lowest, highest] the broker speaks, or None."""
    broker_min, broker_max = ranges.get(api_key, (0, -1))
    chosen = min(highest, broker_max)
    return chosen if chosen >= max(lowest, broker_min) else None


# --- SASL ---------------------------------------------------------------------------------------

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# re-authenticate once this share of the session granted is over (Kafka's clients: 85-95%)
REAUTHENTICATE_AT = 0.85


class SaslExchangeFailed(Exception):
    """The broker refused the login, or the exchange broke off: one line saying how."""


def sasl_exchange(settings: SaslClientSettings, address: str, authenticate_version: int
                  ) -> Generator[tuple[int, int, Any], Any, int]:
    """The client side of SaslHandshake v1 then SaslAuthenticate, without IO: yields each
    request as (api key, version, body), is sent its decoded answer, and returns the session
    lifetime the broker granted in ms (0: none). A transport drives it and sends the requests
    its own way (``connection.BrokerConnection``, ``tools.wire.Wire``)."""
    mechanism = settings.mechanism
    handshake: Any = load_request_schema(SASL_HANDSHAKE, 1)
    answer = yield (SASL_HANDSHAKE, 1, handshake(mechanism=mechanism))
    if answer.error_code != ErrorCode.none:
        raise SaslExchangeFailed(
            f"{address}: SASL handshake for {mechanism}: "
            f"{kafka_name(answer.error_code)} (enabled: {', '.join(answer.mechanisms)})")
    request: Any = load_request_schema(SASL_AUTHENTICATE, authenticate_version)
    client = settings.new_client()
    message: bytes | None = client.first_message()
    lifetime_ms = 0
    while message is not None:
        answer = yield (SASL_AUTHENTICATE, authenticate_version, request(auth_bytes=message))
        if answer.error_code != ErrorCode.none:
            raise SaslExchangeFailed(
                f"{address}: SASL {mechanism} authentication as {settings.username} failed: "
                f"{kafka_name(answer.error_code)}: {answer.error_message}")
        lifetime_ms = to_ms(answer.session_lifetime) if authenticate_version >= 1 else 0
        try:
            message = client.evaluate(bytes(answer.auth_bytes))
        except SaslError as exc:
            raise SaslExchangeFailed(f"{address}: SASL {mechanism}: {exc}") from None
    if not client.complete:
        raise SaslExchangeFailed(f"{address}: SASL {mechanism} exchange ended before it "
                                 "completed")
    return lifetime_ms
