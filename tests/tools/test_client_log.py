"""librdkafka's log lines in the samsa command's clients (``tools/common.client_config``): handed
to Python logging, dropped unless ``SAMSA_CLIENT_LOG`` names a level, never printed raw."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import click
import pytest
from confluent_kafka import KafkaException, Producer

from samsa.embedded import Broker
from samsa.tools.common import (
    CLIENT_LOG_ENV,
    CLIENT_LOGGER,
    client_config,
    serve_client_log,
    spark_log_level,
)

from . import error_line, free_port, ok, samsa, unique

RAW_LINE = re.compile(r"^%\d\|", re.MULTILINE)  # librdkafka's own stderr format


@pytest.fixture
def client_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """CLIENT_LOGGER, put back as it was after the test; SAMSA_CLIENT_LOG unset."""
    monkeypatch.delenv(CLIENT_LOG_ENV, raising=False)
    handlers, level, propagate = list(CLIENT_LOGGER.handlers), CLIENT_LOGGER.level, \
        CLIENT_LOGGER.propagate
    yield CLIENT_LOGGER
    CLIENT_LOGGER.handlers[:] = handlers
    CLIENT_LOGGER.setLevel(level)
    CLIENT_LOGGER.propagate = propagate


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def refused_lines(config: dict[str, Any], lines: Lines) -> list[logging.LogRecord]:
    """Poll a producer of ``config`` (a closed port) until librdkafka logs the refused connect."""
    producer = Producer({**config, "message.timeout.ms": 60_000})
    producer.produce("t", b"v")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        producer.poll(0.2)
        failed = [r for r in lines.records if "Connection refused" in r.getMessage()]
        if failed:
            producer.purge()
            return failed
    producer.purge()
    return []


def test_every_config_hands_lines_to_the_logger_and_drops_them(
    client_logger: logging.Logger,
) -> None:
    for config in (client_config("127.0.0.1:9092", "a"),
                   client_config("127.0.0.1:9092", "b", {"acks": "all"}, short_timeouts=False)):
        assert config["logger"] is client_logger
        assert config["log_level"] == 0  # librdkafka drops every line before queuing it
    assert spark_log_level() == "0"


def test_lines_asked_for_go_through_logging(
    client_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(CLIENT_LOG_ENV, "Warning")
    lines = Lines()
    client_logger.addHandler(lines)
    config = client_config(f"127.0.0.1:{free_port()}", "samsa-log-test")
    assert config["log_level"] == 4
    assert spark_log_level() == "4"
    failed = refused_lines(config, lines)
    assert failed, [r.getMessage() for r in lines.records]
    assert failed[0].levelno == logging.ERROR
    assert failed[0].getMessage().startswith("FAIL [samsa-log-test#producer-")
    err = capsys.readouterr().err  # the handler SAMSA_CLIENT_LOG adds, on stderr
    assert "librdkafka ERROR FAIL [samsa-log-test#producer-" in err, err
    assert not RAW_LINE.search(err), err


def test_lines_below_the_level_asked_for_stay_in_librdkafka(
    client_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CLIENT_LOG_ENV, "error")
    assert client_config("127.0.0.1:9092", "a")["log_level"] == 3
    assert client_logger.getEffectiveLevel() == logging.ERROR
    # one stderr handler, however many clients are built
    client_config("127.0.0.1:9092", "b")
    shown = [h for h in client_logger.handlers if isinstance(h, logging.StreamHandler)
             and not isinstance(h, logging.FileHandler)]
    assert len(shown) == 1, client_logger.handlers


def test_an_admin_client_lines_are_served_when_it_fails(
    client_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from confluent_kafka.admin import AdminClient

    monkeypatch.setenv(CLIENT_LOG_ENV, "error")
    lines = Lines()
    client_logger.addHandler(lines)
    admin = AdminClient(client_config(f"127.0.0.1:{free_port()}", "samsa-log-test"))
    with pytest.raises(KafkaException):  # a transport failure
        admin.list_topics(timeout=2)
    assert lines.records == []  # an AdminClient's lines wait for its poll()
    serve_client_log(admin)
    assert any("Connection refused" in r.getMessage() for r in lines.records)


def test_an_unknown_level_is_a_usage_error(
    client_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CLIENT_LOG_ENV, "loud")
    with pytest.raises(click.UsageError, match="SAMSA_CLIENT_LOG takes debug, info, warning, "
                                               "error, got 'loud'"):
        client_config("127.0.0.1:9092", "a")


def test_an_unknown_level_fails_a_tool_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLIENT_LOG_ENV, "loud")
    line = error_line(samsa("topics", "--bootstrap-server", f"127.0.0.1:{free_port()}",
                            "--list"))
    assert line == "samsa: SAMSA_CLIENT_LOG takes debug, info, warning, error, got 'loud'"


def test_tools_beside_a_dead_bootstrap_server_print_no_librdkafka_line(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each tool's client connects first to a random bootstrap address, mostly a dead one."""
    dead = ",".join(f"127.0.0.1:{free_port()}" for _ in range(10))
    with Broker(tmp_path_factory.mktemp("client-log")) as broker:
        bootstrap = f"{dead},{broker.bootstrap_servers}"
        topic = unique("quiet")
        created = samsa("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic)
        assert ok(created) == f"Created topic {topic}.\n"
        assert created.stderr == ""
        produced = samsa("produce", "--bootstrap-server", bootstrap, "--topic", topic,
                         stdin="one\ntwo\n")
        ok(produced)
        assert produced.stderr == ""
        consumed = samsa("consume", "--bootstrap-server", bootstrap, "--topic", topic,
                         "--from-beginning", "--max-messages", 2)
        assert ok(consumed) == "one\ntwo\n"
        assert consumed.stderr == "Processed a total of 2 messages\n"
