"""``samsa reassign-partitions``: kafka-reassign-partitions.sh (--generate, --execute, --verify,
--cancel, --list).

The reassignment file is Kafka's JSON::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                                   "log_dirs": ["any", "any"]}]}

(``log_dirs`` optional: for each replica, the log directory of its broker to put it in, or
``any``), and the topics-to-move file of ``--generate`` is ``{"version": 1, "topics":
[{"topic": "t"}]}``. Output lines are Kafka's ReassignPartitionsCommand's: ``--execute`` prints
the current assignment of the partitions it moves (to save for a rollback) then ``Successfully
started partition reassignments for t-0,t-1``; ``--verify`` prints ``Reassignment of partition
t-0 is completed.`` or ``... is still in progress.``; ``--cancel`` cancels the reassignments of
the file that are running; ``--list`` prints the running ones; ``--generate`` proposes an
assignment of whole topics over ``--broker-list`` with Kafka's replica placement
(``samsa.cluster.placement``). Like Kafka, ``--execute`` refuses to start while other
reassignments run unless ``--additional`` is given.

A replica with a log directory (not ``any``) is moved there after the reassignment has started,
as Kafka's executeMoves does: AlterReplicaLogDirs is sent to its broker until the broker takes
it (REPLICA_NOT_AVAILABLE while the replica is not there yet: the broker remembers the
directory and creates the replica in it) or ``--timeout`` ms have passed, then ``Successfully
started log directory move for: t-0-1`` (topic-partition-broker). ``--verify`` then reports
each such replica from DescribeLogDirs (``Reassignment of replica t-0-1 completed
successfully.``, ``... is still in progress.``, or where it is instead).

Replication throttles, as Kafka's: ``--execute --throttle N`` sets
``leader.replication.throttled.replicas`` (the partitions' current replicas) and
``follower.replication.throttled.replicas`` (the replicas being added) on each topic moved and
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` = N on every
broker involved ("The inter-broker throttle limit was set to N B/s"; with ``--additional`` it
changes the throttle of running reassignments); ``--replica-alter-log-dirs-throttle N`` sets
``replica.alter.log.dirs.io.max.bytes.per.second`` on the brokers whose replicas move between
log directories. ``--verify``, once no reassignment runs, and ``--cancel`` remove every one of
those configs from every broker and from the file's topics ("Clearing broker-level throttles on
brokers ...") unless ``--preserve-throttles`` is given. Unlike Kafka, an unknown topic or
partition in the file of ``--verify`` or ``--cancel`` is an error too.

confluent-kafka has no reassignment API, so the requests (Metadata, AlterPartitionReassignments,
ListPartitionReassignments, AlterReplicaLogDirs, DescribeLogDirs) go over a socket of samsa's
own (``samsa.tools.wire``), the reassignments' to the controller Metadata names, found again
when a broker answers NOT_CONTROLLER, the log directories' to the replicas' brokers
(kafka-python, which has these calls, is only a test dependency). Of ``--command-config``,
``client.id`` and the security settings (TLS, SASL: see ``samsa.tools.wire``) are used. Every
failure is one ``samsa:`` line and exit status 1 (2 for a usage error).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence, Sized
from pathlib import Path
from typing import Any

import click
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.incremental_alter_configs.v0.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)

from samsa.cluster.placement import BrokerMetadata, assign_replicas
from samsa.errors import ErrorCode, KafkaError, kafka_name
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    bootstrap_option,
    command_config_option,
    parse_bootstrap,
    read_properties_file,
)
from samsa.tools.wire import Node, WirePool, WireSecurity, build_entity

CLIENT_ID = "reassign-partitions-tool"  # Kafka's client id for this tool
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35
INCREMENTAL_ALTER_CONFIGS = 44
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
ANY_LOG_DIR = "any"
DEFAULT_TIMEOUT_MS = 10000  # Kafka's --timeout: how long log directory moves may take to start
MOVE_RETRY_S = 0.1
TP = tuple[str, int]
TPR = tuple[str, int, int]  # Kafka's TopicPartitionReplica: topic, partition, broker

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Kafka's required and permitted options of each action (--bootstrap-server and
# --command-config are permitted everywhere).
REQUIRED: dict[str, tuple[str, ...]] = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
PERMITTED: dict[str, frozenset[str]] = {
    "generate": frozenset({"disable_rack_aware"}),
    "execute": frozenset({"additional", "throttle", "replica_alter_log_dirs_throttle",
                          "timeout"}),
    "verify": frozenset({"preserve_throttles"}),
    "cancel": frozenset({"preserve_throttles", "timeout"}),
    "list": frozenset(),
}
OPTION_NAMES = {
    "reassignment_json_file": "reassignment-json-file",
    "topics_to_move_json_file": "topics-to-move-json-file",
    "broker_list": "broker-list", "disable_rack_aware": "disable-rack-aware",
    "additional": "additional", "preserve_throttles": "preserve-throttles",
    "throttle": "throttle", "replica_alter_log_dirs_throttle": "replica-alter-log-dirs-throttle",
    "timeout": "timeout",
}
UNSET = -1  # the default of --throttle and --replica-alter-log-dirs-throttle: no throttle
YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure"
    " the throttle is removed."
)
CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to"
    " override this and create a new partition assignment in addition to the existing one. The"
    " --additional flag can also be used to change the throttle by resubmitting the current"
    " reassignment."
)
# Errors worth another try: the controller moved, or is being elected.
RETRIABLE = frozenset({ErrorCode.not_controller, ErrorCode.request_timed_out})
# Kafka's messages (Errors.java), for answers that carry no message of their own.
MESSAGES = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.invalid_topic_exception:
        "The request attempted to perform an operation on an invalid topic.",
    ErrorCode.invalid_replica_assignment: "Replica assignment is invalid.",
    ErrorCode.no_reassignment_in_progress: "No partition reassignment is in progress.",
    ErrorCode.not_controller: "This is not the correct controller for this cluster.",
    ErrorCode.request_timed_out: "The request timed out.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.invalid_request:
        "This most likely occurs because of a request being malformed by the client library or"
        " the message was sent to an incompatible broker. See the broker logs for more details.",
    ErrorCode.unknown_server_error:
        "The server experienced an unexpected error when processing the request.",
    ErrorCode.log_dir_not_found:
        "The user-specified log directory is not found in the broker config.",
    ErrorCode.kafka_storage_error: "Disk error when trying to access log file on the disk.",
    ErrorCode.replica_not_available:
        "The replica is not available for the requested topic-partition.",
}


def tp_name(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def replica_name(replica: TPR) -> str:
    """Kafka's TopicPartitionReplica.toString: ``topic-partition-broker``."""
    return f"{replica[0]}-{replica[1]}-{replica[2]}"


