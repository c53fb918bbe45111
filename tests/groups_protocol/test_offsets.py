"""Committed offsets and group administration over TCP: OffsetCommit, OffsetFetch (v1-v9),
ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, checked against Kafka's group
coordinator."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import samsa

from .conftest import (
    Client,
    ErrorCode,
    Member,
    clients,
    described,
    form_group,
    join_all,
    subscription,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

E = ErrorCode
Connect = Callable[..., Client]


@pytest.fixture
def c(connect: Connect) -> Client:
    """A connection with topics t (3 partitions) and u (1 partition)."""
    client = connect("admin")
    client.create_topic("t", 3)
    client.create_topic("u", 1)
    return client


def stable_group(connect: Connect, group: str, n: int = 1, topics: tuple[str, ...] = ("t",),
                 **kwargs: object) -> list[Member]:
    protocols = [[("range", subscription(*topics))]] * n
    return form_group(clients(connect, n, group), group, protocols=protocols, **kwargs)


# --- OffsetCommit ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 5, 6, 7, 8, 9])
def test_standalone_commit_to_a_group_without_members(c: Client, version):
    codes = c.commit("solo", {("t", 0): 10, ("t", 2): 12, ("u", 0): 3}, version=version)
    assert codes == {("t", 0): E.none, ("t", 2): E.none, ("u", 0): E.none}
    got = c.fetch_offsets("solo", {"t": [0, 1, 2], "u": [0]})
    assert {tp: p.committed_offset for tp, p in got.items()} == {
        ("t", 0): 10, ("t", 1): -1, ("t", 2): 12, ("u", 0): 3
    }
    assert all(p.error_code == E.none for p in got.values())
    # Again, overwriting; the group stays Empty.
    assert c.commit("solo", {("t", 0): 11}, version=version) == {("t", 0): E.none}
    assert c.committed("solo", "t", 0) == 11
    group = described(c, "solo")
    assert (group.group_state, group.members) == ("Empty", ())


def test_standalone_commit_to_a_group_that_emptied(c: Client, connect: Connect):
    (m,) = stable_group(connect, "g")
    assert m.client.leave("g", m.member_id) == E.none
    assert c.commit("g", {("t", 0): 5}) == {("t", 0): E.none}
    assert c.committed("g", "t", 0) == 5


def test_commit_by_members(c: Client, connect: Connect):
    a, b = stable_group(connect, "g", 2)
    assert a.client.commit("g", {("t", 0): 1}, generation=a.generation,
                           member_id=a.member_id) == {("t", 0): E.none}
    # A standalone commit to an active group: no such member.
    assert c.commit("g", {("t", 1): 1}) == {("t", 1): E.unknown_member_id}
    assert c.commit("g", {("t", 1): 1}, generation=-1, member_id=a.member_id) == {
        ("t", 1): E.illegal_generation
    }
    for generation in (a.generation - 1, a.generation + 1):
        assert a.client.commit("g", {("t", 1): 1}, generation=generation,
                               member_id=a.member_id) == {("t", 1): E.illegal_generation}
    assert c.commit("g", {("t", 1): 1}, generation=a.generation, member_id="ghost") == {
        ("t", 1): E.unknown_member_id
    }
    assert c.committed("g", "t", 1) == -1
    assert c.committed("g", "t", 0) == 1



def rebalance(connect: Connect, c: Client, members: list[Member]) -> int:
    """A new member joins; the group goes to PreparingRebalance, then everyone rejoins and the
    group waits in CompletingRebalance. Returns the new generation."""
    newcomer = connect("late")
    meta = [("range", subscription("t"))]
    first = newcomer.join("g", protocols=meta)
    newcomer.send_join("g", first.member_id, protocols=meta)
    wait_for(lambda: described(c, "g").group_state == "PreparingRebalance")
    for m in members:
        m.client.send_join("g", m.member_id, protocols=meta)
    generations = {m.client.recv().generation_id for m in members} | {
        newcomer.recv().generation_id
    }
    assert len(generations) == 1
    assert described(c, "g").group_state == "CompletingRebalance"
    return generations.pop()


def test_commit_while_preparing_rebalance(c: Client, connect: Connect):
    """The current generation may still commit while the group prepares a rebalance."""
    a, b = stable_group(connect, "g", 2)
    newcomer = connect("late")
    first = newcomer.join("g", protocols=[("range", subscription("t"))])
    newcomer.send_join("g", first.member_id, protocols=[("range", subscription("t"))])
    wait_for(lambda: described(c, "g").group_state == "PreparingRebalance")
    assert a.client.commit("g", {("t", 2): 2}, generation=a.generation,
                           member_id=a.member_id) == {("t", 2): E.none}
    assert c.committed("g", "t", 2) == 2


def test_commit_while_completing_rebalance(c: Client, connect: Connect):
    a, b = stable_group(connect, "g", 2)
    generation = rebalance(connect, c, [a, b])
    assert generation == a.generation + 1
    assert a.client.commit("g", {("t", 2): 3}, generation=generation,
                           member_id=a.member_id) == {("t", 2): E.rebalance_in_progress}
    # Kafka checks the member and the generation before the state: an old generation is
    # ILLEGAL_GENERATION even now.
    assert a.client.commit("g", {("t", 2): 3}, generation=a.generation,
                           member_id=a.member_id) == {("t", 2): E.illegal_generation}
    assert c.committed("g", "t", 2) == -1


def test_commit_with_the_generation_before_a_rebalance(c: Client, connect: Connect):
    a, b = stable_group(connect, "g", 2)
    generation = rebalance(connect, c, [a, b])
    leader = a if a.is_leader else b
    assert leader.client.sync("g", generation, leader.member_id).error_code == E.none
    assert a.client.commit("g", {("t", 0): 8}, generation=a.generation,
                           member_id=a.member_id) == {("t", 0): E.illegal_generation}
    assert a.client.commit("g", {("t", 0): 9}, generation=generation,
                           member_id=a.member_id) == {("t", 0): E.none}
    assert c.committed("g", "t", 0) == 9


@pytest.mark.parametrize("version", [2, 8, 9])
def test_commit_with_a_generation_to_an_unknown_group(c: Client, version):
    """Kafka: ILLEGAL_GENERATION before OffsetCommit v9, GROUP_ID_NOT_FOUND from v9."""
    codes = c.commit("absent", {("t", 0): 1}, generation=3, member_id="m", version=version)
    expected = E.group_id_not_found if version >= 9 else E.illegal_generation
    assert codes == {("t", 0): expected}
    assert c.committed("absent", "t", 0) == -1


def test_commit_unknown_topic_or_partition_fails_alone(c: Client):
    codes = c.commit("g", {("t", 0): 7, ("t", 3): 8, ("nope", 0): 9, ("u", 0): 10})
    assert codes == {("t", 0): E.none, ("t", 3): E.unknown_topic_or_partition,
                     ("nope", 0): E.unknown_topic_or_partition, ("u", 0): E.none}
    got = c.fetch_offsets("g", {"t": [0, 3], "nope": [0], "u": [0]})
    assert {tp: p.committed_offset for tp, p in got.items()} == {
        ("t", 0): 7, ("t", 3): -1, ("nope", 0): -1, ("u", 0): 10
    }


def test_commit_metadata_too_large(broker_factory, connect: Connect):
    b = broker_factory(offset_metadata_max_bytes=16)
    c = connect(to=b)
    c.create_topic("t", 3)
    codes = c.commit("g", {("t", 0): (1, "x" * 16, -1), ("t", 1): (2, "y" * 17, -1),
                           ("t", 2): (3, None, -1)})
    assert codes == {("t", 0): E.none, ("t", 1): E.offset_metadata_too_large,
                     ("t", 2): E.none}
    got = c.fetch_offsets("g", {"t": [0, 1, 2]})
    assert [(got[("t", p)].committed_offset, got[("t", p)].metadata) for p in range(3)] == [
        (1, "x" * 16), (-1, ""), (3, "")
    ]


def test_commit_with_an_empty_group_id(c: Client):
    """Kafka accepts offset commits and fetches for the empty group id (backward
    compatibility)."""
    assert c.commit("", {("t", 0): 4}) == {("t", 0): E.none}
    assert c.committed("", "t", 0) == 4


# --- OffsetFetch ----------------------------------------------------------------------------


COMMITTED = {("t", 0): (100, "first", 3), ("t", 2): (200, "", 5), ("u", 0): (300, None, -1)}


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_round_trip(c: Client, version):
    assert set(c.commit("g", COMMITTED, version=9).values()) == {E.none}
    got = c.fetch_offsets("g", {"t": [0, 1, 2], "u": [0]}, version=version)
    with_epoch = version >= 5
    expected = {
        ("t", 0): (100, "first", 3 if with_epoch else None),
        ("t", 1): (-1, "", -1 if with_epoch else None),
        ("t", 2): (200, "", 5 if with_epoch else None),
        ("u", 0): (300, "", -1 if with_epoch else None),
    }
    assert {
        tp: (p.committed_offset, p.metadata,
             p.committed_leader_epoch if with_epoch else None)
        for tp, p in got.items()
    } == expected
    assert all(p.error_code == E.none for p in got.values())


@pytest.mark.parametrize("version", [2, 5, 6])
def test_commit_without_leader_epoch_fetches_minus_one(c: Client, version):
    """OffsetCommit before v6 carries no leader epoch: the fetched epoch is -1."""
    assert c.commit("g", {("t", 0): (9, "m", 7)}, version=version) == {("t", 0): E.none}
    p = c.fetch_offsets("g", {"t": [0]}, version=9)[("t", 0)]
    assert (p.committed_offset, p.metadata, p.committed_leader_epoch) == (
        9, "m", 7 if version >= 6 else -1
    )


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_fetch_all_topics(c: Client, version):
    assert set(c.commit("g", COMMITTED).values()) == {E.none}
    got = c.fetch_offsets("g", None, version=version)
    assert {tp: p.committed_offset for tp, p in got.items()} == {
        ("t", 0): 100, ("t", 2): 200, ("u", 0): 300
    }
    assert c.fetch_offsets("absent", None, version=version) == {}


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_many_groups(c: Client, version):
    assert set(c.commit("g1", {("t", 0): 1, ("u", 0): 2}).values()) == {E.none}
    assert set(c.commit("g2", {("t", 1): (3, "meta", 4)}).values()) == {E.none}
    response = c.fetch_offsets_groups(
        {"g1": None, "g2": {"t": [1, 2]}, "absent": {"u": [0]}}, version=version)
    by_group = {
        g.group_id: (g.error_code, {(t.name, p.partition_index):
                                    (p.committed_offset, p.metadata, p.committed_leader_epoch)
                                    for t in g.topics for p in t.partitions})
        for g in response.groups
    }
    assert by_group == {
        "g1": (E.none, {("t", 0): (1, "", -1), ("u", 0): (2, "", -1)}),
        "g2": (E.none, {("t", 1): (3, "meta", 4), ("t", 2): (-1, "", -1)}),
        "absent": (E.none, {("u", 0): (-1, "", -1)}),
    }


@pytest.mark.parametrize("version", [1, 3, 5, 7, 8, 9])
def test_offset_fetch_unknown_group(c: Client, version):
    got = c.fetch_offsets("absent", {"t": [0, 1], "nope": [0]}, version=version)
    assert {tp: (p.committed_offset, p.metadata, p.error_code) for tp, p in got.items()} == {
        ("t", 0): (-1, "", E.none), ("t", 1): (-1, "", E.none), ("nope", 0): (-1, "", E.none)
    }


# --- ListGroups / DescribeGroups --------------------------------------------------------------


def test_list_groups(c: Client, connect: Connect):
    stable_group(connect, "active")
    assert c.commit("offsets-only", {("t", 0): 1}) == {("t", 0): E.none}
    for version in range(0, 6):
        listed = {g.group_id: g for g in c.list_groups(version=version)}
        assert set(listed) == {"active", "offsets-only"}
        assert listed["active"].protocol_type == "consumer"
        assert listed["offsets-only"].protocol_type == ""
        if version >= 4:
            assert listed["active"].group_state == "Stable"
            assert listed["offsets-only"].group_state == "Empty"
        if version >= 5:
            assert listed["active"].group_type == "classic"
    for version in (4, 5):
        assert [g.group_id for g in c.list_groups(["Stable"], version=version)] == ["active"]
        assert [g.group_id for g in c.list_groups(["Empty"], version=version)] == [
            "offsets-only"
        ]
        assert {g.group_id for g in c.list_groups(["Empty", "Stable"], version=version)} == {
            "active", "offsets-only"
        }
        assert list(c.list_groups(["PreparingRebalance"], version=version)) == []
    assert {g.group_id for g in c.list_groups(types=["classic"])} == {"active", "offsets-only"}
    assert list(c.list_groups(types=["consumer"])) == []


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5])
def test_describe_groups(c: Client, connect: Connect, version):
    metas = [subscription("t"), subscription("t", "u")]
    members = form_group([connect("client-a"), connect("client-b")], "g",
                         protocols=[[("range", metas[0])], [("range", metas[1])]])
    assert c.commit("offsets-only", {("t", 0): 1}) == {("t", 0): E.none}
    groups = {g.group_id: g for g in c.describe("g", "offsets-only", "absent", version=version)}

    g = groups["g"]
    assert g.error_code == E.none
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert {
        (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
        for m in g.members
    } == {
        (members[0].member_id, "client-a", "/127.0.0.1", metas[0], members[0].assignment),
        (members[1].member_id, "client-b", "/127.0.0.1", metas[1], members[1].assignment),
    }
    if version >= 4:
        assert {m.group_instance_id for m in g.members} == {None}

    empty = groups["offsets-only"]
    assert (empty.error_code, empty.group_state, empty.protocol_type, empty.members) == (
        E.none, "Empty", "", ()
    )
    absent = groups["absent"]
    assert (absent.error_code, absent.group_state, absent.members) == (E.none, "Dead", ())


def test_describe_group_during_a_rebalance_has_no_protocol_or_metadata(connect: Connect):
    """Kafka reports the protocol and each member's metadata only for a Stable group."""
    members = join_all(clients(connect, 2), "g")
    g = described(members[0].client, "g")
    assert g.group_state == "CompletingRebalance"
    assert g.protocol_type == "consumer"
    assert g.protocol_data == ""
    assert {m.member_id for m in g.members} == {m.member_id for m in members}
    assert {m.member_metadata for m in g.members} == {b""}


