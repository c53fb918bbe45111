"""Moving a replica between the log directories of this broker (AlterReplicaLogDirs), as Kafka's
ReplicaManager.alterReplicaLogDirs and its ReplicaAlterLogDirsThread do.

``alter`` answers the request for one partition (Kafka's checks and error codes) and starts a
move: a copy of the log in the destination directory (``storage.future``), made while the
replica keeps serving reads and writes, then the swap:

1. the files the log has now are copied by a worker thread (``copy_log``) and opened as the
   future log; compaction of the partition is paused meanwhile;
2. what was appended since is copied on the event loop, whole batches, a share per turn of the
   loop (appends run on the loop too, so each share ends at a batch boundary);
3. once little is left (or appends keep pace with the copy and what is left stops shrinking),
   the rest is copied and the future log replaces the current one in one step of the loop
   (``LogManager.replace_current_with_future``): no append can come between the last batch
   copied and the swap, so nothing acknowledged is lost or written twice, and fetches,
   appends and the replica fetcher find the new log from then on (``Partition.log``).

A log truncated or rewritten during the copy (``Log.rewrites``: a follower truncating, the
cleaner's last swap) or whose start passed what was copied makes the copy start over. A move is
cancelled when the partition goes (deleted, moved off this broker), when either directory
fails, when another destination is asked for, and when the broker stops: its copy is deleted
(one left by a crash goes at the next start, ``LogManager._resolve_moves``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from samsa.errors import ErrorCode, KafkaStorageError
from samsa.storage.future import (
    CopyReadError,
    CopyStale,
    FutureReplica,
    copy_log,
    future_dir_name_too_long,
    plan_copy,
)

if TYPE_CHECKING:
    from samsa.cluster.partition import Partition
    from samsa.cluster.replicas import Replicas
    from samsa.storage.log import Log

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
T = TypeVar("T")
# Catching up, each turn of the event loop copies half of what is left, at least CHUNK_BYTES
# and at most MAX_TURN_BYTES; the step that swaps copies what is left once that is at most
# LAST_STEP_BYTES, or at most MAX_LAST_STEP_BYTES when STALLED_TURNS turns have not made it any
# smaller (appends keep pace with the copy: the rest is what the loop appends in a turn or two).
CHUNK_BYTES = 1 << 20
MAX_TURN_BYTES = 8 << 20
LAST_STEP_BYTES = 2 << 20
MAX_LAST_STEP_BYTES = 32 << 20
STALLED_TURNS = 16
# how long a throttled move waits before it looks at its rate again
_THROTTLE_WAIT_S = 0.05


class _Restart(Exception):
    """The copy is stale (the log was truncated or rewritten): make it again."""


@dataclass
class _Move:
    directory: Path
    future: FutureReplica
    task: asyncio.Task[None] | None = None
    swapped: bool = False


class LogDirMover:
    def __init__(self, replicas: Replicas) -> None:
        self.replicas = replicas
        self.manager = replicas.log_manager
        self.moves: dict[TopicPartition, _Move] = {}
        self._running: set[asyncio.Task[None]] = set()  # cancelled ones too, until they end
        self._deleting: set[asyncio.Future[None]] = set()  # copies being deleted

    # --- the request ---------------------------------------------------------------------------

    def alter(self, topic: str, index: int, path: str) -> ErrorCode:
        """Move the replica of ``topic``-``index`` to the log directory ``path``; the error
        code Kafka's ReplicaManager.alterReplicaLogDirs answers for it."""
        tp = (topic, index)
        if future_dir_name_too_long(topic, index):
            return ErrorCode.invalid_topic_exception
        manager = self.manager
        directory = manager.configured_dir(path)
        if directory is None:
            return ErrorCode.log_dir_not_found
        if manager.failures.is_offline(directory):
            return ErrorCode.kafka_storage_error
        partition = self.replicas.partition(topic, index)
        if partition is None and manager.is_offline(tp):
            return ErrorCode.kafka_storage_error
        move = self.moves.get(tp)
        if move is not None and move.directory != directory:
            self.cancel(tp)
        manager.maybe_update_preferred_dir(tp, directory)
        if partition is None:
            # Kafka's NotLeaderOrFollower, answered as REPLICA_NOT_AVAILABLE here
            return (ErrorCode.replica_not_available
                    if self.replicas.partition_exists(topic, index)
                    else ErrorCode.unknown_topic_or_partition)
        if manager.dir_of(tp) == directory or tp in self.moves:
            return ErrorCode.none
        offline = [d for d in manager.dirs if manager.failures.is_offline(d)]
        if offline:  # as Kafka: no copy while a directory may hold another replica
            return ErrorCode.kafka_storage_error
        try:
            future = manager.create_future(tp, directory)
        except KafkaStorageError:
            return ErrorCode.kafka_storage_error
        manager.preferred_dirs.pop(tp, None)  # it is hosted: the move takes it there
        log.info("%s-%d: moving the replica from %s to %s", topic, index, manager.dir_of(tp),
                 directory)
        move = self.moves[tp] = _Move(directory, future)
        manager.cleaning_paused.add(tp)
        move.task = asyncio.get_running_loop().create_task(
            self._run(tp, partition, move), name=f"move {topic}-{index}")
        self._running.add(move.task)
        move.task.add_done_callback(lambda task: self._finished(tp, move, task))
        return ErrorCode.none

    # --- cancelling ----------------------------------------------------------------------------

    def cancel(self, tp: TopicPartition) -> None:
        """Stop the partition's move; its copy is deleted."""
        move = self.moves.pop(tp, None)
        if move is not None and move.task is not None:
            move.task.cancel()

    def dir_failed(self, directory: Path) -> None:
        """A log directory failed: the moves from or to it stop."""
        for tp, move in list(self.moves.items()):
            if move.directory == directory or self.manager.dir_of(tp) == directory:
                self.cancel(tp)

    async def stop(self) -> None:
        """The broker is stopping: every move stops, its copy deleted (and a replaced
        replica's deletion ends)."""
        for tp in list(self.moves):
            self.cancel(tp)
        await asyncio.gather(*self._running, return_exceptions=True)
        await asyncio.gather(*self._deleting, return_exceptions=True)

    def _finished(self, tp: TopicPartition, move: _Move, task: asyncio.Task[None]) -> None:
        """A move's task ended (swapped, failed or cancelled; no thread of it runs)."""
        self._running.discard(task)
        if self.moves.get(tp) is move:
            del self.moves[tp]
        if tp not in self.moves:  # a newer move of the partition keeps compaction paused
            self.manager.cleaning_paused.discard(tp)
        if move.swapped or (move.future.log is not None
                            and self.manager.get(*tp) is move.future.log):
            return
        path = self.manager.discard_future(tp, move.future)
        if path is not None:
            self._delete_later(asyncio.get_running_loop().run_in_executor(
                None, shutil.rmtree, path, True))

    # --- the move ------------------------------------------------------------------------------

    async def _run(self, tp: TopicPartition, partition: Partition, move: _Move) -> None:
        future = move.future
        try:
            while True:
                try:
                    await self._copy(tp, partition, future)
                    replaced = await self._catch_up(tp, partition, move)
                    break
                except _Restart as why:
                    log.info("%s-%d: copying the log again: %s", *tp, why)
                    await self._start_over(future)
        except (KafkaStorageError, OSError) as exc:
            # the directory at fault is offline now (or the partition is gone): it is over
            log.error("%s-%d: the move to %s failed: %s", *tp, future.directory, exc)
            return
        except Exception:
            log.exception("%s-%d: the move to %s failed", *tp, future.directory)
            return
        self._delete_later(asyncio.get_running_loop().run_in_executor(None, replaced.delete))

    def _delete_later(self, deleting: asyncio.Future[None]) -> None:
        """A deletion in a worker thread, which ``stop`` waits for."""
        self._deleting.add(deleting)
        deleting.add_done_callback(self._deleting.discard)

    async def _copy(self, tp: TopicPartition, partition: Partition,
                    future: FutureReplica) -> None:
        """Step 1: the log's files as they are now, copied and opened."""
        source = self._source(tp, partition)
        plan = plan_copy(source)
        stop = threading.Event()
        quota = self.replicas.quotas.alter_log_dirs

        def pace(nbytes: int) -> None:
            """replica.alter.log.dirs.io.max.bytes.per.second: the copying thread waits."""
            quota.record(nbytes)
            while quota.exceeded() and not stop.wait(_THROTTLE_WAIT_S):
                pass

        try:
            await self._in_thread(stop, lambda: copy_log(
                plan, future, clock=self.manager.clock, failures=self.manager.failures,
                stop=stop, pace=pace))
        except CopyStale as exc:
            raise _Restart(str(exc)) from exc
        except CopyReadError as exc:
            raise source.io_error("copying", exc.error) from exc
        except OSError as exc:
            self.manager.failures.maybe_add_offline_log_dir(
                future.directory, f"copying {source.name}", exc)
            raise
        if self._source(tp, partition) is not source or source.rewrites != plan.rewrites:
            raise _Restart("the log was truncated or rewritten while it was copied")

    async def _catch_up(self, tp: TopicPartition, partition: Partition, move: _Move) -> Log:
        """Steps 2 and 3: the batches appended since, then the swap. Returns the replaced
        log."""
        target = move.future.log
        assert target is not None
        rewrites = self._source(tp, partition).rewrites
        smallest, stalled = -1, 0
        while True:
            source = self._source(tp, partition)
            if source.rewrites != rewrites:
                raise _Restart("the log was truncated or rewritten while it was copied")
            if target.log_end_offset < source.log_start_offset:
                raise _Restart("the log's start passed what was copied")
            left = source.size_from(target.log_end_offset)
            if smallest < 0 or left < smallest:
                smallest, stalled = left, 0
            else:
                stalled += 1
            if left <= LAST_STEP_BYTES or (stalled >= STALLED_TURNS
                                           and left <= MAX_LAST_STEP_BYTES):
                while target.log_end_offset < source.log_end_offset:
                    self.copy_batches(source, target, MAX_TURN_BYTES)
                replaced = self.manager.replace_current_with_future(tp)
                partition.log = target
                move.swapped = True
                return replaced
            quota = self.replicas.quotas.alter_log_dirs
            while quota.exceeded():  # replica.alter.log.dirs.io.max.bytes.per.second
                await asyncio.sleep(_THROTTLE_WAIT_S)
            quota.record(self.copy_batches(source, target,
                                           min(max(CHUNK_BYTES, left // 2), MAX_TURN_BYTES)))
            await asyncio.sleep(0)

    @staticmethod
    def copy_batches(source: Log, target: Log, budget: int) -> int:
        """Append to ``target`` the batches of ``source`` after its end, about ``budget``
        bytes of them (whole batches, as a follower appends its leader's); the bytes copied."""
        copied = 0
        while copied < budget and target.log_end_offset < source.log_end_offset:
            chunk = min(budget - copied, target.config.segment_bytes)
            region = source.read(target.log_end_offset, chunk)
            if region is None:
                raise _Restart(f"nothing to read at offset {target.log_end_offset}")
            target.append(region.read(), assign_offsets=False)
            copied += region.length
        return copied

    def _source(self, tp: TopicPartition, partition: Partition) -> Log:
        """The log being moved, still the partition's (the move is cancelled otherwise)."""
        if self.replicas.partition(*tp) is not partition or partition.closed:
            raise KafkaStorageError(f"{tp[0]}-{tp[1]} is no longer hosted here")
        source = self.manager.get(*tp)
        if source is None or source is not partition.log or source.offline:
            raise KafkaStorageError(f"the log of {tp[0]}-{tp[1]} is offline")
        return source

    @staticmethod
    async def _in_thread(stop: threading.Event, work: Callable[[], T]) -> T:
        """``work`` on a worker thread; cancelled, it is told to stop and waited for."""
        running = asyncio.get_running_loop().run_in_executor(None, work)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            stop.set()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await running
            raise

    @staticmethod
    async def _start_over(future: FutureReplica) -> None:
        if future.log is not None:
            future.log.deleted = True
            future.log.abandon()
            future.log = None
        future.copied = 0
        await asyncio.to_thread(shutil.rmtree, future.path, True)