def _replica_order(replica: TPR) -> tuple[int, str, int]:
    """Kafka's compareTopicPartitionReplicas: broker, then topic, then partition."""
    return replica[2], replica[0], replica[1]


def joined(ids: Iterable[int], sep: str = ",") -> str:
    return sep.join(map(str, ids))


def message_of(code: int, message: str | None) -> str:
    """The message Kafka's exception for this answer would carry."""
    if message:
        return message
    try:
        return MESSAGES.get(ErrorCode(code), kafka_name(code))
    except ValueError:
        return kafka_name(code)


# --- the JSON files ------------------------------------------------------------------------------


def read_json(path: Path, option: str) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ToolError(f"{option}: cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ToolError(f"{option} {path}: The input string is not a valid JSON: {exc}") from exc


def _type_name(value: Any) -> str:
    return json.dumps(value) if len(json.dumps(value)) <= 40 else type(value).__name__


def _field(obj: Any, name: str, kind: str, where: str) -> Any:
    """Field ``name`` of JSON object ``obj``: ``int``, ``str``, ``ints`` or ``strs``."""
    if not isinstance(obj, dict):
        raise ToolError(f"{where}: expected a JSON object, got {_type_name(obj)}")
    if name not in obj:
        raise ToolError(f"{where}: No such field exists: `{name}`")
    value = obj[name]
    ok = {
        "int": is_int32,
        "str": lambda v: isinstance(v, str),
        "ints": lambda v: isinstance(v, list) and all(is_int32(i) for i in v),
        "strs": lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
    }[kind](value)
    if not ok:
        wanted = {"int": "an int32", "str": "a string", "ints": "a list of int32s",
                  "strs": "a list of strings"}[kind]
        raise ToolError(f"{where}: `{name}` must be {wanted}, got {_type_name(value)}")
    return value


def is_int32(value: Any) -> bool:
    """A JSON integer that fits Kafka's int32 (Java's Integer)."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and -(2**31) <= value < 2**31)


def _version(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise ToolError(f"{where}: expected a JSON object, got {_type_name(data)}")
    version = _field(data, "version", "int", where) if "version" in data else 1
    if version != 1:
        raise ToolError(f"{where}: Not supported version field value {version}")


def parse_reassignment(data: Any, where: str) -> list[tuple[TP, list[int]]]:
    """Kafka's parsePartitionReassignmentData: (partition, replicas) in the file's order,
    duplicates kept (for the checks of --execute)."""
    _version(data, where)
    partitions = data.get("partitions", [])
    if not isinstance(partitions, list):
        raise ToolError(f"{where}: `partitions` must be a list, got {_type_name(partitions)}")
    result: list[tuple[TP, list[int]]] = []
    for entry in partitions:
        topic = _field(entry, "topic", "str", where)
        partition = _field(entry, "partition", "int", where)
        replicas = _field(entry, "replicas", "ints", where)
        tp = (topic, partition)
        if "log_dirs" in entry:
            log_dirs = _field(entry, "log_dirs", "strs", where)
            if len(log_dirs) != len(replicas):
                raise ToolError(
                    f"Size of replicas list {_java_list(replicas)} is different from size of"
                    f" log dirs list {_java_list(log_dirs)} for partition {tp_name(tp)}"
                )
        result.append((tp, list(replicas)))
    return result


def parse_log_dirs(data: Any, where: str) -> dict[TPR, str]:
    """The log directory of each replica whose ``log_dirs`` entry is not ``any`` (Kafka's
    parsePartitionReassignmentData's replica assignment; ``parse_reassignment`` checked the
    file first)."""
    moves: dict[TPR, str] = {}
    for entry in data.get("partitions", []):
        if "log_dirs" not in entry:
            continue
        topic = _field(entry, "topic", "str", where)
        partition = _field(entry, "partition", "int", where)
        replicas = _field(entry, "replicas", "ints", where)
        for broker, log_dir in zip(replicas, _field(entry, "log_dirs", "strs", where),
                                   strict=True):
            if log_dir != ANY_LOG_DIR:
                moves[(topic, partition, broker)] = log_dir
    return moves


def _java_list(items: Sequence[object]) -> str:
    return f"[{', '.join(map(str, items))}]"


def check_execute(parts: list[tuple[TP, list[int]]]) -> dict[TP, list[int]]:
    """Kafka's parseExecuteAssignmentArgs checks; the reassignments by partition."""
    if not parts:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise ToolError("Partition replica list cannot be empty")
    seen: set[TP] = set()
    duplicated: list[TP] = []
    for tp, _ in parts:
        if tp in seen and tp not in duplicated:
            duplicated.append(tp)
        seen.add(tp)
    if duplicated:
        raise ToolError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(tp_name(tp) for tp in duplicated)
        )
    problems = []
    for tp, replicas in parts:
        repeated = sorted({r for r in replicas if replicas.count(r) > 1})
        if repeated:
            problems.append(f"{tp_name(tp)} contains multiple entries for {joined(repeated)}")
    if problems:
        raise ToolError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(problems)
        )
    return dict(parts)


