"""The authorization matrix, in the style of Kafka's AuthorizerIntegrationTest: every API the
broker serves, sent over TCP as ``User:ANONYMOUS``, first without the ACLs it needs (the exact
authorization error Kafka answers), then with them granted one by one (the next check's error,
then success or the error the request meets past authorization).

The ACLs are created over the wire by ``User:admin``, the broker's super user (see
authz_support.py for how the tests stand in for authentication until SASL lands; the matrix
then gains real principals). After each test every ACL is deleted again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import FrameClient
from kio.serial import entity_reader

import samsa
from samsa.handlers.authz import REQUIRED
from samsa.handlers.registry import APIS
from samsa.records.record import RecordInput, encode_batch
from samsa.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.tools.transactions import DescribeTransactionsResponse

from .authz_support import (
    ADMIN,
    ANONYMOUS,
    AUTHORIZATION_ERRORS,
    MATCH_ALL,
    Acl,
    authorizing_broker,
    connect_as,
    grant,
    revoke_all,
)

Op, Res = AclOperation, ResourceType
TOPIC, OTHER, DOOMED, GROUP, TXN = "topic", "other", "doomed", "group", "txn"
HIDDEN = "hidden"
PRODUCER_ID = 4242


@dataclass
class Env:
    broker: samsa.Broker
    topic_id: uuid.UUID
    doomed_id: uuid.UUID
    hidden_id: uuid.UUID = uuid.UUID(int=0)

    @property
    def broker_id(self) -> int:
        return self.broker.server.broker_id


def topic_acl(operation: AclOperation, name: str = TOPIC) -> Acl:
    return Acl(Res.TOPIC, name, operation)


def group_acl(operation: AclOperation, name: str = GROUP) -> Acl:
    return Acl(Res.GROUP, name, operation)


def txn_acl(operation: AclOperation) -> Acl:
    return Acl(Res.TRANSACTIONAL_ID, TXN, operation)


def cluster_acl(operation: AclOperation) -> Acl:
    return Acl(Res.CLUSTER, CLUSTER_NAME, operation)


ANY_OTHER = -1  # a stage's expectation: an error that is not an authorization error, or none


@dataclass
class Case:
    """One API at one version: ``stages`` are (ACLs granted before it, the error expected);
    the first grants nothing."""

    name: str
    key: int
    version: int
    body: Callable[[Env], dict[str, Any]]
    errors: Callable[[Any], list[int]]
    stages: list[tuple[list[Acl], int]] = field(default_factory=list)
    schema: Any = None  # the response as this variant of kio's class reads it

    def __str__(self) -> str:
        return self.name

    def send(self, client: FrameClient, env: Env) -> Any:
        if self.schema is None:
            return client.request(self.key, self.version, self.case_body(env))
        client.send(self.key, self.version, self.case_body(env))
        frame = client.recv_frame()
        _, used = entity_reader(self.schema.__header_schema__)(frame, 0)
        return entity_reader(self.schema)(frame, used)[0]

    def case_body(self, env: Env) -> dict[str, Any]:
        return self.body(env)


def first_error(codes: list[int]) -> int:
    """The first error among a response's codes (0 when there is none)."""
    return next((c for c in codes if c), 0)


def top(response: Any) -> list[int]:
    return [response.error_code]


def record_batch(**kwargs: Any) -> bytes:
    return encode_batch([RecordInput(b"k", b"v")], timestamp=1_700_000_000_000, **kwargs)


def produce_body(env: Env, transactional: bool = False) -> dict[str, Any]:
    records = record_batch(producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=0,
                           transactional=True) if transactional else record_batch()
    return {"transactional_id": TXN if transactional else None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0,
                                                                 "records": records}]}]}


def fetch_body(env: Env, by_id: bool = False, replica_id: int = -1) -> dict[str, Any]:
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    topic = ({"topic_id": env.topic_id} if by_id else {"topic": TOPIC})
    return {"replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{**topic, "partitions": [partition]}], "forgotten_topics_data": [],
            "rack_id": "", "replica_state": {"replica_id": replica_id, "replica_epoch": -1}}


def fetch_errors(response: Any) -> list[int]:
    return [response.error_code] + [p.error_code for t in response.responses
                                    for p in t.partitions]


def metadata_body(names: list[str] | None = None, ids: list[uuid.UUID] | None = None,
                  auto: bool = False) -> dict[str, Any]:
    topics = ([{"name": n, "topic_id": None} for n in names or ()]
              + [{"name": None, "topic_id": i} for i in ids or ()])
    return {"topics": topics, "allow_auto_topic_creation": auto,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}


