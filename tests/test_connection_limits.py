"""Kafka's connection quotas and idle timeout, over TCP against an embedded broker:
``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``) and ``max.connections``
close a connection over the limit as it is accepted, with one log line, and a slot freed by a
close is taken again; ``connections.max.idle.ms`` closes a connection that stays silent while
a busy one beside it lives on; a malformed override is refused at start."""

from __future__ import annotations

import itertools
import logging
import socket
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from waiting import wait_for

import samsa
from samsa.config import ConfigError

pytestmark = pytest.mark.timeout(120)

_BODY = struct.pack(">hhih", 18, 0, 7, 4) + b"test"  # ApiVersions v0, correlation id 7
API_VERSIONS = struct.pack(">i", len(_BODY)) + _BODY


def connect(broker: samsa.Broker) -> socket.socket:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def served(sock: socket.socket) -> bool:
    """An ApiVersions round trip: True if answered, False if the broker closed the socket."""
    try:
        sock.sendall(API_VERSIONS)
        header = sock.recv(4, socket.MSG_WAITALL)
        if len(header) < 4:
            return False
        (size,) = struct.unpack(">i", header)
        return len(sock.recv(size, socket.MSG_WAITALL)) == size
    except (ConnectionResetError, BrokenPipeError):
        return False


def closed_by_broker(sock: socket.socket) -> bool:
    """The broker closed it (EOF or reset), without our sending anything."""
    sock.settimeout(0.2)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


Start = Callable[..., samsa.Broker]


@pytest.fixture
def broker_with(tmp_path: Path) -> Iterator[Start]:
    """Start brokers with these configs; all stopped after the test."""
    with ExitStack() as stack:
        started = itertools.count()

        def start(**config: object) -> samsa.Broker:
            return stack.enter_context(
                samsa.Broker(tmp_path / f"broker-{next(started)}", config=config))

        yield start


def test_per_ip_limit(broker_with: Start, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.server.connection")
    broker = broker_with(**{"max.connections.per.ip": 2})
    first, second, third = connect(broker), connect(broker), connect(broker)
    assert served(first) and served(second)
    assert not served(third)
    assert any("Rejected connection from 127.0.0.1 on listener PLAINTEXT: address already has "
               "the configured maximum of 2 connections" in r.getMessage()
               for r in caplog.records)
    first.close()  # its slot is free once the broker saw the close

    def a_new_one_is_served() -> bool:
        with connect(broker) as fresh:
            return served(fresh)

    wait_for(a_new_one_is_served, timeout=30, what="a freed slot to be taken again")
    assert served(second)
    for sock in (second, third):
        sock.close()


def test_per_ip_override_and_broker_limit(broker_with: Start) -> None:
    override = broker_with(**{"max.connections.per.ip.overrides": "127.0.0.1:1"})
    with connect(override) as one, connect(override) as two:
        assert served(one) and not served(two)
    total = broker_with(**{"max.connections": 3})
    socks = [connect(total) for _ in range(4)]
    assert [served(s) for s in socks] == [True, True, True, False]
    for s in socks:
        s.close()


def test_a_listener_limit_holds_that_listener_only(broker_with: Start) -> None:
    broker = broker_with(**{
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "listener.name.external.max.connections": 1})
    host, port = broker.bootstrap_for("EXTERNAL").rsplit(":", 1)
    external = [socket.create_connection((host, int(port)), timeout=10) for _ in range(2)]
    plain = [connect(broker) for _ in range(3)]
    assert [served(s) for s in external] == [True, False]
    assert all(served(s) for s in plain)
    for s in external + plain:
        s.close()


def test_idle_connections_are_closed(broker_with: Start) -> None:
    broker = broker_with(**{"connections.max.idle.ms": 1500})
    idle, busy = connect(broker), connect(broker)
    assert served(idle) and served(busy)
    started = time.monotonic()
    # the busy one sends a request every 0.3 s; the idle one nothing
    wait_for(lambda: served(busy) and closed_by_broker(idle), timeout=30, interval=0.3,
             what="the idle connection to be closed")
    assert time.monotonic() - started >= 1.4  # not before connections.max.idle.ms
    assert served(busy)
    idle.close()
    busy.close()


def test_a_malformed_override_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        samsa.Broker(tmp_path, config={"max.connections.per.ip.overrides": "127.0.0.1"})
