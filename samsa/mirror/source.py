"""One flow's copy loop (MirrorSourceConnector + MirrorSourceTask): source topics into their
remote topics in the target, partition p into partition p, keys, values, headers and timestamps
kept; offset syncs emitted; progress stored in the target (see ``offset_store``).

Workers with the same config share the flow's partitions through the consumer group
``mm2-<source>-><target>`` on the source; the group's offsets are never committed (the
progress lives in the target), it only assigns partitions.

At-least-once (default): a partition's progress is written once its records are acknowledged
by the target, every ``offset.flush.interval.ms``, at a rebalance and at a clean stop.

``exactly.once.support = enabled``: the records of one poll and their progress are one
transaction of a transactional producer on the target (Connect's ``transaction.boundary=poll``);
a restarted worker with the same transactional.id fences and aborts what a killed one left
open, and resumes from the last committed progress, so read_committed consumers of the target
see every record once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from samsa.mirror import clients
from samsa.mirror.config import MirrorMakerConfig, SourceAndTarget
from samsa.mirror.metrics import FlowMetrics
from samsa.mirror.offset_store import offsets_topic, produce_offsets, read_offsets
from samsa.mirror.offset_syncs import PartitionState
from samsa.mirror.task import MirrorTask
from samsa.mirror.topics import (
    TopicFilter,
    capped_replication,
    ensure_internal_topic,
    ensure_topics,
    partition_counts,
    source_topic_configs,
    sync_topic_configs,
)
from samsa.tools.mirror_client import OffsetSync

log = logging.getLogger(__name__)

POLL_BATCH = 2000
# the offset syncs producer's queue is bounded as Kafka's (MAX_OUTSTANDING_OFFSET_SYNCS)
MAX_PENDING_SYNCS = 10_000


def worker_group(flow: SourceAndTarget) -> str:
    return f"mm2-{flow}"


class SourceFlow(MirrorTask):
    def __init__(self, config: MirrorMakerConfig, flow: SourceAndTarget, stop: threading.Event,
                 worker_id: str | None = None, task: int = 0) -> None:
        self.config, self.flow, self.stop = config, flow, stop
        self.worker_id, self.task = worker_id, task
        self.filter = TopicFilter.of(config, flow)
        self.eos = config.exactly_once(flow)
        self.metrics = FlowMetrics(str(flow))
        self.ready = threading.Event()  # set once the consumer is subscribed
        self.max_offset_lag = config.get_int(flow, "offset.lag.max")
        self.emit_syncs = config.get_bool(flow, "emit.offset-syncs.enabled")
        self.poll_timeout_s = config.get_int(flow, "consumer.poll.timeout.ms") / 1000
        self.flush_interval_s = config.get_int(flow, "offset.flush.interval.ms") / 1000
        self.refresh_s = config.get_int(flow, "refresh.topics.interval.seconds")
        self.refresh = config.get_bool(flow, "refresh.topics.enabled")
        self.sync_configs = config.get_bool(flow, "sync.topic.configs.enabled")
        self.sync_configs_s = config.get_int(flow, "sync.topic.configs.interval.seconds")
        self.config_exclude = config.get_pattern(flow, "config.properties.exclude")
        interval = config.transaction_interval_ms(flow)
        self.txn_interval_s = None if interval is None else interval / 1000
        self._txn_started = 0.0
        # per source (topic, partition): the reported records produced and not yet reported:
        # (upstream offset, timestamp, consumed at, contiguous, records, bytes they stand for)
        self._inflight: dict[tuple[str, int], deque[tuple[int, float, float, bool, int, int]]] = {}
        self._produced: dict[tuple[str, int], int] = {}  # last upstream offset produced
        self._acked: dict[tuple[str, int], int] = {}  # last upstream offset acknowledged
        self._stored: dict[tuple[str, int], int] = {}  # last upstream offset written as progress
        self._txn_offsets: dict[tuple[str, int], int] = {}  # EOS: last offset in this txn
        self._states: dict[tuple[str, int], PartitionState] = {}
        # syncs due now, in order (Kafka sends each as its record is acknowledged; here they
        # go out after the producer's poll, or after the transaction under EOS)
        self._pending_syncs: list[OffsetSync] = []
        self._delayed_syncs: dict[tuple[str, int], OffsetSync] = {}
        self._remote: dict[str, str] = {}  # source topic -> remote topic
        self._upstream: dict[str, str] = {}  # remote topic -> source topic
        self._target_partitions: dict[str, int] = {}
        self._topics: list[str] = []
        self._in_txn = False
        self.refreshes = 0  # topic refreshes done
        self._failure: KafkaError | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def _run(self) -> None:
        s, t, name = self.flow.source, self.flow.target, f"{self.flow}"
        self.source_admin = clients.admin(self.config, s, f"{name}-source-admin")
        self.target_admin = clients.admin(self.config, t, f"{name}-target-admin")
        self.target_consumer_config = clients.config_for(self.config, t, "consumer",
                                                         f"{name}-offsets-reader")
        rf = self.config.get_int(self.flow, "replication.factor")
        self.replication_factor = capped_replication(self.target_admin, rf)
        offsets_rf = self.config.get_int(self.flow, "offset.storage.replication.factor")
        ensure_internal_topic(self.target_admin, offsets_topic(s), offsets_rf)
        syncs_alias = self.config.offset_syncs_cluster(self.flow)
        self.syncs_topic = self.filter.policy.offset_syncs_topic(t)
        if self.emit_syncs:
            syncs_admin = self.source_admin if syncs_alias == s else self.target_admin
            syncs_rf = self.config.get_int(self.flow, "offset-syncs.topic.replication.factor")
            ensure_internal_topic(syncs_admin, self.syncs_topic, syncs_rf)
            self.sync_producer = clients.producer(
                self.config, syncs_alias, f"{name}-offset-syncs",
                {"queue.buffering.max.messages": MAX_PENDING_SYNCS})
        extra: dict[str, Any] = {}
        if self.eos:
            extra = {"transactional.id": self._member_id(),
                     "transaction.timeout.ms": 60_000}
        self.producer = clients.producer(self.config, t, f"{name}-producer", extra)
        if self.eos:
            self.producer.init_transactions(60)
        metadata_refresh = max(1000, min(self.refresh_s * 1000, 300_000))
        group: dict[str, Any] = {
            "group.id": worker_group(self.flow),
            # Connect's workers' session timeout: a killed worker's partitions move on in 10 s
            "session.timeout.ms": 10_000,
        }
        if self.worker_id is not None or self.eos:
            # a restarted worker takes its partitions back at once (static membership); two
            # live workers with one id fence each other (FENCED_INSTANCE_ID), as under EOS
            # their transactional.ids would
            group["group.instance.id"] = self._member_id()
        self.consumer = clients.consumer(self.config, s, f"{name}-consumer", {
            **group,
            "isolation.level": "read_committed",
            "topic.metadata.refresh.interval.ms": metadata_refresh,
        })
        try:
            self._sync_topics(configs=self.sync_configs)
            self._subscribe()
            self.ready.set()
            self._loop()
            self._commit(final=True)
        finally:
            self._close()

    def _member_id(self) -> str:
        """The transactional.id and group.instance.id of this worker's task."""
        name = f"mm2-{self.flow}-{self.worker_id or '0'}"
        return f"{name}-{self.task}" if self.task else name

    def _close(self) -> None:
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError):
            pass
        if self.eos and self._in_txn:
            try:
                self.producer.abort_transaction(10)
            except KafkaException:
                pass
        self.producer.flush(10)
        if self.emit_syncs:
            self.sync_producer.flush(10)

    # -- topics ----------------------------------------------------------------------------------

    def _sync_topics(self, configs: bool) -> None:
        """Create and grow the remote topics of the selected source topics; copy configs."""
        source = partition_counts(self.source_admin)
        selected = sorted(t for t in source if self.filter.should_replicate(t))
        for topic in selected:
            remote = self.filter.remote_topic(topic)
            self._remote[topic], self._upstream[remote] = remote, topic
        topic_configs = (source_topic_configs(self.source_admin, selected, self.config_exclude)
                         if configs else {})
        remote_configs = {self._remote[t]: c for t, c in topic_configs.items()}
        ensure_topics(self.target_admin, {self._remote[t]: source[t] for t in selected},
                      self.replication_factor, remote_configs)
        if configs:
            sync_topic_configs(self.target_admin, {t: c for t, c in remote_configs.items() if c})
        self._target_partitions = partition_counts(self.target_admin,
                                                   [self._remote[t] for t in selected])
        self._topics = selected
        self.refreshes += 1

    def _subscribe(self) -> None:
        if self._topics:
            self.consumer.subscribe(self._topics, on_assign=self._on_assign,
                                    on_revoke=self._on_revoke)
        else:
            self.consumer.unsubscribe()
        self._subscribed = list(self._topics)

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        stored = read_offsets(self.target_consumer_config, self.flow.source)
        for tp in partitions:
            offset = stored.get((tp.topic, tp.partition))
            tp.offset = OFFSET_BEGINNING if offset is None else offset + 1
            if offset is not None:
                self._stored[(tp.topic, tp.partition)] = offset
        consumer.assign(partitions)
        self.metrics.partitions = len(consumer.assignment())
        log.info("%s: assigned %s", self.flow, [(p.topic, p.partition, p.offset)
                                               for p in partitions])

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._commit(final=True)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            for d in (self._acked, self._stored, self._states, self._inflight, self._produced):
                d.pop(key, None)
        consumer.unassign()
        self.metrics.partitions = 0

    # -- copying ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        last_flush = last_refresh = last_configs = last_lag = time.monotonic()
        while not self.stop.is_set():
            # short waits while reports are due: they are served by the producer's poll
            waiting = any(self._inflight.values())
            msgs = self.consumer.consume(
                POLL_BATCH, timeout=0.005 if waiting else min(self.poll_timeout_s, 0.5))
            if msgs:
                self._copy(msgs)
            self.producer.poll(0)
            self._check_failure()
            now = time.monotonic()
            if self.eos:
                if self._in_txn and (self.txn_interval_s is None
                                     or now - self._txn_started >= self.txn_interval_s):
                    self._commit()
            else:
                self._fire_syncs()
                if now - last_flush >= self.flush_interval_s:
                    self._commit()
                    last_flush = now
            if self.refresh and now - last_refresh >= self.refresh_s:
                configs = self.sync_configs and now - last_configs >= self.sync_configs_s
                self._sync_topics(configs)
                if configs:
                    last_configs = now
                if self._topics != self._subscribed:
                    self._commit(final=True)
                    self._subscribe()
                last_refresh = now
            if now - last_lag >= 1.0:
                self._measure_lag()
                last_lag = now

    def _copy(self, msgs: list[Any]) -> None:
        """Produce a poll's records. Only some carry a delivery report (a Python call per
        record would halve the throughput): the last of each partition in the poll, the first
        after a gap in the upstream offsets, and one every offset.lag.max offsets. Reports of a
        partition come in order (idempotent producer), so a report also acknowledges the
        records produced before it. (Records are typed Any: Message's getters are Optional
        for error events only, and a record has them all.)"""
        records: list[Any] = []
        last: dict[tuple[str, int], int] = {}  # the index of each partition's last record
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("%s: consumer error: %s", self.flow, err)
                continue
            last[(msg.topic(), msg.partition())] = len(records)
            records.append(msg)
        if not records:
            return
        # per partition, not per record: its remote topic, which the target must have
        for topic, partition in last:
            remote = self._remote.get(topic)
            if remote is None:
                remote = self.filter.remote_topic(topic)
                self._remote[topic], self._upstream[remote] = remote, topic
            if partition >= self._target_partitions.get(remote, 0):
                self._grow(remote, partition)
        if self.eos and not self._in_txn:
            self.producer.begin_transaction()
            self._in_txn = True
            self._txn_started = time.monotonic()
        produce = self.producer.produce
        delivered = self._delivered
        lag_max = self.max_offset_lag
        remotes = self._remote
        # per partition: the records and bytes since its last reported record in this poll
        # (the last record of a partition in a poll is always reported)
        unreported: dict[tuple[str, int], tuple[int, int]] = {}
        now = time.time()
        for i, msg in enumerate(records):
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            key = (topic, partition)
            remote = remotes[topic]
            value, mkey = msg.value(), msg.key()
            ts_type, ts = msg.timestamp()
            timestamp = ts if ts_type else 0  # none: the target's producer stamps it
            previous = self._produced.get(key)
            contiguous = previous is not None and offset == previous + 1
            self._produced[key] = offset
            count, size = unreported.get(key, (0, 0))
            count += 1
            size += (len(value) if value else 0) + (len(mkey) if mkey else 0)
            report = i == last[key] or not contiguous or offset % lag_max == 0
            if report:
                unreported[key] = (0, 0)
                queue = self._inflight.get(key)
                if queue is None:
                    queue = self._inflight[key] = deque()
                queue.append((offset, ts if ts_type else now * 1000, now, contiguous, count,
                              size))
            else:
                unreported[key] = (count, size)
            while True:
                try:
                    if report:
                        produce(remote, value, mkey, partition=partition, timestamp=timestamp,
                                headers=msg.headers(), on_delivery=delivered)
                    else:
                        produce(remote, value, mkey, partition=partition, timestamp=timestamp,
                                headers=msg.headers())
                    break
                except BufferError:
                    self.producer.poll(0.05)
        if self.eos:
            for key, i in last.items():
                self._txn_offsets[key] = records[i].offset()

    def _grow(self, remote: str, partition: int) -> None:
        """A record of a partition the remote topic lacks: sync the topic now, and wait for the
        producer to see the new partition."""
        self._sync_topics(configs=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            md = self.producer.list_topics(remote, timeout=10)
            if partition < len(md.topics[remote].partitions):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{remote} in {self.flow.target} has no partition {partition}")

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        key = (self._upstream[msg.topic()], msg.partition())
        queue = self._inflight.get(key)
        if not queue:  # a report outliving its partition's revocation (a flush timed out)
            if err is not None:
                self._failure = err
            return
        upstream, ts, consumed, contiguous, count, size = queue.popleft()
        if err is not None:
            self._failure = err
            return
        self._acked[key] = upstream
        now = time.time()
        self.metrics.copied(count, size, now * 1000 - ts, (now - consumed) * 1000)
        if not self.emit_syncs:
            return
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = PartitionState(self.max_offset_lag)
        downstream = msg.offset()
        # the state sees the reported records only: "contiguous" says whether the record
        # followed its upstream predecessor, reported or not
        if state.update(upstream, downstream, contiguous):
            self._delayed_syncs.pop(key, None)
            self._pending_syncs.append(OffsetSync(key[0], key[1], upstream, downstream))
        else:
            self._delayed_syncs[key] = OffsetSync(key[0], key[1], upstream, downstream)

    def _check_failure(self) -> None:
        if self._failure is not None:
            raise KafkaException(self._failure)

    def _fire_syncs(self) -> None:
        if not self.emit_syncs or not self._pending_syncs:
            return
        for sync in self._pending_syncs:
            try:
                self.sync_producer.produce(self.syncs_topic, sync.record_value(),
                                           sync.record_key(), partition=0)
            except BufferError:
                break  # Kafka also drops syncs rather than block the copy; later ones follow
        self._pending_syncs.clear()
        self.sync_producer.poll(0)

    def _commit(self, final: bool = False) -> None:
        """Store the progress of the records the target has (ALO), or commit the open
        transaction with its progress (EOS); then send the offset syncs."""
        if self.eos:
            if self._in_txn:
                produce_offsets(self.producer, self.flow.source, self._txn_offsets)
                self.producer.commit_transaction(60)
                self._in_txn = False
                self._txn_offsets.clear()
                self._check_failure()
        else:
            self.producer.flush(60 if final else 30)
            self._check_failure()
            changed = {k: v for k, v in self._acked.items() if self._stored.get(k) != v}
            if changed:
                produce_offsets(self.producer, self.flow.source, changed)
                self.producer.flush(60)
                self._stored.update(changed)
        self._pending_syncs += self._delayed_syncs.values()
        self._delayed_syncs.clear()
        self._fire_syncs()

    def _measure_lag(self) -> None:
        try:
            assignment = self.consumer.assignment()
            positions = self.consumer.position(assignment) if assignment else []
        except KafkaException:
            return
        lag = 0
        for tp in positions:
            low, high = self.consumer.get_watermark_offsets(tp, cached=True)
            if high is None or high < 0:
                continue
            position = tp.offset
            if position < 0:  # nothing fetched yet: from what was stored, or the log start
                stored = self._stored.get((tp.topic, tp.partition))
                position = stored + 1 if stored is not None else max(low or 0, 0)
            lag += max(0, high - position)
        self.metrics.lag = lag
        self.metrics.partitions = len(assignment)
