"""Failures of real broker processes in a ZooKeeper cluster, seen through real clients.

Three ``samsa server`` processes on a real ZooKeeper (tests/cluster/processes.py), with short
session, lag and fetch timeouts so that every failure is noticed and repaired in seconds.
Brokers are SIGKILLed (a crash: the ZooKeeper session outlives the process until it expires)
or frozen with SIGSTOP (a long GC pause or a stalled VM: the process comes back believing
what it believed before), then restarted with the same broker id and log dir or thawed with
SIGCONT. Producers are confluent-kafka's idempotent acks=all producer; what they were told
is acknowledged must be there afterwards, once, in order; a consumer group reads everything
at least once through the failures, and only the broker that leads a group's
__consumer_offsets partition answers for the group.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from kafka_frames import FrameClient
from waiting import wait_for

from samsa.coordinator.records import partition_for

from .processes import (
    ContinuousProducer,
    ProcessCluster,
    check_acked_exactly_once,
    new_leaders,
    process_cluster,
    read_partitions,
    replica_records,
    seq_of,
    value_of,
)

UNCLEAN_WARNING = "unclean election: records may be lost"
# A line of the controller deciding a partition's leader (controller.py logs every change).
CONTROLLER_DECISION = re.compile(r"samsa\.zk\.controller: \S+-\d+: leader ")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    with process_cluster(tmp_path) as c:
        yield c


def led_by(cluster: ProcessCluster, topic: str, broker: int) -> list[int]:
    return [p for p in sorted(cluster.replicas(topic))
            if (s := cluster.state(topic, p)) is not None and s.leader == broker]


# --- 1. leaders killed and restarted under an idempotent acks=all producer ---------------------


@pytest.mark.timeout(150)
def test_acked_records_survive_leaders_killed_and_restarted(cluster: ProcessCluster) -> None:
    """While an idempotent acks=all producer writes continuously, the leader of a partition is
    SIGKILLed, restarted with the same id and log dir once its session expired, and waited for
    until it is back in every ISR; three times, each time another broker. Every acknowledged
    record is then read back exactly once, at its acknowledged offset, in order."""
    topic, partitions = "orders", 3
    cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    producer = ContinuousProducer(cluster.bootstrap, topic, partitions).start()
    details = lambda: cluster.details([topic])  # noqa: E731
    killed: list[int] = []
    try:
        producer.wait_progress(200, 30, details)
        for round_ in range(3):
            # the leader of partition `round_` (or the next one), unless killed already: an
            # unkilled broker keeps its first leadership, so there always is one
            order = [(round_ + i) % partitions for i in range(partitions)]
            leaders = [s.leader for p in order if (s := cluster.state(topic, p)) is not None]
            victim = next(b for b in leaders if b not in killed and b >= 0)
            led = led_by(cluster, topic, victim)
            killed.append(victim)
            cluster.kill(victim)
            cluster.wait(new_leaders(cluster, topic, led, victim),
                         f"new leaders of {led} after broker {victim} was killed", topics=[topic])
            producer.wait_progress(100, 30, details)
            cluster.restart(victim)
            cluster.wait_full_isr(topic, range(partitions))
            producer.wait_progress(100, 30, details)
    finally:
        producer.stop()
    assert sorted(killed) == [1, 2, 3]
    assert not producer.fatal, producer.fatal
    assert not producer.failed, producer.failed[:10]
    assert len(producer.acked) >= 800
    read = read_partitions(cluster.bootstrap, topic, range(partitions))
    check_acked_exactly_once(producer.acked, read)


# --- 2. a frozen follower -----------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_frozen_follower_leaves_the_isr_and_rejoins(tmp_path: Path) -> None:
    """A follower frozen with SIGSTOP stops fetching: after replica.lag.time.max.ms (3 s) its
    leader drops it from the ISR (its ZooKeeper session, 20 s here, is still alive: the lag
    did it), Metadata shows the smaller ISR, and acks=all produce goes on with two in-sync
    replicas of three (min.insync.replicas=2). After SIGCONT it catches up and rejoins; its
    copy of the log is the leader's, and everything acknowledged is readable."""
    with process_cluster(tmp_path, overrides={"zookeeper.session.timeout.ms": "20000"}) as c:
        topic = "payments"
        c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
        first = c.state(topic, 0)
        assert first is not None
        follower = next(b for b in first.isr if b != first.leader)
        producer = ContinuousProducer(c.bootstrap, topic, 1, rate_per_s=100).start()
        details = lambda: c.details([topic])  # noqa: E731

        def metadata_isr() -> set[int] | None:
            meta = c.metadata(topic, via=first.leader)
            return None if meta is None else set(meta[0][2])

        try:
            producer.wait_progress(100, 30, details)
            c.broker(follower).pause()
            paused_at = time.monotonic()
            c.wait(lambda: metadata_isr() == set(first.isr) - {follower},
                   f"Metadata to show the ISR without the frozen broker {follower}",
                   timeout=20, topics=[topic])
            assert time.monotonic() - paused_at >= 2.5, "dropped before the lag time"
            assert follower in c.registered(), "the session expired: the lag was not the cause"
            acked_before = producer.acked_count()
            producer.wait_progress(200, 20, details)  # acks=all with 2 in sync of 3
            state = c.state(topic, 0)
            assert state is not None and state.leader == first.leader
            assert producer.acked_count() > acked_before
            c.broker(follower).resume()
            c.wait(lambda: metadata_isr() == set(first.isr),
                   f"broker {follower} back in the ISR (Metadata)", timeout=20, topics=[topic])
            producer.wait_progress(100, 20, details)
        finally:
            producer.stop()
        assert not producer.failed, producer.failed[:10]
        read = read_partitions(c.bootstrap, topic, [0])
        check_acked_exactly_once(producer.acked, read)
        # the thawed follower holds the leader's records at the same offsets
        c.wait(lambda: replica_records(c.broker(follower), topic, 0) == read[0],
               f"broker {follower}'s copy to equal the leader's", timeout=20, topics=[topic])


