"""Consumer groups (KIP-848) in the group coordinator on its own: an in-memory PartitionWriter
and a topic store in a temporary directory, no broker, no socket. Member epochs, the target
assignment and reconciliation (partitions revoked before another member gets them), the
errors Kafka answers, leaving, static members, fencing on timeouts, regex subscriptions,
offsets with member epochs, and a coordinator loading what another one wrote."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from samsa.cluster.topics import TopicStore
from samsa.config import BrokerConfig, ConfigError
from samsa.coordinator.consumer_group import ConsumerGroupState, MemberState
from samsa.coordinator.consumer_heartbeat import HeartbeatRequest
from samsa.coordinator.consumer_protocol import parse_assignment
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.errors import ErrorCode

from .memory_writer import InMemoryPartitionWriter

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]

CONFIG = {"offsets.topic.num.partitions": 5}
G = "g"


class Cluster:
    def __init__(self, tmp: Path, **config: Any) -> None:
        self.topics = TopicStore(tmp)
        self.writer = InMemoryPartitionWriter()
        self.config = {**CONFIG, **config}
        self.gc = self.coordinator()

    def coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(BrokerConfig(self.config), self.writer, lambda t, p: True,
                                lambda: self.topics)

    def topic_id(self, name: str) -> uuid.UUID:
        topic = self.topics.get(name)
        assert topic is not None
        return topic.topic_id

    async def hb(self, member_id: str, epoch: int, *, topics: list[str] | None = None,
                 owned: dict[str, list[int]] | None = None, regex: str | None = None,
                 instance: str | None = None, assignor: str | None = None,
                 rebalance_ms: int = -1, group: str = G, version: int = 1,
                 gc: GroupCoordinator | None = None) -> dict[str, Any]:
        if epoch == 0:
            owned = owned if owned is not None else {}
            rebalance_ms = 30_000 if rebalance_ms == -1 else rebalance_ms
            if topics is None and regex is None:
                topics = ["t"]
        request = HeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
            rebalance_timeout_ms=rebalance_ms,
            topic_names=tuple(topics) if topics is not None else None, topic_regex=regex,
            server_assignor=assignor,
            owned=None if owned is None else {self.topic_id(t): ps for t, ps in owned.items()})
        return await (gc or self.gc).consumer_heartbeat(
            request, version=version, client_id="client", client_host="/127.0.0.1")

    def names(self, response: dict[str, Any]) -> dict[str, list[int]]:
        """A response's assignment by topic name."""
        assert response["assignment"] is not None, response
        by_id = {t.topic_id: t.name for t in self.topics.topics.values()}
        return {by_id[tp["topic_id"]]: tp["partitions"]
                for tp in response["assignment"]["topic_partitions"]}


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(tmp_path)
    c.topics.create("t", 4)
    c.gc.start()
    try:
        yield c
    finally:
        await c.gc.stop()


async def test_the_first_member_gets_every_partition(cluster: Cluster) -> None:
    joined = await cluster.hb("m1", 0)
    assert joined["error_code"] == ErrorCode.none
    assert joined["member_id"] == "m1"
    assert joined["member_epoch"] == 1
    assert joined["heartbeat_interval"] == 5000
    assert cluster.names(joined) == {"t": [0, 1, 2, 3]}
    group = cluster.gc.consumer_groups[G]
    assert group.state == ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    # a heartbeat that changes nothing carries no assignment and writes nothing
    records = cluster.writer.records()
    same = await cluster.hb("m1", 1)
    assert (same["member_epoch"], same["assignment"]) == (1, None)
    assert cluster.writer.records() == records


