"""The classic consumer group protocol: JoinGroup (11), SyncGroup (14), Heartbeat (12),
LeaveGroup (13), ListGroups (16), DescribeGroups (15), DeleteGroups (42), OffsetCommit (8),
OffsetFetch (9), OffsetDelete (47); ListGroups, DeleteGroups and the offset APIs serve consumer
groups (KIP-848, consumer_groups.py) too. The state lives in samsa/coordinator/."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from samsa.coordinator.group import GroupState
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.group_rebalance import join_error
from samsa.errors import ErrorCode
from samsa.handlers.authz import (
    OPERATIONS_NOT_REQUESTED,
    authorize,
    authorize_cluster,
    authorized,
    authorized_operations,
    unauthorized,
)
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.protocol.build import to_ms
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
    from kio.schema.heartbeat.v4.request import HeartbeatRequest
    from kio.schema.join_group.v9.request import JoinGroupRequest
    from kio.schema.leave_group.v2.request import LeaveGroupRequest as SingleLeaveGroupRequest
    from kio.schema.leave_group.v5.request import LeaveGroupRequest
    from kio.schema.list_groups.v5.request import ListGroupsRequest
    from kio.schema.offset_commit.v9.request import OffsetCommitRequest
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
    from kio.schema.offset_fetch.v7.request import (
        OffsetFetchRequest as SingleGroupOffsetFetchRequest,
    )
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic
    from kio.schema.offset_fetch.v9.request import OffsetFetchRequest, OffsetFetchRequestTopics
    from kio.schema.sync_group.v5.request import SyncGroupRequest

GROUP_DENIED = ErrorCode.group_authorization_failed
TOPIC_DENIED = ErrorCode.topic_authorization_failed


def _may_read_group(ctx: RequestContext, group_id: str) -> bool:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit: READ on the group."""
    return authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id)


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    coordinator = ctx.server.group_coordinator
    assert coordinator is not None
    return coordinator


def _client_host(ctx: RequestContext) -> str:
    peer = ctx.connection.peer if ctx.connection is not None else "?"
    return "/" + peer.rsplit(":", 1)[0]


@api(11, "JoinGroup", 0, 9)
async def join_group(ctx: RequestContext, request: JoinGroupRequest) -> dict[str, Any]:
    if not _may_read_group(ctx, request.group_id):
        return {"throttle_time": 0, **join_error(GROUP_DENIED, request.member_id)}
    session_ms = to_ms(request.session_timeout)
    result = await _coordinator(ctx).join(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        session_ms=session_ms,
        rebalance_ms=to_ms(request.rebalance_timeout) if ctx.version >= 1 else session_ms,
        client_id=ctx.client_id,
        client_host=_client_host(ctx),
        version=ctx.version,
    )
    return {"throttle_time": 0, **result}


@api(14, "SyncGroup", 0, 5)
async def sync_group(ctx: RequestContext, request: SyncGroupRequest) -> dict[str, Any]:
    if not _may_read_group(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "assignment": b""}
    result = await _coordinator(ctx).sync(
        group_id=request.group_id,
        generation=request.generation_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=[(a.member_id, a.assignment) for a in request.assignments],
    )
    return {"throttle_time": 0, "assignment": b"", **result}


@api(12, "Heartbeat", 0, 4)
async def heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> dict[str, Any]:
    if not _may_read_group(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED}
    code = _coordinator(ctx).heartbeat(
        group_id=request.group_id,
        generation=request.generation_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
    )
    return {"throttle_time": 0, "error_code": code}


@api(13, "LeaveGroup", 0, 5)
async def leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> dict[str, Any]:
    if not _may_read_group(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "members": []}
    coordinator = _coordinator(ctx)
    if ctx.version < 3:  # v0-v2: the member itself leaves (v2's request)
        member_id = cast("SingleLeaveGroupRequest", request).member_id
        (code,) = coordinator.leave(request.group_id, [(member_id, None)])
        return {"throttle_time": 0, "error_code": code}
    leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    codes = coordinator.leave(request.group_id, leaving)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": code}
            for (member_id, instance_id), code in zip(leaving, codes, strict=True)
        ],
    }


