"""The SASL exchange of one connection, as Kafka's SaslServerAuthenticator runs it: a state of
the connection before any other API (DESIGN.md: authentication belongs to the connection).

On a SASL_PLAINTEXT or SASL_SSL listener (after the TLS handshake on SASL_SSL):

1. ``handshake``: ApiVersions (any number of times) and SaslHandshake only. A mechanism the
   listener enables is answered with NONE and the enabled mechanisms; another with
   UNSUPPORTED_SASL_MECHANISM (33) and they, and the authentication fails. Any other request
   (or bytes that are no Kafka request, such as a SASL token sent before the handshake) closes
   the connection at once, as Kafka's InvalidRequestException does.
2. ``authenticate``: after SaslHandshake v1 (KIP-152), SaslAuthenticate requests carry the
   mechanism's tokens; after SaslHandshake v0, the tokens come raw, each framed by its int32
   size alone, and so do the answers. Any other request fails the authentication with
   ILLEGAL_SASL_STATE (34; answered for ApiVersions and SaslHandshake, whose error responses
   are simple; other requests get no answer). A failed exchange answers
   SASL_AUTHENTICATION_FAILED (58) with the mechanism's message (PLAIN: "Authentication
   failed: Invalid username or password"; SCRAM: "Authentication failed during authentication
   due to invalid credentials with SASL mechanism SCRAM-SHA-256", its reason only in the log).
3. ``complete``: the principal is ``User:<authorization id>``; other requests are dispatched.
   The session lasts ``connections.max.reauth.ms`` (and never past an OAUTHBEARER token's
   expiry; KIP-368), told to the client in SaslAuthenticate v1+'s session_lifetime_ms. A
   SaslHandshake on the authenticated connection starts a re-authentication (at most once a
   second, with the same mechanism and ending with the same principal); a request after the
   session expired closes the connection. Without a session limit, SaslHandshake and
   SaslAuthenticate go to their handlers (ILLEGAL_SASL_STATE, as Kafka's KafkaApis).

A failed authentication is logged once (INFO, no traceback); after
``connection.failed.authentication.delay.ms`` (not blocking the event loop) its answer, if any,
is sent and the connection closed. Until the first authentication completes no frame may be
larger than ``sasl.server.max.receive.size``.
"""

from __future__ import annotations

import logging
import re
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from samsa.errors import CloseConnection, ErrorCode
from samsa.handlers.registry import APIS
from samsa.protocol import response_writer
from samsa.protocol.codec import (
    MalformedRequestError,
    Request,
    decode_request,
    peek_key_and_version,
)
from samsa.security.principal import USER_TYPE, KafkaPrincipal
from samsa.security.sasl.errors import SaslAuthenticationError, SaslError
from samsa.security.sasl.listener import ListenerSasl, SaslServer
from samsa.security.sasl.scram import CredentialLookup

log = logging.getLogger(__name__)

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
_SIZE = struct.Struct(">i")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

HANDSHAKE, AUTHENTICATE, BAD_MECHANISM, COMPLETE = ("handshake", "authenticate",
                                                    "bad mechanism", "complete")


