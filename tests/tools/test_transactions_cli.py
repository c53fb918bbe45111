"""``samsa transactions`` (kafka-transactions.sh): list, describe and describe-producers run as
a subprocess against an embedded broker, the transactions made by confluent-kafka transactional
producers; the table format and the argument parsing on their own; every failure one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from samsa.embedded import Broker
from samsa.tools.transactions import parse_states, table_lines

from . import RUN_TIMEOUT_S, error_line, free_port, ok, unique

pytestmark = pytest.mark.timeout(120)

WAIT_S = 15.0
TIMEOUT_MS = 45_000  # the producers' transaction.timeout.ms, which describe must show

LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADER = [
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
]
PRODUCERS_HEADER = [
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
]

# ``samsa transactions`` through samsa.cli.run (its one-line errors and exit codes), registered
# on the ``samsa`` group here if samsa.tools does not register it yet.
_RUNNER = (
    "import samsa.cli as cli\n"
    "from samsa.tools.transactions import transactions\n"
    "if 'transactions' not in cli.main.commands:\n"
    "    cli.main.add_command(transactions)\n"
    "cli.run()\n"
)


def txn(*args: str | int | Path) -> subprocess.CompletedProcess[str]:
    """Run ``samsa transactions ARGS``; stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-c", _RUNNER, "transactions", *map(str, args)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("\t")]


def parse_table(out: str, header: list[str]) -> list[list[str]]:
    """The rows of a prettyPrintTable output, after checking its header row."""
    lines = out.splitlines()
    assert lines and cells(lines[0]) == header, out
    rows = [cells(line) for line in lines[1:]]
    for row in rows:
        # The last column may be empty (its tab is trimmed with the padding).
        assert len(row) in (len(header), len(header) - 1) and row[0], out
        row += [""] * (len(header) - len(row))
    return rows


# --- no broker -----------------------------------------------------------------------------------


def test_table_lines_are_kafkas_pretty_print_table() -> None:
    """Cells padded to the column's widest value, then a tab; trailing padding trimmed."""
    assert table_lines(["Id", "State"], [["a-long-id", "Ongoing"], ["b", "Empty"]]) == [
        "Id       \tState",
        "a-long-id\tOngoing",
        "b        \tEmpty",
    ]
    assert table_lines(["ProducerId", "X"], []) == ["ProducerId\tX"]


def test_parse_states() -> None:
    """--state takes Kafka's state names in any case, repeated or comma separated."""
    assert parse_states(["ongoing", "CompleteCommit,completeabort", "Ongoing"]) == [
        "Ongoing", "CompleteCommit", "CompleteAbort"
    ]
    with pytest.raises(click.UsageError) as caught:
        parse_states(["Ongoing,Running"])
    assert caught.value.message.startswith("Invalid state 'Running'. Valid states are: Ongoing")


NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(("args", "message"), [
    (["list"], "Missing option '--bootstrap-server'"),
    (NOWHERE, "Missing command"),
    ([*NOWHERE, "describe"], "Missing option '--transactional-id'"),
    ([*NOWHERE, "describe-producers", "--partition", "0"], "Missing option '--topic'"),
    ([*NOWHERE, "describe-producers", "--topic", "t"], "Missing option '--partition'"),
    ([*NOWHERE, "describe-producers", "--topic", "t", "--partition", "x"],
     "'x' is not a valid integer"),
    ([*NOWHERE, "list", "--state", "Running"], "Invalid state 'Running'"),
    ([*NOWHERE, "list", "--producer-id", "p"], "'p' is not a valid integer"),
    (["--bootstrap-server", "nohost", "list"], "--bootstrap-server takes host:port"),
    ([*NOWHERE, "frobnicate"], "No such command 'frobnicate'"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    """A usage error is one line and exit code 2, before any connection."""
    result = txn(*args)
    line = error_line(result)
    assert result.returncode == 2, result
    assert message in line, line


def test_help_needs_no_bootstrap_server() -> None:
    """``transactions describe-producers --help`` prints the verb's options (as Kafka's does)."""
    out = ok(txn("describe-producers", "--help"))
    assert "--topic" in out and "--partition" in out and "--broker-id" in out


def test_unsupported_command_config(tmp_path: Path) -> None:
    """A --command-config asking for what the wire client lacks: one line, exit code 1."""
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n")
    result = txn(*NOWHERE, "--command-config", config, "list")
    assert "sasl.mechanism=OAUTHBEARER is not supported" in error_line(result)
    assert result.returncode == 1


@pytest.mark.parametrize("args", [
    ["list"], ["describe", "--transactional-id", "x"],
    ["describe-producers", "--topic", "t", "--partition", "0"],
])
def test_unreachable_broker(args: list[str]) -> None:
    """Nothing listening: one line naming the address, exit code 1, at once."""
    port = free_port()
    started = time.monotonic()
    result = txn("--bootstrap-server", f"127.0.0.1:{port}", *args)
    line = error_line(result)
    assert result.returncode == 1
    assert line.startswith(f"samsa: cannot connect to any bootstrap server: 127.0.0.1:{port}"), line
    assert time.monotonic() - started < 10


# --- against a broker ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("tools-transactions")) as b:
        yield b


@pytest.fixture
def bs(broker: Broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def broker_id(broker: Broker) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    return str(next(iter(admin.list_topics(timeout=WAIT_S).brokers)))


def create_topic(broker: Broker, partitions: int = 3) -> str:
    topic = unique("txn-cli")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)],
                                  operation_timeout=10, request_timeout=10)
    futures[topic].result(timeout=WAIT_S)
    return topic


def producer(broker: Broker, transactional_id: str) -> Producer:
    """A transactional producer with its transactional id initialised (state Empty)."""
    p = Producer({
        "bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
        "transaction.timeout.ms": TIMEOUT_MS, "log_level": 0,
    })
    p.init_transactions(WAIT_S)
    return p


def open_transaction(p: Producer, topic: str, partitions: dict[int, int]) -> None:
    """Begin a transaction and write ``count`` records to each partition (left open)."""
    p.begin_transaction()
    for partition, count in partitions.items():
        for i in range(count):
            p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(WAIT_S) == 0


def listed(bs: list[str], *extra: str) -> dict[str, list[str]]:
    """``list``: each row by transactional id."""
    rows = parse_table(ok(txn(*bs, "list", *extra)), LIST_HEADER)
    return {row[0]: row for row in rows}


def described(bs: list[str], transactional_id: str) -> dict[str, str]:
    """``describe``: the one row, by column name."""
    rows = parse_table(
        ok(txn(*bs, "describe", "--transactional-id", transactional_id)), DESCRIBE_HEADER
    )
    assert len(rows) == 1, rows
    return dict(zip(DESCRIBE_HEADER, rows[0], strict=True))


def producers(bs: list[str], topic: str, partition: int) -> list[dict[str, str]]:
    """``describe-producers``: the rows, by column name."""
    out = ok(txn(*bs, "describe-producers", "--topic", topic, "--partition", partition))
    return [dict(zip(PRODUCERS_HEADER, row, strict=True))
            for row in parse_table(out, PRODUCERS_HEADER)]


def eventually(check: Callable[[], Any], what: str) -> Any:
    return wait_for(check, timeout=WAIT_S, what=what, interval=0.1)


def test_list_shows_each_transactional_id_with_its_state(broker: Broker, bs: list[str]) -> None:
    """list: Ongoing while a transaction is open, CompleteCommit after a commit, CompleteAbort
    after an abort; the coordinator's broker id and one producer id per transactional id."""
    topic = create_topic(broker)
    ids = {name: unique(f"list-{name}") for name in ("open", "committed", "aborted")}
    made = {name: producer(broker, tid) for name, tid in ids.items()}
    for p in made.values():
        open_transaction(p, topic, {0: 1})
    made["committed"].commit_transaction(WAIT_S)
    made["aborted"].abort_transaction(WAIT_S)

    expected = {ids["open"]: "Ongoing", ids["committed"]: "CompleteCommit",
                ids["aborted"]: "CompleteAbort"}

    def settled() -> dict[str, list[str]] | None:
        rows = listed(bs)
        states = {tid: rows[tid][3] for tid in ids.values() if tid in rows}
        return rows if states == expected else None

    rows = eventually(settled, "the three states in list")
    coordinator = broker_id(broker)
    assert {rows[tid][1] for tid in ids.values()} == {coordinator}
    producer_ids = [int(rows[tid][2]) for tid in ids.values()]
    assert len(set(producer_ids)) == 3 and min(producer_ids) >= 0

    made["open"].commit_transaction(WAIT_S)
    eventually(lambda: listed(bs)[ids["open"]][3] == "CompleteCommit",
               "CompleteCommit for the committed transaction")
    assert listed(bs)[ids["open"]][2] == rows[ids["open"]][2]


def test_list_filters(broker: Broker, bs: list[str]) -> None:
    """list --state / --producer-id / --duration-filter keep only the matching transactions."""
    topic = create_topic(broker)
    open_id, done_id = unique("filter-open"), unique("filter-done")
    p_open, p_done = producer(broker, open_id), producer(broker, done_id)
    open_transaction(p_open, topic, {1: 1})
    open_transaction(p_done, topic, {1: 1})
    p_done.commit_transaction(WAIT_S)
    eventually(lambda: listed(bs)[done_id][3] == "CompleteCommit", "the commit to complete")

    ongoing = listed(bs, "--state", "ongoing")
    assert open_id in ongoing and done_id not in ongoing
    assert {row[3] for row in ongoing.values()} == {"Ongoing"}
    completed = listed(bs, "--state", "CompleteCommit,CompleteAbort")
    assert done_id in completed and open_id not in completed

    done_pid = listed(bs)[done_id][2]
    assert list(listed(bs, "--producer-id", done_pid)) == [done_id]
    assert open_id in listed(bs, "--duration-filter", "0")
    assert open_id not in listed(bs, "--duration-filter", "3600000")
    p_open.abort_transaction(WAIT_S)


def test_describe_open_transaction(broker: Broker, bs: list[str]) -> None:
    """describe: an open transaction's coordinator, producer id and epoch, timeout, start time,
    duration and partitions; after the commit, no partitions."""
    topic = create_topic(broker)
    tid = unique("describe")
    p = producer(broker, tid)
    before_ms = int(time.time() * 1000)
    open_transaction(p, topic, {2: 2, 0: 1})
    after_ms = int(time.time() * 1000)

    row = described(bs, tid)
    assert row["CoordinatorId"] == broker_id(broker)
    assert row["TransactionalId"] == tid
    assert row["ProducerId"] == listed(bs)[tid][2]
    assert row["ProducerEpoch"] == "0"
    assert row["TransactionState"] == "Ongoing"
    assert row["TransactionTimeoutMs"] == str(TIMEOUT_MS)
    assert before_ms - 1000 <= int(row["CurrentTransactionStartTimeMs"]) <= after_ms
    assert 0 <= int(row["TransactionDurationMs"]) < 60_000
    assert row["TopicPartitions"] == f"{topic}-0,{topic}-2"

    p.commit_transaction(WAIT_S)
    row = eventually(
        lambda: (r := described(bs, tid))["TransactionState"] == "CompleteCommit" and r,
        "describe to show CompleteCommit",
    )
    assert row["TopicPartitions"] == ""
    assert row["ProducerEpoch"] == "0"


def test_describe_without_open_transaction(broker: Broker, bs: list[str]) -> None:
    """describe of a transactional id with no transaction (Empty, as after InitProducerId):
    start time and duration None; a second producer with the same id bumps the epoch."""
    topic = create_topic(broker)
    tid = unique("describe-empty")
    first = producer(broker, tid)
    row = described(bs, tid)
    assert (row["TransactionState"], row["ProducerEpoch"]) == ("Empty", "0")
    assert row["CurrentTransactionStartTimeMs"] == "None"
    assert row["TransactionDurationMs"] == "None"
    assert row["TopicPartitions"] == ""

    open_transaction(first, topic, {0: 1})
    first.commit_transaction(WAIT_S)
    producer(broker, tid)
    again = described(bs, tid)
    assert again["ProducerId"] == row["ProducerId"]
    assert again["ProducerEpoch"] == "1"
    assert again["TransactionState"] == "Empty"
    assert again["CurrentTransactionStartTimeMs"] == "None"


def test_describe_unknown_transactional_id(bs: list[str]) -> None:
    """describe of an id no producer used: TRANSACTIONAL_ID_NOT_FOUND, one line, exit 1."""
    tid = unique("never-used")
    result = txn(*bs, "describe", "--transactional-id", tid)
    line = error_line(result)
    assert result.returncode == 1
    assert line.startswith("samsa: TRANSACTIONAL_ID_NOT_FOUND: "), line
    assert tid in line


def test_describe_producers(broker: Broker, bs: list[str]) -> None:
    """describe-producers: the open transaction's start offset, then None after the commit; the
    next transaction starts after the commit marker; the producer's last sequence and time."""
    topic = create_topic(broker)
    tid = unique("producers")
    p = producer(broker, tid)
    before_ms = int(time.time() * 1000)
    open_transaction(p, topic, {0: 3})
    after_ms = int(time.time() * 1000)
    producer_id = listed(bs)[tid][2]

    rows = producers(bs, topic, 0)
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["ProducerId"], row["ProducerEpoch"]) == (producer_id, "0")
    assert row["LatestCoordinatorEpoch"] == "-1"  # no marker written yet
    assert row["LastSequence"] == "2"
    assert before_ms - 1000 <= int(row["LastTimestamp"]) <= after_ms + 1000
    assert row["CurrentTransactionStartOffset"] == "0"
    assert producers(bs, topic, 1) == []  # not written to

    p.commit_transaction(WAIT_S)
    row = eventually(
        lambda: (r := producers(bs, topic, 0)) and r[0]["CurrentTransactionStartOffset"] == "None"
        and r[0], "the start offset to clear after the commit",
    )
    assert row["ProducerId"] == producer_id
    assert int(row["LatestCoordinatorEpoch"]) >= 0

    open_transaction(p, topic, {0: 2})
    row = producers(bs, topic, 0)[0]
    assert row["CurrentTransactionStartOffset"] == "4"  # 3 records and the commit marker before
    assert row["LastSequence"] == "4"
    p.abort_transaction(WAIT_S)
    eventually(lambda: producers(bs, topic, 0)[0]["CurrentTransactionStartOffset"] == "None",
               "the start offset to clear after the abort")


def test_describe_producers_errors(broker: Broker, bs: list[str]) -> None:
    """An unknown topic (not created by asking), an unknown partition, an unknown broker id:
    each one line, exit code 1."""
    missing = unique("no-such-topic")
    result = txn(*bs, "describe-producers", "--topic", missing, "--partition", "0")
    line = error_line(result)
    assert result.returncode == 1
    assert line == (
        f"samsa: UNKNOWN_TOPIC_OR_PARTITION: Failed to describe producers for partition"
        f" {missing}-0 on leader: This server does not host this topic-partition."
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    assert missing not in admin.list_topics(timeout=WAIT_S).topics

    topic = create_topic(broker, partitions=2)
    result = txn(*bs, "describe-producers", "--topic", topic, "--partition", "2")
    assert error_line(result).startswith(
        f"samsa: UNKNOWN_TOPIC_OR_PARTITION: Failed to describe producers for partition"
        f" {topic}-2 on leader"
    )
    assert result.returncode == 1

    result = txn(*bs, "describe-producers", "--topic", topic, "--partition", "0",
                 "--broker-id", "424242")
    assert "broker 424242 is not in the cluster" in error_line(result)
    assert result.returncode == 1
