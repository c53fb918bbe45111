"""Consumer groups with confluent-kafka (librdkafka) members: joins and a leave under load
(eager range and roundrobin), cooperative-sticky incremental rebalancing, static membership."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import samsa

from .conftest import (
    SESSION_MS,
    Member,
    PacedProducer,
    assignment_settled,
    check_after_kill,
    check_exactly_once,
    check_no_overlap,
    cooperative_scenario,
    create_topic,
    describe,
    events_since,
    join_leave_scenario,
    unique,
    wait_drained,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.timeout(90)

CLIENT = "confluent"


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_join_and_leave_exactly_once(broker: samsa.Broker, members: Callable, assignor: str
                                     ) -> None:
    join_leave_scenario(CLIENT, broker.bootstrap_servers, members, assignor)


def test_cooperative_sticky_revokes_only_moved_partitions(broker: samsa.Broker,
                                                         members: Callable) -> None:
    cooperative_scenario(CLIENT, broker.bootstrap_servers, members)


@pytest.mark.parametrize("victim_index", [0, 1], ids=["leader", "follower"])
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_static_member_restart_gets_its_partitions_back_without_rebalance(
    broker: samsa.Broker, members: Callable, how: str, victim_index: int
) -> None:
    """KIP-345: a static member (group.instance.id) that restarts within its session timeout
    gets its partitions back and the others see no rebalance. librdkafka's static member
    does not send LeaveGroup on close, so SIGTERM and SIGKILL differ only in the uncommitted
    tail a killed member leaves behind. The first member to join is the group's leader (and
    stays it while it is there): the restarted one is the leader or not."""
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("static")
    create_topic(bootstrap, topic)

    def start(index: int, name: str | None = None) -> Member:
        return members(CLIENT, bootstrap, group, topic, "range",
                       instance_id=f"instance-{index}", name=name)

    everyone = []
    for i in range(3):
        everyone.append(start(i))
        settled = wait_settled(everyone, everyone)
    producer = PacedProducer(bootstrap, topic, 2000, 5.0)
    producer.start()
    wait_for(lambda: all(m.output().messages for m in everyone), 10, "every member to process")
    victim = everyone[victim_index]
    others = [m for m in everyone if m is not victim]
    before = {m.name: len(m.output().events) for m in others}

    if how == "sigterm":
        victim.terminate()
    else:
        victim.kill()
    restarted_at = time.monotonic()
    again = start(victim_index, name=f"{victim.name}-again")
    everyone.append(again)
    wait_for(lambda: again.output().owned, SESSION_MS / 1000, "the restarted member's assignment",
             details=lambda: describe(everyone))
    took = time.monotonic() - restarted_at
    assert again.output().owned == settled[victim.name], describe(everyone)
    # Three heartbeat intervals: a rebalance would have reached the others by now.
    time.sleep(3)
    assert not [e for e in again.output().events if e.kind in ("revoked", "lost")], (
        describe(everyone))
    for m in others:
        changes = events_since(m, before[m.name], "assigned", "revoked", "lost")
        assert not changes, (f"{m.name} took part in a rebalance when a static member restarted "
                             f"({took:.1f} s to rejoin): {changes}\n{describe(everyone)}")
    assert assignment_settled([*others, again]) is not None, describe(everyone)

    produced = producer.finish()
    wait_drained(everyone, produced)
    for m in [*others, again]:
        m.terminate()
    if how == "sigterm":
        check_exactly_once(everyone, produced)
    else:
        check_after_kill(everyone, produced, victim)
    check_no_overlap(everyone)
