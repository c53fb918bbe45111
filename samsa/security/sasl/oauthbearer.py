"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer speaks it, with Kafka's two
token validators.

The client's one message is ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01]*
\\x01``. A token that validates completes the exchange (the principal is the token's subject;
its expiry bounds the session, KIP-368). One that does not is answered, as RFC 7628 says, with
an error challenge ``{"status":"invalid_token"}`` in a successful SaslAuthenticate response;
the client then sends ``\\x01`` and the exchange fails with that JSON as its message.

Validators (Kafka's ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``):

* ``UnsecuredValidator`` (OAuthBearerUnsecuredValidatorCallbackHandler, Kafka's default; for
  development only: it trusts any well-formed token). An unsigned JWS ``<header>.<claims>.``
  whose header has ``"alg":"none"``, with the principal claim (``sub``) and ``exp``; ``iat``
  and ``exp`` checked against the clock with the allowed skew; a required scope if configured.
  Its JAAS options: ``unsecuredValidatorPrincipalClaimName``,
  ``unsecuredValidatorScopeClaimName``, ``unsecuredValidatorRequiredScope``,
  ``unsecuredValidatorAllowableClockSkewMs``. It is what confluent-kafka's
  ``sasl.oauthbearer.config=principal=alice`` (unsecured JWT) logs in with.
* ``JwksValidator`` (OAuthBearerValidatorCallbackHandler, KIP-768): a JWT signed by a key of
  the JWKS at ``sasl.oauthbearer.jwks.endpoint.url`` (``file://`` read at start and again when a
  token names an unknown key; ``http(s)://`` fetched on first use, every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` and when a token names an unknown key), checked
  with PyJWT: the signature (never ``alg: none``), ``exp`` and ``iat`` required, the expected
  audience and issuer if configured, ``sasl.oauthbearer.clock.skew.seconds``; the principal is
  the ``sasl.oauthbearer.sub.claim.name`` claim.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from samsa.config import ConfigError
from samsa.security.sasl.errors import SaslAuthenticationError, SaslError

log = logging.getLogger(__name__)

OAUTHBEARER = "OAUTHBEARER"
UNSECURED_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler",
    "samsa.security.sasl.oauthbearer.UnsecuredValidator",
)
JWKS_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    # its name in Kafka 3.1 to 3.3
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    "samsa.security.sasl.oauthbearer.JwksValidator",
)
_SEPARATOR = "\x01"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # no bare = or ,
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.DOTALL)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
# how long a JWKS URL that failed is left alone before it is asked again
_JWKS_RETRY_S = 1.0
_JWKS_FETCH_TIMEOUT_S = 10.0


