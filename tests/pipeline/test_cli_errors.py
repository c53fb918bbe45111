"""``samsa pipeline``'s failures: one ``samsa:`` line on stderr and a non-zero exit, each.

The commands run as subprocesses, the way a user runs them. Most failures are found before
Spark starts and take about a second; one (``load-bad-event``) fails inside a Spark job.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import samsa
from samsa.pipeline.events import MONITORING_SCHEMA_ID, decode

FAST_TIMEOUT_S = 60  # a command that needs no Spark
SPARK_TIMEOUT_S = 240  # a command that starts a Spark session first
CLIENT_TIMEOUT_S = 10


def _samsa() -> list[str]:
    """The console script next to this interpreter, else ``python -m samsa.cli``."""
    script = Path(sys.executable).with_name("samsa")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "samsa.cli"]


def run_samsa(*args: str, cwd: Path, timeout: float = FAST_TIMEOUT_S) -> Run:
    began = time.monotonic()
    done = subprocess.run(
        [*_samsa(), "pipeline", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )
    return Run(done, time.monotonic() - began)


class Run:
    def __init__(self, done: subprocess.CompletedProcess[str], seconds: float) -> None:
        self.returncode = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        self.seconds = seconds

    def __repr__(self) -> str:
        return (f"exit {self.returncode} after {self.seconds:.1f} s\n--- stdout\n{self.stdout}"
                f"--- stderr\n{self.stderr}")


def assert_one_line_failure(run: Run, message: str, exit_code: int | None = None) -> None:
    """Exactly one stderr line, ``samsa: `` then a message matching ``message``."""
    assert run.returncode != 0, run
    if exit_code is not None:
        assert run.returncode == exit_code, run
    assert "Traceback" not in run.stderr, run
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run
    assert lines[0].startswith("samsa: "), run
    assert re.fullmatch(message, lines[0][len("samsa: "):]), run
    assert run.stdout == "", run


def assert_last_line_failure(run: Run, message: str) -> None:
    """The command failed with the right ``samsa:`` line, whatever came before it."""
    assert run.returncode == 1, run
    assert "Traceback" not in run.stderr, run
    last = run.stderr.splitlines()[-1]
    assert last.startswith("samsa: "), run
    assert re.fullmatch(message, last[len("samsa: "):]), run


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("cli-broker") / "data") as broker:
        yield broker


# --- failures before Spark starts ----------------------------------------------------------

BROKER_COMMANDS = ["generate", "load", "stream", "audit"]


@pytest.mark.parametrize("command", BROKER_COMMANDS)
def test_unreachable_bootstrap_server(command: str, closed_port: int, tmp_path: Path) -> None:
    run = run_samsa(command, "--bootstrap-server", f"127.0.0.1:{closed_port}", cwd=tmp_path)
    assert_one_line_failure(
        run,
        f"cannot connect to any bootstrap server: 127.0.0.1:{closed_port} \\(Connection "
        "refused\\)",
        exit_code=1,
    )
    assert not (tmp_path / "warehouse").exists()  # nothing was created on the way out


@pytest.mark.parametrize("command", BROKER_COMMANDS)
def test_missing_bootstrap_server(command: str, tmp_path: Path) -> None:
    run = run_samsa(command, cwd=tmp_path)
    assert_one_line_failure(run, "Missing option '--bootstrap-server'.", exit_code=2)


@pytest.mark.parametrize("value", ["localhost", "127.0.0.1:0", "127.0.0.1:99999", ""])
def test_malformed_bootstrap_server(value: str, tmp_path: Path) -> None:
    run = run_samsa("generate", "--bootstrap-server", value, cwd=tmp_path)
    assert_one_line_failure(
        run, re.escape(f"--bootstrap-server takes host:port[,host:port...], got {value!r}"),
        exit_code=2,
    )


@pytest.mark.parametrize("command", ["generate", "demo"])
def test_bad_format_choice(command: str, closed_port: int, tmp_path: Path) -> None:
    args = ["--bootstrap-server", f"127.0.0.1:{closed_port}"] if command == "generate" else []
    run = run_samsa(command, *args, "--format", "xml", cwd=tmp_path)
    assert_one_line_failure(
        run, "Invalid value for '--format': 'xml' is not one of 'avro', 'json'.", exit_code=2
    )
    assert not (tmp_path / "demo").exists()


def test_negative_event_count(closed_port: int, tmp_path: Path) -> None:
    run = run_samsa("generate", "--bootstrap-server", f"127.0.0.1:{closed_port}",
                    "--events", "-1", cwd=tmp_path)
    assert_one_line_failure(
        run, "Invalid value for '--events': -1 is not in the range x>=0.", exit_code=2
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--events", "0"], r"Invalid value for '--events': 0 is not in the range x>=1\."),
        (["generate", "--bootstrap-server", "127.0.0.1:9", "--events", "many"],
         r"Invalid value for '--events': 'many' is not a valid integer( range)?\."),
        (["generate", "--bootstrap-server", "127.0.0.1:9", "--frontends", "0"],
         r"Invalid value for '--frontends': 0 is not in the range x>=1\."),
        (["stream", "--bootstrap-server", "127.0.0.1:9", "--trigger", "sometimes"],
         r"Invalid value for '--trigger': 'sometimes' is not one of 'available-now', "
         r"'continuous'\."),
        (["report", "--top", "0"], r"Invalid value for '--top': 0 is not in the range x>=1\."),
        (["generate", "--bogus"], r"No such option '--bogus'\.( Did you mean .*)?"),
        (["nope"], r"No such command 'nope'\."),
    ],
    ids=["demo-events-0", "events-not-int", "frontends-0", "trigger", "top-0", "option",
         "command"],
)
def test_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    assert_one_line_failure(run_samsa(*args, cwd=tmp_path), message, exit_code=2)


# --- failures of the commands that run Spark ------------------------------------------------
#
# ``load``, ``report`` and ``audit`` check the table and the topics before they start Spark, so
# those failures are quick. ``load-bad-event`` fails inside a Spark job: its one line must come
# through with none of the JVM's start-up lines before it.


class SparkRuns:
    """Each failing command, run once on first use and shared by the tests."""

    def __init__(self, root: Path, broker: samsa.Broker) -> None:
        self.root = root
        self.broker = broker
        self.runs: dict[str, Run] = {}

    def get(self, case: str) -> Run:
        if case not in self.runs:
            self.runs[case] = getattr(self, case.replace("-", "_"))(self.root / case)
        return self.runs[case]

    def load_not_a_table(self, cwd: Path) -> Run:
        # anything listening passes the reachability check; the table check comes first
        (cwd / "warehouse" / "events").mkdir(parents=True)
        (cwd / "warehouse" / "events" / "part-0.parquet").write_bytes(b"someone else's")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            return run_samsa("load", "--bootstrap-server", f"127.0.0.1:{port}", "--master",
                             "local[1]", cwd=cwd, timeout=SPARK_TIMEOUT_S)

    def load_unknown_topics(self, cwd: Path) -> Run:
        cwd.mkdir(parents=True)
        return run_samsa("load", "--bootstrap-server", self.broker.bootstrap_servers,
                         "--topic-prefix", "never-generated.", "--master", "local[1]",
                         cwd=cwd, timeout=SPARK_TIMEOUT_S)

    def load_bad_event(self, cwd: Path) -> Run:
        cwd.mkdir(parents=True)
        bootstrap = self.broker.bootstrap_servers
        generate_events = run_samsa("generate", "--bootstrap-server", bootstrap, "--events",
                                    "50", "--topic-prefix", "poisoned.", cwd=cwd)
        assert generate_events.returncode == 0, generate_events
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("poisoned.searches", value=b"<html>", partition=2)
        assert producer.flush(CLIENT_TIMEOUT_S) == 0
        return run_samsa("load", "--bootstrap-server", bootstrap, "--topic-prefix", "poisoned.",
                         "--master", "local[1]", cwd=cwd, timeout=SPARK_TIMEOUT_S)

    def report_missing_table(self, cwd: Path) -> Run:
        cwd.mkdir(parents=True)
        return run_samsa("report", "--table", "missing/events", "--master", "local[1]",
                         cwd=cwd, timeout=SPARK_TIMEOUT_S)

    def audit_no_monitoring_topic(self, cwd: Path) -> Run:
        cwd.mkdir(parents=True)
        return run_samsa("audit", "--bootstrap-server", self.broker.bootstrap_servers,
                         "--topic-prefix", "never-generated.", "--master", "local[1]",
                         cwd=cwd, timeout=SPARK_TIMEOUT_S)


@pytest.fixture(scope="module")
def spark_runs(tmp_path_factory: pytest.TempPathFactory, cli_broker: samsa.Broker) -> SparkRuns:
    return SparkRuns(tmp_path_factory.mktemp("spark-cli"), cli_broker)


SPARK_CASES = {
    "load-not-a-table": r"warehouse/events exists and is not a samsa table \(a link to "
                        r"\.events\.versions/\)",
    "load-unknown-topics": r"topic never-generated\.page_views does not exist: run `samsa "
                           r"pipeline generate` first, or check --topic-prefix",
    "load-bad-event": r"poisoned\.searches-2 at offset \d+ is not an activity event: neither "
                      r"Avro \(magic byte 0\) nor JSON: .*",
    "report-missing-table": r"no table at missing/events: run `samsa pipeline load` first",
    "audit-no-monitoring-topic": r"topic never-generated\.monitoring does not exist: run `samsa "
                                 r"pipeline generate` first, or check --topic-prefix",
}


@pytest.mark.parametrize("case", list(SPARK_CASES))
def test_spark_command_fails_in_one_line(case: str, spark_runs: SparkRuns) -> None:
    run = spark_runs.get(case)
    assert_one_line_failure(run, SPARK_CASES[case], exit_code=1)
    assert run.stdout == "", run


def test_checks_before_spark_fail_fast(spark_runs: SparkRuns) -> None:
    for case in SPARK_CASES:
        if case != "load-bad-event":
            assert spark_runs.get(case).seconds < 10, spark_runs.get(case)


def test_load_leaves_a_foreign_directory_alone(spark_runs: SparkRuns) -> None:
    spark_runs.get("load-not-a-table")
    events = spark_runs.root / "load-not-a-table" / "warehouse" / "events"
    assert not events.is_symlink()
    assert sorted(p.name for p in events.iterdir()) == ["part-0.parquet"]
    assert not (events.parent / ".events.versions").exists()


# --- librdkafka's own log lines --------------------------------------------------------------
#
# librdkafka logs every refused connection (``%3|...|FAIL|...``) and, on a busy machine, the
# purge of events a client left unserved when it is destroyed (``%6|...|BGQUEUE|...``). The
# command's clients hand those lines to Python logging, where they stay unless SAMSA_CLIENT_LOG
# asks for them, so they never come between the user and the command's own output.

DEAD_SERVERS = 10


def with_dead_servers(bootstrap: str) -> str:
    """``bootstrap`` after ten addresses nothing listens on.

    The reachability check passes (one address accepts), and each client librdkafka builds
    first connects to a bootstrap address at random: a dead one, which it logs, with 10 chances
    in 11. ``generate`` builds four clients, so without the fix its stderr is clean only by a
    1 in 14,641 chance.
    """
    dead = []
    for _ in range(DEAD_SERVERS):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            dead.append(f"127.0.0.1:{sock.getsockname()[1]}")
    return ",".join([*dead, bootstrap])


def test_generate_keeps_librdkafka_lines_off_stderr(
    cli_broker: samsa.Broker, tmp_path: Path
) -> None:
    bootstrap = with_dead_servers(cli_broker.bootstrap_servers)
    run = run_samsa("generate", "--bootstrap-server", bootstrap, "--events", "200", "--format",
                    "json", "--topic-prefix", "dead-bootstrap.", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run
    assert run.stderr == "", run
    assert run.stdout.startswith("published 200 events (dead-bootstrap.clicks "), run


def test_load_fails_in_one_line_beside_a_dead_bootstrap_server(
    cli_broker: samsa.Broker, tmp_path: Path
) -> None:
    bootstrap = with_dead_servers(cli_broker.bootstrap_servers)
    run = run_samsa("load", "--bootstrap-server", bootstrap, "--topic-prefix",
                    "never-generated-dead.", cwd=tmp_path)
    assert_one_line_failure(
        run, r"topic never-generated-dead\.page_views does not exist: run `samsa pipeline "
             r"generate` first, or check --topic-prefix", exit_code=1,
    )


# --- a successful generate -----------------------------------------------------------------


def _message_counts(bootstrap: str, topics: list[str]) -> dict[str, dict[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-test-count",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=CLIENT_TIMEOUT_S)
        counts: dict[str, dict[int, int]] = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            assert meta is not None and meta.error is None, f"no topic {topic}"
            for partition in meta.partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S, cached=False
                )
                counts.setdefault(topic, {})[partition] = high - low
        return counts
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str, partitions: dict[int, int]) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-test-read",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        want = sum(partitions.values())
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < want and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                assert message.error() is None, message.error()
                values.append(message.value())
        assert len(values) == want, f"read {len(values)} of {want} messages of {topic}"
        return values
    finally:
        consumer.close()


def test_generate_json(cli_broker: samsa.Broker, tmp_path: Path) -> None:
    bootstrap = cli_broker.bootstrap_servers
    run = run_samsa("generate", "--bootstrap-server", bootstrap, "--events", "2000",
                    "--format", "json", "--seed", "7", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run
    assert run.stderr == "", run  # under 100,000 events there is no progress report
    match = re.fullmatch(
        r"published 2,000 events \(clicks (?P<clicks>[\d,]+), page_views (?P<page_views>[\d,]+)"
        r", searches (?P<searches>[\d,]+)\) and (?P<monitoring>[\d,]+) monitoring events for "
        r"(?P<windows>\d+) windows in \d+\.\d s \(json\)\n",
        run.stdout,
    )
    assert match is not None, run
    printed = {name: int(value.replace(",", "")) for name, value in match.groupdict().items()}
    # 2000 events spread over the default 120 minutes fill all 120 one-minute windows
    assert printed["windows"] == 120
    assert printed["clicks"] + printed["page_views"] + printed["searches"] == 2000
    assert min(printed["clicks"], printed["page_views"], printed["searches"]) > 0

    topics = ["page_views", "searches", "clicks", "monitoring"]
    counts = _message_counts(bootstrap, topics)
    assert {t: len(parts) for t, parts in counts.items()} == dict.fromkeys(topics, 3)
    assert {t: sum(parts.values()) for t, parts in counts.items()} == {
        t: printed[t] for t in topics
    }

    # the monitoring events are JSON and count exactly what was published, per topic
    values = _read_all(bootstrap, "monitoring", counts["monitoring"])
    assert all(v.startswith(b"{") for v in values)
    monitored: dict[str, int] = {}
    for value in values:
        event = decode(value, MONITORING_SCHEMA_ID)
        assert event["window_ms"] == 60_000
        assert event["window_start"] % 60_000 == 0
        assert event["count"] > 0
        monitored[event["topic"]] = monitored.get(event["topic"], 0) + event["count"]
    assert monitored == {t: printed[t] for t in ("page_views", "searches", "clicks")}
    windows = {json.loads(v)["window_start"] for v in values}
    assert len(windows) == 120
