"""``samsa reassign-partitions`` (kafka-reassign-partitions.sh) run as a subprocess against three
in-process brokers and a real ZooKeeper: --execute moves partitions (Metadata shows the new
replicas, the data stays readable), --verify and --list follow, a reassignment that cannot finish
(its new replica is a registered broker that never fetches) is listed, verified as in progress and
cancelled, --generate proposes a valid assignment over --broker-list; every failure is one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import click
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

import samsa
import samsa.cli as cli
from samsa.tools.reassign_partitions import (
    check_execute,
    parse_broker_list,
    parse_log_dirs,
    parse_reassignment,
    parse_topics,
    reassignment_json,
)
from samsa.tools.zookeeper_server import ZooKeeperServer
from samsa.zk.zk_client import ZkClient
from samsa.zk.zk_data import BrokerInfo, Endpoint
from tests.cluster.test_replicated_topics import produce, read_all

from . import error_line, free_port, unique
from . import samsa as run_samsa

pytestmark = pytest.mark.timeout(120)

BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 200,
    "replica.lag.time.max.ms": 3000,
}
IDS = (1, 2, 3)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            zookeeper: ZooKeeperServer) -> Iterator[list[samsa.Broker]]:
    root = tmp_path_factory.mktemp("brokers")
    brokers: list[samsa.Broker] = []
    try:
        for i in IDS:
            broker = samsa.Broker(root / f"b{i}", config={
                "broker.id": i, "zookeeper.connect": zookeeper.connect_string, **BROKER_CONFIG})
            broker.start()
            brokers.append(broker)
        for b in brokers:
            wait_for(lambda b=b: len(b.server.membership.brokers) == len(IDS),
                     what="every broker to see the others")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def servers(brokers: list[samsa.Broker]) -> str:
    return ",".join(b.bootstrap_servers for b in brokers)


def reassign(brokers: list[samsa.Broker], *args: str | Path) -> tuple[int, str, str]:
    result = run_samsa("reassign-partitions", "--bootstrap-server", servers(brokers), *args)
    return result.returncode, result.stdout, result.stderr


def state_of(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return {p.id: (p.leader, list(p.replicas), list(p.isrs))
            for p in meta.topics[topic].partitions.values()}


def create(brokers: list[samsa.Broker], topic: str, partitions: int, factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": servers(brokers)})
    admin.create_topics([NewTopic(topic, partitions, factor)])[topic].result(30)
    wait_for(lambda: (s := state_of(servers(brokers), topic)) and len(s) == partitions and all(
        leader >= 0 and len(isr) == factor for leader, _, isr in s.values()),
        timeout=30, interval=0.2, what=f"{topic}'s leaders and full ISRs")


def views(brokers: list[samsa.Broker], topic: str) -> str:
    """What each broker knows of the topic's partitions (for a failed wait's message)."""
    lines = []
    for b in brokers:
        manager = b.server.replica_manager
        for (name, index), info in sorted(manager.partitions.items()):
            if name != topic:
                continue
            p = b.server.replicas.partition(name, index)
            local = "no local replica" if p is None else (
                f"local: leader {p.leader_id} epoch {p.leader_epoch} replicas {list(p.replicas)}"
                f" isr {sorted(p.isr)} followers {sorted(p.followers)}")
            lines.append(f"broker {b.server.broker_id} {name}-{index}: assignment"
                         f" {list(info.replicas)} state {info.state}; {local}")
    return "\n".join(lines)


def on_every_broker(brokers: list[samsa.Broker], topic: str,
                    targets: dict[int, list[int]]) -> None:
    """Wait until every broker's Metadata shows these replicas, all in sync (and nothing
    else in the ISR), led by one of them."""
    for b in brokers:
        wait_for(lambda b=b: all(
            (s := state_of(b.bootstrap_servers, topic)[p])[1] == replicas
            and set(replicas) == set(s[2]) and s[0] in replicas
            for p, replicas in targets.items()),
            timeout=40, interval=0.2, details=lambda: views(brokers, topic),
            what=f"broker {b.server.broker_id} to show {topic} on {targets}")


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def plan(topic: str, targets: dict[int, list[int]]) -> dict[str, object]:
    return {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(targets.items())]}


def test_execute_moves_partitions_then_verify_and_list_see_them_done(
        cluster: list[samsa.Broker], tmp_path: Path) -> None:
    topic = unique("moving")
    create(cluster, topic, 2, 2)
    before = {p: replicas for p, (_, replicas, _) in state_of(servers(cluster), topic).items()}
    values = [f"v{i}".encode() for i in range(300)]
    acked = produce(servers(cluster), topic, values)
    # partition 0 gets the spare broker in place of its leader; partition 1 swaps its order and
    # takes the spare broker for its follower
    spare0 = (set(IDS) - set(before[0])).pop()
    spare1 = (set(IDS) - set(before[1])).pop()
    targets = {0: [spare0, before[0][1]], 1: [before[1][0], spare1]}
    file = write_json(tmp_path / "plan.json", plan(topic, targets))

    code, out, err = reassign(cluster, "--execute", "--reassignment-json-file", file)
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[1] == ""
    rollback = json.loads(lines[2])
    assert rollback == {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": before[p],
         "log_dirs": ["any"] * len(before[p])} for p in (0, 1)]}
    assert lines[3:] == [
        "", "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignments for {topic}-0,{topic}-1",
    ]

    on_every_broker(cluster, topic, targets)
    code, out, err = reassign(cluster, "--verify", "--reassignment-json-file", file)
    assert (code, err) == (0, ""), out
    assert out.splitlines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
        f"Reassignment of partition {topic}-1 is completed.",
        # nothing runs any more: Kafka clears every throttle
        "Clearing broker-level throttles on brokers 1,2,3",
        f"Clearing topic-level throttles on topic {topic}",
    ]
    code, out, _ = reassign(cluster, "--list")
    assert (code, out) == (0, "No partition reassignments found.\n")
    # the data moved with the replicas
    got = read_all(servers(cluster), topic, 2)
    assert sorted(v for vs in got.values() for v in vs) == sorted(v for _, _, v in acked)
    assert {p: len(vs) for p, vs in got.items()} == {
        p: sum(1 for q, _, _ in acked if q == p) for p in (0, 1)}

    # the rollback file verifies as "not where it says" (the replicas are elsewhere now)
    back = write_json(tmp_path / "rollback.json", rollback)
    code, out, _ = reassign(cluster, "--verify", "--reassignment-json-file", back)
    assert code == 0
    assert (f"There is no active reassignment of partition {topic}-0, but replica set is"
            f" {','.join(map(str, targets[0]))} rather than"
            f" {','.join(map(str, before[0]))}.") in out.splitlines()
    # nothing to cancel: Kafka's message, and success
    code, out, err = reassign(cluster, "--cancel", "--reassignment-json-file", file)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["None of the specified partition reassignments are active.",
                                "Clearing broker-level throttles on brokers 1,2,3",
                                f"Clearing topic-level throttles on topic {topic}"]


def test_a_stuck_reassignment_is_listed_refused_again_and_cancelled(
        cluster: list[samsa.Broker], zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """Broker 4 is registered in ZooKeeper but never fetches: a move onto it cannot finish."""
    topic, other = unique("stuck"), unique("other")
    create(cluster, topic, 1, 2)
    create(cluster, other, 1, 1)  # before broker 4 exists: no replica of it goes there
    (_, before, _), = state_of(servers(cluster), topic).values()
    phantom = ZkClient(zookeeper.connect_string, 6000)
    phantom.start()
    try:
        phantom.register_broker(BrokerInfo(4, (
            Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", free_port()),)))
        wait_for(lambda: all(4 in b.server.membership.brokers for b in cluster),
                 what="every broker to see broker 4")
        target = [before[0], 4]
        file = write_json(tmp_path / "stuck.json", plan(topic, {0: target}))
        code, out, err = reassign(cluster, "--execute", "--reassignment-json-file", file)
        assert code == 0, (out, err)
        assert out.splitlines()[-1] == f"Successfully started partition reassignment for {topic}-0"

        removing = [r for r in before if r not in target]
        code, out, _ = reassign(cluster, "--list")
        assert code == 0
        assert out.splitlines() == [
            "Current partition reassignments:",
            f"{topic}-0: replicas: {before[0]},4,{removing[0]}. adding: 4."
            f" removing: {removing[0]}.",
        ]
        code, out, _ = reassign(cluster, "--verify", "--reassignment-json-file", file)
        assert code == 0
        assert out.splitlines() == ["Status of partition reassignment:",
                                    f"Reassignment of partition {topic}-0 is still in progress."]
        # another --execute is refused while one runs, unless --additional
        other_file = write_json(tmp_path / "other.json", plan(other, {0: [before[0]]}))
        code, out, err = reassign(cluster, "--execute", "--reassignment-json-file", other_file)
        assert code == 1 and out == ""
        assert err.splitlines() == [  # Kafka's message (its double space made single)
            "samsa: Cannot execute because there is an existing partition assignment. Use"
            " --additional to override this and create a new partition assignment in addition"
            " to the existing one. The --additional flag can also be used to change the"
            " throttle by resubmitting the current reassignment."]
        code, out, err = reassign(cluster, "--execute", "--additional",
                                  "--reassignment-json-file", other_file)
        assert code == 0, (out, err)
        on_every_broker(cluster, other, {0: [before[0]]})

        # (broker 4 has no listener: clearing its throttles would fail, as Kafka's would)
        code, out, err = reassign(cluster, "--cancel", "--preserve-throttles",
                                  "--reassignment-json-file", file)
        assert (code, err) == (0, ""), out
        assert out == f"Successfully cancelled partition reassignment for: {topic}-0\n"
        on_every_broker(cluster, topic, {0: before})
        code, out, _ = reassign(cluster, "--list")
        assert out == "No partition reassignments found.\n"
        code, out, _ = reassign(cluster, "--verify", "--preserve-throttles",
                                "--reassignment-json-file", file)
        assert out.splitlines()[1] == (
            f"There is no active reassignment of partition {topic}-0, but replica set is"
            f" {','.join(map(str, before))} rather than {before[0]},4.")
    finally:
        phantom.close()
    wait_for(lambda: all(4 not in b.server.membership.brokers for b in cluster),
             what="broker 4 gone")


def test_generate_proposes_an_assignment_over_the_broker_list(
        cluster: list[samsa.Broker], tmp_path: Path) -> None:
    topics = [unique("gen"), unique("gen")]
    create(cluster, topics[0], 3, 2)
    create(cluster, topics[1], 2, 1)
    current = {(t, p): replicas for t in topics
               for p, (_, replicas, _) in state_of(servers(cluster), t).items()}
    file = write_json(tmp_path / "topics.json",
                      {"version": 1, "topics": [{"topic": t} for t in topics]})
    code, out, err = reassign(cluster, "--generate", "--topics-to-move-json-file", file,
                              "--broker-list", "1,2")
    assert (code, err) == (0, ""), out
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[2] == ""
    assert lines[3] == "Proposed partition reassignment configuration"
    assert len(lines) == 5
    shown = json.loads(lines[1])
    assert shown["version"] == 1
    assert {(e["topic"], e["partition"]): e["replicas"] for e in shown["partitions"]} == current
    proposed = json.loads(lines[4])
    assert proposed["version"] == 1
    by_tp = {(e["topic"], e["partition"]): e for e in proposed["partitions"]}
    assert set(by_tp) == set(current)
    for tp, entry in by_tp.items():
        replicas = entry["replicas"]
        assert len(replicas) == len(current[tp]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= {1, 2}, entry
        assert entry["log_dirs"] == ["any"] * len(replicas)
    # preferred leaders spread over both brokers
    assert {by_tp[(topics[0], p)]["replicas"][0] for p in range(3)} == {1, 2}

    # the proposal is a valid --execute input, and brings the topics off broker 3
    proposal = tmp_path / "proposal.json"
    proposal.write_text(lines[4])
    code, out, err = reassign(cluster, "--execute", "--reassignment-json-file", proposal)
    assert code == 0, (out, err)
    for t in topics:
        on_every_broker(cluster, t, {p: e["replicas"] for (tt, p), e in by_tp.items() if tt == t})
    code, out, _ = reassign(cluster, "--verify", "--reassignment-json-file", proposal)
    assert out.count("is completed.") == len(by_tp), out

    # more replicas than brokers in the list: Kafka's message
    line = error_line(run_samsa("reassign-partitions", "--bootstrap-server", servers(cluster),
                                "--generate", "--topics-to-move-json-file", file,
                                "--broker-list", "3"))
    assert line == "samsa: Replication factor: 2 larger than available brokers: 1."


def test_bad_input_is_one_line(cluster: list[samsa.Broker], tmp_path: Path) -> None:
    topic = unique("bad")
    create(cluster, topic, 1, 1)
    bs = ("reassign-partitions", "--bootstrap-server", servers(cluster))

    def fails(*args: str | Path, data: object = None) -> str:
        if data is not None:
            path = tmp_path / "input.json"
            path.write_text(data if isinstance(data, str) else json.dumps(data))
            args = tuple(path if a == "@" else a for a in args)
        return error_line(run_samsa(*bs, *args))

    execute = ("--execute", "--reassignment-json-file", "@")
    assert fails("--execute", "--reassignment-json-file", tmp_path / "missing.json").startswith(
        "samsa: --reassignment-json-file: cannot read ")
    assert "The input string is not a valid JSON" in fails(*execute, data="{\"version\": 1,")
    assert fails(*execute, data=plan(topic, {0: [1, 9]})) == "samsa: Unknown broker id 9"
    assert fails(*execute, data=plan("no-such-topic", {0: [1]})) == (
        "samsa: UNKNOWN_TOPIC_OR_PARTITION: Topic no-such-topic not found.")
    assert fails("--verify", "--reassignment-json-file", "@", data=plan(topic, {4: [1]})) == (
        f"samsa: UNKNOWN_TOPIC_OR_PARTITION: Unable to find partition: {topic}-4")
    assert fails("--list", "--broker-list", "1") == (
        'samsa: Option "[broker-list]" can\'t be used with action "[list]"')
    assert fails("--generate", "--topics-to-move-json-file", "@", "--broker-list", "1",
                 data={"topics": [{"topic": "no-such-topic"}]}) == (
        "samsa: UNKNOWN_TOPIC_OR_PARTITION: Topic no-such-topic not found.")
    line = error_line(run_samsa("reassign-partitions", "--bootstrap-server",
                                f"127.0.0.1:{free_port()}", "--list"))
    assert line.startswith("samsa: cannot connect to any bootstrap server: 127.0.0.1:")


def _refused(call: Callable[[], object]) -> str:
    with pytest.raises(click.ClickException) as info:
        call()
    return info.value.format_message()


def test_the_files_and_options_are_checked_before_anything_is_sent(tmp_path: Path) -> None:
    where = "plan.json"

    def execute_plan(data: object) -> str:
        return _refused(lambda: check_execute(parse_reassignment(data, where)))

    assert execute_plan({"version": 1, "partitions": [{"topic": "t", "partition": 0}]}) == (
        "plan.json: No such field exists: `replicas`")
    assert execute_plan({"version": 1, "partitions": [
        {"topic": "t", "partition": "0", "replicas": [1]}]}) == (
        'plan.json: `partition` must be an int32, got "0"')
    assert execute_plan({"version": 2, "partitions": []}) == (
        "plan.json: Not supported version field value 2")
    assert execute_plan({"version": 1, "partitions": []}) == (
        "Partition reassignment list cannot be empty")
    assert execute_plan(plan("t", {0: []})) == "Partition replica list cannot be empty"
    assert execute_plan(plan("t", {0: [1, 1, 2, 2]})) == (
        "Partition replica lists may not contain duplicate entries: t-0 contains multiple"
        " entries for 1,2")
    assert execute_plan({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}) == (
        "Partition reassignment contains duplicate topic partitions: t-0")
    assert execute_plan({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                                         "log_dirs": ["any"]}]}) == (
        "Size of replicas list [1, 2] is different from size of log dirs list [any] for"
        " partition t-0")
    # a log dir other than "any": the replica is moved there on its broker
    moving = {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                              "log_dirs": ["/d", "any"]}]}
    assert check_execute(parse_reassignment(moving, where)) == {("t", 0): [1, 2]}
    assert parse_log_dirs(moving, where) == {("t", 0, 1): "/d"}
    # Kafka's defaults: version 1, and "log_dirs" all "any"
    assert check_execute(parse_reassignment({"partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "any"]}]},
        where)) == {("t", 0): [2, 1]}

    assert _refused(lambda: parse_topics({"topics": [{"topic": "a"}, {"topic": "a"}]}, where)
                    ) == "List of topics to reassign contains duplicate entries: [a]"
    assert _refused(lambda: parse_topics({"version": 1, "topics": []}, where)) == (
        "plan.json: no topics to move")
    assert _refused(lambda: parse_broker_list("1,2,1")) == (
        "Broker list contains duplicate entries: [1]")
    assert "--broker-list takes broker ids" in _refused(lambda: parse_broker_list("1,x"))
    assert "--broker-list takes broker ids" in _refused(lambda: parse_broker_list(str(2**31)))
    assert execute_plan(plan("t", {0: [2**31]})) == (
        "plan.json: `replicas` must be a list of int32s, got [2147483648]")
    assert parse_broker_list("3, 1,2") == [3, 1, 2]
    assert reassignment_json({("b", 1): [2, 1], ("a", 0): [3]}) == (
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[3],'
        '"log_dirs":["any"]},{"topic":"b","partition":1,"replicas":[2,1],'
        '"log_dirs":["any","any"]}]}')

    usage = "reassign-partitions", "--bootstrap-server", "127.0.0.1:1"
    assert _cli(*usage, "--execute") == (
        2, 'samsa: Missing required argument "[reassignment-json-file]"')
    assert _cli(*usage, "--list", "--verify") == (
        2, "samsa: Command must include exactly one action: --generate, --execute, --verify,"
        " --cancel, --list")
    assert _cli(*usage, "--execute", "--reassignment-json-file", "x.json",
                "--disable-rack-aware") == (
        2, 'samsa: Option "[disable-rack-aware]" can\'t be used with action "[execute]"')
    assert _cli(*usage, "--verify", "--reassignment-json-file", "x.json", "--throttle",
                "1000") == (2, 'samsa: Option "[throttle]" can\'t be used with action "[verify]"')
    assert _cli(*usage, "--execute", "--reassignment-json-file", "x.json",
                "--preserve-throttles") == (
        2, 'samsa: Option "[preserve-throttles]" can\'t be used with action "[execute]"')
    assert _cli(*usage, "--generate", "--broker-list", "1") == (
        2, 'samsa: Missing required argument "[topics-to-move-json-file]"')
    gssapi = tmp_path / "gssapi.properties"
    gssapi.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    assert _cli(*usage, "--list", "--command-config", gssapi) == (
        1, "samsa: samsa reassign-partitions: sasl.mechanism=GSSAPI is not supported"
        " (one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")


def _cli(*args: str | Path) -> tuple[int, str]:
    """``samsa ARGS`` in this process, through samsa.cli.run: (exit status, stderr)."""
    err = io.StringIO()
    argv = ["samsa", *map(str, args)]
    with (contextlib.redirect_stderr(err), mock.patch.object(sys, "argv", argv),
          pytest.raises(SystemExit) as info):
        cli.run()
    return int(info.value.code or 0), err.getvalue().strip()
