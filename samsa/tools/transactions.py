"""``samsa transactions``: kafka-transactions.sh's ``list``, ``describe`` and
``describe-producers``.

Output is Kafka's ``prettyPrintTable``: a header row, then one row per item, every cell padded
to its column's widest value and followed by a tab (the trailing padding and tab of each line are
trimmed, as the other samsa tools trim theirs). Values are printed as Kafka's TransactionsCommand
prints them: a start time, duration or transaction start offset the broker reports as negative is
``None``; a state the client does not know is ``Unknown``.

confluent-kafka has no transactions admin API, so the requests go over a socket of samsa's own
(``samsa.tools.wire``), as Kafka's admin client sends them: ``list`` asks every broker of the
cluster (ListTransactions), ``describe`` finds the transactional id's coordinator
(FindCoordinator, key type 1) and asks it (DescribeTransactions), ``describe-producers`` asks the
partition's leader, or ``--broker-id`` (DescribeProducers). Versions are negotiated with
ApiVersions; TLS and SASL as ``--command-config`` says (``samsa.tools.wire``). Every failure
is one ``samsa:`` line: ``NAME: what failed: Kafka's message``.

``list --state`` and ``list --producer-id`` are samsa's: Kafka's admin API has these filters
(ListTransactionsOptions) but its tool does not expose them. ``--duration-filter`` is Kafka's
(3.8, KIP-994).
"""

from __future__ import annotations

import dataclasses
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from kio.index import load_request_schema
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0 import response as describe_txn_response
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.static.primitive import i64

from samsa.errors import ErrorCode, kafka_name
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    command_config_option,
    parse_bootstrap,
    read_properties_file,
)
from samsa.tools.wire import Node, WirePool, WireSecurity, build_entity

CLIENT_ID = "samsa-transactions"
FIND_COORDINATOR = 10
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
TRANSACTION_KEY_TYPE = 1  # FindCoordinator's key type of a transactional id
# FindCoordinator from v1 (the first with a key type) to the newest kio reads.
KIO_FIND_COORDINATOR = (1, 6)
NONE = "None"
_SIZE = struct.Struct(">i")

# Kafka's TransactionState names (org.apache.kafka.clients.admin.TransactionState).
TRANSACTION_STATES = (
    "Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort", "CompleteCommit", "Empty",
    "PrepareEpochFence",
)
UNKNOWN_STATE = "Unknown"

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCER_HEADERS = (
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
)

# Errors a client retries: the coordinator or leader is moving, loading or not elected yet.
RETRIABLE = frozenset({
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress, ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower,
})
# Kafka's messages (Errors.java) for the errors these requests answer with.
MESSAGES = {
    ErrorCode.transactional_id_not_found: "The transactionalId could not be found.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.invalid_topic_exception:
        "The request attempted to perform an operation on an invalid topic.",
    ErrorCode.leader_not_available:
        "There is no leader for this topic-partition as we are in the middle of a leadership"
        " election.",
    ErrorCode.not_leader_or_follower:
        "For requests intended only for the leader, this error indicates that the broker is not"
        " the current leader. For requests intended for any replica, this error indicates that"
        " the broker is not a replica of the topic partition.",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.coordinator_load_in_progress:
        "The coordinator is loading and hence can't process requests.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.unknown_server_error:
        "The server experienced an unexpected error when processing the request.",
}


def error_text(code: int, what: str, message: str | None = None) -> str:
    """``NAME: what failed: Kafka's message`` (the broker's own message when it sent one)."""
    if not message:
        try:
            message = MESSAGES.get(ErrorCode(code), "")
        except ValueError:
            message = ""
    return f"{kafka_name(code)}: {what}: {message}".rstrip(": ")


# --- output --------------------------------------------------------------------------------------