# --- 3. the controller's session expires --------------------------------------------------------


@pytest.mark.timeout(150)
def test_controller_frozen_past_its_session_is_replaced(cluster: ProcessCluster) -> None:
    """The controller is frozen (SIGSTOP) past its ZooKeeper session timeout while an acks=all
    producer writes: another broker wins /controller with a higher epoch and moves the frozen
    broker's leaderships. Thawed, the old controller registers again as an ordinary broker and
    rejoins the ISRs; it makes no controller decisions any more (a later leader failure is
    handled by the new controller alone, in its epoch), and nothing acknowledged is lost."""
    topic, partitions = "ledger", 3
    cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    old = cluster.controller()
    assert old is not None
    old_epoch = cluster.controller_epoch()
    producer = ContinuousProducer(cluster.bootstrap, topic, partitions).start()
    details = lambda: cluster.details([topic])  # noqa: E731
    try:
        producer.wait_progress(200, 30, details)
        led = led_by(cluster, topic, old)
        before = {p: cluster.state(topic, p) for p in range(partitions)}

        def no_write_of_the_old_epoch() -> None:
            """Under the old controller epoch only the leaders' ISR writes may follow
            (they keep the leader epoch): a new leader epoch under it is a deposed
            controller's decision."""
            for p, was in before.items():
                state = cluster.state(topic, p)
                assert state is not None and was is not None
                assert state.controller_epoch >= new_epoch or (
                    state.leader_epoch == was.leader_epoch), (p, was, state)

        cluster.broker(old).pause()
        new = cluster.wait(lambda: (c := cluster.controller()) not in (None, old) and c,
                           f"a controller other than the frozen broker {old}", timeout=30,
                           topics=[topic])
        new_epoch = cluster.controller_epoch()
        assert new_epoch > old_epoch
        cluster.wait(new_leaders(cluster, topic, led, old),
                     f"new leaders of {led}, led by the frozen controller", topics=[topic])
        producer.wait_progress(100, 30, details)

        resumed_at = len(cluster.broker(old).log_text())
        cluster.broker(old).resume()
        cluster.wait(lambda: old in cluster.registered(),
                     f"broker {old} to register again with a new session", topics=[topic])
        cluster.wait_full_isr(topic, range(partitions))
        producer.wait_progress(100, 30, details)
        no_write_of_the_old_epoch()
        assert cluster.controller() == new, "the controllership moved again"
        assert cluster.controller_epoch() == new_epoch

        # leadership decisions still work: the new controller replaces a killed leader
        victim = next(b for b in cluster.brokers if b not in (old, new))
        victim_led = led_by(cluster, topic, victim)
        assert victim_led, f"broker {victim} leads nothing"
        cluster.kill(victim)
        cluster.wait(new_leaders(cluster, topic, victim_led, victim),
                     f"new leaders of {victim_led} after broker {victim} was killed",
                     topics=[topic])
        for p in victim_led:
            state = cluster.state(topic, p)
            assert state is not None and state.controller_epoch == new_epoch, state
        producer.wait_progress(100, 30, details)
        no_write_of_the_old_epoch()
    finally:
        producer.stop()
    after = cluster.broker(old).log_text()[resumed_at:]
    zombie = [line for line in after.splitlines() if CONTROLLER_DECISION.search(line)]
    assert not zombie, f"the deposed controller {old} still decided leaders:\n" + \
        "\n".join(zombie[:10])
    assert CONTROLLER_DECISION.search(cluster.broker(new).log_text())
    assert not producer.failed, producer.failed[:10]
    read = read_partitions(cluster.bootstrap, topic, range(partitions))
    check_acked_exactly_once(producer.acked, read)


