"""Metadata (3), FindCoordinator (10) and DescribeCluster (60): where things are.

A single node leads every partition, coordinates every group and transaction, and is the
controller.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

from samsa.cluster.topics import Topic, topic_name_problem
from samsa.coordinator.group_coordinator import OFFSETS_TOPIC
from samsa.coordinator.records import partition_for
from samsa.coordinator.txn_coordinator import TXN_STATE_TOPIC
from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.authz import (
    MESSAGES,
    OPERATIONS_NOT_REQUESTED,
    authorize,
    authorize_cluster,
    authorized,
    authorized_operations,
    cluster_operations,
)
from samsa.handlers.context import Broker, RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
    from kio.schema.find_coordinator.v3.request import (
        FindCoordinatorRequest as SingleKeyFindCoordinatorRequest,
    )
    from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
    from kio.schema.metadata.v12.request import MetadataRequest

NONE = ErrorCode.none
TOPIC_DENIED = ErrorCode.topic_authorization_failed


def broker_entries(ctx: RequestContext) -> list[dict[str, Any]]:
    """The brokers clients may connect to (this one alone on a single node), at their
    endpoints of the listener the request came in on (Kafka's rule)."""
    return [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
            for n in ctx.server.topic_admin.nodes(ctx.listener_name)]


def controller_id(ctx: RequestContext) -> int:
    return ctx.server.topic_admin.controller_id()


class Reachable:
    """The brokers a Metadata answer may name as leaders: those with an endpoint on the
    listener the request came in on, and the live ones (looked up once per request)."""

    def __init__(self, ctx: RequestContext) -> None:
        admin = ctx.server.topic_admin
        self.listed = {n.node_id for n in admin.nodes(ctx.listener_name)}
        self.live = {n.node_id for n in admin.nodes()}
        # Kafka: LEADER_NOT_AVAILABLE before v6, LISTENER_NOT_FOUND from v6 on, so that a
        # listener missing on some brokers shows as the configuration error it is
        self.missing_listener = (ErrorCode.listener_not_found if ctx.version >= 6
                                 else ErrorCode.leader_not_available)

    def leader(self, leader: int) -> tuple[int, ErrorCode]:
        """The leader to name and the partition's error code."""
        if leader in self.listed:
            return leader, NONE
        if leader >= 0 and leader in self.live:
            return -1, self.missing_listener
        return -1, ErrorCode.leader_not_available


def topic_entry(ctx: RequestContext, topic: Topic, operations: bool,
                reachable: Reachable) -> dict[str, Any]:
    admin = ctx.server.topic_admin
    partitions = []
    for index in range(topic.partitions):
        view = admin.describe_partition(topic.name, index)
        leader, error = reachable.leader(view.leader)
        partitions.append({
            "error_code": error,
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": view.leader_epoch,
            "replica_nodes": list(view.replicas),
            "isr_nodes": list(view.isr),
            "offline_replicas": list(view.offline),
        })
    return {
        "error_code": NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": partitions,
        "topic_authorized_operations": authorized_operations(ctx, ResourceType.TOPIC, topic.name)
        if operations else OPERATIONS_NOT_REQUESTED,
    }


def _error_entry(
    name: str | None, error: int, topic_id: uuid.UUID | None = None
) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": OPERATIONS_NOT_REQUESTED}


def _auto_create(server: Broker, name: str) -> Topic | None:
    """A topic Metadata creates: an internal one as its coordinator makes it (compacted, its
    own partition count), as Kafka's AutoTopicCreationManager does; None while a cluster's
    brokers have not seen it yet."""
    if name == OFFSETS_TOPIC:
        assert server.group_coordinator is not None
        server.group_coordinator.ensure_offsets_topic()
    elif name == TXN_STATE_TOPIC:
        assert server.txn_coordinator is not None
        server.txn_coordinator.ensure_topic()
    else:
        return server.topic_admin.create_topic(name, server.config.get("num.partitions"))
    assert server.topics is not None
    return server.topics.get(name)


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic."""
    return (authorize_cluster(ctx, AclOperation.CREATE)
            or authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, name))


@api(3, "Metadata", 0, 12)
async def metadata(ctx: RequestContext, request: MetadataRequest) -> dict[str, Any]:
    server = ctx.server
    store = server.topics
    assert store is not None
    checked = server.authorizer is not None
    operations = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    reachable = Reachable(ctx)
    if requested is None or (ctx.version == 0 and not requested):
        # every topic the principal may DESCRIBE; the others are not mentioned
        topics = list(store.topics.values())
        if checked:
            visible = authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                 (t.name for t in topics))
            topics = [t for t in topics if t.name in visible]
        entries = [topic_entry(ctx, t, operations, reachable) for t in topics]
    else:
        auto = (
            getattr(request, "allow_auto_topic_creation", True)
            and server.config.get("auto.create.topics.enable")
        )
        entries = []
        for wanted in requested:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None)
            if name is None:
                if topic_id is not None:
                    topic = store.by_id(topic_id)
                    if topic is None:
                        entries.append(_error_entry(None, ErrorCode.unknown_topic_id, topic_id))
                    elif checked and not authorize(ctx, AclOperation.DESCRIBE,
                                                   ResourceType.TOPIC, topic.name):
                        # a topic id is not secret: its name is
                        entries.append(_error_entry(None, TOPIC_DENIED, topic_id))
                    else:
                        entries.append(topic_entry(ctx, topic, operations, reachable))
                else:  # neither a name nor an id: an empty name, an invalid one
                    entries.append(_error_entry(None, ErrorCode.invalid_topic_exception))
                continue
            if checked and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # whether it exists is not said
                entries.append(_error_entry(name, TOPIC_DENIED))
                continue
            topic = store.get(name)
            if topic is None:
                if topic_name_problem(name):
                    entries.append(_error_entry(name, ErrorCode.invalid_topic_exception))
                    continue
                if not auto:
                    entries.append(_error_entry(name, ErrorCode.unknown_topic_or_partition))
                    continue
                if checked and not _may_create(ctx, name):
                    entries.append(_error_entry(name, TOPIC_DENIED))
                    continue
                try:
                    topic = _auto_create(server, name)
                except KafkaError:  # cluster mode: created meanwhile, not seen here yet
                    topic = None
                if topic is None:
                    entries.append(_error_entry(name, ErrorCode.leader_not_available))
                    continue
            entries.append(topic_entry(ctx, topic, operations, reachable))
    cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return {
        "throttle_time": 0,
        "brokers": broker_entries(ctx),
        "cluster_id": server.cluster_id,
        "controller_id": controller_id(ctx),
        "topics": entries,
        "cluster_authorized_operations": cluster_operations(ctx, cluster_ops),
    }


_NO_NODE = {"node_id": -1, "host": "", "port": -1}


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    """The coordinator of a group or transactional id: the leader of its internal topic's
    partition (this broker on a single node); the topic is created on first use and
    COORDINATOR_NOT_AVAILABLE answers until it has a leader."""
    server = ctx.server
    groups, txns = server.group_coordinator, server.txn_coordinator
    assert groups is not None and txns is not None
    if key_type == 0:
        topic, partitions = OFFSETS_TOPIC, groups.num_partitions
        ensure = groups.ensure_offsets_topic
    else:
        topic, partitions, ensure = TXN_STATE_TOPIC, txns.num_partitions, txns.ensure_topic
    ensure()  # Kafka creates the internal topic when its coordinator is first looked for
    node, why = server.topic_admin.coordinator_node(topic, partition_for(key, partitions),
                                                    ctx.listener_name)
    if node is None:
        return {**_NO_NODE, "error_code": ErrorCode.coordinator_not_available,
                "error_message": why}
    return {"node_id": node.node_id, "host": node.host, "port": node.port,
            "error_code": NONE, "error_message": None}


@api(10, "FindCoordinator", 0, 6)
async def find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> dict[str, Any]:
    key_type = getattr(request, "key_type", 0)
    if ctx.version < 4:  # v0-v3 ask for one key (v3's request)
        keys = [cast("SingleKeyFindCoordinatorRequest", request).key]
    else:
        keys = list(request.coordinator_keys)
    if key_type not in (0, 1):  # 0 group, 1 transaction
        nodes = [{**_NO_NODE, "error_code": ErrorCode.invalid_request,
                  "error_message": f"unknown coordinator key type {key_type}"} for _ in keys]
    else:
        resource = ResourceType.GROUP if key_type == 0 else ResourceType.TRANSACTIONAL_ID
        denied = (ErrorCode.group_authorization_failed if key_type == 0
                  else ErrorCode.transactional_id_authorization_failed)
        nodes = [_coordinator(ctx, key, key_type)
                 if authorize(ctx, AclOperation.DESCRIBE, resource, key)
                 else {**_NO_NODE, "error_code": denied, "error_message": MESSAGES[denied]}
                 for key in keys]
    if ctx.version < 4:
        return {"throttle_time": 0, **nodes[0]}
    return {
        "throttle_time": 0,
        "coordinators": [{"key": key, **node} for key, node in zip(keys, nodes, strict=True)],
    }


@api(60, "DescribeCluster", 0, 1)
async def describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> dict[str, Any]:
    server = ctx.server
    operations = bool(request.include_cluster_authorized_operations)
    return {
        "throttle_time": 0,
        "error_code": NONE,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": server.cluster_id,
        "controller_id": controller_id(ctx),
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                     "rack": b["rack"]} for b in broker_entries(ctx)],
        # DescribeCluster answers everyone (as Kafka's): DESCRIBE on the cluster only decides
        # whether the operations are told
        "cluster_authorized_operations": cluster_operations(ctx, operations),
    }
