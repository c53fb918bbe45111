"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it: one message
``authzid NUL username NUL password``, checked against the ``user_<name>="<password>"`` options
of the listener's PlainLoginModule (Kafka's PlainServerCallbackHandler), in constant time.
The authorization id, if given, must be the user name."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from samsa.security.sasl.errors import SaslAuthenticationError

PLAIN = "PLAIN"
USER_PREFIX = "user_"  # Kafka's PlainServerCallbackHandler.JAAS_USER_PREFIX


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """user -> password from a PlainLoginModule's options."""
    return {k[len(USER_PREFIX):]: v for k, v in options.items()
            if k.startswith(USER_PREFIX) and len(k) > len(USER_PREFIX)}


class PlainServer:
    mechanism_name = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""
        self.credential_expiration_ms: int | None = None

    async def evaluate(self, response: bytes) -> bytes:
        return self.evaluate_now(response)

    def evaluate_now(self, response: bytes) -> bytes:
        tokens = response.decode("utf-8", errors="replace").split("\0")
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compared in constant time, and as long for an unknown user as for a known one
        known = expected is not None
        if not hmac.compare_digest(password.encode(), (expected or password + "x").encode()) \
                or not known:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""


def plain_client_message(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()