# --- 4. all in-sync replicas down: unclean leader election --------------------------------------


@dataclass
class Offline:
    """A partition of replication factor 2 whose only in-sync replica (``leader``) was killed
    while the other (``behind``, thawed since) lacked its last records."""

    topic: str
    leader: int
    behind: int
    before: list[tuple[int, int, int]] = field(default_factory=list)  # acked by both
    only_leader: list[tuple[int, int, int]] = field(default_factory=list)  # acked, ISR {leader}


def produce_acked(bootstrap: str, topic: str, seqs: range,
                  timeout_s: float = 30) -> list[tuple[int, int, int]]:
    """Produce ``<0>:<seq>`` to partition 0 with acks=all; (partition, offset, seq) of each
    acknowledged record. Raises if any is not acknowledged within ``timeout_s``."""
    acked: list[tuple[int, int, int]] = []
    errors: list[str] = []

    def done(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                          seq_of(msg.value())[1]))  # type: ignore[attr-defined]
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True,
                         "message.timeout.ms": int(timeout_s * 1000)})
    for seq in seqs:
        producer.produce(topic, value_of(0, seq), partition=0, on_delivery=done)
    left = producer.flush(timeout_s + 10)
    assert left == 0 and not errors, f"{left} left, errors: {errors[:5]}"
    return acked


