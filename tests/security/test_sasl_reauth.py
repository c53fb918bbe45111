"""KIP-368 on a SASL listener: sessions of ``connections.max.reauth.ms`` (or an OAUTHBEARER
token's lifetime), told to the client in SaslAuthenticate v1+, renewed by re-authenticating on
the same connection; a connection whose session expired is closed at its next request.

librdkafka and kafka-python re-authenticate on their own while producing past several
sessions, on the same connections; raw frames check the rules: the same principal and
mechanism, at most one re-authentication a second, and the close after expiry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.security.sasl.oauthbearer import initial_response, unsecured_token
from samsa.security.sasl.plain import plain_client_message
from samsa.security.sasl.scram import ScramClient, ScramMechanism

pytestmark = pytest.mark.timeout(180)

DEADLINE = 30.0
SESSION_MS = 1500
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
NONE, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 0, 34, 58
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def broker() -> Iterator[samsa.Broker]:
    with samsa.Broker(security_protocol="SASL_PLAINTEXT", users=USERS,
                      sasl_mechanism="OAUTHBEARER", num_partitions=1, config={
                          "connections.max.reauth.ms": SESSION_MS,
                          # OAUTHBEARER: the token's lifetime alone bounds the session
                          "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": 0,
                      }) as b:
        yield b


def authentications(broker: samsa.Broker) -> dict[str, int]:
    """peer -> authentications completed on that connection (re-authentications included)."""
    return {c.peer: c.authenticator.authentications for c in list(broker.server.connections)
            if c.authenticator is not None}


def test_librdkafka_reauthenticates_while_producing(broker: samsa.Broker,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    errors: list[KafkaError] = []
    delivered: list[bytes] = []

    def on_delivery(err: KafkaError | None, message: Any) -> None:
        assert err is None, err
        delivered.append(message.value())

    producer = Producer({**broker.client_config(sasl_mechanism="SCRAM-SHA-256"),
                         "linger.ms": 5, "error_cb": errors.append})
    sent = 0

    def produce_until_reauthenticated() -> bool:
        nonlocal sent
        producer.produce("reauth", b"%d" % sent, on_delivery=on_delivery)
        sent += 1
        producer.poll(0.05)
        # one connection that has lived through three sessions
        return max(authentications(broker).values(), default=0) >= 4

    wait_for(produce_until_reauthenticated, DEADLINE, "re-authentications on one connection",
             interval=0)
    assert producer.flush(DEADLINE) == 0
    assert delivered == [b"%d" % i for i in range(sent)]
    assert not errors, [e.str() for e in errors]
    assert not [r for r in caplog.records if "expired" in r.getMessage()
                or "Failed authentication" in r.getMessage()]


def test_kafka_python_reauthenticates(broker: samsa.Broker) -> None:
    before = set(authentications(broker))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username="bob", sasl_plain_password=USERS["bob"])
    try:
        sent = 0

        def send_until_reauthenticated() -> bool:
            nonlocal sent
            producer.send("reauth-kp", b"%d" % sent).get(timeout=10)
            sent += 1
            return any(n >= 3 for peer, n in authentications(broker).items()
                       if peer not in before)

        wait_for(send_until_reauthenticated, DEADLINE, "kafka-python's re-authentications",
                 interval=0.1)
    finally:
        producer.close(timeout=5)


# --- raw frames ----------------------------------------------------------------------------


def handshake(frames: FrameClient, mechanism: str) -> Any:
    return frames.request(SASL_HANDSHAKE, 1, {"mechanism": mechanism})


def scram_login(frames: FrameClient, user: str, version: int = 1) -> Any:
    """SaslHandshake and the SCRAM exchange; the last SaslAuthenticate answer."""
    assert handshake(frames, "SCRAM-SHA-256").error_code == NONE
    scram = ScramClient(ScramMechanism.SCRAM_SHA_256, user, USERS[user])
    message: bytes | None = scram.first_message()
    answer = None
    while message is not None:
        answer = frames.request(SASL_AUTHENTICATE, version, {"auth_bytes": message})
        if answer.error_code != NONE:
            return answer
        message = scram.evaluate(answer.auth_bytes)
    return answer


def metadata_works(frames: FrameClient) -> bool:
    response = frames.request(METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
    return bool(response.brokers)


def connection_of(broker: samsa.Broker, frames: FrameClient) -> Any:
    peer = f"127.0.0.1:{frames.sock.getsockname()[1]}"
    return wait_for(lambda: next((c for c in list(broker.server.connections)
                                  if c.peer == peer), None), DEADLINE, peer)


def test_session_lifetime_and_reauthentication_rules(broker: samsa.Broker,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    with FrameClient(broker.bootstrap_servers) as frames:
        answer = scram_login(frames, "alice")
        assert answer.error_code == NONE
        assert answer.session_lifetime.total_seconds() * 1000 == SESSION_MS
        connection = connection_of(broker, frames)
        # a re-authentication on the connection: same user, same mechanism
        again = scram_login(frames, "alice")
        assert again.error_code == NONE and again.session_lifetime.total_seconds() > 0
        assert connection.authenticator.authentications == 2
        assert metadata_works(frames)
        # a second one within a second is no re-authentication: KafkaApis answers it
        assert handshake(frames, "SCRAM-SHA-256").error_code == ILLEGAL_SASL_STATE
        assert metadata_works(frames)
    with FrameClient(broker.bootstrap_servers) as frames:
        assert scram_login(frames, "alice").error_code == NONE
        failed = scram_login(frames, "bob")  # another principal: refused, closed
        assert failed.error_code == SASL_AUTHENTICATION_FAILED
        assert failed.error_message == ("Cannot change principals during re-authentication "
                                        "from User.alice: User.bob")
        assert frames.is_closed_by_peer()
    with FrameClient(broker.bootstrap_servers) as frames:
        assert scram_login(frames, "alice").error_code == NONE
        # another mechanism: as Kafka, the handshake is answered, the next token fails
        assert handshake(frames, "PLAIN").error_code == NONE
        frames.send(SASL_AUTHENTICATE, 1, {
            "auth_bytes": plain_client_message("alice", USERS["alice"])})
        assert frames.is_closed_by_peer()
    wait_for(lambda: any("SASL mechanism 'PLAIN' requested by client is not supported for "
                         "re-authentication of mechanism 'SCRAM-SHA-256'" in r.getMessage()
                         for r in caplog.records), DEADLINE, "the log line")


def test_an_expired_session_closes_the_connection(broker: samsa.Broker,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    with FrameClient(broker.bootstrap_servers) as frames:
        assert scram_login(frames, "bob").error_code == NONE
        assert metadata_works(frames)
        authenticator = connection_of(broker, frames).authenticator
        wait_for(lambda: time.monotonic() > authenticator.expires_at, DEADLINE,
                 "the session to end")
        frames.send(METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert frames.is_closed_by_peer()
    wait_for(lambda: any("User:bob" in r.getMessage() and "expired without re-authentication"
                         in r.getMessage() for r in caplog.records), DEADLINE, "the log line")


def test_an_oauthbearer_tokens_expiry_bounds_the_session(broker: samsa.Broker) -> None:
    with FrameClient(broker.bootstrap_servers) as frames:
        assert handshake(frames, "OAUTHBEARER").error_code == NONE
        answer = frames.request(SASL_AUTHENTICATE, 2, {
            "auth_bytes": initial_response(unsecured_token("carol", 60))})
        assert answer.error_code == NONE and answer.auth_bytes == b""
        lifetime = answer.session_lifetime.total_seconds()
        assert 50 < lifetime <= 60  # the token's, connections.max.reauth.ms being 0 for it
        assert str(connection_of(broker, frames).principal) == "User:carol"
