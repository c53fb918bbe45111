"""What every client tool shares: the --bootstrap-server option, client configs, key=value
parsing, a reachability check and the turning of client errors into one ``samsa:`` line.

Errors leave a tool as ``click.ClickException`` (or ``click.UsageError``); ``samsa.cli.run``
prints them as one line on stderr.

Every confluent-kafka client of the ``samsa`` command (the tools and ``samsa pipeline``) is
built from ``client_config``, which hands librdkafka's log lines to Python logging (the
``samsa.tools.librdkafka`` logger) instead of letting librdkafka print them on stderr, and
drops them unless ``SAMSA_CLIENT_LOG`` names a level to show them from.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click
from confluent_kafka import KafkaError as ClientError
from confluent_kafka import KafkaException

from samsa.config import parse_properties
from samsa.errors import kafka_name

P = ParamSpec("P")
R = TypeVar("R")

# How long a tool waits for the cluster's metadata before calling the broker unreachable.
METADATA_TIMEOUT_S = 10.0
# TCP connect timeout of the reachability check, per bootstrap address.
CONNECT_TIMEOUT_S = 5.0
# Timeout of one admin request (create, delete, describe, alter).
REQUEST_TIMEOUT_S = 30.0

#: the environment variable that shows librdkafka's log lines on stderr, from a level on
CLIENT_LOG_ENV = "SAMSA_CLIENT_LOG"
#: the logger every client of the samsa command is given (confluent-kafka's ``logger`` config)
CLIENT_LOGGER = logging.getLogger("samsa.tools.librdkafka")
# Lines nobody asked for end here, not in Python's last-resort handler (stderr).
CLIENT_LOGGER.addHandler(logging.NullHandler())
# CLIENT_LOG_ENV's values: the Python level and librdkafka's log_level (syslog's levels) for it.
# Quiet, log_level is 0 (emergency, which librdkafka never logs): lines are dropped in
# librdkafka. librdkafka's debug lines need its `debug` config too (e.g. debug=broker,protocol).
_CLIENT_LOG_LEVELS = {
    "debug": (logging.DEBUG, 7),
    "info": (logging.INFO, 6),
    "warning": (logging.WARNING, 4),
    "error": (logging.ERROR, 3),
}

_HOST_PORT = re.compile(r"^(?:[A-Za-z_]+://)?(?P<host>\[[^\]]+\]|[^:/\s]+):(?P<port>\d{1,5})$")


class ToolError(click.ClickException):
    """A failure a tool reports as one line (exit 1)."""


def bootstrap_option(command: Callable[P, R]) -> Callable[P, R]:
    """The required ``--bootstrap-server HOST:PORT[,HOST:PORT...]`` option."""
    return click.option(
        "--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT",
        help="The broker(s) to connect to: host:port, comma separated.",
    )(command)


def command_config_option(command: Callable[P, R]) -> Callable[P, R]:
    """``--command-config FILE``: admin client configs from a properties file."""
    return click.option(
        "--command-config", "command_config", type=click.Path(dir_okay=False, path_type=Path),
        help="A properties file of admin client configs.",
    )(command)


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """``host:port[,host:port]`` -> addresses; a UsageError for anything else."""
    addresses = []
    for item in value.split(","):
        item = item.strip()
        match = _HOST_PORT.match(item)
        if match is None or not 0 < int(match["port"]) < 65536:
            raise click.UsageError(
                f"--bootstrap-server takes host:port[,host:port...], got {value!r}"
            )
        addresses.append((match["host"].strip("[]"), int(match["port"])))
    return addresses


def check_reachable(bootstrap: str) -> None:
    """Fail fast (one line) when no bootstrap address accepts a TCP connection.

    librdkafka retries a refused connection until its own timeouts run out; this turns the
    common case (nothing listening) into an immediate, clear error.
    """
    problems = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            problems.append(f"{host}:{port} ({exc.strerror or exc})")
    raise ToolError(f"cannot connect to any bootstrap server: {', '.join(problems)}")


def parse_assignments(items: Iterable[str], option: str) -> dict[str, str]:
    """``k=v`` items (as given to --config, --property, ...) -> dict; UsageError if malformed."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"{option} takes key=value, got {item!r}")
        result[key.strip()] = value
    return result