async def test_partitions_are_revoked_before_another_member_gets_them(cluster: Cluster) -> None:
    await cluster.hb("m1", 0)
    second = await cluster.hb("m2", 0)
    # m1 still owns everything: m2 moves to epoch 2 and waits for its partitions
    assert second["member_epoch"] == 2
    assert cluster.names(second) == {}
    group = cluster.gc.consumer_groups[G]
    assert group.state == ConsumerGroupState.RECONCILING
    assert group.members["m2"].current.state == MemberState.UNRELEASED_PARTITIONS
    kept = sorted(group.target["m1"][cluster.topic_id("t")])
    given = sorted(group.target["m2"][cluster.topic_id("t")])
    assert len(kept) == len(given) == 2
    # m1 is told to give up two partitions, staying in epoch 1 until it has
    revoke = await cluster.hb("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert revoke["member_epoch"] == 1
    assert cluster.names(revoke) == {"t": kept}
    assert group.members["m1"].current.state == MemberState.UNREVOKED_PARTITIONS
    still = await cluster.hb("m2", 2, owned={})
    assert still["assignment"] is None  # nothing released yet
    done = await cluster.hb("m1", 1, owned={"t": kept})
    assert done["member_epoch"] == 2
    got = await cluster.hb("m2", 2, owned={})
    assert cluster.names(got) == {"t": given}
    assert cluster.gc.consumer_groups[G].state == ConsumerGroupState.STABLE


async def test_epochs_the_coordinator_does_not_know_are_fenced(cluster: Cluster) -> None:
    await cluster.hb("m1", 0)
    await cluster.hb("m2", 0)
    await cluster.hb("m1", 1, owned={"t": [0, 1, 2, 3]})
    kept = cluster.gc.consumer_groups[G].members["m1"].current.assigned
    done = await cluster.hb("m1", 1, owned={"t": sorted(kept[cluster.topic_id("t")])})
    assert done["member_epoch"] == 2
    ahead = await cluster.hb("m1", 3)
    assert ahead["error_code"] == ErrorCode.fenced_member_epoch
    assert "greater member epoch (3)" in ahead["error_message"]
    # the previous epoch passes when the member owns no more than its assignment (a lost
    # response), else it is fenced
    lost = await cluster.hb("m1", 1, owned={"t": sorted(kept[cluster.topic_id("t")])})
    assert lost["error_code"] == ErrorCode.none and lost["member_epoch"] == 2
    behind = await cluster.hb("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert behind["error_code"] == ErrorCode.fenced_member_epoch
    unknown = await cluster.hb("nobody", 2)
    assert unknown["error_code"] == ErrorCode.unknown_member_id
    missing = await cluster.hb("m1", 1, group="other")
    assert missing["error_code"] == ErrorCode.group_id_not_found


@pytest.mark.parametrize(("request_fields", "message"), [
    ({"member_id": "", "member_epoch": 1}, "MemberId can't be empty."),
    ({"group_id": " "}, "GroupId can't be empty."),
    ({"instance_id": ""}, "InstanceId can't be empty."),
    ({"rack_id": ""}, "RackId can't be empty."),
    ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
    ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
    ({"topic_names": None}, "Either SubscribedTopicNames or SubscribedTopicRegex must be "
                            "non-null when (re-)joining."),
    ({"member_epoch": -2}, "InstanceId can't be null."),
    ({"member_epoch": -3}, "MemberEpoch is invalid."),
])
async def test_malformed_heartbeats_are_invalid_requests(
        cluster: Cluster, request_fields: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"group_id": G, "member_id": "m1", "member_epoch": 0,
                              "rebalance_timeout_ms": 1000, "topic_names": ("t",), "owned": {}}
    fields.update(request_fields)
    response = await cluster.gc.consumer_heartbeat(
        HeartbeatRequest(**fields), version=1, client_id="c", client_host="/h")
    assert (response["error_code"], response["error_message"]) == (
        ErrorCode.invalid_request, message)
    assert G not in cluster.gc.consumer_groups


async def test_ids_too_long_for_a_record_key_are_refused(cluster: Cluster) -> None:
    refused = await cluster.hb("m" * 40_000, 0)
    assert refused["error_code"] == ErrorCode.invalid_request
    assert G not in cluster.gc.consumer_groups
    assert cluster.writer.records() == 0


async def test_v0_member_ids_come_from_the_coordinator(cluster: Cluster) -> None:
    joined = await cluster.hb("", 0, version=0)
    assert joined["error_code"] == ErrorCode.none
    assert uuid.UUID(joined["member_id"])
    refused = await cluster.hb("", 0, version=1)
    assert refused["error_code"] == ErrorCode.invalid_request


async def test_unknown_assignors_and_bad_regexes_are_refused(cluster: Cluster) -> None:
    unknown = await cluster.hb("m1", 0, assignor="sticky")
    assert unknown["error_code"] == ErrorCode.unsupported_assignor
    assert unknown["error_message"] == ("ServerAssignor sticky is not supported. Supported "
                                        "assignors: uniform, range.")
    bad = await cluster.hb("m1", 0, topics=None, regex="(?<=t)x")
    assert bad["error_code"] == ErrorCode.invalid_regular_expression
    assert bad["error_message"].startswith("SubscribedTopicRegex `(?<=t)x` is not a valid")
    assert G not in cluster.gc.consumer_groups


async def test_the_group_has_a_maximum_size(tmp_path: Path) -> None:
    c = Cluster(tmp_path, **{"group.consumer.max.size": 1})
    c.topics.create("t", 1)
    c.gc.start()
    try:
        assert (await c.hb("m1", 0))["error_code"] == ErrorCode.none
        full = await c.hb("m2", 0)
        assert full["error_code"] == ErrorCode.group_max_size_reached
        assert (await c.hb("m1", 1))["error_code"] == ErrorCode.none
    finally:
        await c.gc.stop()


async def test_range_assignor_when_members_ask_for_it(cluster: Cluster) -> None:
    await cluster.hb("m1", 0, assignor="range")
    await cluster.hb("m2", 0, assignor="range")
    group = cluster.gc.consumer_groups[G]
    t = cluster.topic_id("t")
    assert group.target["m1"][t] == frozenset({0, 1})
    assert group.target["m2"][t] == frozenset({2, 3})
    described = cluster.gc.describe_consumer_group(G)
    assert described["assignor_name"] == "range"


async def test_a_leaving_member_gives_its_partitions_to_the_others(cluster: Cluster) -> None:
    await cluster.hb("m1", 0)
    await cluster.hb("m2", 0)
    left = await cluster.hb("m2", -1)
    assert (left["error_code"], left["member_epoch"]) == (ErrorCode.none, -1)
    group = cluster.gc.consumer_groups[G]
    assert list(group.members) == ["m1"]
    assert group.group_epoch == 3
    back = await cluster.hb("m1", 1, owned={"t": [0, 1, 2, 3]})
    assert back["member_epoch"] == 3
    assert back["assignment"] is None  # it never gave up what it had
    assert group.state == ConsumerGroupState.STABLE
    gone = await cluster.hb("m2", -1)
    assert gone["error_code"] == ErrorCode.unknown_member_id


async def test_a_static_member_comes_back_with_its_partitions(cluster: Cluster) -> None:
    await cluster.hb("a1", 0, instance="A")
    await cluster.hb("b1", 0, instance="B")
    group = cluster.gc.consumer_groups[G]
    t = cluster.topic_id("t")
    for member_id in ("a1", "b1"):
        target = sorted(group.target[member_id][t])
        await cluster.hb(member_id, group.members[member_id].member_epoch, instance=group.members[
            member_id].instance_id, owned={"t": sorted(group.members[member_id].current.assigned
                                                        .get(t, ()))})
        await cluster.hb(member_id, group.members[member_id].member_epoch,
                         instance=group.members[member_id].instance_id, owned={"t": target})
    assert group.state == ConsumerGroupState.STABLE
    epoch = group.group_epoch
    kept = group.members["b1"].current.assigned
    # a new process of instance B cannot join while the old one is in the group
    early = await cluster.hb("b2", 0, instance="B")
    assert early["error_code"] == ErrorCode.unreleased_instance_id
    left = await cluster.hb("b1", -2, instance="B")
    assert left["member_epoch"] == -2
    assert group.members["b1"].member_epoch == -2
    assert group.group_epoch == epoch  # no rebalance: B keeps its partitions for a while
    back = await cluster.hb("b2", 0, instance="B")
    assert back["error_code"] == ErrorCode.none
    assert back["member_epoch"] == epoch
    assert {cluster.topic_id(n): frozenset(p) for n, p in cluster.names(back).items()} == kept
    assert "b1" not in group.members
    assert group.static_members["B"] == "b2"
    assert group.group_epoch == epoch
    fenced = await cluster.hb("b1", epoch, instance="B")
    assert fenced["error_code"] == ErrorCode.fenced_instance_id


async def test_members_whose_session_ends_are_fenced(cluster: Cluster) -> None:
    await cluster.hb("m1", 0)
    await cluster.hb("m2", 0)
    group = cluster.gc.consumer_groups[G]
    loop = asyncio.get_running_loop()
    group.members["m2"].session_deadline = loop.time() - 1
    cluster.gc.consumer.expire(loop.time())
    assert list(group.members) == ["m1"]
    assert group.group_epoch == 3
    assert (await cluster.hb("m2", 2))["error_code"] == ErrorCode.unknown_member_id


async def test_a_member_that_does_not_revoke_in_time_is_fenced(cluster: Cluster) -> None:
    await cluster.hb("m1", 0, rebalance_ms=50)
    await cluster.hb("m2", 0)
    await cluster.hb("m1", 1, owned={"t": [0, 1, 2, 3]})
    group = cluster.gc.consumer_groups[G]
    member = group.members["m1"]
    assert member.current.state == MemberState.UNREVOKED_PARTITIONS
    assert member.revocation_deadline is not None
    cluster.gc.consumer.expire(member.revocation_deadline[0])
    assert "m1" not in group.members
    got = await cluster.hb("m2", 2, owned={})
    assert cluster.names(got) == {"t": [0, 1, 2, 3]}


async def test_a_regex_subscription_follows_new_topics(cluster: Cluster) -> None:
    cluster.topics.create("t2", 2)
    cluster.topics.create("other", 1)
    joined = await cluster.hb("m1", 0, topics=None, regex="t.*")
    assert joined["member_epoch"] == 1
    assert cluster.names(joined) == {"t": [0, 1, 2, 3], "t2": [0, 1]}
    group = cluster.gc.consumer_groups[G]
    assert group.regexes["t.*"].topics == {"t", "t2"}
    cluster.topics.create("t3", 1)
    # resolved again once 10 s passed since the last time
    quiet = await cluster.hb("m1", 1)
    assert quiet["assignment"] is None
    group.regex_refreshed_at -= 10
    picked = await cluster.hb("m1", 1)
    assert picked["member_epoch"] == 2
    assert cluster.names(picked) == {"t": [0, 1, 2, 3], "t2": [0, 1], "t3": [0]}
    # the last member of a regex leaves: its resolution goes too
    await cluster.hb("m1", -1)
    assert group.regexes == {}


async def test_offsets_are_committed_with_the_member_epoch(cluster: Cluster) -> None:
    await cluster.hb("m1", 0)
    entry = [("t", 0, 42, -1, None)]

    def commit(member: str, epoch: int, version: int = 9) -> ErrorCode:
        codes = cluster.gc.commit(group_id=G, generation=epoch, member_id=member,
                                  instance_id=None, offsets=entry, version=version)
        return codes[("t", 0)]

    assert commit("m1", 0) == ErrorCode.stale_member_epoch
    assert commit("m2", 1) == ErrorCode.unknown_member_id
    assert commit("m1", 1, version=8) == ErrorCode.unsupported_version
    assert commit("", -1) == ErrorCode.unknown_member_id  # the group has members
    assert commit("m1", -1) == ErrorCode.stale_member_epoch
    assert commit("m1", 1) == ErrorCode.none
    assert cluster.gc.fetch_offsets(G, [("t", 0)])[("t", 0)].offset == 42  # type: ignore
    assert cluster.gc.fetch_offsets_error(G, "m1", 1) is None
    assert cluster.gc.fetch_offsets_error(G, "m1", 7) == ErrorCode.stale_member_epoch
    assert cluster.gc.fetch_offsets_error(G, "x", 1) == ErrorCode.unknown_member_id
    assert cluster.gc.fetch_offsets_error(G, None, -1) is None
    # an empty group takes commits from outside (the admin client, assign())
    await cluster.hb("m1", -1)
    assert commit("", -1) == ErrorCode.none


async def test_a_new_coordinator_loads_the_same_group(cluster: Cluster) -> None:
    await cluster.hb("m1", 0, instance="A")
    await cluster.hb("m2", 0, regex="t.*", topics=None, assignor="range")
    await cluster.hb("m1", 1, instance="A", owned={"t": [0, 1, 2, 3]})
    cluster.gc.commit(group_id=G, generation=1, member_id="m1", instance_id="A",
                      offsets=[("t", 1, 7, -1, None)], version=9)
    live = cluster.gc.consumer_groups[G]
    other = cluster.coordinator()
    other.start()
    try:
        loaded = other.consumer_groups[G]
        for attr in ("group_epoch", "metadata_hash", "assignment_epoch", "static_members",
                     "target", "partition_epochs", "regexes"):
            assert getattr(loaded, attr) == getattr(live, attr), attr
        for member_id, member in live.members.items():
            assert loaded.members[member_id].subscription == member.subscription
            assert loaded.members[member_id].current == member.current
        assert loaded.state == live.state
        assert other.fetch_offsets(G, [("t", 1)])[("t", 1)].offset == 7  # type: ignore
        # the loaded members heartbeat on where they were
        again = await cluster.hb("m1", live.members["m1"].member_epoch, instance="A",
                                 gc=other)
        assert again["error_code"] == ErrorCode.none
    finally:
        await other.stop()


async def test_an_empty_consumer_group_is_deleted_with_its_offsets(cluster: Cluster) -> None:
    await cluster.hb("m1", 0)
    cluster.gc.commit(group_id=G, generation=1, member_id="m1", instance_id=None,
                      offsets=[("t", 0, 5, -1, None)], version=9)
    assert cluster.gc.delete_group(G) == ErrorCode.non_empty_group
    await cluster.hb("m1", -1)
    assert cluster.gc.delete_group(G) == ErrorCode.none
    assert G not in cluster.gc.consumer_groups and G not in cluster.gc.groups
    other = cluster.coordinator()
    other.start()
    try:
        assert G not in other.consumer_groups and G not in other.groups
    finally:
        await other.stop()


async def test_an_empty_classic_group_becomes_a_consumer_group(cluster: Cluster) -> None:
    cluster.gc.commit(group_id=G, generation=-1, member_id="", instance_id=None,
                      offsets=[("t", 0, 3, -1, None)], version=9)
    joined = await cluster.hb("m1", 0)
    assert joined["error_code"] == ErrorCode.none
    assert cluster.gc.fetch_offsets(G, [("t", 0)])[("t", 0)].offset == 3  # type: ignore
    other = cluster.coordinator()
    other.start()
    try:
        assert G in other.consumer_groups
        assert other.fetch_offsets(G, [("t", 0)])[("t", 0)].offset == 3  # type: ignore
    finally:
        await other.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_the_heartbeat_interval_must_be_below_the_session_timeout(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms must be less "
                                          "than group.consumer.session.timeout.ms"):
        Cluster(tmp_path, **{"group.consumer.heartbeat.interval.ms": 15000,
                             "group.consumer.max.heartbeat.interval.ms": 60000,
                             "group.consumer.session.timeout.ms": 15000,
                             "group.consumer.min.session.timeout.ms": 15000})


# --- classic members of consumer groups, and conversions (KIP-848's migration) --------------


def classic_subscription(owned: dict[str, list[int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1 of topic t."""
    out = struct.pack(">hi", 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for topic, ps in owned.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out


async def classic_join(gc: GroupCoordinator, member_id: str = "", *, session_ms: int = 10_000,
                       rebalance_ms: int = 10_000, owned: dict[str, list[int]] | None = None,
                       protocols: list[tuple[str, bytes]] | None = None) -> dict[str, Any]:
    return await gc.join(group_id=G, member_id=member_id, instance_id=None,
                         protocol_type="consumer",
                         protocols=protocols or [("range", classic_subscription(owned))],
                         session_ms=session_ms, rebalance_ms=rebalance_ms, client_id="old",
                         client_host="/127.0.0.1", version=9)


def assigned(data: bytes) -> list[int]:
    parts = parse_assignment(data)
    return sorted(parts.get("t", []))


async def test_a_classic_member_joins_a_consumer_group(tmp_path: Path) -> None:
    c = Cluster(tmp_path, **{"group.min.session.timeout.ms": 100})
    c.topics.create("t", 4)
    c.gc.start()
    try:
        await c.hb("m1", 0)
        first = await classic_join(c.gc)
        assert first["error_code"] == ErrorCode.member_id_required
        joined = await classic_join(c.gc, first["member_id"])
        assert joined["error_code"] == ErrorCode.none
        old = joined["member_id"]
        assert (joined["generation_id"], joined["protocol_name"]) == (2, "range")
        group = c.gc.consumer_groups[G]
        assert group.members[old].uses_classic_protocol
        synced = await c.gc.sync(group_id=G, generation=2, member_id=old, instance_id=None,
                                 protocol_type="consumer", protocol_name="range",
                                 assignments=[])
        assert synced["error_code"] == ErrorCode.none
        assert assigned(synced["assignment"]) == []  # m1 still holds its partitions
        # m1 gives up half; the classic member is told to rejoin for them
        await c.hb("m1", 1, owned={"t": [0, 1, 2, 3]})
        kept = sorted(group.members["m1"].current.assigned[c.topic_id("t")])
        await c.hb("m1", 1, owned={"t": kept})
        beat = c.gc.heartbeat(group_id=G, generation=2, member_id=old, instance_id=None)
        assert beat == ErrorCode.rebalance_in_progress
        again = await classic_join(c.gc, old)
        synced = await c.gc.sync(group_id=G, generation=again["generation_id"], member_id=old,
                                 instance_id=None, protocol_type="consumer",
                                 protocol_name="range", assignments=[])
        assert assigned(synced["assignment"]) == sorted({0, 1, 2, 3} - set(kept))
        assert c.gc.heartbeat(group_id=G, generation=again["generation_id"], member_id=old,
                              instance_id=None) == ErrorCode.none
        # the classic protocol's errors
        assert c.gc.heartbeat(group_id=G, generation=1, member_id=old, instance_id=None) == \
            ErrorCode.illegal_generation
        assert c.gc.heartbeat(group_id=G, generation=2, member_id="m1", instance_id=None) == \
            ErrorCode.unknown_member_id
        other = await classic_join(c.gc, "x", protocols=[("roundrobin", classic_subscription())])
        assert other["error_code"] == ErrorCode.inconsistent_group_protocol
        wrong = await c.gc.sync(group_id=G, generation=again["generation_id"], member_id=old,
                                instance_id=None, protocol_type="consumer",
                                protocol_name="roundrobin", assignments=[])
        assert wrong["error_code"] == ErrorCode.inconsistent_group_protocol
        # a classic member's commits carry its generation, at any OffsetCommit version
        codes = c.gc.commit(group_id=G, generation=again["generation_id"], member_id=old,
                            instance_id=None, offsets=[("t", 0, 1, -1, None)], version=2)
        assert codes == {("t", 0): ErrorCode.none}
        # it leaves: the group epoch moves on
        epoch = group.group_epoch
        assert c.gc.leave(G, [(old, None)]) == [ErrorCode.none]
        assert old not in group.members and group.group_epoch == epoch + 1
    finally:
        await c.gc.stop()


async def test_classic_members_must_sync_and_rejoin_in_time(tmp_path: Path) -> None:
    c = Cluster(tmp_path, **{"group.min.session.timeout.ms": 100})
    c.topics.create("t", 2)
    c.gc.start()
    try:
        await c.hb("m1", 0)
        joined = await classic_join(c.gc, "late", rebalance_ms=100)
        assert joined["error_code"] == ErrorCode.none
        group = c.gc.consumer_groups[G]
        member = group.members["late"]
        assert member.sync_deadline is not None
        c.gc.consumer.expire(member.sync_deadline)  # it never synced
        assert "late" not in group.members
        # its own session timeout, not the consumer protocol's
        joined = await classic_join(c.gc, "slow", session_ms=200)
        await c.gc.sync(group_id=G, generation=joined["generation_id"], member_id="slow",
                        instance_id=None, protocol_type="consumer", protocol_name="range",
                        assignments=[])
        slow = group.members["slow"]
        loop = asyncio.get_running_loop()
        assert slow.session_deadline <= loop.time() + 0.3
        c.gc.consumer.expire(slow.session_deadline)
        assert "slow" not in group.members
    finally:
        await c.gc.stop()


async def test_a_classic_group_upgrades_and_a_new_coordinator_loads_it(
        tmp_path: Path) -> None:
    c = Cluster(tmp_path, **{"group.min.session.timeout.ms": 100,
                             "group.initial.rebalance.delay.ms": 0})
    c.topics.create("t", 2)
    c.gc.start()
    try:
        first = await classic_join(c.gc)
        joined = await classic_join(c.gc, first["member_id"])
        old = joined["member_id"]
        leader_assignment = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + \
            struct.pack(">iii", 2, 0, 1) + struct.pack(">i", -1)
        synced = await c.gc.sync(group_id=G, generation=joined["generation_id"], member_id=old,
                                 instance_id=None, protocol_type="consumer",
                                 protocol_name="range", assignments=[(old, leader_assignment)])
        assert synced["error_code"] == ErrorCode.none
        generation = joined["generation_id"]
        up = await c.hb("new", 0)
        assert up["error_code"] == ErrorCode.none
        group = c.gc.consumer_groups[G]
        assert set(group.members) == {old, "new"}
        assert group.members[old].member_epoch == generation
        assert group.members[old].current.assigned == {c.topic_id("t"): frozenset({0, 1})}
        assert not c.gc.groups[G].members if G in c.gc.groups else True
        other = c.coordinator()
        other.start()
        try:
            loaded = other.consumer_groups[G]
            assert set(loaded.members) == {old, "new"}
            assert loaded.members[old].subscription == group.members[old].subscription
            assert loaded.members[old].current == group.members[old].current
            assert G not in other.groups or not other.groups[G].members
        finally:
            await other.stop()
        # the consumer protocol's member leaves: back to a classic group, rebalancing
        await c.hb("new", -1)
        assert G not in c.gc.consumer_groups
        classic = c.gc.groups[G]
        assert set(classic.members) == {old}
        assert classic.state.value == "PreparingRebalance"
        assert assigned(classic.members[old].assignment) == [0]  # its target assignment
        again = c.coordinator()
        again.start()
        try:
            assert G not in again.consumer_groups
            assert set(again.groups[G].members) == {old}
        finally:
            await again.stop()
    finally:
        await c.gc.stop()
