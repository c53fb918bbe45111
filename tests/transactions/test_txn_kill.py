"""Exactly-once consume-transform-produce (KIP-98, KIP-447) with confluent-kafka workers that are
SIGKILLed at random points and started again.

Each worker (txn_worker.py, its own OS process) reads "in-<i>" from a 3-partition input topic
in group G and, in one transaction per batch, writes "out-<i>" to a 3-partition output topic
together with the input offsets (send_offsets_to_transaction). A restarted worker keeps its
slot's transactional.id: init_transactions fences the killed incarnation and aborts its open
transaction, offsets included. Whatever the kills hit, a read_committed reader of the output
must see every "out-<i>" exactly once, while a read_uncommitted reader also sees the aborted
copies.

The kill schedule comes from a seeded random.Random; the seed is printed (set TXN_KILL_SEED to
replay one).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    Producer,
)
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from waiting import wait_for

import samsa

pytestmark = pytest.mark.timeout(80)

WORKER_SCRIPT = Path(__file__).with_name("txn_worker.py")
PARTITIONS = 3
MESSAGES = 3000
SESSION_MS = 1500  # the workers' session.timeout.ms: how long a killed member holds the group
# Each transaction's "transform work" (ms): most kills land inside a transaction, and the input
# lasts through the kills (two workers get through it twice as fast).
WORK_MS = {1: 300, 2: 600}
IDLE_S = 2.0
ASSIGN_S = 15.0  # how long a (re)started worker may take to own partitions
RESTART_DELAY_S = 3.0  # with two slots: at most this long before the killed one restarts
FINAL_S = 60.0  # how long the last workers may take to finish everything


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data", group_min_session_timeout_ms=500) as b:
        yield b


def create_topics(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics],
                                  operation_timeout=10)
    for f in futures.values():
        f.result(timeout=15)


def produce_input(bootstrap: str, topic: str, count: int) -> None:
    """``count`` plain (non-transactional) messages: key "k<i>", value "in-<i>"."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "message.timeout.ms": 15000})
    for i in range(count):
        producer.produce(topic, key=f"k{i}", value=f"in-{i}",
                         on_delivery=lambda err, _msg: err and errors.append(str(err)))
        producer.poll(0)
    assert producer.flush(20) == 0, "input still in flight after 20 s"
    assert not errors, errors[:5]


@dataclass
class Worker:
    """One incarnation of a worker slot (a process); its stdout goes to ``log``."""

    slot: int
    incarnation: int
    log: Path
    proc: subprocess.Popen[bytes]

    def lines(self) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def owns_partitions(self) -> bool:
        """Whether its last rebalance event gave it partitions."""
        events = [ln.split() for ln in self.lines()
                  if ln.startswith(("assigned ", "revoked ", "lost "))]
        return bool(events) and events[-1][0] == "assigned" and events[-1][1] != "-"

    def in_transaction(self) -> bool:
        """Whether its last transaction began and was neither committed nor aborted."""
        ends = [ln.split()[0] for ln in self.lines()
                if ln.startswith(("begin ", "committed ", "aborted "))]
        return bool(ends) and ends[-1] == "begin"

    def tail(self, n: int = 15) -> str:
        return f"--- slot {self.slot} #{self.incarnation} ---\n" + "\n".join(self.lines()[-n:])