class AuthenticationFailed(Exception):
    """The exchange failed: ``reason`` is logged, ``response`` (frames) is the answer sent, after
    the failed-authentication delay when ``delayed``; then the connection closes."""

    def __init__(self, reason: str, response: list[Any] | None = None,
                 delayed: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.response = response
        self.delayed = delayed


class SaslConnection(Protocol):
    """What the exchange needs of its connection."""

    peer: str
    principal: KafkaPrincipal

    @property
    def listener_name(self) -> str: ...

    def limit_requests(self, limit: int | None) -> None:
        """Frames larger than ``limit`` fail the authentication (None: the usual limit)."""


Dispatch = Callable[[Any, Any], Awaitable[list[Any] | None]]


def api_name(key: int) -> str:
    """Kafka's name of an API key as its ApiKeys enum writes it (METADATA, SASL_HANDSHAKE)."""
    api = APIS.get(key)
    return _CAMEL.sub("_", api.name).upper() if api is not None else str(key)


class SaslServerAuthenticator:
    def __init__(self, connection: SaslConnection, sasl: ListenerSasl,
                 credentials: CredentialLookup, dispatch: Dispatch) -> None:
        self._connection = connection
        self.sasl = sasl
        self._credentials = credentials
        self._dispatch = dispatch
        self.state = HANDSHAKE
        self._raw = False  # SaslHandshake v0: tokens without Kafka headers
        self._server: SaslServer | None = None
        self.mechanism: str | None = None
        self.expires_at: float | None = None  # time.monotonic() when the session ends
        self._reauth_started: float | None = None
        self._previous: tuple[str, KafkaPrincipal] | None = None  # re-authenticating: of the
        self._bad_mechanism = ""  # session before
        self.authentications = 0
        connection.limit_requests(sasl.max_receive_size)

    @property
    def authenticating(self) -> bool:
        """Before the first authentication completed (frames are bounded) or re-authenticating."""
        return self.state != COMPLETE

    @property
    def _what(self) -> str:
        return "re-authentication" if self._previous is not None else "authentication"

    def intercepts(self, frame: bytes | memoryview) -> bool:
        """Whether ``frame`` goes to ``receive`` rather than straight to the dispatcher."""
        return self.state != COMPLETE or self.expires_at is not None

    async def receive(self, frame: bytes | memoryview) -> list[Any] | None:
        if self.state == COMPLETE:
            return await self._authenticated(frame)
        if self.state == HANDSHAKE:
            return await self._handshake_or_versions(frame)
        if self.state == BAD_MECHANISM:
            raise self._failed(self._bad_mechanism)
        if self._raw:
            return await self._raw_token(frame)
        return await self._authenticate(frame)

    # --- states ---------------------------------------------------------------------------

    async def _authenticated(self, frame: bytes | memoryview) -> list[Any] | None:
        """A request on an authenticated connection whose session has an end."""
        now = time.monotonic()
        key = _SIZE.unpack_from(frame, 0)[0] >> 16 if len(frame) >= 4 else -1
        if key == SASL_HANDSHAKE and (self._reauth_started is None
                                      or now - self._reauth_started >= MIN_REAUTH_INTERVAL_S):
            self._reauth_started = now
            assert self.mechanism is not None
            self._previous = (self.mechanism, self._connection.principal)
            self.state = HANDSHAKE
            log.debug("%s begins re-authentication on listener %s", self._connection.peer,
                      self.sasl.listener_name)
            return await self._handshake_or_versions(frame)
        if self.expires_at is not None and now >= self.expires_at:
            raise CloseConnection(
                f"the SASL session of {self._connection.principal} on listener "
                f"{self.sasl.listener_name} expired without re-authentication "
                f"(connections.max.reauth.ms or the credential's lifetime)")
        return await self._dispatch(frame, self._connection)

    async def _handshake_or_versions(self, frame: bytes | memoryview) -> list[Any] | None:
        try:
            key, _version = peek_key_and_version(bytes(frame[:4]))
        except MalformedRequestError:
            key = -1
        if key == API_VERSIONS:
            return await self._dispatch(frame, self._connection)
        if key != SASL_HANDSHAKE:
            if key in APIS:
                reason = (f"Unexpected Kafka request of type {api_name(key)} during SASL "
                          "handshake.")
            else:  # no Kafka request: a SASL token without the handshake, TLS, HTTP, ...
                reason = ("Invalid request, potential reasons: kafka client configured with "
                          "the wrong security protocol, it does not support KIP-43 or it is "
                          "not a kafka client.")
            raise self._failed(reason, delayed=False)
        request = self._decode(frame)
        mechanism = request.body.mechanism
        enabled = list(self.sasl.mechanisms)
        if mechanism not in enabled:
            raise self._failed(
                f"Unsupported SASL mechanism {mechanism} (enabled: {', '.join(enabled)})",
                self._respond(request, {"error_code": ErrorCode.unsupported_sasl_mechanism,
                                        "mechanisms": enabled}))
        response = self._respond(request, {"error_code": ErrorCode.none, "mechanisms": enabled})
        if self._previous is not None and mechanism != self._previous[0]:
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                   f"supported for re-authentication of mechanism "
                                   f"'{self._previous[0]}'")
            self.state = BAD_MECHANISM
            return response
        self.mechanism = mechanism
        self._server = self.sasl.server(mechanism, self._credentials)
        self._raw = request.api_version == 0
        self.state = AUTHENTICATE
        return response

    async def _authenticate(self, frame: bytes | memoryview) -> list[Any]:
        request = self._decode(frame)
        if request.api_key != SASL_AUTHENTICATE:
            reason = (f"Unexpected Kafka request of type {api_name(request.api_key)} during "
                      "SASL authentication.")
            error = None
            if request.api_key == SASL_HANDSHAKE:
                error = self._respond(request, {"error_code": ErrorCode.illegal_sasl_state,
                                                "mechanisms": list(self.sasl.mechanisms)})
            elif request.api_key == API_VERSIONS:
                error = self._respond(request, {"error_code": ErrorCode.illegal_sasl_state,
                                                "api_keys": [], "throttle_time": 0})
            raise self._failed(reason, error)
        server = self._server
        assert server is not None
        try:
            answer = await server.evaluate(bytes(request.body.auth_bytes))
        except SaslError as exc:
            message = self._client_message(exc)
            raise self._failed(self._reason(message, exc, server), self._respond(request, {
                "error_code": ErrorCode.sasl_authentication_failed, "error_message": message,
                "auth_bytes": b"", "session_lifetime": 0})) from None
        lifetime = 0
        if server.complete:
            lifetime = self._complete(server, request)
        return self._respond(request, {"error_code": ErrorCode.none, "error_message": None,
                                       "auth_bytes": answer, "session_lifetime": lifetime})

    async def _raw_token(self, frame: bytes | memoryview) -> list[Any]:
        """SaslHandshake v0's framing: the token is the whole frame, the answer too."""
        server = self._server
        assert server is not None
        try:
            answer = await server.evaluate(bytes(frame))
        except SaslError as exc:
            raise self._failed(self._reason(self._client_message(exc), exc, server)) from None
        if server.complete:
            self._complete(server, None)
        return [_SIZE.pack(len(answer)), answer]

    # --- helpers ----------------------------------------------------------------------------

    def _complete(self, server: SaslServer, request: Request | None) -> int:
        """The exchange succeeded: the principal, the session's end; its lifetime in ms."""
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self._previous is not None and principal != self._previous[1]:
            before = self._previous[1]
            message = (f"Cannot change principals during re-authentication from "
                       f"{before.principal_type}.{before.name}: "
                       f"{principal.principal_type}.{principal.name}")
            raise self._failed(message, None if request is None else self._respond(request, {
                "error_code": ErrorCode.sasl_authentication_failed, "error_message": message,
                "auth_bytes": b"", "session_lifetime": 0}))
        lifetime = self._session_lifetime_ms(server)
        self._connection.principal = principal
        self.state = COMPLETE
        self.authentications += 1
        self._server = None
        if self._previous is None:
            self._connection.limit_requests(None)
        log.debug("%s %s on listener %s as %s (%s, session %s)", self._connection.peer,
                  "re-authenticated" if self._previous is not None else "authenticated",
                  self.sasl.listener_name, principal, self.mechanism,
                  f"{lifetime} ms" if self.expires_at is not None else "unbounded")
        self._previous = None
        return lifetime

    def _session_lifetime_ms(self, server: SaslServer) -> int:
        """Kafka's ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs."""
        assert self.mechanism is not None
        max_reauth = self.sasl.reauth_ms.get(self.mechanism, 0)
        expiration = server.credential_expiration_ms
        if expiration is None and max_reauth <= 0:
            self.expires_at = None
            return 0
        left = None if expiration is None else max(0, int(expiration - time.time() * 1000))
        if left is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = left
        else:
            lifetime = min(left, max_reauth)
        self.expires_at = time.monotonic() + lifetime / 1000
        return lifetime

    def _decode(self, frame: bytes | memoryview) -> Request:
        try:
            request = decode_request(frame)
        except MalformedRequestError as exc:
            raise self._failed(f"{exc} during SASL {self._what}", delayed=False) from None
        api = APIS.get(request.api_key)
        if api is None or not api.supports(request.api_version) or request.body is None:
            raise self._failed(f"Version {request.api_version} is not supported for apiKey "
                               f"{api_name(request.api_key)}", delayed=False)
        return request

    @staticmethod
    def _respond(request: Request, data: dict[str, Any]) -> list[Any]:
        return response_writer.encode(request.api_key, request.api_version,
                                      request.correlation_id, data)

    def _client_message(self, exc: SaslError) -> str:
        if isinstance(exc, SaslAuthenticationError):
            return str(exc)
        return (f"Authentication failed during {self._what} due to invalid credentials with "
                f"SASL mechanism {self.mechanism}")

    @staticmethod
    def _reason(message: str, exc: SaslError, server: SaslServer) -> str:
        detail = getattr(server, "failure_detail", None) or (
            None if isinstance(exc, SaslAuthenticationError) else str(exc))
        return f"{message} ({detail})" if detail and detail != message else message

    def _failed(self, reason: str, response: list[Any] | None = None,
                delayed: bool = True) -> AuthenticationFailed:
        where = f"listener {self.sasl.listener_name}"
        if self.mechanism is not None and self.state != HANDSHAKE:
            where += f", {self.mechanism}"
        if self._previous is not None:
            where += ", re-authentication"
        return AuthenticationFailed(f"{where}: {reason}", response, delayed)
