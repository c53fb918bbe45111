"""A task's offset range read with Fetch and decoded in bulk: the data source's fast path.

The task fetches its topic-partition's record batches as bytes (``task_client``), keeps the
batches a consumer returns (``fetched``: no control batches, no aborted transactions under
read_committed) and turns them into Arrow columns in bulk (``arrow_records``), about
``batch_rows`` records at a time so that the JVM takes in one group while the next is decoded.
The next Fetch is sent before the previous answer is decoded, so the broker reads while the
task decodes. The semantics are those of the librdkafka reader in ``source.py``, which serves the
Kafka settings this path does not know (TLS, SASL, any other librdkafka option) and brokers
without Fetch v12, Metadata v12 or ListOffsets v7: :func:`fetch_settings` says which one a
read takes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.errors import CorruptRecordError, ErrorCode, kafka_name
from samsa.records.batch import BatchHeader
from samsa.spark.arrow_records import decode_batches, record_batch
from samsa.spark.fetched import visible_batches
from samsa.spark.task_client import ClientError, PartitionClient, parse_bootstrap

if TYPE_CHECKING:
    import pyarrow as pa

    from samsa.spark.source import OffsetRange

#: librdkafka's fetch.wait.max.ms
DEFAULT_MAX_WAIT_MS = 500
#: librdkafka's fetch.max.bytes
DEFAULT_MAX_BYTES = 52_428_800
#: larger than librdkafka's max.partition.fetch.bytes (1 MiB): fewer, larger answers to decode
DEFAULT_PARTITION_MAX_BYTES = 8 * 1024 * 1024
#: librdkafka's socket.timeout.ms
DEFAULT_TIMEOUT_MS = 60_000
#: the largest a fetch grows to for a batch larger than the partition's limit
MAX_PARTITION_BYTES = 1 << 30
#: a pause before asking again after an error the broker says is retriable
RETRY_BACKOFF_S = 0.1

_ISOLATION = {"read_committed": True, "read_uncommitted": False}
#: the kafka.* settings (librdkafka's names) this path honours or that do not concern it; any
#: other sends the read through librdkafka
_KNOWN = frozenset({
    "bootstrap.servers", "security.protocol", "isolation.level", "client.id", "group.id",
    "log_level", "fetch.wait.max.ms", "fetch.max.bytes", "max.partition.fetch.bytes",
    "socket.timeout.ms",
})


class DataLoss(Exception):
    """Offsets of the range are gone from the log (failOnDataLoss=true)."""


class ReadFailed(Exception):
    """The range could not be read: an error the broker will not get over, or no progress
    within the poll timeout."""


@dataclass(frozen=True)
class FetchSettings:
    bootstrap: list[tuple[str, int]]
    client_id: str
    read_committed: bool
    max_wait_ms: int
    max_bytes: int
    partition_max_bytes: int
    timeout_s: float


def fetch_settings(params: Mapping[str, str]) -> FetchSettings | None:
    """The settings of the fast path for these client settings (``kafka.*`` without the
    prefix, over the source's defaults), or None when the read must go through librdkafka."""
    if set(params) - _KNOWN:
        return None
    if params.get("security.protocol", "plaintext").lower() != "plaintext":
        return None
    read_committed = _ISOLATION.get(params.get("isolation.level", "read_uncommitted").lower())
    if read_committed is None:
        return None
    try:
        bootstrap = parse_bootstrap(params["bootstrap.servers"])
        numbers = {name: int(params[name]) for name in (
            "fetch.wait.max.ms", "fetch.max.bytes", "max.partition.fetch.bytes",
            "socket.timeout.ms") if name in params}
    except (ClientError, ValueError):
        return None  # librdkafka reports its own configuration errors
    return FetchSettings(
        bootstrap=bootstrap,
        client_id=params.get("client.id", f"samsa-spark-task-{uuid.uuid4()}"),
        read_committed=read_committed,
        max_wait_ms=numbers.get("fetch.wait.max.ms", DEFAULT_MAX_WAIT_MS),
        max_bytes=numbers.get("fetch.max.bytes", DEFAULT_MAX_BYTES),
        partition_max_bytes=numbers.get("max.partition.fetch.bytes",
                                        DEFAULT_PARTITION_MAX_BYTES),
        timeout_s=numbers.get("socket.timeout.ms", DEFAULT_TIMEOUT_MS) / 1000,
    )


def read_range_fetch(
    rng: OffsetRange,
    settings: FetchSettings,
    schema: pa.Schema,
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """Records ``[rng.start, rng.end)`` as Arrow record batches of ``schema``, as
    ``source.read_range`` documents. Raises :class:`DataLoss` or :class:`ReadFailed`;
    ``task_client.NotSupported`` before anything is read when the broker is too old."""
    import numpy as np

    where = f"{rng.topic}-{rng.partition}"
    client = PartitionClient(
        settings.bootstrap, rng.topic, rng.partition, client_id=settings.client_id,
        read_committed=settings.read_committed, timeout_s=settings.timeout_s,
        max_wait_ms=settings.max_wait_ms, max_bytes=settings.max_bytes,
        partition_max_bytes=settings.partition_max_bytes,
    )
    position = rng.start  # the offset the next record returned may have
    fetch_at = rng.start  # where the next fetch starts: past the markers and aborted batches
    max_bytes = settings.partition_max_bytes
    last_progress = time.monotonic()
    problem = ""

    def stalled() -> bool:
        return (time.monotonic() - last_progress) * 1000 >= poll_timeout_ms

    try:
        while position < rng.end and fetch_at < rng.end:
            if stalled():
                if fail_on_data_loss:
                    raise ReadFailed(
                        f"timed out reading {where}: no record after offset {position - 1} "
                        f"within {poll_timeout_ms} ms (range [{rng.start}, {rng.end})"
                        + (f"; {problem}" if problem else "")
                        + "); set kafka.poll.timeout or failOnDataLoss=false")
                return
            try:
                if not client.fetching:
                    client.send_fetch(fetch_at, max_bytes)
                answer = client.receive_fetch()
            except ClientError as exc:
                problem = str(exc)
                client.forget_leader()
                time.sleep(RETRY_BACKOFF_S)
                continue
            if answer.error == ErrorCode.offset_out_of_range:
                if fail_on_data_loss:
                    raise DataLoss(
                        f"data loss in {where}: offset {fetch_at} is no longer available "
                        f"(requested range [{rng.start}, {rng.end})): "
                        f"{kafka_name(answer.error)}. Set failOnDataLoss=false to skip deleted "
                        "records.")
                try:  # as librdkafka's auto.offset.reset=earliest: on from the log start
                    earliest, latest = client.list_offset(-2), client.list_offset(-1)
                except ClientError as exc:
                    problem = str(exc)
                    client.forget_leader()
                    time.sleep(RETRY_BACKOFF_S)
                    continue
                if earliest > fetch_at:
                    fetch_at = position = earliest
                    last_progress = time.monotonic()
                    continue
                if latest <= fetch_at:
                    return  # past the log's end (it was truncated)
                problem = kafka_name(answer.error)
                time.sleep(RETRY_BACKOFF_S)
                continue
            if answer.error != ErrorCode.none:
                if not answer.error.retriable:
                    raise ReadFailed(f"reading {where} failed at offset {fetch_at}: "
                                     f"{kafka_name(answer.error)}")
                problem = kafka_name(answer.error)
                client.forget_leader()
                time.sleep(RETRY_BACKOFF_S)
                continue

            try:
                visible = visible_batches(answer.records, read_committed=settings.read_committed,
                                          aborted=answer.aborted)
            except CorruptRecordError as exc:
                raise ReadFailed(f"reading {where} failed at offset {fetch_at}: {exc}") from None
            # as far as the log may be read now: the range may reach past it
            limit = answer.last_stable_offset if settings.read_committed else (
                answer.high_watermark)
            if visible.next_offset is None:
                if not answer.records and 0 <= limit <= fetch_at:
                    return  # the range reaches past the log's end
                if answer.records and max_bytes < MAX_PARTITION_BYTES:
                    max_bytes *= 2  # a batch larger than the limit, cut off: ask for more
                continue
            if visible.next_offset > fetch_at:
                fetch_at = visible.next_offset
                last_progress = time.monotonic()
            more = fetch_at < rng.end and not 0 <= limit <= fetch_at
            if more:
                client.send_fetch(fetch_at, max_bytes)  # fetched while this answer is decoded
            for group in _groups(visible.batches, batch_rows, position, rng.end):
                try:
                    columns = decode_batches(answer.records, group)
                except CorruptRecordError as exc:
                    raise ReadFailed(f"reading {where} failed after offset {position - 1}: "
                                     f"{exc}") from None
                lo = int(np.searchsorted(columns.offsets, position))
                hi = int(np.searchsorted(columns.offsets, rng.end))
                for start in range(lo, hi, batch_rows):
                    yield record_batch(columns, rng.topic, rng.partition, schema, start,
                                       min(hi, start + batch_rows))
                if hi > lo:
                    position = int(columns.offsets[hi - 1]) + 1
            if not more:
                return
    finally:
        client.close()


def _groups(batches: list[tuple[int, BatchHeader]], rows: int, start: int, end: int
            ) -> Iterator[list[tuple[int, BatchHeader]]]:
    """The batches holding offsets of ``[start, end)``, in groups of about ``rows`` records
    (a larger batch alone): decoded and handed to Spark a group at a time, the next group is
    decoded while the JVM takes in the previous one, rather than the JVM waiting for a whole
    answer's rows and then the task for the JVM."""
    group: list[tuple[int, BatchHeader]] = []
    size = 0
    for pos, header in batches:
        if header.last_offset < start or header.base_offset >= end:
            continue
        if group and size + header.records_count > rows:
            yield group
            group, size = [], 0
        group.append((pos, header))
        size += header.records_count
    if group:
        yield group
