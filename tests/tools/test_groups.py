"""``samsa groups`` (kafka-consumer-groups.sh): the parsing pieces on their own, then the tool
run as a subprocess against an embedded broker.

Committed offsets come from "standalone" commits (a consumer that assigns partitions and
commits, never joining); an active group is a subscribing consumer polling in a thread.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import click
import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.embedded import Broker
from samsa.tools.common import ToolError
from samsa.tools.groups import (
    assignment_text,
    clamp,
    format_line,
    parse_datetime,
    parse_duration,
    parse_states,
    parse_topic_arg,
    parse_types,
)
from samsa.tools.wire import OFFSET_DELETE, Wire

from . import error_line, free_port, ok, samsa, unique

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
# Every wait on the broker gives up after this long.
WAIT_S = 20.0


def epoch_ms(*args: int, tz: dt.tzinfo = dt.UTC) -> int:
    return int(dt.datetime(*args, tzinfo=tz).timestamp() * 1000)


# --- parsing, no broker --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-03-04T05:06:07.089", epoch_ms(2024, 3, 4, 5, 6, 7, 89_000)),
    ("2024-03-04T05:06:07.089Z", epoch_ms(2024, 3, 4, 5, 6, 7, 89_000)),
    ("2024-03-04T05:06:07.089+02:00",
     epoch_ms(2024, 3, 4, 5, 6, 7, 89_000, tz=dt.timezone(dt.timedelta(hours=2)))),
    ("2024-03-04T05:06:07.089-0130",
     epoch_ms(2024, 3, 4, 5, 6, 7, 89_000, tz=dt.timezone(-dt.timedelta(hours=1, minutes=30)))),
    ("2024-03-04T05:06:07.089+05",
     epoch_ms(2024, 3, 4, 5, 6, 7, 89_000, tz=dt.timezone(dt.timedelta(hours=5)))),
    ("1970-01-01T00:00:00.000", 0),
])
def test_parse_datetime(text: str, expected: int) -> None:
    assert parse_datetime(text) == expected


@pytest.mark.parametrize("text", [
    "2024-03-04", "2024-03-04 05:06:07.089", "2024-03-04T05:06:07", "2024-03-04T05:06:07.08",
    "2024-13-04T05:06:07.089", "2024-02-30T05:06:07.089", "2024-03-04T24:00:00.000",
    "2024-03-04T05:06:07.089+2:00", "2024-03-04T05:06:07.089z", "2024-03-04T05:06:07.089+25:00",
    "yesterday",
])
def test_parse_datetime_rejects(text: str) -> None:
    with pytest.raises(click.UsageError):
        parse_datetime(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("PT1H", dt.timedelta(hours=1)),
    ("pt15m", dt.timedelta(minutes=15)),
    ("P2D", dt.timedelta(days=2)),
    ("P1DT2H3M4.5S", dt.timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
    ("PT0.001S", dt.timedelta(milliseconds=1)),
    ("PT1,25S", dt.timedelta(seconds=1.25)),
    ("-PT1M", -dt.timedelta(minutes=1)),
    ("PT-1M30S", dt.timedelta(seconds=-30)),
    ("PT-1.5S", dt.timedelta(seconds=-1.5)),
    ("+PT10S", dt.timedelta(seconds=10)),
])
def test_parse_duration(text: str, expected: dt.timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "P1H", "PT1.5M", "PT1D", "P1DT", "PT1H2",
                                  "P1W", "PTS"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(click.UsageError):
        parse_duration(text)


@pytest.mark.parametrize(("arg", "expected"), [
    ("orders", ("orders", None)),
    ("orders:0", ("orders", [0])),
    ("orders:2,0,1", ("orders", [2, 0, 1])),
    ("my.topic-1:7", ("my.topic-1", [7])),
])
def test_parse_topic_arg(arg: str, expected: tuple[str, list[int] | None]) -> None:
    assert parse_topic_arg(arg) == expected


@pytest.mark.parametrize(("arg", "message"), [
    ("orders:", "Invalid topic arg 'orders:', expected topic name and partitions"),
    ("a:b:1", "Invalid topic arg 'a:b:1', expected topic name and partitions"),
    (":1", "Invalid topic arg ':1', expected topic name and partitions"),
    ("orders:0,x", "Invalid partition 'x' specified in topic arg 'orders:0,x'"),
    ("orders:0,", "Invalid partition '' specified in topic arg 'orders:0,'"),
])
def test_parse_topic_arg_rejects(arg: str, message: str) -> None:
    with pytest.raises(click.UsageError) as caught:
        parse_topic_arg(arg)
    assert caught.value.message == message


@pytest.mark.parametrize(("offset", "earliest", "latest", "expected"), [
    (5, 0, 10, 5), (0, 0, 10, 0), (10, 0, 10, 10), (11, 0, 10, 10), (-3, 2, 10, 2),
    (1, 2, 10, 2), (7, None, None, 7), (99, 3, None, 99), (-1, None, 4, -1),
])
def test_clamp(offset: int, earliest: int | None, latest: int | None, expected: int) -> None:
    assert clamp(offset, earliest, latest) == expected


def test_parse_states() -> None:
    assert parse_states("stable,EMPTY, PreparingRebalance") == {
        "Stable", "Empty", "PreparingRebalance"
    }
    with pytest.raises(click.UsageError) as caught:
        parse_states("stable,bogus")
    assert caught.value.message.startswith("Invalid state list 'stable,bogus'. Valid states are:")


def test_parse_types() -> None:
    assert parse_types("Classic, CONSUMER") == {"classic", "consumer"}
    with pytest.raises(click.UsageError) as caught:
        parse_types("classic,share")
    assert caught.value.message == ("Invalid types list 'classic,share'. Valid types are: "
                                    "classic, consumer")


def test_format_line_and_assignment_text() -> None:
    assert format_line(["GROUP", "TOPIC", "PARTITION", "X"], [15, 15, 10]) == (
        "GROUP           TOPIC           PARTITION  X"
    )
    assert format_line(["a-group-with-a-long-name", "t", 0], [15, 15]) == (
        "a-group-with-a-long-name t               0"
    )
    assert format_line(["GROUP", "STATE"], [25, 20]) == "GROUP                     STATE"
    assert assignment_text([("b", 2), ("a", 1), ("b", 0)]) == "a:1;b:0,2"
    assert assignment_text([]) == "-"


# --- usage errors: refused before any connection -------------------------------------------------

NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(("args", "message"), [
    ([], "Command must include exactly one action"),
    (["--list", "--describe"], "Command must include exactly one action"),
    (["--describe"], "Option --describe takes one of these options: --all-groups, --group"),
    (["--describe", "--group", "g", "--all-groups"], "--group can't be used with --all-groups"),
    (["--describe", "--group", "g", "--members", "--state"], "takes at most one of these"),
    (["--describe", "--group", "g", "--state", "Stable"], "does not take a value for --state"),
    (["--list", "--group", "g"], "option --group can't be used with --list"),
    (["--list", "--state", "nope"], "Invalid state list 'nope'"),
    (["--list", "--type", "nope"], "Invalid types list 'nope'"),
    (["--describe", "--group", "g", "--type"], "option --type can't be used with --describe"),
    (["--delete"], "Option --delete takes one of these options"),
    (["--delete", "--group", "g", "--topic", "t"], "does not support topic-specific offset"),
    (["--delete-offsets", "--group", "g"], "Option --delete-offsets takes the following options"),
    (["--delete-offsets", "--group", "g", "--topic", "t:x"], "Invalid partition 'x'"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "requires one of the following scen"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"],
     "option --to-earliest can't be used with --to-latest"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes should be"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run",
      "--execute"], "only accepts one of --execute and --dry-run"),
    (["--reset-offsets", "--topic", "t", "--to-earliest"], "takes one of these options"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "2024-01-01"],
     "does not contain a 'T'"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1h"],
     "--by-duration takes PnDTnHnMnS"),
    (["--reset-offsets", "--group", "g", "--topic", "t:", "--to-latest"], "Invalid topic arg"),
    (["--describe", "--group", "g", "--to-latest"], "--to-latest can't be used with --describe"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    line = error_line(samsa("groups", *NOWHERE, *args))
    assert message in line, line


def test_unreachable_broker() -> None:
    line = error_line(samsa("groups", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list"))
    assert "cannot connect to any bootstrap server" in line


# --- against a broker ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("tools-groups"), num_partitions=PARTITIONS) as b:
        yield b


@pytest.fixture
def bs(broker: Broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def client_config(broker: Broker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "log_level": 0, **extra}


def create_topic(broker: Broker, prefix: str, partitions: int = PARTITIONS) -> str:
    topic = unique(prefix)
    admin = AdminClient(client_config(broker))
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)],
                                  operation_timeout=10, request_timeout=10)
    futures[topic].result(timeout=WAIT_S)
    return topic


def produce(
    broker: Broker, topic: str, partition: int, count: int, timestamps: list[int] | None = None
) -> None:
    producer = Producer(client_config(broker, acks="all"))
    for i in range(count):
        kwargs = {} if timestamps is None else {"timestamp": timestamps[i]}
        producer.produce(topic, value=f"v{i}".encode(), partition=partition, **kwargs)
    assert producer.flush(WAIT_S) == 0


def commit(broker: Broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A standalone commit: assign, commit, close (the group is never joined)."""
    consumer = Consumer(client_config(broker, **{"group.id": group, "enable.auto.commit": False}))
    try:
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        consumer.assign(tps)
        consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()


