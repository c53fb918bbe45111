"""Metadata (3), FindCoordinator (10) and DescribeCluster (60): where things are.

A single node leads every partition, coordinates every group and transaction, and is the
controller.
"""

from __future__ import annotations

from typing import Any

from samsa.cluster.topics import Topic, topic_name_problem
from samsa.coordinator.group_coordinator import OFFSETS_TOPIC
from samsa.coordinator.records import partition_for
from samsa.coordinator.txn_coordinator import TXN_STATE_TOPIC
from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api

NONE = ErrorCode.none
# Kafka's "authorized operations not requested" sentinel.
OPERATIONS_NOT_REQUESTED = -(2**31)
# Without ACLs every operation is allowed: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
# DESCRIBE_CONFIGS, ALTER_CONFIGS for topics; CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
# DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS for the cluster.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12, 13, 14))


def broker_entries(ctx: RequestContext) -> list[dict[str, Any]]:
    """This broker alone, or every broker registered in ZooKeeper in cluster mode."""
    server = ctx.server
    membership = server.membership
    if membership is not None and membership.brokers:
        entries = []
        for broker_id, info in sorted(membership.brokers.items()):
            endpoint = info.plaintext_endpoint()
            if endpoint is not None:
                entries.append({"node_id": broker_id, "host": endpoint.host or "",
                                "port": endpoint.port, "rack": info.rack})
        return entries
    listener = server.advertised[0]
    return [{"node_id": server.broker_id, "host": listener.host, "port": listener.port,
             "rack": server.config.get("broker.rack")}]


def controller_id(ctx: RequestContext) -> int:
    membership = ctx.server.membership
    if membership is None:
        return ctx.server.broker_id
    return membership.controller_id if membership.controller_id is not None else -1