def table_lines(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Kafka's ``prettyPrintTable``: each cell padded to its column's width, then a tab."""
    rows = [list(map(str, row)) for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    return [
        "".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *rows]
    ]


def print_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    for line in table_lines(headers, rows):
        click.echo(line)


def state_name(state: str) -> str:
    """The state as Kafka's client names it; a name it does not know is ``Unknown``."""
    return state if state in TRANSACTION_STATES else UNKNOWN_STATE


def parse_states(values: Iterable[str]) -> list[str]:
    """``--state ongoing --state CompleteCommit,Empty``: Kafka's names, case-insensitive."""
    by_upper = {name.upper(): name for name in TRANSACTION_STATES}
    states: list[str] = []
    for value in values:
        for item in value.split(","):
            name = by_upper.get(item.strip().upper())
            if name is None:
                raise click.UsageError(
                    f"Invalid state '{item.strip()}'. Valid states are:"
                    f" {', '.join(TRANSACTION_STATES)}"
                )
            if name not in states:
                states.append(name)
    return states


# --- the wire ------------------------------------------------------------------------------------


def _retyped(
    cls: type, int64_fields: Sequence[str] = (), nested: dict[str, type] | None = None
) -> type:
    """A copy of kio entity ``cls`` whose ``int64_fields`` are read as plain int64s and whose
    nested entity fields named in ``nested`` hold the given classes."""
    specs: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        tp: Any = f.type
        metadata = dict(f.metadata)
        if f.name in int64_fields:
            tp, metadata = i64, {**metadata, "kafka_type": "int64"}
        elif nested and f.name in nested:
            tp = tuple[nested[f.name], ...]
        if f.default is not dataclasses.MISSING:
            spec = dataclasses.field(metadata=metadata, default=f.default)
        else:
            spec = dataclasses.field(metadata=metadata)
        specs.append((f.name, tp, spec))
    keep = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
    return dataclasses.make_dataclass(
        cls.__name__, specs, frozen=True, slots=True, kw_only=True,
        namespace={key: getattr(cls, key) for key in keep},
    )


# kio refuses to read a negative datetime, and Kafka's coordinator sends -1 as the start time of
# a transactional id with no transaction (state Empty): read the field as the int64 it is.
DescribeTransactionsState = _retyped(
    describe_txn_response.TransactionState, int64_fields=("transaction_start_time",)
)
DescribeTransactionsResponse = _retyped(
    describe_txn_response.DescribeTransactionsResponse,
    nested={"transaction_states": DescribeTransactionsState},
)


class Cluster(WirePool):
    """Connections to the cluster with this tool's client id."""

    def __init__(self, bootstrap: str, timeout: float,
                 security: WireSecurity | None = None) -> None:
        super().__init__(bootstrap, timeout, CLIENT_ID, security)


# --- list ----------------------------------------------------------------------------------------


def list_transactions(
    cluster: Cluster, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int
) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """(rows, warnings): ListTransactions at every broker, as Kafka's admin client sends it."""
    rows: list[tuple[str, str, str, str]] = []
    warnings: list[str] = []
    for broker in cluster.brokers():
        while True:
            wire = cluster.node(broker)
            lowest = 1 if duration_ms >= 0 else 0
            version = wire.version(LIST_TRANSACTIONS, lowest, 1, "ListTransactions"
                                   + (" with a duration filter" if lowest else ""))
            request = build_entity(
                load_request_schema(LIST_TRANSACTIONS, version), state_filters=tuple(states),
                producer_id_filters=tuple(producer_ids), duration_filter=duration_ms,
            )
            response = wire.request(LIST_TRANSACTIONS, version, request)
            code = response.error_code
            if code in RETRIABLE and cluster.pause():
                continue
            if code != ErrorCode.none:
                raise ToolError(error_text(
                    code, f"Failed to list transactions at broker {broker.node_id}"
                ))
            break
        if response.unknown_state_filters:
            warnings.append(
                f"Broker {broker.node_id} does not know the state filter(s)"
                f" {', '.join(response.unknown_state_filters)}"
            )
        rows += sorted(
            (t.transactional_id, str(broker.node_id), str(t.producer_id),
             state_name(t.transaction_state))
            for t in response.transaction_states
        )
    return rows, warnings


# --- describe ------------------------------------------------------------------------------------


def find_transaction_coordinator(cluster: Cluster, transactional_id: str) -> tuple[int, Node]:
    """(error code, coordinator) of a transactional id."""
    wire = cluster.bootstrap()
    version = wire.version(FIND_COORDINATOR, *KIO_FIND_COORDINATOR, "FindCoordinator")
    schema = load_request_schema(FIND_COORDINATOR, version)
    if version >= 4:
        response = wire.request(FIND_COORDINATOR, version, schema(
            key_type=TRANSACTION_KEY_TYPE, coordinator_keys=(transactional_id,)
        ))
        if not response.coordinators:
            return ErrorCode.coordinator_not_available, Node(-1, "", 0)
        found = response.coordinators[0]
    else:
        found = wire.request(
            FIND_COORDINATOR, version, schema(key=transactional_id, key_type=TRANSACTION_KEY_TYPE)
        )
    return found.error_code, Node(found.node_id, found.host, found.port)


def describe_transaction(cluster: Cluster, transactional_id: str) -> tuple[int, Any]:
    """(coordinator id, the transaction's state): FindCoordinator, then DescribeTransactions at
    the coordinator; retried while the coordinator is unknown, moving or loading."""
    what = f"Failed to describe transaction state of transactional-id `{transactional_id}`"
    while True:
        code, coordinator = find_transaction_coordinator(cluster, transactional_id)
        if code == ErrorCode.none:
            wire = cluster.node(coordinator)
            version = wire.version(DESCRIBE_TRANSACTIONS, 0, 0, "DescribeTransactions")
            response = wire.request(
                DESCRIBE_TRANSACTIONS, version,
                DescribeTransactionsRequest(transactional_ids=(transactional_id,)),
                DescribeTransactionsResponse,
            )
            found = [s for s in response.transaction_states
                     if s.transactional_id == transactional_id]
            if not found:
                raise ToolError(f"{what}: the coordinator's answer left it out")
            code = found[0].error_code
            if code == ErrorCode.none:
                return coordinator.node_id, found[0]
            if code in RETRIABLE:
                cluster.forget(wire)
        if code in RETRIABLE and cluster.pause():
            continue
        raise ToolError(error_text(code, what))


def describe_row(coordinator_id: int, state: Any, now_ms: int) -> list[str]:
    """The ``describe`` row, as Kafka's DescribeTransactionsCommand prints it."""
    start = int(state.transaction_start_time)
    start_text = duration_text = NONE
    if start >= 0:
        start_text, duration_text = str(start), str(now_ms - start)
    timeout_ms = state.transaction_timeout
    if not isinstance(timeout_ms, int):  # kio reads timedelta_i32 as a timedelta
        timeout_ms = int(timeout_ms.total_seconds() * 1000)
    partitions = sorted((t.topic, p) for t in state.topics for p in t.partitions)
    return [
        str(coordinator_id), state.transactional_id, str(state.producer_id),
        str(state.producer_epoch), state_name(state.transaction_state), str(timeout_ms),
        start_text, duration_text, ",".join(f"{t}-{p}" for t, p in partitions),
    ]


# --- describe-producers --------------------------------------------------------------------------


def partition_node(
    cluster: Cluster, topic: str, partition: int, broker_id: int | None, what: str
) -> Node:
    """The partition's leader (or broker ``broker_id``), from the cluster's metadata."""
    while True:
        response = cluster.metadata((topic,))
        entry = next((t for t in response.topics if t.name == topic), None)
        code = ErrorCode.unknown_topic_or_partition if entry is None else entry.error_code
        if code == ErrorCode.none:
            assert entry is not None
            found = next((p for p in entry.partitions if p.partition_index == partition), None)
            if found is None:
                code = ErrorCode.unknown_topic_or_partition
            elif broker_id is not None:
                nodes = {b.node_id: b for b in response.brokers}
                if broker_id not in nodes:
                    raise ToolError(
                        f"{kafka_name(ErrorCode.broker_not_available)}: {what}: broker"
                        f" {broker_id} is not in the cluster"
                    )
                b = nodes[broker_id]
                return Node(b.node_id, b.host, b.port)
            elif found.leader_id >= 0:
                leader = next((b for b in response.brokers if b.node_id == found.leader_id),
                              None)
                if leader is not None:
                    return Node(leader.node_id, leader.host, leader.port)
                code = ErrorCode.leader_not_available
            else:
                code = found.error_code or ErrorCode.leader_not_available
        if code in RETRIABLE and cluster.pause():
            continue
        raise ToolError(error_text(code, what))


def describe_producers(
    cluster: Cluster, topic: str, partition: int, broker_id: int | None
) -> list[Any]:
    """The partition's active producers (DescribeProducers at its leader or ``broker_id``)."""
    where = "leader" if broker_id is None else f"broker {broker_id}"
    what = f"Failed to describe producers for partition {topic}-{partition} on {where}"
    while True:
        node = partition_node(cluster, topic, partition, broker_id, what)
        wire = cluster.node(node)
        version = wire.version(DESCRIBE_PRODUCERS, 0, 0, "DescribeProducers")
        response = wire.request(DESCRIBE_PRODUCERS, version, DescribeProducersRequest(
            topics=(TopicRequest(name=topic, partition_indexes=(partition,)),)
        ))
        found = next((p for t in response.topics if t.name == topic for p in t.partitions
                      if p.partition_index == partition), None)
        if found is None:
            raise ToolError(f"{what}: the broker's answer left it out")
        code = found.error_code
        if code == ErrorCode.none:
            return list(found.active_producers)
        # A leader that moved: look again (Kafka's admin does; not for a chosen broker).
        if code in RETRIABLE and broker_id is None and cluster.pause():
            cluster.forget(wire)
            continue
        raise ToolError(error_text(code, what, found.error_message))


def producer_row(state: Any) -> list[str]:
    """A ``describe-producers`` row, as Kafka's DescribeProducersCommand prints it."""
    start = int(state.current_txn_start_offset)
    coordinator_epoch = int(state.coordinator_epoch)
    return [
        str(state.producer_id), str(state.producer_epoch),
        str(coordinator_epoch if coordinator_epoch >= 0 else -1), str(state.last_sequence),
        str(state.last_timestamp), str(start) if start >= 0 else NONE,
    ]


# --- the command ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    bootstrap: str | None
    timeout: float
    security: WireSecurity | None = None

    def cluster(self) -> Cluster:
        # Checked here rather than by click, so that ``transactions list --help`` works without
        # it, as Kafka's does.
        if self.bootstrap is None:
            raise click.UsageError("Missing option '--bootstrap-server'.")
        return Cluster(self.bootstrap, self.timeout, self.security)


@click.group("transactions", no_args_is_help=False)
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT",
              help="The broker(s) to connect to: host:port, comma separated.  [required]")
