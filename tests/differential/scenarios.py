"""Scripted client scenarios, the same requests against any broker: each scenario gets a
``Session`` on one broker and records its steps (name, decoded response); setup requests
(``call``) are checked but not compared.

Requests are raw frames at fixed versions, ones that librdkafka or Kafka's Java client send
and that both brokers serve. Every scenario has its own topics and groups (named after it), so
the scenarios may run in any order on a broker that has served others.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka_frames import FrameClient
from kio.schema.errors import ErrorCode
from kio.serial.errors import SerialError as KioError
from waiting import wait_for

from samsa.records.record import RecordInput, encode_batch

# API keys
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 13, 14, 15
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 19, 20, 21, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_CONFIGS, CREATE_PARTITIONS, DELETE_GROUPS = 32, 37, 42
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
OFFSET_FOR_LEADER_EPOCH, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 23, 44, 47
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS = 60, 61, 65

# The versions sent: librdkafka 2.x's where it has the API, otherwise the Java client's.
V_PRODUCE, V_FETCH, V_FETCH_IDS, V_LIST_OFFSETS, V_METADATA = 9, 11, 13, 7, 12
V_CREATE_TOPICS, V_DELETE_TOPICS, V_DELETE_RECORDS, V_CREATE_PARTITIONS = 7, 6, 2, 3
V_DESCRIBE_CONFIGS, V_FIND_COORDINATOR, V_JOIN_GROUP, V_SYNC_GROUP, V_HEARTBEAT = 4, 4, 5, 5, 4
V_OFFSET_COMMIT, V_OFFSET_FETCH, V_DESCRIBE_GROUPS, V_LEAVE_GROUP, V_DELETE_GROUPS = 8, 8, 5, 4, 2
V_INIT_PRODUCER_ID, V_ADD_PARTITIONS_TO_TXN, V_ADD_OFFSETS_TO_TXN, V_END_TXN = 4, 3, 3, 3
V_TXN_OFFSET_COMMIT, V_CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_DESCRIBE = 3, 1, 0
V_OFFSET_FOR_LEADER_EPOCH, V_INCREMENTAL_ALTER_CONFIGS, V_OFFSET_DELETE = 4, 1, 0
V_DESCRIBE_CLUSTER, V_DESCRIBE_PRODUCERS, V_DESCRIBE_TRANSACTIONS = 1, 0, 0

BASE_TIME_MS = 1_700_000_000_000  # record timestamps: fixed, in the past
UNKNOWN_TOPIC_ID = uuid.UUID("0b5e5a1d-0000-4000-8000-00000000d1ff")
READY_TIMEOUT_S = 60
_TOPIC_CONFIG = 1  # DescribeConfigs' config_source for a topic's own override
_NOT_READY = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
              ErrorCode.not_coordinator)


def batch(values: list[bytes], timestamps: list[int] | None = None, **kwargs: Any) -> bytes:
    """One v2 batch as a producer sends it (timestamps: each record's, default BASE_TIME_MS)."""
    records = [RecordInput(v, key=b"k%d" % i,
                           timestamp=None if timestamps is None else timestamps[i])
               for i, v in enumerate(values)]
    return encode_batch(records, timestamp=BASE_TIME_MS, **kwargs)


class Session:
    """One scenario on one broker: a connection and the recorded steps."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.client = FrameClient(address, timeout=30)
        self.steps: list[tuple[str, Any]] = []

    def close(self) -> None:
        self.client.close()

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        return self.client.request(api_key, version, body)

    def step(self, name: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send a request and record its response; one that kio cannot decode (a value out of
        its field's range) is recorded as such."""
        assert name not in dict(self.steps), f"step {name!r} twice"
        try:
            response = self.call(api_key, version, body)
        except KioError as exc:
            self.steps.append((name, {"undecodable": f"{type(exc).__name__}: {exc}"}))
            return None
        self.steps.append((name, response))
        return response

    def note(self, name: str, value: Any) -> None:
        """A step that is an observation rather than a response."""
        self.steps.append((name, value))

    # requests

    @staticmethod
    def produce_body(topic: str, records: bytes | None, partition: int = 0, acks: int = -1,
                     transactional_id: str | None = None) -> dict[str, Any]:
        return {"transactional_id": transactional_id, "acks": acks, "timeout": 10000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": partition, "records": records}]}]}

    @staticmethod
    def fetch_body(topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0,
                   max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
                   isolation_level: int = 0, topic_id: uuid.UUID | None = None,
                   ) -> dict[str, Any]:
        return {
            "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": partition_max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": "",
        }

    @staticmethod
    def list_offsets_body(topic: str, timestamp: int, partition: int = 0,
                          current_leader_epoch: int = -1) -> dict[str, Any]:
        return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "current_leader_epoch": current_leader_epoch,
             "timestamp": timestamp}]}]}

    @staticmethod
    def create_topics_body(name: str, partitions: int = 1, replication_factor: int = 1,
                           configs: dict[str, str] | None = None, validate_only: bool = False
                           ) -> dict[str, Any]:
        return {"topics": [{"name": name, "num_partitions": partitions,
                            "replication_factor": replication_factor, "assignments": [],
                            "configs": [{"name": k, "value": v}
                                        for k, v in (configs or {}).items()]}],
                "timeout": 30000, "validate_only": validate_only}

    @staticmethod
    def describe_configs_body(resource_type: int, name: str, keys: list[str] | None
                              ) -> dict[str, Any]:
        return {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configuration_keys": keys}],
                "include_synonyms": False, "include_documentation": False}

    def metadata(self, topics: list[str]) -> Any:
        return self.call(METADATA, V_METADATA, {
            "topics": [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})

    def topic_id(self, topic: str) -> uuid.UUID:
        found: uuid.UUID = self.metadata([topic]).topics[0].topic_id
        return found

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        """Create a topic (setup) and wait until every partition's leader serves it."""
        response = self.call(CREATE_TOPICS, V_CREATE_TOPICS, self.create_topics_body(
            name, partitions, configs={k.replace("_", "."): v for k, v in configs.items()}))
        assert response.topics[0].error_code == 0, response
        self.wait_served(name, partitions)

    def wait_served(self, topic: str, partitions: int) -> None:
        def served() -> bool:
            for p in range(partitions):
                answer = self.call(LIST_OFFSETS, V_LIST_OFFSETS, self.list_offsets_body(
                    topic, -1, partition=p)).topics[0].partitions[0]
                if answer.error_code != 0:
                    return False
            return True

        wait_for(served, timeout=READY_TIMEOUT_S, what=f"{topic} served by its leader")

    def wait_topic_config(self, topic: str, name: str, value: str | None) -> None:
        """Wait until DescribeConfigs shows a topic config's override (None: no override).
        Kafka applies an alter on its controller and its brokers learn of it a moment later,
        so a describe straight after the alter may still see the old value."""
        def shown() -> bool:
            answer = self.call(DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
                               self.describe_configs_body(2, topic, [name])).results[0]
            if answer.error_code != 0 or not answer.configs:
                return False
            config = answer.configs[0]
            overridden = config.config_source == _TOPIC_CONFIG
            return config.value == value if value is not None else not overridden

        wait_for(shown, timeout=READY_TIMEOUT_S, what=f"{topic} {name}={value} described")

    def produce(self, topic: str, records: bytes, partition: int = 0) -> int:
        """Produce (setup): the base offset."""
        response = self.call(PRODUCE, V_PRODUCE, self.produce_body(topic, records, partition))
        answer = response.responses[0].partition_responses[0]
        assert answer.error_code == 0, answer
        offset: int = answer.base_offset
        return offset

    def coordinator_ready(self, key: str, key_type: int) -> Any:
        """FindCoordinator until the coordinator is there (the first call may create the
        internal topic), then for a group until its coordinator has loaded (Kafka answers
        some requests blindly while it loads): the coordinator."""
        def found() -> Any:
            answer = self.call(FIND_COORDINATOR, V_FIND_COORDINATOR, {
                "key_type": key_type, "coordinator_keys": [key]}).coordinators[0]
            return answer if answer.error_code == 0 else None

        def loaded() -> bool:
            answer = self.call(DESCRIBE_GROUPS, V_DESCRIBE_GROUPS, {
                "groups": [key], "include_authorized_operations": False})
            return answer.groups[0].error_code not in _NOT_READY

        coordinator = wait_for(found, timeout=READY_TIMEOUT_S, what=f"a coordinator for {key}")
        if key_type == 0:
            wait_for(loaded, timeout=READY_TIMEOUT_S, what=f"the coordinator of {key} loaded")
        return coordinator

    def init_producer_id(self, transactional_id: str | None) -> Any:
        """InitProducerId (setup), again while the broker is still loading its coordinator or
        fetching a block of producer ids."""
        def ready() -> Any:
            answer = self.call(INIT_PRODUCER_ID, V_INIT_PRODUCER_ID, {
                "transactional_id": transactional_id, "transaction_timeout": 60000,
                "producer_id": -1, "producer_epoch": -1})
            if answer.error_code in (*_NOT_READY, ErrorCode.concurrent_transactions):
                return None
            assert answer.error_code == 0, answer
            return answer

        return wait_for(ready, timeout=READY_TIMEOUT_S, what="a producer id")


# --- produce ----------------------------------------------------------------------------------


def produce(s: Session) -> None:
    s.create_topic("produce")
    s.create_topic("produce-small", max_message_bytes="1000")
    body = Session.produce_body
    s.step("ok", PRODUCE, V_PRODUCE, body("produce", batch([b"a", b"b", b"c"])))
    s.step("ok again", PRODUCE, V_PRODUCE, body("produce", batch([b"d"])))
    s.step("unknown topic", PRODUCE, V_PRODUCE, body("produce-missing", batch([b"x"])))
    s.step("unknown partition", PRODUCE, V_PRODUCE, body("produce", batch([b"x"]), partition=3))
    s.step("acks=2", PRODUCE, V_PRODUCE, body("produce", batch([b"x"]), acks=2))
    corrupt = bytearray(batch([b"corrupt me"]))
    corrupt[-3] ^= 0xFF  # a byte of the value: the CRC no longer matches
    s.step("corrupt crc", PRODUCE, V_PRODUCE, body("produce", bytes(corrupt)))
    s.step("batch above max.message.bytes", PRODUCE, V_PRODUCE,
           body("produce-small", batch([b"x" * 2000])))
    s.step("batch under max.message.bytes", PRODUCE, V_PRODUCE,
           body("produce-small", batch([b"x" * 100])))
    # Kafka 4's log.message.timestamp.after.max.ms: one hour
    future = int(time.time() * 1000) + 24 * 3600 * 1000
    s.step("timestamp a day ahead", PRODUCE, V_PRODUCE,
           body("produce", batch([b"x"], timestamps=[future])))
    s.step("two partitions, one unknown", PRODUCE, V_PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
            {"name": "produce", "partition_data": [
                {"index": 0, "records": batch([b"e"])},
                {"index": 9, "records": batch([b"f"])}]}]})
    s.step("fetch what was written", FETCH, V_FETCH, Session.fetch_body("produce", 0))