class Scenario:
    """Worker slots in one group over one input and one output topic."""

    def __init__(self, bootstrap: str, directory: Path, slots: int, seed: int) -> None:
        self.bootstrap, self.directory, self.seed = bootstrap, directory, seed
        self.rng = random.Random(seed)
        suffix = uuid.uuid4().hex[:8]
        self.input, self.output = f"in-{suffix}", f"out-{suffix}"
        self.group = f"ctp-{suffix}"
        self.slots: list[Worker | None] = [None] * slots
        self.everyone: list[Worker] = []
        self.kills = 0
        self.kills_in_txn = 0

    def start(self, slot: int, lifetime_s: float = 70.0) -> Worker:
        incarnation = sum(1 for w in self.everyone if w.slot == slot)
        log = self.directory / f"worker-{slot}-{incarnation}.log"
        command = [
            sys.executable, str(WORKER_SCRIPT), "--bootstrap", self.bootstrap,
            "--input", self.input, "--output", self.output, "--group", self.group,
            "--transactional-id", f"ctp-worker-{slot}",
            "--session-timeout-ms", str(SESSION_MS), "--work-ms", str(WORK_MS[len(self.slots)]),
            "--idle-s", str(IDLE_S), "--lifetime-s", str(lifetime_s),
        ]
        with open(log, "wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        worker = Worker(slot, incarnation, log, proc)
        self.slots[slot] = worker
        self.everyone.append(worker)
        return worker

    def logs(self) -> str:
        return "\n".join(w.tail() for w in self.everyone)

    def check_running(self) -> None:
        """A worker that ended by itself must have finished cleanly (caught up): restart it."""
        for slot, worker in enumerate(self.slots):
            assert worker is not None
            code = worker.proc.poll()
            if code is None:
                continue
            assert code == 0, f"seed {self.seed}: worker exited {code}\n{self.logs()}"
            self.start(slot)

    def kill(self, worker: Worker) -> None:
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(10)
        self.kills += 1
        self.kills_in_txn += worker.in_transaction()

    def run(self) -> None:
        """Start every slot; 5-7 times: once every worker owns partitions, wait a random
        0.3-1.5 s, kill a random slot and restart it (with two slots, after a random pause of up
        to RESTART_DELAY_S, long enough for the group to give the survivor its partitions).
        Then let the last workers finish everything."""
        create_topics(self.bootstrap, self.input, self.output)
        produce_input(self.bootstrap, self.input, MESSAGES)
        for slot in range(len(self.slots)):
            self.start(slot)
        for _ in range(self.rng.randint(5, 7)):
            self.check_running()
            wait_for(lambda: all(w is not None and (w.owns_partitions() or w.proc.poll()
                                                    is not None) for w in self.slots),
                     ASSIGN_S, "every worker to own partitions", details=self.logs)
            self.check_running()
            time.sleep(self.rng.uniform(0.3, 1.5))
            slot = self.rng.randrange(len(self.slots))
            victim = self.slots[slot]
            assert victim is not None
            self.kill(victim)
            if len(self.slots) > 1:  # the survivor may take the partitions over meanwhile
                time.sleep(self.rng.uniform(0.0, RESTART_DELAY_S))
            self.start(slot)
        self.check_running()
        deadline = time.monotonic() + FINAL_S
        for worker in self.slots:
            assert worker is not None
            try:
                code = worker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"seed {self.seed}: the workers did not finish within "
                                     f"{FINAL_S} s\n{self.logs()}") from None
            assert code == 0, f"seed {self.seed}: worker exited {code}\n{self.logs()}"

    def stop(self) -> None:
        for worker in self.everyone:
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait(10)


