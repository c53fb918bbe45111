"""A broker's log directory fails in a three-broker cluster on a real ZooKeeper (the broker
processes of tests/cluster/processes.py), under confluent-kafka's idempotent acks=all producer.

* Its only directory fills up (a small tmpfs): the broker halts, as Kafka's does, its
  ZooKeeper session ends, and the controller moves its leaderships to in-sync replicas; with
  the disk repaired it starts again, recovers, and catches up.
* One of its two directories fills up: that directory's replicas go offline on the broker,
  which tells the controller (Kafka's log dir event notification); the controller takes them
  out of the ISRs and elects other leaders where they led, while the broker keeps leading and
  following the partitions of its other directory.

Either way every acknowledged record is read back exactly once, at its offset, in order.
Needs root for the mounts (skipped without it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cluster.processes import (
    ContinuousProducer,
    ProcessCluster,
    check_acked_exactly_once,
    read_partitions,
)
from confluent_kafka.admin import NewTopic
from kafka_frames import FrameClient
from kio.schema.errors import ErrorCode

from samsa.records.record import RecordInput, encode_batch

from . import tmpfs

PRODUCE = 0
TOPIC = "orders"
FAILING = 1  # the broker whose disk fails
HALT_LINE = "Shutdown broker because all log dirs in {} have failed"


@pytest.fixture(autouse=True)
def _root() -> None:
    reason = tmpfs.available()
    if reason is not None:
        pytest.skip(reason)


def moved_away(cluster: ProcessCluster, partitions: list[int], gone: int) -> Callable[[], bool]:
    """These partitions have a leader other than ``gone``, which left their ISRs."""
    def moved() -> bool:
        for p in partitions:
            state = cluster.state(TOPIC, p)
            if state is None or state.leader in (-1, gone) or gone in state.isr:
                return False
        return True

    return moved


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


@pytest.mark.timeout(300)
def test_broker_whose_only_log_dir_fills_halts_and_leadership_moves(tmp_path: Path) -> None:
    partitions = 3
    cluster = ProcessCluster(tmp_path, 3)
    with tmpfs.tmpfs(tmp_path / f"broker-{FAILING}", "16m") as disk:
        try:
            cluster.start()
            cluster.create_topic(TOPIC, partitions, 3, {"min.insync.replicas": "2"})
            details = lambda: cluster.details([TOPIC])  # noqa: E731
            producer = ContinuousProducer(cluster.bootstrap, TOPIC, partitions).start()
            try:
                producer.wait_progress(200, 30, details)
                filler = tmpfs.fill(disk)
                broker = cluster.broker(FAILING)
                cluster.wait(lambda: not broker.running, f"broker {FAILING} to halt",
                             topics=[TOPIC])
                assert broker.proc is not None and broker.proc.returncode == 1
                assert HALT_LINE.format(disk) in broker.log_text()
                cluster.wait(moved_away(cluster, list(range(partitions)), FAILING),
                             f"leaders other than broker {FAILING}", timeout=40, topics=[TOPIC])
                producer.wait_progress(200, 60, details)

                filler.unlink()  # the disk is repaired
                cluster.restart(FAILING)
                cluster.wait_full_isr(TOPIC, range(partitions), timeout=60)
                producer.wait_progress(100, 30, details)
            finally:
                producer.stop()
            check_everything_acked_is_there(cluster, producer, partitions)
        finally:
            cluster.close()


@pytest.mark.timeout(300)
def test_one_of_two_log_dirs_fills_and_only_its_partitions_move(tmp_path: Path) -> None:
    # broker 1 leads partitions 0 and 1; its log dirs take them in turn (0, 2 in the first)
    assignment = [[1, 2, 3], [1, 2, 3], [2, 3, 1], [3, 1, 2]]
    partitions = len(assignment)
    healthy = tmp_path / f"broker-{FAILING}"
    failing = tmp_path / f"broker-{FAILING}-b"
    cluster = ProcessCluster(tmp_path, 3, broker_overrides={
        FAILING: {"log.dirs": f"{healthy},{failing}"}})
    with tmpfs.tmpfs(failing, "16m") as disk:
        try:
            cluster.start()
            cluster.admin.create_topics([NewTopic(
                TOPIC, num_partitions=partitions, replica_assignment=assignment,
                config={"min.insync.replicas": "2"})])[TOPIC].result(30)
            cluster.wait_full_isr(TOPIC, range(partitions))
            on_disk = sorted(p for p in range(partitions) if (disk / f"{TOPIC}-{p}").is_dir())
            kept = sorted(set(range(partitions)) - set(on_disk))
            assert on_disk and kept, (on_disk, kept)
            led = [p for p in range(partitions) if assignment[p][0] == FAILING]
            assert set(led) & set(on_disk) and set(led) & set(kept), (led, on_disk)
            details = lambda: cluster.details([TOPIC])  # noqa: E731

            producer = ContinuousProducer(cluster.bootstrap, TOPIC, partitions).start()
            try:
                producer.wait_progress(200, 30, details)
                filler = tmpfs.fill(disk)
                cluster.wait(moved_away(cluster, on_disk, FAILING),
                             f"{on_disk} to move away from broker {FAILING}", timeout=40,
                             topics=[TOPIC])
                producer.wait_progress(200, 60, details)
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
                cluster.restart(FAILING)
                cluster.wait_full_isr(TOPIC, range(partitions), timeout=60)
                producer.wait_progress(100, 30, details)
            finally:
                producer.stop()
            check_everything_acked_is_there(cluster, producer, partitions)
        finally:
            cluster.close()
