"""``samsa leader-election`` (kafka-leader-election.sh) run as a subprocess against three in-process
brokers and a real ZooKeeper: after a broker's restart a preferred election gives it back the
partitions it prefers (and fails, exit 1, while it is away); with nothing to do it says "Valid
replica already elected"; an unclean election brings an offline partition back with an
out-of-sync replica; every bad input is one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import click
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

import samsa
import samsa.cli as cli
from samsa.tools.leader_election import parse_election_data
from samsa.tools.zookeeper_server import ZooKeeperServer

from . import error_line, free_port, unique
from . import samsa as run_samsa

pytestmark = pytest.mark.timeout(120)

BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 200,
    "replica.lag.time.max.ms": 3000,
    "controlled.shutdown.retry.backoff.ms": 200,
    "auto.leader.rebalance.enable": False,  # only the tool moves leaders back
}
IDS = (1, 2, 3)


class Cluster:
    """Three brokers on one ZooKeeper; a broker can be stopped and started again on its data."""

    def __init__(self, root: Path, zookeeper: ZooKeeperServer) -> None:
        self.root = root
        self.zookeeper = zookeeper
        self.brokers: dict[int, samsa.Broker] = {}

    def start(self, broker_id: int) -> None:
        broker = samsa.Broker(self.root / f"b{broker_id}", config={
            "broker.id": broker_id, "zookeeper.connect": self.zookeeper.connect_string,
            **BROKER_CONFIG})
        broker.start()
        self.brokers[broker_id] = broker

    def stop(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).stop()

    def servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    def controller(self) -> int:
        return next(i for i, b in self.brokers.items() if b.server.membership.is_controller)

    def wait_formed(self) -> None:
        for b in self.brokers.values():
            wait_for(lambda b=b: set(b.server.membership.brokers) == set(self.brokers),
                     timeout=30, what="every broker to see the others")

    def state(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        meta = AdminClient({"bootstrap.servers": self.servers()}).list_topics(topic, timeout=15)
        return {p.id: (p.leader, list(p.replicas), list(p.isrs))
                for p in meta.topics[topic].partitions.values()}

    def elect(self, *args: str | int | Path) -> tuple[int, list[str], str]:
        result = run_samsa("leader-election", "--bootstrap-server", self.servers(), *args)
        return result.returncode, result.stdout.splitlines(), result.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as zookeeper:
        cluster = Cluster(tmp_path_factory.mktemp("brokers"), zookeeper)
        try:
            for i in IDS:
                cluster.start(i)
            cluster.wait_formed()
            yield cluster
        finally:
            for i in list(cluster.brokers):
                cluster.stop(i)


def create(cluster: Cluster, topic: str, partitions: int = 1, factor: int = 3,
           assignment: list[list[int]] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.servers()})
    new = (NewTopic(topic, len(assignment), replica_assignment=assignment) if assignment
           else NewTopic(topic, partitions, factor))
    admin.create_topics([new])[topic].result(30)
    count = len(assignment) if assignment else partitions
    size = len(assignment[0]) if assignment else factor
    wait_for(lambda: (s := cluster.state(topic)) and len(s) == count and all(
        leader >= 0 and len(isr) == size for leader, _, isr in s.values()),
        timeout=30, interval=0.2, what=f"{topic}'s leaders and full ISRs")


def partitions_in(lines: list[str], prefix: str) -> set[str]:
    """The partitions a ``<prefix><p>, <p>...`` line names (none when there is no such line)."""
    found = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
    assert len(found) <= 1, lines
    return set(found[0].split(", ")) if found else set()


SUCCEEDED = "Successfully completed leader election (PREFERRED) for partitions "
NOOP = "Valid replica already elected for partitions "


def test_preferred_election_gives_leadership_back_after_a_restart(
        cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("pref")
    create(cluster, topic, 3, 3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in cluster.state(topic).items()}
    victim = next(i for i in IDS if i != cluster.controller() and i in preferred.values())
    mine = sorted(p for p, b in preferred.items() if b == victim)
    cluster.stop(victim)
    wait_for(lambda: all(leader not in (victim, -1) for leader, _, _ in cluster.state(
        topic).values()), timeout=30, interval=0.2, what="leaders away from the stopped broker")

    # while the preferred replica is away its election fails: Kafka's lines, exit 1
    code, out, err = cluster.elect("--election-type", "preferred", "--topic", topic,
                                   "--partition", mine[0])
    assert code == 1
    assert out == [
        f"Error completing leader election (PREFERRED) for partition: {topic}-{mine[0]}:"
        f" PREFERRED_LEADER_NOT_AVAILABLE: Failed to elect leader for partition"
        f" {topic}-{mine[0]} under strategy PreferredReplicaPartitionLeaderElectionStrategy"]
    assert err.splitlines() == ["samsa: 1 replica(s) could not be elected"]

    cluster.start(victim)
    cluster.wait_formed()
    wait_for(lambda: all(len(isr) == 3 for _, _, isr in cluster.state(topic).values()),
             timeout=30, interval=0.2, what="the restarted broker back in every ISR")
    moved = {p for p, (leader, _, _) in cluster.state(topic).items() if leader != preferred[p]}
    assert moved == set(mine)

    code, out, err = cluster.elect("--election-type", "PREFERRED", "--all-topic-partitions")
    assert (code, err) == (0, ""), out
    assert partitions_in(out, SUCCEEDED) & {f"{topic}-{p}" for p in range(3)} == {
        f"{topic}-{p}" for p in moved}
    assert {f"{topic}-{p}" for p in range(3) if p not in moved} <= partitions_in(out, NOOP)
    wait_for(lambda: all(leader == preferred[p] for p, (leader, _, _) in cluster.state(
        topic).items()), timeout=20, interval=0.2, what="the preferred leaders back")

    # nothing left to do
    file = tmp_path / "election.json"
    file.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p}
                                               for p in (2, 0, 1)]}))
    code, out, err = cluster.elect("--election-type", "preferred", "--path-to-json-file", file)
    assert (code, out, err) == (0, [f"{NOOP}{topic}-0, {topic}-1, {topic}-2"], "")
    code, out, err = cluster.elect("--election-type", "preferred", "--topic", topic,
                                   "--partition", 1)
    assert (code, out, err) == (0, [f"{NOOP}{topic}-1"], "")


def test_unclean_election_brings_an_offline_partition_back(cluster: Cluster) -> None:
    controller = cluster.controller()
    leader, follower = (i for i in IDS if i != controller)
    topic = unique("unclean")
    create(cluster, topic, assignment=[[leader, follower]])
    # an unclean election of a partition with a live leader has nothing to do
    code, out, err = cluster.elect("--election-type", "unclean", "--topic", topic,
                                   "--partition", 0)
    assert (code, out, err) == (0, [f"{NOOP}{topic}-0"], "")

    cluster.stop(follower)
    wait_for(lambda: cluster.state(topic)[0][2] == [leader], timeout=30, interval=0.2,
             what="the ISR down to the leader")
    cluster.stop(leader)
    wait_for(lambda: cluster.state(topic)[0][0] == -1, timeout=30, interval=0.2,
             what="the partition offline")
    cluster.start(follower)
    cluster.wait_formed()
    # the out-of-sync replica may not lead (unclean.leader.election.enable is false) ...
    assert cluster.state(topic)[0][0] == -1
    # ... unless asked to
    code, out, err = cluster.elect("--election-type", "UNCLEAN", "--topic", topic,
                                   "--partition", 0)
    assert (code, err) == (0, ""), out
    assert out == [f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0"]
    wait_for(lambda: cluster.state(topic)[0][0] == follower, timeout=20, interval=0.2,
             what="the out-of-sync replica leading")
    cluster.start(leader)
    cluster.wait_formed()
    wait_for(lambda: sorted(cluster.state(topic)[0][2]) == sorted([leader, follower]),
             timeout=30, interval=0.2, what="the old leader following again")


def test_failed_elections_and_bad_input_are_one_line(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique("bad")
    create(cluster, topic, 1, 1)
    file = tmp_path / "partitions.json"
    file.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0},
                                               {"topic": topic, "partition": 7},
                                               {"topic": "no-such-topic", "partition": 0}]}))
    code, out, err = cluster.elect("--election-type", "preferred", "--path-to-json-file", file)
    assert code == 1
    assert out == [
        f"{NOOP}{topic}-0",
        f"Error completing leader election (PREFERRED) for partition: {topic}-7:"
        " UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.",
        "Error completing leader election (PREFERRED) for partition: no-such-topic-0:"
        " UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.",
    ]
    assert err.splitlines() == ["samsa: 2 replica(s) could not be elected"]

    # --command-config reaches the client: a key librdkafka does not know is one line
    config = tmp_path / "admin.properties"
    config.write_text("client.id=election-test\nno.such.property=1\n")
    line = error_line(run_samsa("leader-election", "--bootstrap-server", cluster.servers(),
                                "--command-config", config, "--election-type", "preferred",
                                "--all-topic-partitions"))
    assert "no.such.property" in line
    config.write_text("client.id=election-test\n")
    code, out, err = cluster.elect("--command-config", config, "--election-type", "preferred",
                                   "--topic", topic, "--partition", 0)
    assert (code, out, err) == (0, [f"{NOOP}{topic}-0"], "")

    file.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0}] * 2}))
    line = error_line(run_samsa("leader-election", "--bootstrap-server", cluster.servers(),
                                "--election-type", "preferred", "--path-to-json-file", file))
    assert line == f"samsa: Replica election data contains duplicate partitions: [{topic}-0]"
    line = error_line(run_samsa("leader-election", "--bootstrap-server",
                                f"127.0.0.1:{free_port()}", "--election-type", "preferred",
                                "--all-topic-partitions"))
    assert line.startswith("samsa: cannot connect to any bootstrap server: 127.0.0.1:")


def _cli(*args: str | int | Path) -> tuple[int, str]:
    """``samsa leader-election ARGS`` in this process, through samsa.cli.run: (exit status,
    stderr)."""
    err = io.StringIO()
    argv = ["samsa", "leader-election", *map(str, args)]
    with (contextlib.redirect_stderr(err), mock.patch.object(sys, "argv", argv),
          pytest.raises(SystemExit) as info):
        cli.run()
    return int(info.value.code or 0), err.getvalue().strip()


def test_options_and_the_json_file_are_checked_before_anything_is_sent(tmp_path: Path) -> None:
    bs = ("--bootstrap-server", "127.0.0.1:1")
    assert _cli(*bs, "--all-topic-partitions") == (
        2, "samsa: Missing required option(s): election-type")
    assert _cli("--all-topic-partitions") == (
        2, "samsa: Missing required option(s): bootstrap-server, election-type")
    one_of = ("samsa: One and only one of the following options is required: topic,"
              " all-topic-partitions, path-to-json-file")
    assert _cli(*bs, "--election-type", "preferred") == (2, one_of)
    assert _cli(*bs, "--election-type", "preferred", "--all-topic-partitions", "--topic", "t",
                "--partition", 0) == (2, one_of)
    assert _cli(*bs, "--election-type", "preferred", "--topic", "t") == (
        2, "samsa: Missing required option(s): partition")
    assert _cli(*bs, "--election-type", "preferred", "--all-topic-partitions",
                "--partition", 0) == (2, "samsa: Option partition is only allowed if topic is used")
    code, err = _cli(*bs, "--election-type", "bogus", "--all-topic-partitions")
    assert code == 2 and "'bogus' is not one of" in err
    file = tmp_path / "partitions.json"
    json_file = (*bs, "--election-type", "preferred", "--path-to-json-file", file)
    code, err = _cli(*json_file)
    assert code == 1 and err.startswith("samsa: --path-to-json-file: cannot read ")
    file.write_text("{\"partitions\": [")
    code, err = _cli(*json_file)
    assert code == 1 and "The input string is not a valid JSON" in err

    def refused(data: object) -> str:
        with pytest.raises(click.ClickException) as info:
            parse_election_data(data, "f.json")
        return info.value.format_message()

    assert refused({}) == "f.json: Replica election data is missing \"partitions\" field"
    assert refused([]) == (
        "f.json: Replica election data must be a JSON object with a \"partitions\" field")
    assert refused({"partitions": [{"topic": "t"}]}) == "f.json: No such field exists: `partition`"
    assert refused({"partitions": [{"topic": "t", "partition": "1"}]}) == (
        "f.json: `partition` must be an int32, got '1'")
    assert refused({"partitions": [{"topic": "t", "partition": 1}] * 2 + [
        {"topic": "a", "partition": 0}] * 2}) == (
        "Replica election data contains duplicate partitions: [a-0, t-1]")
    assert parse_election_data({"partitions": [{"topic": "t", "partition": 1},
                                               {"topic": "a", "partition": 2}]}, "f.json") == [
        ("a", 2), ("t", 1)]