def parse_topics(data: Any, where: str) -> list[str]:
    """The topics of a --topics-to-move-json-file, checked for repeats."""
    _version(data, where)
    entries = data.get("topics", [])
    if not isinstance(entries, list):
        raise ToolError(f"{where}: `topics` must be a list, got {_type_name(entries)}")
    topics = [_field(entry, "topic", "str", where) for entry in entries]
    repeated = sorted({t for t in topics if topics.count(t) > 1})
    if repeated:
        raise ToolError(
            f"List of topics to reassign contains duplicate entries: {_java_list(repeated)}"
        )
    if not topics:
        raise ToolError(f"{where}: no topics to move")
    return topics


def parse_broker_list(value: str) -> list[int]:
    brokers = []
    for item in value.split(","):
        try:
            broker = int(item.strip())
        except ValueError:
            broker = None
        if broker is None or not is_int32(broker):
            raise click.UsageError(
                f"--broker-list takes broker ids separated by commas, got {value!r}"
            )
        brokers.append(broker)
    repeated = sorted({b for b in brokers if brokers.count(b) > 1})
    if repeated:
        raise ToolError(f"Broker list contains duplicate entries: {_java_list(repeated)}")
    return brokers


def reassignment_json(assignment: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted, every log dir ``any``."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp[0], "partition": tp[1], "replicas": list(assignment[tp]),
         "log_dirs": [ANY_LOG_DIR] * len(assignment[tp])}
        for tp in sorted(assignment)
    ]}, separators=(",", ":"))


# --- the cluster ---------------------------------------------------------------------------------


