"""OAUTHBEARER with Kafka's JWKS validator (KIP-768) against confluent-kafka over SASL_SSL: JWTs
signed by a key made for the test, its public half in a JWKS file
(``listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class`` names Kafka's
OAuthBearerValidatorCallbackHandler), handed to the client by its ``oauth_cb``. A good token
produces and consumes as its subject; a token signed by another key, for another audience, or
unsigned (librdkafka's unsecured JWT) is refused with RFC 7628's ``invalid_token``."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from cryptography.hazmat.primitives.asymmetric import rsa
from waiting import wait_for

import samsa

pytestmark = pytest.mark.timeout(180)

DEADLINE = 20.0
ISSUER = "https://login.example"
AUDIENCE = "kafka-broker"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


class Issuer:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": "test-key", "alg": "RS256", "use": "sig"}]}

    def token(self, sub: str, key: Any = None, audience: str = AUDIENCE,
              lifetime_s: int = 600) -> tuple[str, float]:
        now = int(time.time())
        expiry = now + lifetime_s
        token = jwt.encode({"sub": sub, "iss": ISSUER, "aud": audience, "iat": now,
                            "exp": expiry, "scope": "kafka"},
                           key or self.key, algorithm="RS256", headers={"kid": "test-key"})
        return token, float(expiry)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="module")
def broker(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    jwks = tmp_path_factory.mktemp("jwks") / "jwks.json"
    jwks.write_text(json.dumps(issuer.jwks()))
    with samsa.Broker(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                      num_partitions=1, config={
                          "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler"
                          ".class": VALIDATOR,
                          "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint"
                          ".url": jwks.as_uri(),
                          "sasl.oauthbearer.expected.audience": AUDIENCE,
                          "sasl.oauthbearer.expected.issuer": ISSUER,
                      }) as b:
        yield b


def oauth_config(broker: samsa.Broker, token: tuple[str, float]) -> dict[str, Any]:
    assert broker.tls is not None
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(broker.tls.ca_file), "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: token}


def test_a_signed_token_logs_in_as_its_subject(broker: samsa.Broker, issuer: Issuer) -> None:
    config = oauth_config(broker, issuer.token("service-a"))
    producer = Producer({**config, "linger.ms": 5})
    for i in range(20):
        producer.produce("oauth", b"jwt-%d" % i)
    assert producer.flush(DEADLINE) == 0
    assert "User:service-a" in {str(c.principal) for c in list(broker.server.connections)}
    consumer = Consumer({**config, "group.id": "oauth", "auto.offset.reset": "earliest"})
    consumer.subscribe(["oauth"])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [b"jwt-%d" % i for i in range(20)]


def refused(config: dict[str, Any]) -> str:
    """The authentication error a producer with ``config`` gets."""
    errors: list[str] = []
    seen = threading.Event()

    def on_error(error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION:
            errors.append(error.str())
            seen.set()

    producer = Producer({**config, "error_cb": on_error, "reconnect.backoff.ms": 5000,
                         "reconnect.backoff.max.ms": 5000})
    deadline = time.monotonic() + DEADLINE
    while not seen.is_set() and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors, "no authentication error"
    return errors[0]


@pytest.mark.parametrize(("what", "reason"), [
    ("another key", "Signature verification failed"),
    ("another audience", "Audience doesn't match"),
    ("unsigned", "'none'"),
])
def test_refused_tokens(broker: samsa.Broker, issuer: Issuer, what: str, reason: str,
                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    if what == "unsigned":  # librdkafka's own unsecured JWT
        config = {**oauth_config(broker, ("", 0.0)), "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": "principal=mallory"}
        config.pop("oauth_cb")
    elif what == "another key":
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        config = oauth_config(broker, issuer.token("mallory", key=other))
    else:
        config = oauth_config(broker, issuer.token("mallory", audience="elsewhere"))
    assert '{"status":"invalid_token"}' in refused(config)
    wait_for(lambda: any("Failed authentication" in r.getMessage() and reason in r.getMessage()
                         for r in caplog.records), DEADLINE, f"the log line of {what}",
             details=lambda: "\n".join(r.getMessage() for r in caplog.records))