def idempotent_produce(s: Session) -> None:
    s.create_topic("idempotent")
    s.create_topic("idempotent-unknown-producer")
    pid = s.init_producer_id(None)
    ids = {"producer_id": pid.producer_id, "producer_epoch": pid.producer_epoch}
    body = Session.produce_body
    # samsa's deliberate difference (docs/compatibility.md), on a topic of its own
    s.step("first batch at sequence 5", PRODUCE, V_PRODUCE,
           body("idempotent-unknown-producer", batch([b"x"], base_sequence=5, **ids)))
    s.step("first batch at sequence 0", PRODUCE, V_PRODUCE,
           body("idempotent", batch([b"a", b"b"], base_sequence=0, **ids)))
    s.step("duplicate batch", PRODUCE, V_PRODUCE,
           body("idempotent", batch([b"a", b"b"], base_sequence=0, **ids)))
    s.step("sequence gap", PRODUCE, V_PRODUCE,
           body("idempotent", batch([b"c"], base_sequence=7, **ids)))
    s.step("next sequence", PRODUCE, V_PRODUCE,
           body("idempotent", batch([b"c"], base_sequence=2, **ids)))
    s.step("a newer epoch not at sequence 0", PRODUCE, V_PRODUCE, body("idempotent", batch(
        [b"d"], base_sequence=3, producer_id=pid.producer_id,
        producer_epoch=pid.producer_epoch + 1)))
    s.step("a newer epoch at sequence 0", PRODUCE, V_PRODUCE, body("idempotent", batch(
        [b"d"], base_sequence=0, producer_id=pid.producer_id,
        producer_epoch=pid.producer_epoch + 1)))
    s.step("the older epoch", PRODUCE, V_PRODUCE,
           body("idempotent", batch([b"e"], base_sequence=3, **ids)))
    s.step("fetch what was written", FETCH, V_FETCH, Session.fetch_body("idempotent", 0))