def topics_errors(response: Any) -> list[int]:
    return [t.error_code for t in response.topics]


def partition_errors(response: Any, topics: str = "topics", partitions: str = "partitions",
                     code: str = "error_code") -> list[int]:
    return [getattr(p, code) for t in getattr(response, topics)
            for p in getattr(t, partitions)]


def offset_commit_body(_env: Env) -> dict[str, Any]:
    return {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}


def offset_delete_body(env: Env) -> dict[str, Any]:
    """The group must exist (else GROUP_ID_NOT_FOUND), whichever cases ran before: the admin
    commits an offset for it first."""
    with connect_as(env.broker, ADMIN) as admin:
        committed = admin.request(8, 8, offset_commit_body(env))
        assert partition_errors(committed) == [0], committed
    return {"group_id": GROUP,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]}


def txn_offset_commit_body(_env: Env) -> dict[str, Any]:
    return {"transactional_id": TXN, "group_id": GROUP, "producer_id": PRODUCER_ID,
            "producer_epoch": 0, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}


CONSUMER_GROUP, DESCRIBED_GROUP = "consumer-group", "described-group"


def consumer_heartbeat_body(topics: list[str] | None = None, regex: str | None = None,
                            group: str = CONSUMER_GROUP) -> dict[str, Any]:
    """A member joins a consumer group (KIP-848), by topic names or a regex."""
    return {"group_id": group, "member_id": uuid.uuid4().hex, "member_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
            "subscribed_topic_names": topics, "subscribed_topic_regex": regex,
            "server_assignor": None, "topic_partitions": []}


def consumer_group_describe_body(env: Env) -> dict[str, Any]:
    """The group has a member the admin made, assigned TOPIC's partition."""
    with connect_as(env.broker, ADMIN) as admin:
        joined = admin.request(68, 1, consumer_heartbeat_body([TOPIC], group=DESCRIBED_GROUP))
        assert joined.error_code == 0, joined
    return {"group_ids": [DESCRIBED_GROUP], "include_authorized_operations": True}


def config_resource(kind: int, name: str, env: Env) -> str:
    return str(env.broker_id) if kind == 4 else name