def committed(broker: Broker, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer(client_config(broker, **{"group.id": group, "enable.auto.commit": False}))
    try:
        tps = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=WAIT_S
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def table(out: str) -> list[list[str]]:
    """The rows of Kafka-style table output (blank lines and the header dropped)."""
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, out
    return [line.split() for line in lines[1:]]


def header(out: str) -> str:
    return next(line for line in out.splitlines() if line.strip())


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


class Member:
    """A subscribing consumer polling in a thread: an active (Stable) group member."""

    def __init__(self, broker: Broker, group: str, topic: str, client_id: str,
                 protocol: str = "classic") -> None:
        config = {"group.id": group, "client.id": client_id, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"}
        if protocol == "classic":
            config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        else:  # KIP-848: the broker decides the session and the assignment
            config.update({"group.protocol": "consumer", "group.remote.assignor": "range"})
        self.consumer = Consumer(client_config(broker, **config))
        self.topic = topic
        self.assigned = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.consumer.subscribe(
                [self.topic], on_assign=lambda _c, parts: parts and self.assigned.set()
            )
            while not self.stopping.is_set():
                self.consumer.poll(0.1)
        finally:
            self.consumer.close()  # LeaveGroup: the group goes back to Empty

    def __enter__(self) -> Member:
        self.thread.start()
        assert self.assigned.wait(WAIT_S), "the member got no assignment"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(WAIT_S)


def group_state(broker: Broker, group: str) -> Any:
    admin = AdminClient(client_config(broker))
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(WAIT_S).state


def test_list_and_describe_committed_offsets(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "described")
    produce(broker, topic, 0, 5)
    produce(broker, topic, 1, 3)
    group = unique("standalone")
    commit(broker, group, {(topic, 0): 2, (topic, 1): 3})

    assert group in ok(samsa("groups", *bs, "--list")).splitlines()
    out = ok(samsa("groups", *bs, "--list", "--state"))
    assert header(out).split() == ["GROUP", "STATE"]
    assert [group, "Empty"] in table(out)
    out = ok(samsa("groups", *bs, "--list", "--state", "empty"))
    assert [group, "Empty"] in table(out)
    out = ok(samsa("groups", *bs, "--list", "--state", "Stable"))
    assert group not in out

    result = samsa("groups", *bs, "--describe", "--group", group)
    out = ok(result)
    assert result.stderr == f"Consumer group '{group}' has no active members.\n"
    assert out.startswith("\n")  # Kafka's blank line before a table
    assert header(out).split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
        "HOST", "CLIENT-ID",
    ]
    assert table(out) == [
        [group, topic, "0", "2", "5", "3", "-", "-", "-"],
        [group, topic, "1", "3", "3", "0", "-", "-", "-"],
    ]
    # --offsets is the default; --verbose adds the committed leader epoch.
    assert ok(samsa("groups", *bs, "--describe", "--group", group, "--offsets")) == out
    out = ok(samsa("groups", *bs, "--describe", "--group", group, "--verbose"))
    assert header(out).split()[3] == "LEADER-EPOCH"
    assert [row[:3] + row[4:] for row in table(out)] == [
        [group, topic, "0", "2", "5", "3", "-", "-", "-"],
        [group, topic, "1", "3", "3", "0", "-", "-", "-"],
    ]

    out = ok(samsa("groups", *bs, "--describe", "--group", group, "--state"))
    assert header(out).split() == [
        "GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"
    ]
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    assert table(out) == [
        [group, f"{host}:{port}", f"({broker.server.broker_id})", "-", "Empty", "0"]
    ]
    # An empty group has no members to list: only the notice.
    result = samsa("groups", *bs, "--describe", "--group", group, "--members")
    assert ok(result) == ""
    assert result.stderr == f"Consumer group '{group}' has no active members.\n"


def test_describe_missing_and_all_groups(broker: Broker, bs: list[str]) -> None:
    missing = unique("missing")
    for view in ([], ["--members"], ["--state"]):
        line = error_line(samsa("groups", *bs, "--describe", "--group", missing, *view))
        assert line == f"samsa: Consumer group '{missing}' does not exist."

    topic = create_topic(broker, "all-groups")
    first, second = unique("all-a"), unique("all-b")
    commit(broker, first, {(topic, 0): 0})
    commit(broker, second, {(topic, 2): 0})
    out = ok(samsa("groups", *bs, "--describe", "--all-groups"))
    rows = [row for row in table(out) if row and row[0] in (first, second)]
    assert [row[:3] for row in rows] == [[first, topic, "0"], [second, topic, "2"]]

    # A group that exists is printed even when another does not; the error comes last.
    result = samsa("groups", *bs, "--describe", "--group", first, "--group", missing)
    assert first in result.stdout
    assert error_line(result) == f"samsa: Consumer group '{missing}' does not exist."


def test_reset_offsets_dry_run_and_execute(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "reset")
    for partition, count in enumerate((10, 6, 4)):
        produce(broker, topic, partition, count)
    group = unique("reset")
    commit(broker, group, {(topic, 0): 5, (topic, 1): 2})
    reset = ["groups", *bs, "--reset-offsets", "--group", group]

    def plan(out: str) -> dict[int, int]:
        assert header(out).split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        rows = table(out)
        assert all(row[:2] == [group, topic] for row in rows), rows
        return {int(row[2]): int(row[3]) for row in rows}

    # Dry run (the default, with Kafka's warning): the plan, nothing committed.
    result = samsa(*reset, "--topic", topic, "--to-earliest")
    assert plan(ok(result)) == {0: 0, 1: 0, 2: 0}
    assert result.stderr.startswith("WARN: No action will be performed")
    assert committed(broker, group, topic) == {0: 5, 1: 2}
    result = samsa(*reset, "--topic", topic, "--to-latest", "--dry-run")
    assert plan(ok(result)) == {0: 10, 1: 6, 2: 4}
    assert result.stderr == ""

    # --execute commits; the plan printed is what was committed.
    assert plan(ok(samsa(*reset, "--topic", f"{topic}:0,2", "--to-latest", "--execute"))) == {
        0: 10, 2: 4,
    }
    assert committed(broker, group, topic) == {0: 10, 1: 2, 2: 4}
    # --to-offset and --shift-by are clamped into [log start, log end].
    assert plan(ok(samsa(*reset, "--topic", topic, "--to-offset", 7, "--execute"))) == {
        0: 7, 1: 6, 2: 4,
    }
    assert plan(ok(samsa(*reset, "--all-topics", "--shift-by", -3, "--execute"))) == {
        0: 4, 1: 3, 2: 1,
    }
    result = samsa(*reset, "--all-topics", "--shift-by", -100, "--dry-run")
    assert plan(ok(result)) == {0: 0, 1: 0, 2: 0}
    assert (
        f"WARN: New offset (-96) is lower than earliest offset for topic partition {topic}-0."
        " Value will be set to 0.\n"
    ) in result.stderr
    assert plan(ok(samsa(*reset, "--topic", f"{topic}:1", "--shift-by", 100, "--dry-run"))) == {
        1: 6,
    }
    assert plan(ok(samsa(*reset, "--all-topics", "--to-current", "--dry-run"))) == {
        0: 4, 1: 3, 2: 1,
    }
    assert committed(broker, group, topic) == {0: 4, 1: 3, 2: 1}
    # The describe view agrees.
    rows = table(ok(samsa("groups", *bs, "--describe", "--group", group, "--timeout", 5000)))
    assert [row[2:6] for row in rows] == [["0", "4", "10", "6"], ["1", "3", "6", "3"],
                                          ["2", "1", "4", "3"]]


def test_reset_to_current_without_commit_and_new_group(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "reset-new")
    produce(broker, topic, 0, 4)
    produce(broker, topic, 1, 2)
    group = unique("never-seen")
    # Kafka resets a group that does not exist yet: the commit creates it.
    out = ok(samsa("groups", *bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:0,1",
                   "--to-current", "--execute"))
    assert [row[2:] for row in table(out)] == [["0", "4"], ["1", "2"]]
    assert committed(broker, group, topic) == {0: 4, 1: 2}
    assert group in ok(samsa("groups", *bs, "--list")).splitlines()


def test_reset_to_datetime_and_by_duration(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "reset-time")
    base = epoch_ms(2024, 5, 6, 7, 0, 0)
    produce(broker, topic, 0, 5, [base + i * 1000 for i in range(5)])  # 07:00:00 .. 07:00:04
    now = int(time.time() * 1000)
    produce(broker, topic, 1, 4, [now - 7_200_000, now - 3_700_000, now - 60_000, now])
    group = unique("time")
    reset = ["groups", *bs, "--reset-offsets", "--group", group, "--dry-run"]

    def new_offsets(*args: str) -> dict[int, int]:
        return {int(r[2]): int(r[3]) for r in table(ok(samsa(*reset, *args)))}

    assert new_offsets("--topic", f"{topic}:0", "--to-datetime", "2024-05-06T07:00:02.500") == {
        0: 3
    }
    assert new_offsets("--topic", f"{topic}:0", "--to-datetime", "2024-05-06T07:00:02.000Z") == {
        0: 2
    }
    assert new_offsets("--topic", f"{topic}:0", "--to-datetime",
                       "2024-05-06T09:00:01.000+02:00") == {0: 1}
    assert new_offsets("--topic", f"{topic}:0", "--to-datetime", "2000-01-01T00:00:00.000") == {
        0: 0
    }
    # After the last record: Kafka warns and falls back to the log end offset.
    result = samsa(*reset, "--topic", f"{topic}:0", "--to-datetime", "2030-01-01T00:00:00.000")
    assert [row[2:] for row in table(ok(result))] == [["0", "5"]]
    assert f"Warn: Partition 0 from topic {topic} is empty" in result.stderr

    assert new_offsets("--topic", f"{topic}:1", "--by-duration", "PT1H") == {1: 2}
    assert new_offsets("--topic", f"{topic}:1", "--by-duration", "PT3H") == {1: 0}
    assert new_offsets("--topic", f"{topic}:1", "--by-duration", "PT1H2M") == {1: 1}


def test_reset_errors(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "reset-bad")
    produce(broker, topic, 0, 2)
    group = unique("bad")
    commit(broker, group, {(topic, 0): 1})
    reset = ["groups", *bs, "--reset-offsets", "--group", group]
    line = error_line(samsa(*reset, "--topic", topic, "--shift-by", 1))
    assert line == (
        f"samsa: Cannot shift offset for partition {topic}-1 since there is no current"
        " committed offset"
    )
    line = error_line(samsa(*reset, "--topic", f"{topic}:0,7", "--to-earliest"))
    assert line == f'samsa: UNKNOWN_TOPIC_OR_PARTITION: The partitions "{topic}-7" do not exist'
    missing = unique("no-such-topic")
    line = error_line(samsa(*reset, "--topic", missing, "--to-earliest"))
    assert line == f"samsa: UNKNOWN_TOPIC_OR_PARTITION: Topic '{missing}' does not exist"
    assert committed(broker, group, topic) == {0: 1}


def test_delete_groups(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "delete")
    first, second = unique("del-a"), unique("del-b")
    commit(broker, first, {(topic, 0): 0})
    commit(broker, second, {(topic, 1): 0})
    out = ok(samsa("groups", *bs, "--delete", "--group", first, "--group", second))
    assert out == f"Deletion of requested consumer groups ('{first}', '{second}') was successful.\n"
    listed = ok(samsa("groups", *bs, "--list")).splitlines()
    assert first not in listed and second not in listed
    assert committed(broker, first, topic) == {}

    third = unique("del-c")
    commit(broker, third, {(topic, 0): 0})
    missing = unique("del-missing")
    result = samsa("groups", *bs, "--delete", "--group", third, "--group", missing)
    assert result.stdout == f"These consumer groups were deleted successfully: '{third}'\n"
    assert error_line(result) == (
        "samsa: Deletion of some consumer groups failed: Group"
        f" '{missing}' could not be deleted due to: GROUP_ID_NOT_FOUND: The group id does not"
        " exist"
    )


def test_delete_offsets(broker: Broker, bs: list[str]) -> None:
    topic, other = create_topic(broker, "deloff"), create_topic(broker, "deloff-other")
    group = unique("deloff")
    commit(broker, group, {(topic, 0): 1, (topic, 1): 1, (topic, 2): 1, (other, 0): 1})

    out = ok(samsa("groups", *bs, "--delete-offsets", "--group", group, "--topic", f"{topic}:1"))
    assert out.splitlines()[0] == f"Request succeeded for deleting offsets from group {group}."
    assert header(out.split("\n", 1)[1]).split() == ["TOPIC", "PARTITION", "STATUS"]
    assert table(out.split("\n", 1)[1]) == [[topic, "1", "Successful"]]
    assert committed(broker, group, topic) == {0: 1, 2: 1}

    # A topic without partitions means all of them.
    out = ok(samsa("groups", *bs, "--delete-offsets", "--group", group, "--topic", other))
    assert table(out.split("\n", 1)[1]) == [
        [other, str(p), "Successful"] for p in range(PARTITIONS)
    ]
    assert committed(broker, group, other) == {}
    assert committed(broker, group, topic) == {0: 1, 2: 1}

    missing = unique("deloff-missing")
    line = error_line(samsa("groups", *bs, "--delete-offsets", "--group", missing,
                            "--topic", f"{topic}:0"))
    assert line == "samsa: GROUP_ID_NOT_FOUND: The group id does not exist."

    # An unknown topic is a row of its own; the rest is still deleted.
    nothing = unique("deloff-nothing")
    result = samsa("groups", *bs, "--delete-offsets", "--group", group, "--topic", nothing,
                   "--topic", f"{topic}:0")
    assert table(result.stdout) == sorted([
        [nothing, "-", "Error:", "UNKNOWN_TOPIC_OR_PARTITION:", "Topic", f"'{nothing}'", "does",
         "not", "exist"],
        [topic, "0", "Successful"],
    ])
    assert error_line(result).startswith(
        f"samsa: Deleting offsets from group {group} failed for 1 of 2 partition(s)"
    )
    assert committed(broker, group, topic) == {2: 1}


def test_active_group(broker: Broker, bs: list[str]) -> None:
    topic = create_topic(broker, "active")
    produce(broker, topic, 0, 4)
    group = unique("active")
    commit(broker, group, {(topic, 0): 1})  # before anyone joins: a standalone commit is allowed
    with Member(broker, group, topic, "member-one"):
        wait_for(lambda: group_state(broker, group) == ConsumerGroupState.STABLE, "Stable")

        out = ok(samsa("groups", *bs, "--list", "--state", "stable"))
        assert [group, "Stable"] in table(out)

        out = ok(samsa("groups", *bs, "--describe", "--group", group, "--state"))
        (row,) = table(out)
        assert row[0] == group and row[3:] == ["range", "Stable", "1"], row

        result = samsa("groups", *bs, "--describe", "--group", group, "--members", "--verbose")
        assert result.stderr == ""
        assert header(result.stdout).split() == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        (member,) = table(result.stdout)
        assert member[0] == group and member[1].startswith("member-one")
        assert member[3:] == ["member-one", str(PARTITIONS), "-", f"{topic}:0,1,2", "-", "-"]

        rows = table(ok(samsa("groups", *bs, "--describe", "--group", group)))
        assert [row[2:6] for row in rows] == [["0", "1", "4", "3"], ["1", "-", "0", "-"],
                                              ["2", "-", "0", "-"]]
        assert {(row[6], row[8]) for row in rows} == {(member[1], "member-one")}

        # A group with members can't be reset, deleted, or lose offsets of a topic it reads.
        line = error_line(samsa("groups", *bs, "--reset-offsets", "--group", group, "--topic",
                                topic, "--to-earliest", "--execute"))
        assert line == (
            f"samsa: Assignments can only be reset if the group '{group}' is inactive, but the"
            " current state is Stable."
        )
        line = error_line(samsa("groups", *bs, "--delete", "--group", group))
        assert "NON_EMPTY_GROUP" in line, line
        result = samsa("groups", *bs, "--delete-offsets", "--group", group, "--topic", f"{topic}:0")
        assert table(result.stdout) == [
            [topic, "0", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC:", "The", "consumer", "group", "is",
             "actively", "subscribed", "to", "the", "topic"]
        ]
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in error_line(result)
        assert committed(broker, group, topic) == {0: 1}

    # Once the member has left, the group is Empty and can be reset and deleted.
    wait_for(lambda: group_state(broker, group) == ConsumerGroupState.EMPTY, "Empty")
    ok(samsa("groups", *bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
             "--to-earliest", "--execute"))
    assert committed(broker, group, topic) == {0: 0}
    ok(samsa("groups", *bs, "--delete", "--group", group))


def test_consumer_group(broker: Broker, bs: list[str]) -> None:
    """A group of KIP-848's protocol beside a classic one: --list with their types and states,
    --describe with the epochs, current and target assignments kafka-consumer-groups shows."""
    topic = create_topic(broker, "kip848")
    produce(broker, topic, 0, 4)
    group, classic = unique("consumer"), unique("classic")
    with Member(broker, group, topic, "new-one", protocol="consumer"), \
            Member(broker, classic, topic, "old-one"):
        wait_for(lambda: group_state(broker, classic) == ConsumerGroupState.STABLE, "Stable")
        out = ok(samsa("groups", *bs, "--list", "--type", "--state"))
        assert header(out).split() == ["GROUP", "TYPE", "STATE"]
        rows = table(out)
        assert [group, "Consumer", "Stable"] in rows and [classic, "Classic", "Stable"] in rows
        only = table(ok(samsa("groups", *bs, "--list", "--type", "consumer")))
        assert [group, "Consumer"] in only and all(row[0] != classic for row in only)
        listed = ok(samsa("groups", *bs, "--list", "--state", "stable")).splitlines()
        assert f"{group}" in " ".join(listed) and classic in " ".join(listed)

        out = ok(samsa("groups", *bs, "--describe", "--group", group, "--state", "--verbose"))
        (row,) = table(out)
        assert row[0] == group and row[3:] == ["range", "Stable", "1", "1", "1"], row

        out = ok(samsa("groups", *bs, "--describe", "--group", group, "--members", "--verbose"))
        (member,) = table(out)
        assert member[0] == group and member[2:] == [
            "/127.0.0.1", "new-one", str(PARTITIONS), "1", f"{topic}:0,1,2", "1",
            f"{topic}:0,1,2"]

        rows = table(ok(samsa("groups", *bs, "--describe", "--group", group)))
        assert [r[2] for r in rows] == ["0", "1", "2"]
        assert {r[-1] for r in rows} == {"new-one"}


@pytest.mark.parametrize("highest", [0, 1, 3, 6])
def test_find_coordinator_every_request_shape(broker: Broker, highest: int) -> None:
    """--delete-offsets' own client: FindCoordinator v0 (key), v1-v3 (key, type), v4+ (keys)."""
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with Wire(host, int(port), time.monotonic() + WAIT_S) as wire:
        lowest, most = wire.versions[10]
        wire.versions[10] = (lowest, min(most, highest))
        assert wire.find_coordinator(unique("coordinated")) == (0, host, int(port))
        del wire.versions[OFFSET_DELETE]
        with pytest.raises(ToolError) as caught:
            wire.version(OFFSET_DELETE, 0, 0, "OffsetDelete")
        assert caught.value.message.startswith("UNSUPPORTED_VERSION")
