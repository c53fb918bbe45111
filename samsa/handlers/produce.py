"""Produce (0).

Per partition: exactly one RecordBatch v2 (INDEX.md section 2, rule 15), validated and appended
as bytes by the log. acks=0 gets no response at all (rule 4); if such a request fails the
connection is closed, which is the only way Kafka can tell that producer.

A transactional batch is verified with the transaction coordinator first (as KIP-890 has the
leader do): its producer must hold the transactional id's current epoch, inside an open
transaction that added the partition; otherwise the data could hang the last stable offset.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from samsa.cluster.partition import Partition
from samsa.errors import CloseConnection, ErrorCode, KafkaError, RecordErrors
from samsa.handlers.authz import authorize, unauthorized
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.handlers.topics import INTERNAL_TOPICS
from samsa.records.batch import HEADER_SIZE, LOG_OVERHEAD, Attr, read_header
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.produce.v11.request import ProduceRequest

log = logging.getLogger(__name__)

_BATCH_LENGTH = struct.Struct(">i")
_UNKNOWN_LOG_START = frozenset({
    ErrorCode.corrupt_message, ErrorCode.message_too_large, ErrorCode.record_list_too_large,
    ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition})
# the client id of Kafka's own admin tools that may write to internal topics (AdminUtils)
ADMIN_CLIENT_ID = "__admin_client"


def _partition_result(
    index: int, error: ErrorCode, base_offset: int = -1, append_time: int = -1,
    log_start: int = -1, message: str | None = None,
    record_errors: Sequence[tuple[int, str]] = (),
) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": error,
        "base_offset": base_offset,
        "log_append_time": append_time,
        "log_start_offset": log_start,
        "record_errors": [{"batch_index": i, "batch_index_error_message": why}
                          for i, why in record_errors],
        "error_message": message,
    }


_ATTRIBUTES_LOW = 22  # the low byte of the int16 attributes of a batch
# produce errors that mean the records themselves were refused (Kafka's BytesRejectedPerSec)
_REJECTED = frozenset({ErrorCode.corrupt_message, ErrorCode.invalid_record,
                       ErrorCode.message_too_large, ErrorCode.record_list_too_large,
                       ErrorCode.invalid_timestamp})


def _append(
    ctx: RequestContext, topic: str, index: int, records: bytes | None, txn_id: str | None,
    acks: int, waits: list[tuple[dict[str, Any], Partition, int]],
) -> dict[str, Any]:
    partition, error = ctx.server.replicas.leader_partition(topic, index)
    if error is ErrorCode.unknown_topic_or_partition or partition is None and error is None:
        return _partition_result(index, ErrorCode.unknown_topic_or_partition)
    if topic in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
        # the coordinators' own logs: only they write there (Kafka's ReplicaManager)
        return _partition_result(index, ErrorCode.invalid_topic_exception,
                                 message=f"Cannot append to internal topic {topic}")
    if error is not None or partition is None:
        return _partition_result(index, error or ErrorCode.unknown_topic_or_partition)
    if partition.replicated:
        min_isr = partition.log.config.min_insync_replicas
        if acks == -1 and len(partition.isr) < min_isr:
            return _partition_result(index, ErrorCode.not_enough_replicas, message=(
                f"{len(partition.isr)} in-sync replicas, min.insync.replicas is {min_isr}"))
    if not records:
        return _partition_result(index, ErrorCode.invalid_record, message="no records")
    if len(records) >= LOG_OVERHEAD:
        (length,) = _BATCH_LENGTH.unpack_from(records, 8)
        if length + LOG_OVERHEAD < len(records):
            return _partition_result(
                index, ErrorCode.invalid_record,
                message="a produce request must hold exactly one record batch per partition",
            )
    # shorter than a header: the log refuses it (CORRUPT_MESSAGE) without reading it
    if len(records) >= HEADER_SIZE and records[_ATTRIBUTES_LOW] & Attr.TRANSACTIONAL:
        header = read_header(records)
        txns = ctx.server.txn_coordinator
        assert txns is not None
        if txn_id is None:  # Kafka refuses these before anything else
            return _partition_result(
                index, ErrorCode.transactional_id_authorization_failed,
                message="transactional records in a produce request without a transactional id",
            )
        code = txns.verify(txn_id, header.producer_id, header.producer_epoch, topic, index)
        if code != ErrorCode.none:
            return _partition_result(
                index, code, message=f"transaction verification failed for {txn_id!r}"
            )
    try:
        info = partition.append(records)
    except KafkaError as exc:
        if ctx.server.metrics is not None:
            ctx.server.metrics.topics.produce_failed(topic, len(records), exc.code in _REJECTED)
        # Kafka's ReplicaManager answers the log start offset with every refusal but these
        log_start = -1 if exc.code in _UNKNOWN_LOG_START else partition.log.log_start_offset
        return _partition_result(
            index, exc.code, log_start=log_start, message=str(exc),
            record_errors=exc.errors if isinstance(exc, RecordErrors) else [],
        )
    result = _partition_result(
        index, ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset
    )
    if ctx.server.metrics is not None:
        ctx.server.metrics.topics.produced(
            topic, len(records), info.last_offset - info.first_offset + 1)
    if acks == -1 and partition.replicated:
        waits.append((result, partition, info.last_offset + 1))
    return result


async def _await_replication(
    waits: list[tuple[dict[str, Any], Partition, int]], timeout_s: float
) -> None:
    """acks=all on a replicated partition: answer once the ISR has the records (the high
    watermark passed them), REQUEST_TIMED_OUT after the request's timeout."""
    done = await asyncio.gather(*(p.wait_replicated(end, timeout_s) for _, p, end in waits))
    for (result, partition, _), replicated in zip(waits, done, strict=True):
        if not replicated and partition.offline:
            result.update(error_code=ErrorCode.kafka_storage_error, base_offset=-1,
                          error_message="the partition's log directory failed")
        elif not replicated and (partition.closed or not partition.is_leader):
            # leadership moved while it waited, as Kafka's DelayedProduce answers
            result.update(error_code=ErrorCode.not_leader_or_follower, base_offset=-1,
                          error_message="this broker stopped leading the partition")
        elif not replicated:
            result.update(error_code=ErrorCode.request_timed_out, base_offset=-1,
                          error_message="the records did not reach the in-sync replicas in time")
        elif len(partition.isr) < partition.log.config.min_insync_replicas:
            result.update(error_code=ErrorCode.not_enough_replicas_after_append,
                          error_message="the ISR shrank below min.insync.replicas")