@api(16, "ListGroups", 0, 5)
async def list_groups(ctx: RequestContext, request: ListGroupsRequest) -> dict[str, Any]:
    states = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    # DESCRIBE on the cluster lists every group, else those the principal may DESCRIBE
    visible = None
    if ctx.server.authorizer is not None and not authorize_cluster(ctx, AclOperation.DESCRIBE):
        visible = authorized(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                             _coordinator(ctx).groups)
    coordinator = _coordinator(ctx)
    if visible is not None:
        visible |= authorized(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                              coordinator.consumer_groups)
    listed = [(group_id, "consumer", "consumer", group.state.value)
              for group_id, group in coordinator.consumer_groups.items()]
    listed += [(group.group_id, group.protocol_type or "", "classic", group.state.value)
               for group in coordinator.groups.values()
               if group.group_id not in coordinator.consumer_groups]
    groups = []
    for group_id, protocol_type, group_type, state in listed:
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        if visible is not None and group_id not in visible:
            continue
        groups.append({"group_id": group_id, "protocol_type": protocol_type,
                       "group_state": state, "group_type": group_type})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}


@api(15, "DescribeGroups", 0, 6)
async def describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> dict[str, Any]:
    coordinator = _coordinator(ctx)
    operations = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.groups:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append({
                "error_code": GROUP_DENIED, "group_id": group_id, "group_state": "",
                "protocol_type": "", "protocol_data": "", "members": [],
                "authorized_operations": OPERATIONS_NOT_REQUESTED})
            continue
        group = coordinator.groups.get(group_id)
        found = coordinator.coordinates(group_id)
        entry: dict[str, Any] = {
            "error_code": ErrorCode.none if found else ErrorCode.not_coordinator,
            "group_id": group_id, "group_state": "Dead",
            "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations":
                authorized_operations(ctx, ResourceType.GROUP, group_id)
                if operations and found else OPERATIONS_NOT_REQUESTED,
        }
        if group_id in coordinator.consumer_groups and found:
            # Kafka's: a consumer group is no classic group (v6 says so, older versions: Dead)
            if ctx.version >= 6:
                entry.update(error_code=ErrorCode.group_id_not_found,
                             error_message=f"Group {group_id} is not a classic group.")
        elif group is not None and entry["error_code"] == ErrorCode.none:
            stable = group.state == GroupState.STABLE
            entry.update(
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=[
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                     "member_assignment": m.assignment if stable else b""}
                    for m in group.members.values()
                ],
            )
        described.append(entry)
    return {"throttle_time": 0, "groups": described}


@api(42, "DeleteGroups", 0, 2)
async def delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> dict[str, Any]:
    coordinator = _coordinator(ctx)
    denied = unauthorized(ctx, AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code":
                     GROUP_DENIED if g in denied else coordinator.delete_group(g)}
                    for g in request.groups_names],
    }


@api(8, "OffsetCommit", 2, 9)
async def offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> dict[str, Any]:
    # READ on the group (else every partition is refused), then READ on each topic
    denied: set[str] = set()
    refusal = TOPIC_DENIED
    if ctx.server.authorizer is not None:
        if not _may_read_group(ctx, request.group_id):
            denied = {t.name for t in request.topics}
            refusal = GROUP_DENIED
        else:
            denied = unauthorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                  (t.name for t in request.topics))
    entries: list[tuple[str, int, int, int, str | None]] = [
        (topic.name, p.partition_index, p.committed_offset,
         getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for topic in request.topics if topic.name not in denied for p in topic.partitions
    ]
    coordinator = _coordinator(ctx)
    codes: dict[tuple[str, int], ErrorCode] = {}
    if entries or not denied:
        codes = coordinator.commit(
            group_id=request.group_id,
            generation=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            offsets=entries,
            version=ctx.version,
        )
    if denied:
        codes.update({(t.name, p.partition_index): refusal
                      for t in request.topics if t.name in denied for p in t.partitions})
    codes = await coordinator.acknowledged(request.group_id, codes)
    return {
        "throttle_time": 0,
        "topics": [
            {"name": topic.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": codes[(topic.name, p.partition_index)]}
                for p in topic.partitions
            ]}
            for topic in request.topics
        ],
    }


