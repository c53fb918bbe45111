"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

One node: every partition has exactly one replica, on this broker. In cluster mode the topics
go to ZooKeeper (TopicAdmin.create_topic, delete_topics, add_partitions) and the answer waits
until this broker has seen the change. Checks and messages follow Kafka's controller
(ReplicationControlManager and ControllerApis).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from samsa.cluster.topic_admin import wait_until
from samsa.cluster.topics import Topic, topic_name_problem
from samsa.config import ConfigError, LogConfig, warn_deprecated
from samsa.errors import ErrorCode, KafkaError, error
from samsa.handlers.authz import authorize, authorize_cluster, authorized, unauthorized
from samsa.handlers.configs import topic_config_entries
from samsa.handlers.context import Broker, RequestContext
from samsa.handlers.registry import api
from samsa.protocol.build import to_ms
from samsa.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.create_partitions.v3.request import (
        CreatePartitionsRequest,
        CreatePartitionsTopic,
    )
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as NamedDeleteTopicsRequest
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest

ZERO_UUID = uuid.UUID(int=0)
# Kafka's internal topics (org.apache.kafka.common.internals.Topic.isInternal).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Kafka's controller refuses an operation that would write more than this many records
# (QuorumController.MAX_RECORDS_PER_USER_OP); here, partitions created by one request.
MAX_PARTITIONS_PER_REQUEST = 10000
_TOO_LARGE = "Unable to perform excessively large batch operation."

DELETION_DISABLED = "Topic deletion is disabled."
TOPIC_DENIED = ErrorCode.topic_authorization_failed
UNKNOWN_TOPIC = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID = "This server does not host this topic ID."
# controller_mutation_rate (KIP-599): the versions that refuse topics over the quota; older
# ones are accepted and the client throttled (samsa/server/quotas.py)
STRICT_CREATE_TOPICS, STRICT_DELETE_TOPICS, STRICT_CREATE_PARTITIONS = 6, 5, 3
THROTTLED = "The throttling quota has been exceeded."


