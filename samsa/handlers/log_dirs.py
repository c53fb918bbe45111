"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): the broker's log directories, the
partition logs in each, and moving a replica from one to another, as Kafka's
``ReplicaManager.describeLogDirs`` and ``alterReplicaLogDirs``.

DescribeLogDirs needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED, from v3 in
the answer's error code; before it, no directories). Each directory is named by its absolute
path; an offline one answers KAFKA_STORAGE_ERROR and no partitions. A partition's size is its
log's segment bytes; its offset lag is zero. A replica being moved is listed twice: where it
is, and in the destination as the future replica (``is_future_key``), whose offset lag is how
far its log end is behind the current one's. From v4 each directory also has its volume's
total and usable bytes.

AlterReplicaLogDirs needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every
partition, as the request named them). Each partition's move is started, or refused, by
``LogDirMover.alter`` (samsa.cluster.log_dir_mover): LOG_DIR_NOT_FOUND for a path that is not
one of ``log.dirs``, KAFKA_STORAGE_ERROR for an offline directory or replica (or while any
directory is offline), REPLICA_NOT_AVAILABLE for a partition of the cluster this broker does not
host (the directory is remembered: the replica is created there when it comes),
UNKNOWN_TOPIC_OR_PARTITION for one the cluster does not have; the move itself runs after the
answer. A partition named twice gets the last directory named, as Kafka's map of them does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.errors import ErrorCode
from samsa.handlers.authz import authorize_cluster
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest


@api(34, "AlterReplicaLogDirs", 1, 2)
async def alter_replica_log_dirs(ctx: RequestContext, request: AlterReplicaLogDirsRequest
                                 ) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        denied = ErrorCode.cluster_authorization_failed
        return {"throttle_time": 0, "results": [
            {"topic_name": t.name, "partitions": [
                {"partition_index": p, "error_code": denied} for p in t.partitions]}
            for d in request.dirs for t in d.topics]}
    wanted: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, int(p))] = d.path
    mover = ctx.server.replicas.mover
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), path in wanted.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "error_code": mover.alter(topic, index, path)})
    return {"throttle_time": 0, "results": [
        {"topic_name": topic, "partitions": partitions}
        for topic, partitions in by_topic.items()]}


@api(35, "DescribeLogDirs", 1, 4)
async def describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest
                            ) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "results": []}
    wanted = None if request.topics is None else {
        (t.topic, int(p)) for t in request.topics for p in t.partitions}
    manager = ctx.server.log_manager
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {d: {} for d in manager.dirs}
    for tp, log in sorted(manager.logs.items()):
        if wanted is not None and tp not in wanted:
            continue
        directory = manager.dir_of(tp)
        if directory is None or directory not in by_dir:
            continue
        by_dir[directory].setdefault(tp[0], []).append({
            "partition_index": tp[1], "partition_size": log.size, "offset_lag": 0,
            "is_future_key": False})
        future = manager.futures.get(tp)
        if future is not None and future.directory in by_dir:
            copied = future.log.log_end_offset if future.log is not None else (
                log.log_start_offset)
            by_dir[future.directory].setdefault(tp[0], []).append({
                "partition_index": tp[1], "partition_size": future.size,
                "offset_lag": max(0, log.log_end_offset - copied), "is_future_key": True})
    results = []
    for directory, topics in by_dir.items():
        offline = manager.failures.is_offline(directory)
        total, usable = (-1, -1) if offline else _volume(directory)
        results.append({
            "error_code": ErrorCode.kafka_storage_error if offline else ErrorCode.none,
            "log_dir": str(directory.absolute()),
            "topics": [] if offline else [{"name": name, "partitions": partitions}
                                          for name, partitions in topics.items()],
            "total_bytes": total, "usable_bytes": usable,
        })
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}


def _volume(directory: Path) -> tuple[int, int]:
    """Total and usable bytes of the directory's file system (Java's getTotalSpace and
    getUsableSpace); -1 each when it cannot be read."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
