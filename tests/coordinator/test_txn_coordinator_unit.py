"""The transaction coordinator without a broker process or a socket: its __transaction_state
partitions in an in-memory PartitionWriter; the data partitions its markers go to are real
logs (a ``Replicas`` service over a temporary log directory), as is the group coordinator that
takes transactional offsets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from samsa.cluster.producer_ids import ProducerIdManager
from samsa.cluster.replicas import Replicas
from samsa.cluster.topic_admin import LocalTopicAdmin, TopicAdmin
from samsa.cluster.topics import TopicStore
from samsa.config import BrokerConfig
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.txn_coordinator import TransactionCoordinator, TxnState
from samsa.errors import ErrorCode, KafkaError
from samsa.records.batch import iter_headers
from samsa.records.control import read_marker
from samsa.records.record import RecordInput, encode_batch
from samsa.storage.manager import LogManager

from .memory_writer import InMemoryPartitionWriter

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


@dataclass
class Services:
    """What the coordinator is given on a broker, built from the real services."""

    config: BrokerConfig
    replicas: Replicas
    topic_admin: TopicAdmin
    producer_ids: ProducerIdManager
    group_coordinator: GroupCoordinator
    broker_id: int = 1
    state: InMemoryPartitionWriter = field(default_factory=InMemoryPartitionWriter)


@pytest_asyncio.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    config = BrokerConfig({"log.dirs": str(tmp_path / "logs"), "broker.id": 1,
                           "transaction.state.log.num.partitions": 3})
    logs = LogManager(config)
    replicas = Replicas(logs)
    replicas.start(1, TopicStore(tmp_path))
    logs.startup()
    admin = LocalTopicAdmin(replicas, None, lambda _listener: ("127.0.0.1", 9092))
    admin.create_topic("data", 2)
    groups = GroupCoordinator(config, InMemoryPartitionWriter(), replicas.partition_exists)
    groups.start()
    found = Services(config, replicas, admin, ProducerIdManager(tmp_path), groups)
    try:
        yield found
    finally:
        await groups.stop()
        logs.shutdown()


@pytest_asyncio.fixture
async def txns(services: Services) -> AsyncIterator[TransactionCoordinator]:
    coordinator = TransactionCoordinator(services, services.state)
    await coordinator.start()
    try:
        yield coordinator
    finally:
        await coordinator.stop()


def markers(services: Services, partition: int) -> list[bool]:
    """The commit (True) / abort (False) markers in a data partition, in order."""
    found = services.replicas.partition("data", partition)
    assert found is not None
    out, offset = [], 0
    while offset < found.log.log_end_offset:
        data = found.log.read_batches(offset)
        for pos, h in iter_headers(data):
            offset = h.next_offset
            if h.is_control and (marker := read_marker(data[pos:pos + h.size])) is not None:
                out.append(marker.commit)
    return out


async def test_a_transaction_commits_with_markers_on_its_partitions(
        services: Services, txns: TransactionCoordinator) -> None:
    code, pid, epoch = await txns.init_producer_id("t1", 60_000)
    assert code == ErrorCode.none and epoch == 0
    assert txns.add_partitions("t1", pid, epoch, [("data", 0), ("data", 1)]) == {
        ("data", 0): ErrorCode.none, ("data", 1): ErrorCode.none}
    assert txns.txns["t1"].state == TxnState.ONGOING
    partition = services.replicas.partition("data", 0)
    assert partition is not None
    partition.append(encode_batch([RecordInput(b"v")], producer_id=pid, producer_epoch=epoch,
                                  base_sequence=0, transactional=True))
    assert await txns.end_txn("t1", pid, epoch, commit=True) == ErrorCode.none
    assert txns.txns["t1"].state == TxnState.COMPLETE_COMMIT
    assert markers(services, 0) == [True] and markers(services, 1) == [True]
    assert services.state.records() >= 3  # Empty, Ongoing, PrepareCommit, CompleteCommit


async def test_unknown_partitions_and_fenced_producers_are_refused(
        services: Services, txns: TransactionCoordinator) -> None:
    _, pid, epoch = await txns.init_producer_id("t2", 60_000)
    assert txns.add_partitions("t2", pid, epoch, [("data", 0), ("nope", 0)]) == {
        ("data", 0): ErrorCode.operation_not_attempted,
        ("nope", 0): ErrorCode.unknown_topic_or_partition}
    _, pid2, epoch2 = await txns.init_producer_id("t2", 60_000)  # a new incarnation
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert txns.add_partitions("t2", pid, epoch, [("data", 0)]) == {
        ("data", 0): ErrorCode.producer_fenced}
    assert await txns.end_txn("t2", pid, epoch, commit=True) == ErrorCode.producer_fenced


async def test_a_new_coordinator_replays_and_completes_a_prepared_transaction(
        services: Services, txns: TransactionCoordinator) -> None:
    _, pid, epoch = await txns.init_producer_id("t3", 60_000)
    txns.add_partitions("t3", pid, epoch, [("data", 1)])
    meta = txns.txns["t3"]
    txns._store(meta, TxnState.PREPARE_ABORT)  # the commit point, then the broker "dies"
    replayed = TransactionCoordinator(services, services.state)
    await replayed.start()  # loads the state partition and finishes what was prepared
    try:
        assert replayed.txns["t3"].state == TxnState.COMPLETE_ABORT
        assert markers(services, 1) == [False]
    finally:
        await replayed.stop()


async def test_only_the_owner_of_the_state_partition_coordinates(
        services: Services, txns: TransactionCoordinator) -> None:
    services.state.owned = set()  # another broker leads every __transaction_state partition
    with pytest.raises(KafkaError) as refused:
        await txns.init_producer_id("t4", 60_000)
    assert refused.value.code == ErrorCode.not_coordinator
    assert services.state.records() == 0




class SlowReplication(InMemoryPartitionWriter):
    """A writer whose replication waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        import asyncio

        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def wait_replicated(self, index: int, timeout_s: float) -> ErrorCode | None:
        self.waiting.set()
        await self.release.wait()
        return self.replication_error