# --- DeleteGroups -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_groups(c: Client, connect: Connect, version):
    (active,) = stable_group(connect, "active")
    assert c.commit("emptied", {("t", 0): 5, ("u", 0): 6}) == {("t", 0): E.none, ("u", 0): E.none}
    assert active.client.commit("active", {("t", 1): 7}, generation=active.generation,
                                member_id=active.member_id) == {("t", 1): E.none}
    codes = c.delete_groups("active", "emptied", "absent", version=version)
    assert codes == {"active": E.non_empty_group, "emptied": E.none,
                     "absent": E.group_id_not_found}
    assert c.fetch_offsets("emptied", None) == {}
    assert c.committed("emptied", "t", 0) == -1
    assert described(c, "emptied").group_state == "Dead"
    assert "emptied" not in {g.group_id for g in c.list_groups()}
    assert c.delete_groups("emptied", version=version) == {"emptied": E.group_id_not_found}
    # The active group is untouched.
    assert active.heartbeat() == E.none
    assert c.committed("active", "t", 1) == 7

    # Once its last member leaves, it can go too.
    assert active.client.leave("active", active.member_id) == E.none
    assert c.delete_groups("active", version=version) == {"active": E.none}
    assert c.committed("active", "t", 1) == -1
    # The group id can be used again from scratch.
    assert c.join_new("active").generation_id == 1


