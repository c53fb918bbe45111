"""The follower side of replication (samsa/cluster/replica_fetcher.py) against real brokers.

Two embedded brokers, A and B, hold the same topic. Producers write to A with confluent-kafka;
a ``ReplicaFetcher`` on B's event loop follows A's partitions over the Kafka protocol. B's logs
must end up holding A's batches byte for byte, with the same producer state, open and aborted
transactions and leader epochs; a log that diverged from A's is truncated (KIP-320), one that
fell out of A's range is truncated or restarted, errors back off and a stopped leader does not
end the loop. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import samsa
from samsa.cluster.partition import Partition
from samsa.cluster.replica_fetcher import (
    FetchStatus,
    ReplicaFetcher,
    _chunks,
    offset_to_truncate_to,
)
from samsa.errors import ErrorCode
from samsa.records.batch import iter_headers
from samsa.records.record import RecordInput, encode_batch
from samsa.storage.log import Log

pytestmark = pytest.mark.timeout(120)

DEADLINE = 20.0
A_ID, B_ID = 1, 2
T = TypeVar("T")


# --- helpers ------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def on_loop(broker: samsa.Broker, fn: Callable[[], T], timeout: float = DEADLINE) -> T:
    """Run ``fn`` on the broker's event loop (where its logs change) and return its result."""
    async def call() -> T:
        return fn()

    return run(broker, call(), timeout)


def run(broker: samsa.Broker, coro: Awaitable[T], timeout: float = DEADLINE) -> T:
    """Run a coroutine on the broker's event loop."""
    assert broker._loop is not None

    async def wrapped() -> T:
        return await coro

    return asyncio.run_coroutine_threadsafe(wrapped(), broker._loop).result(timeout)


def create_topic(broker: samsa.Broker, name: str, partitions: int,
                 configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})],
        operation_timeout=10, request_timeout=10)
    for future in futures.values():
        future.result(timeout=DEADLINE)


def partition_of(broker: samsa.Broker, topic: str, index: int) -> Partition:
    partition = broker.server.replicas.partition(topic, index)
    assert partition is not None, f"{topic}-{index} missing on {broker.bootstrap_servers}"
    return partition


class Deliveries(list):
    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.append(err)


