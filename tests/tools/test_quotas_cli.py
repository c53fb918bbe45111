"""``samsa configs`` for client quotas (kafka-configs' users and clients entities) against an
embedded broker: every kind of entity, kafka-configs' output, the errors it gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa.cluster.client_quotas import DEFAULT, QuotaEntity
from samsa.embedded import Broker

from . import error_line, ok, samsa, unique


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("tools-quotas"), security_protocol="SASL_PLAINTEXT",
                users={"admin": "admin-secret"}, sasl_mechanism="SCRAM-SHA-256") as b:
        yield b


@pytest.fixture
def run(broker: Broker, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """``samsa configs`` with the broker's address and a --command-config to log in."""
    config = tmp_path_factory.mktemp("command") / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in broker.client_config().items()
                              if k != "bootstrap.servers"))

    def configs(*args: str):  # noqa: ANN202
        return samsa("configs", "--bootstrap-server", broker.bootstrap_servers,
                     "--command-config", config, *args)
    return configs


def lines(result) -> list[str]:  # noqa: ANN001
    return ok(result).splitlines()


def test_every_kind_of_entity(broker: Broker, run) -> None:  # noqa: ANN001
    user, client = unique("user"), unique("app")
    alice = ["--entity-type", "users", "--entity-name", user]
    assert lines(run(*alice, "--alter", "--add-config",
                     "producer_byte_rate=1024,consumer_byte_rate=2048")) == [
        f"Completed updating config for user {user}."]
    # a user's client id, clients named first or second
    assert lines(run("--entity-type", "clients", "--entity-name", client, *alice, "--alter",
                     "--add-config", "request_percentage=12.5")) == [
        f"Completed updating config for client {client}."]
    assert lines(run("--client", client, "--alter", "--add-config",
                     "controller_mutation_rate=0.5")) == [
        f"Completed updating config for client {client}."]
    assert lines(run("--entity-type", "clients", "--entity-default", "--alter",
                     "--add-config", "producer_byte_rate=10000000")) == [
        "Completed updating default config for clients in the cluster."]
    assert lines(run("--user-defaults", "--alter", "--add-config",
                     "consumer_byte_rate=3000")) == [
        "Completed updating default config for users in the cluster."]
    assert lines(run(*alice, "--entity-type", "clients", "--entity-default", "--alter",
                     "--add-config", "producer_byte_rate=77")) == [
        f"Completed updating config for user {user}."]

    assert broker.server.quota_store is not None
    applied = broker.server.quota_store.applied()
    assert applied[QuotaEntity(user, client)] == {"request_percentage": 12.5}
    assert applied[QuotaEntity(None, DEFAULT)] == {"producer_byte_rate": 1e7}
    assert applied[QuotaEntity(user, DEFAULT)] == {"producer_byte_rate": 77.0}

    assert lines(run(*alice, "--describe")) == [
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0, "
        "producer_byte_rate=1024.0"]
    assert lines(run(*alice, "--entity-type", "clients", "--describe")) == sorted([
        f"Quota configs for user-principal '{user}', client-id '{client}' are "
        "request_percentage=12.5",
        f"Quota configs for user-principal '{user}', the default client-id are "
        "producer_byte_rate=77.0"])
    assert lines(run("--client", client, "--describe")) == [
        f"Quota configs for client-id '{client}' are controller_mutation_rate=0.5"]
    assert "Quota configs for the default client-id are producer_byte_rate=1.0E7" in lines(
        run("--entity-type", "clients", "--describe"))
    assert lines(run("--user-defaults", "--describe")) == [
        "Quota configs for the default user-principal are consumer_byte_rate=3000.0"]

    assert lines(run(*alice, "--alter", "--delete-config", "consumer_byte_rate")) == [
        f"Completed updating config for user {user}."]
    assert lines(run(*alice, "--describe")) == [
        f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0"]


def test_quotas_and_scram_credentials_of_one_user(run) -> None:  # noqa: ANN001
    user = unique("both")
    ok(run("--user", user, "--alter", "--add-config", "SCRAM-SHA-256=[password=secret]"))
    ok(run("--user", user, "--alter", "--add-config", "producer_byte_rate=4096"))
    assert lines(run("--user", user, "--describe")) == [
        f"Quota configs for user-principal '{user}' are producer_byte_rate=4096.0",
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=4096"]


@pytest.mark.parametrize(("args", "message"), [
    (["--alter", "--add-config", "producer_byte_rate=-5"],
     "samsa: INVALID_REQUEST: Quota producer_byte_rate must be greater than 0"),
    (["--alter", "--add-config", "producer_byte_rate=2.5"],
     "samsa: INVALID_REQUEST: producer_byte_rate cannot be a fractional value."),
    (["--alter", "--add-config", "producer_byte_rate=lots"],
     "samsa: Cannot parse quota configuration value for producer_byte_rate: lots"),
    (["--alter", "--delete-config", "consumer_byte_rate"],
     "samsa: INVALID_CONFIG: Invalid config(s): consumer_byte_rate"),
])
def test_errors(run, args: list[str], message: str) -> None:  # noqa: ANN001
    entity = ["--entity-type", "clients", "--entity-name", unique("bad")]
    assert error_line(run(*entity, *args)) == message
    assert lines(run(*entity, "--describe")) == []  # nothing changed


@pytest.mark.parametrize("args", [
    ["--entity-type", "users", "--entity-name", "u", "--alter", "--add-config",
     "no_such_rate=1"],
    ["--entity-type", "clients", "--entity-name", "c", "--alter", "--add-config",
     "SCRAM-SHA-256=[password=x]"],
    ["--entity-type", "users", "--entity-type", "clients", "--entity-name", "c", "--alter",
     "--add-config", "producer_byte_rate=1"],
    ["--entity-type", "users", "--entity-type", "users", "--describe"],
    ["--user", "u", "--entity-type", "clients", "--describe"],
    ["--user", "u", "--alter"],
])
def test_usage_errors(run, args: list[str]) -> None:  # noqa: ANN001
    result = run(*args)
    error_line(result)
    assert result.stdout == ""