class Cluster(WirePool):
    """Connections to the cluster, all bounded by one deadline."""

    def by_id(self, metadata: Any) -> dict[int, Node]:
        return {n.node_id: n for n in self.brokers(metadata)}

    def assignment(self, topics: Iterable[str]) -> dict[TP, list[int]]:
        """The replicas of every partition of these topics (Metadata); Kafka's error for a
        topic that does not exist. Retried while a topic has no partitions to show yet."""
        names = sorted(set(topics))
        while True:
            response = self.metadata(names)
            found: dict[TP, list[int]] = {}
            retry = False
            for topic in response.topics:
                code = topic.error_code
                if code == ErrorCode.unknown_topic_or_partition:
                    raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: Topic {topic.name} not found.")
                if code == ErrorCode.leader_not_available and not topic.partitions:
                    retry = True
                elif code not in (ErrorCode.none, ErrorCode.leader_not_available):
                    raise ToolError(f"{kafka_name(code)}: cannot describe topic {topic.name}:"
                                    f" {message_of(code, None)}")
                for p in topic.partitions:
                    found[(topic.name, int(p.partition_index))] = [int(r)
                                                                  for r in p.replica_nodes]
            if not retry:
                return found
            if not self.pause():
                raise ToolError(f"LEADER_NOT_AVAILABLE: the partitions of {', '.join(names)}"
                                " are not known yet")

    def on_controller(self, api_key: int, name: str, body: Any) -> Any:
        """Send ``body`` (a v0 request) to the controller Metadata names; found again after
        NOT_CONTROLLER or a lost connection, until the deadline. A top-level error is a
        ToolError."""
        while True:
            metadata = self.metadata(())
            controller = self.by_id(metadata).get(int(metadata.controller_id))
            if controller is None:
                problem = "NOT_CONTROLLER: no controller is known to the cluster"
            else:
                problem = self._try_controller(controller, api_key, name, body)
                if not isinstance(problem, str):
                    return problem
            if not self.pause():
                raise ToolError(problem)

    def _try_controller(self, controller: Node, api_key: int, name: str, body: Any) -> Any:
        """The answer of ``controller``, or the text of a failure worth another try."""
        try:
            wire = self.connect(controller.host, controller.port)
        except ToolError as exc:
            return exc.message
        try:
            wire.version(api_key, 0, 0, name)
            response = wire.request(api_key, 0, body)
        except ToolError as exc:
            self.forget(wire)
            if exc.message.startswith(("UNSUPPORTED_VERSION", "REQUEST_TIMED_OUT")):
                raise
            return exc.message
        code = response.error_code
        if code == ErrorCode.none:
            return response
        problem = f"{kafka_name(code)}: {message_of(code, response.error_message)}"
        if code not in RETRIABLE:
            raise ToolError(problem)
        self.forget(wire)
        return problem

    def list_reassignments(self, partitions: Iterable[TP] | None = None
                           ) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each running move."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(set(partitions)):
                by_topic.setdefault(topic, []).append(index)
            topics = tuple(ListPartitionReassignmentsTopics(name=t, partition_indexes=tuple(ps))
                           for t, ps in by_topic.items())
        response = self.on_controller(
            LIST_REASSIGNMENTS, "ListPartitionReassignments",
            ListPartitionReassignmentsRequest(topics=topics),
        )
        return {
            (t.name, int(p.partition_index)): (
                [int(r) for r in p.replicas], [int(r) for r in p.adding_replicas],
                [int(r) for r in p.removing_replicas],
            )
            for t in response.topics for p in t.partitions
        }

    def alter_reassignments(self, targets: Mapping[TP, Sequence[int] | None]
                            ) -> dict[TP, str]:
        """AlterPartitionReassignments (None: cancel); the error message of each partition
        that failed."""
        by_topic: dict[str, list[ReassignablePartition]] = {}
        for (topic, index), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append(ReassignablePartition(
                partition_index=index,
                replicas=None if replicas is None else tuple(replicas),
            ))
        response = self.on_controller(
            ALTER_REASSIGNMENTS, "AlterPartitionReassignments",
            AlterPartitionReassignmentsRequest(topics=tuple(
                ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            )),
        )
        errors: dict[TP, str] = {}
        answered: set[TP] = set()
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.name, int(p.partition_index))
                answered.add(tp)
                if p.error_code != ErrorCode.none:
                    errors[tp] = message_of(p.error_code, p.error_message)
        for tp in targets:
            if tp not in answered:
                errors[tp] = "The controller's answer left this partition out."
        return errors


    def alter_configs(self, resource_type: int, changes: Mapping[str, Sequence[AlterableConfig]]
                      ) -> None:
        """IncrementalAlterConfigs of topics (to any broker) or brokers (each to itself, as
        Kafka's admin client sends them); the first failure is a ToolError."""
        if not changes:
            return
        nodes = self.by_id(self.metadata(())) if resource_type == RESOURCE_BROKER else {}
        targets: dict[Node | None, list[AlterConfigsResource]] = {}
        for name, configs in sorted(changes.items()):
            node = nodes.get(int(name)) if resource_type == RESOURCE_BROKER else None
            if resource_type == RESOURCE_BROKER and node is None:
                continue  # not in the cluster now: nothing there to change
            targets.setdefault(node, []).append(AlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=tuple(configs)))
        for node, resources in targets.items():
            wire = self.bootstrap() if node is None else self.node(node)
            wire.version(INCREMENTAL_ALTER_CONFIGS, 0, 0, "IncrementalAlterConfigs")
            response = wire.request(INCREMENTAL_ALTER_CONFIGS, 0, IncrementalAlterConfigsRequest(
                resources=tuple(resources), validate_only=False))
            for result in response.responses:
                if result.error_code != ErrorCode.none:
                    raise ToolError(f"{kafka_name(result.error_code)}: "
                                    f"{message_of(result.error_code, result.error_message)}")

    def alter_replica_log_dirs(self, moves: Mapping[TPR, str]) -> dict[TPR, int]:
        """AlterReplicaLogDirs to each replica's broker; the error code of each replica."""
        nodes = self.by_id(self.metadata(()))
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (topic, partition, broker), log_dir in moves.items():
            by_broker.setdefault(broker, {}).setdefault(log_dir, {}).setdefault(
                topic, []).append(partition)
        codes: dict[TPR, int] = {}
        for broker, dirs in sorted(by_broker.items()):
            node = nodes.get(broker)
            if node is None:
                raise ToolError(f"Unknown broker id {broker}")
            wire = self.node(node)
            version = wire.version(ALTER_REPLICA_LOG_DIRS, 1, 2, "AlterReplicaLogDirs")
            schema = importlib.import_module(
                f"kio.schema.alter_replica_log_dirs.v{version}.request")
            request = build_entity(schema.AlterReplicaLogDirsRequest, dirs=tuple(
                build_entity(schema.AlterReplicaLogDir, path=path, topics=tuple(
                    build_entity(schema.AlterReplicaLogDirTopic, name=topic,
                                 partitions=tuple(partitions))
                    for topic, partitions in sorted(topics.items())))
                for path, topics in sorted(dirs.items())))
            response = wire.request(ALTER_REPLICA_LOG_DIRS, version, request)
            for topic in response.results:
                for p in topic.partitions:
                    codes[(topic.topic_name, int(p.partition_index), broker)] = int(
                        p.error_code)
        return codes

    def replica_log_dirs(self, replicas: Iterable[TPR]
                         ) -> dict[TPR, tuple[str | None, str | None]]:
        """(current log dir, future log dir) of each replica, from DescribeLogDirs to its
        broker (Kafka's describeReplicaLogDirs); a replica whose broker is gone is left out."""
        nodes = self.by_id(self.metadata(()))
        by_broker: dict[int, list[TPR]] = {}
        for replica in replicas:
            by_broker.setdefault(replica[2], []).append(replica)
        found: dict[TPR, tuple[str | None, str | None]] = {}
        for broker, wanted in sorted(by_broker.items()):
            node = nodes.get(broker)
            if node is None:
                continue
            wire = self.node(node)
            version = wire.version(DESCRIBE_LOG_DIRS, 4, 4, "DescribeLogDirs")
            topics: dict[str, list[int]] = {}
            for topic, partition, _ in wanted:
                topics.setdefault(topic, []).append(partition)
            response = wire.request(DESCRIBE_LOG_DIRS, version, DescribeLogDirsRequest(
                topics=tuple(DescribableLogDirTopic(topic=t, partitions=tuple(ps))
                             for t, ps in sorted(topics.items()))))
            if response.error_code != ErrorCode.none:
                raise ToolError(f"{kafka_name(response.error_code)}: "
                                f"{message_of(response.error_code, None)}")
            current: dict[TP, str] = {}
            future: dict[TP, str] = {}
            for result in response.results:
                if result.error_code != ErrorCode.none:
                    continue
                for topic in result.topics:
                    for p in topic.partitions:
                        into = future if p.is_future_key else current
                        into[(topic.name, int(p.partition_index))] = result.log_dir
            for replica in wanted:
                found[replica] = (current.get(replica[:2]), future.get(replica[:2]))
        return found


