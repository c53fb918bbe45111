"""SCRAM credentials managed over the wire on a single node: AlterUserScramCredentials and
DescribeUserScramCredentials from confluent-kafka's AdminClient and from ``samsa configs``
(kafka-configs' syntax and output), then used to log in; Kafka's refusals (too few or too many
iterations, an unknown mechanism, duplicates, deleting what does not exist); the credentials
kept in Kafka's text form in the metadata dir (a private file) across a restart."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka_frames import FrameClient

import samsa
from samsa.cluster.scram import SCRAM_FILE
from samsa.security.sasl.scram import ScramCredential

pytestmark = pytest.mark.timeout(180)

DEADLINE = 20.0
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
DESCRIBE, ALTER = 50, 51


@pytest.fixture(scope="module")
def broker() -> Iterator[samsa.Broker]:
    with samsa.Broker(security_protocol="SASL_SSL", users={"admin": "admin-secret"},
                      config={"listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"}
                      ) as b:
        yield b


def admin_of(broker: samsa.Broker) -> AdminClient:
    return AdminClient(broker.client_config("SASL_SSL", user="admin"))


def logs_in(broker: samsa.Broker, user: str, password: str, mechanism: str) -> bool:
    """Whether a new client authenticates (and so reaches Metadata)."""
    failed = threading.Event()

    def on_error(error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION:
            failed.set()

    producer = Producer({**broker.client_config("SASL_SSL"), "sasl.mechanism": mechanism,
                         "sasl.username": user, "sasl.password": password,
                         "error_cb": on_error, "reconnect.backoff.ms": 5000,
                         "reconnect.backoff.max.ms": 5000})
    deadline = time.monotonic() + DEADLINE
    while not failed.is_set() and time.monotonic() < deadline:
        try:
            producer.list_topics(timeout=0.5)
            return True
        except KafkaException:
            producer.poll(0)  # serves error_cb
    return False


def alter(admin: AdminClient, *alterations: Any) -> dict[str, Any]:
    """user -> None on success, else the KafkaError."""
    outcome: dict[str, Any] = {}
    for user, future in admin.alter_user_scram_credentials(list(alterations)).items():
        try:
            outcome[user] = future.result(DEADLINE)
        except KafkaException as exc:
            outcome[user] = exc.args[0]
    return outcome


def test_credentials_altered_over_the_wire_then_used(broker: samsa.Broker) -> None:
    admin = admin_of(broker)
    assert alter(admin, UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(SHA256, 8192), b"dave-secret", b"salt-of-dave"),
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(SHA512, 4096),
                                     b"erin-secret")) == {"dave": None, "erin": None}
    assert logs_in(broker, "dave", "dave-secret", "SCRAM-SHA-256")
    assert not logs_in(broker, "dave", "dave-secret", "SCRAM-SHA-512")  # none made for it
    assert not logs_in(broker, "dave", "wrong", "SCRAM-SHA-256")
    assert logs_in(broker, "erin", "erin-secret", "SCRAM-SHA-512")

    described = admin.describe_user_scram_credentials().result(DEADLINE)
    assert sorted(described) == ["admin", "dave", "erin"]
    dave = described["dave"]
    assert [(i.mechanism, i.iterations) for i in dave.scram_credential_infos] == [(SHA256, 8192)]
    one = admin.describe_user_scram_credentials(["erin"])["erin"].result(DEADLINE)
    assert [(i.mechanism, i.iterations) for i in one.scram_credential_infos] == [(SHA512, 4096)]
    with pytest.raises(KafkaException) as missing:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(DEADLINE)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND

    # a new password replaces the old one; a deletion ends the logins
    assert alter(admin, UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(SHA256, 4096), b"new-secret")) == {"dave": None}
    assert not logs_in(broker, "dave", "dave-secret", "SCRAM-SHA-256")
    assert logs_in(broker, "dave", "new-secret", "SCRAM-SHA-256")
    assert alter(admin, UserScramCredentialDeletion("dave", SHA256)) == {"dave": None}
    assert not logs_in(broker, "dave", "new-secret", "SCRAM-SHA-256")


def test_kafkas_refusals(broker: samsa.Broker) -> None:
    admin = admin_of(broker)
    too_few = alter(admin, UserScramCredentialUpsertion(
        "frank", ScramCredentialInfo(SHA256, 1024), b"x"))["frank"]
    assert too_few.code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert "Too few iterations" in too_few.str()
    too_many = alter(admin, UserScramCredentialUpsertion(
        "frank", ScramCredentialInfo(SHA256, 20000), b"x"))["frank"]
    assert "Too many iterations" in too_many.str()
    gone = alter(admin, UserScramCredentialDeletion("frank", SHA512))["frank"]
    assert gone.code() == KafkaError.RESOURCE_NOT_FOUND
    assert "Attempt to delete a user credential that does not exist" in gone.str()
    # what the admin client itself would not send, in raw frames
    with FrameClient(broker.bootstrap_for("PLAINTEXT")) as frames:
        upsert = {"name": "frank", "mechanism": 1, "iterations": 4096, "salt": b"s",
                  "salted_password": b"p" * 32}
        answer = frames.request(ALTER, 0, {"deletions": [{"name": "frank", "mechanism": 1}],
                                           "upsertions": [upsert, {**upsert, "name": ""},
                                                          {**upsert, "name": "gus",
                                                           "mechanism": 0}]})
        results = {r.user: (int(r.error_code), r.error_message) for r in answer.results}
        assert results == {  # UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM, DUPLICATE_
            "": (93, "Username must not be empty"),                                 # RESOURCE
            "gus": (33, "Unknown SCRAM mechanism"),
            "frank": (92, "A user credential cannot be altered twice in the same request"),
        }
        described = frames.request(DESCRIBE, 0, {"users": [{"name": "admin"}, {"name": "x"},
                                                           {"name": "x"}, {"name": ""}]})
        found = {r.user: (int(r.error_code), r.error_message) for r in described.results}
        assert found["admin"] == (0, None)
        assert found["x"] == (92, "Cannot describe SCRAM credentials for the same user twice "
                                  "in a single request: x")
        assert found[""] == (91, "Username must not be empty")
        assert int(described.error_code) == 0


def run_configs(broker: samsa.Broker, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    settings = broker.client_config("SASL_SSL", user="admin")
    bootstrap = settings.pop("bootstrap.servers")
    properties = tmp_path / "admin.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return subprocess.run([sys.executable, "-m", "samsa.cli", "configs", "--bootstrap-server",
                           bootstrap, "--command-config", str(properties), *args],
                          capture_output=True, text=True, timeout=60)


def test_samsa_configs_users(broker: samsa.Broker, tmp_path: Path) -> None:
    def configs(*args: str) -> str:
        result = run_configs(broker, tmp_path, *args)
        assert result.returncode == 0, result.stderr
        return result.stdout

    user = ["--entity-type", "users", "--entity-name", "hank"]
    assert configs(*user, "--alter", "--add-config",
                   "SCRAM-SHA-256=[iterations=8192,password=hank-secret],"
                   "SCRAM-SHA-512=[password=hank-secret]"
                   ) == "Completed updating config for user hank.\n"
    assert configs(*user, "--describe") == (
        "SCRAM credential configs for user-principal 'hank' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096\n")
    assert logs_in(broker, "hank", "hank-secret", "SCRAM-SHA-512")
    assert configs("--user", "hank", "--alter", "--delete-config", "SCRAM-SHA-512") == (
        "Completed updating config for user hank.\n")
    assert not logs_in(broker, "hank", "hank-secret", "SCRAM-SHA-512")
    assert logs_in(broker, "hank", "hank-secret", "SCRAM-SHA-256")
    everyone = configs("--entity-type", "users", "--describe")
    assert ("SCRAM credential configs for user-principal 'hank' are "
            "SCRAM-SHA-256=iterations=8192\n") in everyone
    assert "user-principal 'admin'" in everyone
    # a user without credentials is not listed (Kafka's DescribeUserScramCredentialsResult)
    assert configs("--user", "nobody", "--describe") == ""
    for args, message in [
        (("--add-config", "SCRAM-SHA-256=[iterations=1024,password=x]"),
         "Iterations 1024 is less than the minimum 4096 required for SCRAM-SHA-256"),
        (("--add-config", "SCRAM-SHA-256=[password=x,iterations=8192]"),
         None),  # kafka-configs' pattern: the rest is the password
        (("--add-config", "consumer_byte_rate=1024,SCRAM-SHA-256=[password=x]"),
         "Cannot alter both quota and SCRAM credential configs simultaneously"),
        (("--delete-config", "SCRAM-SHA-512"),
         "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist"),
    ]:
        result = run_configs(broker, tmp_path, *user, "--alter", *args)
        if message is None:
            assert result.returncode == 0, result.stderr
            continue
        assert result.returncode != 0 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_credentials_are_kept_in_the_metadata_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with samsa.Broker(data, security_protocol="SASL_PLAINTEXT", users={"ivy": "ivy-secret"}):
        pass
    path = data / SCRAM_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert stored["version"] == 1 and set(stored["users"]["ivy"]) == {"SCRAM-SHA-256",
                                                                     "SCRAM-SHA-512"}
    text = stored["users"]["ivy"]["SCRAM-SHA-256"]
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(
        ",iterations=4096")
    assert ScramCredential.from_string(text).iterations == 4096
    # a broker started on the same dir without users= has them
    with samsa.Broker(data, security_protocol="SASL_PLAINTEXT", users={},
                      sasl_mechanism="SCRAM-SHA-512") as again:
        assert again.server.scram_store is not None
        assert again.server.scram_store.users() == ["ivy"]
        again.users["ivy"] = "ivy-secret"  # what client_config logs in with
        assert Producer(again.client_config(user="ivy")).list_topics(timeout=DEADLINE).brokers