CASES = [
    Case("Produce", 0, 8, produce_body, lambda r: partition_errors(
        r, "responses", "partition_responses"),
        [([], 29), ([topic_acl(Op.WRITE)], 0)]),
    Case("Produce (transactional)", 0, 8, lambda e: produce_body(e, transactional=True),
         lambda r: partition_errors(r, "responses", "partition_responses"),
         [([], 53), ([txn_acl(Op.WRITE)], 29), ([topic_acl(Op.WRITE)], ANY_OTHER)]),
    Case("Fetch", 1, 12, fetch_body, fetch_errors, [([], 29), ([topic_acl(Op.READ)], 0)]),
    Case("Fetch (by topic id)", 1, 13, lambda e: fetch_body(e, by_id=True), fetch_errors,
         [([], 29), ([topic_acl(Op.READ)], 0)]),
    Case("Fetch (follower)", 1, 12, lambda e: fetch_body(e, replica_id=e.broker_id + 1),
         fetch_errors, [([topic_acl(Op.READ)], 29), ([cluster_acl(Op.CLUSTER_ACTION)], 0)]),
    Case("ListOffsets", 2, 5, lambda e: {
        "replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        partition_errors, [([], 29), ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("Metadata", 3, 9, lambda e: metadata_body([TOPIC]), topics_errors,
         [([], 29), ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("Metadata (by topic id)", 3, 12, lambda e: metadata_body(ids=[e.topic_id]),
         topics_errors, [([], 29), ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("Metadata (auto-creation)", 3, 9,
         lambda e: metadata_body(["auto-created"], auto=True), topics_errors,
         [([], 29), ([topic_acl(Op.DESCRIBE, "auto-created")], 29),
          ([topic_acl(Op.CREATE, "auto-created")], 0)]),
    Case("OffsetCommit", 8, 8, offset_commit_body, lambda r: partition_errors(r),
         [([], 30), ([group_acl(Op.READ)], 29), ([topic_acl(Op.READ)], 0)]),
    Case("OffsetFetch (v7, one group)", 9, 7, lambda e: {
        "group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        lambda r: top(r) + partition_errors(r),
        [([], 30), ([group_acl(Op.DESCRIBE)], 29), ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("OffsetFetch (v8, groups)", 9, 8, lambda e: {
        "groups": [{"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
        "require_stable": False},
        lambda r: [g.error_code for g in r.groups] + [
            p.error_code for g in r.groups for t in g.topics for p in t.partitions],
        [([], 30), ([group_acl(Op.DESCRIBE)], 29), ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("FindCoordinator (group)", 10, 3, lambda e: {"key": GROUP, "key_type": 0}, top,
         [([], 30), ([group_acl(Op.DESCRIBE)], 0)]),
    Case("FindCoordinator (transaction, v4)", 10, 4, lambda e: {
        "key_type": 1, "coordinator_keys": [TXN]},
        lambda r: [c.error_code for c in r.coordinators],
        [([], 53), ([txn_acl(Op.DESCRIBE)], 0)]),
    Case("JoinGroup", 11, 5, lambda e: {
        "group_id": GROUP, "session_timeout": 10000, "rebalance_timeout": 10000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]}, top,
        [([], 30), ([group_acl(Op.READ)], 79)]),  # MEMBER_ID_REQUIRED: past the gate
    Case("Heartbeat", 12, 3, lambda e: {
        "group_id": GROUP, "generation_id": 1, "member_id": "m", "group_instance_id": None},
        top, [([], 30), ([group_acl(Op.READ)], 25)]),  # UNKNOWN_MEMBER_ID: past the gate
    Case("LeaveGroup", 13, 3, lambda e: {
        "group_id": GROUP, "members": [{"member_id": "m", "group_instance_id": None}]},
        lambda r: top(r) + [m.error_code for m in r.members],
        [([], 30), ([group_acl(Op.READ)], 25)]),
    Case("SyncGroup", 14, 3, lambda e: {
        "group_id": GROUP, "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "assignments": []}, top, [([], 30), ([group_acl(Op.READ)], 25)]),
    Case("DescribeGroups", 15, 5, lambda e: {"groups": [GROUP],
                                             "include_authorized_operations": True},
         lambda r: [g.error_code for g in r.groups],
         [([], 30), ([group_acl(Op.DESCRIBE)], 0)]),
    Case("ListGroups", 16, 4, lambda e: {"states_filter": []}, top, [([], 0)]),
    Case("ConsumerGroupHeartbeat", 68, 1, lambda e: consumer_heartbeat_body(topics=[TOPIC]),
         top, [([], 30), ([group_acl(Op.READ, CONSUMER_GROUP)], 29),
               ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("ConsumerGroupHeartbeat (regex)", 68, 1,
         lambda e: consumer_heartbeat_body(regex="top.*"), top,
         [([], 30), ([group_acl(Op.READ, CONSUMER_GROUP)], 0)]),
    Case("ConsumerGroupDescribe", 69, 1, consumer_group_describe_body,
         lambda r: [g.error_code for g in r.groups],
         [([], 30), ([group_acl(Op.DESCRIBE, DESCRIBED_GROUP)], 29),
          ([topic_acl(Op.DESCRIBE)], 0)]),
    # authentication's own APIs need no ACL; on this PLAINTEXT listener there is nothing to
    # authenticate: ILLEGAL_SASL_STATE, the connection kept
    Case("SaslHandshake", 17, 1, lambda e: {"mechanism": "PLAIN"}, top, [([], 34)]),
    Case("SaslAuthenticate", 36, 2, lambda e: {"auth_bytes": b""}, top, [([], 34)]),
    Case("DescribeUserScramCredentials", 50, 0, lambda e: {"users": None}, top,
         [([], 31), ([cluster_acl(Op.DESCRIBE)], 0)]),
    Case("AlterUserScramCredentials", 51, 0, lambda e: {
        "deletions": [{"name": "carol", "mechanism": 1}], "upsertions": []},
        lambda r: [x.error_code for x in r.results],
        [([], 31), ([cluster_acl(Op.ALTER)], ANY_OTHER)]),
    Case("DescribeClientQuotas", 48, 1, lambda e: {"components": [], "strict": False}, top,
         [([], 31), ([cluster_acl(Op.DESCRIBE_CONFIGS)], 0)]),
    Case("AlterClientQuotas", 49, 1, lambda e: {
        "entries": [{"entity": [{"entity_type": "client-id", "entity_name": "matrix"}],
                     "ops": [{"key": "producer_byte_rate", "value": 1e9, "remove": False}]}],
        "validate_only": True},
        lambda r: [x.error_code for x in r.entries],
        [([], 31), ([cluster_acl(Op.ALTER_CONFIGS)], 0)]),
    Case("ApiVersions", 18, 3, lambda e: {"client_software_name": "matrix",
                                          "client_software_version": "1"}, top, [([], 0)]),
    Case("CreateTopics", 19, 5, lambda e: {
        "topics": [{"name": "created", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout": 5000,
        "validate_only": True}, topics_errors,
        [([], 29), ([topic_acl(Op.CREATE, "created")], 0)]),
    Case("CreateTopics (CREATE on the cluster)", 19, 5, lambda e: {
        "topics": [{"name": "created", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout": 5000,
        "validate_only": True}, topics_errors, [([], 29), ([cluster_acl(Op.CREATE)], 0)]),
    Case("DeleteTopics (by id)", 20, 6, lambda e: {
        "topics": [{"name": None, "topic_id": e.doomed_id}], "timeout": 5000},
        lambda r: [t.error_code for t in r.responses],
        [([], 29), ([topic_acl(Op.DESCRIBE, DOOMED)], 29),
         ([topic_acl(Op.DELETE, DOOMED)], 0)]),
    Case("DeleteRecords", 21, 1, lambda e: {
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}],
        "timeout": 5000}, partition_errors, [([], 29), ([topic_acl(Op.DELETE)], 0)]),
    Case("InitProducerId (idempotent)", 22, 2, lambda e: {
        "transactional_id": None, "transaction_timeout": 60000}, top,
        [([], 31), ([cluster_acl(Op.IDEMPOTENT_WRITE)], 0)]),
    Case("InitProducerId (idempotent, WRITE on a topic)", 22, 2, lambda e: {
        "transactional_id": None, "transaction_timeout": 60000}, top,
        [([], 31), ([topic_acl(Op.WRITE, "any-topic")], 0)]),
    Case("InitProducerId (transactional)", 22, 2, lambda e: {
        "transactional_id": TXN, "transaction_timeout": 60000}, top,
        [([], 53), ([txn_acl(Op.WRITE)], 0)]),
    Case("OffsetForLeaderEpoch", 23, 3, lambda e: {
        "replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        partition_errors, [([], 29), ([topic_acl(Op.DESCRIBE)], 0)]),
    Case("OffsetForLeaderEpoch (CLUSTER_ACTION)", 23, 3, lambda e: {
        "replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        partition_errors, [([], 29), ([cluster_acl(Op.CLUSTER_ACTION)], 0)]),
    Case("AddPartitionsToTxn", 24, 3, lambda e: {
        "v3_and_below_transactional_id": TXN, "v3_and_below_producer_id": PRODUCER_ID,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]},
        lambda r: partition_errors(r, "results_by_topic_v3_and_below", "results_by_partition",
                                   "partition_error_code"),
        [([], 53), ([txn_acl(Op.WRITE)], 29), ([topic_acl(Op.WRITE)], ANY_OTHER)]),
    Case("AddOffsetsToTxn", 25, 3, lambda e: {
        "transactional_id": TXN, "producer_id": PRODUCER_ID, "producer_epoch": 0,
        "group_id": GROUP}, top,
        [([], 53), ([txn_acl(Op.WRITE)], 30), ([group_acl(Op.READ)], ANY_OTHER)]),
    Case("EndTxn", 26, 3, lambda e: {
        "transactional_id": TXN, "producer_id": PRODUCER_ID, "producer_epoch": 0,
        "committed": True}, top, [([], 53), ([txn_acl(Op.WRITE)], ANY_OTHER)]),
    Case("WriteTxnMarkers", 27, 1, lambda e: {"markers": [{
        "producer_id": PRODUCER_ID, "producer_epoch": 0, "transaction_result": False,
        "topics": [{"name": OTHER, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
        [([], 31), ([cluster_acl(Op.CLUSTER_ACTION)], 0)]),
    Case("WriteTxnMarkers (ALTER on the cluster)", 27, 1, lambda e: {"markers": [{
        "producer_id": PRODUCER_ID, "producer_epoch": 0, "transaction_result": False,
        "topics": [{"name": OTHER, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
        [([], 31), ([cluster_acl(Op.ALTER)], 0)]),
    Case("TxnOffsetCommit", 28, 3, txn_offset_commit_body, lambda r: partition_errors(r),
         [([], 53), ([txn_acl(Op.WRITE)], 30), ([group_acl(Op.READ)], 29),
          ([topic_acl(Op.READ)], ANY_OTHER)]),
    Case("DescribeAcls", 29, 2, lambda e: MATCH_ALL, top,
         [([], 31), ([cluster_acl(Op.DESCRIBE)], 0)]),
    Case("CreateAcls", 30, 2, lambda e: {"creations": [
        Acl(Res.TOPIC, "acl-made", Op.READ, principal="User:carol").creation()]},
        lambda r: [x.error_code for x in r.results], [([], 31), ([cluster_acl(Op.ALTER)], 0)]),
    Case("DeleteAcls", 31, 2, lambda e: {"filters": [{
        **MATCH_ALL, "resource_type_filter": int(Res.TOPIC), "resource_name_filter": "x",
        "pattern_type_filter": int(PatternType.LITERAL)}]},
        lambda r: [f.error_code for f in r.filter_results],
        [([], 31), ([cluster_acl(Op.ALTER)], 0)]),
    Case("DescribeConfigs (topic)", 32, 4, lambda e: {
        "resources": [{"resource_type": 2, "resource_name": TOPIC,
                       "configuration_keys": None}]},
        lambda r: [x.error_code for x in r.results],
        [([], 29), ([topic_acl(Op.DESCRIBE_CONFIGS)], 0)]),
    Case("DescribeConfigs (broker)", 32, 4, lambda e: {
        "resources": [{"resource_type": 4, "resource_name": str(e.broker_id),
                       "configuration_keys": None}]},
        lambda r: [x.error_code for x in r.results],
        [([], 31), ([cluster_acl(Op.DESCRIBE_CONFIGS)], 0)]),
    Case("AlterConfigs", 33, 1, lambda e: {
        "resources": [{"resource_type": 2, "resource_name": TOPIC,
                       "configs": [{"name": "retention.ms", "value": "600000"}]}],
        "validate_only": True}, lambda r: [x.error_code for x in r.responses],
        [([], 29), ([topic_acl(Op.ALTER_CONFIGS)], 0)]),
    Case("CreatePartitions", 37, 2, lambda e: {
        "topics": [{"name": TOPIC, "count": 2, "assignments": None}], "timeout": 5000,
        "validate_only": True}, lambda r: [x.error_code for x in r.results],
        [([], 29), ([topic_acl(Op.ALTER)], 0)]),
    Case("DeleteGroups", 42, 2, lambda e: {"groups_names": ["no-such-group"]},
         lambda r: [x.error_code for x in r.results],
         [([], 30), ([group_acl(Op.DELETE, "no-such-group")], 69)]),  # GROUP_ID_NOT_FOUND
    Case("ElectLeaders", 43, 2, lambda e: {
        "election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
        "timeout": 5000}, lambda r: top(r) + partition_errors(
            r, "replica_election_results", "partition_result"),
        [([], 31), ([cluster_acl(Op.ALTER)], 84)]),  # ELECTION_NOT_NEEDED
    Case("IncrementalAlterConfigs (topic)", 44, 1, lambda e: {
        "resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "600000"}]}],
        "validate_only": True}, lambda r: [x.error_code for x in r.responses],
        [([], 29), ([topic_acl(Op.ALTER_CONFIGS)], 0)]),
    Case("IncrementalAlterConfigs (broker)", 44, 1, lambda e: {
        "resources": [{"resource_type": 4, "resource_name": str(e.broker_id), "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "600000"}]}],
        "validate_only": True}, lambda r: [x.error_code for x in r.responses],
        [([], 31), ([cluster_acl(Op.ALTER_CONFIGS)], 0)]),
    Case("AlterPartitionReassignments", 45, 0, lambda e: {
        "timeout": 5000, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "replicas": None}]}]},
        lambda r: top(r) + [p.error_code for t in r.responses for p in t.partitions],
        [([], 31), ([cluster_acl(Op.ALTER)], 85)]),  # NO_REASSIGNMENT_IN_PROGRESS
    Case("AlterReplicaLogDirs", 34, 2, lambda e: {"dirs": [
        {"path": "/no/such/log/dir", "topics": [{"name": TOPIC, "partitions": [0]}]}]},
        lambda r: partition_errors(r, "results"),
        [([], 31), ([cluster_acl(Op.ALTER)], 57)]),  # LOG_DIR_NOT_FOUND: past the gate
    Case("DescribeLogDirs", 35, 4, lambda e: {"topics": None}, top,
         [([], 31), ([cluster_acl(Op.DESCRIBE)], 0)]),
    Case("ListPartitionReassignments", 46, 0, lambda e: {"timeout": 5000, "topics": None},
         top, [([], 31), ([cluster_acl(Op.DESCRIBE)], 0)]),
    Case("OffsetDelete", 47, 0, offset_delete_body,
        lambda r: top(r) + partition_errors(r),
        [([], 30), ([group_acl(Op.DELETE)], 29), ([topic_acl(Op.READ)], 0)]),
    Case("DescribeCluster", 60, 1, lambda e: {"include_cluster_authorized_operations": True},
         top, [([], 0)]),
    Case("DescribeProducers", 61, 0, lambda e: {
        "topics": [{"name": TOPIC, "partition_indexes": [0]}]}, partition_errors,
        [([], 29), ([topic_acl(Op.READ)], 0)]),
    Case("DescribeTransactions", 65, 0, lambda e: {"transactional_ids": [TXN]},
         lambda r: [s.error_code for s in r.transaction_states],
         [([], 53), ([txn_acl(Op.DESCRIBE)], ANY_OTHER)],
         schema=DescribeTransactionsResponse),  # kio cannot read a start time of -1
    Case("ListTransactions", 66, 1, lambda e: {"state_filters": [], "producer_id_filters": [],
                                              "duration_filter": -1}, top, [([], 0)]),
]


# --- the broker ----------------------------------------------------------------------------------


def create_topic(admin: FrameClient, name: str) -> uuid.UUID:
    response = admin.request(19, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": []}], "timeout": 10000, "validate_only": False})
    assert response.topics[0].error_code == 0, response
    return response.topics[0].topic_id


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with authorizing_broker(tmp_path_factory.mktemp("authz")) as broker:
        with connect_as(broker, ADMIN) as admin:
            topic_id = create_topic(admin, TOPIC)
            create_topic(admin, OTHER)
            doomed_id = create_topic(admin, DOOMED)
            hidden_id = create_topic(admin, HIDDEN)
            produced = admin.request(0, 8, produce_body(Env(broker, topic_id, doomed_id)))
            assert produced.responses[0].partition_responses[0].error_code == 0, produced
        yield Env(broker, topic_id, doomed_id, hidden_id)


@pytest.fixture(scope="module")
def admin(env: Env) -> Iterator[FrameClient]:
    with connect_as(env.broker, ADMIN) as client:
        yield client


@pytest.fixture
def client(env: Env, admin: FrameClient) -> Iterator[FrameClient]:
    """A connection as User:ANONYMOUS, with no ACLs at its start and none left after it."""
    revoke_all(admin)
    with connect_as(env.broker) as anonymous:
        yield anonymous
    revoke_all(admin)


# --- the matrix ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=str)
def test_matrix(case: Case, env: Env, admin: FrameClient, client: FrameClient) -> None:
    for granted, expected in case.stages:
        grant(admin, granted)
        response = case.send(client, env)
        codes = case.errors(response)
        assert codes, f"{case}: no error codes in {response}"
        got = first_error(codes)
        if expected == ANY_OTHER:
            assert got not in AUTHORIZATION_ERRORS, (
                f"{case} after granting {granted}: {codes}")
        else:
            assert got == expected, (
                f"{case} after granting {granted}: {codes}, expected {expected}: {response}")


def test_every_api_is_in_the_matrix_and_the_table() -> None:
    """A new API cannot skip the gate: it needs its row in authz.REQUIRED (what Kafka asks of
    it) and a case here."""
    assert set(REQUIRED) == set(APIS)
    assert {c.key for c in CASES} == set(APIS)


def test_a_deny_wins_over_an_allow(client: FrameClient, admin: FrameClient, env: Env) -> None:
    grant(admin, [topic_acl(Op.DESCRIBE), Acl(Res.TOPIC, "*", Op.ALL),
                  Acl(Res.TOPIC, "*", Op.DESCRIBE, permission=AclPermissionType.DENY)])
    assert topics_errors(client.request(3, 9, metadata_body([TOPIC]))) == [29]


def test_hosts_and_prefixes(client: FrameClient, admin: FrameClient) -> None:
    """An ACL for another host does not apply; one for this host (127.0.0.1) and a PREFIXED
    pattern do; User:* is everyone."""
    grant(admin, [Acl(Res.TOPIC, TOPIC, Op.DESCRIBE, host="10.9.8.7")])
    assert topics_errors(client.request(3, 9, metadata_body([TOPIC]))) == [29]
    grant(admin, [Acl(Res.TOPIC, TOPIC, Op.DESCRIBE, host="127.0.0.1")])
    assert topics_errors(client.request(3, 9, metadata_body([TOPIC]))) == [0]
    assert topics_errors(client.request(3, 9, metadata_body([OTHER]))) == [29]
    grant(admin, [Acl(Res.TOPIC, "oth", Op.DESCRIBE, pattern_type=PatternType.PREFIXED,
                      principal="User:*")])
    assert topics_errors(client.request(3, 9, metadata_body([OTHER]))) == [0]


# --- what is hidden rather than refused -----------------------------------------------------------


def test_metadata_of_every_topic_lists_only_the_described(
        client: FrameClient, admin: FrameClient) -> None:
    everything = {"topics": None, "allow_auto_topic_creation": False,
                  "include_cluster_authorized_operations": False,
                  "include_topic_authorized_operations": True}
    assert client.request(3, 9, everything).topics == ()
    grant(admin, [topic_acl(Op.READ)])  # READ implies DESCRIBE
    (only,) = client.request(3, 9, everything).topics
    assert only.name == TOPIC and only.error_code == 0
    ops = {o for o in AclOperation if only.topic_authorized_operations & (1 << o)}
    assert ops == {Op.READ, Op.DESCRIBE}


def test_metadata_by_name_does_not_tell_whether_a_topic_exists(client: FrameClient) -> None:
    response = client.request(3, 12, metadata_body([TOPIC, "no-such-topic"]))
    assert [(t.name, t.error_code, t.topic_id) for t in response.topics] == [
        (TOPIC, 29, None), ("no-such-topic", 29, None)]  # kio reads the zero uuid as None


def test_list_groups_lists_the_described_groups(
        client: FrameClient, admin: FrameClient, env: Env) -> None:
    # a group the admin made: a standalone commit creates it
    commit = admin.request(8, 8, {**offset_commit_body(env), "group_id": "listed"})
    assert partition_errors(commit) == [0]
    assert "listed" not in {g.group_id for g in client.request(16, 4, {}).groups}
    grant(admin, [group_acl(Op.DESCRIBE, "listed")])
    assert "listed" in {g.group_id for g in client.request(16, 4, {}).groups}
    revoke_all(admin)
    grant(admin, [cluster_acl(Op.DESCRIBE)])  # DESCRIBE on the cluster: every group
    assert "listed" in {g.group_id for g in client.request(16, 4, {}).groups}


def test_a_regex_resolves_only_to_described_topics(
        client: FrameClient, admin: FrameClient, env: Env) -> None:
    """KIP-848: the topics a member's regex matches are those its principal may DESCRIBE."""
    group = "regex-group"
    grant(admin, [group_acl(Op.READ, group), topic_acl(Op.DESCRIBE, TOPIC)])
    joined = client.request(68, 1, consumer_heartbeat_body(regex=".*", group=group))
    assert joined.error_code == 0, joined
    assigned = {tp.topic_id for tp in joined.assignment.topic_partitions}
    assert assigned == {env.topic_id}
    coordinator = env.broker.server.group_coordinator
    assert coordinator is not None
    assert coordinator.consumer_groups[group].regexes[".*"].topics == {TOPIC}


def test_offset_fetch_of_every_topic_leaves_out_the_undescribed(
        client: FrameClient, admin: FrameClient, env: Env) -> None:
    commit = admin.request(8, 8, {**offset_commit_body(env), "group_id": "fetched"})
    assert partition_errors(commit) == [0]
    body = {"groups": [{"group_id": "fetched", "topics": None}], "require_stable": False}
    grant(admin, [group_acl(Op.DESCRIBE, "fetched")])
    (group,) = client.request(9, 8, body).groups
    assert group.error_code == 0 and group.topics == ()
    grant(admin, [topic_acl(Op.DESCRIBE)])
    (group,) = client.request(9, 8, body).groups
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in group.topics] == [
        (TOPIC, [1])]


def test_list_transactions_lists_the_described_ids(
        client: FrameClient, admin: FrameClient) -> None:
    made = admin.request(22, 2, {"transactional_id": "listed-txn", "transaction_timeout": 60000})
    assert made.error_code == 0
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    assert "listed-txn" not in {s.transactional_id
                                for s in client.request(66, 1, body).transaction_states}
    grant(admin, [Acl(Res.TRANSACTIONAL_ID, "listed-txn", Op.DESCRIBE)])
    assert "listed-txn" in {s.transactional_id
                            for s in client.request(66, 1, body).transaction_states}


def test_delete_topics_by_id_hides_the_name_without_describe(client: FrameClient,
                                                             env: Env) -> None:
    response = client.request(20, 6, {"topics": [{"name": None, "topic_id": env.hidden_id}],
                                      "timeout": 5000})
    assert [(t.name, t.error_code) for t in response.responses] == [(None, 29)]


def test_create_topics_shows_configs_only_with_describe_configs(
        client: FrameClient, admin: FrameClient) -> None:
    body = {"topics": [{"name": "shown", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout": 5000,
            "validate_only": True}
    grant(admin, [topic_acl(Op.CREATE, "shown")])
    (hidden,) = client.request(19, 5, body).topics
    assert (hidden.error_code, hidden.topic_config_error_code, hidden.num_partitions,
            hidden.configs) == (0, 29, -1, ())
    grant(admin, [topic_acl(Op.DESCRIBE_CONFIGS, "shown")])
    (shown,) = client.request(19, 5, body).topics
    assert (shown.error_code, shown.topic_config_error_code, shown.num_partitions) == (0, 0, 1)
    assert shown.configs


# --- authorized operations -----------------------------------------------------------------------


def operations(bits: int) -> set[AclOperation]:
    return {o for o in AclOperation if bits & (1 << o)}


def test_describe_cluster_reports_the_authorized_operations(
        client: FrameClient, admin: FrameClient) -> None:
    body = {"include_cluster_authorized_operations": True}
    denied = client.request(60, 1, body)
    assert (denied.error_code, denied.cluster_authorized_operations) == (0, 0)
    grant(admin, [cluster_acl(Op.DESCRIBE)])
    assert operations(client.request(60, 1, body).cluster_authorized_operations) == {
        Op.DESCRIBE}
    grant(admin, [cluster_acl(Op.ALL)])
    assert operations(client.request(60, 1, body).cluster_authorized_operations) == \
        SUPPORTED_OPERATIONS[Res.CLUSTER]
    metadata = client.request(3, 10, {**metadata_body([]),
                                      "include_cluster_authorized_operations": True})
    assert operations(metadata.cluster_authorized_operations) == SUPPORTED_OPERATIONS[
        Res.CLUSTER]


def test_describe_groups_reports_the_authorized_operations(
        client: FrameClient, admin: FrameClient) -> None:
    grant(admin, [group_acl(Op.READ)])  # READ implies DESCRIBE
    (group,) = client.request(15, 5, {"groups": [GROUP],
                                      "include_authorized_operations": True}).groups
    assert group.error_code == 0
    assert operations(group.authorized_operations) == {Op.READ, Op.DESCRIBE}


def test_the_admin_is_a_super_user(admin: FrameClient, env: Env) -> None:
    """super.users: every operation, whatever the ACLs (a DENY for User:* included)."""
    grant(admin, [Acl(Res.TOPIC, "*", Op.ALL, principal="User:*",
                      permission=AclPermissionType.DENY)])
    try:
        assert topics_errors(admin.request(3, 9, metadata_body([TOPIC]))) == [0]
    finally:
        revoke_all(admin)


def test_without_an_authorizer_everything_is_allowed(tmp_path: Path) -> None:
    """The default: no authorizer, every API allowed, every supported operation reported,
    and the ACL APIs answer SECURITY_DISABLED (54)."""
    with samsa.Broker(tmp_path) as broker, connect_as(broker) as client:
        create = client.request(19, 5, {"topics": [{
            "name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout": 5000, "validate_only": False})
        assert topics_errors(create) == [0]
        metadata = client.request(3, 10, {**metadata_body([TOPIC]),
                                          "include_cluster_authorized_operations": True,
                                          "include_topic_authorized_operations": True})
        assert operations(metadata.cluster_authorized_operations) == SUPPORTED_OPERATIONS[
            Res.CLUSTER]
        assert operations(metadata.topics[0].topic_authorized_operations) == \
            SUPPORTED_OPERATIONS[Res.TOPIC]
        assert client.request(29, 2, MATCH_ALL).error_code == 54
        created = client.request(30, 2, {"creations": [
            Acl(Res.TOPIC, TOPIC, Op.READ).creation()]})
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (54, "No Authorizer is configured.")]
        deleted = client.request(31, 2, {"filters": [MATCH_ALL]})
        assert [f.error_code for f in deleted.filter_results] == [54]


def test_anonymous_is_the_principal_of_a_plaintext_connection(env: Env) -> None:
    with connect_as(env.broker) as anonymous:
        local = f":{anonymous.sock.getsockname()[1]}"
        anonymous.request(18, 3, {"client_software_name": "m", "client_software_version": "1"})
        (connection,) = [c for c in env.broker.server.connections if c.peer.endswith(local)]
        assert str(connection.principal) == ANONYMOUS
        assert connection.peer.startswith("127.0.0.1:")