async def test_the_timer_leaves_a_transaction_to_the_endtxn_that_prepared_it(
        services: Services) -> None:
    """Found by the fault tests: the timer's sweep of prepared transactions ran while EndTxn
    waited for its Prepare record to replicate, completed it, and EndTxn then completed it
    again: markers twice, and an illegal CompleteCommit -> CompleteCommit answered as an
    internal error."""
    import asyncio

    slow = SlowReplication()
    coordinator = TransactionCoordinator(services, slow)
    await coordinator.start()
    try:
        _, pid, epoch = await coordinator.init_producer_id("t5", 60_000)
        coordinator.add_partitions("t5", pid, epoch, [("data", 0)])
        ending = asyncio.ensure_future(coordinator.end_txn("t5", pid, epoch, commit=True))
        await asyncio.wait_for(slow.waiting.wait(), 10)
        assert coordinator.txns["t5"].state == TxnState.PREPARE_COMMIT
        await coordinator.complete_prepared()  # the timer's tick, meanwhile
        slow.release.set()
        assert await asyncio.wait_for(ending, 10) == ErrorCode.none
        assert coordinator.txns["t5"].state == TxnState.COMPLETE_COMMIT
        assert markers(services, 0) == [True]  # one marker, not two
    finally:
        await coordinator.stop()


async def test_a_broker_that_no_longer_coordinates_says_so(
        services: Services, txns: TransactionCoordinator) -> None:
    """Found by the fault tests: after the transactional id's state partition moved, EndTxn at
    the old broker answered INVALID_PRODUCER_ID_MAPPING, which the client takes as the end of
    the transaction (it aborts), not NOT_COORDINATOR (look the coordinator up again)."""
    _, pid, epoch = await txns.init_producer_id("t6", 60_000)
    txns.add_partitions("t6", pid, epoch, [("data", 0)])
    services.state.owned = set()  # the partition moved to another broker
    assert await txns.end_txn("t6", pid, epoch, commit=True) == ErrorCode.not_coordinator
    assert txns.add_partitions("t6", pid, epoch, [("data", 1)]) == {
        ("data", 1): ErrorCode.not_coordinator}


async def test_markers_that_fail_are_tried_again_within_a_second(
        services: Services) -> None:
    """Until its markers are written a transactional id answers CONCURRENT_TRANSACTIONS: a
    failed marker write is retried at once (Kafka's marker channel), not at the next cleanup
    tick (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by default)."""
    import asyncio

    from samsa.coordinator.txn_coordinator import MarkerError

    coordinator = TransactionCoordinator(services, services.state)
    await coordinator.start()
    try:
        _, pid, epoch = await coordinator.init_producer_id("t7", 60_000)
        coordinator.add_partitions("t7", pid, epoch, [("data", 0)])
        attempts = []
        real_complete = coordinator._complete

        async def flaky_complete(meta, commit):  # type: ignore[no-untyped-def]
            attempts.append(asyncio.get_running_loop().time())
            if len(attempts) <= 2:  # the partition's leader unreachable, twice
                raise MarkerError("no live leader")
            await real_complete(meta, commit)

        coordinator._complete = flaky_complete  # type: ignore[method-assign]
        assert await coordinator.end_txn("t7", pid, epoch, commit=True) == ErrorCode.none
        deadline = asyncio.get_running_loop().time() + 5
        while coordinator.txns["t7"].state != TxnState.COMPLETE_COMMIT:
            assert asyncio.get_running_loop().time() < deadline, attempts
            await asyncio.sleep(0.05)
        assert len(attempts) == 3 and attempts[-1] - attempts[0] < 3
        assert markers(services, 0) == [True]
        assert coordinator.add_partitions("t7", pid, epoch, [("data", 1)]) == {
            ("data", 1): ErrorCode.none}  # the next transaction may go on
    finally:
        await coordinator.stop()
