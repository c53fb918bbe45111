"""SASL failures over TCP, with real clients and raw frames: each closes its own connection,
with Kafka's error code and message where Kafka answers, after
``connection.failed.authentication.delay.ms`` (the event loop serving others meanwhile), with
one log line and no traceback; the broker and its other clients are unharmed.

Also the two framings (SaslHandshake v1 then SaslAuthenticate, v0 then raw tokens) and what
Kafka's KafkaApis answers to SaslHandshake / SaslAuthenticate on an authenticated connection
and on a listener without SASL (ILLEGAL_SASL_STATE, the connection kept).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.security.sasl.plain import plain_client_message
from samsa.security.sasl.scram import ScramClient, ScramMechanism

pytestmark = pytest.mark.timeout(180)

DEADLINE = 20.0
DELAY_MS = 400
SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE, METADATA = 17, 18, 36, 3
NONE, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 0, 33, 34, 58


@pytest.fixture(scope="module")
def broker() -> Iterator[samsa.Broker]:
    with samsa.Broker(security_protocol="SASL_PLAINTEXT", users={"alice": "alice-secret"},
                      num_partitions=1, config={
                          "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                          "listener.name.sasl_plaintext.sasl.enabled.mechanisms":
                              "PLAIN,SCRAM-SHA-256",
                          "connection.failed.authentication.delay.ms": DELAY_MS,
                      }) as b:
        yield b


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    return caplog


def client(broker: samsa.Broker, listener: str = "SASL_PLAINTEXT") -> FrameClient:
    return FrameClient(broker.bootstrap_for(listener))


def local_port(frames: FrameClient) -> int:
    return int(frames.sock.getsockname()[1])


def failures(logs: pytest.LogCaptureFixture, frames_port: int) -> list[logging.LogRecord]:
    return [r for r in logs.records
            if f"Failed authentication with 127.0.0.1:{frames_port} " in r.getMessage()]


def one_failure_line(logs: pytest.LogCaptureFixture, port: int, text: str) -> str:
    """Wait for the failure's log line: exactly one, one line, no traceback, with ``text``."""
    records = wait_for(lambda: failures(logs, port), DEADLINE, "the failure's log line",
                       details=lambda: "\n".join(r.getMessage() for r in logs.records))
    assert len(records) == 1, [r.getMessage() for r in records]
    message = records[0].getMessage()
    assert records[0].levelno == logging.INFO and records[0].exc_info is None
    assert "\n" not in message and text in message, message
    return message


