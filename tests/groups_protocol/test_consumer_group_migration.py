"""Classic and consumer groups converted online (KIP-848's migration,
``group.consumer.migration.policy``), over TCP: a classic group of consumers becomes a consumer
group when a member of the consumer protocol joins it, its classic members go on through
JoinGroup, SyncGroup and Heartbeat as members of the consumer group, and the group becomes a
classic group again when the last member of the consumer protocol leaves. Offsets survive both
ways; a policy that forbids a direction keeps the group as it is."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import Client, ErrorCode, Member, join_all

pytestmark = pytest.mark.timeout(60)

E = ErrorCode
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
Connect = Callable[..., Client]


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1: topics, no user data, the partitions owned."""
    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    out = struct.pack(">hi", 1, len(topics)) + b"".join(string(t) for t in topics)
    out += struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for topic, ps in owned.items():
        out += string(topic) + struct.pack(">i", len(ps)) + b"".join(
            struct.pack(">i", p) for p in ps)
    return out


def assignment(parts: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 1, len(parts))
    for topic, ps in parts.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def partitions_of(data: bytes) -> set[int]:
    """The partitions of topic t in a ConsumerProtocolAssignment."""
    pos = 2
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    found: set[int] = set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2 + n
        (k,) = struct.unpack_from(">i", data, pos)
        pos += 4
        found |= set(struct.unpack_from(f">{k}i", data, pos))
        pos += 4 * k
    return found


def heartbeat(client: Client, member: str, epoch: int,
              owned: list[dict[str, Any]] | None = None) -> Any:
    return client.request(CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "mig", "member_id": member, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": ["t"] if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else owned,
    })


def classic_group(connect: Connect) -> list[Member]:
    """A Stable classic group "mig" of two members owning t's partitions 0,1 and 2,3."""
    clients = [connect(f"classic-{i}") for i in range(2)]
    members = join_all(clients, "mig", protocols=[[("range", subscription(["t"]))]] * 2)
    given = {m.member_id: assignment({"t": [0, 1] if i == 0 else [2, 3]})
             for i, m in enumerate(members)}
    leader = next(m for m in members if m.is_leader)
    for m in sorted(members, key=lambda m: m.is_leader):
        m.client.send_sync("mig", m.generation, m.member_id, given if m is leader else None)
    for m in sorted(members, key=lambda m: m.is_leader):
        synced = m.client.recv()
        assert synced.error_code == E.none, synced
        m.assignment = synced.assignment
    return members


def rejoin(member: Member) -> set[int]:
    """The classic member rejoins (owning what it has) and syncs until the group has nothing
    more for it to do; what it owns then."""
    owned = partitions_of(member.assignment) if member.assignment else set()
    for _ in range(6):
        joined = member.client.join("mig", member.member_id, protocols=[
            ("range", subscription(["t"], {"t": sorted(owned)}))])
        assert joined.error_code == E.none, joined
        member.generation = joined.generation_id
        synced = member.client.sync("mig", joined.generation_id, member.member_id,
                                    protocol_name="range")
        assert synced.error_code == E.none, synced
        member.assignment = synced.assignment
        owned = partitions_of(synced.assignment)
        if member.heartbeat() == E.none:
            return owned
    raise AssertionError(f"{member.member_id} was still asked to rejoin")


def test_a_classic_group_upgrades_and_downgrades(connect: Connect) -> None:
    admin = connect("admin")
    admin.create_topic("t", 4)
    a, b = classic_group(connect)
    assert [partitions_of(a.assignment), partitions_of(b.assignment)] == [{0, 1}, {2, 3}]
    assert admin.commit("mig", {("t", 0): 7}, generation=a.generation,
                        member_id=a.member_id) == {("t", 0): E.none}
    generation = a.generation

    # a member of the consumer protocol joins: the group becomes a consumer group
    joined = heartbeat(admin, "n1", 0)
    assert joined.error_code == E.none, joined
    assert joined.member_epoch == generation + 1
    assert {g.group_id: g.group_type for g in admin.list_groups()} == {"mig": "consumer"}
    (described,) = admin.request(CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": ["mig"], "include_authorized_operations": False}).groups
    assert {m.member_id: m.member_type for m in described.members} == {
        a.member_id: 0, b.member_id: 0, "n1": 1}
    assert admin.committed("mig", "t", 0) == 7
    # the classic members are told to rejoin, and give up what moves to n1
    assert a.heartbeat() == E.rebalance_in_progress
    owned_a, owned_b = rejoin(a), rejoin(b)
    taken = heartbeat(admin, "n1", joined.member_epoch, [])
    n1 = {p for tp in (taken.assignment.topic_partitions if taken.assignment else ())
          for p in tp.partitions}
    assert sorted([*owned_a, *owned_b, *n1]) == [0, 1, 2, 3], (owned_a, owned_b, n1)
    assert all(len(s) >= 1 for s in (owned_a, owned_b, n1))
    # a classic member commits with its generation (its member epoch), OffsetCommit v8
    assert admin.commit("mig", {("t", 1): 9}, generation=a.generation,
                        member_id=a.member_id, version=8) == {("t", 1): E.none}
    assert admin.commit("mig", {("t", 1): 9}, generation=a.generation - 1,
                        member_id=a.member_id, version=8) == {("t", 1): E.illegal_generation}

    # the last member of the consumer protocol leaves: the group is classic again
    assert heartbeat(admin, "n1", -1).error_code == E.none
    assert {g.group_id: g.group_type for g in admin.list_groups()} == {"mig": "classic"}
    assert a.heartbeat() == E.rebalance_in_progress  # a classic rebalance
    for m in (a, b):
        m.client.send_join("mig", m.member_id, protocols=[("range", subscription(["t"]))])
    rejoined = [m.client.recv() for m in (a, b)]
    assert [r.error_code for r in rejoined] == [E.none, E.none], rejoined
    assert {r.member_id for r in rejoined} == {a.member_id, b.member_id}
    assert rejoined[0].generation_id > generation
    assert admin.committed("mig", "t", 0) == 7 and admin.committed("mig", "t", 1) == 9


def test_the_policy_decides_which_way_a_group_may_go(
        connect: Connect, broker_factory: Callable[..., Any]) -> None:
    broker = broker_factory(group_consumer_migration_policy="downgrade")
    admin = connect("admin", to=broker)
    admin.create_topic("t", 4)
    classic_group(lambda name: connect(name, to=broker))
    refused = heartbeat(admin, "n1", 0)
    assert (refused.error_code, refused.error_message) == (
        E.group_id_not_found, "Group mig is not a consumer group.")

    only_up = broker_factory(group_consumer_migration_policy="upgrade")
    admin = connect("admin", to=only_up)
    admin.create_topic("t", 4)
    a, _ = classic_group(lambda name: connect(name, to=only_up))
    assert heartbeat(admin, "n1", 0).error_code == E.none
    rejoin(a)
    assert heartbeat(admin, "n1", -1).error_code == E.none
    # no downgrade: a consumer group of classic members stays one
    assert {g.group_id: g.group_type for g in admin.list_groups()} == {"mig": "consumer"}