def produce(broker: samsa.Broker, topic: str, records: list[tuple[int, bytes | None, bytes]],
            **config: Any) -> None:
    """Produce (partition, key, value) records with one producer of ``config``; all acked."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
                         **config})
    deliveries = Deliveries()
    for partition, key, value in records:
        producer.produce(topic, value=value, key=key, partition=partition,
                         on_delivery=deliveries)
        producer.poll(0)
    assert producer.flush(DEADLINE) == 0, "records still in flight after the deadline"
    assert len(deliveries) == len(records) and not any(deliveries), deliveries


def transactional(broker: samsa.Broker, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(DEADLINE)
    return producer


def produce_txn(producer: Producer, topic: str, records: list[tuple[int, bytes]],
                end: str | None) -> None:
    """One transaction: ``end`` "commit", "abort" or None (left open, records flushed)."""
    producer.begin_transaction()
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(DEADLINE) == 0
    if end == "commit":
        producer.commit_transaction(DEADLINE)
    elif end == "abort":
        producer.abort_transaction(DEADLINE)


def all_batches(log_: Log, start: int | None = None) -> bytes:
    """Every batch from ``start`` (default: the log start) to the end, across segments."""
    offset = log_.log_start_offset if start is None else start
    out = bytearray()
    while offset < log_.log_end_offset:
        region = log_.read(offset, 1 << 30)
        if region is None:
            break
        out += region.read()
        offset = log_.offset_after(region)
    return bytes(out)


@dataclass(frozen=True)
class LogState:
    """What must be the same on a follower as on its leader."""

    log_start_offset: int
    log_end_offset: int
    batches: bytes
    producers: dict[int, Any]
    first_unstable_offset: int | None
    last_stable_offset: int
    aborted: list[Any]
    epochs: list[tuple[int, int]]


def log_state(broker: samsa.Broker, topic: str, index: int, start: int | None = None) -> LogState:
    def read() -> LogState:
        partition = partition_of(broker, topic, index)
        log_ = partition.log
        return LogState(
            log_.log_start_offset, log_.log_end_offset, all_batches(log_, start),
            dict(log_.producer_state.producers), log_.first_unstable_offset,
            partition.last_stable_offset, log_.collect_aborted_txns(0, log_.log_end_offset),
            list(log_.epochs.entries),
        )

    return on_loop(broker, read)


def segment_files(broker: samsa.Broker, topic: str, index: int) -> list[tuple[str, bytes]]:
    def read() -> list[tuple[str, bytes]]:
        return [(s.log_path.name, s.log_path.read_bytes())
                for s in partition_of(broker, topic, index).log.segments]

    return on_loop(broker, read)


def end_offset(broker: samsa.Broker, topic: str, index: int) -> int:
    return on_loop(broker, lambda: partition_of(broker, topic, index).log.log_end_offset)


def start_fetcher(a: samsa.Broker, b: samsa.Broker, topic: str, partitions: int,
                  epoch: int = 0, **options: Any) -> ReplicaFetcher:
    """A fetcher on B's loop following A's ``topic`` partitions 0..n-1 at leader ``epoch``."""
    options.setdefault("fetch_backoff_ms", 100)

    def make() -> ReplicaFetcher:
        fetcher = ReplicaFetcher(
            B_ID, ("127.0.0.1", a.port),
            [(partition_of(b, topic, i), epoch) for i in range(partitions)],
            leader_id=A_ID, **options,
        )
        fetcher.start()
        return fetcher

    return on_loop(b, make)


def stop_fetcher(b: samsa.Broker, fetcher: ReplicaFetcher) -> None:
    run(b, fetcher.stop(), timeout=10)
    assert not fetcher.running


def catch_up(a: samsa.Broker, b: samsa.Broker, fetcher: ReplicaFetcher, topic: str,
             partitions: int) -> None:
    """Wait until B's logs reach A's log end offsets."""
    for i in range(partitions):
        target = end_offset(a, topic, i)
        ok = run(b, fetcher.wait_caught_up(topic, i, target, DEADLINE), DEADLINE + 5)
        assert ok, (f"{topic}-{i}: B at {end_offset(b, topic, i)}, A at {target}; "
                    f"{status(b, fetcher, topic, i)}")


def status(b: samsa.Broker, fetcher: ReplicaFetcher, topic: str, index: int) -> FetchStatus:
    found = on_loop(b, lambda: fetcher.status(topic, index))
    assert found is not None
    return found


def wait_status(b: samsa.Broker, fetcher: ReplicaFetcher, topic: str, index: int,
                predicate: Callable[[FetchStatus], bool], what: str) -> FetchStatus:
    def check() -> bool:
        found = fetcher.status(topic, index)
        return found is not None and predicate(found)

    assert run(b, fetcher.wait_for(check, DEADLINE), DEADLINE + 5), (
        f"timed out waiting for {what}: {status(b, fetcher, topic, index)}")
    return status(b, fetcher, topic, index)


def assert_same(a: samsa.Broker, b: samsa.Broker, topic: str, index: int) -> LogState:
    leader, follower = log_state(a, topic, index), log_state(b, topic, index)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.log_start_offset == leader.log_start_offset
    assert follower.batches == leader.batches
    assert follower.producers == leader.producers
    assert follower.first_unstable_offset == leader.first_unstable_offset
    assert follower.last_stable_offset == leader.last_stable_offset
    assert follower.aborted == leader.aborted
    assert follower.epochs == leader.epochs
    return leader


def local_batch(values: list[bytes], epoch: int, base_offset: int = 0) -> bytes:
    return encode_batch([RecordInput(value=v) for v in values], base_offset=base_offset,
                        timestamp=1_700_000_000_000, leader_epoch=epoch)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[samsa.Broker, samsa.Broker]]:
    """Leader A (broker 1) and follower B (broker 2), unrelated but for the fetcher."""
    with samsa.Broker(tmp_path / "a", broker_id=A_ID) as a, \
            samsa.Broker(tmp_path / "b", broker_id=B_ID) as b:
        yield a, b


def both(pair: tuple[samsa.Broker, samsa.Broker], partitions: int,
         configs: dict[str, str] | None = None) -> str:
    topic = unique("replicated")
    for broker in pair:
        create_topic(broker, topic, partitions, configs)
    return topic


# --- replication --------------------------------------------------------------------------------


def test_follower_copies_every_kind_of_batch(pair: tuple[samsa.Broker, samsa.Broker]) -> None:
    """Plain, keyed, compressed, idempotent and transactional batches (commit and abort
    markers) replicate byte for byte, with producer state, LSO and aborted transactions."""
    a, b = pair
    topic = both(pair, 2)
    produce(a, topic, [(i % 2, None, f"plain-{i}".encode()) for i in range(20)])
    produce(a, topic, [(i % 2, f"key-{i % 5}".encode(), f"keyed-{i}".encode())
                       for i in range(20)])
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        produce(a, topic, [(i % 2, b"k", f"{codec}-{i}".encode() * 20) for i in range(30)],
                **{"compression.type": codec})
    produce(a, topic, [(i % 2, b"idem", f"idempotent-{i}".encode()) for i in range(25)],
            **{"enable.idempotence": True})
    txn = transactional(a, unique("txn"))
    produce_txn(txn, topic, [(i % 2, f"committed-{i}".encode()) for i in range(10)], "commit")
    produce_txn(txn, topic, [(i % 2, f"aborted-{i}".encode()) for i in range(10)], "abort")
    produce_txn(txn, topic, [(i % 2, f"committed-again-{i}".encode()) for i in range(4)],
                "commit")

    fetcher = start_fetcher(a, b, topic, 2)
    try:
        catch_up(a, b, fetcher, topic, 2)
        for p in range(2):
            leader = assert_same(a, b, topic, p)
            assert leader.aborted, "the aborted transaction is in the follower's txn index"
            assert len(leader.producers) >= 2  # the idempotent and the transactional producer
            assert segment_files(b, topic, p) == segment_files(a, topic, p)
            assert status(b, fetcher, topic, p).last_error == ErrorCode.none

        # the fetcher keeps following: more records, then a transaction left open
        produce(a, topic, [(i % 2, None, f"later-{i}".encode()) for i in range(10)],
                **{"compression.type": "zstd"})
        produce_txn(txn, topic, [(i % 2, f"open-{i}".encode()) for i in range(6)], None)
        catch_up(a, b, fetcher, topic, 2)
        for p in range(2):
            leader = assert_same(a, b, topic, p)
            assert leader.first_unstable_offset is not None
        txn.commit_transaction(DEADLINE)
        catch_up(a, b, fetcher, topic, 2)
        for p in range(2):
            assert assert_same(a, b, topic, p).first_unstable_offset is None
            assert segment_files(b, topic, p) == segment_files(a, topic, p)
    finally:
        stop_fetcher(b, fetcher)


def test_follower_wakes_waiting_fetches_and_sets_the_high_watermark(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """An append by the fetcher completes the futures fetches wait on; the follower's high
    watermark is the leader's (through ``set_follower_high_watermark`` when it exists)."""
    a, b = pair
    topic = both(pair, 1)
    follower = partition_of(b, topic, 0)
    seen: list[int] = []
    original = getattr(follower, "set_follower_high_watermark", None)

    def record(hw: int) -> None:
        seen.append(hw)
        if original is not None:
            original(hw)

    follower.set_follower_high_watermark = record  # type: ignore[attr-defined]
    fetcher = start_fetcher(a, b, topic, 1)
    try:
        def add_waiter() -> asyncio.Future[None]:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            follower.add_waiter(waiter)
            return waiter

        waiter = on_loop(b, add_waiter)  # registered before anything is produced
        produce(a, topic, [(0, None, b"wake up")])

        async def woken() -> None:
            await asyncio.wait_for(waiter, DEADLINE)

        run(b, woken(), DEADLINE + 5)
        assert end_offset(b, topic, 0) == 1
        catch_up(a, b, fetcher, topic, 1)
        leader_hw = on_loop(a, lambda: partition_of(a, topic, 0).high_watermark)
        wait_status(b, fetcher, topic, 0, lambda s: s.leader_high_watermark == leader_hw,
                    "the leader's high watermark")
        assert seen and seen[-1] == leader_hw == 1
    finally:
        stop_fetcher(b, fetcher)


