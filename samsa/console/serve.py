"""``samsa ui``: build the console from its options and serve it with uvicorn."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from samsa.console.app import create_app
from samsa.console.cluster_view import ClusterView
from samsa.console.formats import SchemaRegistry
from samsa.console.history import History
from samsa.console.login import read_login_file
from samsa.console.model import ConsoleError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsoleOptions:
    bootstrap_servers: str
    host: str = "127.0.0.1"
    port: int = 8080
    client_config: dict[str, str] | None = None
    metrics_url: str | None = None
    schema_registry: str | None = None
    login_file: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.certfile is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}/"


def check_options(options: ConsoleOptions) -> dict[str, str] | None:
    """What a bad option would only show once serving: ValueError with one line. Returns the
    login file's users."""
    if options.keyfile is not None and options.certfile is None:
        raise ValueError("--keyfile needs --certfile")
    for name, path in (("--certfile", options.certfile), ("--keyfile", options.keyfile)):
        if path is not None and not path.is_file():
            raise ValueError(f"{name}: no such file: {path}")
    for name, url in (("--metrics-url", options.metrics_url),
                      ("--schema-registry", options.schema_registry)):
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"{name} takes an http:// or https:// URL, got {url!r}")
    if options.login_file is None:
        return None
    try:
        return read_login_file(options.login_file)
    except OSError as exc:
        raise ValueError(f"--login-file: cannot read {options.login_file}: "
                         f"{exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ValueError(f"--login-file: {exc}") from exc


def build_config(options: ConsoleOptions) -> uvicorn.Config:
    """The uvicorn config of the console (its app over a fresh ClusterView and History)."""
    users = check_options(options)
    try:
        view = ClusterView(options.bootstrap_servers, options.client_config)
    except ConsoleError as exc:  # client settings librdkafka refuses
        raise ValueError(str(exc)) from exc
    history = History(view, options.metrics_url)
    registry = SchemaRegistry(options.schema_registry) if options.schema_registry else None
    app = create_app(view, history, registry, login=users,
                     cluster_name=options.bootstrap_servers,
                     secure_cookie=options.certfile is not None)
    return uvicorn.Config(
        app, host=options.host, port=options.port, access_log=False, log_level="warning",
        ssl_certfile=str(options.certfile) if options.certfile else None,
        ssl_keyfile=str(options.keyfile) if options.keyfile else None,
        lifespan="on",
    )


def serve(config: uvicorn.Config) -> None:
    uvicorn.Server(config).run()
