"""The consumer group protocol of KIP-848: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69). The groups live in samsa/coordinator/ (consumer_heartbeat.py)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from samsa.coordinator.consumer_heartbeat import HeartbeatRequest, error_response
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.errors import ErrorCode
from samsa.handlers.authz import (
    OPERATIONS_NOT_REQUESTED,
    authorize,
    authorized,
    authorized_operations,
    unauthorized,
)
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.protocol.build import to_ms
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest

DESCRIBED_TOPICS_DENIED = ("The group has described topic(s) that the client is not "
                           "authorized to describe.")


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    coordinator = ctx.server.group_coordinator
    assert coordinator is not None
    return coordinator


@api(68, "ConsumerGroupHeartbeat", 0, 1)
async def consumer_group_heartbeat(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
                                   ) -> dict[str, Any]:
    # READ on the group; DESCRIBE on every topic it subscribes to by name
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names and unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names):
        return error_response(ErrorCode.topic_authorization_failed)

    def describable(topics: set[str]) -> set[str]:
        return authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)

    owned: dict[uuid.UUID, list[int]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            if tp.topic_id is not None:
                owned.setdefault(tp.topic_id, []).extend(int(p) for p in tp.partitions)
    peer = ctx.connection.peer if ctx.connection is not None else "?"
    return await _coordinator(ctx).consumer_heartbeat(
        HeartbeatRequest(
            group_id=request.group_id, member_id=request.member_id,
            member_epoch=request.member_epoch, instance_id=request.instance_id,
            rack_id=request.rack_id, rebalance_timeout_ms=to_ms(request.rebalance_timeout),
            topic_names=tuple(names) if names is not None else None,
            topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1+
            server_assignor=request.server_assignor, owned=owned),
        version=ctx.version, client_id=ctx.client_id or "",
        client_host="/" + peer.rsplit(":", 1)[0],
        describable=describable if ctx.server.authorizer is not None else None)


@api(69, "ConsumerGroupDescribe", 0, 1)
async def consumer_group_describe(ctx: RequestContext, request: ConsumerGroupDescribeRequest
                                  ) -> dict[str, Any]:
    coordinator = _coordinator(ctx)
    groups = []
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_failed(group_id, ErrorCode.group_authorization_failed))
            continue
        if not coordinator.coordinates(group_id):
            groups.append(_failed(group_id, ErrorCode.not_coordinator))
            continue
        described = coordinator.describe_consumer_group(group_id)
        if described["error_code"] == ErrorCode.none:
            topics = {tp["topic_name"] for m in described["members"]
                      for part in (m["assignment"], m["target_assignment"])
                      for tp in part["topic_partitions"]}
            if unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics):
                groups.append(_failed(group_id, ErrorCode.topic_authorization_failed,
                                      DESCRIBED_TOPICS_DENIED))
                continue
            described["authorized_operations"] = (
                authorized_operations(ctx, ResourceType.GROUP, group_id)
                if request.include_authorized_operations else OPERATIONS_NOT_REQUESTED)
        groups.append(described)
    return {"throttle_time": 0, "groups": groups}


def _failed(group_id: str, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
            "members": [], "authorized_operations": OPERATIONS_NOT_REQUESTED}