def _fetched_topics(
    ctx: RequestContext, coordinator: GroupCoordinator, group_id: str,
    topics: Sequence[OffsetFetchRequestTopic | OffsetFetchRequestTopics] | None,
    require_stable: bool,
) -> list[dict[str, Any]]:
    # Offsets of topics the principal may not DESCRIBE are not shown: left out of "every
    # topic", TOPIC_AUTHORIZATION_FAILED for those asked for by name.
    denied: set[str] = set()
    if ctx.server.authorizer is not None and topics is not None:
        denied = unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                              (t.name for t in topics))
    wanted: list[tuple[str, int]] | None = None if topics is None else [
        (t.name, p) for t in topics if t.name not in denied for p in t.partition_indexes
    ]
    found = coordinator.fetch_offsets(group_id, wanted)
    if ctx.server.authorizer is not None and topics is None:
        visible = authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                             (topic for topic, _ in found))
        found = {tp: value for tp, value in found.items() if tp[0] in visible}
    # KIP-447: a partition with a transactional commit still pending is not stable yet
    unstable = coordinator.unstable_offsets(group_id) if require_stable else set()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in found.items():
        if (topic, partition) in unstable:
            value = None
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": value.offset if value else -1,
            "committed_leader_epoch": value.leader_epoch if value else -1,
            "metadata": value.metadata if value else "",
            "error_code": ErrorCode.unstable_offset_commit if (topic, partition) in unstable
            else ErrorCode.none,
        })
    for t in topics or ():
        if t.name in denied:
            by_topic[t.name] = [{"partition_index": p, "committed_offset": -1,
                                 "committed_leader_epoch": -1, "metadata": "",
                                 "error_code": TOPIC_DENIED} for p in t.partition_indexes]
    return [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def _group_refused(ctx: RequestContext, coordinator: GroupCoordinator,
                   group_id: str) -> ErrorCode | None:
    """OffsetFetch of a group: DESCRIBE on it first, then whether this is its coordinator."""
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return GROUP_DENIED
    if not coordinator.coordinates(group_id):
        return ErrorCode.not_coordinator
    return None


@api(9, "OffsetFetch", 1, 9)
async def offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> dict[str, Any]:
    coordinator = _coordinator(ctx)
    stable = getattr(request, "require_stable", False)
    if ctx.version < 8:  # v1-v7 ask for one group (v7's request)
        single = cast("SingleGroupOffsetFetchRequest", request)
        refused = _group_refused(ctx, coordinator, single.group_id)
        if refused is not None:
            # v1 has no top-level error: each partition asked for carries it
            return {"throttle_time": 0, "error_code": refused, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                     "metadata": "", "error_code": refused}
                    for p in t.partition_indexes]}
                for t in single.topics or ()] if ctx.version < 2 else []}
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "topics": _fetched_topics(ctx, coordinator, single.group_id, single.topics,
                                          stable)}
    groups = []
    for g in request.groups:
        refused = _group_refused(ctx, coordinator, g.group_id)
        if refused is None and ctx.version >= 9:  # a consumer group's member: its epoch
            refused = coordinator.fetch_offsets_error(g.group_id, g.member_id, g.member_epoch)
        groups.append(
            {"group_id": g.group_id, "error_code": refused, "topics": []} if refused else
            {"group_id": g.group_id, "error_code": ErrorCode.none,
             "topics": _fetched_topics(ctx, coordinator, g.group_id, g.topics, stable)})
    return {"throttle_time": 0, "groups": groups}


@api(47, "OffsetDelete", 0, 0)
async def offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> dict[str, Any]:
    # DELETE on the group, then READ on each topic
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "topics": []}
    denied = unauthorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                          (t.name for t in request.topics))
    wanted: list[tuple[str, int]] = [
        (t.name, p.partition_index) for t in request.topics if t.name not in denied
        for p in t.partitions]
    code, results = _coordinator(ctx).delete_offsets(request.group_id, wanted)
    results.update({(t.name, p.partition_index): TOPIC_DENIED
                    for t in request.topics if t.name in denied for p in t.partitions})
    topics = []
    if code == ErrorCode.none:
        for t in request.topics:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": results[(t.name, p.partition_index)]}
                for p in t.partitions
            ]})
    return {"throttle_time": 0, "error_code": code, "topics": topics}
