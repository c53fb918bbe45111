"""Jepsen's Kafka workloads with confluent-kafka, recording a history of what every client did.

* ``QueueWorkload``: idempotent acks=all producers (values ``<producer>:<seq>``), consumers in a
  group that commit their offsets after each batch they read, assign-mode readers reading every
  partition from its start all the run long, and a monitor that samples the group's committed
  offsets. After the faults, ``final_read`` reads every partition from the
  start in assign mode.
* ``TxnWorkload``: transactional producers writing a few records to several partitions per
  transaction and committing or (one in five) aborting, read_committed readers in assign mode,
  and a consume-transform-produce processor: it reads the transactions' topic read_committed in
  a group and writes each record to an output topic in a transaction that also commits its
  input offsets (``send_offsets_to_transaction``).

Every client call that answers is an event in ``History``: what was sent, what was
acknowledged (with its partition and offset), what failed and what was read. Threads stop on
``stop()``; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

QUIET = {"log_level": 0}  # librdkafka's own log lines would drown the report
# past this, a send_offsets_to_transaction(timeout 60 s) call is a librdkafka hang
SEND_OFFSETS_HANG_S = 90.0


@dataclass
class History:
    """Events as dicts with ``kind``; appended from many threads."""

    events: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, **values: Any) -> None:
        with self._lock:
            self.events.append({"kind": kind, "t": time.monotonic(), **values})

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["kind"] == kind]

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for e in self.events if e["kind"] == kind)


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 3,
                 timeout: float = 60) -> None:
    """Create ``topic``; while the controller has not yet seen every broker register (a
    just-started cluster), INVALID_REPLICATION_FACTOR is asked again until ``timeout``."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    deadline = time.monotonic() + timeout
    attempts, last = 0, "none"
    while True:
        future = admin.create_topics([NewTopic(topic, partitions, replication)])[topic]
        attempts += 1
        try:
            future.result(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:
            last = str(exc.args[0])
            if (exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR
                    or time.monotonic() > deadline):
                raise
        except TimeoutError:  # what the cluster looked like to the client, for the report
            seen = "unknown"
            with contextlib.suppress(Exception):
                metadata = admin.list_topics(timeout=5)
                seen = f"brokers {sorted(metadata.brokers)}, controller {metadata.controller_id}"
            raise TimeoutError(f"creating {topic}: no success in {timeout:g} s and {attempts} "
                               f"attempts; the last error: {last}; the cluster: {seen}") from None
        time.sleep(0.2)  # the next registration is a ZooKeeper watch away


class _Worker:
    def __init__(self) -> None:
        self.stopping = threading.Event()  # every thread ends
        self.producing_done = threading.Event()  # the producers end, the readers go on
        self.threads: list[threading.Thread] = []

    history: History

    def spawn(self, target: Callable[..., None], *args: Any, name: str) -> None:
        def guarded() -> None:
            try:
                target(*args)
            except Exception as exc:  # a client thread that dies is a finding, not a hang
                self.history.add("crash", thread=name, error=f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def producing(self) -> bool:
        return not (self.stopping.is_set() or self.producing_done.is_set())

    def stop_producing(self, timeout: float = 300) -> None:
        self.producing_done.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            if "producer" in thread.name:
                thread.join(max(0.1, deadline - time.monotonic()))

    def stop(self, timeout: float = 120, stuck: tuple[str, ...] = ()) -> None:
        """End every thread; ``stuck``: threads known blocked in the client library (left)."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            if thread.name not in stuck:
                thread.join(max(0.1, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive() and t.name not in stuck]
        assert not alive, f"client threads still running after {timeout} s: {alive}"


# --- the queue ------------------------------------------------------------------------------


class QueueWorkload(_Worker):
    def __init__(self, bootstrap: str, history: History, topic: str = "queue",
                 partitions: int = 3, producers: int = 2, consumers: int = 2,
                 rate_per_s: float = 100.0, group: str = "queue-group", readers: int = 1) -> None:
        super().__init__()
        self.bootstrap, self.history, self.topic = bootstrap, history, topic
        self.partitions, self.producers, self.consumers = partitions, producers, consumers
        self.readers = readers
        self.interval = producers / rate_per_s
        self.group = group
        self.consuming = threading.Event()  # cleared: consumers stay idle

    def start(self) -> None:
        create_topic(self.bootstrap, self.topic, self.partitions)
        for p in range(self.producers):
            self.spawn(self._produce, p, name=f"producer-{p}")
        for c in range(self.consumers):
            self.spawn(self._consume, c, name=f"consumer-{c}")
        for r in range(self.readers):
            self.spawn(self._read_assigned, r, name=f"assign-reader-{r}")
        self.spawn(self._monitor_commits, name="commit-monitor")
        self.consuming.set()

    def _produce(self, producer_id: int) -> None:
        history = self.history
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 300000, **QUIET,
        })

        def delivered(err: KafkaError | None, msg: Message) -> None:
            seq = int(msg.value().decode().split(":")[1])  # type: ignore[union-attr]
            if err is None:
                history.add("ack", producer=producer_id, seq=seq, partition=msg.partition(),
                            offset=msg.offset())
            else:
                history.add("fail", producer=producer_id, seq=seq, error=str(err))

        seq = 0
        while self.producing():
            partition = seq % self.partitions
            try:
                producer.produce(self.topic, f"{producer_id}:{seq}".encode(),
                                 partition=partition, on_delivery=delivered)
            except BufferError:
                producer.poll(0.1)
                continue
            history.add("send", producer=producer_id, seq=seq, partition=partition)
            seq += 1
            producer.poll(0)
            time.sleep(self.interval)
        left = producer.flush(300)
        history.add("producer-done", producer=producer_id, unflushed=left)

    def _consume(self, consumer_id: int) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **QUIET,
        })
        consumer.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                if not self.consuming.is_set():
                    time.sleep(0.05)
                    continue
                messages = consumer.consume(100, timeout=0.5)
                read = [m for m in messages if m.error() is None]
                for m in read:
                    producer_id, seq = (int(x) for x in m.value().decode().split(":"))  # type: ignore[union-attr]
                    self.history.add("read", consumer=consumer_id, partition=m.partition(),
                                     offset=m.offset(), producer=producer_id, seq=seq)
                if not read:
                    continue
                try:
                    committed = consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    self.history.add("commit-fail", consumer=consumer_id, error=str(exc))
                    continue
                for tp in committed or ():
                    if tp.error is None and tp.offset >= 0:
                        self.history.add("commit", consumer=consumer_id,
                                         partition=tp.partition, offset=tp.offset)
        finally:
            consumer.close()

    def _read_assigned(self, reader_id: int) -> None:
        """Jepsen's assign-mode reader: every partition from its start, no group, no commits,
        all the run long; each read is an ``assign-read`` (one session: its offsets must rise
        with nothing skipped)."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap,
                             "group.id": f"assign-reader-{reader_id}-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False, **QUIET})
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stopping.is_set():
                for m in consumer.consume(100, timeout=0.5):
                    if m.error() is not None:
                        continue
                    producer_id, seq = (int(x) for x in m.value().decode().split(":"))  # type: ignore[union-attr]
                    self.history.add("assign-read", reader=reader_id, partition=m.partition(),
                                     offset=m.offset(), producer=producer_id, seq=seq)
        finally:
            consumer.close()

    def _monitor_commits(self) -> None:
        """Samples the group's committed offsets (what a new member would start from)."""
        admin_consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                   "enable.auto.commit": False, **QUIET})
        partitions = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            while not self.stopping.wait(0.5):
                try:
                    offsets = admin_consumer.committed(partitions, timeout=5)
                except KafkaException:
                    continue
                for tp in offsets:
                    if tp.error is None and tp.offset >= 0:
                        self.history.add("committed", partition=tp.partition, offset=tp.offset)
        finally:
            admin_consumer.close()