# --- the actions ---------------------------------------------------------------------------------


def _partition_list(tps: Iterable[TP]) -> str:
    return ",".join(tp_name(tp) for tp in sorted(tps))


def _plural(items: Sized) -> str:
    return "" if len(items) == 1 else "s"


def _error_lines(errors: Mapping[TP, str]) -> str:
    return "; ".join(f"{tp_name(tp)}: {errors[tp]}" for tp in sorted(errors))


def _current_replicas(cluster: Cluster, partitions: Iterable[TP]) -> dict[TP, list[int]]:
    """Kafka's getReplicaAssignmentForPartitions: an error for a partition that is missing."""
    wanted = set(partitions)
    found = cluster.assignment(t for t, _ in wanted)
    missing = sorted(wanted - set(found))
    if missing:
        raise ToolError("UNKNOWN_TOPIC_OR_PARTITION: Unable to find partition: "
                        + ", ".join(tp_name(tp) for tp in missing))
    return {tp: found[tp] for tp in wanted}


# --- throttles -----------------------------------------------------------------------------------

Moves = dict[str, dict[int, tuple[set[int], set[int]]]]  # topic -> partition -> (sources, dests)


def proposed_moves(running: Mapping[TP, tuple[list[int], list[int], list[int]]],
                   proposed: Mapping[TP, Sequence[int]],
                   current: Mapping[TP, Sequence[int]]) -> Moves:
    """Kafka's calculateProposedMoveMap: the running reassignments' moves (sources: their
    replicas less those being added), then the proposed ones (sources: a running move's, else
    the current replicas; destinations: the new replicas not among the sources)."""
    moves: Moves = {}
    for (topic, index), (replicas, adding, _) in running.items():
        moves.setdefault(topic, {})[index] = (set(replicas) - set(adding), set(adding))
    for (topic, index), replicas in proposed.items():
        parts = moves.setdefault(topic, {})
        sources = parts[index][0] if index in parts else set(current[(topic, index)])
        parts[index] = (sources, set(replicas) - sources)
    return moves


def _throttled_list(pairs: Iterable[tuple[int, int]]) -> str:
    """``partition:broker,...`` sorted as text, as Kafka's TreeSet of them."""
    return ",".join(sorted(f"{p}:{b}" for p, b in pairs))


def leader_throttles(moves: Moves) -> dict[str, str]:
    """Kafka's calculateLeaderThrottles: every source replica of every move, by topic."""
    return {topic: _throttled_list((p, b) for p, (sources, _) in parts.items() for b in sources)
            for topic, parts in moves.items()}


def follower_throttles(moves: Moves) -> dict[str, str]:
    """Kafka's calculateFollowerThrottles: every destination replica, by topic."""
    return {topic: _throttled_list((p, b) for p, (sources, dests) in parts.items()
                                 for b in dests if b not in sources)
            for topic, parts in moves.items()}


