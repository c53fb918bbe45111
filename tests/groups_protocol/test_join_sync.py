"""The classic group membership protocol over TCP: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
and static membership (group.instance.id), checked against Kafka's group coordinator."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import samsa

from .conftest import (
    Client,
    ErrorCode,
    Member,
    assignment,
    clients,
    described,
    form_group,
    join_all,
    subscription,
    sync_all,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

E = ErrorCode
Connect = Callable[..., Client]


@pytest.fixture
def delayed(broker_factory: Callable[..., samsa.Broker]) -> samsa.Broker:
    """A broker whose empty groups wait 200 ms for more members: static members (which get no
    MEMBER_ID_REQUIRED round trip) then land in one generation."""
    return broker_factory(group_initial_rebalance_delay_ms=200)


def leader_of(members: list[Member]) -> Member:
    return next(m for m in members if m.is_leader)


def follower_of(members: list[Member]) -> Member:
    return next(m for m in members if not m.is_leader)


def start_joining(client: Client, group: str, **kwargs: object) -> str:
    """A new member takes its member id (v9) and sends the JoinGroup that completes only with
    the join phase; returns the member id."""
    first = client.join(group, **kwargs)
    assert first.error_code == E.member_id_required, first
    client.send_join(group, first.member_id, **kwargs)
    return first.member_id


def state_is(client: Client, group: str, state: str) -> Callable[[], bool]:
    return lambda: described(client, group).group_state == state


# --- JoinGroup ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 5, 7, 9])
def test_join_v4_plus_without_member_id_gets_member_id_required(connect: Connect, version):
    c = connect("cid")
    c.create_topic("t")
    meta = subscription("t")
    first = c.join("g", version=version, protocols=[("range", meta)])
    assert first.error_code == E.member_id_required
    assert first.member_id.startswith("cid-")
    assert first.generation_id == -1
    assert first.members == ()

    r = c.join("g", first.member_id, version=version, protocols=[("range", meta)])
    assert r.error_code == E.none
    assert r.member_id == first.member_id
    assert r.generation_id == 1
    assert r.leader == r.member_id
    assert r.protocol_name == "range"
    if version >= 7:
        assert r.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, meta)]

    # The member id handed out is accepted by every later request.
    member_id = r.member_id
    synced = c.sync("g", 1, member_id, {member_id: b"mine"})
    assert (synced.error_code, synced.assignment) == (E.none, b"mine")
    assert c.heartbeat("g", 1, member_id) == E.none
    assert c.commit("g", {("t", 0): 3}, generation=1, member_id=member_id) == {("t", 0): E.none}
    left = c.leave_members("g", [(member_id, None)])
    assert [m.error_code for m in left.members] == [E.none]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_join_before_v4_without_member_id_joins_directly(connect: Connect, version):
    c = connect("old")
    r = c.join("g", version=version)
    assert r.error_code == E.none
    assert r.member_id.startswith("old-")
    assert r.generation_id == 1
    assert r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id]
    assert c.heartbeat("g", 1, r.member_id, version=0) == E.none


def test_join_session_timeout_outside_the_bounds(broker_factory, connect: Connect):
    b = broker_factory(group_min_session_timeout_ms=1000, group_max_session_timeout_ms=5000)
    c = connect(to=b)
    for version in (3, 9):
        for session in (999, 5001):
            r = c.join("g", version=version, session_ms=session)
            assert r.error_code == E.invalid_session_timeout, (version, session)
    assert described(c, "g").group_state == "Dead"  # nothing was created
    for session in (1000, 5000):
        assert c.join_new(f"g{session}", session_ms=session).error_code == E.none


@pytest.mark.parametrize("version", [3, 9])
def test_join_empty_group_id(connect: Connect, version):
    assert connect().join("", version=version).error_code == E.invalid_group_id


def test_sync_heartbeat_leave_empty_group_id(connect: Connect):
    """Kafka answers INVALID_GROUP_ID to every membership API with an empty group id."""
    c = connect()
    assert c.sync("", 1, "m").error_code == E.invalid_group_id
    assert c.heartbeat("", 1, "m") == E.invalid_group_id
    assert c.leave("", "m") == E.invalid_group_id


def test_inconsistent_protocols_are_rejected(connect: Connect):
    (a,) = form_group([connect("a")], "g", protocols=[[("range", b"a"), ("sticky", b"a")]])
    b = connect("b")
    for version in (3, 9):
        other_type = b.join("g", version=version, protocol_type="connect",
                            protocols=[("range", b"b")])
        assert other_type.error_code == E.inconsistent_group_protocol
        nothing_common = b.join("g", version=version,
                                protocols=[("roundrobin", b"b"), ("cooperative", b"b")])
        assert nothing_common.error_code == E.inconsistent_group_protocol
    assert b.join("g", version=3, protocols=[]).error_code == E.inconsistent_group_protocol
    assert a.heartbeat() == E.none  # the group is untouched
    assert [m.member_id for m in described(a.client, "g").members] == [a.member_id]


def test_first_member_needs_a_protocol_type_and_protocols(connect: Connect):
    """An empty group accepts only a member with a protocol type and at least one protocol."""
    c = connect()
    assert c.join("g", version=3, protocols=[]).error_code == E.inconsistent_group_protocol
    no_type = c.join("g2", version=3, protocol_type="", protocols=[("range", b"")])
    assert no_type.error_code == E.inconsistent_group_protocol


def test_concurrent_joins_share_one_generation(broker_factory, connect: Connect):
    b = broker_factory(group_initial_rebalance_delay_ms=300)
    one, two = connect("one", to=b), connect("two", to=b)
    meta_one, meta_two = subscription("t"), subscription("t", "u")
    id_one = start_joining(one, "g", protocols=[("range", meta_one)])
    id_two = start_joining(two, "g", protocols=[("range", meta_two)])
    r1, r2 = one.recv(), two.recv()
    assert (r1.error_code, r2.error_code) == (E.none, E.none)
    assert (r1.member_id, r2.member_id) == (id_one, id_two)
    assert r1.generation_id == r2.generation_id == 1
    assert r1.leader == r2.leader
    assert r1.leader in (id_one, id_two)
    assert r1.protocol_name == r2.protocol_name == "range"
    leader, follower = (r1, r2) if r1.leader == id_one else (r2, r1)
    assert {(m.member_id, m.group_instance_id, m.metadata) for m in leader.members} == {
        (id_one, None, meta_one), (id_two, None, meta_two)
    }
    assert follower.members == ()


def test_new_member_rebalances_a_stable_group(connect: Connect):
    (a,) = form_group([connect("a")], "g")
    b = connect("b")
    b_id = start_joining(b, "g")
    wait_for(state_is(a.client, "g", "PreparingRebalance"), what="PreparingRebalance")
    assert a.heartbeat() == E.rebalance_in_progress
    ra = a.client.join("g", a.member_id)
    rb = b.recv()
    assert ra.generation_id == rb.generation_id == a.generation + 1
    assert ra.leader == rb.leader == a.member_id  # the leader that rejoined stays leader
    assert {m.member_id for m in ra.members} == {a.member_id, b_id}
    assert rb.members == ()


def test_protocol_is_chosen_by_vote_among_common_protocols(connect: Connect):
    def prefs(names: list[str], i: int) -> list[tuple[str, bytes]]:
        return [(n, f"{n}-{i}".encode()) for n in names]

    members = join_all(clients(connect, 3, "vote"), "g", protocols=[
        prefs(["range", "roundrobin", "sticky"], 0),
        prefs(["roundrobin", "range"], 1),
        prefs(["roundrobin", "cooperative", "range"], 2),
    ])
    assert {m.protocol for m in members} == {"roundrobin"}
    leader = leader_of(members)
    by_id = {m.member_id: m.metadata for m in leader.join_members}
    assert by_id == {m.member_id: f"roundrobin-{i}".encode() for i, m in enumerate(members)}

    # Everyone's first choice is not supported by all: the common one wins.
    members = join_all(clients(connect, 3, "vote2"), "g2", protocols=[
        prefs(["sticky", "range"], 0), prefs(["sticky", "range"], 1), prefs(["range"], 2),
    ])
    assert {m.protocol for m in members} == {"range"}


def test_join_with_an_unknown_member_id(connect: Connect):
    c = connect()
    for version in (3, 9):
        assert c.join("absent", "ghost", version=version).error_code == E.unknown_member_id
    assert described(c, "absent").group_state == "Dead"
    form_group([c], "g")
    d = connect()
    for version in (3, 9):
        r = d.join("g", "ghost", version=version)
        assert r.error_code == E.unknown_member_id
        assert r.member_id == "ghost"


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(connect: Connect):
    a, b = form_group(clients(connect, 2), "g", rebalance_ms=1000)
    c = connect("late")
    start = time.monotonic()
    c_id = start_joining(c, "g", rebalance_ms=1000)
    assert a.heartbeat() == E.rebalance_in_progress
    a.client.send_join("g", a.member_id, rebalance_ms=1000)
    # b neither heartbeats nor rejoins.
    ra, rc = a.client.recv(), c.recv()
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 5, elapsed
    assert (ra.error_code, rc.error_code) == (E.none, E.none)
    assert ra.generation_id == rc.generation_id == a.generation + 1
    leader = ra if ra.leader == a.member_id else rc
    assert ra.leader == rc.leader and ra.leader in (a.member_id, c_id)
    assert {m.member_id for m in leader.members} == {a.member_id, c_id}
    assert b.heartbeat() == E.unknown_member_id

    survivors = [Member(a.client, "g", a.member_id, ra.generation_id, ra.leader, "range", []),
                 Member(c, "g", c_id, rc.generation_id, rc.leader, "range", [])]
    sync_all(survivors)
    group = described(a.client, "g")
    assert group.group_state == "Stable"
    assert {m.member_id for m in group.members} == {a.member_id, c_id}


def test_static_member_that_does_not_rejoin_stays_in_the_group(delayed, connect: Connect):
    """Kafka removes only dynamic members that missed the join phase; a static member stays
    until its session times out."""
    dynamic, static = form_group([connect("d", to=delayed), connect("s", to=delayed)], "g",
                                 instance_ids=[None, "static-1"], rebalance_ms=1000)
    newcomer = connect("n", to=delayed)
    n_id = start_joining(newcomer, "g", rebalance_ms=1000)
    dynamic.client.send_join("g", dynamic.member_id, rebalance_ms=1000)
    rd, rn = dynamic.client.recv(), newcomer.recv()
    assert rd.generation_id == rn.generation_id == dynamic.generation + 1
    leader = rd if rd.leader == rd.member_id else rn
    assert {m.member_id for m in leader.members} == {dynamic.member_id, n_id, static.member_id}


def test_initial_rebalance_delay(broker_factory, connect: Connect):
    # 1.5 s: the second member must arrive within it although it is sent 0.2 s after the
    # first, also on a loaded machine
    delay_s = 1.5
    b = broker_factory(group_initial_rebalance_delay_ms=int(delay_s * 1000))
    first, second = connect("first", to=b), connect("second", to=b)
    start = time.monotonic()
    r = first.join("alone", version=3)
    elapsed = time.monotonic() - start
    assert r.error_code == E.none
    assert delay_s - 0.01 <= elapsed < delay_s + 3.0, elapsed

    # A member that arrives during the delay lands in the same first generation.
    start = time.monotonic()
    first.send_join("pair", version=3)
    time.sleep(0.2)
    second.send_join("pair", version=3)
    r1, r2 = first.recv(), second.recv()
    elapsed = time.monotonic() - start
    assert r1.generation_id == r2.generation_id == 1
    assert delay_s - 0.01 <= elapsed < 2 * delay_s + 3.0, elapsed
    leader = r1 if r1.leader == r1.member_id else r2
    assert {m.member_id for m in leader.members} == {r1.member_id, r2.member_id}

    # Only an empty group's first rebalance waits.
    members = [Member(first, "pair", r1.member_id, 1, r1.leader, "range", []),
               Member(second, "pair", r2.member_id, 1, r2.leader, "range", [])]
    sync_all(members)
    start = time.monotonic()
    for m in members:
        m.client.send_join("pair", m.member_id, version=3, protocols=[("range", b"changed")])
    assert [m.client.recv().generation_id for m in members] == [2, 2]
    assert time.monotonic() - start < delay_s - 0.05


def test_group_max_size(broker_factory, connect: Connect):
    b = broker_factory(group_max_size=1)
    form_group([connect(to=b)], "g")
    c = connect(to=b)
    assert c.join("g", version=3).error_code == E.group_max_size_reached
    assert c.join_new("g", version=9).error_code == E.group_max_size_reached


def test_rejoin_in_a_stable_group(connect: Connect):
    """A follower rejoining with unchanged metadata gets the current generation at once; the
    leader rejoining starts a rebalance."""
    members = form_group(clients(connect, 2), "g")
    leader, follower = leader_of(members), follower_of(members)
    r = follower.client.join("g", follower.member_id, timeout=3)
    assert (r.error_code, r.generation_id, r.leader) == (E.none, follower.generation,
                                                          leader.member_id)
    assert leader.heartbeat() == E.none
    leader.client.send_join("g", leader.member_id)
    wait_for(state_is(follower.client, "g", "PreparingRebalance"), what="PreparingRebalance")
    assert follower.heartbeat() == E.rebalance_in_progress
    follower.client.send_join("g", follower.member_id)
    assert leader.client.recv().generation_id == follower.client.recv().generation_id == 2


def test_member_id_required_does_not_disturb_a_stable_group(connect: Connect):
    (a,) = form_group([connect("a")], "g")
    b = connect("b")
    first = b.join("g")
    assert first.error_code == E.member_id_required
    assert a.heartbeat() == E.none
    assert described(a.client, "g").group_state == "Stable"
    b.send_join("g", first.member_id)
    wait_for(lambda: a.heartbeat() == E.rebalance_in_progress, what="the rebalance")


def test_pending_member_expires_after_its_session_timeout(connect: Connect):
    """A member id handed out with MEMBER_ID_REQUIRED that never rejoins holds up a join phase
    only for that member's session timeout (Kafka's pending member expiration)."""
    (a,) = form_group([connect("a")], "g", rebalance_ms=20_000)
    ghost = connect("ghost")
    assert ghost.join("g", session_ms=500).error_code == E.member_id_required
    start = time.monotonic()
    r = a.client.join("g", a.member_id, rebalance_ms=20_000, timeout=6)  # leader: rebalance
    assert r.error_code == E.none
    assert time.monotonic() - start < 5
    assert [m.member_id for m in r.members] == [a.member_id]


def test_pending_member_can_leave(connect: Connect):
    """LeaveGroup with a pending member id removes it (NONE), and the join phase stops
    waiting for it."""
    (a,) = form_group([connect("a")], "g", rebalance_ms=20_000)
    ghost = connect("ghost")
    pending = ghost.join("g")
    assert pending.error_code == E.member_id_required
    a.client.send_join("g", a.member_id, rebalance_ms=20_000)
    wait_for(state_is(ghost, "g", "PreparingRebalance"), what="PreparingRebalance")
    left = ghost.leave_members("g", [(pending.member_id, None)])
    assert [m.error_code for m in left.members] == [E.none]
    r = a.client.recv(timeout=5)
    assert r.error_code == E.none
    assert r.generation_id == a.generation + 1


# --- SyncGroup ------------------------------------------------------------------------------


def test_followers_wait_for_the_leader_then_get_their_own_assignment(connect: Connect):
    members = join_all(clients(connect, 3), "g")
    leader = leader_of(members)
    followers = [m for m in members if not m.is_leader]
    for f in followers:
        f.client.send_sync("g", f.generation, f.member_id)
    assert all(f.client.silent(0.3) for f in followers), "a follower's sync returned early"
    assert described(leader.client, "g").group_state == "CompletingRebalance"

    given = {leader.member_id: assignment({"t": [0]}),
             followers[0].member_id: assignment({"t": [1, 2]})}  # followers[1]: nothing
    r = leader.client.sync("g", leader.generation, leader.member_id, given)
    assert (r.error_code, r.assignment) == (E.none, given[leader.member_id])
    assert (r.protocol_type, r.protocol_name) == ("consumer", "range")
    r0, r1 = followers[0].client.recv(), followers[1].client.recv()
    assert (r0.error_code, r0.assignment) == (E.none, given[followers[0].member_id])
    assert (r1.error_code, r1.assignment) == (E.none, b"")
    group = described(leader.client, "g")
    assert group.group_state == "Stable"
    assert {m.member_id: m.member_assignment for m in group.members} == {
        leader.member_id: given[leader.member_id],
        followers[0].member_id: given[followers[0].member_id],
        followers[1].member_id: b"",
    }
    # Once Stable, SyncGroup answers the current assignment at once.
    again = followers[0].client.sync("g", followers[0].generation, followers[0].member_id)
    assert again.assignment == given[followers[0].member_id]


@pytest.mark.parametrize("version", [0, 3, 5])
def test_sync_illegal_generation_and_unknown_member(connect: Connect, version):
    a, b = form_group(clients(connect, 2), "g")
    for generation in (a.generation + 1, a.generation - 1):
        r = a.client.sync("g", generation, a.member_id, version=version)
        assert r.error_code == E.illegal_generation
    assert a.client.sync("g", a.generation, "ghost", version=version).error_code == (
        E.unknown_member_id
    )
    assert a.client.sync("absent", 1, "ghost", version=version).error_code == (
        E.unknown_member_id
    )
    assert heartbeats_ok(a, b)


def heartbeats_ok(*members: Member) -> bool:
    return all(m.heartbeat() == E.none for m in members)


def test_sync_v5_protocol_type_and_name_must_match(connect: Connect):
    (a,) = form_group([connect()], "g")
    r = a.client.sync("g", a.generation, a.member_id, protocol_type="connect")
    assert r.error_code == E.inconsistent_group_protocol
    r = a.client.sync("g", a.generation, a.member_id, protocol_name="roundrobin")
    assert r.error_code == E.inconsistent_group_protocol
    r = a.client.sync("g", a.generation, a.member_id, protocol_type=None, protocol_name=None)
    assert r.error_code == E.none
    r = a.client.sync("g", a.generation, a.member_id)
    assert (r.error_code, r.protocol_type, r.protocol_name) == (E.none, "consumer", "range")


def test_sync_during_preparing_rebalance(connect: Connect):
    a, b = form_group(clients(connect, 2), "g")
    start_joining(connect("c"), "g")
    wait_for(state_is(a.client, "g", "PreparingRebalance"), what="PreparingRebalance")
    for m in (a, b):
        assert m.client.sync("g", m.generation, m.member_id).error_code == (
            E.rebalance_in_progress
        )


def test_waiting_sync_is_answered_when_a_rebalance_starts(connect: Connect):
    members = join_all(clients(connect, 2), "g")
    follower = follower_of(members)
    follower.client.send_sync("g", follower.generation, follower.member_id)
    assert follower.client.silent(0.2)
    start_joining(connect("c"), "g")
    r = follower.client.recv(timeout=5)
    assert r.error_code == E.rebalance_in_progress


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout(connect: Connect):
    """Kafka expects every member's SyncGroup within the rebalance timeout after the join
    phase; those that send none are removed and the group rebalances."""
    members = join_all(clients(connect, 2), "g", session_ms=10_000, rebalance_ms=1000)
    leader, silent = leader_of(members), follower_of(members)
    start = time.monotonic()
    assert leader.client.sync("g", leader.generation, leader.member_id).error_code == E.none
    codes = []
    while time.monotonic() - start < 4:
        codes.append(leader.heartbeat())
        if codes[-1] != E.none:
            break
        time.sleep(0.1)
    assert codes[-1] == E.rebalance_in_progress, codes
    assert [m.member_id for m in described(leader.client, "g").members] == [leader.member_id]
    assert silent.heartbeat() == E.unknown_member_id


# --- Heartbeat ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2, 4])
def test_heartbeat_errors(connect: Connect, version):
    a, b = form_group(clients(connect, 2), "g")
    assert a.heartbeat(version) == E.none
    assert a.client.heartbeat("g", a.generation + 1, a.member_id, version=version) == (
        E.illegal_generation
    )
    assert a.client.heartbeat("g", a.generation - 1, a.member_id, version=version) == (
        E.illegal_generation
    )
    assert a.client.heartbeat("g", a.generation, "ghost", version=version) == (
        E.unknown_member_id
    )
    assert a.client.heartbeat("absent", 1, "ghost", version=version) == E.unknown_member_id
    start_joining(connect("c"), "g")
    wait_for(state_is(a.client, "g", "PreparingRebalance"), what="PreparingRebalance")
    assert a.heartbeat(version) == E.rebalance_in_progress
    assert b.heartbeat(version) == E.rebalance_in_progress


def test_heartbeat_while_completing_rebalance(connect: Connect):
    members = join_all(clients(connect, 2), "g")
    assert described(members[0].client, "g").group_state == "CompletingRebalance"
    assert [m.heartbeat() for m in members] == [E.none, E.none]


def test_session_expiry_removes_the_silent_member(connect: Connect):
    # a heartbeats every 0.1 s: a session of 2 s keeps it alive on a loaded machine (at 0.5 s
    # a stall had expired a as well as b)
    session_ms = 2000
    a, b = form_group(clients(connect, 2), "g", session_ms=session_ms)
    start = time.monotonic()
    codes = []
    while time.monotonic() - start < 5 * session_ms / 1000:
        code = a.heartbeat()
        codes.append(code)
        if code != E.none:
            break
        time.sleep(0.1)
    assert codes[-1] == E.rebalance_in_progress, codes
    assert time.monotonic() - start >= 0.8 * session_ms / 1000
    group = described(a.client, "g")
    assert [m.member_id for m in group.members] == [a.member_id]
    assert b.heartbeat() == E.unknown_member_id
    r = a.client.join("g", a.member_id, session_ms=500)
    assert (r.generation_id, [m.member_id for m in r.members]) == (
        a.generation + 1, [a.member_id]
    )


# --- LeaveGroup -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_single_member(connect: Connect, version):
    a, b = form_group(clients(connect, 2), "g")
    assert b.client.leave("g", b.member_id, version=version) == E.none
    assert a.heartbeat() == E.rebalance_in_progress
    r = a.client.join("g", a.member_id)
    assert r.generation_id == a.generation + 1
    assert (r.leader, [m.member_id for m in r.members]) == (a.member_id, [a.member_id])
    assert a.client.sync("g", r.generation_id, a.member_id, {a.member_id: b"x"}).error_code == (
        E.none
    )
    assert a.client.leave("g", "ghost", version=version) == E.unknown_member_id
    assert a.client.leave("absent", "ghost", version=version) == E.unknown_member_id
    assert a.client.leave("g", a.member_id, version=version) == E.none
    group = described(a.client, "g")
    assert (group.group_state, group.members) == ("Empty", ())
    assert a.client.heartbeat("g", r.generation_id, a.member_id) == E.unknown_member_id


@pytest.mark.parametrize("version", [3, 4, 5])
def test_leave_group_batch(delayed, connect: Connect, version):
    members = form_group([connect(f"m{i}", to=delayed) for i in range(4)], "g",
                         instance_ids=[None, "inst-b", "inst-c", None])
    a, b, c, d = members
    identities = [
        (a.member_id, None),  # dynamic, by member id
        ("", "inst-b"),  # static, by instance id alone (an administrator's removal)
        ("ghost", None),
        ("", "inst-unknown"),
        ("wrong-id", "inst-c"),  # the instance id belongs to another member id
    ]
    r = c.client.leave_members("g", identities, version=version)
    assert r.error_code == E.none
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        (a.member_id, None, E.none),
        ("", "inst-b", E.none),
        ("ghost", None, E.unknown_member_id),
        ("", "inst-unknown", E.unknown_member_id),
        ("wrong-id", "inst-c", E.fenced_instance_id),
    ]
    assert c.heartbeat() == E.rebalance_in_progress
    assert {m.member_id for m in described(c.client, "g").members} == {c.member_id, d.member_id}
    c.client.send_join("g", c.member_id, instance_id="inst-c")
    d.client.send_join("g", d.member_id)
    rc, rd = c.client.recv(), d.client.recv()
    assert rc.generation_id == rd.generation_id == c.generation + 1

    both = c.client.leave_members("g", [(c.member_id, "inst-c"), (d.member_id, None)],
                                  version=version)
    assert [m.error_code for m in both.members] == [E.none, E.none]
    group = described(c.client, "g")
    assert (group.group_state, group.members) == ("Empty", ())


# --- static membership ------------------------------------------------------------------------


def test_static_member_restart_replaces_the_old_member_id(delayed, connect: Connect):
    members = form_group([connect("a", to=delayed), connect("b", to=delayed)], "g",
                         instance_ids=["inst-a", "inst-b"], version=9)
    members[0].client.create_topic("t")
    stays, old = leader_of(members), follower_of(members)

    restarted = connect("b2", to=delayed)
    r = restarted.join("g", instance_id=old.instance_id)
    assert r.error_code == E.none
    new_id = r.member_id
    assert new_id and new_id != old.member_id
    assert r.generation_id == old.generation
    assert (r.protocol_name, r.leader) == ("range", stays.member_id)
    assert r.members == ()

    # No rebalance for the others.
    for _ in range(5):
        assert stays.heartbeat() == E.none
        time.sleep(0.1)
    group = described(stays.client, "g")
    assert group.group_state == "Stable"
    assert {(m.member_id, m.group_instance_id) for m in group.members} == {
        (stays.member_id, "inst-a"), (new_id, "inst-b")
    }

    # The old member id is fenced wherever it shows up with its instance id.
    inst = old.instance_id
    assert old.heartbeat() == E.fenced_instance_id
    assert old.client.sync("g", old.generation, old.member_id, instance_id=inst).error_code == (
        E.fenced_instance_id
    )
    committed = old.client.commit("g", {("t", 0): 1}, generation=old.generation,
                                  member_id=old.member_id, instance_id=inst)
    assert committed == {("t", 0): E.fenced_instance_id}
    rejoin = old.client.join("g", old.member_id, instance_id=inst)
    assert rejoin.error_code == E.fenced_instance_id

    # The new member id carries on with the old member's assignment.
    new = restarted.sync("g", r.generation_id, new_id, instance_id=inst)
    assert (new.error_code, new.assignment) == (E.none, old.assignment)
    assert restarted.heartbeat("g", r.generation_id, new_id, instance_id=inst) == E.none
    assert restarted.commit("g", {("t", 0): 1}, generation=r.generation_id, member_id=new_id,
                            instance_id=inst) == {("t", 0): E.none}


def test_static_leader_restart_skips_assignment_v9(delayed, connect: Connect):
    """JoinGroup v9: a restarted static leader of a Stable group is told it leads (with the
    member list) and to skip the assignment."""
    members = form_group([connect("a", to=delayed), connect("b", to=delayed)], "g",
                         instance_ids=["inst-a", "inst-b"])
    leader = leader_of(members)
    r = connect("a2", to=delayed).join("g", instance_id=leader.instance_id, version=9)
    assert r.error_code == E.none
    assert r.leader == r.member_id
    assert r.skip_assignment is True
    assert {m.group_instance_id for m in r.members} == {"inst-a", "inst-b"}
    assert r.member_id in {m.member_id for m in r.members}
    assert follower_of(members).heartbeat() == E.none


def test_static_leader_restart_before_v9_keeps_the_old_leader_id(delayed, connect: Connect):
    """Before JoinGroup v9 a restarted static leader of a Stable group gets the old leader id
    and no members, so it does not run an assignment the Stable group would ignore."""
    members = form_group([connect("a", to=delayed), connect("b", to=delayed)], "g",
                         instance_ids=["inst-a", "inst-b"], version=5)
    leader = leader_of(members)
    r = connect("a2", to=delayed).join("g", instance_id=leader.instance_id, version=5)
    assert r.error_code == E.none
    assert r.member_id != leader.member_id
    assert r.leader == leader.member_id
    assert r.members == ()
    assert follower_of(members).heartbeat() == E.none