@command_config_option
@click.pass_context
def transactions(
    ctx: click.Context, bootstrap_server: str | None, command_config: Path | None
) -> None:
    """List and describe transactions and producers, as kafka-transactions.sh does."""
    if bootstrap_server is not None:
        parse_bootstrap(bootstrap_server)
    extra = read_properties_file(command_config, "--command-config")
    security = WireSecurity.from_properties(extra, "samsa transactions")
    ctx.obj = Settings(bootstrap_server, REQUEST_TIMEOUT_S, security)


@transactions.command("list")
@click.option("--state", "states", multiple=True, metavar="STATE[,STATE...]",
              help="Only transactions in these states (Kafka's names: Ongoing, CompleteCommit,"
                   " ...); repeatable.")
@click.option("--producer-id", "producer_ids", multiple=True, type=int,
              help="Only the transactions of this producer id; repeatable.")
@click.option("--duration-filter", "duration_filter", type=int, default=-1, show_default=True,
              metavar="MS",
              help="Only transactions running longer than this many ms (negative: all).")
@click.pass_obj
def list_command(settings: Settings, states: tuple[str, ...], producer_ids: tuple[int, ...],
                 duration_filter: int) -> None:
    """List transactions: id, coordinator, producer id and state."""
    wanted = parse_states(states)
    with settings.cluster() as cluster:
        rows, warnings = list_transactions(
            cluster, wanted, list(dict.fromkeys(producer_ids)), duration_filter
        )
    print_table(LIST_HEADERS, rows)
    for warning in warnings:
        click.echo(f"WARN: {warning}", err=True)


@transactions.command("describe")
@click.option("--transactional-id", "transactional_id", required=True,
              help="The transactional id.")
@click.pass_obj
def describe_command(settings: Settings, transactional_id: str) -> None:
    """Describe the state of a transactional id."""
    with settings.cluster() as cluster:
        coordinator_id, state = describe_transaction(cluster, transactional_id)
    now_ms = int(time.time() * 1000)
    print_table(DESCRIBE_HEADERS, [describe_row(coordinator_id, state, now_ms)])


@transactions.command("describe-producers")
@click.option("--topic", required=True, help="The topic name.")
@click.option("--partition", required=True, type=int, help="The partition number.")
@click.option("--broker-id", "broker_id", type=int,
              help="Ask this broker's replica instead of the leader.")
@click.pass_obj
def describe_producers_command(
    settings: Settings, topic: str, partition: int, broker_id: int | None
) -> None:
    """Describe the active producers of a topic partition."""
    with settings.cluster() as cluster:
        producers = describe_producers(cluster, topic, partition, broker_id)
    print_table(PRODUCER_HEADERS, [producer_row(p) for p in producers])