def set_throttles(cluster: Cluster, moves: Moves, throttle: int) -> None:
    """Kafka's modifyReassignmentThrottle: the topics' throttled replicas, then the rate on
    every broker a move involves."""
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    cluster.alter_configs(RESOURCE_TOPIC, {
        topic: [AlterableConfig(name=LEADER_REPLICAS, config_operation=OP_SET,
                                value=leaders[topic]),
                AlterableConfig(name=FOLLOWER_REPLICAS, config_operation=OP_SET,
                                value=followers[topic])]
        for topic in moves})
    brokers = sorted({b for parts in moves.values() for sources, dests in parts.values()
                      for b in sources | dests})
    cluster.alter_configs(RESOURCE_BROKER, {
        str(b): [AlterableConfig(name=LEADER_RATE, config_operation=OP_SET, value=str(throttle)),
                 AlterableConfig(name=FOLLOWER_RATE, config_operation=OP_SET,
                                 value=str(throttle))]
        for b in brokers})
    click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")


def set_log_dir_throttle(cluster: Cluster, brokers: Iterable[int], throttle: int) -> None:
    """Kafka's modifyLogDirThrottle, on the brokers whose replicas move between log
    directories."""
    cluster.alter_configs(RESOURCE_BROKER, {
        str(b): [AlterableConfig(name=LOG_DIRS_RATE, config_operation=OP_SET,
                                 value=str(throttle))] for b in brokers})
    click.echo(f"The replica-alter-dir throttle limit was set to {throttle} B/s")


def clear_throttles(cluster: Cluster, parts: list[tuple[TP, list[int]]]) -> None:
    """Kafka's clearAllThrottles: the broker-level throttles of every broker (the cluster's
    and the file's replicas), the topic-level ones of the file's topics."""
    brokers = sorted(set(cluster.by_id(cluster.metadata(())))
                     | {b for _, replicas in parts for b in replicas})
    click.echo(f"Clearing broker-level throttles on broker{_plural(brokers)} {joined(brokers)}")
    cluster.alter_configs(RESOURCE_BROKER, {
        str(b): [AlterableConfig(name=key, config_operation=OP_DELETE, value=None)
                 for key in BROKER_LEVEL_THROTTLES] for b in brokers})
    topics = sorted({topic for (topic, _), _ in parts})
    click.echo(f"Clearing topic-level throttles on topic{_plural(topics)} {','.join(topics)}")
    cluster.alter_configs(RESOURCE_TOPIC, {
        topic: [AlterableConfig(name=key, config_operation=OP_DELETE, value=None)
                for key in TOPIC_LEVEL_THROTTLES] for topic in topics})


def run_execute(cluster: Cluster, parts: list[tuple[TP, list[int]]], additional: bool,
                moves: Mapping[TPR, str] | None = None,
                timeout_ms: int = DEFAULT_TIMEOUT_MS, throttle: int = UNSET,
                log_dir_throttle: int = UNSET) -> None:
    proposed = check_execute(parts)
    running = cluster.list_reassignments()
    if not additional and running:
        raise ToolError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE)
    known = set(cluster.by_id(cluster.metadata(())))
    for replicas in proposed.values():
        unknown = next((r for r in replicas if r not in known), None)
        if unknown is not None:
            raise ToolError(f"Unknown broker id {unknown}")
    current = _current_replicas(cluster, proposed)
    click.echo(f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
               "Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0 or log_dir_throttle >= 0:
        click.echo(YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE)
        if throttle >= 0:
            set_throttles(cluster, proposed_moves(running, proposed, current), throttle)
        if log_dir_throttle >= 0:
            set_log_dir_throttle(cluster, sorted({b for (_, _, b) in moves or {}}),
                                 log_dir_throttle)
    errors = cluster.alter_reassignments(proposed)
    if errors:
        raise ToolError(f"Error reassigning partition(s): {_error_lines(errors)}")
    click.echo(f"Successfully started partition reassignment{_plural(proposed)}"
               f" for {_partition_list(proposed)}")
    if moves:
        execute_moves(cluster, moves, timeout_ms)


def _replica_list(replicas: Iterable[TPR]) -> str:
    return ",".join(replica_name(r) for r in sorted(replicas, key=_replica_order))


def execute_moves(cluster: Cluster, moves: Mapping[TPR, str], timeout_ms: int) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs until every broker took its replicas' moves
    (REPLICA_NOT_AVAILABLE: not there yet, asked again) or ``timeout_ms`` has passed."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        codes = cluster.alter_replica_log_dirs(pending)
        failed = {r: c for r, c in codes.items()
                  if c not in (ErrorCode.none, ErrorCode.replica_not_available)}
        if failed:
            replica = min(failed, key=_replica_order)
            code = failed[replica]
            raise ToolError(f"Error moving replica {replica_name(replica)} to log dir"
                            f" {pending[replica]}: {kafka_name(code)}: {message_of(code, None)}")
        started = [r for r in pending if codes.get(r) == ErrorCode.none]
        if started:
            click.echo(f"Successfully started log directory move{_plural(started)} for:"
                       f" {_replica_list(started)}")
        for replica in started:
            del pending[replica]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ToolError(f"Timed out before log directory move{_plural(pending)} could be"
                            f" started for: {_replica_list(pending)}")
        time.sleep(MOVE_RETRY_S)


def run_verify(cluster: Cluster, parts: list[tuple[TP, list[int]]],
               moves: Mapping[TPR, str] | None = None, preserve_throttles: bool = False
               ) -> None:
    targets = dict(parts)
    running = cluster.list_reassignments()
    current = _current_replicas(cluster, [tp for tp in targets if tp not in running])
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        if tp in running:
            lines.append(f"Reassignment of partition {tp_name(tp)} is still in progress.")
        elif current[tp] == targets[tp]:
            lines.append(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_name(tp)}, but"
                         f" replica set is {joined(current[tp])} rather than"
                         f" {joined(targets[tp])}.")
    click.echo("\n".join(lines))
    moving = False
    if moves:
        states = move_states(cluster, moves)
        click.echo("\n".join(states))
        moving = any(line.endswith("is still in progress.") for line in states)
    # Kafka clears every throttle once no reassignment at all runs and no replica of the file
    # is still moving between log dirs: it cannot tell which brokers the earlier ones involved
    if not running and not moving and not preserve_throttles:
        clear_throttles(cluster, parts)


