"""The SASL mechanisms without sockets: SCRAM against RFC 7677's example exchange and Kafka's
credential format, PLAIN's checks and messages, OAUTHBEARER's client message, Kafka's unsecured
validator, and the JWKS validator with tokens signed by a key made for the test (a JWKS file
and a JWKS served over HTTP)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from samsa.config import ConfigError
from samsa.security.sasl import oauthbearer
from samsa.security.sasl.errors import SaslAuthenticationError, SaslError
from samsa.security.sasl.oauthbearer import (
    JwksValidator,
    OAuthBearerServer,
    TokenInvalid,
    UnsecuredValidator,
    initial_response,
    parse_initial_response,
    unsecured_token,
)
from samsa.security.sasl.plain import PlainServer, plain_client_message
from samsa.security.sasl.scram import (
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    sasl_name,
    username,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# --- SCRAM --------------------------------------------------------------------------------------

# RFC 7677 section 3: user "user", password "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credentials(user: str, mechanism: str) -> ScramCredential | None:
    if user != "user" or mechanism != "SCRAM-SHA-256":
        return None
    return ScramCredential.from_password(SHA256, "pencil", 4096, RFC_SALT)


def test_scram_server_follows_rfc_7677() -> None:
    server = ScramServer(SHA256, rfc_credentials, nonce=lambda: RFC_SERVER_NONCE)
    assert server.evaluate_now(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate_now(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_scram_client_follows_rfc_7677() -> None:
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.evaluate(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.evaluate(RFC_SERVER_FINAL) is None and client.complete
    forged = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    forged.first_message()
    forged.evaluate(RFC_SERVER_FIRST)
    with pytest.raises(SaslError, match="server signature"):
        forged.evaluate(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
@pytest.mark.parametrize("user", ["alice", "a,b=c", "ünï"])
def test_scram_client_and_server_agree(mechanism: ScramMechanism, user: str) -> None:
    stored = ScramCredential.from_password(mechanism, "s3cret", 8192)

    def lookup(name: str, mech: str) -> ScramCredential | None:
        return stored if (name, mech) == (user, mechanism.mechanism_name) else None

    client, server = ScramClient(mechanism, user, "s3cret"), ScramServer(mechanism, lookup)
    answer = client.evaluate(server.evaluate_now(client.first_message()))
    assert answer is not None
    assert client.evaluate(server.evaluate_now(answer)) is None
    assert client.complete and server.complete and server.authorization_id == user


def exchange(server: ScramServer, client: ScramClient) -> None:
    answer = client.evaluate(server.evaluate_now(client.first_message()))
    assert answer is not None
    server.evaluate_now(answer)


def test_scram_failures() -> None:
    stored = ScramCredential.from_password(SHA256, "right")

    def lookup(name: str, mech: str) -> ScramCredential | None:
        return stored if name == "alice" else None

    with pytest.raises(SaslError, match="Invalid client credentials") as wrong:
        exchange(ScramServer(SHA256, lookup), ScramClient(SHA256, "alice", "wrong"))
    assert not isinstance(wrong.value, SaslAuthenticationError)  # the client is not told why
    with pytest.raises(SaslError, match="Invalid user credentials"):
        exchange(ScramServer(SHA256, lookup), ScramClient(SHA256, "mallory", "right"))
    server = ScramServer(SHA256, lookup)
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        server.evaluate_now(b"n,a=bob,n=alice,r=abc")
    with pytest.raises(SaslError, match="tokenauth"):
        ScramServer(SHA256, lookup).evaluate_now(b"n,,n=alice,r=abc,tokenauth=true")
    for bad in (b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n=alice,r=abc", b"\xff"):
        with pytest.raises(SaslError):
            ScramServer(SHA256, lookup).evaluate_now(bad)
    # the nonce and the channel binding of the final message are checked
    server = ScramServer(SHA256, lookup, nonce=lambda: "server")
    server.evaluate_now(b"n,,n=alice,r=client")
    with pytest.raises(SaslError, match="nonce"):
        server.evaluate_now(b"c=biws,r=clientother,p=" + base64.b64encode(b"x" * 32))
    server = ScramServer(SHA256, lookup, nonce=lambda: "server")
    server.evaluate_now(b"n,,n=alice,r=client")
    with pytest.raises(SaslError, match="nonce"):  # only the server's part: not an echo
        server.evaluate_now(b"c=biws,r=server,p=" + base64.b64encode(b"x" * 32))
    server = ScramServer(SHA256, lookup, nonce=lambda: "server")
    server.evaluate_now(b"n,,n=alice,r=client")
    with pytest.raises(SaslError, match="channel binding"):
        server.evaluate_now(b"c=eSws,r=clientserver,p=" + base64.b64encode(b"x" * 32))
    # fewer iterations than the minimum are never used, whatever was stored
    weak = ScramCredential.from_password(SHA256, "right", 1024)
    with pytest.raises(SaslError, match="less than the minimum 4096"):
        ScramServer(SHA256, lambda *_: weak).evaluate_now(b"n,,n=alice,r=abc")


def test_scram_accepts_old_librdkafkas_repeated_client_nonce() -> None:
    """librdkafka before 2.6.1 (librdkafka#4895) sends the client nonce again before the
    server-first nonce; Kafka 3.8.1 to 3.9 accept it, so does samsa."""
    stored = ScramCredential.from_password(SHA256, "pencil")
    server = ScramServer(SHA256, lambda *_: stored, nonce=lambda: "SRV")
    server_first = server.evaluate_now(b"n,,n=user,r=CLI")
    assert server_first.startswith(b"r=CLISRV,")
    # the old client's final message: its proof over what it sends
    salted = SHA256.salted_password("pencil", stored.salt, stored.iterations)
    without_proof = "c=biws,r=CLICLISRV"
    auth = f"n=user,r=CLI,{server_first.decode()},{without_proof}".encode()
    client_key = SHA256.hmac(salted, b"Client Key")
    signature = SHA256.hmac(SHA256.hash(client_key), auth)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    assert server.evaluate_now(final).startswith(b"v=") and server.complete


def test_scram_credential_in_kafkas_text_form() -> None:
    credential = ScramCredential.from_password(SHA512, "alice-secret", 8192, b"salty")
    text = credential.to_string()
    assert text.startswith(f"salt={base64.b64encode(b'salty').decode()},stored_key=")
    assert text.endswith(",iterations=8192")
    assert [part.split("=", 1)[0] for part in text.split(",")] == [
        "salt", "stored_key", "server_key", "iterations"]
    assert ScramCredential.from_string(text) == credential
    # what an admin client sends (the salted password) gives the same credential
    salted = SHA512.salted_password("alice-secret", b"salty", 8192)
    assert ScramCredential.from_salted_password(SHA512, b"salty", salted, 8192) == credential
    for bad in ("salt=x", "salt=@@,stored_key=,server_key=,iterations=1", "nonsense"):
        with pytest.raises(ValueError):
            ScramCredential.from_string(bad)


def test_sasl_names_escape_commas_and_equals() -> None:
    assert sasl_name("a,b=c") == "a=2Cb=3Dc"
    assert username("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(SaslError):
        username("a=b")


def test_mechanism_codes_are_kafkas() -> None:
    assert ScramMechanism.by_code(1) is SHA256 and ScramMechanism.by_code(2) is SHA512
    assert ScramMechanism.by_code(0) is None
    assert ScramMechanism.by_name("SCRAM-SHA-512") is SHA512


# --- PLAIN --------------------------------------------------------------------------------------


def test_plain() -> None:
    users = {"alice": "alice-secret"}
    server = PlainServer(users)
    assert server.evaluate_now(plain_client_message("alice", "alice-secret")) == b""
    assert server.complete and server.authorization_id == "alice"
    assert PlainServer(users).evaluate_now(b"alice\0alice\0alice-secret") == b""
    cases = {
        b"\0alice\0wrong": "Authentication failed: Invalid username or password",
        b"\0mallory\0alice-secret": "Authentication failed: Invalid username or password",
        b"\0\0alice-secret": "Authentication failed: username not specified",
        b"\0alice\0": "Authentication failed: password not specified",
        b"alice\0alice-secret": "Invalid SASL/PLAIN response: expected 3 tokens, got 2",
        b"bob\0alice\0alice-secret": "authorization id that is different from username",
    }
    for message, expected in cases.items():
        with pytest.raises(SaslAuthenticationError, match=expected):
            PlainServer(users).evaluate_now(message)


# --- OAUTHBEARER --------------------------------------------------------------------------------


def test_oauthbearer_client_first_message() -> None:
    message = initial_response("abc.def.", "alice", {"traceId": "123"})
    assert message == b"n,a=alice,\x01auth=Bearer abc.def.\x01traceId=123\x01\x01"
    assert parse_initial_response(message) == ("alice", "abc.def.", {"traceId": "123"})
    assert parse_initial_response(b"n,,\x01auth=Bearer t\x01\x01") == ("", "t", {})
    for bad in (b"n,,auth=Bearer t", b"n,,\x01auth=Basic t\x01\x01", b"n,,\x01x=y\x01\x01",
                b"y,,\x01auth=Bearer t\x01\x01"):
        with pytest.raises(SaslError):
            parse_initial_response(bad)


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None,
              signature: str = "") -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}.{signature}"


def test_unsecured_validator() -> None:
    now = time.time()
    validator = UnsecuredValidator()
    found = validator.validate_now(unsecured_token("alice", 60))
    assert found.principal == "alice" and abs(found.expiration_ms / 1000 - (now + 60)) < 5
    cases = {
        unsecured({"sub": "a", "exp": now + 60}, {"alg": "HS256"}): "'none' as an algorithm",
        unsecured({"sub": "a", "exp": now + 60}, signature="c2ln"): "digital signature",
        unsecured({"exp": now + 60}): "No principal name",
        unsecured({"sub": "a"}): "No expiration time",
        unsecured({"sub": "a", "exp": now - 10}): "on or after the Expiration Time",
        unsecured({"sub": "a", "exp": now + 600, "iat": now + 300}): "after the current time",
        "not-a-jwt": "3 dot-separated",
        "e30.bm90IGpzb24.": "Base64URL-encoded JSON",
    }
    for token, message in cases.items():
        with pytest.raises(TokenInvalid, match=message):
            validator.validate_now(token)
    # Kafka's JAAS options: another principal claim, a required scope, clock skew
    strict = UnsecuredValidator.from_options({
        "unsecuredValidatorPrincipalClaimName": "user",
        "unsecuredValidatorRequiredScope": "produce consume",
        "unsecuredValidatorAllowableClockSkewMs": "60000"})
    token = unsecured({"user": "bob", "exp": now - 10, "scope": "consume produce admin"})
    assert strict.validate_now(token).principal == "bob"  # expired 10 s ago, within the skew
    with pytest.raises(TokenInvalid, match="missing a required scope") as missing:
        strict.validate_now(unsecured({"user": "bob", "exp": now + 60, "scope": "consume"}))
    assert missing.value.json() == '{"status":"insufficient_scope", "scope":"consume produce"}'


def test_oauthbearer_server_answers_an_error_challenge_then_fails() -> None:
    server = OAuthBearerServer(UnsecuredValidator())
    token = unsecured({"sub": "alice", "exp": time.time() - 100})
    challenge = run(server.evaluate(initial_response(token)))
    assert json.loads(challenge) == {"status": "invalid_token"} and not server.complete
    with pytest.raises(SaslAuthenticationError, match='"status":"invalid_token"'):
        run(server.evaluate(b"\x01"))
    assert "Expiration Time" in (server.failure_detail or "")

    good = OAuthBearerServer(UnsecuredValidator())
    assert run(good.evaluate(initial_response(unsecured_token("alice", 30)))) == b""
    assert good.complete and good.authorization_id == "alice"
    assert good.credential_expiration_ms is not None
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(bob\)"):
        run(OAuthBearerServer(UnsecuredValidator()).evaluate(
            initial_response(unsecured_token("alice", 30), "bob")))


# --- JWKS ---------------------------------------------------------------------------------------

ISSUER = "https://issuer.example"
AUDIENCE = "kafka"


class Keys:
    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.rsa.public_key()))
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec.public_key()))
        return {"keys": [{**rsa_jwk, "kid": "rsa-1", "use": "sig", "alg": "RS256"},
                         {**ec_jwk, "kid": "ec-1", "use": "sig"}]}

    def token(self, sub: str = "alice", kid: str = "rsa-1", key: Any = None,
              algorithm: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300,
                **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.rsa, algorithm=algorithm, headers={"kid": kid})


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


def test_jwks_file_validator(keys: Keys, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(keys.jwks()))
    validator = JwksValidator(path.as_uri(), audiences=[AUDIENCE], issuer=ISSUER)
    found = run(validator.validate(keys.token()))
    assert found.principal == "alice"
    assert run(validator.validate(keys.token("bob", "ec-1", keys.ec, "ES256"))).principal == "bob"
    now = int(time.time())
    cases = {
        keys.token(iss="https://elsewhere"): "Invalid issuer",
        keys.token(aud="other"): "Audience doesn't match",
        keys.token(exp=now - 100): "Signature has expired",
        keys.token(iat=None): 'Token is missing the "iat" claim',
        keys.token(sub=None): "no sub claim",
        keys.token(key=keys.other): "Signature verification failed",
        keys.token(kid="unknown"): "No JWKS key with key id 'unknown'",
        keys.token(kid="rsa-1", key=keys.ec, algorithm="ES256"): "not its key's",
        unsecured({"sub": "alice", "exp": now + 60}): "'none'",
        "garbage": "Malformed JWT",
    }
    for token, message in cases.items():
        with pytest.raises(TokenInvalid, match=message):
            run(validator.validate(token))
    # a key added to the file later is found when a token names it
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = keys.jwks()
    jwks["keys"].append({**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(new_key.public_key())),
                         "kid": "rsa-2"})
    path.write_text(json.dumps(jwks))
    monkeypatch.setattr(oauthbearer, "_JWKS_RETRY_S", 0.0)  # read again at most once a second
    assert run(validator.validate(keys.token("carol", "rsa-2", new_key))).principal == "carol"


def test_jwks_validator_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file://, http:// or https://"):
        JwksValidator("ftp://example/jwks")
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url"):
        JwksValidator((tmp_path / "missing.json").as_uri())
    (tmp_path / "bad.json").write_text('{"no": "keys"}')
    with pytest.raises(ConfigError, match="keys array"):
        JwksValidator((tmp_path / "bad.json").as_uri())


@pytest.fixture
def jwks_server(keys: Keys) -> Iterator[tuple[str, list[int]]]:
    hits: list[int] = []
    body = json.dumps(keys.jwks()).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            hits.append(1)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", hits
    finally:
        server.shutdown()
        server.server_close()


def test_jwks_url_validator(keys: Keys, jwks_server: tuple[str, list[int]]) -> None:
    url, hits = jwks_server
    validator = JwksValidator(url, audiences=[AUDIENCE])
    assert not hits  # fetched on first use, not when configured

    async def twice() -> tuple[str, str]:
        first = await validator.validate(keys.token())
        second = await validator.validate(keys.token("bob"))
        return first.principal, second.principal

    assert run(twice()) == ("alice", "bob")
    assert len(hits) == 1  # the keys are kept
