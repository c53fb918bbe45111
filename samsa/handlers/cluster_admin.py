"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

Admin clients send these to the controller (the Metadata controller id); another broker
answers NOT_CONTROLLER and the client finds the controller again. The work runs on the
controller's event thread (controller.py). A single node leads every partition with its only
replica: elections are never needed and the only assignment is itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.zk import reassignment
from samsa.zk.controller import PREFERRED, Controller, NotControllerError, Outcome
from samsa.zk.zk_data import ReplicaAssignment

T = TypeVar("T")
TP = tuple[str, int]
NOT_CONTROLLER = "This is not the correct controller for this cluster."
NO_PARTITION = "The partition does not exist."


async def _on_controller(ctx: RequestContext, fn: Callable[[Controller], Callable[..., T]],
                         *args: Any) -> T:
    """Run a controller method; KafkaError(NOT_CONTROLLER) on the other brokers."""
    controller = ctx.server.controller
    assert controller is not None
    try:
        return await asyncio.wrap_future(controller.call(fn(controller), *args))
    except NotControllerError:
        raise KafkaError(NOT_CONTROLLER, ErrorCode.not_controller) from None


def _local_partitions(ctx: RequestContext) -> set[TP]:
    store = ctx.server.topics
    assert store is not None
    return {(t.name, p) for t in store.topics.values() for p in range(t.partitions)}


# --- ElectLeaders --------------------------------------------------------------------------------


@api(43, "ElectLeaders", 0, 2)
async def elect_leaders(ctx: RequestContext, request: Any) -> dict[str, Any]:
    election_type = getattr(request, "election_type", PREFERRED)
    wanted = None if request.topic_partitions is None else [
        (t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    if ctx.server.controller is None:
        known = _local_partitions(ctx)
        results: dict[TP, Outcome] = {
            tp: ((ErrorCode.election_not_needed, "Leader election not needed for topic "
                  "partition.") if tp in known else (ErrorCode.unknown_topic_or_partition,
                                                     NO_PARTITION))
            for tp in (sorted(known) if wanted is None else wanted)}
    else:
        try:
            results = await _on_controller(ctx, lambda c: c.elect_leaders, election_type,
                                           wanted)
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


def _local_reassignments(ctx: RequestContext, targets: dict[TP, tuple[int, ...] | None]
                         ) -> dict[TP, Outcome]:
    known = _local_partitions(ctx)
    results: dict[TP, Outcome] = {}
    for tp, target in targets.items():
        if tp not in known:
            results[tp] = (ErrorCode.unknown_topic_or_partition, NO_PARTITION)
        elif target is None:
            results[tp] = (ErrorCode.no_reassignment_in_progress,
                           f"No reassignment is in progress for topic {tp[0]} partition {tp[1]}")
        elif (problem := reassignment.check_target(target, {ctx.server.broker_id})) is not None:
            results[tp] = (ErrorCode.invalid_replica_assignment, problem)
        else:
            results[tp] = (ErrorCode.none, None)
    return results


@api(45, "AlterPartitionReassignments", 0, 0)
async def alter_partition_reassignments(ctx: RequestContext, request: Any) -> dict[str, Any]:
    targets: dict[TP, tuple[int, ...] | None] = {}
    duplicated: set[TP] = set()
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            if tp in targets:
                duplicated.add(tp)
            targets[tp] = None if p.replicas is None else tuple(int(r) for r in p.replicas)
    if ctx.server.controller is None:
        results = _local_reassignments(ctx, targets)
    else:
        try:
            results = await _on_controller(ctx, lambda c: c.alter_reassignments, targets)
        except KafkaError as exc:
            return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message,
                    "responses": []}
    for tp in duplicated:  # Kafka answers the last one; say the request repeated itself
        results[tp] = (ErrorCode.invalid_request, "Duplicate partition in the request.")
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (code, message) in results.items():
        topics.setdefault(topic, []).append(
            {"partition_index": index, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


# --- ListPartitionReassignments ------------------------------------------------------------------


@api(46, "ListPartitionReassignments", 0, 0)
async def list_partition_reassignments(ctx: RequestContext, request: Any) -> dict[str, Any]:
    wanted = None if request.topics is None else [
        (t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    found: dict[TP, ReplicaAssignment] = {}
    if ctx.server.controller is not None:
        try:
            found = await _on_controller(ctx, lambda c: c.list_reassignments, wanted)
        except KafkaError as exc:
            return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message,
                    "topics": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), a in sorted(found.items()):
        topics.setdefault(topic, []).append({
            "partition_index": index, "replicas": list(a.replicas),
            "adding_replicas": list(a.adding_replicas),
            "removing_replicas": list(a.removing_replicas)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
