"""Consumer groups of KIP-848's protocol with confluent-kafka (librdkafka) members
(``group.protocol=consumer``): the broker assigns (``uniform``, ``range``), members join and
leave under load with every message processed once, a crashed member's partitions move once
its session ends, a static member that restarts gets its partitions back without a rebalance,
a regex subscription picks up a topic created later, the admin client lists and describes
the group, and rolling upgrades from (and downgrades to) the classic protocol under load."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

import samsa

from .conftest import (
    PARTITIONS,
    Member,
    PacedProducer,
    check_after_kill,
    check_exactly_once,
    check_no_overlap,
    create_topic,
    describe,
    events_since,
    join_leave_scenario,
    unique,
    wait_drained,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.timeout(120)

CLIENT = "confluent"
SESSION_MS = 6000
# The broker side of the protocol: a short session (so a crashed member's partitions move in
# seconds) and a one second heartbeat.
CONSUMER_GROUPS = {
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": SESSION_MS,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 1000,
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data", CONSUMER_GROUPS, num_partitions=PARTITIONS) as b:
        yield b


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_join_and_leave_exactly_once(broker: samsa.Broker, members: Callable,
                                     assignor: str) -> None:
    join_leave_scenario(CLIENT, broker.bootstrap_servers, members, assignor,
                        group_protocol="consumer")


def test_a_crashed_members_partitions_move_when_its_session_ends(
        broker: samsa.Broker, members: Callable) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("crash")
    create_topic(bootstrap, topic)
    a = members(CLIENT, bootstrap, group, topic, "uniform", group_protocol="consumer")
    b = members(CLIENT, bootstrap, group, topic, "uniform", group_protocol="consumer")
    everyone = [a, b]
    wait_settled([a, b], everyone)
    producer = PacedProducer(bootstrap, topic, 2000, 5.0)
    producer.start()
    wait_for(lambda: b.output().messages, 20, "b to process messages",
             details=lambda: describe(everyone))
    b.kill()
    # until b's session ends its partitions stay b's; then a owns them all
    wait_for(lambda: a.output().owned == set(range(PARTITIONS)), SESSION_MS / 1000 + 20,
             "a to own every partition", details=lambda: describe(everyone))
    produced = producer.finish()
    wait_drained(everyone, produced)
    a.terminate()
    check_after_kill(everyone, produced, b)
    check_no_overlap(everyone)


def test_a_static_member_restarts_with_its_partitions(broker: samsa.Broker,
                                                       members: Callable) -> None:
    """A static member (group.instance.id) that closes leaves with epoch -2; restarted within
    its session it gets its partitions back, and the other member sees no change."""
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("static")
    create_topic(bootstrap, topic)

    def start(instance: str, name: str) -> Member:
        return members(CLIENT, bootstrap, group, topic, "uniform", instance_id=instance,
                       name=name, group_protocol="consumer")

    a, b = start("A", "a"), start("B", "b")
    everyone = [a, b]
    settled = wait_settled([a, b], everyone)
    mark = len(a.output().events)
    b.terminate()
    b2 = start("B", "b2")
    everyone.append(b2)
    again = wait_settled([a, b2], everyone)
    assert again["b2"] == settled["b"], describe(everyone)
    assert again["a"] == settled["a"]
    assert not events_since(a, mark, "assigned", "revoked", "lost"), describe(everyone)
    producer = PacedProducer(bootstrap, topic, 600, 2.0)
    producer.start()
    produced = producer.finish()
    wait_drained(everyone, produced)
    for m in (a, b2):
        m.terminate()
    check_exactly_once(everyone, produced)
    check_no_overlap(everyone)


def test_a_regex_subscription_picks_up_a_new_topic(broker: samsa.Broker) -> None:
    bootstrap = broker.bootstrap_servers
    prefix = unique("re")
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topic(bootstrap, first, 2)
    group_id = unique("regex")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
    producer = Producer({"bootstrap.servers": bootstrap})
    seen: set[tuple[str, str]] = set()

    def consumed(topic: str) -> bool:
        producer.produce(topic, b"x")
        producer.flush(10)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.add((msg.topic(), msg.value().decode()))
        return any(t == topic for t, _ in seen)

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        wait_for(lambda: consumed(first), 30, f"a message of {first}")
        create_topic(bootstrap, later, 1)
        wait_for(lambda: consumed(later), 45, f"a message of {later}, created later")
        coordinator = broker.server.group_coordinator
        assert coordinator is not None
        group = coordinator.consumer_groups[group_id]
        assert set().union(*(r.topics for r in group.regexes.values())) == {first, later}
    finally:
        consumer.close()


def test_the_admin_client_lists_and_describes_the_group(broker: samsa.Broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("described")
    create_topic(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "group.remote.assignor": "range",
                         "client.id": "the-client"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: (consumer.poll(0.2), len(consumer.assignment()) == PARTITIONS)[1],
                 30, "the consumer's assignment")
        listed = admin.list_consumer_groups(request_timeout=10).result()
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1
        assert mine[0].type == ConsumerGroupType.CONSUMER
        assert mine[0].state == ConsumerGroupState.STABLE
        described = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        (member,) = described.members
        assert member.client_id == "the-client"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == list(
            range(PARTITIONS))
    finally:
        consumer.close()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_rolling_upgrade_from_the_classic_protocol(broker: samsa.Broker, members: Callable,
                                                     assignor: str) -> None:
    """KIP-848's online upgrade: a classic group (librdkafka members, eager or cooperative)
    gets members of the consumer protocol one at a time while the classic ones leave; the
    group becomes a consumer group at the first, keeps working with both kinds in it, and
    every message is processed once by a single owner at a time."""
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("rolling")
    create_topic(bootstrap, topic)
    old = [members(CLIENT, bootstrap, group, topic, assignor) for _ in range(2)]
    everyone = list(old)
    wait_settled(old, everyone)
    producer = PacedProducer(bootstrap, topic, 3000, 8.0)
    producer.start()
    coordinator = broker.server.group_coordinator
    assert coordinator is not None
    new = []
    for i, leaving in enumerate(old):
        member = members(CLIENT, bootstrap, group, topic, "uniform", group_protocol="consumer")
        new.append(member)
        everyone.append(member)
        wait_settled([*old[i:], *new], everyone)
        assert group in coordinator.consumer_groups, describe(everyone)
        leaving.terminate()
        wait_settled([*old[i + 1:], *new], everyone)
    produced = producer.finish()
    wait_drained(everyone, produced)
    for member in new:
        member.terminate()
    check_exactly_once(everyone, produced)
    check_no_overlap(everyone)


def test_a_rolling_downgrade_to_the_classic_protocol(broker: samsa.Broker,
                                                     members: Callable) -> None:
    """The way back: classic members join a consumer group (as classic members of it) while
    the consumer protocol's leave; when the last of those leaves, the group is a classic group
    again, and nothing was processed twice or by two owners at once."""
    bootstrap = broker.bootstrap_servers
    topic, group = unique("orders"), unique("downgrade")
    create_topic(bootstrap, topic)
    new = [members(CLIENT, bootstrap, group, topic, "uniform", group_protocol="consumer")
           for _ in range(2)]
    everyone = list(new)
    wait_settled(new, everyone)
    producer = PacedProducer(bootstrap, topic, 3000, 8.0)
    producer.start()
    coordinator = broker.server.group_coordinator
    assert coordinator is not None
    old = []
    for i, leaving in enumerate(new):
        member = members(CLIENT, bootstrap, group, topic, "cooperative-sticky")
        old.append(member)
        everyone.append(member)
        wait_settled([*new[i:], *old], everyone)
        leaving.terminate()
        wait_settled([*new[i + 1:], *old], everyone)
    assert group not in coordinator.consumer_groups, describe(everyone)
    assert len(coordinator.groups[group].members) == len(old)
    produced = producer.finish()
    wait_drained(everyone, produced)
    for member in old:
        member.terminate()
    check_exactly_once(everyone, produced)
    check_no_overlap(everyone)