class TokenInvalid(Exception):
    """A token the validator refuses: ``status`` for the client (RFC 7628), ``reason`` for
    the broker's log."""

    def __init__(self, reason: str, status: str = "invalid_token",
                 scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope

    def json(self) -> str:
        """Kafka's jsonErrorResponse."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


@dataclass(frozen=True)
class ValidatedToken:
    principal: str
    expiration_ms: int
    scope: frozenset[str] = frozenset()


class Validator(Protocol):
    async def validate(self, token: str) -> ValidatedToken: ...


def parse_initial_response(response: bytes) -> tuple[str, str, dict[str, str]]:
    """(authorization id, token, extensions) of a client's first message (Kafka's
    OAuthBearerClientInitialResponse); SaslError if it is not one."""
    text = response.decode("utf-8", errors="replace")
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise SaslError("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in filter(None, match.group("kvpairs").split(_SEPARATOR)):
        key, _, value = pair.partition("=")
        properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    found = _AUTH.fullmatch(auth)
    if found is None:
        raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if found.group("scheme").lower() != "bearer":
        raise SaslError(f"Invalid scheme in OAUTHBEARER client first message: "
                        f"{found.group('scheme')}")
    return match.group("authzid") or "", found.group("token"), properties


def initial_response(token: str, authorization_id: str = "",
                     extensions: Mapping[str, str] | None = None) -> bytes:
    """A client's first message (the broker's own connections, tests)."""
    authzid = f"a={authorization_id}" if authorization_id else ""
    pairs = "".join(f"{k}={v}{_SEPARATOR}" for k, v in (extensions or {}).items())
    return f"n,{authzid},{_SEPARATOR}auth=Bearer {token}{_SEPARATOR}{pairs}{_SEPARATOR}".encode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_json(part: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise TokenInvalid(f"a part of the token is not Base64URL-encoded JSON: {exc}") from None


def unsecured_token(principal: str, lifetime_s: float = 3600.0,
                    claims: Mapping[str, Any] | None = None,
                    principal_claim: str = "sub") -> str:
    """An unsecured JWS (``alg: none``), as Kafka's OAuthBearerUnsecuredLoginCallbackHandler
    and librdkafka make them (development only)."""
    now = time.time()
    body = {principal_claim: principal, "iat": int(now), "exp": int(now + lifetime_s),
            **(claims or {})}
    header = _b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{_b64url(json.dumps(body).encode())}."


def _scope(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(str(v) for v in value)
    return frozenset()


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler."""

    def __init__(self, principal_claim: str = "sub", scope_claim: str = "scope",
                 required_scope: Sequence[str] = (), clock_skew_ms: int = 0) -> None:
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.required_scope = frozenset(required_scope)
        self.clock_skew_ms = clock_skew_ms

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> UnsecuredValidator:
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ConfigError(f"Invalid value {skew} for the JAAS option "
                              "unsecuredValidatorAllowableClockSkewMs: not an integer") from None
        return cls(options.get("unsecuredValidatorPrincipalClaimName") or "sub",
                   options.get("unsecuredValidatorScopeClaimName") or "scope",
                   (options.get("unsecuredValidatorRequiredScope") or "").split(), skew_ms)

    async def validate(self, token: str) -> ValidatedToken:
        return self.validate_now(token)

    def validate_now(self, token: str, now_ms: float | None = None) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenInvalid("Unsecured JWS compact serializations must have 3 dot-separated "
                               "Base64URL-encoded values")
        if parts[2]:
            raise TokenInvalid("Unsecured JWS must not contain a digital signature")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenInvalid("the JWS header and claims must be JSON objects")
        if header.get("alg") != "none":
            raise TokenInvalid("Unsecured JWS must use 'none' as an algorithm")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"No principal name in JWT claim: {self.principal_claim}")
        expiration = claims.get("exp")
        if not isinstance(expiration, int | float) or isinstance(expiration, bool):
            raise TokenInvalid("No expiration time in JWT (the exp claim)")
        issued_at = claims.get("iat")
        if issued_at is not None and (not isinstance(issued_at, int | float)
                                      or isinstance(issued_at, bool)):
            raise TokenInvalid("The Issued At claim (iat) is not a number")
        now = time.time() * 1000 if now_ms is None else now_ms
        skew = self.clock_skew_ms
        if issued_at is not None and issued_at * 1000 > now + skew:
            raise TokenInvalid(f"The Issued At value ({issued_at} seconds) is after the current "
                               f"time ({now:.0f} ms) plus allowable clock skew ({skew} ms)")
        if expiration * 1000 <= now - skew:
            raise TokenInvalid(f"The indicated time ({now:.0f} ms) minus allowable clock skew "
                               f"({skew} ms) is on or after the Expiration Time value "
                               f"({expiration} seconds)")
        if issued_at is not None and expiration <= issued_at:
            raise TokenInvalid(f"The Expiration Time time ({expiration} seconds) is not after "
                               f"the Issued At time ({issued_at} seconds)")
        scope = _scope(claims.get(self.scope_claim))
        missing = self.required_scope - scope
        if missing:
            raise TokenInvalid(f"The provided scope ({' '.join(sorted(scope))}) was missing a "
                               f"required scope ({' '.join(sorted(missing))})",
                               "insufficient_scope", " ".join(sorted(self.required_scope)))
        return ValidatedToken(principal, int(expiration * 1000), scope)


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler (KIP-768), on PyJWT."""

    def __init__(self, url: str, refresh_ms: int = 3600000,
                 audiences: Sequence[str] = (), issuer: str | None = None,
                 sub_claim: str = "sub", scope_claim: str = "scope",
                 clock_skew_s: int = 30) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("file", "http", "https"):
            raise ConfigError(f"Invalid value {url} for configuration "
                              "sasl.oauthbearer.jwks.endpoint.url: a file://, http:// or "
                              "https:// URL is expected")
        self.url = url
        self._file = Path(unquote(parts.path)) if parts.scheme == "file" else None
        self.refresh_s = refresh_ms / 1000
        self.audiences = list(audiences)
        self.issuer = issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.clock_skew_s = clock_skew_s
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._loaded_at = float("-inf")
        self._tried_at = float("-inf")
        self._lock = asyncio.Lock()
        self._cache: dict[tuple[str | None, str], Any] = {}
        import jwt  # noqa: F401  (PyJWT: imported where a JWKS validator is configured)

        if self._file is not None:
            try:
                self._set_keys(self._read())
            except (OSError, ValueError) as exc:
                raise ConfigError(f"Invalid value {url} for configuration "
                                  f"sasl.oauthbearer.jwks.endpoint.url: {exc}") from None

    def _read(self) -> dict[str, Any]:
        if self._file is not None:
            data = json.loads(self._file.read_text())
        else:
            import urllib.request  # (http.client: only where a JWKS URL is configured)

            with urllib.request.urlopen(self.url, timeout=_JWKS_FETCH_TIMEOUT_S) as answer:
                data = json.loads(answer.read())
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise ValueError("a JWKS is a JSON object with a keys array")
        return data

    def _set_keys(self, data: dict[str, Any]) -> None:
        keys = [k for k in data["keys"] if isinstance(k, dict) and k.get("use", "sig") == "sig"]
        self._keys = {k.get("kid"): k for k in keys}
        self._cache.clear()
        self._loaded_at = time.monotonic()

    async def _refresh(self, why: str) -> None:
        async with self._lock:
            now = time.monotonic()
            if now - self._tried_at < _JWKS_RETRY_S:
                return
            self._tried_at = now
            try:
                data = await asyncio.get_running_loop().run_in_executor(None, self._read)
                self._set_keys(data)
                log.info("JWKS keys (re)loaded from %s (%s): %d keys", self.url, why,
                         len(self._keys))
            except (OSError, ValueError) as exc:
                log.warning("cannot load the JWKS keys from %s (%s): %s", self.url, why, exc)

    async def validate(self, token: str) -> ValidatedToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenInvalid(f"Malformed JWT provided: {exc}") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise TokenInvalid("JWT algorithm 'none' (unsigned tokens) is not accepted")
        kid = header.get("kid")
        if self._file is None and time.monotonic() - self._loaded_at > self.refresh_s:
            await self._refresh("refresh interval")
        if kid not in self._keys and not (kid is None and len(self._keys) == 1):
            await self._refresh(f"unknown key id {kid}")
        jwk = self._keys.get(kid)
        if jwk is None and kid is None and len(self._keys) == 1:
            jwk = next(iter(self._keys.values()))
        if jwk is None:
            raise TokenInvalid(f"No JWKS key with key id {kid!r} (from {self.url})")
        if jwk.get("alg") not in (None, algorithm):
            raise TokenInvalid(f"The token's algorithm {algorithm} is not its key's "
                               f"({jwk.get('alg')})")
        key = self._cache.get((kid, algorithm))
        if key is None:
            try:
                key = self._cache[(kid, algorithm)] = jwt.PyJWK(jwk, algorithm)
            except jwt.PyJWTError as exc:
                raise TokenInvalid(f"Unusable JWKS key {kid!r} for {algorithm}: {exc}") \
                    from None
        try:
            claims = jwt.decode(
                token, key, algorithms=[algorithm], audience=self.audiences or None,
                issuer=self.issuer, leeway=self.clock_skew_s,
                options={"require": ["exp", "iat"], "verify_aud": bool(self.audiences)})
        except jwt.PyJWTError as exc:
            raise TokenInvalid(f"JWT validation failed: {type(exc).__name__}: {exc}") from None
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenInvalid(f"The JWT has no {self.sub_claim} claim naming its principal")
        return ValidatedToken(principal, int(float(claims["exp"]) * 1000),
                              _scope(claims.get(self.scope_claim)))


class OAuthBearerServer:
    mechanism_name = OAUTHBEARER

    def __init__(self, validator: Validator) -> None:
        self._validator = validator
        self.complete = False
        self.authorization_id = ""
        self.credential_expiration_ms: int | None = None
        self._error: TokenInvalid | None = None
        self.failure_detail: str | None = None  # why the token was refused, for the log

    async def evaluate(self, response: bytes) -> bytes:
        if response == _SEPARATOR.encode() and self._error is not None:
            # the client's answer to our error challenge: the exchange fails
            self.failure_detail = self._error.reason
            raise SaslAuthenticationError(self._error.json())
        self._error = None
        authzid, token, _extensions = parse_initial_response(response)
        try:
            found = await self._validator.validate(token)
        except TokenInvalid as exc:
            self._error = exc
            return exc.json().encode()
        if authzid and authzid != found.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({found.principal})")
        self.authorization_id = found.principal
        self.credential_expiration_ms = found.expiration_ms
        self.complete = True
        return b""
