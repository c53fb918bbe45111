"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

Admin clients send these to the controller (the Metadata controller id); another broker
answers NOT_CONTROLLER and the client finds the controller again. Topic administration does the
work (``TopicAdmin``): in cluster mode on the controller's event thread (zk/controller.py); a
single node leads every partition with its only replica, so elections are never needed and the
only assignment is itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.cluster.topic_admin import TP, Outcome
from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.authz import MESSAGES, authorize_cluster
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
    )
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

PREFERRED = 0  # ElectLeaders' election type when a version has none
DENIED = ErrorCode.cluster_authorization_failed  # each needs ALTER (List: DESCRIBE) on the cluster


# --- ElectLeaders --------------------------------------------------------------------------------


@api(43, "ElectLeaders", 0, 2)
async def elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> dict[str, Any]:
    election_type = getattr(request, "election_type", PREFERRED)
    wanted = None if request.topic_partitions is None else [
        (t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return {"throttle_time": 0, "error_code": DENIED, "replica_election_results":
                _election_results({tp: (DENIED, None) for tp in wanted or ()})}
    try:
        results = await ctx.server.topic_admin.elect_leaders(election_type, wanted)
    except KafkaError as exc:  # v0 has no top-level error: every partition gets it
        results = {tp: (exc.code, exc.message) for tp in wanted or ()}
        return {"throttle_time": 0, "error_code": exc.code,
                "replica_election_results": _election_results(results)}
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "replica_election_results": _election_results(results)}


def _election_results(results: dict[TP, Outcome]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (code, message) in results.items():
        topics.setdefault(topic, []).append(
            {"partition_id": index, "error_code": code, "error_message": message})
    return [{"topic": t, "partition_result": ps} for t, ps in topics.items()]


# --- AlterPartitionReassignments -----------------------------------------------------------------


@api(45, "AlterPartitionReassignments", 0, 0)
async def alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return {"throttle_time": 0, "error_code": DENIED, "error_message": MESSAGES[DENIED],
                "responses": []}
    targets: dict[TP, tuple[int, ...] | None] = {}
    duplicated: set[TP] = set()
    for topic in request.topics:
        for p in topic.partitions:
            tp: TP = (topic.name, int(p.partition_index))
            if tp in targets:
                duplicated.add(tp)
            targets[tp] = None if p.replicas is None else tuple(int(r) for r in p.replicas)
    try:
        results = await ctx.server.topic_admin.alter_reassignments(targets)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message,
                "responses": []}
    for tp in duplicated:  # Kafka answers the last one; say the request repeated itself
        results[tp] = (ErrorCode.invalid_request, "Duplicate partition in the request.")
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), (code, message) in results.items():
        topics.setdefault(name, []).append(
            {"partition_index": index, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


# --- ListPartitionReassignments ------------------------------------------------------------------


@api(46, "ListPartitionReassignments", 0, 0)
async def list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": DENIED, "error_message": MESSAGES[DENIED],
                "topics": []}
    wanted = None if request.topics is None else [
        (t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    try:
        found = await ctx.server.topic_admin.list_reassignments(wanted)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message,
                "topics": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), a in sorted(found.items()):
        topics.setdefault(topic, []).append({
            "partition_index": index, "replicas": list(a.replicas),
            "adding_replicas": list(a.adding), "removing_replicas": list(a.removing)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
