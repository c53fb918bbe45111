"""Fixtures of the console's tests: the app over a real ClusterView against a real broker,
either in Starlette's TestClient or served by uvicorn on a free loopback port."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient
from waiting import wait_for

from samsa.console.app import create_app
from samsa.console.cluster_view import ClusterView
from samsa.console.history import History
from samsa.embedded import Broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Console:
    """A console app over ``broker``: ``client`` is a TestClient (redirects not followed)."""

    broker: Broker
    view: ClusterView
    history: History
    client: TestClient


def make_console(broker: Broker, **app_options: Any) -> Iterator[Console]:
    view = ClusterView(broker.bootstrap_servers, timeout_s=10.0)
    history = History(view, broker.metrics_url, interval_s=1.0)
    app = create_app(view, history, None, cluster_name=broker.bootstrap_servers, **app_options)
    with TestClient(app, follow_redirects=False, raise_server_exceptions=False) as client:
        yield Console(broker, view, history, client)


@pytest.fixture
def console(samsa_broker: Broker) -> Iterator[Console]:
    yield from make_console(samsa_broker)


class ServedConsole:
    """The app served by uvicorn in a thread, on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, access_log=False,
                                log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="console", daemon=True)

    def __enter__(self) -> ServedConsole:
        self.thread.start()
        wait_for(lambda: self.server.started or not self.thread.is_alive(), 30,
                 "the console to listen")
        assert self.server.started, "uvicorn did not start (see its log)"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