# --- fetch ------------------------------------------------------------------------------------


def fetch(s: Session) -> None:
    s.create_topic("fetch")
    s.create_topic("fetch-empty")
    s.produce("fetch", batch([b"a", b"b", b"c"]))
    s.produce("fetch", batch([b"d", b"e", b"f"]))
    body = Session.fetch_body
    s.step("from log start", FETCH, V_FETCH, body("fetch", 0))
    s.step("mid batch", FETCH, V_FETCH, body("fetch", 4))
    s.step("at the end", FETCH, V_FETCH, body("fetch", 6))
    s.step("past the end", FETCH, V_FETCH, body("fetch", 100))
    s.step("negative offset", FETCH, V_FETCH, body("fetch", -1))
    s.step("max_bytes 1 still returns the first batch", FETCH, V_FETCH,
           body("fetch", 0, max_bytes=1, partition_max_bytes=1))
    s.step("partition_max_bytes 10", FETCH, V_FETCH, body("fetch", 0, partition_max_bytes=10))
    s.step("read_committed", FETCH, V_FETCH, body("fetch", 0, isolation_level=1))
    s.step("unknown topic name", FETCH, V_FETCH, body("fetch-missing", 0))
    s.step("unknown partition", FETCH, V_FETCH, body("fetch", 0, partition=7))
    s.step("unknown topic id", FETCH, V_FETCH_IDS, body("", 0, topic_id=UNKNOWN_TOPIC_ID))
    s.step("by topic id", FETCH, V_FETCH_IDS, body("", 3, topic_id=s.topic_id("fetch")))
    with_epoch = body("fetch", 0)
    with_epoch["topics"][0]["partitions"][0]["current_leader_epoch"] = 7
    s.step("leader epoch from the future", FETCH, V_FETCH, with_epoch)

    def epochs(leader_epoch: int, current_leader_epoch: int = -1, partition: int = 0
               ) -> dict[str, Any]:
        return {"replica_id": -1, "topics": [{"topic": "fetch", "partitions": [{
            "partition": partition, "current_leader_epoch": current_leader_epoch,
            "leader_epoch": leader_epoch}]}]}

    s.step("offset for leader epoch: current", OFFSET_FOR_LEADER_EPOCH,
           V_OFFSET_FOR_LEADER_EPOCH, epochs(0))
    s.step("offset for leader epoch: a later one", OFFSET_FOR_LEADER_EPOCH,
           V_OFFSET_FOR_LEADER_EPOCH, epochs(3))
    s.step("offset for leader epoch: current epoch from the future", OFFSET_FOR_LEADER_EPOCH,
           V_OFFSET_FOR_LEADER_EPOCH, epochs(0, current_leader_epoch=7))
    s.step("offset for leader epoch: unknown partition", OFFSET_FOR_LEADER_EPOCH,
           V_OFFSET_FOR_LEADER_EPOCH, epochs(0, partition=4))
    started = time.monotonic()
    s.step("empty topic long poll", FETCH, V_FETCH, body("fetch-empty", 0, max_wait_ms=300))
    s.note("empty topic long poll waited max_wait", time.monotonic() - started >= 0.25)