def _cluster_partition(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    """A partition as the cluster's partition state znode describes it."""
    manager = ctx.server.replica_manager
    assert manager is not None
    info = manager.partitions.get((topic, index))
    live = ctx.server.topic_admin.live_brokers()
    if info is None or info.state is None:
        return {"error_code": ErrorCode.leader_not_available, "partition_index": index,
                "leader_id": -1, "leader_epoch": -1,
                "replica_nodes": list(info.replicas) if info else [], "isr_nodes": [],
                "offline_replicas": []}
    state = info.state
    return {
        "error_code": NONE if state.leader >= 0 else ErrorCode.leader_not_available,
        "partition_index": index,
        "leader_id": state.leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(info.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in info.replicas if r not in live],
    }


def topic_entry(ctx: RequestContext, topic: Topic, operations: bool) -> dict[str, Any]:
    server = ctx.server
    node = server.broker_id
    partitions = []
    for index in range(topic.partitions):
        if server.replica_manager is not None:
            partitions.append(_cluster_partition(ctx, topic.name, index))
            continue
        partition = server.replicas.partition(topic.name, index)
        partitions.append({
            "error_code": NONE,
            "partition_index": index,
            "leader_id": node,
            "leader_epoch": partition.leader_epoch if partition else 0,
            "replica_nodes": [node],
            "isr_nodes": [node],
            "offline_replicas": [],
        })
    return {
        "error_code": NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": partitions,
        "topic_authorized_operations": TOPIC_OPERATIONS if operations else OPERATIONS_NOT_REQUESTED,
    }


def _error_entry(name: str | None, error: int, topic_id: Any = None) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": OPERATIONS_NOT_REQUESTED}


@api(3, "Metadata", 0, 12)
async def metadata(ctx: RequestContext, request: Any) -> dict[str, Any]:
    server = ctx.server
    store = server.topics
    assert store is not None
    operations = bool(getattr(request, "include_topic_authorized_operations", False))
    requested = request.topics
    if requested is None or (ctx.version == 0 and not requested):
        entries = [topic_entry(ctx, t, operations) for t in store.topics.values()]
    else:
        auto = (
            getattr(request, "allow_auto_topic_creation", True)
            and server.config.get("auto.create.topics.enable")
        )
        entries = []
        for wanted in requested:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id is not None:
                topic = store.by_id(topic_id)
                entries.append(
                    topic_entry(ctx, topic, operations) if topic
                    else _error_entry(None, ErrorCode.unknown_topic_id, topic_id)
                )
                continue
            topic = store.get(name)
            if topic is None:
                if topic_name_problem(name):
                    entries.append(_error_entry(name, ErrorCode.invalid_topic_exception))
                    continue
                if not auto:
                    entries.append(_error_entry(name, ErrorCode.unknown_topic_or_partition))
                    continue
                try:
                    topic = server.topic_admin.create_topic(
                        name, server.config.get("num.partitions"))
                except KafkaError:  # cluster mode: created meanwhile, not seen here yet
                    entries.append(_error_entry(name, ErrorCode.leader_not_available))
                    continue
            entries.append(topic_entry(ctx, topic, operations))
    cluster_ops = getattr(request, "include_cluster_authorized_operations", False)
    return {
        "throttle_time": 0,
        "brokers": broker_entries(ctx),
        "cluster_id": server.cluster_id,
        "controller_id": controller_id(ctx),
        "topics": entries,
        "cluster_authorized_operations": (
            CLUSTER_OPERATIONS if cluster_ops else OPERATIONS_NOT_REQUESTED
        ),
    }


_NO_NODE = {"node_id": -1, "host": "", "port": -1}


def _cluster_coordinator(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    """In cluster mode the coordinator of a group or transactional id is the leader of its
    internal topic's partition; the topic is created on first use (its replication factor
    capped by the live brokers) and COORDINATOR_NOT_AVAILABLE answers until it has a leader."""
    server = ctx.server
    manager = server.replica_manager
    assert manager is not None and server.membership is not None
    groups, txns = server.group_coordinator, server.txn_coordinator
    assert groups is not None and txns is not None
    if key_type == 0:
        topic, partitions = OFFSETS_TOPIC, groups.num_partitions
        ensure = groups.ensure_offsets_topic
    else:
        topic, partitions, ensure = TXN_STATE_TOPIC, txns.num_partitions, txns.ensure_topic
    if topic not in manager.assignments:
        ensure()
        return {**_NO_NODE, "error_code": ErrorCode.coordinator_not_available,
                "error_message": f"{topic} is being created"}
    info = manager.partitions.get((topic, partition_for(key, partitions)))
    leader = info.state.leader if info is not None and info.state is not None else -1
    registered = server.membership.brokers.get(leader)
    endpoint = registered.plaintext_endpoint() if registered is not None else None
    if endpoint is None:
        return {**_NO_NODE, "error_code": ErrorCode.coordinator_not_available,
                "error_message": "the coordinator has no leader yet"}
    return {"node_id": leader, "host": endpoint.host or "", "port": endpoint.port,
            "error_code": NONE, "error_message": None}


@api(10, "FindCoordinator", 0, 6)
async def find_coordinator(ctx: RequestContext, request: Any) -> dict[str, Any]:
    listener = ctx.server.advertised[0]
    key_type = getattr(request, "key_type", 0)
    keys = [request.key] if ctx.version < 4 else list(request.coordinator_keys)
    if key_type not in (0, 1):  # 0 group, 1 transaction
        nodes = [{**_NO_NODE, "error_code": ErrorCode.invalid_request,
                  "error_message": f"unknown coordinator key type {key_type}"} for _ in keys]
    elif ctx.server.replica_manager is not None:
        nodes = [_cluster_coordinator(ctx, key, key_type) for key in keys]
    else:
        nodes = [{"node_id": ctx.server.broker_id, "host": listener.host,
                  "port": listener.port, "error_code": NONE, "error_message": None}
                 for _ in keys]
    if ctx.version < 4:
        return {"throttle_time": 0, **nodes[0]}
    return {
        "throttle_time": 0,
        "coordinators": [{"key": key, **node} for key, node in zip(keys, nodes, strict=True)],
    }


@api(60, "DescribeCluster", 0, 1)
async def describe_cluster(ctx: RequestContext, request: Any) -> dict[str, Any]:
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
        "cluster_authorized_operations": (
            CLUSTER_OPERATIONS if operations else OPERATIONS_NOT_REQUESTED
        ),
    }
