"""Kafka's transaction coordinator (KIP-98): transactional ids, producer epochs, markers.

Every transactional id has its state in ``__transaction_state`` (Kafka's record formats,
txn_records.py, partition ``partition_for(id)``); the broker replays it at start. The state
machine is Kafka's::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit --> CompleteCommit
                                               \\-------------> PrepareAbort  --> CompleteAbort
    Complete* --AddPartitions--> Ongoing;  Empty/Complete* --InitProducerId--> Empty (epoch + 1)

EndTxn writes the Prepare state, appends the commit or abort marker to every partition of the
transaction it leads (``__consumer_offsets`` partitions included, which makes transactional
offset commits visible or drops them) and sends WriteTxnMarkers to the leaders of the others
(cluster mode), writes the Complete state and only then answers. A Prepare
state found at start-up (a crash between the two writes) is completed the same way; markers
written twice are harmless.

Fencing: InitProducerId for an id bumps its epoch; an open transaction of the old epoch is first
aborted with a bumped epoch, so the old producer's writes and EndTxn are refused. A transaction
open longer than its timeout is aborted the same way by a timer
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``); ids idle for
``transactional.id.expiration.ms`` are forgotten (a tombstone).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import i16, i32

from samsa.coordinator.records import partition_for
from samsa.coordinator.state_machine import check_transition
from samsa.coordinator.txn_records import (
    TxnValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from samsa.coordinator.writer import PartitionWriter
from samsa.errors import CorruptRecordError, ErrorCode, KafkaError
from samsa.protocol.connection import BrokerConnection, BrokerConnectionError
from samsa.records.batch import read_header
from samsa.records.record import RecordInput, decode_records, encode_batch

if TYPE_CHECKING:
    from samsa.coordinator.host import CoordinatorHost

log = logging.getLogger(__name__)

# How long a state record may take to reach the ISR of its __transaction_state partition
# (Kafka waits for its acks=all append up to the request's timeout).
STATE_REPLICATION_TIMEOUT_S = 5.0

TXN_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1
WRITE_TXN_MARKERS = 27
MARKER_TIMEOUT_S = 10.0
# A failed marker write is tried again this soon (Kafka's marker channel retries at once with
# fresh metadata): until the markers are written the transactional id answers
# CONCURRENT_TRANSACTIONS, so its producer waits as long as they do.
MARKER_RETRY_S = 0.5


class MarkerError(RuntimeError):
    """Markers could not reach a partition's leader (retried on the next tick)."""


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions, the tools)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# state -> the states it may be entered from: Kafka's TransactionState validPreviousStates,
# except that an epoch fence completes as an abort directly (Kafka passes PrepareAbort between)
TXN_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                               TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                              TxnState.COMPLETE_ABORT}),
}

_STATE_BY_NAME = {s.display: s for s in TxnState}
_ENDED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def state_named(name: str) -> TxnState | None:
    return _STATE_BY_NAME.get(name)


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    update_ms: int
    start_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[tuple[str, int]] = field(default_factory=set)

    def value(self) -> TxnValue:
        topics: dict[str, list[int]] = {}
        for topic, p in self.partitions:
            topics.setdefault(topic, []).append(p)
        return TxnValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state),
                        topics, self.update_ms, self.start_ms)