def test_follower_copies_batches_across_its_own_segment_rolls(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """With segment.bytes far below what one fetch brings, the follower appends the batches in
    runs that fit a segment and rolls as needed."""
    a, b = pair
    topic = both(pair, 1, {"segment.bytes": "4096"})
    produce(a, topic, [(0, None, f"{i:04d}".encode() * 25) for i in range(200)],
            **{"batch.num.messages": 3})
    assert len(on_loop(a, lambda: partition_of(a, topic, 0).log.segments)) > 3
    fetcher = start_fetcher(a, b, topic, 1)
    try:
        catch_up(a, b, fetcher, topic, 1)
        assert_same(a, b, topic, 0)
        assert len(on_loop(b, lambda: partition_of(b, topic, 0).log.segments)) > 3
    finally:
        stop_fetcher(b, fetcher)


# --- truncation ---------------------------------------------------------------------------------


def test_diverged_follower_is_truncated_to_the_leader(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """B wrote batches of its own at epoch 0 that A never had; A went on at epoch 1 from the
    same offset. A's diverging epoch (KIP-320) makes B drop them and copy A's."""
    a, b = pair
    topic = both(pair, 1)
    produce(a, topic, [(0, None, f"shared-{i}".encode()) for i in range(5)])
    fetcher = start_fetcher(a, b, topic, 1)
    catch_up(a, b, fetcher, topic, 1)
    stop_fetcher(b, fetcher)
    shared_end = end_offset(a, topic, 0)

    follower = partition_of(b, topic, 0)
    on_loop(b, lambda: follower.append(local_batch([b"b-only-1", b"b-only-2"], 0)))
    on_loop(b, lambda: follower.append(local_batch([b"b-only-3"], 0)))
    assert end_offset(b, topic, 0) == shared_end + 3

    def new_epoch() -> None:
        partition_of(a, topic, 0).leader_epoch = 1

    on_loop(a, new_epoch)
    produce(a, topic, [(0, None, f"epoch-1-{i}".encode()) for i in range(7)])

    fetcher = start_fetcher(a, b, topic, 1, epoch=1)
    try:
        catch_up(a, b, fetcher, topic, 1)
        leader = assert_same(a, b, topic, 0)
        assert leader.epochs == [(0, 0), (1, shared_end)]
        assert status(b, fetcher, topic, 0).truncations == 1
        assert b"b-only" not in leader.batches
        # adding it again at the same epoch changes nothing; a new epoch starts afresh
        on_loop(b, lambda: fetcher.add_partition(follower, 1))
        assert status(b, fetcher, topic, 0).truncations == 1
        on_loop(b, lambda: fetcher.add_partition(follower, 2))
        assert status(b, fetcher, topic, 0).truncations == 0
    finally:
        stop_fetcher(b, fetcher)


def test_follower_with_an_epoch_the_leader_never_had(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """B led epoch 1 for a while (offsets A does not have); A leads epoch 2 from the shared
    end. A answers with the end of epoch 0, the last one both have."""
    a, b = pair
    topic = both(pair, 1)
    produce(a, topic, [(0, None, f"shared-{i}".encode()) for i in range(3)])
    fetcher = start_fetcher(a, b, topic, 1)
    catch_up(a, b, fetcher, topic, 1)
    stop_fetcher(b, fetcher)
    shared_end = end_offset(a, topic, 0)

    follower = partition_of(b, topic, 0)

    def b_leads_epoch_1() -> None:
        follower.leader_epoch = 1
        for i in range(3):
            follower.append(local_batch([f"b-epoch-1-{i}".encode()], 1))

    on_loop(b, b_leads_epoch_1)

    def a_leads_epoch_2() -> None:
        partition_of(a, topic, 0).leader_epoch = 2

    on_loop(a, a_leads_epoch_2)
    produce(a, topic, [(0, None, f"a-epoch-2-{i}".encode()) for i in range(2)])
    assert end_offset(b, topic, 0) > end_offset(a, topic, 0)

    fetcher = start_fetcher(a, b, topic, 1, epoch=2)
    try:
        wait_status(b, fetcher, topic, 0, lambda s: s.truncations >= 1, "a truncation")
        catch_up(a, b, fetcher, topic, 1)
        leader = assert_same(a, b, topic, 0)
        assert leader.epochs == [(0, 0), (2, shared_end)]
    finally:
        stop_fetcher(b, fetcher)


@pytest.mark.parametrize("mid_batch", [False, True], ids=["at-a-batch", "inside-a-batch"])
def test_leader_log_start_beyond_the_follower(
    pair: tuple[samsa.Broker, samsa.Broker], mid_batch: bool,
) -> None:
    """A deleted records past B's end (DeleteRecords): B's fetch is out of range, B starts its
    log anew at A's log start. When that start is inside a batch, B starts at the batch and
    moves its log start to A's."""
    a, b = pair
    topic = both(pair, 1)
    produce(a, topic, [(0, None, b"early")])
    fetcher = start_fetcher(a, b, topic, 1)
    catch_up(a, b, fetcher, topic, 1)
    stop_fetcher(b, fetcher)

    if mid_batch:  # one batch of 10 records
        produce(a, topic, [(0, None, f"r{i}".encode()) for i in range(10)],
                **{"linger.ms": 200})
    else:
        for i in range(10):
            produce(a, topic, [(0, None, f"r{i}".encode())])
    batches = on_loop(a, lambda: len(list(iter_headers(all_batches(
        partition_of(a, topic, 0).log)))))
    assert batches == (2 if mid_batch else 11)
    on_loop(a, lambda: partition_of(a, topic, 0).log.delete_records_before(8))

    fetcher = start_fetcher(a, b, topic, 1)
    try:
        catch_up(a, b, fetcher, topic, 1)
        leader = log_state(a, topic, 0)
        follower = log_state(b, topic, 0)
        assert follower.log_start_offset == leader.log_start_offset == 8
        assert follower.log_end_offset == leader.log_end_offset == 11
        assert follower.batches == leader.batches  # from the log start on
        assert follower.epochs == leader.epochs
        if not mid_batch:
            assert status(b, fetcher, topic, 0).truncations == 1
    finally:
        stop_fetcher(b, fetcher)


def test_follower_ahead_of_the_leader_without_epochs(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """A follower log past the leader's end whose epochs are unknown (no KIP-320 check) is
    out of range: it is truncated to the leader's end and then follows."""
    a, b = pair
    topic = both(pair, 1)
    produce(a, topic, [(0, None, f"shared-{i}".encode()) for i in range(4)])
    fetcher = start_fetcher(a, b, topic, 1)
    catch_up(a, b, fetcher, topic, 1)
    stop_fetcher(b, fetcher)

    follower = partition_of(b, topic, 0)

    def b_runs_ahead() -> None:
        follower.append(local_batch([b"extra-1", b"extra-2", b"extra-3"], 0))
        follower.log.epochs.clear()

    on_loop(b, b_runs_ahead)
    fetcher = start_fetcher(a, b, topic, 1)
    try:
        wait_status(b, fetcher, topic, 0, lambda s: s.truncations >= 1, "a truncation")
        produce(a, topic, [(0, None, b"after")])
        catch_up(a, b, fetcher, topic, 1)
        leader = log_state(a, topic, 0)
        follower_state = log_state(b, topic, 0)
        assert follower_state.batches == leader.batches
        assert follower_state.log_end_offset == leader.log_end_offset
    finally:
        stop_fetcher(b, fetcher)


# --- errors and lifecycle -----------------------------------------------------------------------


@pytest.mark.parametrize(("epoch", "error"), [
    (0, ErrorCode.fenced_leader_epoch), (5, ErrorCode.unknown_leader_epoch),
], ids=["older-epoch", "newer-epoch"])
def test_wrong_leader_epoch_backs_off_until_corrected(
    pair: tuple[samsa.Broker, samsa.Broker], epoch: int, error: ErrorCode,
) -> None:
    a, b = pair
    topic = both(pair, 1)
    on_loop(a, lambda: setattr(partition_of(a, topic, 0), "leader_epoch", 3))
    produce(a, topic, [(0, None, b"epoch 3")])
    fetcher = start_fetcher(a, b, topic, 1, epoch=epoch)
    try:
        found = wait_status(b, fetcher, topic, 0, lambda s: s.last_error == error, str(error))
        assert found.fetch_offset == 0 and found.failed is None
        assert fetcher.running
        on_loop(b, lambda: fetcher.add_partition(partition_of(b, topic, 0), 3))
        catch_up(a, b, fetcher, topic, 1)
        assert_same(a, b, topic, 0)
    finally:
        stop_fetcher(b, fetcher)


def test_unknown_partition_backs_off(pair: tuple[samsa.Broker, samsa.Broker]) -> None:
    """A partition the leader does not have answers UNKNOWN_TOPIC_OR_PARTITION; the other
    partitions go on."""
    a, b = pair
    topic = both(pair, 1)
    only_on_b = unique("only-on-b")
    create_topic(b, only_on_b, 1)
    produce(a, topic, [(0, None, b"x")])
    fetcher = start_fetcher(a, b, topic, 1)
    try:
        on_loop(b, lambda: fetcher.add_partition(partition_of(b, only_on_b, 0), 0))
        wait_status(b, fetcher, only_on_b, 0,
                    lambda s: s.last_error == ErrorCode.unknown_topic_or_partition,
                    "UNKNOWN_TOPIC_OR_PARTITION")
        catch_up(a, b, fetcher, topic, 1)
        produce(a, topic, [(0, None, b"y")])
        catch_up(a, b, fetcher, topic, 1)
    finally:
        stop_fetcher(b, fetcher)


def test_removed_partition_is_no_longer_fetched(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    a, b = pair
    topic = both(pair, 2)
    produce(a, topic, [(i % 2, None, b"first") for i in range(4)])
    fetcher = start_fetcher(a, b, topic, 2)
    try:
        catch_up(a, b, fetcher, topic, 2)
        removed = on_loop(b, lambda: fetcher.remove_partition(topic, 1))
        assert removed is partition_of(b, topic, 1)
        assert on_loop(b, lambda: fetcher.partitions) == [(topic, 0)]
        before = end_offset(b, topic, 1)
        produce(a, topic, [(i % 2, None, b"second") for i in range(4)])
        catch_up(a, b, fetcher, topic, 1)  # partition 0 only: a fetch went out after
        assert end_offset(b, topic, 1) == before < end_offset(a, topic, 1)
    finally:
        stop_fetcher(b, fetcher)


def test_stopped_leader_does_not_end_the_loop(
    tmp_path: Path, pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """The leader goes away: the fetcher retries with back-off without failing anything,
    resumes when a leader listens on the same port again, and stops cleanly."""
    a, b = pair
    topic = both(pair, 1)
    produce(a, topic, [(0, None, b"before")])
    fetcher = start_fetcher(a, b, topic, 1)
    try:
        catch_up(a, b, fetcher, topic, 1)
        port = a.port
        a.stop()
        assert run(b, fetcher.wait_for(lambda: fetcher.connection_failures >= 3, DEADLINE),
                   DEADLINE + 5), "no reconnection attempts"
        assert fetcher.running
        assert on_loop(b, fetcher.failed_partitions) == {}

        # the leader comes back on its port (reuse_address lets it bind at once)
        again = samsa.Broker(tmp_path / "a", broker_id=A_ID,
                             listeners=f"PLAINTEXT://127.0.0.1:{port}")
        again.start()
        try:
            produce(again, topic, [(0, None, b"after")])
            catch_up(again, b, fetcher, topic, 1)
            assert_same(again, b, topic, 0)
        finally:
            again.stop()
    finally:
        stop_fetcher(b, fetcher)


def test_stop_while_a_fetch_waits(pair: tuple[samsa.Broker, samsa.Broker]) -> None:
    """stop() ends a loop whose fetch is long-polling the leader, at once; stop() twice and
    a fetcher that never started are fine too."""
    a, b = pair
    topic = both(pair, 1)
    fetcher = start_fetcher(a, b, topic, 1, fetch_wait_max_ms=10_000, socket_timeout_ms=30_000)
    run(b, fetcher.wait_for(lambda: False, 0.5))  # a fetch is now waiting at the leader
    assert fetcher.running
    run(b, fetcher.stop(), timeout=2)
    run(b, fetcher.stop(), timeout=2)
    assert not fetcher.running
    idle = on_loop(b, lambda: ReplicaFetcher(B_ID, ("127.0.0.1", a.port)))
    run(b, idle.stop(), timeout=2)


LONG_POLL = {"fetch_wait_max_ms": 10_000, "socket_timeout_ms": 30_000}


def test_a_partition_added_during_a_long_poll_is_fetched_at_once(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """A partition to follow (a leadership change) does not wait for the fetch in flight,
    which does not name it, to end its long poll: that fetch is abandoned and a new one
    goes out."""
    a, b = pair
    topic = both(pair, 2)
    produce(a, topic, [(0, None, b"first"), (1, None, b"first")])
    fetcher = start_fetcher(a, b, topic, 1, **LONG_POLL)
    try:
        catch_up(a, b, fetcher, topic, 1)  # the next fetch now waits at the leader
        started = time.monotonic()
        on_loop(b, lambda: fetcher.add_partition(partition_of(b, topic, 1), 0))
        catch_up(a, b, fetcher, topic, 2)
        took = time.monotonic() - started
        assert took < 5, f"fetched {took:.1f} s after it was added (the long poll is 10 s)"
        produce(a, topic, [(0, None, b"second"), (1, None, b"second")])
        catch_up(a, b, fetcher, topic, 2)
        for p in range(2):
            assert_same(a, b, topic, p)
    finally:
        stop_fetcher(b, fetcher)


def test_a_partition_backing_off_is_fetched_after_its_back_off_not_the_long_poll(
    pair: tuple[samsa.Broker, samsa.Broker],
) -> None:
    """A partition the leader refused (it has not taken the new leader epoch yet) is asked
    for again once its back-off ends, even while the other partitions long-poll: a fetch
    waits no longer than the earliest back-off."""
    a, b = pair
    topic = both(pair, 2)
    produce(a, topic, [(0, None, b"first")])
    fetcher = start_fetcher(a, b, topic, 1, **LONG_POLL)
    try:
        catch_up(a, b, fetcher, topic, 1)
        on_loop(b, lambda: fetcher.add_partition(partition_of(b, topic, 1), 3))
        wait_status(b, fetcher, topic, 1,
                    lambda s: s.last_error == ErrorCode.unknown_leader_epoch,
                    "UNKNOWN_LEADER_EPOCH")
        started = time.monotonic()
        on_loop(a, lambda: setattr(partition_of(a, topic, 1), "leader_epoch", 3))
        produce(a, topic, [(1, None, b"at epoch 3")])
        catch_up(a, b, fetcher, topic, 2)
        took = time.monotonic() - started
        assert took < 5, f"fetched {took:.1f} s after the leader took the epoch"
    finally:
        stop_fetcher(b, fetcher)


def test_unreachable_leader_is_retried(pair: tuple[samsa.Broker, samsa.Broker]) -> None:
    """Nothing listens at the leader's address: connection failures, never a crash."""
    _, b = pair
    topic = unique("lonely")
    create_topic(b, topic, 1)

    def make() -> ReplicaFetcher:
        fetcher = ReplicaFetcher(B_ID, ("127.0.0.1", 1), [(partition_of(b, topic, 0), 0)],
                                 fetch_backoff_ms=50, socket_timeout_ms=2000)
        fetcher.start()
        return fetcher

    fetcher = on_loop(b, make)
    try:
        assert run(b, fetcher.wait_for(lambda: fetcher.connection_failures >= 3, DEADLINE),
                   DEADLINE + 5)
        assert fetcher.running
    finally:
        stop_fetcher(b, fetcher)


# --- pieces -------------------------------------------------------------------------------------


def _log_with_epochs(path: Path, epochs: list[tuple[int, int]], end: int) -> Log:
    """A log of one-record batches 0..end-1, each in the epoch ``epochs`` gives its offset."""
    log_ = Log(path)
    for offset in range(end):
        epoch = max(e for e, start in epochs if start <= offset)
        log_.append(local_batch([b"v"], epoch, offset), assign_offsets=False)
    return log_


def test_offset_to_truncate_to(tmp_path: Path) -> None:
    """Kafka's getOffsetTruncationState, case by case."""
    log_ = _log_with_epochs(tmp_path / "p-0", [(0, 0), (2, 4), (4, 7)], 10)
    try:
        assert log_.epochs.entries == [(0, 0), (2, 4), (4, 7)]
        # the follower has the leader's epoch: the smaller end
        assert offset_to_truncate_to(log_, 2, 5) == 5
        assert offset_to_truncate_to(log_, 2, 9) == 7
        assert offset_to_truncate_to(log_, 4, 8) == 8
        # an epoch the follower never had: the end of its largest one below
        assert offset_to_truncate_to(log_, 3, 6) == 7
        assert offset_to_truncate_to(log_, 1, 3) == 4
        # never past the local end; unknown offsets do not truncate
        assert offset_to_truncate_to(log_, 4, 50) == 10
        assert offset_to_truncate_to(log_, 2, -1) == 10
        assert offset_to_truncate_to(log_, -1, 6) == 6
    finally:
        log_.close()
    empty = Log(tmp_path / "p-1")
    try:  # no epochs at all: the leader's end offset
        assert offset_to_truncate_to(empty, 3, 0) == 0
    finally:
        empty.close()


def test_chunks_split_at_batch_boundaries() -> None:
    batches = b"".join(local_batch([bytes(100)], 0, i) for i in range(10))
    size = len(local_batch([bytes(100)], 0, 0))
    view = memoryview(batches)
    runs = list(_chunks(view, size * 3 + 1))
    assert [len(r) for r in runs] == [size * 3] * 3 + [size]
    assert b"".join(bytes(r) for r in runs) == batches
    assert [len(r) for r in _chunks(view, 10)] == [size] * 10  # one batch over the limit
    assert [len(r) for r in _chunks(view[: size * 2 + 7], 1 << 20)] == [size * 2]