def move_states(cluster: Cluster, moves: Mapping[TPR, str]) -> list[str]:
    """Kafka's findLogDirMoveStates and replicaMoveStatesToString: one line per replica."""
    found = cluster.replica_log_dirs(moves)
    lines = []
    for replica in sorted(moves, key=_replica_order):
        target = moves[replica]
        partition, broker = tp_name(replica[:2]), replica[2]
        if replica not in found:
            lines.append(f"Partition {partition} cannot be found in any live log directory on"
                         f" broker {broker}.")
            continue
        current, future = found[replica]
        if current is None:
            lines.append(f"Partition {partition} is not found in any live log dir on broker"
                         f" {broker}. There is likely an offline log directory on the broker.")
        elif future is None and current == target:
            lines.append(f"Reassignment of replica {replica_name(replica)} completed"
                         " successfully.")
        elif future is None:
            lines.append(f"Partition {partition} on broker {broker} is not being moved from log"
                         f" dir {current} to {target}.")
        elif future == target:
            lines.append(f"Reassignment of replica {replica_name(replica)} is still in"
                         " progress.")
        else:
            lines.append(f"Partition {partition} on broker {broker} is being moved to log dir"
                         f" {future} instead of {target}.")
    return lines


def run_cancel(cluster: Cluster, parts: list[tuple[TP, list[int]]],
               preserve_throttles: bool = False) -> None:
    targets = {tp for tp, _ in parts}
    _current_replicas(cluster, targets)
    running = [tp for tp, (_, adding, removing) in cluster.list_reassignments(targets).items()
               if tp in targets and (adding or removing)]
    if not running:
        click.echo("None of the specified partition reassignments are active.")
    else:
        errors = cluster.alter_reassignments(dict.fromkeys(running))
        if errors:
            raise ToolError(f"Error cancelling partition reassignment{_plural(errors)} for:"
                            f" {_error_lines(errors)}")
        click.echo(f"Successfully cancelled partition reassignment{_plural(running)} for:"
                   f" {_partition_list(running)}")
    if not preserve_throttles:
        clear_throttles(cluster, parts)


def _throttle(value: int | None) -> int:
    return UNSET if value is None else value


def run_list(cluster: Cluster) -> None:
    running = cluster.list_reassignments()
    if not running:
        click.echo("No partition reassignments found.")
        return
    click.echo("Current partition reassignments:")
    for tp in sorted(running):
        replicas, adding, removing = running[tp]
        click.echo(f"{tp_name(tp)}: replicas: {joined(replicas)}."
                   + (f" adding: {joined(adding)}." if adding else "")
                   + (f" removing: {joined(removing)}." if removing else ""))