def produce_fails(bootstrap: str, topic: str, timeout_ms: int = 3000) -> str | None:
    """The delivery error of one record sent to partition 0 (None if it was acknowledged)."""
    result: list[str | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": timeout_ms})
    producer.produce(topic, b"0:99999999", partition=0,
                     on_delivery=lambda err, msg: result.append(None if err is None
                                                                else str(err)))
    producer.flush(timeout_ms / 1000 + 10)
    assert result, "no delivery report"
    return result[0]


def take_offline(cluster: ProcessCluster, topic: str, config: dict[str, str]) -> Offline:
    """Partition 0 of a new RF2 topic: the follower is frozen until the leader drops it from
    the ISR, more records are acknowledged by the leader alone, the leader is killed, and the
    out-of-sync follower is thawed (its session expired meanwhile: it registers again)."""
    cluster.create_topic(topic, 1, 2, config)
    state = cluster.state(topic, 0)
    assert state is not None and len(state.isr) == 2
    leader = state.leader
    behind = next(b for b in state.isr if b != leader)
    offline = Offline(topic, leader, behind)
    offline.before = produce_acked(cluster.bootstrap, topic, range(0, 50))
    cluster.wait(lambda: len(replica_records(cluster.broker(behind), topic, 0)) == 50,
                 f"broker {behind} to copy the first records", topics=[topic])
    cluster.broker(behind).pause()
    cluster.wait(lambda: (s := cluster.state(topic, 0)) is not None and s.isr == (leader,),
                 f"the ISR to shrink to the leader {leader}", timeout=20, topics=[topic])
    offline.only_leader = produce_acked(cluster.bootstrap, topic, range(50, 80))
    cluster.kill(leader)
    cluster.wait_session_gone(leader)
    cluster.wait_session_gone(behind)
    cluster.broker(behind).resume()
    cluster.wait(lambda: behind in cluster.registered(),
                 f"the thawed broker {behind} to register again", topics=[topic])
    return offline


def all_logs(cluster: ProcessCluster) -> str:
    return "\n".join(b.log_text() for b in cluster.brokers.values())


def unclean_warnings(cluster: ProcessCluster, topic: str) -> list[str]:
    """The controller's log lines about the unclean election of ``topic``-0, once there are any.

    The controller logs a decision after ZooKeeper has taken its write, so a test that has just
    seen the new state in ZooKeeper can be ahead of the line: wait for it.
    """
    def found() -> list[str]:
        controller = cluster.controller()
        if controller is None:
            return []
        return [line for line in cluster.broker(controller).log_text().splitlines()
                if UNCLEAN_WARNING in line and f"{topic}-0" in line]

    warnings: list[str] = cluster.wait(
        found, f"the controller to log the unclean election of {topic}-0", topics=[topic])
    return warnings


@pytest.mark.timeout(120)
def test_without_unclean_election_an_isr_less_partition_stays_offline(
    cluster: ProcessCluster,
) -> None:
    """unclean.leader.election.enable=false (the default): with its only in-sync replica dead,
    the partition has no leader (-1 in ZooKeeper and in Metadata) even though the other
    replica is alive, and produce fails. When the in-sync replica comes back it leads again,
    with every acknowledged record."""
    offline = take_offline(cluster, "strict", {})
    topic = offline.topic
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # it stays offline, the live replica notwithstanding
        state = cluster.state(topic, 0)
        assert state is not None and state.leader == -1, state
        assert state.isr == (offline.leader,), state
        time.sleep(0.2)
    for broker in (offline.behind, *(b for b in cluster.brokers if b not in (
            offline.leader, offline.behind))):
        meta = cluster.metadata(topic, via=broker)
        assert meta is not None and meta[0][0] == -1, (broker, meta)
    assert produce_fails(cluster.bootstrap, topic) is not None
    assert UNCLEAN_WARNING not in all_logs(cluster)

    cluster.restart(offline.leader)  # the last in-sync replica is back: it leads
    cluster.wait_full_isr(topic, [0])
    state = cluster.state(topic, 0)
    assert state is not None and state.leader == offline.leader
    after = produce_acked(cluster.bootstrap, topic, range(80, 100))
    read = read_partitions(cluster.bootstrap, topic, [0])
    check_acked_exactly_once(offline.before + offline.only_leader + after, read)
    assert [seq_of(v)[1] for _, v in read[0]] == list(range(100))


@pytest.mark.timeout(120)
def test_unclean_election_elects_the_out_of_sync_replica_and_reports_the_loss(
    cluster: ProcessCluster,
) -> None:
    """unclean.leader.election.enable=true on the topic: the thawed out-of-sync replica is
    elected although it is not in the ISR, the controller logs the unclean election as a
    warning, the records only the dead leader had are gone, and new records are written and
    read. When the old leader comes back it truncates its log to the new leader's (its extra
    records diverged) and rejoins the ISR."""
    offline = take_offline(cluster, "lenient", {"unclean.leader.election.enable": "true"})
    topic = offline.topic
    cluster.wait(lambda: (s := cluster.state(topic, 0)) is not None
                 and s.leader == offline.behind,
                 f"the out-of-sync replica {offline.behind} to be elected", topics=[topic])
    state = cluster.state(topic, 0)
    assert state is not None and state.isr == (offline.behind,)
    warnings = unclean_warnings(cluster, topic)
    assert all("WARNING" in line for line in warnings), warnings

    after = produce_acked(cluster.bootstrap, topic, range(100, 120))
    read = read_partitions(cluster.bootstrap, topic, [0])
    seqs = [seq_of(v)[1] for _, v in read[0]]
    assert seqs == list(range(50)) + list(range(100, 120)), seqs  # 50..79 were lost
    check_acked_exactly_once(offline.before + after, read)

    cluster.restart(offline.leader)
    cluster.wait_full_isr(topic, [0])
    cluster.wait(lambda: replica_records(cluster.broker(offline.leader), topic, 0) == read[0],
                 f"broker {offline.leader} to truncate its diverged records", timeout=20,
                 topics=[topic])


@pytest.mark.timeout(120)
def test_enabling_unclean_election_on_the_fly_elects_the_out_of_sync_replica(
    cluster: ProcessCluster,
) -> None:
    """Kafka's controller reacts to unclean.leader.election.enable being set on a topic with
    offline partitions (TopicUncleanLeaderElectionEnable): the out-of-sync live replica is
    elected at once."""
    offline = take_offline(cluster, "relaxed", {})
    topic = offline.topic
    state = cluster.state(topic, 0)
    assert state is not None and state.leader == -1
    resource = ConfigResource("TOPIC", topic, incremental_configs=[ConfigEntry(
        "unclean.leader.election.enable", "true",
        incremental_operation=AlterConfigOpType.SET)])
    admin = cluster.live_admin()
    admin.incremental_alter_configs([resource])[resource].result(15)
    # nothing else can elect it (no broker comes or goes from here on, and the preferred
    # election wants an in-sync replica), so the wait needs no tight bound to show the reaction
    cluster.wait(lambda: (s := cluster.state(topic, 0)) is not None
                 and s.leader == offline.behind,
                 f"the out-of-sync replica {offline.behind} to be elected after the config"
                 f" change (ZooKeeper's topic config: {cluster.topic_configs(topic)})",
                 topics=[topic])
    warnings = unclean_warnings(cluster, topic)
    assert all("WARNING" in line for line in warnings), warnings


# --- 5. a consumer group through broker failures ------------------------------------------------


class GroupMember:
    """A consumer of the group in its own thread: records what it reads, commits (sync) at
    most every half second; commit failures during a failover are tolerated."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000,
        })
        self.topic = topic
        self.assignments: list[list[int]] = []  # every assignment the member was given
        self.seen: list[tuple[int, int, int]] = []  # (partition, offset, seq)
        self.commit_errors: list[str] = []
        self.commits = 0
        self.final_commit_done = threading.Event()
        self._final = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def _commit(self) -> bool:
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed since
                self.commit_errors.append(str(exc))
                return False
        self.commits += 1
        return True

    def _run(self) -> None:
        try:
            self.consumer.subscribe([self.topic], on_assign=lambda _c, tps: (
                self.assignments.append(sorted(tp.partition for tp in tps))))
            last_commit = time.monotonic()
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None and not msg.error():
                    _, seq = seq_of(msg.value())  # type: ignore[arg-type]
                    with self._lock:
                        self.seen.append((msg.partition(), msg.offset(), seq))  # type: ignore[arg-type]
                if self._final.is_set():
                    if not self.final_commit_done.is_set() and self._commit():
                        self.final_commit_done.set()
                elif time.monotonic() - last_commit > 0.5:
                    last_commit = time.monotonic()
                    self._commit()
        except BaseException as exc:  # reported by stop()
            self.failure = exc
        finally:
            self.consumer.close()

    def describe(self) -> str:
        """One line for a failed wait: what the member did and the last commit errors."""
        return (f"{self._thread.name}: alive={self._thread.is_alive()} read={self.count()} "
                f"commits={self.commits} final_done={self.final_commit_done.is_set()} "
                f"failure={self.failure!r} last errors={self.commit_errors[-3:]}")

    def commit_final(self) -> None:
        """Commit what has been read, retried until it succeeds (see final_commit_done)."""
        self._final.set()

    def stop(self) -> None:
        """End the thread (which closes the consumer); a failure of the thread is raised."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the consumer did not stop"
        if self.failure is not None:
            raise self.failure


def stop_all(members: list[GroupMember]) -> None:
    """Stop every member, then raise the first failure."""
    failures = []
    for m in members:
        try:
            m.stop()
        except BaseException as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


@pytest.mark.timeout(180)
def test_consumer_group_reads_everything_while_brokers_fail(cluster: ProcessCluster) -> None:
    """Two members of a consumer group read a topic while an idempotent producer writes it
    and the brokers are SIGKILLed and restarted one at a time, the group coordinator first.
    The coordinator moves to the new leader of the group's __consumer_offsets partition; at
    the end the group has read every acknowledged record at least once (after a failover it
    may read some again) and its committed offsets are the partitions' ends."""
    topic, partitions, group = "events", 3, "auditors"
    cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    producer = ContinuousProducer(cluster.bootstrap, topic, partitions, rate_per_s=100).start()
    members = [GroupMember(cluster.bootstrap, group, topic, f"member-{i}").start()
               for i in (1, 2)]
    offsets_topic = "__consumer_offsets"
    home = partition_for(group, 3)  # offsets.topic.num.partitions=3 (processes.py)

    def details() -> str:
        return cluster.details([topic, offsets_topic])

    def read_total() -> int:
        return sum(m.count() for m in members)

    def consumed(more: int, timeout: float = 40) -> None:
        target = read_total() + more
        cluster.wait(lambda: read_total() >= target or any(m.failure for m in members),
                     f"the group to read {more} more records", timeout=timeout,
                     topics=[topic, offsets_topic])
        for m in members:
            assert m.failure is None, m.failure

    def coordinator() -> int | None:
        admin = cluster.live_admin()
        try:
            described = admin.describe_consumer_groups([group])[group].result(5)
        except KafkaException:
            return None
        return described.coordinator.id if described.coordinator is not None else None

    try:
        try:
            consumed(200, timeout=60)
            # the group is stable once both members share the partitions
            cluster.wait(lambda: all(m.assignments and m.assignments[-1] for m in members)
                         and sorted(sum((m.assignments[-1] for m in members), [])) == [0, 1, 2],
                         "both members to be assigned", topics=[offsets_topic])
            first = cluster.wait(coordinator, "the group's coordinator", topics=[offsets_topic])
            home_state = cluster.state(offsets_topic, home)
            assert home_state is not None and first == home_state.leader
            cluster.wait_full_isr(offsets_topic, range(3))
            order = [first] + [b for b in sorted(cluster.brokers) if b != first]
            for victim in order:
                led = {t: led_by(cluster, t, victim) for t in (topic, offsets_topic)}
                cluster.kill(victim)
                for t, ps in led.items():
                    cluster.wait(new_leaders(cluster, t, ps, victim),
                                 f"new leaders of {t} {ps} after broker {victim} was killed",
                                 topics=[t])
                if victim == first:
                    cluster.wait(lambda: coordinator() not in (None, first),
                                 "the coordinator to move", topics=[offsets_topic])
                consumed(100)
                cluster.restart(victim)
                cluster.wait_full_isr(topic, range(partitions))
                cluster.wait_full_isr(offsets_topic, range(3))
                consumed(100)
        finally:
            producer.stop()
        assert not producer.failed and not producer.fatal, (producer.failed[:5],
                                                            producer.fatal)
        expected = {(p, seq) for p, _, seq in producer.acked}

        def unread() -> set[tuple[int, int]]:
            read = {(p, s) for m in members for p, _, s in list(m.seen)}
            return expected - read

        cluster.wait(lambda: not unread(), "the group to read every acknowledged record",
                     timeout=60, topics=[topic, offsets_topic])
        for m in members:
            m.commit_final()
        wait_for(lambda: all(m.final_commit_done.is_set() for m in members),
                 timeout=60, what="the members' last commits", interval=0.1,
                 details=lambda: "\n".join([m.describe() for m in members]
                                           + [cluster.details([offsets_topic])]))
    finally:
        stop_all(members)
    ends = read_partitions(cluster.bootstrap, topic, range(partitions))
    admin = cluster.live_admin()
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(15)
    by_partition = {tp.partition: tp.offset for tp in committed.topic_partitions
                    if tp.topic == topic}
    assert by_partition == {p: ends[p][-1][0] + 1 for p in range(partitions)}, (
        by_partition, {p: len(records) for p, records in ends.items()},
        [(m.commits, m.commit_errors[:5]) for m in members])
    # A rebalance after a coordinator move is allowed (librdkafka can take longer than a
    # session to reach the new coordinator: it loops on "nodename change" while connecting);
    # what is checked above is that nothing acknowledged was missed and the commits reached
    # the ends.


# --- 6. only the coordinator answers for a group ------------------------------------------------

JOIN_GROUP, HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH = 11, 12, 8, 9
NOT_COORDINATOR = 16


def group_with_commit(cluster: ProcessCluster, group: str, topic: str) -> tuple[int, int]:
    """A group that read 10 records of ``topic`` and committed offset 10 on its coordinator;
    (the coordinator, a broker that is not)."""
    cluster.create_topic(topic, 1, 3)
    produce_acked(cluster.bootstrap, topic, range(10))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        read = 0
        deadline = time.monotonic() + 30
        while read < 10:
            assert time.monotonic() < deadline, f"read {read} of 10"
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                read += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    state = cluster.state("__consumer_offsets", partition_for(group, 3))
    assert state is not None and state.leader > 0
    other = next(b for b in cluster.brokers if b != state.leader)
    return state.leader, other


def offset_fetch(address: str, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch v7 of one partition: (top-level error code, committed offset)."""
    with FrameClient(address) as client:
        response = client.request(OFFSET_FETCH, 7, {
            "group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
            "require_stable": False})
    committed = [p.committed_offset for t in response.topics for p in t.partitions]
    return response.error_code, committed[0] if committed else -1


@pytest.mark.timeout(90)
def test_a_broker_that_does_not_coordinate_a_group_refuses_its_requests(
    cluster: ProcessCluster,
) -> None:
    """A client whose idea of the coordinator is stale (FindCoordinator answers are cached)
    may send a group's requests to any broker. Only the leader of the group's
    __consumer_offsets partition serves them; any other broker answers NOT_COORDINATOR, so
    the client looks the coordinator up again, instead of starting a second copy of the group
    (JoinGroup), throwing a member out (Heartbeat: UNKNOWN_MEMBER_ID) or failing the
    connection (OffsetCommit)."""
    group, topic = "stale", "shared"
    coordinator, other = group_with_commit(cluster, group, topic)
    assert offset_fetch(cluster.broker(coordinator).address, group, topic) == (0, 10)
    with FrameClient(cluster.broker(other).address) as client:
        joined = client.request(JOIN_GROUP, 9, {
            "group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None})
        assert joined.error_code == NOT_COORDINATOR, joined
        beat = client.request(HEARTBEAT, 4, {
            "group_id": group, "generation_id": 1, "member_id": "m",
            "group_instance_id": None})
        assert beat.error_code == NOT_COORDINATOR, beat
        committed = client.request(OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time": -1,
            "topics": [{"name": topic, "partitions": [{
                "partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                "committed_metadata": ""}]}]})
        codes = [p.error_code for t in committed.topics for p in t.partitions]
        assert codes == [NOT_COORDINATOR], committed
    # the coordinator's answers are untouched
    assert offset_fetch(cluster.broker(coordinator).address, group, topic) == (0, 10)


@pytest.mark.timeout(90)
def test_offset_fetch_from_a_broker_that_does_not_coordinate_the_group(
    cluster: ProcessCluster,
) -> None:
    """OffsetFetch sent to a broker that is not the group's coordinator (a client's cached,
    stale coordinator) must answer NOT_COORDINATOR, not "nothing committed"."""
    group, topic = "stale-fetch", "shared"
    coordinator, other = group_with_commit(cluster, group, topic)
    assert offset_fetch(cluster.broker(coordinator).address, group, topic) == (0, 10)
    assert offset_fetch(cluster.broker(other).address, group, topic)[0] == NOT_COORDINATOR


@pytest.mark.timeout(120)
def test_enabling_unclean_election_as_the_brokers_default_elects_the_out_of_sync_replica(
    cluster: ProcessCluster,
) -> None:
    """The broker default turned on as a dynamic cluster-wide config (Kafka's
    enableDefaultUncleanLeaderElection): the controller elects the out-of-sync live replica of
    a topic without its own setting at once."""
    offline = take_offline(cluster, "by-default", {})
    topic = offline.topic
    state = cluster.state(topic, 0)
    assert state is not None and state.leader == -1
    with FrameClient(cluster.broker(offline.behind).address) as client:
        answer = client.request(44, 1, {"resources": [{
            "resource_type": 4, "resource_name": "", "configs": [{
                "name": "unclean.leader.election.enable", "config_operation": 0,
                "value": "true"}]}], "validate_only": False})
    assert answer.responses[0].error_code == 0, answer
    cluster.wait(lambda: (s := cluster.state(topic, 0)) is not None
                 and s.leader == offline.behind,
                 f"the out-of-sync replica {offline.behind} to be elected after the default"
                 " changed", topics=[topic])
