"""All partition logs of a broker, across its data directories (``log.dirs``).

Each data directory holds one folder per partition (``<topic>-<partition>``) plus Kafka's
bookkeeping files: ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` (the high watermarks, which the replicas above keep and
hand in: ``checkpoint_high_watermarks``), ``.kafka_cleanshutdown`` (present only after a clean
shutdown) and ``.lock``.

A directory where an I/O error happens goes offline (``failures``, Kafka's
LogDirFailureChannel): its logs are closed and forgotten (``handle_log_dir_failure``), nothing
more is written there (no checkpoint, no clean-shutdown marker: the next start recovers it),
and new logs go to the directories still online.

At start-up (Kafka's LogManager) a directory that cannot be created, read or locked
(``open_dirs``), or whose logs fail to load (``load_logs``), is offline from the start and
the others serve; with none left the start fails. Which partitions an offline directory
holds may then be unknown (it could not be listed, or not to the end): a partition whose log
is in no online directory while one is offline is not created afresh unless the cluster says
it is new (``get_or_create(is_new=False)``, Kafka's rule for a replica that is not new): it
is offline here too (``is_offline``), so that a log in the failed directory is never forked.

A replica moves to another directory (AlterReplicaLogDirs) through a copy there, Kafka's future
replica (``futures``, ``storage.future``), which replaces it in one step
(``replace_current_with_future``): the current directory is renamed
``<topic>-<partition>.<uuid>-delete`` (the commit: from then on the copy is the replica), then
the copy's ``-future`` directory gets the partition's name; the replaced one is deleted after.
At start-up (``_resolve_moves``) a ``-future`` directory beside its current replica is an
unfinished copy and goes, a ``-delete`` one beside it is deleted, and a ``-future`` one whose
current replica was renamed ``-delete`` finishes the swap a crash interrupted. (Kafka renames
the future directory first; a crash between the renames leaves two current directories and a
broker that refuses to start until one is deleted by hand.)
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from samsa.config import BrokerConfig, LogConfig
from samsa.durable import fsync_dir
from samsa.errors import KafkaStorageError
from samsa.metrics import Histogram
from samsa.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    read_offsets,
    write_atomically,
    write_offsets,
)
from samsa.storage.future import (
    DELETE_SUFFIX,
    FutureReplica,
    delete_dir_name,
    future_dir_name,
    parse_moved_dir,
)
from samsa.storage.log import Clock, Log, wall_clock_ms
from samsa.storage.log_dir_failure import LogDirFailureChannel

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    match = _PARTITION_DIR.match(name)
    return (match[1], int(match[2])) if match else None


class LogManager:
    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        clock: Clock = wall_clock_ms,
    ) -> None:
        self.config = config or BrokerConfig()
        self.dirs = [Path(d) for d in self.config.log_dirs]
        self.defaults = self.config.topic_defaults()
        self._topic_config = topic_config
        self.clock = clock
        self.logs: dict[TopicPartition, Log] = {}  # the logs online
        self._dir_of: dict[TopicPartition, Path] = {}  # offline ones too
        self._high_watermarks: dict[TopicPartition, int] = {}  # as last checkpointed
        # logs found in no online directory while one was offline: perhaps in it
        self._unplaced: set[TopicPartition] = set()
        self._locks: list[int] = []
        self.failures = LogDirFailureChannel()
        self.flush_timer: Histogram | None = None  # each log's flushes time into it
        # replicas being copied to another directory (AlterReplicaLogDirs)
        self.futures: dict[TopicPartition, FutureReplica] = {}
        # where a partition not hosted yet is to be created (Kafka's preferredLogDirs)
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        self.cleaning_paused: set[TopicPartition] = set()  # the log cleaner leaves them be
        # told when a partition's log moved to another directory (the cleaner's checkpoints)
        self.move_listeners: list[Callable[[TopicPartition], None]] = []
        # found at start-up: future and replaced replicas' directories (_resolve_moves)
        self._moved: list[tuple[Path, Path, TopicPartition, str]] = []
        # each directory's checkpointed log start offsets and high watermarks, while starting
        self._checkpoints: dict[Path, tuple[Offsets, Offsets]] = {}

    def config_for(self, topic: str) -> LogConfig:
        if self._topic_config is not None:
            return self._topic_config(topic)
        return LogConfig.from_props(defaults=self.defaults)

    # --- start and stop ---------------------------------------------------------------------

    def startup(self) -> None:
        """Lock every data directory and open every partition log found in it, recovering the
        ones a crash left behind (``open_dirs``, then ``load_logs``)."""
        self.open_dirs()
        self.load_logs()

    def open_dirs(self) -> None:
        """Create, check and lock every data directory (Kafka's createAndValidateLogDirs and
        lockLogDirs): one where that fails with an I/O error goes offline, one that another
        broker process holds stops the start (KafkaStorageError), as does having no
        directory left."""
        for directory in self.dirs:
            if self.failures.is_offline(directory):
                continue
            try:
                directory.mkdir(parents=True, exist_ok=True)
                if not directory.is_dir() or not os.access(directory, os.R_OK | os.W_OK):
                    raise OSError(f"{directory} is not a readable and writable directory")
                self._lock(directory)
            except KafkaStorageError:  # in use by another process
                self._release()
                raise
            except OSError as exc:
                self.failures.maybe_add_offline_log_dir(
                    directory, "Failed to create or validate data directory", exc)
        if not self.live_dirs:
            self._release()
            raise KafkaStorageError(
                "Shutdown broker because none of the specified log dirs from "
                f"{', '.join(str(d) for d in self.dirs)} can be created or validated")

    def load_logs(self) -> None:
        """Open every partition log of the directories online (after ``open_dirs``). A
        directory where loading fails with an I/O error goes offline with every log in it
        (those opened before the error too); KafkaStorageError when none is left."""
        for directory in self.live_dirs:
            try:
                self._load_dir(directory)
            except (OSError, KafkaStorageError) as exc:
                self.failures.maybe_add_offline_log_dir(
                    directory, "Error while loading log dir", exc)
                self.handle_log_dir_failure(directory)
        self._resolve_moves()
        if not self.live_dirs:
            self._release()
            raise KafkaStorageError("Shutdown broker because all log dirs in "
                                    f"{', '.join(str(d) for d in self.dirs)} have failed")

    def _load_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_offsets(directory / RECOVERY_POINT_FILE)
        start_offsets = read_offsets(directory / LOG_START_OFFSET_FILE)
        high_watermarks = read_offsets(directory / HIGH_WATERMARK_FILE)
        self._checkpoints[directory] = (start_offsets, high_watermarks)
        partition_dirs = [p for p in sorted(directory.iterdir()) if p.is_dir()]
        if not clean and any(parse_partition_dir(p.name) for p in partition_dirs):
            log.info("%s: no clean shutdown marker; recovering unflushed segments", directory)
        for path in partition_dirs:
            moved = parse_moved_dir(path.name)
            if moved is not None:
                self._moved.append((directory, path, (moved[0], moved[1]), moved[2]))
                continue
            tp = parse_partition_dir(path.name)
            if tp is None:
                continue
            self._dir_of[tp] = directory  # known to be here even if it fails to load
            self.logs[tp] = Log(
                path,
                self.config_for(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                had_clean_shutdown=clean,
                clock=self.clock,
                failures=self.failures,
            )
            self.logs[tp].flush_timer = self.flush_timer
            if tp in high_watermarks:
                self._high_watermarks[tp] = high_watermarks[tp]
        # From here on a crash must be detected: the marker goes until the next clean stop.
        marker.unlink(missing_ok=True)

    def _resolve_moves(self) -> None:
        """The future and replaced replicas a stop left (see the module's docstring): with the
        partition's current replica found, they go; without it, a future replica whose
        current one was renamed ``-delete`` (the swap's commit) becomes the replica, and a
        lone ``-delete`` one is the replica again (the copy is gone). With a directory
        offline the current replica may be there: nothing is decided, the partition is
        offline here."""
        found, self._moved = self._moved, []
        by_tp: dict[TopicPartition, list[tuple[Path, Path, str]]] = {}
        for directory, path, tp, kind in found:
            if not self.failures.is_offline(directory):
                by_tp.setdefault(tp, []).append((directory, path, kind))
        some_offline = any(self.failures.is_offline(d) for d in self.dirs)
        for tp, entries in sorted(by_tp.items()):
            futures = [(d, p) for d, p, kind in entries if kind != DELETE_SUFFIX]
            replaced = [(d, p) for d, p, kind in entries if kind == DELETE_SUFFIX]
            if tp in self._dir_of:
                for directory, path in futures:
                    log.info("%s: removing the unfinished copy of %s-%d (its move was "
                             "interrupted)", path, *tp)
                    self._remove_dir(directory, path)
                for directory, path in replaced:
                    self._remove_dir(directory, path)
            elif some_offline:
                log.warning("%s-%d: its log may be in an offline log directory; leaving %s",
                            *tp, ", ".join(str(p) for _, p, _ in entries))
                self._unplaced.add(tp)
            elif futures and replaced:
                (directory, path), *others = futures
                log.warning("%s-%d: finishing the swap a stop interrupted: %s replaces %s",
                            *tp, path, replaced[0][1])
                start_offsets, high_watermarks = self._checkpoints.get(replaced[0][0], ({}, {}))
                self._promote(directory, path, tp, start_offsets.get(tp, 0),
                              high_watermarks.get(tp))
                for other_dir, other in others + replaced:
                    self._remove_dir(other_dir, other)
            elif len(replaced) == 1:
                directory, path = replaced[0]
                log.warning("%s-%d: %s is its only replica: restoring it", *tp, path)
                start_offsets, high_watermarks = self._checkpoints.get(directory, ({}, {}))
                self._promote(directory, path, tp, start_offsets.get(tp, 0),
                              high_watermarks.get(tp))
            elif replaced:
                log.error("%s-%d: several replaced replicas and no current one (%s): the "
                          "partition stays offline here", *tp,
                          ", ".join(str(p) for _, p in replaced))
                self._unplaced.add(tp)
            else:
                for directory, path in futures:
                    log.info("%s: removing the copy of %s-%d, which has no replica any more",
                             path, *tp)
                    self._remove_dir(directory, path)
        self._checkpoints.clear()

    def _promote(self, directory: Path, path: Path, tp: TopicPartition, log_start_offset: int,
                 high_watermark: int | None) -> None:
        """Make ``path`` the partition's directory and open it, recovering every segment."""
        target = directory / partition_dir_name(*tp)
        try:
            os.rename(path, target)
            fsync_dir(directory)
            self.logs[tp] = Log(target, self.config_for(tp[0]), recovery_point=0,
                                log_start_offset=log_start_offset, clock=self.clock,
                                failures=self.failures)
            self.logs[tp].flush_timer = self.flush_timer
        except (OSError, KafkaStorageError) as exc:
            self.failures.maybe_add_offline_log_dir(directory, "Error while loading log dir",
                                                    exc)
            self.handle_log_dir_failure(directory)
        self._dir_of[tp] = directory
        if high_watermark is not None:
            self._high_watermarks[tp] = high_watermark

    def _remove_dir(self, directory: Path, path: Path) -> None:
        try:
            shutil.rmtree(path)
        except OSError as exc:
            self.failures.maybe_add_offline_log_dir(directory, f"deleting {path}", exc)

    def _lock(self, directory: Path) -> None:
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise KafkaStorageError(
                f"data directory {directory} is in use by another broker process"
            ) from None
        self._locks.append(fd)

    def shutdown(self) -> None:
        """Clean shutdown: fsync and close every log, write the checkpoints, then the marker
        (in the directories still online: an offline one is recovered at the next start).
        Copies still being made stay behind, and go at the next start."""
        self._drop_futures()
        for log_ in list(self.logs.values()):
            try:
                log_.close()
            except KafkaStorageError as exc:  # its directory goes offline: no marker there
                log.error("%s: not closed cleanly: %s", log_.name, exc)
        self.checkpoint()
        for directory in self.live_dirs:
            try:
                write_atomically(directory / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:
                self.failures.maybe_add_offline_log_dir(
                    directory, "writing the clean shutdown marker", exc)
        self._release()

    def abandon(self) -> None:
        """Drop everything as a crash would (tests): no flush, no checkpoint, no marker."""
        for log_ in self.logs.values():
            log_.abandon()
        self._drop_futures()
        self._release()

    def _release(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()
        self.logs.clear()
        self._high_watermarks.clear()

    # --- partitions ---------------------------------------------------------------------------

    def _drop_futures(self) -> None:
        for future in self.futures.values():
            if future.log is not None:
                future.log.abandon()
        self.futures.clear()

    def get(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None,
                      *, is_new: bool = True) -> Log:
        """The partition's log, created in the least loaded directory online when it has
        none; KafkaStorageError when its log is in an offline directory, or none is online.
        ``is_new=False`` (a partition that existed before, not one being created or moved
        here): with a directory offline, a log found in no online directory may be in the
        offline one, so it is not created (Kafka's LogManager.getOrCreateLog) and the
        partition is offline here."""
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        if self.is_offline(tp):
            where = self._dir_of.get(tp)
            raise KafkaStorageError(
                f"the log of {topic}-{partition} is in the offline log directory {where}"
                if where is not None else
                f"the log of {topic}-{partition} may be in an offline log directory")
        offline = [d for d in self.dirs if self.failures.is_offline(d)]
        if offline and not is_new:
            self._unplaced.add(tp)
            raise KafkaStorageError(
                f"Can not create log for {topic}-{partition} because log directories "
                f"{', '.join(str(d) for d in offline)} are offline")
        directory = self.preferred_dirs.pop(tp, None)
        if directory is None or self.failures.is_offline(directory):
            directory = self._least_loaded_dir()
        try:
            new = Log(
                directory / partition_dir_name(topic, partition),
                config or self.config_for(topic),
                clock=self.clock,
                failures=self.failures,
            )
            new.flush_timer = self.flush_timer
        except OSError as exc:
            message = f"creating the log of {topic}-{partition}"
            self.failures.maybe_add_offline_log_dir(directory, message, exc)
            raise KafkaStorageError(f"I/O error while {message} in {directory}: {exc}"
                                    ) from exc
        self.logs[tp] = new
        self._dir_of[tp] = directory
        return new

    def _least_loaded_dir(self) -> Path:
        live = self.live_dirs
        if not live:
            raise KafkaStorageError(f"every log directory is offline: {self.dirs}")
        counts = {d: 0 for d in live}
        for d in [*self._dir_of.values(), *(f.directory for f in self.futures.values())]:
            if d in counts:
                counts[d] += 1
        return min(live, key=lambda d: counts[d])

    def delete(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        self._unplaced.discard(tp)
        removed = self.logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        self._high_watermarks.pop(tp, None)
        if removed is not None:
            try:
                removed.delete()
            except OSError as exc:
                assert directory is not None
                self.failures.maybe_add_offline_log_dir(
                    directory, f"deleting the log of {topic}-{partition}", exc)
        elif directory is not None and self.failures.is_offline(directory):
            log.warning("%s-%d: its log stays in the offline log directory %s", topic,
                        partition, directory)

    def dir_of(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    # --- moving a replica to another directory (AlterReplicaLogDirs) -------------------------

    def configured_dir(self, path: str) -> Path | None:
        """The log directory whose absolute path is ``path`` (as DescribeLogDirs names it;
        Kafka compares the paths as written, so a relative one or a trailing slash is none)."""
        return next((d for d in self.dirs if str(d.absolute()) == path), None)

    def maybe_update_preferred_dir(self, tp: TopicPartition, directory: Path) -> None:
        """Kafka's maybeUpdatePreferredLogDir: a partition created here later goes there
        (unless its replica or its copy is there already)."""
        future = self.futures.get(tp)
        if self._dir_of.get(tp) != directory and (future is None
                                                  or future.directory != directory):
            self.preferred_dirs[tp] = directory

    def create_future(self, tp: TopicPartition, directory: Path) -> FutureReplica:
        """Start a copy of the partition's log in ``directory`` (its files come from
        ``storage.future.copy_log``). KafkaStorageError when the directory cannot take it."""
        path = directory / future_dir_name(*tp)
        try:
            path.mkdir()
        except OSError as exc:
            message = f"creating the future log of {tp[0]}-{tp[1]}"
            self.failures.maybe_add_offline_log_dir(directory, message, exc)
            raise KafkaStorageError(f"I/O error while {message} in {directory}: {exc}"
                                    ) from exc
        future = self.futures[tp] = FutureReplica(directory, path)
        return future

    def discard_future(self, tp: TopicPartition, future: FutureReplica) -> Path | None:
        """Forget a copy of the partition and close its files; returns its directory, which
        the caller deletes (None when its log dir is offline: nothing is written there)."""
        if self.futures.get(tp) is future:
            del self.futures[tp]
        if future.log is not None:
            future.log.deleted = True  # a flush on another thread stops
            future.log.abandon()
        return None if self.failures.is_offline(future.directory) else future.path

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """The copy, caught up with the log (same log end offset: the caller holds off
        appends), becomes the partition's log. Its log start offset, leader epochs, producer
        state and config become the replaced log's; the replaced directory is renamed
        ``-delete`` (the commit), then the copy's gets the partition's name; the checkpoints of
        both directories follow. Returns the replaced log, to be deleted (``Log.delete``).
        KafkaStorageError, with the log still the partition's, when the first rename fails;
        when a later step fails, both directories go offline (the next start finishes the
        swap)."""
        future = self.futures[tp]
        new, old = future.log, self.logs[tp]
        assert new is not None and new.log_end_offset == old.log_end_offset
        if old.log_start_offset > new.log_start_offset:
            new.delete_records_before(old.log_start_offset)
        new.epochs.replace(old.epochs.entries)
        new.producer_state.copy_from(old.producer_state)
        new.update_config(old.config)
        new.flush_timer = old.flush_timer
        source, dest = old.parent_dir, future.directory
        current, retired = old.dir, source / delete_dir_name(*tp)
        # from here a flush of the old log on another thread stops quietly (its files move
        # away under it); the caller deletes it
        old.deleted = True
        try:
            os.rename(current, retired)
        except OSError as exc:  # nothing changed
            old.deleted = False
            raise old.io_error("renaming the replaced replica", exc) from exc
        try:
            fsync_dir(source)
            os.rename(new.dir, dest / current.name)
            fsync_dir(dest)
        except OSError as exc:
            # half done, as a crash would leave it: the next start finishes the swap, and
            # neither directory is written (or the copy deleted) until then
            new.io_error("renaming the future replica", exc)
            raise old.io_error("moving the replica", exc) from exc
        old.rename_dir(retired)
        new.rename_dir(dest / current.name)
        del self.futures[tp]
        self.logs[tp] = new
        self._dir_of[tp] = dest
        self.checkpoint()
        self._write_high_watermarks()
        for listener in list(self.move_listeners):
            listener(tp)
        log.info("%s: the replica moved from %s to %s (log end offset %d)", current.name,
                 source, dest, new.log_end_offset)
        return old

    # --- offline directories ------------------------------------------------------------------

    @property
    def live_dirs(self) -> list[Path]:
        return [d for d in self.dirs if not self.failures.is_offline(d)]

    def is_offline(self, tp: TopicPartition) -> bool:
        """Whether the partition's log is in an offline directory (or may be: see
        ``get_or_create``)."""
        directory = self._dir_of.get(tp)
        if directory is None:
            return tp in self._unplaced
        return self.failures.is_offline(directory)

    def offline_partitions(self) -> list[TopicPartition]:
        return sorted({tp for tp, d in self._dir_of.items() if self.failures.is_offline(d)}
                      | self._unplaced)

    def handle_log_dir_failure(self, directory: Path) -> list[TopicPartition]:
        """Stop serving the logs of an offline directory (Kafka's
        LogManager.handleLogDirFailure): they are closed without a flush and leave ``logs``
        (their directory is remembered, so they are known to be offline). Returns them."""
        log.warning("Stopping serving logs in dir %s", directory)
        gone = sorted(tp for tp, d in self._dir_of.items() if d == directory and tp in self.logs)
        for tp in gone:
            with contextlib.suppress(OSError):
                self.logs.pop(tp).abandon()
        for tp, future in list(self.futures.items()):
            if future.directory == directory:  # the copy is lost; it goes at the next start
                self.discard_future(tp, future)
        return gone

    def partitions(self, topic: str) -> Iterator[tuple[int, Log]]:
        for (t, p), log_ in self.logs.items():
            if t == topic:
                yield p, log_

    # --- periodic work (the server schedules these) --------------------------------------------

    def cleanup(self) -> int:
        """Apply retention to every log (``log.retention.check.interval.ms``) and drop the state
        of idle idempotent producers (``producer.id.expiration.ms``)."""
        expiration = self.config.get("producer.id.expiration.ms")
        now = self.clock()
        for log_ in self.logs.values():
            log_.producer_state.remove_expired(now, expiration)
        deleted = 0
        for log_ in list(self.logs.values()):
            try:
                deleted += log_.delete_old_segments()
            except KafkaStorageError:
                pass  # its directory is offline now
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def flush_due(self) -> None:
        """fsync the logs whose ``flush.ms`` has passed, and every rolled segment."""
        for log_ in list(self.logs.values()):
            try:
                if not log_.maybe_flush_by_time():
                    log_.flush_rolled()
            except KafkaStorageError:
                pass  # its directory is offline now

    def checkpoint(self) -> None:
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    def checkpoint_recovery_points(self) -> None:
        self._write_per_dir(RECOVERY_POINT_FILE, lambda log_: log_.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_per_dir(LOG_START_OFFSET_FILE, lambda log_: log_.log_start_offset)

    def checkpointed_high_watermark(self, topic: str, partition: int) -> int | None:
        """The high watermark ``replication-offset-checkpoint`` last held for a log (None: it
        has none, or the file could not be read)."""
        return self._high_watermarks.get((topic, partition))

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write ``replication-offset-checkpoint`` in every data directory (Kafka's
        ReplicaManager does, every ``replica.high.watermark.checkpoint.interval.ms`` and at
        shutdown). A log without a high watermark here (its replica is not open yet) keeps
        the one it had."""
        for tp, offset in high_watermarks.items():
            if tp in self.logs:
                self._high_watermarks[tp] = offset
        self._write_high_watermarks()

    def _write_high_watermarks(self) -> None:
        for directory in self.live_dirs:
            try:
                write_offsets(directory / HIGH_WATERMARK_FILE, {
                    tp: offset for tp, offset in self._high_watermarks.items()
                    if self._dir_of.get(tp) == directory})
            except OSError as exc:
                self.failures.maybe_add_offline_log_dir(
                    directory, f"writing {HIGH_WATERMARK_FILE}", exc)

    def _write_per_dir(self, filename: str, value: Callable[[Log], int]) -> None:
        for directory in self.live_dirs:
            offsets = {
                tp: value(log_)
                for tp, log_ in self.logs.items()
                if self._dir_of.get(tp) == directory
            }
            try:
                write_offsets(directory / filename, offsets)
            except OSError as exc:
                self.failures.maybe_add_offline_log_dir(directory, f"writing {filename}", exc)