def _is_transactional(records: bytes | None) -> bool:
    return (records is not None and len(records) >= HEADER_SIZE
            and bool(records[_ATTRIBUTES_LOW] & Attr.TRANSACTIONAL))


def _denials(ctx: RequestContext, request: ProduceRequest) -> tuple[ErrorCode | None, set[str]]:
    """Kafka's checks (with an authorizer): transactional records need WRITE on the
    transactional id (else the whole request is refused), each topic WRITE."""
    txn_id = request.transactional_id
    if any(_is_transactional(d.records) for t in request.topic_data or ()
           for d in t.partition_data or ()) and (txn_id is None or not authorize(
               ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)):
        return ErrorCode.transactional_id_authorization_failed, set()
    names = [t.name for t in request.topic_data or ()]
    return None, unauthorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)


# Advertised from v0 as Kafka 4 does (KAFKA-18659, registry.py); v0-v2 close the connection.
@api(0, "Produce", 3, 11, advertised_min_version=0)
async def produce(ctx: RequestContext, request: ProduceRequest) -> dict[str, Any] | None:
    acks = request.acks
    responses: list[dict[str, Any]] = []
    waits: list[tuple[dict[str, Any], Partition, int]] = []
    refused: ErrorCode | None = None
    denied: set[str] = set()
    if ctx.server.authorizer is not None:
        refused, denied = _denials(ctx, request)
    for topic in request.topic_data or ():
        results = []
        for data in topic.partition_data or ():
            if refused is not None:
                results.append(_partition_result(data.index, refused))
            elif topic.name in denied:
                results.append(_partition_result(
                    data.index, ErrorCode.topic_authorization_failed))
            elif acks not in (0, 1, -1):
                results.append(_partition_result(data.index, ErrorCode.invalid_required_acks))
            else:
                results.append(_append(ctx, topic.name, data.index, data.records,
                                       request.transactional_id, acks, waits))
        responses.append({"name": topic.name, "partition_responses": results})
    if waits:
        metrics = ctx.server.metrics
        if metrics is None:
            await _await_replication(waits, request.timeout.total_seconds())
        else:
            metrics.delayed_produce += 1
            waited = time.monotonic()
            try:
                await _await_replication(waits, request.timeout.total_seconds())
            finally:
                metrics.delayed_produce -= 1
                ctx.remote_s += time.monotonic() - waited
    if acks == 0:
        failed = [r for t in responses for r in t["partition_responses"] if r["error_code"]]
        if failed:
            raise CloseConnection(
                f"acks=0 produce failed with {ErrorCode(failed[0]['error_code']).name}"
            )
        return None
    return {"responses": responses, "throttle_time": 0}
