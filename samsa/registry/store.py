"""The registry's store: the compacted ``_schemas`` topic (one partition), read from the
beginning by a background thread into a ``RegistryState``, and written by the primary.

A write returns once this instance has read it back (read-your-writes): the record's offset
from the delivery report, then a wait until the reader's position is past it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.registry.errors import OPERATION_TIMEOUT, STORE_ERROR, RegistryError
from samsa.registry.kafka_client import client_config
from samsa.registry.state import RegistryState

log = logging.getLogger(__name__)

# How long one consume() call of the reader blocks (its stop latency).
_POLL_S = 0.1
_REPLICATION_FACTOR = 3  # Confluent's kafkastore.topic.replication.factor (fewer brokers: fewer)


class KafkaStore:
    def __init__(self, bootstrap: str, topic: str, client_id: str,
                 client_extra: dict[str, Any] | None = None, timeout_s: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.timeout_s = timeout_s
        self.state = RegistryState()
        self.lock = threading.Lock()
        self._progress = threading.Condition(self.lock)
        self._position = 0  # the next offset to read
        self._reader_error: str | None = None
        self._stop = threading.Event()
        self._client_id = client_id
        self._extra = client_extra or {}
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._ends: Consumer | None = None

    def start(self) -> None:
        """Create the topic where it is missing, start the reader, return once it has read
        everything the topic held."""
        self._ensure_topic()
        self._consumer = Consumer(client_config(self.bootstrap, f"{self._client_id}-reader", {
            "group.id": f"schema-registry-reader-{uuid.uuid4()}",  # never joined nor committed
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 50,
            **self._extra,
        }))
        self._consumer.assign([KafkaTopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        # the end offset is asked by another client: a consumer busy in consume() on the
        # reader's thread does not answer get_watermark_offsets from another thread
        self._ends = Consumer(client_config(self.bootstrap, f"{self._client_id}-ends", {
            "group.id": f"schema-registry-ends-{uuid.uuid4()}", **self._extra}))
        self._producer = Producer(client_config(self.bootstrap, f"{self._client_id}-writer", {
            "acks": "all", "linger.ms": 0, "enable.idempotence": True,
            # a write not acknowledged in time fails for good (it must not land later, after
            # its request was answered with an error)
            "message.timeout.ms": int(self.timeout_s * 1000), **self._extra,
        }))
        self._thread = threading.Thread(target=self._read, name="schema-registry-store",
                                        daemon=True)
        self._thread.start()
        self.catch_up()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._ends is not None:
            self._ends.close()
            self._ends = None
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None

    def _ensure_topic(self) -> None:
        try:
            self._create_topic()
        except KafkaException as exc:
            raise RegistryError(STORE_ERROR, f"cannot reach the schemas topic {self.topic}: "
                                f"{exc.args[0].str()}") from exc

    def _create_topic(self) -> None:
        admin = AdminClient(client_config(self.bootstrap, f"{self._client_id}-admin",
                                          self._extra))
        metadata = admin.list_topics(timeout=self.timeout_s)
        existing = metadata.topics.get(self.topic)
        if existing is None or existing.error is not None:
            replicas = max(1, min(_REPLICATION_FACTOR, len(metadata.brokers)))
            new = NewTopic(self.topic, num_partitions=1, replication_factor=replicas,
                           config={"cleanup.policy": "compact"})
            future = admin.create_topics([new], request_timeout=self.timeout_s)[self.topic]
            try:
                future.result(self.timeout_s)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise RegistryError(STORE_ERROR, f"cannot create the schemas topic "
                                        f"{self.topic}: {exc.args[0].str()}") from exc
            metadata = admin.list_topics(self.topic, timeout=self.timeout_s)
            existing = metadata.topics.get(self.topic)
        if existing is not None and existing.error is None and len(existing.partitions) != 1:
            raise RegistryError(STORE_ERROR, f"the schemas topic {self.topic} has "
                                f"{len(existing.partitions)} partitions; it must have one")

    def _read(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set():
            try:
                # poll() returns at the first record (consume() would wait out its timeout
                # for a full batch); what else has arrived is taken without waiting
                first = consumer.poll(_POLL_S)
                messages = [] if first is None else [first, *consumer.consume(499, 0)]
            except KafkaException as exc:
                log.warning("reading %s: %s", self.topic, exc)
                continue
            if not messages:
                continue
            with self._progress:
                for message in messages:
                    error = message.error()
                    offset = message.offset()
                    if error is not None or offset is None:
                        if error is not None and error.code() != KafkaError._PARTITION_EOF:
                            log.warning("reading %s: %s", self.topic, error)
                        continue
                    try:
                        self.state.apply(message.key(), message.value())
                    except Exception:  # one bad record must not stop the registry
                        log.exception("cannot apply the record at offset %d of %s",
                                      offset, self.topic)
                    self._position = max(self._position, offset + 1)
                self._progress.notify_all()

    def _wait_for(self, offset: int, deadline: float) -> None:
        """Until the reader's position is past ``offset`` (the offset of the last write)."""
        with self._progress:
            while self._position <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RegistryError(OPERATION_TIMEOUT, f"timed out reading {self.topic} "
                                        f"up to offset {offset} (at {self._position})")
                self._progress.wait(left)

    def catch_up(self) -> None:
        """Return once everything written to the topic so far has been read."""
        assert self._ends is not None
        try:
            _, high = self._ends.get_watermark_offsets(
                KafkaTopicPartition(self.topic, 0), timeout=self.timeout_s, cached=False)
        except KafkaException as exc:
            raise RegistryError(STORE_ERROR, f"cannot read the end of {self.topic}: "
                                f"{exc.args[0].str()}") from exc
        if high > 0:
            self._wait_for(high - 1, time.monotonic() + self.timeout_s)

    def write(self, entries: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append records (key, value or None for a tombstone), return once read back."""
        producer = self._producer
        assert producer is not None
        offsets: list[int] = []
        failures: list[str] = []

        def delivered(err: KafkaError | None, message: Any) -> None:
            if err is not None:
                failures.append(err.str())
            else:
                offsets.append(message.offset())

        deadline = time.monotonic() + self.timeout_s
        for key, value in entries:
            producer.produce(self.topic, key=key, value=value, partition=0,
                             on_delivery=delivered)
        left = producer.flush(self.timeout_s + 5)  # message.timeout.ms reports first
        if failures or left:
            raise RegistryError(STORE_ERROR, f"cannot write to {self.topic}: "
                                f"{failures[0] if failures else 'delivery timed out'}")
        self._wait_for(max(offsets), deadline)