def run_generate(cluster: Cluster, topics: list[str], broker_list: list[int],
                 rack_aware: bool) -> None:
    current = cluster.assignment(topics)
    wanted = set(broker_list)
    nodes = [n for _, n in sorted(cluster.by_id(cluster.metadata(())).items())
             if n.node_id in wanted]
    brokers = [BrokerMetadata(n.node_id, n.rack if rack_aware else None) for n in nodes]
    rackless = sum(1 for b in brokers if b.rack is None)
    if rack_aware and rackless not in (0, len(brokers)):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in"
                        " command line to make replica assignment without rack information.")
    by_topic: dict[str, dict[int, list[int]]] = {}
    for (topic, index), replicas in current.items():
        by_topic.setdefault(topic, {})[index] = replicas
    proposed: dict[TP, list[int]] = {}
    for topic, partitions in sorted(by_topic.items()):
        factor = len(partitions[min(partitions)])
        try:
            placed = assign_replicas(brokers, len(partitions), factor)
        except KafkaError as exc:
            raise ToolError(exc.message) from exc
        proposed.update({(topic, index): replicas for index, replicas in placed.items()})
    click.echo(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    click.echo(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")


@click.command("reassign-partitions")
@bootstrap_option
@command_config_option
@click.option("--generate", is_flag=True,
              help="Propose an assignment of the topics of --topics-to-move-json-file over the"
                   " brokers of --broker-list.")
@click.option("--execute", is_flag=True,
              help="Start the reassignments of --reassignment-json-file.")
@click.option("--verify", is_flag=True,
              help="Tell whether the reassignments of --reassignment-json-file are done.")
@click.option("--cancel", is_flag=True,
              help="Cancel the running reassignments of --reassignment-json-file.")
@click.option("--list", "list_", is_flag=True, help="List the running reassignments.")
@click.option("--reassignment-json-file", "reassignment_json_file",
              type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The reassignments: {\"version\":1,\"partitions\":[{\"topic\":\"foo\","
                   "\"partition\":1,\"replicas\":[1,2,3]}]}.")
@click.option("--topics-to-move-json-file", "topics_to_move_json_file",
              type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="With --generate, the topics to move: {\"version\":1,\"topics\":"
                   "[{\"topic\":\"foo\"}]}.")
@click.option("--broker-list", "broker_list", metavar="ID,ID,...",
              help="With --generate, the brokers to place the replicas on.")
@click.option("--disable-rack-aware", "disable_rack_aware", is_flag=True,
              help="With --generate, ignore the brokers' racks.")
@click.option("--additional", is_flag=True,
              help="With --execute, start even while other reassignments run (also to change"
                   " the throttle of running reassignments).")
@click.option("--throttle", type=int, default=None, metavar="B/S",
              help="With --execute, throttle the movement of partitions between brokers to"
                   " this many bytes a second (leader.replication.throttled.rate and"
                   " follower.replication.throttled.rate on the brokers involved, the moved"
                   " replicas in the topics' throttled-replicas configs); at least 1 KB/s is"
                   " advised.")
@click.option("--replica-alter-log-dirs-throttle", "replica_alter_log_dirs_throttle",
              type=int, default=None, metavar="B/S",
              help="With --execute, throttle replica moves between log directories"
                   " (replica.alter.log.dirs.io.max.bytes.per.second).")
@click.option("--preserve-throttles", "preserve_throttles", is_flag=True,
              help="With --verify or --cancel, leave the broker and topic throttles as they"
                   " are.")
@click.option("--timeout", "timeout", type=click.IntRange(min=0), metavar="MS",
              help="With --execute, the maximum time in ms to wait for log directory replica"
                   f" assignment to begin (default {DEFAULT_TIMEOUT_MS}).")
def reassign_partitions(
    bootstrap_server: str, command_config: Path | None, generate: bool, execute: bool,
    verify: bool, cancel: bool, list_: bool, **options: Any,
) -> None:
    """Move partitions between brokers, as kafka-reassign-partitions.sh does."""
    flags = dict(zip(ACTIONS, (generate, execute, verify, cancel, list_), strict=True))
    chosen = [name for name, flag in flags.items() if flag]
    if len(chosen) != 1:
        raise click.UsageError("Command must include exactly one action: "
                               + ", ".join(f"--{a}" for a in ACTIONS))
    action = chosen[0]
    for name in REQUIRED[action]:
        if options[name] is None:
            raise click.UsageError(f"Missing required argument \"[{OPTION_NAMES[name]}]\"")
    for name, value in options.items():
        if value not in (None, False) and name not in REQUIRED[action] + tuple(
                PERMITTED[action]):
            raise click.UsageError(
                f"Option \"[{OPTION_NAMES[name]}]\" can't be used with action \"[{action}]\""
            )
    parse_bootstrap(bootstrap_server)
    extra = read_properties_file(command_config, "--command-config")
    security = WireSecurity.from_properties(extra, "samsa reassign-partitions")
    client_id = extra.get("client.id", CLIENT_ID)

    if action == "generate":
        topics_file: Path = options["topics_to_move_json_file"]
        topics = parse_topics(read_json(topics_file, "--topics-to-move-json-file"),
                              str(topics_file))
        brokers = parse_broker_list(options["broker_list"])
        with Cluster(bootstrap_server, REQUEST_TIMEOUT_S, client_id, security) as cluster:
            run_generate(cluster, topics, brokers, not options["disable_rack_aware"])
        return
    parts: list[tuple[TP, list[int]]] = []
    moves: dict[TPR, str] = {}
    if action != "list":
        path: Path = options["reassignment_json_file"]
        data = read_json(path, "--reassignment-json-file")
        parts = parse_reassignment(data, str(path))
        moves = parse_log_dirs(data, str(path))
        if action != "execute" and not parts:
            raise ToolError(f"{path}: Partition reassignment list cannot be empty")
    timeout_ms = options["timeout"] if options["timeout"] is not None else DEFAULT_TIMEOUT_MS
    # the connections' deadline covers the moves' --timeout as well
    with Cluster(bootstrap_server, REQUEST_TIMEOUT_S + timeout_ms / 1000, client_id,
                 security) as cluster:
        if action == "execute":
            run_execute(cluster, parts, options["additional"], moves, timeout_ms,
                        _throttle(options["throttle"]),
                        _throttle(options["replica_alter_log_dirs_throttle"]))
        elif action == "verify":
            run_verify(cluster, parts, moves, options["preserve_throttles"])
        elif action == "cancel":
            run_cancel(cluster, parts, options["preserve_throttles"])
        else:
            run_list(cluster)
