"""Fixtures of the console's tests: the app over a real ClusterView against a real broker,
either in Starlette's TestClient or served by uvicorn on a free loopback port."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient
from waiting import wait_for

from samsa.console.app import create_app
from samsa.console.cluster_view import ClusterView
from samsa.console.history import History
from samsa.embedded import Broker
from samsa.tools.zookeeper_server import free_port


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


class UiProcess:
    """``samsa ui`` (the real command, a subprocess) on a free loopback port, its output in a
    file. ``https``: an SSL context trusting the console's certificate (--certfile given)."""

    def __init__(self, broker: Broker, log: Path, *extra: str,
                 https: ssl.SSLContext | None = None) -> None:
        self.port = free_port()
        self.url = f"{'https' if https else 'http'}://127.0.0.1:{self.port}"
        self.https = https
        args = [sys.executable, "-m", "samsa.cli", "ui", "--bootstrap-server",
                broker.bootstrap_servers, "--port", str(self.port), *extra]
        if broker.metrics_url:
            args += ["--metrics-url", broker.metrics_url]
        self.log = log
        self.output = log.open("w")
        self.process = subprocess.Popen(args, stdout=self.output, stderr=subprocess.STDOUT,
                                        env=os.environ.copy())

    def get(self, path: str) -> tuple[int, str]:
        """(status, body) of a GET, redirects followed."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=30, context=self.https) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self) -> None:
        wait_for(lambda: f"samsa ui: {self.url}/" in self.log.read_text()
                 or self.process.poll() is not None, 60, "samsa ui's address line")
        assert self.process.poll() is None, self.log.read_text()

        def answers() -> bool:
            try:
                return self.get("/static/console.css")[0] == 200
            except OSError:
                return False

        wait_for(answers, 60, "the console to answer", details=self.log.read_text)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        self.output.close()
