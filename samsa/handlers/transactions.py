"""InitProducerId (22), AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61), DescribeTransactions (65),
ListTransactions (66).

The transaction coordinator (samsa/coordinator/txn_coordinator.py) does the work. As Kafka
does, clients older than the PRODUCER_FENCED error (InitProducerId < 4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn < 2) get INVALID_PRODUCER_EPOCH instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.coordinator.group_coordinator import OFFSETS_TOPIC
from samsa.coordinator.records import partition_for
from samsa.coordinator.txn_coordinator import (
    TXN_STATE_TOPIC,
    TransactionCoordinator,
    now_ms,
    state_named,
)
from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.authz import (
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
    authorized,
    unauthorized,
)
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.protocol.build import to_ms
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.end_txn.v3.request import EndTxnRequest
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest
    from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest
    from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest

log = logging.getLogger(__name__)

TXN_DENIED = ErrorCode.transactional_id_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
TOPIC_DENIED = ErrorCode.topic_authorization_failed
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_STATE_TOPIC})


def _may_write(ctx: RequestContext, txn_id: str) -> bool:
    """WRITE on the transactional id: every request of a transactional producer."""
    return authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)


def _txns(ctx: RequestContext) -> TransactionCoordinator:
    coordinator = ctx.server.txn_coordinator
    assert coordinator is not None
    return coordinator


def _fenced(code: ErrorCode, version: int, first_version: int) -> ErrorCode:
    if code == ErrorCode.producer_fenced and version < first_version:
        return ErrorCode.invalid_producer_epoch
    return code


@api(22, "InitProducerId", 0, 4)
async def init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> dict[str, Any]:
    if ctx.server.authorizer is not None:
        # a transactional producer: WRITE on its id; an idempotent one: IDEMPOTENT_WRITE on
        # the cluster or WRITE on any topic (KIP-679)
        if request.transactional_id is not None:
            refused = None if _may_write(ctx, request.transactional_id) else TXN_DENIED
        elif authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE) or \
                authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
            refused = None
        else:
            refused = ErrorCode.cluster_authorization_failed
        if refused is not None:
            return {"throttle_time": 0, "error_code": refused, "producer_id": -1,
                    "producer_epoch": -1}
    if request.transactional_id is None:
        assert ctx.server.producer_ids is not None
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "producer_id": ctx.server.producer_ids.next_id(), "producer_epoch": 0}
    txns = _txns(ctx)
    code, pid, epoch = await txns.init_producer_id(
        request.transactional_id, to_ms(request.transaction_timeout),
        getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1),
    )
    if code == ErrorCode.none and (lost := await txns.durable(request.transactional_id)):
        code, pid, epoch = lost, -1, -1
    return {"throttle_time": 0, "error_code": _fenced(code, ctx.version, 4),
            "producer_id": pid, "producer_epoch": epoch}


def _refused_partitions(ctx: RequestContext, txn_id: str, wanted: list[tuple[str, int]]
                        ) -> dict[tuple[str, int], ErrorCode] | None:
    """Kafka's checks (with an authorizer): WRITE on the transactional id, then on each topic
    (an internal topic never: AddOffsetsToTxn adds the offsets partition). Any refusal fails
    the whole request: the refused partitions say why, unknown ones UNKNOWN_TOPIC_OR_PARTITION,
    the others OPERATION_NOT_ATTEMPTED. None: all may be added."""
    if ctx.server.authorizer is None:
        return None
    if not _may_write(ctx, txn_id):
        return dict.fromkeys(wanted, TXN_DENIED)
    topics = {t for t, _ in wanted}
    allowed = authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, topics - INTERNAL_TOPICS)
    if topics <= allowed:
        return None
    exists = ctx.server.replicas.partition_exists
    return {tp: TOPIC_DENIED if tp[0] not in allowed
            else ErrorCode.unknown_topic_or_partition if not exists(*tp)
            else ErrorCode.operation_not_attempted for tp in wanted}


@api(24, "AddPartitionsToTxn", 0, 3)
async def add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> dict[str, Any]:
    wanted: list[tuple[str, int]] = [
        (t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    txns = _txns(ctx)
    codes = _refused_partitions(ctx, request.v3_and_below_transactional_id, wanted)
    if codes is None:
        codes = txns.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, wanted,
        )
    if ErrorCode.none in codes.values() and (
            lost := await txns.durable(request.v3_and_below_transactional_id)):
        codes = {tp: lost if code == ErrorCode.none else code for tp, code in codes.items()}
    return {"throttle_time": 0, "results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p,
             "partition_error_code": _fenced(codes[(t.name, p)], ctx.version, 2)}
            for p in t.partitions
        ]}
        for t in request.v3_and_below_topics
    ]}


@api(25, "AddOffsetsToTxn", 0, 3)
async def add_offsets_to_txn(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> dict[str, Any]:
    if not _may_write(ctx, request.transactional_id):
        return {"throttle_time": 0, "error_code": TXN_DENIED}
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED}
    txns = _txns(ctx)
    code = txns.add_offsets(request.transactional_id, request.producer_id,
                            request.producer_epoch, request.group_id)
    if code == ErrorCode.none:
        code = await txns.durable(request.transactional_id) or code
    return {"throttle_time": 0, "error_code": _fenced(code, ctx.version, 2)}


@api(26, "EndTxn", 0, 3)
async def end_txn(ctx: RequestContext, request: EndTxnRequest) -> dict[str, Any]:
    if not _may_write(ctx, request.transactional_id):
        return {"throttle_time": 0, "error_code": TXN_DENIED}
    code = await _txns(ctx).end_txn(request.transactional_id, request.producer_id,
                              request.producer_epoch, request.committed)
    return {"throttle_time": 0, "error_code": _fenced(code, ctx.version, 2)}


@api(28, "TxnOffsetCommit", 0, 3)
async def txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> dict[str, Any]:
    groups = ctx.server.group_coordinator
    assert groups is not None
    # WRITE on the transactional id, READ on the group (else every partition is refused),
    # then READ on each topic
    denied: dict[str, ErrorCode] = {}
    if ctx.server.authorizer is not None:
        names = {t.name for t in request.topics}
        if not _may_write(ctx, request.transactional_id):
            denied = dict.fromkeys(names, TXN_DENIED)
        elif not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            denied = dict.fromkeys(names, GROUP_DENIED)
        else:
            denied = dict.fromkeys(
                unauthorized(ctx, AclOperation.READ, ResourceType.TOPIC, names), TOPIC_DENIED)
    entries: list[tuple[str, int, int, int, str | None]] = [
        (topic.name, p.partition_index, p.committed_offset,
         getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for topic in request.topics if topic.name not in denied for p in topic.partitions
    ]
    # as Kafka's group coordinator: only the group's coordinator answers (NOT_COORDINATOR
    # sends the client to look it up again); then the transaction must have added the
    # group's partition (AddOffsetsToTxn)
    verified = ErrorCode.not_coordinator if not groups.coordinates(request.group_id) \
        else _txns(ctx).verify(
            request.transactional_id, request.producer_id, request.producer_epoch,
            OFFSETS_TOPIC, partition_for(request.group_id, groups.num_partitions))
    codes: dict[tuple[str, int], ErrorCode]
    if not entries:
        codes = {}
    elif verified != ErrorCode.none:
        codes = {(t, p): verified for t, p, *_ in entries}
    else:
        codes = groups.txn_commit(
            group_id=request.group_id, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            generation=getattr(request, "generation_id", -1),
            member_id=getattr(request, "member_id", ""),
            instance_id=getattr(request, "group_instance_id", None), offsets=entries,
        )
        # the offsets must reach the ISR before the client may end the transaction (Kafka
        # appends them with acks=-1): a new coordinator would not know them and the
        # transaction's input would be read again
        codes = await groups.acknowledged(request.group_id, codes)
    return {"throttle_time": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": denied.get(topic.name) or codes[(topic.name, p.partition_index)]}
            for p in topic.partitions
        ]}
        for topic in request.topics
    ]}


@api(65, "DescribeTransactions", 0, 0)
async def describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> dict[str, Any]:
    txns = _txns(ctx)
    states = []
    checked = ctx.server.authorizer is not None
    for txn_id in request.transactional_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            states.append({"error_code": TXN_DENIED, "transactional_id": txn_id,
                           "transaction_state": "", "transaction_timeout": 0,
                           "transaction_start_time": -1, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
            continue
        meta = txns.txns.get(txn_id)
        if meta is None:
            states.append({"error_code": ErrorCode.transactional_id_not_found,
                           "transactional_id": txn_id, "transaction_state": "",
                           "transaction_timeout": 0, "transaction_start_time": 0,
                           "producer_id": 0, "producer_epoch": 0, "topics": []})
            continue
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            topics.setdefault(topic, []).append(p)
        if checked:  # only the topics the principal may DESCRIBE
            for topic in unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics):
                del topics[topic]
        states.append({
            "error_code": ErrorCode.none, "transactional_id": txn_id,
            "transaction_state": meta.state.display, "transaction_timeout": meta.timeout_ms,
            "transaction_start_time": meta.start_ms, "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        })
    return {"throttle_time": 0, "transaction_states": states}


@api(66, "ListTransactions", 0, 1)
async def list_transactions(
    ctx: RequestContext, request: ListTransactionsRequest
) -> dict[str, Any]:
    wanted = {state_named(name) for name in request.state_filters}
    unknown = [name for name in request.state_filters if state_named(name) is None]
    pids = set(request.producer_id_filters)
    min_duration = getattr(request, "duration_filter", -1)
    now = now_ms()
    found = []
    checked = ctx.server.authorizer is not None
    for meta in _txns(ctx).txns.values():
        if request.state_filters and meta.state not in wanted:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if min_duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < min_duration):
            continue
        if checked and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                     meta.transactional_id):
            continue
        found.append({"transactional_id": meta.transactional_id,
                      "producer_id": meta.producer_id,
                      "transaction_state": meta.state.display})
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "unknown_state_filters": unknown, "transaction_states": found}


@api(61, "DescribeProducers", 0, 0)
async def describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> dict[str, Any]:
    denied = unauthorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                          (t.name for t in request.topics))  # READ on each topic
    topics = []
    for topic in request.topics:
        results: list[dict[str, Any]] = []
        for index in topic.partition_indexes:
            if topic.name in denied:
                results.append({"partition_index": index, "error_code": TOPIC_DENIED,
                                "error_message": None, "active_producers": []})
                continue
            partition, error = ctx.server.replicas.leader_partition(topic.name, index)
            if error is not None or partition is None:
                results.append({"partition_index": index,
                                "error_code": error or ErrorCode.unknown_topic_or_partition,
                                "error_message": None, "active_producers": []})
                continue
            state = partition.log.producer_state
            results.append({
                "partition_index": index, "error_code": ErrorCode.none, "error_message": None,
                "active_producers": [
                    {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                     "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                     "coordinator_epoch": e.coordinator_epoch,
                     "current_txn_start_offset": e.current_txn_first_offset}
                    for e in state.producers.values()
                ],
            })
        topics.append({"name": topic.name, "partitions": results})
    return {"throttle_time": 0, "topics": topics}


@api(27, "WriteTxnMarkers", 1, 1)
async def write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> dict[str, Any]:
    """Markers sent by a coordinator elsewhere, or by an admin aborting a hanging transaction
    (kafka-transactions abort). On one node the coordinator writes its own markers directly."""
    groups = ctx.server.group_coordinator
    # ALTER on the cluster (an admin aborting a transaction), else CLUSTER_ACTION (a broker)
    if ctx.server.authorizer is not None and not (
            authorize_cluster(ctx, AclOperation.ALTER)
            or authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)):
        return {"markers": [
            {"producer_id": m.producer_id, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": i, "error_code": ErrorCode.cluster_authorization_failed}
                    for i in t.partition_indexes]}
                for t in m.topics]}
            for m in request.markers]}
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            parts = []
            for index in topic.partition_indexes:
                partition, error = ctx.server.replicas.leader_partition(topic.name, index)
                code = ErrorCode.none
                if error is not None or partition is None:
                    code = error or ErrorCode.unknown_topic_or_partition
                else:
                    try:
                        partition.append_marker(marker.producer_id, marker.producer_epoch,
                                                marker.transaction_result,
                                                marker.coordinator_epoch)
                    except KafkaError as exc:
                        code = exc.code
                    else:
                        if topic.name == OFFSETS_TOPIC and groups is not None:
                            groups.complete_txn_offsets(index, marker.producer_id,
                                                        marker.transaction_result)
                parts.append({"partition_index": index, "error_code": code})
            topics.append({"name": topic.name, "partitions": parts})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": results}
