"""ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21): offsets of a log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.cluster.partition import Partition
from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.authz import authorize_cluster, unauthorized
from samsa.handlers.context import RequestContext
from samsa.handlers.fetch import READ_COMMITTED
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.delete_records.v2.request import DeleteRecordsRequest
    from kio.schema.list_offsets.v8.request import ListOffsetsRequest
    from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
DEBUGGING_REPLICA_ID = -2  # ListOffsets from any replica, not only the leader (Kafka's)


def _list_offset(
    partition: Partition, timestamp: int, read_committed: bool, replica: bool = False
) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets query; (-1, -1) when there is none. A follower
    (``replica``) may see up to the log end, as its fetches do."""
    log = partition.log
    if replica:
        fetchable = log.log_end_offset
    else:
        fetchable = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST:
        return fetchable, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    found = log.max_timestamp_offset() if timestamp == MAX_TIMESTAMP else (
        log.offset_for_timestamp(timestamp) if timestamp >= 0 else None
    )
    if found is None or found.offset >= fetchable:
        return -1, -1
    return found.offset, found.timestamp


@api(2, "ListOffsets", 1, 8)
async def list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> dict[str, Any]:
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    replica_id = getattr(request, "replica_id", -1)
    replica = replica_id >= 0
    denied: set[str] = set()
    if ctx.server.authorizer is not None:  # DESCRIBE on each topic
        names = [t.name for t in request.topics or ()]
        denied = unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for topic in request.topics or ():
        results = []
        for p in topic.partitions or ():
            result = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
                      "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if topic.name in denied:
                result["error_code"] = ErrorCode.topic_authorization_failed
                results.append(result)
                continue
            partition, error = ctx.server.replicas.leader_partition(
                topic.name, p.partition_index, getattr(p, "current_leader_epoch", -1),
                require_leader=replica_id != DEBUGGING_REPLICA_ID)
            if error is not None or partition is None:
                result["error_code"] = error or ErrorCode.unknown_topic_or_partition
            elif p.timestamp < 0 and p.timestamp not in (
                LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL
            ) or (p.timestamp == MAX_TIMESTAMP and ctx.version < 7):
                result["error_code"] = ErrorCode.unsupported_version
            else:
                offset, timestamp = _list_offset(partition, p.timestamp, read_committed,
                                                 replica)
                result.update(offset=offset, timestamp=timestamp)
                if p.timestamp == LATEST:  # Kafka's Partition: the leader's current epoch
                    result["leader_epoch"] = partition.leader_epoch
                elif offset >= 0:
                    result["leader_epoch"] = partition.log.epoch_for_offset(offset)
            results.append(result)
        topics.append({"name": topic.name, "partitions": results})
    return {"throttle_time": 0, "topics": topics}


@api(23, "OffsetForLeaderEpoch", 2, 4)
async def offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> dict[str, Any]:
    denied: set[str] = set()
    if ctx.server.authorizer is not None and not authorize_cluster(
            ctx, AclOperation.CLUSTER_ACTION):  # a follower's, else DESCRIBE on each topic
        names = [t.topic for t in request.topics or ()]
        denied = unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = []
    for topic in request.topics or ():
        results = []
        for p in topic.partitions or ():
            result = {"error_code": ErrorCode.none, "partition": p.partition,
                      "leader_epoch": -1, "end_offset": -1}
            if topic.topic in denied:
                result["error_code"] = ErrorCode.topic_authorization_failed
                results.append(result)
                continue
            partition, error = ctx.server.replicas.leader_partition(topic.topic, p.partition,
                                                                    p.current_leader_epoch)
            if error is not None or partition is None:
                result["error_code"] = error or ErrorCode.unknown_topic_or_partition
            else:
                epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                result.update(leader_epoch=epoch, end_offset=end)
            results.append(result)
        topics.append({"topic": topic.topic, "partitions": results})
    return {"throttle_time": 0, "topics": topics}


@api(21, "DeleteRecords", 0, 2)
async def delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> dict[str, Any]:
    server = ctx.server
    denied: set[str] = set()
    if server.authorizer is not None:  # DELETE on each topic
        names = [t.name for t in request.topics or ()]
        denied = unauthorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
    topics = []
    changed = False
    for topic in request.topics or ():
        results = []
        for p in topic.partitions or ():
            result = {"partition_index": p.partition_index, "low_watermark": -1,
                      "error_code": ErrorCode.none}
            if topic.name in denied:
                result["error_code"] = ErrorCode.topic_authorization_failed
                results.append(result)
                continue
            partition, error = server.replicas.leader_partition(topic.name, p.partition_index)
            if error is not None or partition is None:
                result["error_code"] = error or ErrorCode.unknown_topic_or_partition
            else:
                target = partition.high_watermark if p.offset == -1 else p.offset
                try:
                    if target > partition.high_watermark:
                        raise KafkaError(
                            f"offset {target} is past the high watermark",
                            ErrorCode.offset_out_of_range,
                        )
                    result["low_watermark"] = partition.log.delete_records_before(target)
                    changed = True
                except KafkaError as exc:
                    result["error_code"] = exc.code
            results.append(result)
        topics.append({"name": topic.name, "partitions": results})
    if changed:
        server.log_manager.checkpoint_log_start_offsets()
    return {"throttle_time": 0, "topics": topics}
