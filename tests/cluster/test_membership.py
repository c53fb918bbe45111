"""Cluster membership with a real ZooKeeper: brokers register in Kafka's layout, share one
cluster id, elect one controller with an epoch, and elect another when it goes; clients see
every broker and the controller in Metadata and DescribeCluster."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from waiting import wait_for

import samsa
from samsa.config import ConfigError
from samsa.tools.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zk") as server:
        yield server


@pytest.fixture
def zk(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def start_broker(tmp_path: Path, zookeeper: ZooKeeperServer, name: str,
                 **config: object) -> samsa.Broker:
    broker = samsa.Broker(tmp_path / name, config={
        "zookeeper.connect": zookeeper.connect_string,
        "zookeeper.session.timeout.ms": 4000, **config})
    broker.start()
    return broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def controller_of(zk: KazooClient) -> int | None:
    try:
        data, _ = zk.get("/controller")
    except NoNodeError:  # none elected, or the last one's session just expired
        return None
    return json.loads(data)["brokerid"]


def test_brokers_register_and_elect_one_controller(
    tmp_path: Path, zookeeper: ZooKeeperServer, zk: KazooClient
) -> None:
    brokers = [start_broker(tmp_path, zookeeper, f"b{i}", **{"broker.id": i, "broker.rack":
                                                             f"rack-{i % 2}"})
               for i in (1, 2, 3)]
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        registration = json.loads(zk.get("/brokers/ids/2")[0])
        assert registration["version"] == 5
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{brokers[1].port}"]
        assert registration["rack"] == "rack-0"
        cluster_ids = {b.server.cluster_id for b in brokers}
        assert len(cluster_ids) == 1
        assert json.loads(zk.get("/cluster/id")[0])["id"] in cluster_ids
        controller = controller_of(zk)
        assert controller in (1, 2, 3)
        assert int(zk.get("/controller_epoch")[0]) == 1
        for b in brokers:
            wait_for(lambda b=b: b.server.membership.controller_id == controller,
                     what="every broker to know the controller")
        # clients see the cluster through any broker
        admin = AdminClient({"bootstrap.servers": brokers[2].bootstrap_servers})
        metadata = admin.list_topics(timeout=15)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert metadata.controller_id == controller
        described = admin.describe_cluster().result(15)
        assert sorted(n.id for n in described.nodes) == [1, 2, 3]
        assert described.controller.id == controller
        assert {n.id: n.rack for n in described.nodes} == {1: "rack-1", 2: "rack-0",
                                                           3: "rack-1"}
        # the controller leaves: another broker wins the next epoch
        leaving = next(b for b in brokers if b.server.broker_id == controller)
        leaving.stop()
        brokers.remove(leaving)
        new = wait_for(lambda: (c := controller_of(zk)) not in (None, controller) and c,
                       what="a new controller")
        assert new in {b.server.broker_id for b in brokers}
        assert int(zk.get("/controller_epoch")[0]) == 2
        assert sorted(zk.get_children("/brokers/ids")) == sorted(
            str(b.server.broker_id) for b in brokers)
        wait_for(lambda: sorted(admin.list_topics(timeout=15).brokers) == sorted(
            b.server.broker_id for b in brokers), what="Metadata without the stopped broker")
    finally:
        for b in brokers:
            b.stop()


def test_a_killed_controllers_session_expiry_moves_the_controller(
    tmp_path: Path, zookeeper: ZooKeeperServer, zk: KazooClient
) -> None:
    """A controller SIGKILLed (no clean shutdown: its ZooKeeper session just stops) loses
    /controller and its registration once the session expires; a live broker takes over."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "server",
         "--override", f"log.dirs={tmp_path / 'k1'}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", "broker.id=11",
         "--override", f"zookeeper.connect={zookeeper.connect_string}",
         "--override", "zookeeper.session.timeout.ms=3000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = None
    try:
        wait_for(lambda: controller_of(zk) == 11, timeout=30, what="broker 11 to start")
        second = start_broker(tmp_path, zookeeper, "k2", **{"broker.id": 12})
        assert second.server.membership.controller_id == 11
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        assert controller_of(zk) == 11  # the session outlives the process for a while
        wait_for(lambda: controller_of(zk) == 12, timeout=30,
                 what="broker 12 to become controller after 11's session expired")
        assert zk.get_children("/brokers/ids") == ["12"]
        wait_for(lambda: second.server.membership.controller_id == 12,
                 what="broker 12 to know it is controller")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        if second is not None:
            second.stop()


