"""A broker's log directory fails in a three-broker cluster on a real ZooKeeper (the broker
processes of tests/cluster/processes.py), under confluent-kafka's idempotent acks=all producer.

* Its only directory fails (a small tmpfs fills up, or faultfs.py's writes fail with EIO):
  the broker halts, as Kafka's does, its ZooKeeper session ends, and the controller moves its
  leaderships to in-sync replicas; with the disk repaired it starts again, recovers, and
  catches up.
* One of its two directories fills up: that directory's replicas go offline on the broker,
  which tells the controller (Kafka's log dir event notification); the controller takes them
  out of the ISRs and elects other leaders where they led, while the broker keeps leading and
  following the partitions of its other directory.

Either way every acknowledged record is read back exactly once, at its offset, in order.
Needs root for the mounts (failing without it; the EIO case also needs libfuse2).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster.processes import (
    ContinuousProducer,
    ProcessCluster,
    check_acked_exactly_once,
    new_leaders,
    process_cluster,
    read_partitions,
)
from confluent_kafka.admin import NewTopic
from kafka_frames import FrameClient
from kio.schema.errors import ErrorCode

from samsa.records.record import RecordInput, encode_batch

from . import faultfs, tmpfs

PRODUCE = 0
TOPIC = "orders"
FAILING = 1  # the broker whose disk fails
HALT_LINE = "Shutdown broker because all log dirs in {} have failed"


@pytest.fixture(autouse=True)
def _root() -> None:
    reason = tmpfs.available()
    assert reason is None, f"these tests need real mounts (root, libfuse2): {reason}"


def check_offline_on_broker(cluster: ProcessCluster, offline: list[int]) -> None:
    """The failing broker answers KAFKA_STORAGE_ERROR for its offline replicas, listed them
    for the controller, and the controller consumed its log dir event notification."""
    batch = encode_batch([RecordInput(b"x")], timestamp=0)
    with FrameClient(cluster.broker(FAILING).address) as wire:
        for p in offline:
            answer = wire.request(PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout": 5000,
                "topic_data": [{"name": TOPIC, "partition_data": [
                    {"index": p, "records": batch}]}]}).responses[0].partition_responses[0]
            assert answer.error_code == ErrorCode.kafka_storage_error, (p, answer)
    assert cluster.zk is not None
    data, _ = cluster.zk.get(f"/samsa/offline_replicas/{FAILING}")
    listed = {(e["topic"], e["partition"]) for e in json.loads(data)["partitions"]}
    assert listed == {(TOPIC, p) for p in offline}
    cluster.wait(lambda: not cluster.zk.get_children("/log_dir_event_notification"),
                 "the controller to consume the log dir event notification")


def check_everything_acked_is_there(cluster: ProcessCluster, producer: ContinuousProducer,
                                    partitions: int) -> None:
    assert not producer.fatal, producer.fatal
    assert not producer.failed, producer.failed[:10]
    read = read_partitions(cluster.bootstrap, TOPIC, range(partitions))
    check_acked_exactly_once(producer.acked, read)


def acked_more(cluster: ProcessCluster, producer: ContinuousProducer, more: int,
               timeout: float) -> None:
    """Until ``more`` further records are acknowledged (the topic's states and the brokers'
    log tails if not)."""
    producer.wait_progress(more, timeout, lambda: cluster.details([TOPIC]))


@contextlib.contextmanager
def producing(cluster: ProcessCluster, partitions: int) -> Iterator[ContinuousProducer]:
    """The idempotent acks=all producer writing to TOPIC through the block, which begins once
    it has 200 records acknowledged; after the block every one acknowledged is read back."""
    producer = ContinuousProducer(cluster.bootstrap, TOPIC, partitions).start()
    try:
        acked_more(cluster, producer, 200, 30)
        yield producer
    finally:
        producer.stop()
    check_everything_acked_is_there(cluster, producer, partitions)


def restart_and_catch_up(cluster: ProcessCluster, producer: ContinuousProducer,
                         partitions: int) -> None:
    """The failing broker, stopped and its disk repaired, starts again and rejoins every ISR;
    the producer goes on."""
    cluster.restart(FAILING)
    cluster.wait_full_isr(TOPIC, range(partitions), timeout=60)
    acked_more(cluster, producer, 100, 30)


class Disk:
    """A log dir that can be made to fail (``fail``) and repaired (``repair``)."""

    def __init__(self, path: Path, fail: Callable[[], None], repair: Callable[[], None]
                 ) -> None:
        self.path, self.fail, self.repair = path, fail, repair


@pytest.fixture(params=["full", "eio"])
def only_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Disk]:
    """Broker 1's only log dir: a small tmpfs that fills up, or faultfs failing with EIO."""
    path = tmp_path / f"broker-{FAILING}"
    if request.param == "full":
        with tmpfs.tmpfs(path, "16m"):
            filler: list[Path] = []
            yield Disk(path, lambda: filler.append(tmpfs.fill(path)),
                       lambda: filler[0].unlink())
        return
    reason = faultfs.available()
    assert reason is None, f"these tests need real mounts (root, libfuse2): {reason}"
    with faultfs.FaultFs(tmp_path / f"backing-{FAILING}", path) as fs:
        yield Disk(path, fs.fail, fs.heal)