# --- ListOffsets ------------------------------------------------------------------------------


def list_offsets(s: Session) -> None:
    s.create_topic("list-offsets")
    s.create_topic("list-offsets-empty")
    t = BASE_TIME_MS
    s.produce("list-offsets", batch([b"0", b"1"], timestamps=[t + 100, t + 150]))
    # the largest timestamp is not the last record's
    s.produce("list-offsets", batch([b"2", b"3"], timestamps=[t + 300, t + 250]))
    s.produce("list-offsets", batch([b"4"], timestamps=[t + 200]))
    body = Session.list_offsets_body
    for name, timestamp in [("earliest", -2), ("latest", -1), ("max timestamp", -3),
                            ("before every record", t), ("first record's timestamp", t + 100),
                            ("between records", t + 160), ("inside a batch", t + 260),
                            ("after every record", t + 301)]:
        s.step(name, LIST_OFFSETS, V_LIST_OFFSETS, body("list-offsets", timestamp))
    s.step("empty: latest", LIST_OFFSETS, V_LIST_OFFSETS, body("list-offsets-empty", -1))
    s.step("empty: max timestamp", LIST_OFFSETS, V_LIST_OFFSETS, body("list-offsets-empty", -3))
    s.step("empty: by timestamp", LIST_OFFSETS, V_LIST_OFFSETS, body("list-offsets-empty", t))
    s.step("unknown topic", LIST_OFFSETS, V_LIST_OFFSETS, body("list-offsets-missing", -1))
    s.step("unknown partition", LIST_OFFSETS, V_LIST_OFFSETS, body("list-offsets", -1, 4))
    s.step("leader epoch from the future", LIST_OFFSETS, V_LIST_OFFSETS,
           body("list-offsets", -1, current_leader_epoch=7))
    s.step("current leader epoch", LIST_OFFSETS, V_LIST_OFFSETS,
           body("list-offsets", -1, current_leader_epoch=0))


# --- admin ------------------------------------------------------------------------------------


