"""A seeded random schedule over a real cluster (issue 14's property test).

Three broker processes on a real ZooKeeper. One idempotent acks=all producer writes without
pause to every partition that exists, starting the moment a topic is created or grows (so it
meets partitions whose leaders are not known everywhere yet), while the schedule interleaves:

* topic creations (1-12 partitions, replication factor 2 or 3),
* partition additions (CreatePartitions),
* leader moves (a reassignment that reorders or replaces a partition's replicas, then a
  preferred leader election),
* broker restarts: a clean stop (controlled shutdown) or a SIGKILL, then a start.

Beside it a raw client sends acks=all writes for every partition to every running broker at
once, whoever leads (only a leader that knows it leads may take them). At the end every
acknowledged record must be in its partition exactly once, at the offset it was acknowledged
at, and the producer's in the order it sent them. A failing seed is replayed with
``SAMSA_SCHEDULE_SEED=<seed>``; ``SAMSA_SCHEDULE_STEPS`` makes schedules longer.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    ElectionType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka_frames import ConnectionClosed, FrameClient
from waiting import wait_for

from samsa.records.record import RecordInput, encode_batch

from .processes import (
    ProcessCluster,
    check_acked_exactly_once,
    process_cluster,
    read_partitions,
    seq_of,
    value_of,
)

SEEDS = [int(s) for s in os.environ.get("SAMSA_SCHEDULE_SEED", "14,1014,3,4").split(",")]
STEPS = int(os.environ.get("SAMSA_SCHEDULE_STEPS", "8"))
BROKERS = (1, 2, 3)


class SpreadProducer:
    """One idempotent acks=all producer writing round-robin to every partition it is given,
    each value ``<partition>:<sequence>`` (a sequence per partition); partitions can be added
    while it runs. ``acked[topic]`` holds (partition, offset, sequence) of each delivery."""

    def __init__(self, bootstrap: str) -> None:
        self.errors: list[KafkaError] = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 180000,
            "topic.metadata.refresh.interval.ms": 1000, "error_cb": self.errors.append})
        self.targets: list[tuple[str, int]] = []
        self.sent: dict[tuple[str, int], int] = {}
        self.acked: dict[str, list[tuple[int, int | None, int]]] = {}
        self.failed: list[tuple[str, int, int, str]] = []
        self.unsent = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spread", daemon=True)

    def add(self, topic: str, partitions: range) -> None:
        with self._lock:
            self.acked.setdefault(topic, [])
            for p in partitions:
                self.sent[(topic, p)] = 0
                self.targets.append((topic, p))

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        partition, seq = seq_of(msg.value())  # type: ignore[arg-type]
        topic = msg.topic()
        assert topic is not None
        with self._lock:
            if err is None:
                # offset None: librdkafka's implicit ack (check_acked_exactly_once)
                self.acked[topic].append((partition, msg.offset(), seq))  # type: ignore[arg-type]
            elif err.code() == KafkaError._UNKNOWN_PARTITION:
                # never sent: produced before the client had the topic's metadata, then told
                # of fewer partitions by a broker that had not seen the growth yet (Kafka's
                # brokers learn of new partitions one by one too); librdkafka fails only
                # messages still queued so (none of a request in flight)
                self.unsent += 1
            else:
                self.failed.append((topic, partition, seq, str(err)))

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(a) for a in self.acked.values())

    def start(self) -> SpreadProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            with self._lock:
                targets = list(self.targets)
            if not targets:
                self._stop.wait(0.05)
                continue
            topic, p = targets[i % len(targets)]
            i += 1
            seq = self.sent[(topic, p)]
            try:
                self.producer.produce(topic, value_of(p, seq), partition=p,
                                      on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.1)
                continue
            except KafkaException as exc:  # a new partition the client has not seen yet
                assert exc.args[0].code() == KafkaError._UNKNOWN_PARTITION, exc
                self.producer.poll(0.01)
                continue
            self.sent[(topic, p)] = seq + 1
            self.producer.poll(0)
            self._stop.wait(0.002)

    def stop(self, flush_timeout: float = 180) -> None:
        self._stop.set()
        self._thread.join(10)
        try:
            left = self.producer.flush(flush_timeout)
        finally:
            self.producer = None  # type: ignore[assignment]
        assert left == 0, f"{left} messages neither acknowledged nor failed"


class RawSprayer(threading.Thread):
    """Produce v9, acks=all, one record for every known partition, to every running broker in
    turn, leader or not; ``acked`` holds (topic, partition, offset, value) of each success."""

    def __init__(self, cluster: ProcessCluster, producer: SpreadProducer) -> None:
        super().__init__(name="sprayer", daemon=True)
        self.cluster, self.producer = cluster, producer
        self.acked: list[tuple[str, int, int, bytes]] = []
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc
            raise

    def _run(self) -> None:
        deadline = time.monotonic() + 900
        clients: dict[int, FrameClient] = {}
        while not self.stop.is_set() and time.monotonic() < deadline:
            with self.producer._lock:
                targets = list(self.producer.targets)
            for broker in list(self.cluster.brokers.values()):
                if self.stop.is_set():
                    break
                try:
                    client = clients.get(broker.id)
                    if client is None:
                        client = clients[broker.id] = FrameClient(broker.address, timeout=20)
                    self._spray(client, targets)
                except (OSError, ConnectionClosed):  # stopped, killed or restarting: later
                    gone = clients.pop(broker.id, None)
                    if gone is not None:
                        gone.close()
            self.stop.wait(0.02)
        for client in clients.values():
            client.close()

    def _spray(self, client: FrameClient, targets: list[tuple[str, int]]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        values: dict[tuple[str, int], bytes] = {}
        for topic, p in targets:
            self.sent += 1
            values[(topic, p)] = value = f"r{self.sent}".encode()
            topics.setdefault(topic, []).append(
                {"index": p, "records": encode_batch([RecordInput(value)])})
        if not topics:
            return
        response = client.request(0, 9, {
            "transactional_id": None, "acks": -1, "timeout": 10000,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]})
        for topic in response.responses:
            for result in topic.partition_responses:
                if result.error_code == 0:
                    self.acked.append((topic.name, result.index, result.base_offset,
                                       values[(topic.name, result.index)]))


def check_raw_writes(acked: list[tuple[str, int, int, bytes]], topic: str,
                     read: dict[int, list[tuple[int, bytes]]]) -> None:
    """Each acknowledged raw write is at its offset, and no raw value is there twice."""
    at = {p: dict(records) for p, records in read.items()}
    for t, p, offset, value in acked:
        if t == topic:
            assert at[p].get(offset) == value, (
                f"{topic}-{p}: raw write {value!r} acknowledged at {offset}, the log has "
                f"{at[p].get(offset)!r} there")
    for p, records in read.items():
        raw = [v for _, v in records if v.startswith(b"r")]
        assert len(raw) == len(set(raw)), f"{topic}-{p}: a raw write is there twice"


class Schedule:
    def __init__(self, cluster: ProcessCluster, producer: SpreadProducer, seed: int) -> None:
        self.cluster, self.producer = cluster, producer
        self.rng = random.Random(seed)
        self.topics: dict[str, int] = {}  # name -> partitions
        self.log: list[str] = []

    def run(self, steps: int) -> None:
        self.create()  # something to write to from the start
        actions = [self.create, self.grow, self.move_leader, self.restart]
        for _ in range(steps):
            self.rng.choice(actions)()
            before = self.producer.acked_count()
            wait_for(lambda b=before: self.producer.acked_count() > b + 50
                     or self.producer.failed, timeout=120,
                     what="the producer to go on after " + self.log[-1],
                     details=self.cluster.details)
            assert not self.producer.failed, self.producer.failed[:5]

    def create(self) -> None:
        name = f"s{len(self.topics)}"
        partitions, factor = self.rng.randint(1, 12), self.rng.choice((2, 3))
        self.log.append(f"create {name} ({partitions} partitions, RF {factor})")
        admin = self.cluster.live_admin()  # held until the answer
        admin.create_topics([NewTopic(name, partitions, factor)])[name].result(30)
        self.topics[name] = partitions
        self.producer.add(name, range(partitions))  # at once: leaders are not known yet

    def grow(self) -> None:
        name = self.rng.choice(sorted(self.topics))
        old = self.topics[name]
        new = old + self.rng.randint(1, 4)
        self.log.append(f"grow {name} {old} -> {new}")
        admin = self.cluster.live_admin()
        admin.create_partitions([NewPartitions(name, new)])[name].result(30)
        self.topics[name] = new
        self.producer.add(name, range(old, new))

    def move_leader(self) -> None:
        name = self.rng.choice(sorted(self.topics))
        partition = self.rng.randrange(self.topics[name])
        replicas = self.cluster.replicas(name)[partition]
        target = self.rng.sample(BROKERS, len(replicas))
        if target == list(replicas):
            target = target[1:] + target[:1]
        self.log.append(f"move {name}-{partition} {list(replicas)} -> {target}")
        admin = KafkaAdminClient(bootstrap_servers=[
            b.address for b in self.cluster.brokers.values() if b.running],
            request_timeout_ms=15000)
        try:
            tp = KafkaTopicPartition(name, partition)
            assert admin.alter_partition_reassignments({tp: target}) == {tp: None}

            def moved() -> bool:
                state = self.cluster.state(name, partition)
                return (self.cluster.replicas(name)[partition] == tuple(target)
                        and state is not None and set(state.isr) == set(target))

            self.cluster.wait(moved, f"{name}-{partition} to move to {target}", timeout=60,
                              topics=[name])
        finally:
            admin.close()
        elector = self.cluster.live_admin()
        result: dict[TopicPartition, Any] = elector.elect_leaders(
            ElectionType.PREFERRED, [TopicPartition(name, partition)]).result(30)
        error = next(iter(result.values()))
        assert error is None or error.code() == KafkaError.ELECTION_NOT_NEEDED, error

    def restart(self) -> None:
        victim = self.rng.choice(BROKERS)
        broker = self.cluster.broker(victim)
        assert broker.proc is not None
        if self.rng.random() < 0.5:
            self.log.append(f"stop broker {victim} cleanly and start it")
            broker.proc.send_signal(signal.SIGTERM)
            broker.proc.wait(60)
            assert broker.proc.returncode == 0, broker.log_tail()
        else:
            self.log.append(f"SIGKILL broker {victim} and start it")
            self.cluster.kill(victim)
        self.cluster.restart(victim, timeout=60)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    with process_cluster(tmp_path, overrides={"auto.leader.rebalance.enable": "false"}) as c:
        yield c


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", SEEDS)
def test_no_acknowledged_write_is_lost_under_a_random_schedule(
        cluster: ProcessCluster, seed: int) -> None:
    producer = SpreadProducer(cluster.bootstrap).start()
    sprayer = RawSprayer(cluster, producer)
    sprayer.start()
    schedule = Schedule(cluster, producer, seed)
    try:
        schedule.run(STEPS)
    finally:
        print(f"\nseed {seed}: " + "; ".join(schedule.log))
        sprayer.stop.set()
        sprayer.join(60)
        producer.stop()
    assert sprayer.error is None, repr(sprayer.error)
    assert not producer.failed, producer.failed[:5]
    for topic, partitions in schedule.topics.items():
        cluster.wait_full_isr(topic, range(partitions), timeout=60)
    for topic, partitions in sorted(schedule.topics.items()):
        read = read_partitions(cluster.bootstrap, topic, range(partitions), timeout=120)
        check_raw_writes(sprayer.acked, topic, read)
        check_acked_exactly_once(producer.acked[topic], {
            p: [(o, v) for o, v in records if not v.startswith(b"r")]
            for p, records in read.items()})
    assert producer.acked_count() > 0 and sprayer.acked
    print(f"seed {seed}: {producer.acked_count()} acknowledged producer records and "
          f"{len(sprayer.acked)} raw writes checked ({producer.unsent} never sent)")
