"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them, without I/O.

* ``ScramMechanism``: Kafka's two mechanisms, their wire codes (AlterUserScramCredentials) and
  bounds on iterations (at least 4096; at most 16384 through the admin API).
* ``ScramCredential``: what a broker stores of a password (salt, StoredKey, ServerKey,
  iterations), in Kafka's text form ``salt=<b64>,stored_key=<b64>,server_key=<b64>,
  iterations=<n>`` (ScramCredentialUtils), from a password or from the salted password an
  admin client sends.
* ``ScramServer``: the server side of one exchange (Kafka's ScramSaslServer): client-first
  ``n,[a=<authzid>],n=<user>,r=<nonce>[,extensions]``, server-first ``r=<nonce>,s=<salt>,
  i=<iterations>``, client-final ``c=<channel binding>,r=<nonce>,p=<proof>``, server-final
  ``v=<signature>``. No channel binding (the gs2 header is ``n``), no SASLprep (Kafka
  normalizes nothing either); the ``tokenauth`` extension (delegation tokens) is refused. The
  final nonce must be the server-first one or, as Kafka 3.8.1 to 3.9 accept it, the client
  nonce followed by it (what librdkafka before 2.6.1 sends, Debian's kcat among them).
* ``ScramClient``: the client side, for the broker's own connections to other brokers.

Kafka's failure rules: a ``SaslAuthenticationError`` message reaches the client; any other
failure (``SaslError``) reaches it as "Authentication failed during authentication due to
invalid credentials with SASL mechanism ...", its reason only in the broker's log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from samsa.security.sasl.errors import SaslAuthenticationError, SaslError

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384  # what AlterUserScramCredentials accepts (Kafka's maxIterations)
DEFAULT_ITERATIONS = 4096  # kafka-configs' default


class ScramMechanism(Enum):
    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, code: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.code = code  # Kafka's ScramMechanism.type: the wire code

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def by_code(cls, code: int) -> ScramMechanism | None:
        return next((m for m in cls if m.code == code), None)

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2 with HMAC of this hash (Kafka's ScramFormatter.hi)."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


SCRAM_MECHANISMS = tuple(m.mechanism_name for m in ScramMechanism)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes,
                             salted_password: bytes, iterations: int) -> ScramCredential:
        """Kafka's ScramFormatter.generateCredential (what AlterUserScramCredentials sends)."""
        client_key = mechanism.hmac(salted_password, b"Client Key")
        server_key = mechanism.hmac(salted_password, b"Server Key")
        return cls(salt, mechanism.hash(client_key), server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str,
                      iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
                      ) -> ScramCredential:
        salt = os.urandom(32) if salt is None else salt
        return cls.from_salted_password(
            mechanism, salt, mechanism.salted_password(password, salt, iterations), iterations)

    def to_string(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString (how ZooKeeper keeps it)."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils.credentialFromString (ValueError: not one)."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"invalid SCRAM credential {text!r}: {part!r} is not key=value")
            fields[key] = value
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"invalid SCRAM credential: keys {sorted(fields)}")
        try:
            return cls(_unb64(fields["salt"]), _unb64(fields["stored_key"]),
                       _unb64(fields["server_key"]), int(fields["iterations"]))
        except ValueError as exc:
            raise ValueError(f"invalid SCRAM credential: {exc}") from None


# (user, mechanism name) -> the user's credential of that mechanism, or None
CredentialLookup = Callable[[str, str], "ScramCredential | None"]

# --- messages (RFC 5802 section 7, as Kafka's ScramMessages read them) -----------------------

_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"  # the nonce: no comma
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_RESERVED = r"(m=[^\x00,]*,)?"
_EXTENSIONS = r"(,[A-Za-z]+=[^,]*)*"
_NAME = r"(?:[^=,]|=2C|=3D)+"
_CLIENT_FIRST = re.compile(
    rf"n,(a=(?P<authzid>{_NAME}))?,(?P<bare>{_RESERVED}n=(?P<saslname>{_NAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))", re.DOTALL)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS})),p=(?P<proof>{_BASE64})", re.DOTALL)
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)"
    rf"{_EXTENSIONS}", re.DOTALL)
_SERVER_FINAL = re.compile(rf"(e=(?P<error>[^,]*)|v=(?P<signature>{_BASE64})){_EXTENSIONS}",
                           re.DOTALL)


