"""KIP-848's consumer groups over TCP, request by request: ConsumerGroupHeartbeat (v0 and v1)
with Kafka's answers to bad input (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
GROUP_ID_NOT_FOUND), ConsumerGroupDescribe, ListGroups and DescribeGroups of both kinds of
groups, and offsets committed and fetched with member epochs (STALE_MEMBER_EPOCH)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import Client, ErrorCode, form_group

pytestmark = pytest.mark.timeout(60)

E = ErrorCode
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS = 8, 9, 15
Connect = Callable[..., Client]


@pytest.fixture
def c(connect: Connect) -> Client:
    client = connect("admin")
    client.create_topic("t", 4)
    return client


def heartbeat(client: Client, group: str, member_id: str, epoch: int, *, version: int = 1,
              topics: list[str] | None = None, regex: str | None = None,
              owned: list[dict[str, Any]] | None = None, instance: str | None = None,
              assignor: str | None = None, rebalance_ms: int = -1) -> Any:
    if epoch == 0:
        owned = [] if owned is None else owned
        rebalance_ms = 30_000 if rebalance_ms == -1 else rebalance_ms
        if topics is None and regex is None:
            topics = ["t"]
    return client.request(CONSUMER_GROUP_HEARTBEAT, version, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch,
        "instance_id": instance, "rack_id": None, "rebalance_timeout": rebalance_ms,
        "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
        "server_assignor": assignor, "topic_partitions": owned,
    })


def owned(response: Any) -> list[dict[str, Any]]:
    """A heartbeat's assignment as the topic_partitions of the next heartbeat."""
    return [{"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
            for tp in response.assignment.topic_partitions]


def describe(client: Client, *groups: str, operations: bool = False) -> list[Any]:
    return list(client.request(CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": list(groups), "include_authorized_operations": operations}).groups)


def test_a_member_joins_heartbeats_and_leaves(c: Client) -> None:
    joined = heartbeat(c, "g", "m1", 0)
    assert joined.error_code == E.none
    assert (joined.member_id, joined.member_epoch) == ("m1", 1)
    assert joined.heartbeat_interval.total_seconds() == 5
    (tp,) = joined.assignment.topic_partitions
    assert sorted(tp.partitions) == [0, 1, 2, 3]
    topic_id = c.request(3, 12, {"topics": [{"name": "t", "topic_id": None}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False}
                         ).topics[0].topic_id
    assert tp.topic_id == topic_id
    again = heartbeat(c, "g", "m1", 1)
    assert (again.error_code, again.member_epoch, again.assignment) == (E.none, 1, None)
    left = heartbeat(c, "g", "m1", -1)
    assert (left.error_code, left.member_epoch) == (E.none, -1)
    assert heartbeat(c, "g", "m1", 1).error_code == E.unknown_member_id


def test_v0_gives_the_member_its_id(c: Client) -> None:
    joined = heartbeat(c, "g", "", 0, version=0)
    assert joined.error_code == E.none
    assert uuid.UUID(joined.member_id)
    refused = heartbeat(c, "g", "", 0, version=1)
    assert refused.error_code == E.invalid_request
    assert refused.error_message == "MemberId can't be empty."


@pytest.mark.parametrize(("fields", "code"), [
    ({"assignor": "sticky"}, E.unsupported_assignor),
    ({"topics": None, "regex": "t[" }, E.invalid_regular_expression),
    ({"rebalance_ms": -1, "epoch": 0, "owned": [{"topic_id": uuid.uuid4(), "partitions": [0]}]},
     E.invalid_request),
    ({"epoch": 5}, E.group_id_not_found),
    ({"epoch": -2}, E.invalid_request),
])
def test_bad_heartbeats_get_kafkas_errors(c: Client, fields: dict[str, Any],
                                          code: ErrorCode) -> None:
    epoch = fields.pop("epoch", 0)
    response = heartbeat(c, "bad", "m1", epoch, **fields)
    assert response.error_code == code, response
    assert response.member_id is None and response.assignment is None
    assert not c.list_groups()


def test_epochs_instances_and_the_group_kind_are_checked(c: Client, connect: Connect) -> None:
    heartbeat(c, "g", "m1", 0)
    assert heartbeat(c, "g", "m1", 7).error_code == E.fenced_member_epoch
    assert heartbeat(c, "g", "nobody", 1).error_code == E.unknown_member_id
    heartbeat(c, "g", "s1", 0, instance="A")
    taken = heartbeat(c, "g", "s2", 0, instance="A")
    assert taken.error_code == E.unreleased_instance_id
    assert heartbeat(c, "g", "s2", 2, instance="A").error_code == E.fenced_instance_id
    # a classic group whose members' assignments are not the consumer protocol's cannot
    # become a consumer group
    form_group([connect("classic")], "classic")
    refused = heartbeat(c, "classic", "m1", 0)
    assert refused.error_code == E.group_id_not_found
    assert refused.error_message == ("Cannot upgrade the classic group classic to consumer group"
                                     " because the embedded consumer protocol is malformed.")


def test_without_migration_groups_change_kind_only_while_empty(
        connect: Connect, broker_factory: Callable[..., Any]) -> None:
    broker = broker_factory(group_consumer_migration_policy="disabled")
    c = connect("admin", to=broker)
    c.create_topic("t", 4)
    heartbeat(c, "g", "m1", 0)
    classic = connect("classic", to=broker)
    refused = classic.join_new("g")
    assert refused.error_code == E.inconsistent_group_protocol
    c.commit("g", {("t", 0): 5}, generation=1, member_id="m1")
    heartbeat(c, "g", "m1", -1)
    (member,) = form_group([classic], "g")  # the empty consumer group becomes a classic one
    assert {g.group_id: g.group_type for g in c.list_groups()} == {"g": "classic"}
    assert c.committed("g", "t", 0) == 5
    not_consumer = heartbeat(c, "g", "m2", 0)
    assert (not_consumer.error_code, not_consumer.error_message) == (
        E.group_id_not_found, "Group g is not a consumer group.")
    member.client.leave("g", member.member_id)
    assert heartbeat(c, "g", "m2", 0).error_code == E.none
    assert {g.group_id: g.group_type for g in c.list_groups()} == {"g": "consumer"}
    assert c.committed("g", "t", 0) == 5


def test_partitions_move_only_once_revoked(c: Client) -> None:
    a = heartbeat(c, "g", "a", 0)
    b = heartbeat(c, "g", "b", 0)
    assert b.member_epoch == 2 and b.assignment.topic_partitions == ()
    revoke = heartbeat(c, "g", "a", 1, owned=owned(a))
    assert revoke.member_epoch == 1
    kept = owned(revoke)
    assert len(kept[0]["partitions"]) == 2
    assert heartbeat(c, "g", "b", 2, owned=[]).assignment is None
    assert heartbeat(c, "g", "a", 1, owned=kept).member_epoch == 2
    got = heartbeat(c, "g", "b", 2, owned=[])
    assert sorted(got.assignment.topic_partitions[0].partitions) == sorted(
        set(range(4)) - set(kept[0]["partitions"]))


def test_consumer_group_describe(c: Client) -> None:
    joined = heartbeat(c, "g", "m1", 0, assignor="range", instance="i1")
    heartbeat(c, "g", "m1", 1, owned=owned(joined), instance="i1")
    c.create_topic("u", 1)
    (group,) = describe(c, "g", operations=True)
    assert group.error_code == E.none
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 1, 1)
    assert group.assignor_name == "range"
    assert group.authorized_operations != -(2**31)
    (member,) = group.members
    assert (member.member_id, member.instance_id, member.member_epoch) == ("m1", "i1", 1)
    assert member.client_id == "raw" or member.client_id == "admin"
    assert member.client_host == "/127.0.0.1"
    assert member.subscribed_topic_names == ("t",)
    assert member.member_type == 1
    (tp,) = member.assignment.topic_partitions
    assert (tp.topic_name, sorted(tp.partitions)) == ("t", [0, 1, 2, 3])
    assert member.target_assignment == member.assignment
    missing, = describe(c, "nope")
    assert missing.error_code == E.group_id_not_found
    assert missing.error_message == "Group nope not found."


def test_both_kinds_of_groups_are_listed_and_described(c: Client, connect: Connect) -> None:
    heartbeat(c, "new", "m1", 0)
    form_group([connect("classic")], "old")
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state)
              for g in c.list_groups()}
    assert listed == {"new": ("consumer", "consumer", "Stable"),
                      "old": ("classic", "consumer", "Stable")}
    assert [g.group_id for g in c.list_groups(types=["consumer"])] == ["new"]
    assert [g.group_id for g in c.list_groups(types=["Classic"])] == ["old"]
    assert [g.group_id for g in c.list_groups(states=["stable"], types=["consumer"])] == ["new"]
    assert c.list_groups(types=["share"]) == ()
    # DescribeGroups is the classic protocol's: v6 says a consumer group is not one
    (v6,) = c.describe("new", version=6)
    assert (v6.error_code, v6.group_state) == (E.group_id_not_found, "Dead")
    assert v6.error_message == "Group new is not a classic group."
    (v5,) = c.describe("new", version=5)
    assert (v5.error_code, v5.group_state) == (E.none, "Dead")
    (classic,) = describe(c, "old")
    assert classic.error_code == E.group_id_not_found
    assert classic.error_message == "Group old is not a consumer group."


def test_offsets_are_committed_and_fetched_with_member_epochs(c: Client) -> None:
    joined = heartbeat(c, "g", "m1", 0)
    assert joined.member_epoch == 1
    stale = c.commit("g", {("t", 0): 10}, generation=0, member_id="m1")
    assert stale == {("t", 0): E.stale_member_epoch}
    assert c.commit("g", {("t", 0): 10}, generation=1, member_id="x") == {
        ("t", 0): E.unknown_member_id}
    assert c.commit("g", {("t", 0): 10}, generation=1, member_id="m1", version=8) == {
        ("t", 0): E.unsupported_version}
    assert c.commit("g", {("t", 0): 10}, generation=1, member_id="m1") == {("t", 0): E.none}

    def fetch(member_id: str | None, epoch: int) -> Any:
        (group,) = c.request(OFFSET_FETCH, 9, {"groups": [{
            "group_id": "g", "member_id": member_id, "member_epoch": epoch,
            "topics": [{"name": "t", "partition_indexes": [0]}]}],
            "require_stable": True}).groups
        return group

    ok = fetch("m1", 1)
    assert ok.error_code == E.none and ok.topics[0].partitions[0].committed_offset == 10
    assert fetch("m1", 0).error_code == E.stale_member_epoch
    assert fetch("x", 1).error_code == E.unknown_member_id
    assert fetch(None, -1).error_code == E.none
    # the group empties: DeleteGroups takes it and its offsets
    assert c.delete_groups("g") == {"g": E.non_empty_group}
    heartbeat(c, "g", "m1", -1)
    assert c.delete_groups("g") == {"g": E.none}
    assert c.list_groups() == ()