def _collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics that differ only there."""
    return name.replace(".", "_")


def _check_manual_assignment(server: Broker, broker_ids: Sequence[int]) -> None:
    if not broker_ids:
        raise error(ErrorCode.invalid_replica_assignment,
                         "The manual partition assignment includes an empty replica list.")
    live = server.topic_admin.live_brokers()
    for broker_id, count in Counter(broker_ids).items():
        if broker_id not in live:
            raise error(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                f"broker is registered.",
            )
        if count > 1:
            raise error(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than "
                f"once.",
            )


def _check_replication_factor(server: Broker, factor: int) -> None:
    live = len(server.topic_admin.live_brokers())
    if factor > live:
        raise error(ErrorCode.invalid_replication_factor,
                    f"Replication factor: {factor} larger than available brokers: {live}.")


# --- CreateTopics --------------------------------------------------------------------------------


def _topic_configs(server: Broker, topic: CreatableTopic) -> dict[str, str]:
    nulls = [c.name for c in topic.configs or () if c.value is None]
    if nulls:
        raise error(ErrorCode.invalid_config,
                         "Null value not supported for topic configs: " + ",".join(nulls))
    # every value (nulls were refused above): the filter tells the type checker so
    configs = {c.name: c.value for c in topic.configs or () if c.value is not None}
    try:
        LogConfig.from_props(configs, defaults=server.log_manager.defaults)
    except ConfigError as exc:
        raise error(ErrorCode.invalid_config, str(exc)) from None
    warn_deprecated(configs, f"topic {topic.name}")
    return configs


def _partition_count(server: Broker, topic: CreatableTopic) -> int:
    """Partitions of the new topic, after checking the assignment or the counts."""
    if topic.assignments:
        if topic.replication_factor != -1:
            raise error(ErrorCode.invalid_request,
                             "A manual partition assignment was specified, but replication "
                             "factor was not set to -1.")
        if topic.num_partitions != -1:
            raise error(ErrorCode.invalid_request,
                             "A manual partition assignment was specified, but numPartitions "
                             "was not set to -1.")
        seen: set[int] = set()
        for assignment in topic.assignments:
            if assignment.partition_index in seen:
                raise error(ErrorCode.invalid_replica_assignment,
                                 f"Found multiple manual partition assignments for partition "
                                 f"{assignment.partition_index}")
            seen.add(assignment.partition_index)
            _check_manual_assignment(server, assignment.broker_ids)
        if seen != set(range(len(seen))):
            raise error(ErrorCode.invalid_replica_assignment,
                             "partitions should be a consecutive 0-based integer sequence")
        return len(seen)
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise error(ErrorCode.invalid_replication_factor,
                         "Replication factor must be larger than 0, or -1 to use the default "
                         "value.")
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise error(ErrorCode.invalid_partitions,
                         "Number of partitions was set to an invalid non-positive value.")
    factor = topic.replication_factor
    if factor == -1:
        factor = server.config.get("default.replication.factor")
    _check_replication_factor(server, factor)
    if topic.num_partitions == -1:
        return int(server.config.get("num.partitions"))
    return int(topic.num_partitions)


def _created_result(
    ctx: RequestContext, name: str, topic_id: uuid.UUID | None, partitions: int,
    configs: dict[str, str], replication_factor: int, shown: bool = True,
) -> dict[str, Any]:
    """``shown``: the principal may DESCRIBE_CONFIGS the topic; else its configs, partitions
    and replication factor are left out (TOPIC_AUTHORIZATION_FAILED as the config error)."""
    if not shown:
        return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.none,
                "error_message": None, "topic_config_error_code": TOPIC_DENIED,
                "num_partitions": -1, "replication_factor": -1, "configs": []}
    entries = sorted(topic_config_entries(ctx.server, configs), key=lambda e: e["name"])
    return {
        "name": name,
        "topic_id": topic_id,
        "error_code": ErrorCode.none,
        "error_message": None,
        "topic_config_error_code": ErrorCode.none,
        "num_partitions": partitions,
        "replication_factor": replication_factor,
        "configs": entries,
    }


def _failed_result(name: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": None,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


@api(19, "CreateTopics", 2, 7)
async def create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> dict[str, Any]:
    server = ctx.server
    store = server.topics
    assert store is not None
    requested = list(request.topics or ())
    counts = Counter(t.name for t in requested)
    validate_only = bool(request.validate_only)
    taken = {_collision_key(name): name for name in store.topics}
    budget = MAX_PARTITIONS_PER_REQUEST
    results = []
    answered: set[str] = set()
    made: dict[str, uuid.UUID] = {}
    # CREATE on the cluster, else on each topic; DESCRIBE_CONFIGS to be shown its configs
    may_create: set[str] | None = None
    may_see: set[str] | None = None
    quota = ctx.mutation_quota(STRICT_CREATE_TOPICS)
    if server.authorizer is not None:
        names = set(counts)
        if not authorize_cluster(ctx, AclOperation.CREATE):
            may_create = authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
        may_see = authorized(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    for topic in requested:
        name = topic.name
        if name in answered:
            continue
        answered.add(name)
        if counts[name] > 1:
            results.append(_failed_result(name, ErrorCode.invalid_request,
                                          "Duplicate topic name."))
            continue
        if may_create is not None and name not in may_create:
            results.append(_failed_result(name, TOPIC_DENIED, "Authorization failed."))
            continue
        try:
            problem = topic_name_problem(name)
            if problem:
                raise error(ErrorCode.invalid_topic_exception, problem)
            if store.get(name) is not None:
                raise error(ErrorCode.topic_already_exists,
                                 f"Topic '{name}' already exists.")
            colliding = taken.get(_collision_key(name))
            if colliding is not None:
                raise error(ErrorCode.invalid_topic_exception,
                                 f"Topic '{name}' collides with existing topic: {colliding}")
            configs = _topic_configs(server, topic)
            partitions = _partition_count(server, topic)
            if partitions > budget:
                raise error(ErrorCode.policy_violation, _TOO_LARGE)
        except KafkaError as exc:
            results.append(_failed_result(name, exc.code, exc.message))
            continue
        if not validate_only and not quota.record(partitions):
            results.append(_failed_result(name, ErrorCode.throttling_quota_exceeded, THROTTLED))
            continue
        budget -= partitions
        taken[_collision_key(name)] = name
        topic_id = uuid.uuid4()  # validate_only: Kafka answers an id too (of no topic)
        manual: dict[int, list[int]] = {
            a.partition_index: [int(b) for b in a.broker_ids] for a in topic.assignments or ()}
        factor = (len(next(iter(manual.values()))) if manual
                  else topic.replication_factor if topic.replication_factor > 0
                  else server.config.get("default.replication.factor"))
        if not validate_only:
            try:
                created = server.topic_admin.create_topic(
                    name, partitions, configs, internal=name in INTERNAL_TOPICS,
                    replication_factor=factor, assignment=manual or None)
            except KafkaError as exc:  # cluster mode: created meanwhile elsewhere
                results.append(_failed_result(name, exc.code, exc.message))
                continue
            topic_id = created.topic_id
            made[name] = topic_id
        results.append(_created_result(ctx, name, topic_id, partitions, configs, factor,
                                       may_see is None or name in may_see))
    timeout_ms = to_ms(request.timeout)
    if made and timeout_ms > 0:
        # As Kafka's DelayedCreatePartitions: answer once this broker knows the new topics (in
        # cluster mode the broker learns them from ZooKeeper), so a CreatePartitions or a
        # Produce right after the answer finds them.
        late = await wait_until(lambda: {n for n, i in made.items()
                                         if (t := store.get(n)) is None or t.topic_id != i},
                                timeout_ms)
        for result in results:
            if result["name"] in late and result["error_code"] == ErrorCode.none:
                result["error_code"] = ErrorCode.request_timed_out
                result["error_message"] = "The topic was created; its metadata did not reach " \
                                          "this broker within the timeout."
    return {"throttle_time": quota.throttle_time_ms, "topics": results}


# --- DeleteTopics --------------------------------------------------------------------------------


def _delete_result(
    name: str | None, topic_id: uuid.UUID | None, code: ErrorCode = ErrorCode.none,
    message: str | None = None,
) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


def _requested_deletions(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, topic id) pairs as the client sent them; one of the two may be None."""
    if ctx.version < 6:  # v1-v5 name the topics (v5's request)
        return [(name, None)
                for name in cast("NamedDeleteTopicsRequest", request).topic_names or ()]
    return [
        (t.name, None if t.topic_id in (None, ZERO_UUID) else t.topic_id)
        for t in request.topics or ()
    ]