# --- OffsetDelete ---------------------------------------------------------------------------


def test_offset_delete(c: Client, connect: Connect):
    (member,) = stable_group(connect, "g", topics=("t",))
    assert member.client.commit("g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3},
                                generation=member.generation, member_id=member.member_id
                                ) == {("t", 0): E.none, ("t", 1): E.none, ("u", 0): E.none}
    r = c.offset_delete("g", {"t": [0], "u": [0]})
    assert r.error_code == E.none
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions
            } == {("t", 0): E.group_subscribed_to_topic, ("u", 0): E.none}
    got = c.fetch_offsets("g", None)
    assert {tp: p.committed_offset for tp, p in got.items()} == {("t", 0): 1, ("t", 1): 2}

    # An empty group: anything goes.
    assert c.commit("empty", {("t", 0): 4, ("t", 1): 5}) == {("t", 0): E.none, ("t", 1): E.none}
    r = c.offset_delete("empty", {"t": [0, 2]})
    assert r.error_code == E.none
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions
            } == {("t", 0): E.none, ("t", 2): E.none}
    assert {tp: p.committed_offset for tp, p in c.fetch_offsets("empty", None).items()} == {
        ("t", 1): 5
    }

    assert c.offset_delete("absent", {"t": [0]}).error_code == E.group_id_not_found


def test_offset_delete_active_group_of_another_protocol_type(c: Client, connect: Connect):
    (m,) = form_group([connect("connect")], "worker", protocol_type="connect",
                      protocols=[[("default", b"opaque")]])
    assert m.client.commit("worker", {("t", 0): 1}, generation=m.generation,
                           member_id=m.member_id) == {("t", 0): E.none}
    r = c.offset_delete("worker", {"t": [0]})
    assert (r.error_code, r.topics) == (E.non_empty_group, ())
    assert c.committed("worker", "t", 0) == 1


def test_offset_delete_unknown_topic(c: Client):
    assert c.commit("g", {("t", 0): 1}) == {("t", 0): E.none}
    r = c.offset_delete("g", {"nope": [0], "t": [0]})
    assert r.error_code == E.none
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions
            } == {("nope", 0): E.unknown_topic_or_partition, ("t", 0): E.none}


def test_broker_keys_reach_the_coordinator(broker: samsa.Broker):
    """The fixture's override (short sessions allowed) is in force."""
    assert broker.server.group_coordinator is not None
    assert broker.server.group_coordinator.min_session_ms == 100