def handshake(frames: FrameClient, mechanism: str, version: int = 1) -> Any:
    return frames.request(SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(frames: FrameClient, token: bytes, version: int = 2) -> Any:
    return frames.request(SASL_AUTHENTICATE, version, {"auth_bytes": token})


def metadata_works(frames: FrameClient) -> bool:
    response = frames.request(METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
    return bool(response.brokers)


def connection_of(broker: samsa.Broker, frames: FrameClient) -> Any:
    peer = f"127.0.0.1:{local_port(frames)}"
    return wait_for(lambda: next((c for c in list(broker.server.connections)
                                  if c.peer == peer), None), DEADLINE, f"the connection {peer}")


def delayed_failure(frames: FrameClient, api_key: int, version: int,
                    body: dict[str, Any]) -> tuple[Any, float]:
    """Send a request that fails the authentication: (its answer, seconds it took)."""
    started = time.monotonic()
    answer = frames.request(api_key, version, body)
    return answer, time.monotonic() - started


# --- real clients --------------------------------------------------------------------------


def test_wrong_passwords_and_unknown_users(broker: samsa.Broker,
                                           logs: pytest.LogCaptureFixture) -> None:
    survivor = Producer({**broker.client_config(), "linger.ms": 0})
    survivor.produce("survivor", b"before")
    assert survivor.flush(DEADLINE) == 0
    scram_failed = ("Authentication failed during authentication due to invalid credentials "
                    "with SASL mechanism SCRAM-SHA-256")
    cases = [  # what the client is told, what the broker logs
        ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password",
         "Invalid username or password"),
        ("PLAIN", "mallory", "alice-secret",
         "Authentication failed: Invalid username or password", "Invalid username or password"),
        ("SCRAM-SHA-256", "alice", "wrong", scram_failed, "(Invalid client credentials)"),
        ("SCRAM-SHA-256", "mallory", "x", scram_failed, "Invalid user credentials"),
        ("SCRAM-SHA-512", "alice", "alice-secret",
         "Unsupported SASL mechanism: broker's supported mechanisms: PLAIN,SCRAM-SHA-256",
         "Unsupported SASL mechanism SCRAM-SHA-512 (enabled: PLAIN, SCRAM-SHA-256)"),
    ]
    for mechanism, user, password, message, logged in cases:
        errors: list[KafkaError] = []
        seen = threading.Event()

        def on_error(error: KafkaError, errors: list[KafkaError] = errors,
                     seen: threading.Event = seen) -> None:
            errors.append(error)
            if error.code() == KafkaError._AUTHENTICATION:
                seen.set()

        producer = Producer({**broker.client_config(), "sasl.mechanism": mechanism,
                             "sasl.username": user, "sasl.password": password,
                             "error_cb": on_error, "reconnect.backoff.ms": 5000,
                             "reconnect.backoff.max.ms": 5000})
        producer.poll(0)
        deadline = time.monotonic() + DEADLINE
        while not seen.is_set() and time.monotonic() < deadline:
            producer.poll(0.1)
        texts = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert texts and message in texts[0], (mechanism, user, [e.str() for e in errors])
        del producer
        wait_for(lambda m=logged: any(m in r.getMessage() and "Failed authentication" in
                                      r.getMessage() for r in logs.records),
                 DEADLINE, f"the log line of {mechanism} {user}")
    assert not any(r.exc_info for r in logs.records)
    # the broker is unharmed: the established client goes on
    survivor.produce("survivor", b"after")
    assert survivor.flush(DEADLINE) == 0


# --- raw frames ----------------------------------------------------------------------------


def test_a_wrong_password_is_answered_after_the_delay_while_others_are_served(
        broker: samsa.Broker, logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames, client(broker) as other:
        port = local_port(frames)
        assert handshake(frames, "PLAIN").error_code == NONE
        done: dict[str, Any] = {}

        def fail() -> None:
            done["answer"], done["took"] = delayed_failure(
                frames, SASL_AUTHENTICATE, 2, {"auth_bytes": plain_client_message("alice", "x")})

        thread = threading.Thread(target=fail)
        thread.start()
        wait_for(lambda: failures(logs, port), DEADLINE, "the failure logged")
        # meanwhile another client of the same listener is answered at once
        started = time.monotonic()
        assert other.request(API_VERSIONS, 3, {"client_software_name": "t",
                                               "client_software_version": "1"}).api_keys
        assert time.monotonic() - started < DELAY_MS / 1000
        thread.join(DEADLINE)
        answer = done["answer"]
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert done["took"] >= DELAY_MS / 1000 * 0.9
        assert frames.is_closed_by_peer()
    one_failure_line(logs, port, "Invalid username or password")


def test_scram_unknown_user_is_refused_at_the_first_message(
        broker: samsa.Broker, logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames:
        port = local_port(frames)
        assert handshake(frames, "SCRAM-SHA-256").error_code == NONE
        first = ScramClient(ScramMechanism.SCRAM_SHA_256, "mallory", "x").first_message()
        answer = authenticate(frames, first)
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == ("Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism SCRAM-SHA-256")
        assert frames.is_closed_by_peer()
    # the reason is in the log, not in the answer
    one_failure_line(logs, port, "Invalid user credentials")


def test_a_mechanism_the_listener_does_not_enable(broker: samsa.Broker,
                                                  logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames:
        port = local_port(frames)
        answer = handshake(frames, "SCRAM-SHA-512")
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert frames.is_closed_by_peer()
    one_failure_line(logs, port, "Unsupported SASL mechanism SCRAM-SHA-512")


def test_a_sasl_token_before_the_handshake(broker: samsa.Broker,
                                           logs: pytest.LogCaptureFixture) -> None:
    token = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "x").first_message()
    with client(broker) as frames:
        port = local_port(frames)
        frames.send_bytes(struct.pack(">i", len(token)) + token)
        assert frames.is_closed_by_peer()  # no answer: not a Kafka request
    one_failure_line(logs, port, "Invalid request, potential reasons")


def test_an_oversized_token(broker: samsa.Broker, logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames:
        port = local_port(frames)
        assert handshake(frames, "PLAIN").error_code == NONE
        frames.send_bytes(struct.pack(">i", 600_000) + b"\0" * 1024)
        started = time.monotonic()
        assert frames.is_closed_by_peer()
        assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
    one_failure_line(logs, port,
                     "invalid receive size: 600000 bytes, more than 524288")


def test_a_request_before_authentication(broker: samsa.Broker,
                                         logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames:  # before the handshake: closed at once, no answer
        port = local_port(frames)
        frames.send(METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert frames.is_closed_by_peer()
    one_failure_line(logs, port,
                     "Unexpected Kafka request of type METADATA during SASL handshake.")
    with client(broker) as frames:  # after it: ILLEGAL_SASL_STATE, no answer to Metadata
        port = local_port(frames)
        assert handshake(frames, "PLAIN").error_code == NONE
        frames.send(METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert frames.is_closed_by_peer()
    one_failure_line(logs, port,
                     "Unexpected Kafka request of type METADATA during SASL authentication.")
    with client(broker) as frames:  # an ApiVersions is answered ILLEGAL_SASL_STATE
        assert handshake(frames, "PLAIN").error_code == NONE
        answer, took = delayed_failure(frames, API_VERSIONS, 0, {})
        assert answer.error_code == ILLEGAL_SASL_STATE and took >= DELAY_MS / 1000 * 0.9
        assert frames.is_closed_by_peer()
    with client(broker) as frames:  # and a second SaslHandshake too
        assert handshake(frames, "PLAIN").error_code == NONE
        answer, _ = delayed_failure(frames, SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert answer.error_code == ILLEGAL_SASL_STATE
        assert frames.is_closed_by_peer()


def test_an_authorization_id_other_than_the_user(broker: samsa.Broker,
                                                 logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames:
        assert handshake(frames, "PLAIN").error_code == NONE
        answer = authenticate(frames, b"bob\0alice\0alice-secret")
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert "authorization id that is different from username" in answer.error_message
        assert frames.is_closed_by_peer()


# --- both framings -----------------------------------------------------------------------------


def test_handshake_v1_then_authenticate(broker: samsa.Broker) -> None:
    with client(broker) as frames:
        assert frames.request(API_VERSIONS, 0, {}).error_code == NONE  # any number of times
        assert frames.request(API_VERSIONS, 0, {}).error_code == NONE
        answer = handshake(frames, "SCRAM-SHA-256")
        assert answer.error_code == NONE and list(answer.mechanisms) == ["PLAIN",
                                                                         "SCRAM-SHA-256"]
        scram = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
        message: bytes | None = scram.first_message()
        lifetimes = []
        while message is not None:
            answer = authenticate(frames, message, version=1)
            assert answer.error_code == NONE and answer.error_message is None
            lifetimes.append(answer.session_lifetime)
            message = scram.evaluate(answer.auth_bytes)
        assert scram.complete and lifetimes[-1].total_seconds() == 0  # no session limit
        assert str(connection_of(broker, frames).principal) == "User:alice"
        assert metadata_works(frames)


def recv_raw(frames: FrameClient) -> bytes:
    return frames.recv_frame(DEADLINE)


def test_handshake_v0_then_raw_tokens(broker: samsa.Broker) -> None:
    with client(broker) as frames:
        assert handshake(frames, "PLAIN", version=0).error_code == NONE
        token = plain_client_message("alice", "alice-secret")
        frames.send_bytes(struct.pack(">i", len(token)) + token)
        assert recv_raw(frames) == b""  # PLAIN's empty answer, framed by its size alone
        assert str(connection_of(broker, frames).principal) == "User:alice"
        assert metadata_works(frames)
    with client(broker) as frames:
        assert handshake(frames, "SCRAM-SHA-256", version=0).error_code == NONE
        scram = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
        message: bytes | None = scram.first_message()
        while message is not None:
            frames.send_bytes(struct.pack(">i", len(message)) + message)
            message = scram.evaluate(recv_raw(frames))
        assert scram.complete and metadata_works(frames)


def test_a_raw_token_that_fails_closes_without_an_answer(
        broker: samsa.Broker, logs: pytest.LogCaptureFixture) -> None:
    with client(broker) as frames:
        port = local_port(frames)
        assert handshake(frames, "PLAIN", version=0).error_code == NONE
        token = plain_client_message("alice", "wrong")
        frames.send_bytes(struct.pack(">i", len(token)) + token)
        assert frames.is_closed_by_peer()
    one_failure_line(logs, port, "Invalid username or password")


# --- what KafkaApis answers --------------------------------------------------------------------


def test_sasl_requests_after_authentication_and_without_sasl(broker: samsa.Broker) -> None:
    with client(broker) as frames:
        assert handshake(frames, "PLAIN").error_code == NONE
        assert authenticate(frames, plain_client_message("alice", "alice-secret")
                            ).error_code == NONE
        # no session limit: a SaslHandshake is no re-authentication, the connection stays
        assert handshake(frames, "PLAIN").error_code == ILLEGAL_SASL_STATE
        again = authenticate(frames, b"\0alice\0alice-secret")
        assert again.error_code == ILLEGAL_SASL_STATE
        assert again.error_message == ("SaslAuthenticate request received after successful "
                                       "authentication")
        assert metadata_works(frames)
    with client(broker, "PLAINTEXT") as frames:
        assert handshake(frames, "PLAIN").error_code == ILLEGAL_SASL_STATE
        assert metadata_works(frames)
        advertised = {k.api_key: (k.min_version, k.max_version)
                      for k in frames.request(API_VERSIONS, 3, {
                          "client_software_name": "t", "client_software_version": "1"}).api_keys}
        assert advertised[SASL_HANDSHAKE] == (0, 1) and advertised[SASL_AUTHENTICATE] == (0, 2)
        assert advertised[50] == (0, 0) and advertised[51] == (0, 0)
