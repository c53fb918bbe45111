"""Consumer groups when things fail: a member SIGKILLed (its session expires, its partitions
move, consumption resumes from its last commit) and the broker restarted (committed offsets
and the group come back from __consumer_offsets). Members are confluent-kafka processes."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

import samsa

from .conftest import (
    SESSION_MS,
    BrokerProcess,
    PacedProducer,
    assignment_settled,
    check_after_kill,
    check_exactly_once,
    check_no_overlap,
    create_topic,
    describe,
    events_since,
    produce,
    unique,
    wait_drained,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.timeout(90)

CLIENT = "confluent"
SESSION_S = SESSION_MS / 1000
# Expiry is checked every 0.25 s; the survivors learn of the rebalance from their next
# heartbeat (1 s), then join and sync.
MOVE_MARGIN_S = 5.0
# The restart test's members: a session that outlasts a broker restart on a loaded machine
# (stop, start, reload: 4.7 s seen with the CPUs saturated), which librdkafka itself would
# otherwise count as a lost session before the broker is back.
RESTART_SESSION_MS = 15_000


def test_sigkilled_member_partitions_move_after_session_timeout(
    broker: samsa.Broker, members: Callable
) -> None:
    """One of three members is SIGKILLed after processing a batch it has not committed yet
    (it commits 0.5 s after processing). Its session expires, its partitions move to the
    others within the session timeout plus a margin, and they resume from its last commit:
    nothing lost, and the only messages processed twice are its uncommitted tail."""
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("group")
    create_topic(bootstrap, topic)
    everyone = [members(CLIENT, bootstrap, group, topic, "range", commit_delay_ms=500)]
    settled = wait_settled(everyone, everyone)
    for _ in range(2):
        everyone.append(members(CLIENT, bootstrap, group, topic, "range"))
        settled = wait_settled(everyone, everyone)
    producer = PacedProducer(bootstrap, topic, 3000, 10.0)
    producer.start()
    victim, survivors = everyone[0], everyone[1:]
    wait_for(lambda: victim.output().last_commits and victim.uncommitted(), 10,
             f"{victim.name} to have processed a batch it has not committed",
             interval=0.01, details=lambda: describe(everyone))
    killed_at = victim.kill()
    assert settled == assignment_settled(everyone[1:] + [victim]), "rebalanced before the kill"

    moved = wait_settled(survivors, everyone, timeout=SESSION_S + 3 * MOVE_MARGIN_S)
    took = time.time() - killed_at
    assert took <= SESSION_S + MOVE_MARGIN_S, (
        f"the killed member's partitions moved after {took:.1f} s\n{describe(everyone)}")
    assert set().union(*moved.values()) >= settled[victim.name]

    produced = producer.finish()
    wait_drained(everyone, produced)
    for m in survivors:
        m.terminate()
    duplicates = check_after_kill(everyone, produced, victim)
    assert duplicates, "the killed member's uncommitted batch was not processed again"
    check_no_overlap(everyone)


def test_member_killed_during_rebalance(broker: samsa.Broker, members: Callable) -> None:
    """A member SIGKILLed just as a new member joins (the group is rebalancing, and the dead
    member never rejoins): the rebalance must not wait for the rebalance timeout (20 s, the
    members' max.poll.interval.ms) but drop the dead member once its session expires, so
    the others settle within the session timeout plus a margin."""
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("group")
    create_topic(bootstrap, topic)
    everyone = []
    for _ in range(2):
        everyone.append(members(CLIENT, bootstrap, group, topic, "range"))
        wait_settled(everyone, everyone)
    producer = PacedProducer(bootstrap, topic, 2000, 8.0)
    producer.start()
    wait_for(lambda: all(m.output().messages for m in everyone), 10, "every member to process")
    first, victim = everyone
    joiner = members(CLIENT, bootstrap, group, topic, "range")
    everyone.append(joiner)
    wait_for(lambda: joiner.output().of("started"), 10, f"{joiner.name} to start")
    time.sleep(0.3)  # its JoinGroup is on its way: the others learn of it from a heartbeat
    killed_at = victim.kill()

    wait_settled([first, joiner], everyone, timeout=SESSION_S + 3 * MOVE_MARGIN_S)
    took = time.time() - killed_at
    assert took <= SESSION_S + MOVE_MARGIN_S, (
        f"the group settled {took:.1f} s after the kill\n{describe(everyone)}")

    produced = producer.finish()
    wait_drained(everyone, produced)
    for m in (first, joiner):
        m.terminate()
    check_after_kill(everyone, produced, victim)
    check_no_overlap(everyone)


# --- broker restart --------------------------------------------------------------------------


def consumer_conf(bootstrap: str, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100}


def consume(consumer: Consumer, count: int, timeout: float = 30.0
            ) -> list[tuple[int, int, str]]:
    """Exactly ``count`` messages (one at a time, so no more are taken), failing on errors."""
    got: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} messages"
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            assert err.code() == KafkaError._PARTITION_EOF, err
            continue
        got.append((msg.partition(), msg.offset(), msg.value().decode()))
    return got


def next_offsets(messages: list[tuple[int, int, str]]) -> dict[int, int]:
    nxt: dict[int, int] = {}
    for p, o, _ in messages:
        nxt[p] = max(nxt.get(p, 0), o + 1)
    return nxt


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic`` through the AdminClient (OffsetFetch)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=15)
    result = futures[group].result(timeout=20)
    return {tp.partition: tp.offset for tp in result.topic_partitions
            if tp.topic == topic and tp.offset >= 0}


def test_committed_offsets_survive_broker_restart(broker_process: BrokerProcess) -> None:
    bootstrap = broker_process.bootstrap_servers
    topic, group = unique("orders"), unique("group")
    create_topic(bootstrap, topic, 3)
    produced = produce(bootstrap, topic, 90)

    consumer = Consumer(consumer_conf(bootstrap, group))
    consumer.subscribe([topic])
    first = consume(consumer, 40)
    commit = next_offsets(first)
    done = consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in commit.items()],
                           asynchronous=False)
    assert all(tp.error is None for tp in done), done
    consumer.close()
    ends = next_offsets([(p, o, v) for (p, o), v in produced.items()])
    assert any(0 < commit.get(p, 0) < end for p, end in ends.items()), (
        f"no partition partly consumed: committed {commit}, ends {ends}")
    assert committed_offsets(bootstrap, group, topic) == commit

    assert broker_process.stop() == 0, broker_process.log.read_text()
    broker_process.start()

    assert committed_offsets(bootstrap, group, topic) == commit
    consumer = Consumer(consumer_conf(bootstrap, group))
    try:
        consumer.subscribe([topic])
        rest = consume(consumer, len(produced) - len(first))
        assert consumer.poll(1.0) is None, "more messages than were left"
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == commit
    by_partition: dict[int, list[int]] = defaultdict(list)
    for p, o, _ in rest:
        by_partition[p].append(o)
    for p, offsets in by_partition.items():
        assert offsets[0] == commit.get(p, 0), (
            f"partition {p} resumed at {offsets[0]}, committed {commit.get(p)}")
    seen = [(p, o) for p, o, _ in first + rest]
    assert sorted(seen) == sorted(produced), "not every message exactly once across the restart"
    assert all(produced[(p, o)] == v for p, o, v in first + rest)


def test_live_group_continues_across_broker_restart(
    broker_process: BrokerProcess, members: Callable
) -> None:
    """Members keep running while the broker restarts (well within their session timeout):
    the group, its members and its offsets come back from __consumer_offsets, so the members
    carry on in their generation (heartbeats accepted past a whole session timeout, no
    rebalance), and every message is still processed exactly once."""
    bootstrap = broker_process.bootstrap_servers
    topic, group = unique("orders"), unique("group")
    create_topic(bootstrap, topic)
    everyone = []
    for _ in range(2):
        everyone.append(members(CLIENT, bootstrap, group, topic, "range",
                                session_ms=RESTART_SESSION_MS))
        wait_settled(everyone, everyone)
    produced = produce(bootstrap, topic, 600)
    wait_drained(everyone, produced)
    before = {m.name: len(m.output().events) for m in everyone}

    assert broker_process.stop() == 0, broker_process.log.read_text()
    broker_process.start()
    producer = PacedProducer(bootstrap, topic, 600, RESTART_SESSION_MS / 1000 + 2, first=600)
    producer.start()
    produced |= producer.finish()
    wait_drained(everyone, produced)
    for m in everyone:
        changes = events_since(m, before[m.name], "assigned", "revoked", "lost")
        assert not changes, (f"{m.name} rebalanced after the broker restarted: {changes}\n"
                             f"{describe(everyone)}")
    for m in everyone:
        m.terminate()
    check_exactly_once(everyone, produced)
    check_no_overlap(everyone)