def test_generated_broker_ids_are_unique(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    """broker.id=-1 takes Kafka's generated ids from /brokers/seqid: 1001, 1002, ..."""
    brokers = [start_broker(tmp_path, zookeeper, f"g{i}") for i in range(2)]
    try:
        assert sorted(b.server.broker_id for b in brokers) == [1001, 1002]
    finally:
        for b in brokers:
            b.stop()
    again = start_broker(tmp_path, zookeeper, "g0")  # meta.properties keeps its id
    try:
        assert again.server.broker_id in (1001, 1002)
    finally:
        again.stop()


def test_taken_broker_id_and_wrong_cluster_are_refused(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    first = start_broker(tmp_path, zookeeper, "t1", **{"broker.id": 5})
    try:
        with pytest.raises(ConfigError, match="already registered"):
            start_broker(tmp_path, zookeeper, "t2", **{"broker.id": 5})
    finally:
        first.stop()
    (tmp_path / "t3").mkdir()
    (tmp_path / "t3" / "meta.properties").write_text(
        "version=0\nbroker.id=6\ncluster.id=some-other-cluster\n")
    with pytest.raises(ConfigError, match="trying to join the wrong cluster"):
        start_broker(tmp_path, zookeeper, "t3", **{"broker.id": 6})


def test_unreachable_zookeeper_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot connect to ZooKeeper at 127.0.0.1:1"):
        samsa.Broker(tmp_path / "x", config={
            "zookeeper.connect": "127.0.0.1:1",
            "zookeeper.connection.timeout.ms": 1000}).start()


def test_a_broker_whose_session_expired_registers_again(
    tmp_path: Path, zookeeper: ZooKeeperServer, zk: KazooClient
) -> None:
    """A broker frozen past its session timeout (SIGSTOP: a long pause) loses its ephemeral
    registration and the controllership; once it runs again it registers with a new session
    and the cluster sees it again, as Kafka's broker does."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "server",
         "--override", f"log.dirs={tmp_path / 'f1'}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", "broker.id=21",
         "--override", f"zookeeper.connect={zookeeper.connect_string}",
         "--override", "zookeeper.session.timeout.ms=2000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    other = None
    try:
        wait_for(lambda: zk.exists("/brokers/ids/21"), timeout=30, what="broker 21 to start")
        other = start_broker(tmp_path, zookeeper, "f2", **{"broker.id": 22})
        assert controller_of(zk) == 21
        process.send_signal(signal.SIGSTOP)
        wait_for(lambda: not zk.exists("/brokers/ids/21"), timeout=30,
                 what="broker 21's session to expire")
        wait_for(lambda: controller_of(zk) == 22, what="broker 22 to take over")
        process.send_signal(signal.SIGCONT)
        wait_for(lambda: zk.exists("/brokers/ids/21"), timeout=30,
                 what="broker 21 to register again")
        assert controller_of(zk) == 22  # the controllership stays where it went
        # broker 21's own Metadata names the controller that took over while it was away
        # (the /controller watch stays silent: the new znode has the old one's version)
        wait_for(lambda: AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(
            timeout=5).controller_id == 22, timeout=3,
            what="broker 21's Metadata to name controller 22")
        wait_for(lambda: 21 in other.server.membership.brokers, what="22 to see 21 again")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait(10)
        if other is not None:
            other.stop()


def test_a_failed_read_of_the_live_brokers_is_read_again(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    """A read of /brokers/ids that fails (a ZooKeeper error on the executor) is tried again:
    the broker's list does not stay without a broker that registered meanwhile until some
    later registration (its Metadata would leave that broker out, and CreateTopics would
    refuse the cluster's replication factor)."""
    first = start_broker(tmp_path, zookeeper, "b1", **{"broker.id": 1})
    second: samsa.Broker | None = None
    try:
        membership = first.server.membership
        assert membership is not None
        zk_client = membership.zk
        real = zk_client.live_brokers
        failures: list[int] = []

        def failing_once() -> object:
            if not failures:
                failures.append(1)
                raise ConnectionError("injected: ZooKeeper read failed")
            return real()

        zk_client.live_brokers = failing_once  # type: ignore[method-assign]
        second = start_broker(tmp_path, zookeeper, "b2", **{"broker.id": 2})
        wait_for(lambda: bool(failures), what="the injected failure to be hit")
        wait_for(lambda: sorted(membership.brokers) == [1, 2], timeout=30,
                 what="broker 1 to see broker 2 after its failed read")
        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
        assert sorted(admin.list_topics(timeout=15).brokers) == [1, 2]
    finally:
        if second is not None:
            second.stop()
        first.stop()
