"""The transaction coordinator's own state: ``__transaction_state`` is compacted and replayed,
a transaction left in PrepareCommit/PrepareAbort by a crash is completed at start-up, and
transactional ids idle for ``transactional.id.expiration.ms`` are forgotten."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

import samsa
from samsa.coordinator.records import partition_for
from samsa.coordinator.txn_coordinator import TXN_STATE_TOPIC, TxnState

pytestmark = pytest.mark.timeout(120)


def create_topic(broker: samsa.Broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def read_all(broker: samsa.Broker, topic: str, partitions: int, isolation: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "reader",
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, ended = [], set()
    deadline = time.monotonic() + 20
    try:
        while len(ended) < partitions:
            assert time.monotonic() < deadline, "no end of partitions within 20 s"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                ended.add(msg.partition())
                continue
            values.append(msg.value().decode())
    finally:
        consumer.close()
    return sorted(values)


def on_loop(broker: samsa.Broker, call: Any) -> Any:
    """Run ``call()`` on the broker's event loop thread and return its result."""
    assert broker._loop is not None

    async def run() -> Any:
        return call()

    return asyncio.run_coroutine_threadsafe(run(), broker._loop).result(10)


@pytest.mark.parametrize("commit", [True, False])
def test_prepared_transaction_is_completed_after_a_restart(tmp_path: Path, commit: bool) -> None:
    """EndTxn's commit point is the Prepare record: a broker that stops after writing it but
    before any marker completes the transaction at start-up, on every partition."""
    topic = "prepared"
    with samsa.Broker(tmp_path / "d") as broker:
        create_topic(broker, topic, 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": "prepared-id"})
        producer.init_transactions(15)
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush(15)
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        meta = coordinator.txns["prepared-id"]
        assert meta.state == TxnState.ONGOING
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        on_loop(broker, lambda: coordinator._store(meta, state))  # then "crash": no markers
        assert read_all(broker, topic, 2, "read_committed") == []
    with samsa.Broker(tmp_path / "d") as broker:
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        assert coordinator.txns["prepared-id"].state == done
        expected = sorted(f"v{i}" for i in range(6)) if commit else []
        assert read_all(broker, topic, 2, "read_committed") == expected
        assert read_all(broker, topic, 2, "read_uncommitted") == sorted(
            f"v{i}" for i in range(6))
        # the id goes on: the same transactional id starts its next transaction
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": "prepared-id"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(topic, b"after", partition=0)
        producer.commit_transaction(15)
        assert "after" in read_all(broker, topic, 2, "read_committed")


def test_idle_transactional_ids_expire(tmp_path: Path) -> None:
    """An id without a transaction for transactional.id.expiration.ms is removed (with a
    tombstone, so it stays gone after a restart); an id in use is kept."""
    config = {"transactional.id.expiration.ms": 1500,
              "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
              "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
    with samsa.Broker(tmp_path / "d", config=config) as broker:
        create_topic(broker, "exp", 1)
        idle = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": "idle-id"})
        idle.init_transactions(15)
        busy = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": "busy-id", "transaction.timeout.ms": 60000})
        busy.init_transactions(15)
        busy.begin_transaction()
        busy.produce("exp", b"open", partition=0)
        busy.flush(15)
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        wait_for(lambda: "idle-id" not in coordinator.txns, timeout=15,
                 what="idle-id to expire")
        assert coordinator.txns["busy-id"].state == TxnState.ONGOING
        busy.commit_transaction(15)
    with samsa.Broker(tmp_path / "d") as broker:
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        assert "idle-id" not in coordinator.txns
        assert coordinator.txns["busy-id"].state == TxnState.COMPLETE_COMMIT


def test_transaction_state_is_compacted(tmp_path: Path) -> None:
    """Every transaction writes its states to __transaction_state; the topic is compacted, so
    after many transactions one id's partition shrinks to about its last state, and the state
    reads back the same after a restart."""
    config = {"log.cleaner.backoff.ms": 100, "transaction.state.log.segment.bytes": 4096}
    with samsa.Broker(tmp_path / "d", config=config) as broker:
        create_topic(broker, "many", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": "many-txns"})
        producer.init_transactions(15)
        for i in range(150):
            producer.begin_transaction()
            producer.produce("many", f"m{i}".encode(), partition=0)
            producer.commit_transaction(15)
        index = partition_for("many-txns", 50)
        partition = broker.server.replicas.partition(TXN_STATE_TOPIC, index)
        assert partition is not None
        assert partition.log.config.compact
        written = partition.log.log_end_offset
        assert written >= 3 * 150  # Ongoing, PrepareCommit, CompleteCommit per transaction

        def live_records() -> int:
            log = partition.log
            return sum(h.records_count for s in list(log.segments)
                       for _, h in s.scan(0))

        wait_for(lambda: live_records() < written // 4, timeout=30,
                 what="__transaction_state to be compacted",
                 details=lambda: f"{live_records()} of {written} records left")
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        before = coordinator.txns["many-txns"]
        state = (before.producer_id, before.producer_epoch, before.state)
    with samsa.Broker(tmp_path / "d") as broker:
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        after = coordinator.txns["many-txns"]
        assert (after.producer_id, after.producer_epoch, after.state) == state
        assert len(read_all(broker, "many", 1, "read_committed")) == 150


def test_a_failed_marker_write_is_retried(tmp_path: Path) -> None:
    """EndTxn's outcome is decided once Prepare is written: when writing a marker fails (the
    disk is full, say) the client still gets its answer and the coordinator retries the
    markers on its next tick, until the transaction completes."""
    config = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
    with samsa.Broker(tmp_path / "d", config=config) as broker:
        create_topic(broker, "retry", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": "retry-id"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("retry", b"kept", partition=0)
        producer.flush(15)
        partition = broker.server.replicas.partition("retry", 0)
        assert partition is not None
        real = partition.append_marker
        failures = []

        def full_disk(*args: Any) -> None:
            if not failures:
                failures.append(args)
                raise OSError(28, "No space left on device")
            real(*args)

        partition.append_marker = full_disk  # type: ignore[method-assign]
        producer.commit_transaction(15)
        assert failures, "the marker write was never attempted"
        coordinator = broker.server.txn_coordinator
        assert coordinator is not None
        wait_for(lambda: coordinator.txns["retry-id"].state == TxnState.COMPLETE_COMMIT,
                 timeout=10, what="the commit to complete on a later tick")
        assert read_all(broker, "retry", 1, "read_committed") == ["kept"]
