"""``LogCleaner``: the broker's cleaner threads (``log.cleaner.threads``), as Kafka runs them.

Each thread, in a loop: pick the compacted log with the highest dirty ratio at or above its
``min.cleanable.dirty.ratio`` (or any whose oldest dirty message is older than
``max.compaction.lag.ms``, or whose kept tombstones have passed their delete horizon; not one
being moved to another log directory, ``LogManager.cleaning_paused``), clean it
(``cleaner.clean_log``), remember where the dirty part now starts in
``cleaner-offset-checkpoint`` (one per data directory, Kafka's format), and sleep
``log.cleaner.backoff.ms`` when no log needs cleaning. A log is cleaned by one thread at a time.
The threads read segments themselves; each segment swap runs through ``run_swap`` (the broker
passes one that runs it on its event loop, where appends, fetches and retention run).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from samsa.storage.checkpoint import read_offsets, write_offsets
from samsa.storage.cleaner import (
    LONG_MAX,
    Cleanable,
    CleanStats,
    OffsetMap,
    clean_log,
    cleanable,
)

if TYPE_CHECKING:
    from samsa.storage.log import Log
    from samsa.storage.manager import LogManager

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
TopicPartition = tuple[str, int]
SwapRunner = Callable[[Callable[[], bool]], bool]


@dataclass
class CleanerMetrics:
    """What the cleaner has done, for ``samsa.Broker.cleaner_metrics()`` and the logs."""

    runs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    last_run_ms: int | None = None
    last_run_seconds: float = 0.0
    dirty_ratio: dict[str, float] = field(default_factory=dict)  # "topic-partition" -> ratio
    errors: int = 0


class LogCleaner:
    def __init__(
        self,
        manager: LogManager,
        *,
        threads: int = 1,
        dedupe_buffer_size: int = 128 * 1024 * 1024,
        load_factor: float = 0.9,
        backoff_ms: int = 15000,
        run_swap: SwapRunner | None = None,
    ) -> None:
        self.manager = manager
        self.thread_count = threads
        per_thread = dedupe_buffer_size // max(threads, 1)
        self.map_buffer = per_thread
        self.load_factor = load_factor
        self.backoff_s = backoff_ms / 1000
        self.run_swap = run_swap
        self.metrics = CleanerMetrics()
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self._checkpoints: dict[TopicPartition, int] = {}
        # when a log's kept tombstones pass their delete horizon (known since its last cleaning)
        self._horizons: dict[TopicPartition, int] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        for directory in manager.live_dirs:  # an offline directory's logs are not cleaned
            try:
                self._checkpoints.update(
                    read_offsets(Path(directory) / CLEANER_CHECKPOINT_FILE))
            except OSError as exc:
                manager.failures.maybe_add_offline_log_dir(
                    directory, f"reading {CLEANER_CHECKPOINT_FILE}", exc)
        manager.move_listeners.append(self._moved)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        for i in range(self.thread_count):
            thread = threading.Thread(target=self._run, name=f"log-cleaner-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads (a cleaning in progress finishes its current segment group)."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()

    def reconfigure(self, *, threads: int, dedupe_buffer_size: int, load_factor: float,
                    backoff_ms: int) -> None:
        """New settings (dynamic broker configs): the threads stop (a cleaning in progress
        finishes its current segment group) and start again with them, as Kafka's
        LogCleaner.reconfigure does; what was cleaned is remembered. Blocks: call it off the
        event loop, which runs the swaps."""
        self.shutdown()
        self.thread_count = threads
        self.map_buffer = dedupe_buffer_size // max(threads, 1)
        self.load_factor = load_factor
        self.backoff_s = backoff_ms / 1000
        self._stop.clear()
        self._wake.clear()
        self.start()

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, topic config changes)."""
        self._wake.set()

    def _run(self) -> None:
        offset_map = OffsetMap.for_buffer(self.map_buffer, self.load_factor)
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest(offset_map)
            except Exception:  # a log deleted or closed under us; never kill the thread
                log.exception("log cleaner: cleaning failed")
                self.metrics.errors += 1
                cleaned = None
            if cleaned is None:
                self._wake.wait(self.backoff_s)
                self._wake.clear()

    # --- choosing and cleaning -----------------------------------------------------------------

    def checkpoint_of(self, tp: TopicPartition) -> int | None:
        return self._checkpoints.get(tp)

    def _grab_filthiest(self, now_ms: int) -> tuple[TopicPartition, Log, Cleanable] | None:
        best: tuple[TopicPartition, Log, Cleanable] | None = None
        with self._lock:
            for tp, log_ in list(self.manager.logs.items()):
                if (not log_.config.compact or tp in self._in_progress
                        or tp in self.manager.cleaning_paused):
                    continue
                state = cleanable(log_, self._checkpoints.get(tp), now_ms)
                self.metrics.dirty_ratio[f"{tp[0]}-{tp[1]}"] = state.dirty_ratio
                horizon_due = now_ms >= self._horizons.get(tp, LONG_MAX)
                if not horizon_due and (state.dirty_bytes == 0 or (
                    not state.max_lag_passed
                    and state.dirty_ratio < log_.config.min_cleanable_dirty_ratio
                )):
                    continue
                if best is None or state.dirty_ratio > best[2].dirty_ratio:
                    best = (tp, log_, state)
            if best is not None:
                self._in_progress.add(best[0])
        return best

    def clean_filthiest(self, offset_map: OffsetMap | None = None) -> CleanStats | None:
        """Clean the log that needs it most; None when none does."""
        now = self.manager.clock()
        grabbed = self._grab_filthiest(now)
        if grabbed is None:
            return None
        tp, log_, state = grabbed
        if offset_map is None:
            offset_map = OffsetMap.for_buffer(self.map_buffer, self.load_factor)
        try:
            try:
                stats = clean_log(log_, state.first_dirty, state.first_uncleanable, offset_map,
                                  now_ms=now, swap=self.run_swap)
            except Exception as exc:
                if log_.deleted:  # the topic was deleted while we cleaned it: nothing to do
                    return None
                if isinstance(exc, OSError):  # as Kafka's cleaner: the directory goes offline
                    self.manager.failures.maybe_add_offline_log_dir(
                        log_.parent_dir, f"cleaning {log_.name}", exc)
                    return None
                if log_.offline:  # its directory went offline meanwhile
                    return None
                raise
            if log_.deleted or log_.offline:
                return None
            with self._lock:
                self._checkpoints[tp] = stats.end_offset
                self._write_checkpoints()
                if stats.next_horizon is None:
                    self._horizons.pop(tp, None)
                else:
                    self._horizons[tp] = stats.next_horizon
        finally:
            with self._lock:
                self._in_progress.discard(tp)
        self._record(log_, state, stats, now)
        return stats

    def _record(self, log_: Log, state: Cleanable, stats: CleanStats, now_ms: int) -> None:
        m = self.metrics
        m.runs += 1
        m.bytes_read += stats.bytes_read
        m.bytes_written += stats.bytes_written
        m.messages_read += stats.messages_read
        m.messages_written += stats.messages_written
        m.last_run_ms = now_ms
        m.last_run_seconds = stats.seconds
        rate = stats.bytes_read / stats.seconds / 1e6 if stats.seconds else 0.0
        log.info(
            "log cleaner: %s cleaned up to offset %d (dirty ratio %.2f): read %d messages, "
            "%.1f MB in %.2f s (%.1f MB/s); wrote %d messages, %.1f MB; %d segments",
            log_.name, stats.end_offset, state.dirty_ratio, stats.messages_read,
            stats.bytes_read / 1e6, stats.seconds, rate, stats.messages_written,
            stats.bytes_written / 1e6, stats.segments_cleaned,
        )

    # --- bookkeeping ----------------------------------------------------------------------------

    def forget(self, tp: TopicPartition) -> None:
        """A deleted partition (its checkpoint entry goes with it)."""
        with self._lock:
            self._horizons.pop(tp, None)
            if self._checkpoints.pop(tp, None) is not None:
                self._write_checkpoints()

    def _moved(self, tp: TopicPartition) -> None:
        """A log moved to another directory: its entry moves with it."""
        with self._lock:
            if tp in self._checkpoints:
                self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        for directory in self.manager.live_dirs:
            offsets = {
                tp: offset for tp, offset in self._checkpoints.items()
                if self.manager.dir_of(tp) == Path(directory)
            }
            try:
                write_offsets(Path(directory) / CLEANER_CHECKPOINT_FILE, offsets)
            except OSError as exc:
                self.manager.failures.maybe_add_offline_log_dir(
                    directory, f"writing {CLEANER_CHECKPOINT_FILE}", exc)

