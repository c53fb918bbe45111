"""``SamsaStreamReader``: the streaming read path (``spark.readStream.format("samsa")``).

Offsets are Spark's Kafka checkpoint form, ``{"topic": {"partition": offset}}`` (partition keys
are strings, so the dict survives JSON). The driver resolves them with confluent-kafka; each
micro-batch is a set of fixed ``(topic, partition, start, end)`` ranges read by the batch path's
task reader (:func:`samsa.spark.source.read_range`), which yields Arrow record batches.

* ``startingOffsets``: ``latest`` (the default for streams, as Spark), ``earliest`` or JSON
  naming every topic-partition (-2 earliest, -1 latest); ``startingTimestamp`` and
  ``startingOffsetsByTimestamp`` take precedence, as in Spark. They only matter for a new query:
  a restarted one resumes from its checkpoint.
* Partitions and topics that appear later (``subscribePattern``, ``create_partitions``) are read
  from their earliest offset.
* ``maxOffsetsPerTrigger`` goes through the admission-control API (``getDefaultReadLimit`` /
  ``latestOffset(start, limit)`` with ``ReadMaxRows``); ``Trigger.AvailableNow`` is supported
  (``prepareForTriggerAvailableNow`` fixes the target offsets) and still honours the limit.
* ``failOnDataLoss`` (default true): a checkpointed position below the log start offset, a
  partition that went away, an offset that went backwards, or a new partition that does not
  start at 0 fails the query; with ``false`` the reader moves on (log start offset) instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from samsa.spark.source import (
    _STRATEGIES,
    DRIVER_TIMEOUT_S,
    EARLIEST,
    LATEST,
    OffsetRange,
    RangeReader,
    SamsaSourceError,
    _by_timestamp,
    _driver_consumer,
    _int_option,
    _parse_partition_map,
    _timestamps,
    _topic_partitions,
    split_ranges,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

TP = tuple[str, int]
#: Spark's checkpoint form: {"topic": {"partition": offset}}
Offsets = dict[str, dict[str, int]]

# batch-only options that Spark's Kafka source rejects for streaming queries
_BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")


def to_offsets(positions: Mapping[TP, int]) -> Offsets:
    """``{(topic, 0): 5}`` -> ``{"topic": {"0": 5}}`` (sorted, JSON-ready)."""
    out: Offsets = {}
    for (topic, part), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(part)] = int(offset)
    return out


def from_offsets(offsets: Mapping[str, Mapping[str, int]] | None) -> dict[TP, int]:
    """The inverse of :func:`to_offsets`; tolerates a missing (``None``) offset."""
    out: dict[TP, int] = {}
    for topic, parts in (offsets or {}).items():
        for part, offset in parts.items():
            out[(topic, int(part))] = int(offset)
    return out


def cap_rows(start: Mapping[TP, int], latest: Mapping[TP, int], max_rows: int) -> dict[TP, int]:
    """End offsets at most ``max_rows`` offsets past ``start`` in total.

    As Spark's ``KafkaMicroBatchStream.rateLimit``, the limit is shared in proportion to what
    each partition has waiting; unlike it, the shares are rounded down and the remainder handed
    out one by one (largest backlog first), so the total never exceeds the limit and a batch
    always makes progress when anything is waiting.
    """
    sizes = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: size * max_rows // total for tp, size in sizes.items()}
    left = max_rows - sum(shares.values())
    for tp in sorted(sizes, key=lambda k: (shares[k] - sizes[k], k)):
        if left <= 0:
            break
        if shares[tp] < sizes[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: start[tp] + shares[tp] for tp in latest}


class SamsaStreamReader(RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: offsets and ranges; ``read`` runs in the tasks. Picklable (no clients kept)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        for name in _BATCH_ONLY:
            if name.lower() in opts:
                raise SamsaSourceError(f"option '{name}' is not allowed in streaming queries")
        self.opts = opts
        self.schema = schema
        self._task_options(opts)
        self.min_partitions = _int_option(opts, "minPartitions")
        if self.min_partitions is not None and self.min_partitions <= 0:
            raise SamsaSourceError(
                f"option 'minPartitions' must be positive, got {self.min_partitions}"
            )
        self.max_offsets = _int_option(opts, "maxOffsetsPerTrigger")
        if self.max_offsets is not None and self.max_offsets <= 0:
            raise SamsaSourceError(
                f"option 'maxOffsetsPerTrigger' must be positive, got {self.max_offsets}"
            )
        self.start_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
        if self.start_strategy not in _STRATEGIES:
            raise SamsaSourceError(
                "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                f"got {self.start_strategy!r}"
            )
        #: set by prepareForTriggerAvailableNow: nothing past these offsets is read
        self.available_now_target: dict[TP, int] | None = None

    # --- driver helpers --------------------------------------------------------------------------

    def _snapshot(self) -> tuple[list[TP], dict[TP, tuple[int, int]], Any]:
        """Current topic-partitions and their (low, high) watermarks; returns the open consumer
        (the caller closes it)."""
        from confluent_kafka import TopicPartition

        consumer = _driver_consumer(self.kafka_params)
        try:
            metadata = consumer.list_topics(timeout=DRIVER_TIMEOUT_S)
            tps = _topic_partitions(self.opts, metadata)
            watermarks: dict[TP, tuple[int, int]] = {}
            for t, p in tps:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(t, p), timeout=DRIVER_TIMEOUT_S, cached=False
                )
                watermarks[(t, p)] = (low, high)
        except BaseException:
            consumer.close()
            raise
        return tps, watermarks, consumer

    def _data_loss(self, message: str) -> None:
        if self.fail_on_data_loss:
            raise SamsaSourceError(
                f"{message}. Some data may have been lost; set failOnDataLoss=false to go on "
                "from the earliest available offset instead."
            )

    # --- DataSourceStreamReader -------------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps, watermarks, consumer = self._snapshot()
        try:
            starting = _timestamps(
                self.opts, "startingTimestamp", "startingOffsetsByTimestamp", tps
            )
            if starting is not None:
                found = _by_timestamp(
                    consumer, starting[0], starting[1], watermarks, self.start_strategy
                )
                return to_offsets(found)
        finally:
            consumer.close()
        raw = self.opts.get("startingoffsets", "latest").strip()
        if raw.lower() in ("earliest", "latest"):
            index = 0 if raw.lower() == "earliest" else 1
            return to_offsets({tp: watermarks[tp][index] for tp in tps})
        wanted = _parse_partition_map("startingOffsets", raw)
        if set(wanted) != set(tps):
            missing = sorted(set(tps) - set(wanted))
            extra = sorted(set(wanted) - set(tps))
            raise SamsaSourceError(
                "option 'startingOffsets' with specific offsets must name exactly the read "
                "topic-partitions"
                + (f"; missing {', '.join(f'{t}-{p}' for t, p in missing)}" if missing else "")
                + (f"; not read {', '.join(f'{t}-{p}' for t, p in extra)}" if extra else "")
            )
        out: dict[TP, int] = {}
        for (t, p), off in wanted.items():
            low, high = watermarks[(t, p)]
            if off < EARLIEST:
                raise SamsaSourceError(
                    f"option 'startingOffsets' for {t}-{p}: invalid offset {off}"
                )
            out[(t, p)] = {EARLIEST: low, LATEST: high}.get(off, off)
        return to_offsets(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_offsets is not None:
            return ReadMaxRows(self.max_offsets)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps, watermarks, consumer = self._snapshot()
        consumer.close()
        self.available_now_target = {tp: watermarks[tp][1] for tp in tps}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_offsets(start)
        tps, watermarks, consumer = self._snapshot()
        consumer.close()
        target = self.available_now_target
        latest: dict[TP, int] = {}
        starts: dict[TP, int] = {}
        for tp in tps:
            low, high = watermarks[tp]
            if target is not None:
                if tp not in target:
                    continue  # appeared after the available-now target was fixed
                high = min(high, target[tp])
            s = begin.get(tp, low)  # a new partition: from its earliest offset
            if s > high:
                # the offset went backwards (topic recreated?): nothing to read here for now;
                # partitions() reports it
                s = high if not self.fail_on_data_loss else s
            starts[tp] = s
            latest[tp] = max(s, high)
        if isinstance(limit, ReadMaxRows):
            latest = cap_rows(starts, latest, limit.max_rows)
        # partitions that went away keep their last position (reported by partitions())
        for tp, off in begin.items():
            latest.setdefault(tp, off)
        return to_offsets(latest)

    def reportLatestOffset(self) -> dict | None:
        tps, watermarks, consumer = self._snapshot()
        consumer.close()
        return to_offsets({tp: watermarks[tp][1] for tp in tps})

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_offsets(start)
        until = from_offsets(end)
        if begin == until:
            return []
        tps, watermarks, consumer = self._snapshot()
        consumer.close()
        ranges: list[OffsetRange] = []
        for tp, stop in sorted(until.items()):
            t, p = tp
            if tp not in watermarks:
                if stop > begin.get(tp, stop):
                    self._data_loss(f"{t}-{p} is gone (topic or partition deleted)")
                continue
            low, high = watermarks[tp]
            if tp in begin:
                s = begin[tp]
            else:
                s = low
                if low != 0:
                    self._data_loss(f"added partition {t}-{p} starts from {low} instead of 0")
            if s < low:
                self._data_loss(
                    f"{t}-{p}: the offset to read from, {s}, is below the log start offset "
                    f"{low} (records were deleted)"
                )
                s = low
            if stop < s:
                self._data_loss(
                    f"{t}-{p}: the end offset {stop} is below the start offset {s} (the offset "
                    "went backwards: was the topic recreated?)"
                )
                continue
            if s > high:
                self._data_loss(
                    f"{t}-{p}: the offset to read from, {s}, is past the log end offset {high}"
                )
                continue
            ranges.append(OffsetRange(t, p, s, stop))
        gone = sorted(tp for tp in begin if tp not in until)
        if gone:
            self._data_loss("partitions no longer read: " + ", ".join(f"{t}-{p}" for t, p in gone))
        return split_ranges(ranges, self.min_partitions)


    def commit(self, end: dict) -> None:
        """Nothing to do: as Spark's Kafka source, positions live in Spark's checkpoint only."""