def sasl_name(username: str) -> str:
    """A user name as a SCRAM saslname (``,`` and ``=`` escaped)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username(saslname: str) -> str:
    """The user name a saslname stands for (Kafka's ScramFormatter.username)."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise SaslError(f"Invalid username: {saslname}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _server_nonce() -> str:
    return secrets.token_urlsafe(24)  # letters, digits, - and _: printable, no comma


class ScramServer:
    """One SCRAM exchange on the server side. ``evaluate`` takes each client message and
    returns the server's; ``complete`` once the client's proof checked."""

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup,
                 nonce: Callable[[], str] = _server_nonce) -> None:
        self.mechanism = mechanism
        self.mechanism_name = mechanism.mechanism_name
        self._credentials = credentials
        self._nonce = nonce
        self.complete = False
        self.authorization_id = ""
        self.credential_expiration_ms: int | None = None  # SCRAM credentials do not expire
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._client_nonce = ""
        self._server_first = ""
        self._gs2_header = ""

    async def evaluate(self, response: bytes) -> bytes:
        return self.evaluate_now(response)

    def evaluate_now(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise SaslError(f"Unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslError("Invalid SCRAM client first message format")
        for extension in filter(None, (match.group("extensions") or "").split(",")):
            name, _, value = extension.partition("=")
            if name == "tokenauth" and value.lower() == "true":
                raise SaslError("Delegation token authentication (tokenauth) is not supported")
        user = username(match.group("saslname"))
        credential = self._credentials(user, self.mechanism_name)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = match.group("authzid")
        if authzid and username(authzid) != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum "
                            f"{MIN_ITERATIONS} for {self.mechanism_name}")
        self.authorization_id = user
        self._credential = credential
        self._gs2_header = text[: match.start("bare")]
        self._client_first_bare = match.group("bare")
        self._client_nonce = match.group("nonce")
        self._server_first = (f"r={match.group('nonce')}{self._nonce()},"
                              f"s={_b64(credential.salt)},i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslError("Invalid SCRAM client final message format")
        nonce = self._server_first.split(",", 1)[0][2:]
        # librdkafka before 2.6.1 repeats its own nonce before the server-first one
        # (librdkafka#4895); Kafka 3.8.1 to 3.9 accept it (endsWith), so does samsa: only that
        if match.group("nonce") not in (nonce, self._client_nonce + nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        if _unb64(match.group("channel")) != self._gs2_header.encode():
            raise SaslError("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = (f"{self._client_first_bare},{self._server_first},"
                        f"{match.group('without_proof')}").encode()
        try:
            proof = _unb64(match.group("proof"))
        except ValueError:
            raise SaslError("Invalid client proof") from None
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature) or not hmac.compare_digest(
                self.mechanism.hash(_xor(proof, signature)), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        self.complete = True
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """One SCRAM exchange on the client side (the broker's own connections)."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.mechanism_name = mechanism.mechanism_name
        self._password = password
        self._client_nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={sasl_name(user)},r={self._client_nonce}"
        self._server_signature = b""
        self.complete = False
        self._state = "initial"

    def first_message(self) -> bytes:
        self._state = "first"
        return f"n,,{self._client_first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The answer to the server's message (None: nothing more to send)."""
        text = challenge.decode("utf-8", errors="replace")
        if self._state == "first":
            match = _SERVER_FIRST.fullmatch(text)
            if match is None:
                raise SaslError(f"Invalid SCRAM server first message: {text!r}")
            nonce = match.group("nonce")
            if not nonce.startswith(self._client_nonce) or nonce == self._client_nonce:
                raise SaslError("Invalid server nonce: it does not start with the client nonce")
            iterations = int(match.group("iterations"))
            if iterations < MIN_ITERATIONS:
                raise SaslError(f"Requested iterations {iterations} is less than the minimum "
                                f"{MIN_ITERATIONS} for {self.mechanism_name}")
            salted = self.mechanism.salted_password(self._password, _unb64(match.group("salt")),
                                                    iterations)
            without_proof = f"c={_b64(b'n,,')},r={nonce}"
            auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
            client_key = self.mechanism.hmac(salted, b"Client Key")
            signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
            self._server_signature = self.mechanism.hmac(
                self.mechanism.hmac(salted, b"Server Key"), auth_message)
            self._state = "final"
            return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()
        if self._state == "final":
            match = _SERVER_FINAL.fullmatch(text)
            if match is None:
                raise SaslError(f"Invalid SCRAM server final message: {text!r}")
            if match.group("error") is not None:
                raise SaslError(f"SCRAM server error: {match.group('error')}")
            if not hmac.compare_digest(_unb64(match.group("signature")), self._server_signature):
                raise SaslError("Invalid server signature in the server final message")
            self._state = "complete"
            self.complete = True
            return None
        raise SaslError(f"Unexpected SCRAM server message in state {self._state}")