def _deletion_refused(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None, topic: Topic | None,
) -> dict[str, Any] | None:
    """Kafka's checks: a topic named by id needs DESCRIBE, or its name is not told (an unknown
    id is UNKNOWN_TOPIC_ID first); every topic needs DELETE, before whether it exists."""
    if topic_id is not None:
        if topic is None:
            return None
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            return _delete_result(None, topic_id, TOPIC_DENIED)
        name = topic.name
    assert name is not None
    if not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
        return _delete_result(name, topic_id, TOPIC_DENIED)
    return None


@api(20, "DeleteTopics", 1, 6)
async def delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> dict[str, Any]:
    server = ctx.server
    store = server.topics
    assert store is not None
    wanted = _requested_deletions(ctx, request)
    if not server.config.get("delete.topic.enable"):
        code = ErrorCode.topic_deletion_disabled if ctx.version >= 3 else ErrorCode.invalid_request
        return {"throttle_time": 0,
                "responses": [_delete_result(n, i, code, DELETION_DISABLED) for n, i in wanted]}
    names = Counter(n for n, i in wanted if n is not None and i is None)
    ids = Counter(i for n, i in wanted if n is None and i is not None)
    checked = server.authorizer is not None
    quota = ctx.mutation_quota(STRICT_DELETE_TOPICS)
    responses = []
    answered: set[tuple[str, str | uuid.UUID | None]] = set()
    doomed: dict[uuid.UUID, str] = {}
    for name, topic_id in wanted:
        if name is not None and topic_id is not None:
            responses.append(_delete_result(name, topic_id, ErrorCode.invalid_request,
                                            "You may not specify both topic name and topic id."))
            continue
        if name is None and topic_id is None:
            responses.append(_delete_result(None, None, ErrorCode.invalid_request,
                                            "Neither topic name nor id were specified."))
            continue
        ident = ("name", name) if name is not None else ("id", topic_id)
        if ident in answered:
            continue
        answered.add(ident)
        if name is not None and names[name] > 1:
            responses.append(_delete_result(name, None, ErrorCode.invalid_request,
                                            "Duplicate topic name."))
            continue
        if topic_id is not None and ids[topic_id] > 1:
            responses.append(_delete_result(None, topic_id, ErrorCode.invalid_request,
                                            "Duplicate topic id."))
            continue
        if name is not None:
            topic = store.get(name)
        else:
            assert topic_id is not None  # neither was given: answered above
            topic = store.by_id(topic_id)
        if checked:  # DELETE on the topic (and DESCRIBE to learn the name of an id)
            refused = _deletion_refused(ctx, name, topic_id, topic)
            if refused is not None:
                responses.append(refused)
                continue
        if topic is None:
            if name is not None:
                responses.append(_delete_result(name, None, ErrorCode.unknown_topic_or_partition,
                                                UNKNOWN_TOPIC))
            else:
                responses.append(_delete_result(None, topic_id, ErrorCode.unknown_topic_id,
                                                UNKNOWN_TOPIC_ID))
            continue
        if topic.topic_id in doomed:
            responses.append(_delete_result(
                topic.name, topic.topic_id, ErrorCode.invalid_request,
                "The provided topic name maps to an ID that was already supplied."))
            continue
        if not quota.record(topic.partitions):
            responses.append(_delete_result(topic.name, topic.topic_id,
                                            ErrorCode.throttling_quota_exceeded, THROTTLED))
            continue
        doomed[topic.topic_id] = topic.name
        responses.append(_delete_result(topic.name, topic.topic_id))
    late = await server.topic_admin.delete_topics(list(doomed.values()), to_ms(request.timeout))
    for response in responses:
        if response["name"] in late and response["error_code"] == ErrorCode.none:
            response["error_code"] = ErrorCode.request_timed_out
            response["error_message"] = "The deletion did not complete within the timeout."
    return {"throttle_time": quota.throttle_time_ms, "responses": responses}