def final_read(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted",
               timeout: float = 120) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition as (offset, value), from offset 0 to the end each
    partition has when the read starts (the last stable offset under read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"final-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True, **QUIET})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        deadline = time.monotonic() + timeout
        ends: dict[int, int] = {}
        for p in range(partitions):
            while True:
                try:
                    ends[p] = consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=10, cached=False)[1]
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done = {p for p in range(partitions) if ends[p] == 0}
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"final read of {topic}: ends {ends}, read "
                                     f"{ {p: len(v) for p, v in out.items()} } by the deadline")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            partition = msg.partition()
            assert partition is not None
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if (msg.offset() or 0) >= ends[partition]:
                        done.add(partition)
                    continue
                raise KafkaException(msg.error())
            offset = msg.offset()
            assert offset is not None
            if offset < ends[partition]:
                out[partition].append((offset, msg.value() or b""))
            if offset + 1 >= ends[partition]:
                done.add(partition)
    finally:
        consumer.close()
    return out


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str,
                timeout: float = 30) -> dict[int, int] | None:
    """Each partition's end: the high watermark, or under read_committed the last stable
    offset; None when a broker does not answer in time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4()}",
                         "isolation.level": isolation, **QUIET})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout,
                                                  cached=False)[1]
                for p in range(partitions)}
    except KafkaException:
        return None
    finally:
        consumer.close()


# --- transactions ---------------------------------------------------------------------------


class TxnWorkload(_Worker):
    def __init__(self, bootstrap: str, history: History, topic: str = "txn",
                 output: str = "txn-out", partitions: int = 3, producers: int = 2,
                 per_txn: int = 4, abort_ratio: float = 0.2, seed: int = 0) -> None:
        super().__init__()
        self.bootstrap, self.history = bootstrap, history
        self.topic, self.output, self.partitions = topic, output, partitions
        self.producers, self.per_txn, self.abort_ratio = producers, per_txn, abort_ratio
        self.seed = seed
        self._abandoned: list[Producer] = []  # producers stuck in a client call

    def start(self) -> None:
        create_topic(self.bootstrap, self.topic, self.partitions)
        create_topic(self.bootstrap, self.output, self.partitions)
        for p in range(self.producers):
            self.spawn(self._produce, p, name=f"txn-producer-{p}")
        self.spawn(self._read_committed, name="txn-reader")
        self.spawn(self._transform, name="txn-processor")

    def _new_producer(self, txn_id: str) -> Producer:
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "transactional.id": txn_id,
                                  "transaction.timeout.ms": 60000, "message.timeout.ms": 60000,
                                  **QUIET}
        if os.environ.get("SAMSA_CHAOS_CLIENT_DEBUG"):
            # librdkafka's eos debug log on the run's stderr, written by librdkafka's own
            # threads: a Python logger would only get the lines a poll() serves, and a client
            # stuck in a blocking call serves none
            config.update(debug="eos,protocol,broker", log_level=7)
        producer = Producer(config)
        producer.init_transactions(60)
        return producer

    def _produce(self, producer_id: int) -> None:
        history = self.history
        rng = random.Random(self.seed * 1000 + producer_id)
        txn_id = f"chaos-txn-{producer_id}"
        producer: Producer | None = None
        number = 0
        while self.producing():
            try:
                if producer is None:
                    producer = self._new_producer(txn_id)
                producer.begin_transaction()
                values = [f"{producer_id}:{number}:{i}" for i in range(self.per_txn)]
                for i, value in enumerate(values):
                    producer.produce(self.topic, value.encode(), partition=i % self.partitions)
                abort = rng.random() < self.abort_ratio
                history.add("txn-begin", producer=producer_id, number=number, values=values,
                            abort=abort)
                if abort:
                    producer.abort_transaction(60)
                    history.add("txn-aborted", producer=producer_id, number=number)
                else:
                    producer.commit_transaction(60)
                    history.add("txn-committed", producer=producer_id, number=number)
            except KafkaException as exc:
                error = exc.args[0]
                history.add("txn-unknown", producer=producer_id, number=number, error=str(error))
                if error.txn_requires_abort():
                    try:
                        assert producer is not None
                        producer.abort_transaction(60)
                        history.add("txn-aborted", producer=producer_id, number=number)
                    except KafkaException:
                        producer = None
                else:
                    producer = None  # fatal or retriable beyond the deadline: a new producer
                    time.sleep(0.5)
            number += 1
            time.sleep(0.02)

    def _read_committed(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "txn-reader",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             **QUIET})
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stopping.is_set():
                for m in consumer.consume(100, timeout=0.5):
                    if m.error() is None:
                        self.history.add("txn-read", partition=m.partition(), offset=m.offset(),
                                         value=(m.value() or b"").decode())
        finally:
            consumer.close()

    def _transform(self) -> None:
        """Consume-transform-produce, exactly once: each input record to the output topic in a
        transaction that commits the input offsets with it."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "txn-processor",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest", **QUIET})
        consumer.subscribe([self.topic])
        producer: Producer | None = None
        try:
            while not self.stopping.is_set():
                messages = [m for m in consumer.consume(50, timeout=0.5) if m.error() is None]
                if not messages:
                    continue
                try:
                    if producer is None:
                        producer = self._new_producer("chaos-processor")
                    producer.begin_transaction()
                    for m in messages:
                        producer.produce(self.output, b"out:" + (m.value() or b""),
                                         partition=m.partition())
                    if not self._send_offsets(producer, consumer):
                        producer = None  # left to its stuck call; a new one fences it
                        _rewind(consumer)
                        continue
                    producer.commit_transaction(60)
                    self.history.add("ctp-committed", count=len(messages))
                except KafkaException as exc:
                    self.history.add("ctp-failed", error=str(exc.args[0]))
                    error = exc.args[0]
                    if producer is not None and error.txn_requires_abort():
                        try:
                            producer.abort_transaction(60)
                        except KafkaException:
                            producer = None
                    else:
                        producer = None
                    _rewind(consumer)
        finally:
            consumer.close()


    def _send_offsets(self, producer: Producer, consumer: Consumer) -> bool:
        """``send_offsets_to_transaction``, unless librdkafka hangs in it: False then.

        librdkafka (2.16) can block there far past its timeout when the group's coordinator
        was decommissioned (it left a Metadata response while its ZooKeeper session was gone,
        as it leaves Kafka's): confluentinc/librdkafka#5511 and #5456, open. The call runs
        in a thread of its own; past the timeout the processor gives that producer up (its
        transaction is aborted when a new producer with the same transactional id fences
        it) and the hang is counted as the client's, not the broker's."""
        offsets = consumer.position(consumer.assignment())
        metadata = consumer.consumer_group_metadata()
        outcome: list[BaseException | None] = []

        def send() -> None:
            try:
                producer.send_offsets_to_transaction(offsets, metadata, 60)
                outcome.append(None)
            except BaseException as exc:  # handed to the processor's thread
                outcome.append(exc)

        thread = threading.Thread(target=send, name="txn-processor-send-offsets", daemon=True)
        thread.start()
        thread.join(SEND_OFFSETS_HANG_S)
        if not outcome:
            self.history.add("ctp-client-hang", seconds=SEND_OFFSETS_HANG_S,
                             known="confluentinc/librdkafka#5511")
            self._abandoned.append(producer)  # never destroyed while its call is stuck
            return False
        if outcome[0] is not None:
            raise outcome[0]
        return True


def _rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets: the failed transaction's input is read again."""
    assignment = consumer.assignment()
    if not assignment:
        return
    try:
        committed = consumer.committed(assignment, timeout=10)
    except KafkaException:
        return
    for tp in committed:
        try:
            consumer.seek(TopicPartition(tp.topic, tp.partition,
                                         tp.offset if tp.offset >= 0 else 0))
        except KafkaException:  # not fetching yet: it starts from the committed offset anyway
            pass
