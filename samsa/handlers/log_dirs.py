"""DescribeLogDirs (35): the broker's log directories and the partition logs in each, as
Kafka's ``ReplicaManager.describeLogDirs``.

DESCRIBE on the cluster is needed (else CLUSTER_AUTHORIZATION_FAILED, from v3 in the answer's
error code; before it, no directories). Each directory is named by its absolute path; an
offline one answers KAFKA_STORAGE_ERROR and no partitions. A partition's size is its log's
segment bytes; its offset lag is zero (Kafka's: how far the high watermark is past the log end,
which only a future log of AlterReplicaLogDirs can be, and samsa moves no replica between
directories). From v4 each directory also has its volume's total and usable bytes.
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
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest


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