def read_properties_file(path: Path | None, option: str) -> dict[str, str]:
    if path is None:
        return {}
    try:
        text = path.read_text()
    except OSError as exc:
        raise click.UsageError(f"{option}: cannot read {path}: {exc.strerror or exc}") from exc
    return parse_properties(text.splitlines())


def parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise click.UsageError(f"property {name} takes true or false, got {value!r}")


def unescape(value: str) -> str:
    r"""Separators given on a command line: ``\t``, ``\n``, ``\r`` and ``\\`` mean the character."""
    return re.sub(
        r"\\([tnr\\])", lambda m: {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[m[1]], value
    )


def client_logging() -> dict[str, Any]:
    """librdkafka's logging keys for a client config: its lines go to ``CLIENT_LOGGER``, and
    only from the level ``SAMSA_CLIENT_LOG`` names (debug, info, warning, error); none without it.

    confluent-kafka's ``logger`` config also sets librdkafka's ``log.queue``: no line is printed
    from librdkafka's threads, each is handed to the logger from the client's poll(), flush()
    or consume() (an AdminClient's from its poll()), and the lines still queued when the client
    is destroyed (such as the BGQUEUE purge) are dropped.
    """
    level, log_level = _client_log_levels()
    if level is not None:
        _show_client_log(level)
    return {"logger": CLIENT_LOGGER, "log_level": log_level}


def spark_log_level() -> str:
    """The ``kafka.log_level`` option of the Spark data source's reads in ``samsa pipeline``.

    Their clients live in Spark's task processes, where no Python logger can follow them, so
    only librdkafka's own level keeps them quiet; with ``SAMSA_CLIENT_LOG`` set they print
    librdkafka's lines themselves.
    """
    return str(_client_log_levels()[1])


def _client_log_levels() -> tuple[int | None, int]:
    """(the Python level to show librdkafka's lines from or None, librdkafka's log_level)."""
    value = os.environ.get(CLIENT_LOG_ENV, "").strip().lower()
    if not value:
        return None, 0
    if value not in _CLIENT_LOG_LEVELS:
        raise click.UsageError(
            f"{CLIENT_LOG_ENV} takes {', '.join(_CLIENT_LOG_LEVELS)}, got {value!r}"
        )
    return _CLIENT_LOG_LEVELS[value]


def _show_client_log(level: int) -> None:
    """Print the client logger's lines from ``level`` on stderr (one handler, however often)."""
    CLIENT_LOGGER.setLevel(level)
    if not any(getattr(h, "samsa_client_log", False) for h in CLIENT_LOGGER.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("librdkafka %(levelname)s %(message)s"))
        handler.samsa_client_log = True  # type: ignore[attr-defined]
        CLIENT_LOGGER.addHandler(handler)
        CLIENT_LOGGER.propagate = False


def client_config(
    bootstrap: str,
    client_id: str,
    extra: Mapping[str, Any] | None = None,
    *,
    short_timeouts: bool = True,
) -> dict[str, Any]:
    """The config of every confluent-kafka client the samsa command builds: its logging
    (``client_logging``), and unless told otherwise the tools' short socket timeouts."""
    parse_bootstrap(bootstrap)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": client_id}
    if short_timeouts:
        config["socket.timeout.ms"] = 10_000
        config["socket.connection.setup.timeout.ms"] = 10_000
    config.update(client_logging())
    config.update(extra or {})
    return config


def serve_client_log(client: Any) -> None:
    """Hand the log lines a failing client has queued to ``CLIENT_LOGGER`` before it goes: an
    AdminClient's are served only by its poll(), and a tool that fails stops polling."""
    client.poll(0)


def error_name(err: ClientError) -> str:
    """Kafka's name for a broker error (TOPIC_ALREADY_EXISTS); librdkafka's for a local one."""
    code = err.code()
    if code >= 0:
        return kafka_name(code)
    return err.name().lstrip("_")


def describe_error(err: object) -> str:
    """One line for a client error: ``NAME: message``."""
    if isinstance(err, KafkaException) and err.args:
        err = err.args[0]
    if isinstance(err, ClientError):
        message = err.str() or ""
        if message.startswith("Broker: "):
            message = message[len("Broker: "):]
        return f"{error_name(err)}: {message}".rstrip(": ")
    return " ".join(str(err).split())


def handle_client_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn client exceptions escaping a command into one ``samsa:`` line."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except KafkaException as exc:
            raise ToolError(describe_error(exc)) from exc

    return wrapper