# --- CreatePartitions ----------------------------------------------------------------------------


def _check_new_partitions(server: Broker, topic: CreatePartitionsTopic, budget: int) -> int:
    """The number of partitions to add, after Kafka's checks."""
    assert server.topics is not None
    existing = server.topics.get(topic.name)
    if existing is None:
        raise error(ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC)
    current = existing.partitions
    if topic.count == current:
        raise error(ErrorCode.invalid_partitions,
                         f"Topic already has {current} partition(s).")
    if topic.count < current:
        raise error(ErrorCode.invalid_partitions,
                         f"The topic {topic.name} currently has {current} partition(s); "
                         f"{topic.count} would not be an increase.")
    additional = topic.count - current
    if topic.assignments is not None:
        if len(topic.assignments) != additional:
            raise error(ErrorCode.invalid_replica_assignment,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(topic.assignments)} assignment(s) were specified.")
        for assignment in topic.assignments:
            _check_manual_assignment(server, assignment.broker_ids)
    if additional > budget:
        raise error(ErrorCode.policy_violation, _TOO_LARGE)
    return additional


def _partitions_result(name: str, code: ErrorCode = ErrorCode.none,
                       message: str | None = None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}


def _duplicated(names: Iterable[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


@api(37, "CreatePartitions", 0, 3)
async def create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> dict[str, Any]:
    server = ctx.server
    requested = list(request.topics or ())
    duplicates = _duplicated(t.name for t in requested)
    validate_only = bool(request.validate_only)
    budget = MAX_PARTITIONS_PER_REQUEST
    results = []
    answered: set[str] = set()
    denied = unauthorized(ctx, AclOperation.ALTER, ResourceType.TOPIC,
                          (t.name for t in requested))  # ALTER on each topic
    quota = ctx.mutation_quota(STRICT_CREATE_PARTITIONS)
    for topic in requested:
        if topic.name in answered:
            continue
        answered.add(topic.name)
        if topic.name in duplicates:
            results.append(_partitions_result(topic.name, ErrorCode.invalid_request,
                                              "Duplicate topic name."))
            continue
        if topic.name in denied:
            results.append(_partitions_result(topic.name, TOPIC_DENIED,
                                              "The topic authorization is failed."))
            continue
        try:
            additional = _check_new_partitions(server, topic, budget)
        except KafkaError as exc:
            results.append(_partitions_result(topic.name, exc.code, exc.message))
            continue
        if not validate_only and not quota.record(additional):
            results.append(_partitions_result(topic.name, ErrorCode.throttling_quota_exceeded,
                                              THROTTLED))
            continue
        budget -= additional
        if not validate_only:
            assignments = None if topic.assignments is None else [
                [int(b) for b in a.broker_ids] for a in topic.assignments]
            try:
                await server.topic_admin.add_partitions(topic.name, topic.count, assignments,
                                                        to_ms(request.timeout))
            except KafkaError as exc:
                results.append(_partitions_result(topic.name, exc.code, exc.message))
                continue
        results.append(_partitions_result(topic.name))
    return {"throttle_time": quota.throttle_time_ms, "results": results}
