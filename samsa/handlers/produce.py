"""Produce (0) and InitProducerId (22).

Per partition: exactly one RecordBatch v2 (INDEX.md section 2, rule 15), validated and appended
as bytes by the log. acks=0 gets no response at all (rule 4); if such a request fails the
connection is closed, which is the only way Kafka can tell that producer.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.registry import api
from samsa.records.batch import LOG_OVERHEAD
from samsa.server.connection import CloseConnection
from samsa.server.context import RequestContext

log = logging.getLogger(__name__)

_BATCH_LENGTH = struct.Struct(">i")


def _partition_result(
    index: int, error: ErrorCode, base_offset: int = -1, append_time: int = -1,
    log_start: int = -1, message: str | None = None,
) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": error,
        "base_offset": base_offset,
        "log_append_time": append_time,
        "log_start_offset": log_start,
        "record_errors": [],
        "error_message": message,
    }


def _append(ctx: RequestContext, topic: str, index: int, records: bytes | None) -> dict[str, Any]:
    partition = ctx.server.partition(topic, index)
    if partition is None:
        return _partition_result(index, ErrorCode.unknown_topic_or_partition)
    if not records:
        return _partition_result(index, ErrorCode.invalid_record, message="no records")
    if len(records) >= LOG_OVERHEAD:
        (length,) = _BATCH_LENGTH.unpack_from(records, 8)
        if length + LOG_OVERHEAD < len(records):
            return _partition_result(
                index, ErrorCode.invalid_record,
                message="a produce request must hold exactly one record batch per partition",
            )
    try:
        info = partition.append(records)
    except KafkaError as exc:
        return _partition_result(
            index, exc.code, log_start=partition.log.log_start_offset, message=str(exc)
        )
    return _partition_result(
        index, ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset
    )


@api(0, "Produce", 3, 11)
async def produce(ctx: RequestContext, request: Any) -> dict[str, Any] | None:
    acks = request.acks
    responses = []
    for topic in request.topic_data or ():
        results = []
        for data in topic.partition_data or ():
            if acks not in (0, 1, -1):
                results.append(_partition_result(data.index, ErrorCode.invalid_required_acks))
            elif request.transactional_id is not None:
                results.append(_partition_result(
                    data.index, ErrorCode.transactional_id_authorization_failed,
                    message="transactions are not supported by this broker yet",
                ))
            else:
                results.append(_append(ctx, topic.name, data.index, data.records))
        responses.append({"name": topic.name, "partition_responses": results})
    if acks == 0:
        failed = [r for t in responses for r in t["partition_responses"] if r["error_code"]]
        if failed:
            raise CloseConnection(
                f"acks=0 produce failed with {ErrorCode(failed[0]['error_code']).name}"
            )
        return None
    return {"responses": responses, "throttle_time": 0}


@api(22, "InitProducerId", 0, 4)
async def init_producer_id(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        log.warning("InitProducerId for transactional id %r refused: transactions are not "
                    "supported yet", request.transactional_id)
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed,
                "producer_id": -1, "producer_epoch": -1}
    assert ctx.server.producer_ids is not None
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": ctx.server.producer_ids.next_id(),
        "producer_epoch": 0,
    }
