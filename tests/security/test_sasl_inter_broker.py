"""The broker's own SASL client (``BrokerConnection``, what replica fetchers and transaction
markers connect with) against a broker over TCP: PLAIN, SCRAM-SHA-512 and OAUTHBEARER (an
unsecured token made for each login) log in as the credentials say; a wrong password is one
``BrokerConnectionError`` line; and the client re-authenticates on the same connection before
the session the broker granted ends, so a connection outlives several sessions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kio.schema.metadata.v4.request import MetadataRequest

import samsa
from samsa.protocol.connection import BrokerConnection, BrokerConnectionError
from samsa.security.sasl.listener import SaslClientSettings

pytestmark = pytest.mark.timeout(120)

DEADLINE = 20.0
SESSION_MS = 1500  # re-authentications at 85%: more than the 1 s Kafka allows between two
USERS = {"broker": "broker-secret"}


@pytest.fixture(scope="module")
def broker() -> Iterator[samsa.Broker]:
    with samsa.Broker(security_protocol="SASL_PLAINTEXT", users=USERS,
                      sasl_mechanism="OAUTHBEARER",
                      config={"connections.max.reauth.ms": SESSION_MS}) as b:
        yield b


def address(broker: samsa.Broker) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


async def metadata(connection: BrokerConnection) -> int:
    answer = await connection.request(
        3, 4, MetadataRequest(topics=None, allow_auto_topic_creation=False), DEADLINE)
    return len(answer.brokers)


@pytest.mark.parametrize("settings", [
    SaslClientSettings("PLAIN", "broker", "broker-secret"),
    SaslClientSettings("SCRAM-SHA-512", "broker", "broker-secret"),
    SaslClientSettings("OAUTHBEARER", "broker-3", token_lifetime_s=600),
], ids=lambda s: s.mechanism)
def test_the_broker_client_logs_in(broker: samsa.Broker, settings: SaslClientSettings) -> None:
    async def run() -> str:
        connection = await BrokerConnection.open(*address(broker), "broker-test", DEADLINE,
                                                 sasl=settings)
        try:
            assert await metadata(connection) == 1
            local = connection.get_extra_info("sockname")
            peer = f"{local[0]}:{local[1]}"
            found = next(c for c in list(broker.server.connections) if c.peer == peer)
            return str(found.principal)
        finally:
            await connection.close()

    assert asyncio.run(run()) == f"User:{settings.username}"


def test_a_wrong_password_is_one_error_line(broker: samsa.Broker) -> None:
    async def run() -> None:
        await BrokerConnection.open(*address(broker), "broker-test", DEADLINE,
                                    sasl=SaslClientSettings("SCRAM-SHA-512", "broker", "x"))

    with pytest.raises(BrokerConnectionError) as error:
        asyncio.run(run())
    message = str(error.value)
    assert "SASL SCRAM-SHA-512 authentication as broker failed: SASL_AUTHENTICATION_FAILED: " \
           "Authentication failed during authentication due to invalid credentials" in message
    assert "\n" not in message


def test_the_broker_client_reauthenticates(broker: samsa.Broker) -> None:
    settings = SaslClientSettings("SCRAM-SHA-512", "broker", "broker-secret")

    async def run() -> int:
        connection = await BrokerConnection.open(*address(broker), "broker-test", DEADLINE,
                                                 sasl=settings)
        local = connection.get_extra_info("sockname")
        peer = f"{local[0]}:{local[1]}"
        server_side = next(c for c in list(broker.server.connections) if c.peer == peer)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        try:
            while server_side.authenticator.authentications < 3 and loop.time() < deadline:
                assert await metadata(connection) == 1  # the connection is never closed
                await asyncio.sleep(0.05)  # a request every 50 ms, as a fetcher's long polls
            return server_side.authenticator.authentications
        finally:
            await connection.close()

    assert asyncio.run(run()) >= 3