def admin(s: Session) -> None:
    create = Session.create_topics_body
    s.step("create", CREATE_TOPICS, V_CREATE_TOPICS, create("admin", 2))
    s.wait_served("admin", 2)
    s.step("create: already exists", CREATE_TOPICS, V_CREATE_TOPICS, create("admin", 2))
    s.step("create: invalid name", CREATE_TOPICS, V_CREATE_TOPICS, create("bad name!"))
    s.step("create: name '..'", CREATE_TOPICS, V_CREATE_TOPICS, create(".."))
    s.step("create: name too long", CREATE_TOPICS, V_CREATE_TOPICS, create("a" * 250))
    s.step("create: 0 partitions", CREATE_TOPICS, V_CREATE_TOPICS, create("admin-zero", 0))
    s.step("create: replication factor 2", CREATE_TOPICS, V_CREATE_TOPICS,
           create("admin-rf2", 1, 2))
    s.step("create: replication factor 0", CREATE_TOPICS, V_CREATE_TOPICS,
           create("admin-rf0", 1, 0))
    s.step("create: invalid config value", CREATE_TOPICS, V_CREATE_TOPICS,
           create("admin-cfg", configs={"cleanup.policy": "bogus"}))
    s.step("create: unknown config", CREATE_TOPICS, V_CREATE_TOPICS,
           create("admin-cfg", configs={"no.such.config": "1"}))
    s.step("create: validate_only", CREATE_TOPICS, V_CREATE_TOPICS,
           create("admin-validate", 3, validate_only=True))
    s.step("metadata: validated topic not created", METADATA, V_METADATA, {
        "topics": [{"name": "admin-validate", "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    s.step("create: broker defaults (-1, -1)", CREATE_TOPICS, V_CREATE_TOPICS,
           create("admin-defaults", -1, -1, configs={"retention.ms": "3600000"}))
    s.step("delete: unknown name", DELETE_TOPICS, V_DELETE_TOPICS, {
        "topics": [{"name": "admin-missing", "topic_id": uuid.UUID(int=0)}], "timeout": 30000})
    s.step("delete: unknown id", DELETE_TOPICS, V_DELETE_TOPICS, {
        "topics": [{"name": None, "topic_id": UNKNOWN_TOPIC_ID}], "timeout": 30000})

    def partitions(count: int, topic: str = "admin", validate_only: bool = False
                   ) -> dict[str, Any]:
        return {"topics": [{"name": topic, "count": count, "assignments": None}],
                "timeout": 30000, "validate_only": validate_only}

    s.step("create partitions: fewer than now", CREATE_PARTITIONS, V_CREATE_PARTITIONS,
           partitions(1))
    s.step("create partitions: as many as now", CREATE_PARTITIONS, V_CREATE_PARTITIONS,
           partitions(2))
    s.step("create partitions: unknown topic", CREATE_PARTITIONS, V_CREATE_PARTITIONS,
           partitions(3, "admin-missing"))
    s.step("create partitions: validate_only", CREATE_PARTITIONS, V_CREATE_PARTITIONS,
           partitions(3, validate_only=True))
    s.step("create partitions: 3", CREATE_PARTITIONS, V_CREATE_PARTITIONS, partitions(3))
    s.wait_served("admin", 3)

    describe = Session.describe_configs_body

    s.step("describe configs: unknown topic", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(2, "admin-missing", None))
    s.step("describe configs: a default and an override", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(2, "admin-defaults", ["cleanup.policy", "retention.ms"]))
    s.step("describe configs: unknown key", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(2, "admin", ["no.such.config"]))
    s.step("describe configs: another broker", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(4, "7", ["log.retention.hours"]))
    s.step("describe configs: broker name not a number", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(4, "abc", ["log.retention.hours"]))

    s.step("metadata", METADATA, V_METADATA, {
        "topics": [{"name": n, "topic_id": None} for n in ("admin", "admin-missing", "bad name!")],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    s.step("metadata: auto-creation asked for, off on the broker", METADATA, V_METADATA, {
        "topics": [{"name": "admin-auto", "topic_id": None}],
        "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    s.step("metadata: by topic id", METADATA, V_METADATA, {
        "topics": [{"name": None, "topic_id": s.topic_id("admin")}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    s.step("describe cluster", DESCRIBE_CLUSTER, V_DESCRIBE_CLUSTER, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1})

    def alter(topic: str, name: str, value: str | None, operation: int = 0,
              validate_only: bool = False) -> dict[str, Any]:
        return {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": name, "config_operation": operation, "value": value}]}],
                "validate_only": validate_only}

    s.step("alter configs: invalid value", INCREMENTAL_ALTER_CONFIGS,
           V_INCREMENTAL_ALTER_CONFIGS, alter("admin", "retention.ms", "soon"))
    s.step("alter configs: unknown name", INCREMENTAL_ALTER_CONFIGS,
           V_INCREMENTAL_ALTER_CONFIGS, alter("admin", "no.such.config", "1"))
    s.step("alter configs: unknown topic", INCREMENTAL_ALTER_CONFIGS,
           V_INCREMENTAL_ALTER_CONFIGS, alter("admin-missing", "retention.ms", "1000"))
    s.step("alter configs: append to a non-list", INCREMENTAL_ALTER_CONFIGS,
           V_INCREMENTAL_ALTER_CONFIGS, alter("admin", "retention.ms", "1000", operation=2))
    s.step("alter configs: validate_only", INCREMENTAL_ALTER_CONFIGS,
           V_INCREMENTAL_ALTER_CONFIGS, alter("admin", "retention.ms", "1000",
                                              validate_only=True))
    s.step("alter configs", INCREMENTAL_ALTER_CONFIGS, V_INCREMENTAL_ALTER_CONFIGS,
           alter("admin", "retention.ms", "7200000"))
    s.wait_topic_config("admin", "retention.ms", "7200000")
    s.step("describe configs: after alter", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(2, "admin", ["retention.ms"]))
    s.step("alter configs: delete", INCREMENTAL_ALTER_CONFIGS, V_INCREMENTAL_ALTER_CONFIGS,
           alter("admin", "retention.ms", None, operation=1))
    s.wait_topic_config("admin", "retention.ms", None)
    s.step("describe configs: after delete", DESCRIBE_CONFIGS, V_DESCRIBE_CONFIGS,
           describe(2, "admin", ["retention.ms"]))

    s.produce("admin", batch([b"a", b"b", b"c"]))

    def delete_records(offset: int, topic: str = "admin", partition: int = 0
                       ) -> dict[str, Any]:
        return {"topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "offset": offset}]}], "timeout": 30000}

    s.step("delete records: past the high watermark", DELETE_RECORDS, V_DELETE_RECORDS,
           delete_records(10))
    s.step("delete records: unknown topic", DELETE_RECORDS, V_DELETE_RECORDS,
           delete_records(1, "admin-missing"))
    s.step("delete records: unknown partition", DELETE_RECORDS, V_DELETE_RECORDS,
           delete_records(1, partition=9))
    s.step("delete records: to 2", DELETE_RECORDS, V_DELETE_RECORDS, delete_records(2))
    s.step("delete records: back to 1", DELETE_RECORDS, V_DELETE_RECORDS, delete_records(1))
    s.step("delete records: to the high watermark (-1)", DELETE_RECORDS, V_DELETE_RECORDS,
           delete_records(-1))
    s.step("fetch below the log start", FETCH, V_FETCH, Session.fetch_body("admin", 0))
    s.step("list offsets: earliest after deletion", LIST_OFFSETS, V_LIST_OFFSETS,
           Session.list_offsets_body("admin", -2))
    s.step("delete topic", DELETE_TOPICS, V_DELETE_TOPICS, {
        "topics": [{"name": "admin-defaults", "topic_id": None}], "timeout": 30000})
    s.step("create partitions: deleted topic", CREATE_PARTITIONS, V_CREATE_PARTITIONS,
           partitions(3, "admin-defaults"))


# --- classic groups ---------------------------------------------------------------------------

_PROTOCOLS = [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"}]


def _join(group: str, member_id: str = "", session_timeout: int = 10000,
          protocol_type: str = "consumer") -> dict[str, Any]:
    return {"group_id": group, "session_timeout": session_timeout, "rebalance_timeout": 30000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": protocol_type,
            "protocols": _PROTOCOLS}


def _commit(group: str, generation: int, member_id: str, topic: str, offset: int = 1,
            partition: int = 0) -> dict[str, Any]:
    return {"group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member_id, "group_instance_id": None, "topics": [{
                "name": topic, "partitions": [{
                    "partition_index": partition, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}


def _offset_fetch(group: str, topic: str | None, partitions: list[int] | None = None
                  ) -> dict[str, Any]:
    topics = None if topic is None else [
        {"name": topic, "partition_indexes": partitions or [0]}]
    return {"groups": [{"group_id": group, "topics": topics}], "require_stable": False}


def groups(s: Session) -> None:
    s.create_topic("groups")
    s.note("find coordinator", s.coordinator_ready("groups-g", 0))
    group = "groups-g"
    s.step("heartbeat: unknown group", HEARTBEAT, V_HEARTBEAT, {
        "group_id": "groups-missing", "generation_id": 1, "member_id": "m",
        "group_instance_id": None})
    s.step("sync: unknown group", SYNC_GROUP, V_SYNC_GROUP, {
        "group_id": "groups-missing", "generation_id": 1, "member_id": "m",
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": []})
    s.step("describe: unknown group", DESCRIBE_GROUPS, V_DESCRIBE_GROUPS, {
        "groups": ["groups-missing"], "include_authorized_operations": False})
    s.step("offset fetch: unknown group", OFFSET_FETCH, V_OFFSET_FETCH,
           _offset_fetch("groups-missing", "groups"))
    s.step("offset fetch: unknown group, all topics", OFFSET_FETCH, V_OFFSET_FETCH,
           _offset_fetch("groups-missing", None))
    s.step("join: session timeout below the minimum", JOIN_GROUP, V_JOIN_GROUP,
           _join(group, session_timeout=10))
    s.step("join: unknown member id", JOIN_GROUP, V_JOIN_GROUP, _join(group, "groups-nobody"))
    required = s.step("join: empty member id", JOIN_GROUP, V_JOIN_GROUP, _join(group))
    member = required.member_id
    joined = s.step("join: with the member id", JOIN_GROUP, V_JOIN_GROUP, _join(group, member))
    generation = joined.generation_id
    s.step("join: another protocol type", JOIN_GROUP, V_JOIN_GROUP,
           _join(group, protocol_type="connect"))
    sync = {"group_id": group, "generation_id": generation, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"\x00\x01assigned"}]}
    s.step("sync: bad generation", SYNC_GROUP, V_SYNC_GROUP,
           {**sync, "generation_id": generation + 5})
    s.step("sync: unknown member", SYNC_GROUP, V_SYNC_GROUP, {**sync, "member_id": "nobody"})
    s.step("sync: other protocol name", SYNC_GROUP, V_SYNC_GROUP,
           {**sync, "protocol_name": "roundrobin"})
    s.step("sync", SYNC_GROUP, V_SYNC_GROUP, sync)
    beat = {"group_id": group, "generation_id": generation, "member_id": member,
            "group_instance_id": None}
    s.step("heartbeat", HEARTBEAT, V_HEARTBEAT, beat)
    s.step("heartbeat: bad generation", HEARTBEAT, V_HEARTBEAT,
           {**beat, "generation_id": generation + 5})
    s.step("heartbeat: unknown member", HEARTBEAT, V_HEARTBEAT, {**beat, "member_id": "nobody"})
    s.step("commit: bad generation", OFFSET_COMMIT, V_OFFSET_COMMIT,
           _commit(group, generation + 5, member, "groups"))
    s.step("commit: unknown member", OFFSET_COMMIT, V_OFFSET_COMMIT,
           _commit(group, generation, "nobody", "groups"))
    s.step("commit: unknown topic", OFFSET_COMMIT, V_OFFSET_COMMIT,
           _commit(group, generation, member, "groups-missing"))
    s.step("commit", OFFSET_COMMIT, V_OFFSET_COMMIT, _commit(group, generation, member,
                                                             "groups", offset=5))
    s.step("commit: generation -1 to a live group", OFFSET_COMMIT, V_OFFSET_COMMIT,
           _commit(group, -1, "", "groups"))
    s.step("offset fetch", OFFSET_FETCH, V_OFFSET_FETCH,
           _offset_fetch(group, "groups", [0, 1]))
    s.step("offset fetch: all topics", OFFSET_FETCH, V_OFFSET_FETCH, _offset_fetch(group, None))
    s.step("describe", DESCRIBE_GROUPS, V_DESCRIBE_GROUPS, {
        "groups": [group], "include_authorized_operations": False})

    def offset_delete(group_id: str) -> dict[str, Any]:
        return {"group_id": group_id, "topics": [{"name": "groups", "partitions": [
            {"partition_index": 0}]}]}

    s.step("offset delete: unknown group", OFFSET_DELETE, V_OFFSET_DELETE,
           offset_delete("groups-missing"))
    s.step("offset delete: a topic the group consumes", OFFSET_DELETE, V_OFFSET_DELETE,
           offset_delete(group))
    s.step("delete groups: a live group and an unknown one", DELETE_GROUPS, V_DELETE_GROUPS, {
        "groups_names": [group, "groups-missing"]})
    s.step("leave: unknown member", LEAVE_GROUP, V_LEAVE_GROUP, {
        "group_id": group, "members": [{"member_id": "nobody", "group_instance_id": None}]})
    s.step("leave", LEAVE_GROUP, V_LEAVE_GROUP, {
        "group_id": group, "members": [{"member_id": member, "group_instance_id": None}]})
    s.step("describe: empty after leave", DESCRIBE_GROUPS, V_DESCRIBE_GROUPS, {
        "groups": [group], "include_authorized_operations": False})
    # a group used only for commits (generation -1): what admin tools and Spark do
    s.step("commit: standalone, new group", OFFSET_COMMIT, V_OFFSET_COMMIT,
           _commit("groups-standalone", -1, "", "groups", offset=3))
    s.step("offset fetch: standalone", OFFSET_FETCH, V_OFFSET_FETCH,
           _offset_fetch("groups-standalone", "groups"))
    s.step("delete groups: empty group", DELETE_GROUPS, V_DELETE_GROUPS, {
        "groups_names": [group, "groups-standalone"]})
    s.step("offset fetch: deleted group", OFFSET_FETCH, V_OFFSET_FETCH,
           _offset_fetch("groups-standalone", "groups"))
    # a corrupt batch: a broker that lets clients write to an internal topic refuses it as
    # CORRUPT_MESSAGE, and nothing reaches the topic either way
    corrupt = bytearray(batch([b"x"]))
    corrupt[-3] ^= 0xFF
    s.step("produce to __consumer_offsets", PRODUCE, V_PRODUCE,
           Session.produce_body("__consumer_offsets", bytes(corrupt)))


def consumer_groups(s: Session) -> None:
    """KIP-848 groups: the errors of ConsumerGroupHeartbeat (v1: the member id is the
    client's)."""
    s.create_topic("cgroups")
    s.coordinator_ready("cgroups-g", 0)
    member = "cgroups-member-0000000001"

    def beat(epoch: int, member_id: str = member, topics: list[str] | None = None,
             group: str = "cgroups-g", **extra: Any) -> dict[str, Any]:
        return {"group_id": group, "member_id": member_id, "member_epoch": epoch,
                "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
                "subscribed_topic_names": topics, "subscribed_topic_regex": None,
                "server_assignor": None, "topic_partitions": None, **extra}

    s.step("unknown member, epoch 5", CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_HEARTBEAT,
           beat(5, topics=["cgroups"]))
    s.step("join without topics", CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_HEARTBEAT,
           beat(0))
    s.step("join with an empty member id", CONSUMER_GROUP_HEARTBEAT,
           V_CONSUMER_GROUP_HEARTBEAT, beat(0, member_id="", topics=["cgroups"]))
    s.step("unknown assignor", CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_HEARTBEAT,
           beat(0, topics=["cgroups"], server_assignor="nope"))
    joined = s.step("join", CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_HEARTBEAT,
                    beat(0, topics=["cgroups"], topic_partitions=[]))
    epoch = joined.member_epoch
    s.step("epoch from the future", CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_HEARTBEAT,
           beat(epoch + 10))
    s.step("classic join to a consumer group", JOIN_GROUP, V_JOIN_GROUP, _join("cgroups-g"))
    described = s.call(CONSUMER_GROUP_DESCRIBE, V_CONSUMER_GROUP_DESCRIBE, {
        "group_ids": ["cgroups-g"], "include_authorized_operations": False})
    member_described = described.groups[0].members[0]
    s.note("describe: a member's subscribed_topic_regex without a regex",
           member_described.subscribed_topic_regex)
    s.note("describe: a member's subscribed_topic_names", member_described.subscribed_topic_names)
    s.step("leave", CONSUMER_GROUP_HEARTBEAT, V_CONSUMER_GROUP_HEARTBEAT, beat(-1))


# --- transactions -----------------------------------------------------------------------------


def transactions(s: Session) -> None:
    s.create_topic("txn")
    s.note("find coordinator", s.coordinator_ready("txn-a", 1))
    s.coordinator_ready("txn-group", 0)
    s.init_producer_id("txn-warm-up")

    def init(txn_id: str | None, timeout_ms: int = 60000) -> dict[str, Any]:
        return {"transactional_id": txn_id, "transaction_timeout": timeout_ms,
                "producer_id": -1, "producer_epoch": -1}

    s.step("init: timeout above transaction.max.timeout.ms", INIT_PRODUCER_ID,
           V_INIT_PRODUCER_ID, init("txn-a", 900_001))
    s.step("init: timeout 0", INIT_PRODUCER_ID, V_INIT_PRODUCER_ID, init("txn-a", 0))
    first = s.step("init", INIT_PRODUCER_ID, V_INIT_PRODUCER_ID, init("txn-a"))
    pid, epoch = first.producer_id, first.producer_epoch
    second = s.step("init again: the epoch is bumped", INIT_PRODUCER_ID, V_INIT_PRODUCER_ID,
                    init("txn-a"))
    s.note("init again: same producer id", second.producer_id == pid)
    s.note("init again: next epoch", second.producer_epoch == epoch + 1)
    epoch = second.producer_epoch

    def add(txn_id: str, producer_id: int, producer_epoch: int, partitions: list[int] | None = None
            ) -> dict[str, Any]:
        return {"v3_and_below_transactional_id": txn_id,
                "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": producer_epoch,
                "v3_and_below_topics": [{"name": "txn", "partitions": partitions or [0]}]}

    s.step("add partitions: unknown producer id", ADD_PARTITIONS_TO_TXN, V_ADD_PARTITIONS_TO_TXN,
           add("txn-a", pid + 1000, epoch))
    s.step("add partitions: unknown transactional id", ADD_PARTITIONS_TO_TXN,
           V_ADD_PARTITIONS_TO_TXN, add("txn-missing", pid, epoch))
    s.step("add partitions: old epoch", ADD_PARTITIONS_TO_TXN, V_ADD_PARTITIONS_TO_TXN,
           add("txn-a", pid, epoch - 1))
    s.step("add partitions: unknown partition", ADD_PARTITIONS_TO_TXN, V_ADD_PARTITIONS_TO_TXN,
           add("txn-a", pid, epoch, [0, 5]))

    def end(txn_id: str, producer_id: int, producer_epoch: int, committed: bool
            ) -> dict[str, Any]:
        return {"transactional_id": txn_id, "producer_id": producer_id,
                "producer_epoch": producer_epoch, "committed": committed}

    s.step("end: commit without a transaction", END_TXN, V_END_TXN, end("txn-a", pid, epoch,
                                                                       True))
    s.step("end: abort without a transaction", END_TXN, V_END_TXN, end("txn-a", pid, epoch,
                                                                      False))
    s.step("end: unknown transactional id", END_TXN, V_END_TXN, end("txn-missing", pid, epoch,
                                                                   True))
    s.step("end: unknown producer id", END_TXN, V_END_TXN, end("txn-a", pid + 1000, epoch,
                                                              True))
    s.step("add offsets: unknown producer id", ADD_OFFSETS_TO_TXN, V_ADD_OFFSETS_TO_TXN, {
        "transactional_id": "txn-a", "producer_id": pid + 1000, "producer_epoch": epoch,
        "group_id": "txn-group"})

    def txn_commit(txn_id: str, producer_id: int, producer_epoch: int, generation: int = -1,
                   member_id: str = "") -> dict[str, Any]:
        return {"transactional_id": txn_id, "group_id": "txn-group", "producer_id": producer_id,
                "producer_epoch": producer_epoch, "generation_id": generation,
                "member_id": member_id, "group_instance_id": None, "topics": [{
                    "name": "txn", "partitions": [{
                        "partition_index": 0, "committed_offset": 1,
                        "committed_leader_epoch": -1, "committed_metadata": None}]}]}

    s.step("txn offset commit: unknown transaction", TXN_OFFSET_COMMIT, V_TXN_OFFSET_COMMIT,
           txn_commit("txn-missing", pid + 1000, 0))
    s.step("txn offset commit: unknown member", TXN_OFFSET_COMMIT, V_TXN_OFFSET_COMMIT,
           txn_commit("txn-a", pid, epoch, generation=3, member_id="nobody"))
    txn_batch = batch([b"t"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                      transactional=True)
    s.step("produce: partition not added to the transaction", PRODUCE, V_PRODUCE,
           Session.produce_body("txn", txn_batch, transactional_id="txn-a"))
    s.step("add partitions", ADD_PARTITIONS_TO_TXN, V_ADD_PARTITIONS_TO_TXN,
           add("txn-a", pid, epoch))
    s.step("add partitions: again", ADD_PARTITIONS_TO_TXN, V_ADD_PARTITIONS_TO_TXN,
           add("txn-a", pid, epoch))
    s.step("produce: in the transaction", PRODUCE, V_PRODUCE,
           Session.produce_body("txn", txn_batch, transactional_id="txn-a"))
    s.step("fetch read_committed: open transaction", FETCH, V_FETCH,
           Session.fetch_body("txn", 0, isolation_level=1))
    s.step("list offsets: latest", LIST_OFFSETS, V_LIST_OFFSETS,
           Session.list_offsets_body("txn", -1))
    committed_only = Session.list_offsets_body("txn", -1)
    committed_only["isolation_level"] = 1
    s.step("list offsets read_committed: latest", LIST_OFFSETS, V_LIST_OFFSETS, committed_only)
    s.step("describe producers", DESCRIBE_PRODUCERS, V_DESCRIBE_PRODUCERS, {
        "topics": [{"name": "txn", "partition_indexes": [0, 3]}]})
    s.step("describe transactions: open", DESCRIBE_TRANSACTIONS, V_DESCRIBE_TRANSACTIONS, {
        "transactional_ids": ["txn-a"]})
    s.step("describe transactions: unknown id", DESCRIBE_TRANSACTIONS, V_DESCRIBE_TRANSACTIONS, {
        "transactional_ids": ["txn-missing"]})
    fencing = s.step("init: while a transaction is open", INIT_PRODUCER_ID, V_INIT_PRODUCER_ID,
                     init("txn-a"))
    # Kafka asks the producer to retry until the open transaction's abort is written
    s.note("init: the answer once the open transaction is aborted",
           s.init_producer_id("txn-a")
           if fencing.error_code == ErrorCode.concurrent_transactions else fencing)
    s.step("end: old epoch after the fence", END_TXN, V_END_TXN, end("txn-a", pid, epoch, True))
    s.step("fetch read_committed: aborted", FETCH, V_FETCH,
           Session.fetch_body("txn", 0, isolation_level=1))


SCENARIOS: dict[str, Callable[[Session], None]] = {
    "produce": produce,
    "idempotent_produce": idempotent_produce,
    "fetch": fetch,
    "list_offsets": list_offsets,
    "admin": admin,
    "groups": groups,
    "consumer_groups": consumer_groups,
    "transactions": transactions,
}


def run(name: str, address: str) -> list[tuple[str, Any]]:
    """The steps of scenario ``name`` against the broker at ``address``."""
    session = Session(address)
    try:
        SCENARIOS[name](session)
    finally:
        session.close()
    return session.steps