@pytest.mark.timeout(300)
def test_broker_whose_only_log_dir_fails_halts_and_leadership_moves(tmp_path: Path,
                                                                    only_disk: Disk) -> None:
    partitions = 3
    disk = only_disk.path
    with process_cluster(tmp_path, 3) as cluster:
        cluster.create_topic(TOPIC, partitions, 3, {"min.insync.replicas": "2"})
        with producing(cluster, partitions) as producer:
            only_disk.fail()
            broker = cluster.broker(FAILING)
            cluster.wait(lambda: not broker.running, f"broker {FAILING} to halt",
                         topics=[TOPIC])
            assert broker.proc is not None and broker.proc.returncode == 1
            assert HALT_LINE.format(disk) in broker.log_text()
            cluster.wait(new_leaders(cluster, TOPIC, list(range(partitions)), FAILING),
                         f"leaders other than broker {FAILING}", timeout=40, topics=[TOPIC])
            acked_more(cluster, producer, 200, 60)

            only_disk.repair()
            restart_and_catch_up(cluster, producer, partitions)


@pytest.mark.timeout(300)
def test_one_of_two_log_dirs_fills_and_only_its_partitions_move(tmp_path: Path) -> None:
    # broker 1 leads partitions 0 and 1; its log dirs take them in turn (0, 2 in the first)
    assignment = [[1, 2, 3], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    partitions = len(assignment)
    healthy = tmp_path / f"broker-{FAILING}"
    failing = tmp_path / f"broker-{FAILING}-b"
    with tmpfs.tmpfs(failing, "16m") as disk, process_cluster(tmp_path, 3, broker_overrides={
            FAILING: {"log.dirs": f"{healthy},{failing}"}}) as cluster:
        cluster.admin.create_topics([NewTopic(
            TOPIC, num_partitions=partitions, replica_assignment=assignment,
            config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        cluster.wait_full_isr(TOPIC, range(partitions))
        on_disk = sorted(p for p in range(partitions) if (disk / f"{TOPIC}-{p}").is_dir())
        kept = sorted(set(range(partitions)) - set(on_disk))
        assert on_disk and kept, (on_disk, kept)
        led = [p for p in range(partitions) if assignment[p][0] == FAILING]
        assert set(led) & set(on_disk) and set(led) & set(kept), (led, on_disk)

        with producing(cluster, partitions) as producer:
            filler = tmpfs.fill(disk)
            cluster.wait(new_leaders(cluster, TOPIC, on_disk, FAILING),
                         f"{on_disk} to move away from broker {FAILING}", timeout=40,
                         topics=[TOPIC])
            acked_more(cluster, producer, 200, 60)
            broker = cluster.broker(FAILING)
            assert broker.running, broker.log_tail()
            # the other directory's partitions stay: led (or followed in sync) by it
            for p in kept:
                state = cluster.state(TOPIC, p)
                assert state is not None and FAILING in state.isr, (p, state)
                if p in led:
                    assert state.leader == FAILING, (p, state)
            check_offline_on_broker(cluster, on_disk)

            filler.unlink()  # the disk is repaired; the broker restarts to use it again
            broker.terminate()
            restart_and_catch_up(cluster, producer, partitions)


METADATA = 3


def offline_listed(cluster: ProcessCluster, via: int, topic: str) -> dict[int, list[int]]:
    """partition -> offline replicas, as broker ``via``'s Metadata (v9) lists them."""
    with FrameClient(cluster.broker(via).address) as wire:
        found = wire.request(METADATA, 9, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}).topics[0]
    return {p.partition_index: sorted(p.offline_replicas) for p in found.partitions}


def every_broker_lists(cluster: ProcessCluster, topic: str, expected: dict[int, list[int]]
                       ) -> Callable[[], bool]:
    def listed() -> bool:
        return all(offline_listed(cluster, b.id, topic) == expected
                   for b in cluster.brokers.values() if b.running)

    return listed


@pytest.mark.timeout(400)
def test_first_log_dir_fails_in_a_cluster(tmp_path: Path) -> None:
    """Broker 1's first log dir fails (EIO) under an idempotent producer. In cluster mode the
    metadata lives in ZooKeeper, so the first dir is a log dir like any other: the broker keeps
    running and serving its other dir, and takes new topics there (its topic store carries on
    in memory). Every broker's Metadata lists the failed dir's replicas of broker 1 as offline
    (Kafka's brokers have them from the controller). Restarted with the dir still failed, the
    broker starts on the good dir and those replicas stay offline, everywhere; repaired, they
    catch up. Every acknowledged record is read back exactly once."""
    reason = faultfs.available()
    assert reason is None, f"these tests need real mounts (root, libfuse2): {reason}"
    # broker 1 leads partitions 0 and 1; its log dirs take them in turn (0, 2 in the first)
    assignment = [[1, 2, 3], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    partitions = len(assignment)
    first = tmp_path / f"broker-{FAILING}-a"
    second = tmp_path / f"broker-{FAILING}-b"
    with faultfs.FaultFs(tmp_path / "backing", first) as disk, process_cluster(
            tmp_path, 3, broker_overrides={FAILING: {"log.dirs": f"{first},{second}"}}
    ) as cluster:
        cluster.admin.create_topics([NewTopic(
            TOPIC, num_partitions=partitions, replica_assignment=assignment,
            config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        cluster.wait_full_isr(TOPIC, range(partitions))
        on_disk = sorted(p for p in range(partitions) if (first / f"{TOPIC}-{p}").is_dir())
        kept = sorted(set(range(partitions)) - set(on_disk))
        assert on_disk and kept, (on_disk, kept)
        offline = {p: [FAILING] if p in on_disk else [] for p in range(partitions)}
        nothing_offline = dict.fromkeys(range(partitions), [])
        assert every_broker_lists(cluster, TOPIC, nothing_offline)()

        with producing(cluster, partitions) as producer:
            disk.fail()
            cluster.wait(new_leaders(cluster, TOPIC, on_disk, FAILING),
                         f"{on_disk} to move away from broker {FAILING}", timeout=40,
                         topics=[TOPIC])
            cluster.wait(every_broker_lists(cluster, TOPIC, offline),
                         "every broker's Metadata to list the offline replicas",
                         topics=[TOPIC])
            acked_more(cluster, producer, 200, 60)
            broker = cluster.broker(FAILING)
            assert broker.running, broker.log_tail()
            check_offline_on_broker(cluster, on_disk)

            # a topic created now: broker 1's replicas of it go to its good dir
            cluster.create_topic("later", 2, 3)
            assert sorted(p.name for p in second.iterdir() if p.name.startswith("later")
                          ) == ["later-0", "later-1"]
            assert every_broker_lists(cluster, "later", {0: [], 1: []})()

            # restarted with the dir still failed: it starts on the good dir
            broker.terminate()
            cluster.restart(FAILING)
            cluster.wait_full_isr("later", range(2), timeout=60)
            cluster.wait(every_broker_lists(cluster, TOPIC, offline),
                         "the offline replicas listed again after the restart",
                         topics=[TOPIC])
            for p in kept:
                cluster.wait(lambda p=p: FAILING in cluster.state(TOPIC, p).isr,
                             f"broker {FAILING} back in the ISR of {p}", topics=[TOPIC])
            for p in on_disk:
                state = cluster.state(TOPIC, p)
                assert state is not None and FAILING not in state.isr, (p, state)
            assert not any((second / f"{TOPIC}-{p}").exists() for p in on_disk)
            acked_more(cluster, producer, 100, 30)

            disk.heal()  # repaired: the broker restarts to use it again
            broker.terminate()
            restart_and_catch_up(cluster, producer, partitions)
            cluster.wait(every_broker_lists(cluster, TOPIC, nothing_offline),
                         "no offline replicas listed", topics=[TOPIC])