def end_offsets(admin: AdminClient, topic: str, isolation: IsolationLevel) -> dict[int, int]:
    request = {TP(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=10)
    return {tp.partition: f.result(timeout=15).offset for tp, f in futures.items()}


def read_all(bootstrap: str, topic: str, isolation: str) -> list[tuple[str, str]]:
    """(key, value) of every record a consumer with ``isolation`` reads from the beginning of
    every partition to its end (the LSO for read_committed), in partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    got: dict[int, list[tuple[str, str]]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    try:
        consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 20
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{isolation}: no end of {topic} within 20 s"
            for msg in consumer.consume(500, 0.2):
                err = msg.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, f"{isolation}: {err}"
                    at_end.add(msg.partition())
                    continue
                got[msg.partition()].append((msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()
    return [kv for p in range(PARTITIONS) for kv in got[p]]


def verify(scenario: Scenario) -> None:
    """read_committed: every "out-<i>" exactly once, keyed "k<i>"; read_uncommitted: those and
    the aborted copies; the group committed the whole input."""
    bootstrap, seed = scenario.bootstrap, scenario.seed
    admin = AdminClient({"bootstrap.servers": bootstrap})
    high = end_offsets(admin, scenario.output, IsolationLevel.READ_UNCOMMITTED)
    wait_for(lambda: end_offsets(admin, scenario.output, IsolationLevel.READ_COMMITTED) == high,
             10, "the output's last stable offsets to reach its high watermarks (no open "
             "transaction is left)",
             details=lambda: str(end_offsets(admin, scenario.output,
                                              IsolationLevel.READ_COMMITTED)) + f" vs {high}")

    committed = read_all(bootstrap, scenario.output, "read_committed")
    uncommitted = read_all(bootstrap, scenario.output, "read_uncommitted")
    print(f"seed={seed} kills={scenario.kills} (inside a transaction: {scenario.kills_in_txn})"
          f" workers={len(scenario.everyone)} output records: read_committed="
          f"{len(committed)} read_uncommitted={len(uncommitted)} (aborted: "
          f"{len(uncommitted) - len(committed)}) high watermarks={high}")

    expected = Counter(f"out-{i}" for i in range(MESSAGES))
    values = Counter(v for _, v in committed)
    missing = sorted(expected - values, key=lambda v: int(v[4:]))
    extra = sorted(values - expected)
    assert not missing and not extra, (
        f"seed {seed}: read_committed output is not exactly once: {len(missing)} missing "
        f"{missing[:10]}, {len(extra)} duplicated or unexpected {extra[:10]}\n"
        f"{scenario.logs()}")
    wrong_keys = [(k, v) for k, v in committed if k != "k" + v[4:]]
    assert not wrong_keys, f"seed {seed}: keys changed: {wrong_keys[:10]}"
    assert len(uncommitted) >= len(committed), (len(uncommitted), len(committed))
    assert not Counter(committed) - Counter(uncommitted), "read_committed saw what " \
        "read_uncommitted did not"
    # Every transaction ends with a control record per partition, which takes an offset.
    assert sum(high.values()) > len(uncommitted), (high, len(uncommitted))

    input_end = end_offsets(admin, scenario.input, IsolationLevel.READ_UNCOMMITTED)
    request = ConsumerGroupTopicPartitions(
        scenario.group, [TP(scenario.input, p) for p in range(PARTITIONS)])
    offsets = admin.list_consumer_group_offsets([request])[scenario.group].result(timeout=15)
    group_offsets = {tp.partition: tp.offset for tp in offsets.topic_partitions}
    assert group_offsets == input_end, (
        f"seed {seed}: group {scenario.group} committed {group_offsets}, input ends at "
        f"{input_end}")


def seed_for_test() -> int:
    seed = int(os.environ.get("TXN_KILL_SEED", random.SystemRandom().randrange(2**32)))
    print(f"TXN_KILL_SEED={seed}")
    return seed


def kill_scenario(broker: samsa.Broker, tmp_path: Path, slots: int) -> None:
    scenario = Scenario(broker.bootstrap_servers, tmp_path, slots, seed_for_test())
    try:
        scenario.run()
    finally:
        scenario.stop()
    verify(scenario)


def test_one_worker_killed_and_restarted_exactly_once(broker: samsa.Broker,
                                                       tmp_path: Path) -> None:
    """One worker slot at a time (transactional.id ctp-worker-0): each restart's
    init_transactions aborts the killed incarnation's transaction, its consumer resumes from
    the offsets committed with the last committed transaction, so the output holds every input
    exactly once."""
    kill_scenario(broker, tmp_path, slots=1)


def test_two_workers_one_killed_exactly_once(broker: samsa.Broker, tmp_path: Path) -> None:
    """Two worker slots in one group (ctp-worker-0/1): a random one is killed while the other
    goes on; the group hands the killed member's partitions over (KIP-447: the survivor's offset
    fetch waits for the killed transaction's offsets to be decided), the restarted slot fences
    and aborts its predecessor, and the output still holds every input exactly once."""
    kill_scenario(broker, tmp_path, slots=2)