class TransactionCoordinator:
    def __init__(self, server: CoordinatorHost, writer: PartitionWriter) -> None:
        """``writer`` reaches the __transaction_state partitions; ``server`` the rest of the
        broker (producer ids, the group coordinator, the partitions markers go to)."""
        self.server = server
        self.writer = writer
        c = server.config
        self.num_partitions = c.get("transaction.state.log.num.partitions")
        self.max_timeout_ms = c.get("transaction.max.timeout.ms")
        self.expiration_ms = c.get("transactional.id.expiration.ms")
        self.abort_interval_s = (
            c.get("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        )
        self.remove_interval_s = (
            c.get("transaction.remove.expired.transaction.cleanup.interval.ms") / 1000
        )
        self.txns: dict[str, TxnMetadata] = {}
        # ids whose markers are being written now: the timer must not write them again
        self._completing: set[str] = set()
        self._task: asyncio.Task | None = None
        self._retries: set[asyncio.TimerHandle] = set()
        self._retrying: set[str] = set()  # transactional ids with a retry scheduled
        self._retry_tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Replay __transaction_state, finish transactions a crash left half-ended, start the
        timeout timer. Runs after the group coordinator has loaded (markers reach it)."""
        for index in self.writer.hosted():
            self._load_partition(index)
        await self.complete_prepared()
        self._task = asyncio.get_running_loop().create_task(self._timer())

    async def complete_prepared(self) -> None:
        """Finish every transaction whose Prepare state is written but whose markers are not
        (a crash, or a marker write that failed): at start-up and on every timer tick."""
        for meta in list(self.txns.values()):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                              TxnState.PREPARE_EPOCH_FENCE):
                log.info("completing transaction %r left in %s", meta.transactional_id,
                         meta.state.display)
                await self._complete_or_retry(meta, meta.state == TxnState.PREPARE_COMMIT)

    def coordinator_epoch(self, txn_id: str) -> int:
        """The epoch markers carry, as Kafka's coordinator epoch: the leader epoch of the
        transactional id's __transaction_state partition (0 on a single node), so a partition
        refuses the markers of a coordinator that has since been replaced."""
        return self.writer.leader_epoch(partition_for(txn_id, self.num_partitions))

    def unload_partition(self, index: int) -> None:
        """Cluster mode: this broker stopped leading a __transaction_state partition: its
        transactional ids go (the new leader loads and completes them)."""
        for txn_id in [t for t in self.txns if partition_for(t, self.num_partitions) == index]:
            del self.txns[txn_id]

    def load_partition(self, index: int) -> None:
        """Cluster mode: this broker became the leader of a __transaction_state partition."""
        self._load_partition(index)
        asyncio.ensure_future(self.complete_prepared())

    def _load_partition(self, index: int) -> None:
        for batch in self.writer.batches(index):
            if read_header(batch).is_control:
                continue
            for record in decode_records(batch):
                if record.key is not None:
                    self._apply(record.key, record.value)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        try:
            txn_id = decode_txn_key(key)
            stored = decode_txn_value(value)
        except CorruptRecordError as exc:
            log.warning("skipping a %s record samsa cannot read: %s", TXN_STATE_TOPIC, exc)
            return
        if stored is None:
            self.txns.pop(txn_id, None)
            return
        try:
            state = TxnState(stored.status)
        except ValueError:
            log.warning("skipping transactional id %r with unknown status %d", txn_id,
                        stored.status)
            return
        self.txns[txn_id] = TxnMetadata(
            txn_id, stored.producer_id, stored.producer_epoch, stored.timeout_ms, state,
            stored.last_update_ms, stored.start_ms,
            partitions={(t, p) for t, ps in stored.partitions.items() for p in ps},
        )

    async def stop(self) -> None:
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        self._retrying.clear()
        tasks = [*self._retry_tasks, *([self._task] if self._task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _timer(self) -> None:
        loop = asyncio.get_running_loop()
        last_removal = loop.time()
        while True:
            await asyncio.sleep(self.abort_interval_s)
            try:
                await self.complete_prepared()
                await self.abort_timed_out(now_ms())
                if loop.time() - last_removal >= self.remove_interval_s:
                    last_removal = loop.time()
                    self.remove_expired(now_ms())
            except Exception:
                log.exception("transaction coordinator timer failed; retrying at the next tick")

    # --- persistence -------------------------------------------------------------------------

    def ensure_topic(self) -> None:
        self.writer.ensure_topic()

    def _write(self, txn_id: str, value: bytes | None) -> None:
        self.ensure_topic()
        self.writer.append(partition_for(txn_id, self.num_partitions),
                           encode_batch([RecordInput(value, encode_txn_key(txn_id))],
                                        timestamp=now_ms()))

    async def durable(self, txn_id: str) -> ErrorCode | None:
        """Cluster mode: wait until the id's state records reached the ISR of its
        __transaction_state partition (Kafka appends them with acks=all) before the client is
        answered: a new coordinator must find every state a client was told about. None when
        they did; NOT_COORDINATOR after a move; COORDINATOR_NOT_AVAILABLE on a timeout (the
        client retries)."""
        return await self.writer.wait_replicated(partition_for(txn_id, self.num_partitions),
                                                 STATE_REPLICATION_TIMEOUT_S)

    def _store(self, meta: TxnMetadata, state: TxnState) -> None:
        """Move to ``state`` (along TXN_TRANSITIONS) and persist it (the log append is the
        commit point)."""
        check_transition(f"transaction {meta.transactional_id!r}", TXN_TRANSITIONS,
                         meta.state, state)
        meta.state = state
        meta.update_ms = now_ms()
        self._write(meta.transactional_id, encode_txn_value(meta.value()))

    # --- producer ids and epochs -------------------------------------------------------------

    def _new_producer_id(self) -> int:
        assert self.server.producer_ids is not None
        return self.server.producer_ids.next_id()

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        if not txn_id:
            return ErrorCode.invalid_request, -1, -1
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        meta = self.txns.get(txn_id)
        if meta is None:
            meta = TxnMetadata(txn_id, self._new_producer_id(), 0, timeout_ms, TxnState.EMPTY,
                               now_ms())
            self.txns[txn_id] = meta
            self._store(meta, TxnState.EMPTY)
            return ErrorCode.none, meta.producer_id, 0
        expected = producer_id >= 0
        if expected and producer_id != meta.producer_id:
            return ErrorCode.producer_fenced, -1, -1
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                          TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.concurrent_transactions, -1, -1
        if meta.state == TxnState.ONGOING:
            # a new incarnation of the producer: abort the old one's transaction first, with
            # a bumped epoch that fences the old producer everywhere the transaction wrote
            await self._fence_and_abort(meta)
            if meta.state != TxnState.COMPLETE_ABORT:  # markers not written yet: retry later
                return ErrorCode.concurrent_transactions, -1, -1
        if expected and producer_epoch != meta.producer_epoch:
            if producer_epoch == meta.last_producer_epoch:  # a retry of a bump that succeeded
                return ErrorCode.none, meta.producer_id, meta.producer_epoch
            return ErrorCode.producer_fenced, -1, -1
        last = meta.producer_epoch if expected else NO_PRODUCER_EPOCH
        if meta.producer_epoch + 1 >= MAX_EPOCH:
            meta.producer_id, meta.producer_epoch = self._new_producer_id(), 0
        else:
            meta.producer_epoch += 1
        meta.last_producer_epoch = last
        meta.timeout_ms = timeout_ms
        meta.partitions = set()
        meta.start_ms = -1
        self._store(meta, TxnState.EMPTY)
        return ErrorCode.none, meta.producer_id, meta.producer_epoch

    async def _fence_and_abort(self, meta: TxnMetadata) -> None:
        if meta.producer_epoch + 1 < MAX_EPOCH:
            meta.producer_epoch += 1
        meta.last_producer_epoch = NO_PRODUCER_EPOCH
        self._store(meta, TxnState.PREPARE_EPOCH_FENCE)
        await self._complete_or_retry(meta, commit=False)

    def _check_producer(
        self, txn_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TxnMetadata | None, ErrorCode]:
        if not self._coordinates(txn_id):  # moved away, or asked of the wrong broker
            return None, ErrorCode.not_coordinator
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return None, ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return None, ErrorCode.producer_fenced
        return meta, ErrorCode.none

    # --- transactions ------------------------------------------------------------------------

    def add_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        # the cluster's partitions, not only those hosted here
        unknown = {tp for tp in partitions if not self.server.replicas.partition_exists(*tp)}
        if unknown:  # checked first, as Kafka's KafkaApis does
            return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown
                    else ErrorCode.operation_not_attempted for tp in partitions}
        meta, error = self._check_producer(txn_id, producer_id, producer_epoch)
        if meta is not None and meta.state not in (TxnState.ONGOING, *_ENDED):
            error = ErrorCode.concurrent_transactions
        if meta is None or error:
            return dict.fromkeys(partitions, error)
        new = set(partitions) - meta.partitions
        if meta.state != TxnState.ONGOING:
            meta.partitions = set()
            meta.start_ms = now_ms()
            new = set(partitions)
        if new or meta.state != TxnState.ONGOING:
            meta.partitions |= new
            self._store(meta, TxnState.ONGOING)
        return dict.fromkeys(partitions, ErrorCode.none)

    def add_offsets(
        self, txn_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        coordinator = self.server.group_coordinator
        assert coordinator is not None
        coordinator.ensure_offsets_topic()
        tp = (OFFSETS_TOPIC, partition_for(group_id, coordinator.num_partitions))
        return self.add_partitions(txn_id, producer_id, producer_epoch, [tp])[tp]

    async def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        meta, error = self._check_producer(txn_id, producer_id, producer_epoch)
        if meta is None:
            return error
        state = meta.state
        if state == TxnState.ONGOING:
            self._store(meta, TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
            # the Prepare record is the commit point once the ISR has it: from here the
            # outcome is decided, and a failed marker write is retried by the timer, as
            # Kafka's marker channel retries (and a client retrying EndTxn waits for it).
            # Until this request is done with it, the timer leaves the transaction alone.
            self._completing.add(txn_id)
            try:
                lost = await self.durable(txn_id)
                if lost is not None:
                    return lost
                await self._complete_logged(meta, commit)
            finally:
                self._completing.discard(txn_id)
            return ErrorCode.none
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if state == done:
            return ErrorCode.none  # a retry of an EndTxn that succeeded
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state == preparing:
            return ErrorCode.concurrent_transactions
        return ErrorCode.invalid_txn_state

    async def _complete_or_retry(self, meta: TxnMetadata, commit: bool) -> None:
        """The timer's completion of a prepared transaction, unless something (an EndTxn, an
        earlier tick) is already completing it."""
        if meta.transactional_id in self._completing:
            return
        self._completing.add(meta.transactional_id)
        try:
            await self._complete_logged(meta, commit)
        finally:
            self._completing.discard(meta.transactional_id)

    async def _complete_logged(self, meta: TxnMetadata, commit: bool) -> None:
        try:
            await self._complete(meta, commit)
        except (OSError, MarkerError) as exc:
            log.error("transaction %r: writing its %s markers failed (%s); retrying in %g s",
                      meta.transactional_id, "commit" if commit else "abort", exc,
                      MARKER_RETRY_S)
            self._retry_later(meta, commit)

    def _retry_later(self, meta: TxnMetadata, commit: bool) -> None:
        """One retry at a time per transactional id, however many attempts failed."""
        if meta.transactional_id in self._retrying:
            return
        self._retrying.add(meta.transactional_id)
        loop = asyncio.get_running_loop()

        def again() -> None:
            self._retries.discard(handle)
            self._retrying.discard(meta.transactional_id)
            if self.txns.get(meta.transactional_id) is not meta or meta.state not in (
                    TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                    TxnState.PREPARE_EPOCH_FENCE):
                return  # completed meanwhile, or this broker no longer coordinates it
            task = loop.create_task(self._complete_or_retry(meta, commit))
            self._retry_tasks.add(task)
            task.add_done_callback(self._retry_tasks.discard)

        handle = loop.call_later(MARKER_RETRY_S, again)
        self._retries.add(handle)

    async def _complete(self, meta: TxnMetadata, commit: bool) -> None:
        """Write the markers of a prepared transaction, then its Complete state. Partitions
        led by other brokers (cluster mode) get theirs with WriteTxnMarkers."""
        groups = self.server.group_coordinator
        remote: dict[int, list[tuple[str, int]]] = {}
        for topic, index in sorted(meta.partitions):
            partition = self.server.replicas.partition(topic, index)
            if partition is None and not self.server.replicas.partition_exists(topic, index):
                continue  # deleted since it was added: nothing to mark
            if partition is None or not partition.is_leader:  # led by another broker
                leader = self.server.topic_admin.describe_partition(topic, index).leader
                remote.setdefault(leader, []).append((topic, index))
                continue
            try:
                partition.append_marker(meta.producer_id, meta.producer_epoch, commit,
                                        self.coordinator_epoch(meta.transactional_id))
            except KafkaError as exc:
                log.warning("transaction %r: %s marker on %s-%d refused: %s",
                            meta.transactional_id, "commit" if commit else "abort", topic,
                            index, exc)
                continue
            if topic == OFFSETS_TOPIC and groups is not None:
                groups.complete_txn_offsets(index, meta.producer_id, commit)
        for leader, partitions in sorted(remote.items()):
            await self._send_markers(leader, meta, commit, partitions)
        meta.partitions = set()
        self._store(meta, TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)

    async def _send_markers(self, leader: int, meta: TxnMetadata, commit: bool,
                            partitions: list[tuple[str, int]]) -> None:
        """WriteTxnMarkers to the leader of ``partitions``; MarkerError (retried on the next
        tick) unless every partition took its marker or is gone."""
        endpoint = next((n for n in self.server.topic_admin.nodes() if n.node_id == leader),
                        None)
        if endpoint is None:
            raise MarkerError(f"no live leader ({leader}) for {partitions}")
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        body = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=ProducerId(meta.producer_id), producer_epoch=i16(meta.producer_epoch),
            transaction_result=commit,
            coordinator_epoch=i32(self.coordinator_epoch(meta.transactional_id)),
            topics=tuple(WritableTxnMarkerTopic(name=TopicName(t),
                                                partition_indexes=tuple(i32(p) for p in ps))
                         for t, ps in topics.items())),))
        try:
            connection = await BrokerConnection.open(
                endpoint.host or "127.0.0.1", endpoint.port,
                f"broker-{self.server.broker_id}-txn-markers", MARKER_TIMEOUT_S,
                ssl_context=self.server.inter_broker.ssl_context,
                sasl=self.server.inter_broker.sasl)
        except BrokerConnectionError as exc:
            raise MarkerError(str(exc)) from exc
        try:
            response = await connection.request(WRITE_TXN_MARKERS, 1, body, MARKER_TIMEOUT_S)
        except BrokerConnectionError as exc:
            raise MarkerError(str(exc)) from exc
        finally:
            await connection.close()
        failed = [(t.name, p.partition_index, p.error_code)
                  for m in response.markers for t in m.topics for p in t.partitions
                  if p.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition)]
        if failed:
            raise MarkerError(f"broker {leader} refused markers: {failed}")

    def verify(self, txn_id: str | None, producer_id: int, producer_epoch: int, topic: str,
               index: int) -> ErrorCode:
        """A transactional produce (or offset commit) must come from the current epoch, inside
        an open transaction that added its partition: otherwise its data could hang the LSO.
        In cluster mode only the transactional id's coordinator can tell (KIP-890's
        verification request to it is not built): elsewhere nothing is checked."""
        if txn_id is None:
            return ErrorCode.invalid_txn_state
        if txn_id not in self.txns and not self._coordinates(txn_id):
            return ErrorCode.none
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if meta.state != TxnState.ONGOING or (topic, index) not in meta.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # --- timers ------------------------------------------------------------------------------

    def _coordinates(self, txn_id: str) -> bool:
        """Whether this broker is the transactional id's coordinator."""
        return self.writer.owns(partition_for(txn_id, self.num_partitions))

    async def abort_timed_out(self, at_ms: int) -> list[str]:
        """Abort (and fence) every transaction open for longer than its timeout."""
        aborted = []
        for meta in list(self.txns.values()):
            if meta.state == TxnState.ONGOING and meta.start_ms + meta.timeout_ms < at_ms:
                log.info("aborting transaction %r (producer %d): open for more than %d ms",
                         meta.transactional_id, meta.producer_id, meta.timeout_ms)
                await self._fence_and_abort(meta)
                aborted.append(meta.transactional_id)
        return aborted

    def remove_expired(self, at_ms: int) -> list[str]:
        """Forget transactional ids without a transaction for transactional.id.expiration.ms."""
        expired = [m.transactional_id for m in self.txns.values()
                   if m.state in _ENDED and m.update_ms + self.expiration_ms < at_ms]
        for txn_id in expired:
            meta = self.txns.pop(txn_id)
            check_transition(f"transaction {txn_id!r}", TXN_TRANSITIONS, meta.state,
                             TxnState.DEAD)
            self._write(txn_id, None)
        return expired
