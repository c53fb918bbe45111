"""A replica's copy in another log directory of the same broker (AlterReplicaLogDirs): Kafka's
"future" replica, ``<topic>-<partition>.<uuid>-future`` in the destination directory.

The copy is built in two steps while the current replica keeps serving:

* ``plan_copy`` (on the event loop, where appends run) notes what exists now: every segment
  with its size (the bytes below it never change), the indexes of the inactive segments, the
  producer snapshots and the leader epochs. ``copy_log`` (a worker thread) copies exactly that
  and opens it as a ``Log``; only the active segment's copy is validated batch by batch (its
  indexes are rebuilt), the inactive segments come with their own indexes. The copy is
  fsynced before it is handed back: after the swap it is the only replica.
* what was appended since is copied batch by batch on the event loop (``LogDirMover``, in
  ``samsa.cluster``), and the last batches and the swap happen in one step there
  (``LogManager.replace_current_with_future``).

A log truncated or rewritten meanwhile (a follower diverging, a cleaner's swap: ``Log.rewrites``)
makes the copy worthless: it is thrown away and made again.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from samsa.config import LogConfig
from samsa.durable import fsync_dir
from samsa.storage.checkpoint import LEADER_EPOCH_FILE, write_epochs
from samsa.storage.log import Clock, Log
from samsa.storage.log_dir_failure import LogDirFailureChannel
from samsa.storage.segment import LOG_SUFFIX, segment_name

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_MOVED_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})(-future|-delete)$")
_CHUNK = 1 << 20
# Kafka refuses a move whose future directory name would be longer than a file name may be
MAX_DIR_NAME = 255


def future_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-future``, Kafka's UnifiedLog.logFutureDirName."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-delete``: a replaced replica, until it is deleted."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def future_dir_name_too_long(topic: str, partition: int) -> bool:
    return len(f"{topic}-{partition}") + 1 + 32 + len(FUTURE_SUFFIX) > MAX_DIR_NAME


def parse_moved_dir(name: str) -> tuple[str, int, str] | None:
    """(topic, partition, ``-future`` or ``-delete``) of a future or replaced replica's
    directory name; None for any other name."""
    match = _MOVED_DIR.match(name)
    return (match[1], int(match[2]), match[4]) if match else None


@dataclass
class FutureReplica:
    """A copy being made (``LogManager.futures``): where, and its log once the copied files
    are opened. DescribeLogDirs lists it (``is_future_key``)."""

    directory: Path  # the destination log directory
    path: Path  # <directory>/<topic>-<partition>.<uuid>-future
    log: Log | None = None
    copied: int = 0  # bytes copied so far, before ``log`` exists

    @property
    def size(self) -> int:
        return self.log.size if self.log is not None else self.copied


class CopyReadError(Exception):
    """Reading the current replica's files failed: ``error`` is the I/O error."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class CopyStopped(Exception):
    """The move was cancelled while its files were being copied."""


class CopyStale(Exception):
    """A file was shorter than planned: the log was truncated while it was copied."""


@dataclass
class _SegmentCopy:
    base: int
    fd: int  # a duplicate of the segment file's descriptor: the copying thread's own
    size: int
    indexes: list[Path] = field(default_factory=list)  # inactive segments only


@dataclass
class CopyPlan:
    """What ``copy_log`` copies, noted on the event loop (``plan_copy``)."""

    segments: list[_SegmentCopy]
    snapshots: list[Path]
    epochs: list[tuple[int, int]]
    log_start_offset: int
    active_base: int  # below it, whole segments with their indexes
    rewrites: int  # ``Log.rewrites`` when planned
    config: LogConfig

    def close(self) -> None:
        for segment in self.segments:
            if segment.fd >= 0:
                os.close(segment.fd)
                segment.fd = -1


def plan_copy(log: Log) -> CopyPlan:
    """Note what ``log`` holds now (run on the event loop, between appends)."""
    segments: list[_SegmentCopy] = []
    try:
        for segment in log.segments:
            inactive = segment is not log.active
            indexes = [segment.index.path, segment.time_index.path,
                       segment.txn_index.path] if inactive else []
            segments.append(_SegmentCopy(segment.base_offset, os.dup(segment.fd), segment.size,
                                         indexes))
    except OSError:
        for made in segments:
            os.close(made.fd)
        raise
    end = log.log_end_offset
    snapshots = [log.producer_state.snapshot_path(o)
                 for o in log.producer_state.snapshot_offsets() if o <= end]
    return CopyPlan(segments, snapshots, list(log.epochs.entries), log.log_start_offset,
                    log.active.base_offset, log.rewrites, log.config)


def copy_log(plan: CopyPlan, future: FutureReplica, *, clock: Clock,
             failures: LogDirFailureChannel | None, stop: threading.Event,
             pace: Callable[[int], None] | None = None) -> Log:
    """Copy what ``plan`` names into ``future.path`` and open it as ``future.log`` (a worker
    thread). The copy is fsynced. Raises CopyStopped once ``stop`` is set, CopyStale when a
    segment was cut meanwhile, CopyReadError when the current replica's files cannot be read,
    OSError (or KafkaStorageError) when the destination cannot be written. The plan's
    descriptors are closed in any case. ``pace(n)`` is called after each chunk of segment
    copied (the log dirs throttle waits there)."""
    try:
        path = future.path
        path.mkdir(parents=True, exist_ok=True)
        for segment in plan.segments:
            name = segment_name(segment.base)
            _copy_fd(segment.fd, segment.size, path / (name + LOG_SUFFIX), future, stop, pace)
            for source in segment.indexes:
                _copy_file(source, path / source.name, future, stop)
        for snapshot in plan.snapshots:
            _copy_file(snapshot, path / snapshot.name, future, stop)
        write_epochs(path / LEADER_EPOCH_FILE, plan.epochs)
    finally:
        plan.close()
    if stop.is_set():
        raise CopyStopped
    log = Log(path, plan.config, recovery_point=plan.active_base,
              log_start_offset=plan.log_start_offset, had_clean_shutdown=False, clock=clock,
              failures=failures)
    future.log = log  # before anything else can fail: whoever discards the copy closes it
    log.flush()
    fsync_dir(path)
    fsync_dir(future.directory)
    return log


def _copy_fd(fd: int, size: int, target: Path, future: FutureReplica,
             stop: threading.Event, pace: Callable[[int], None] | None) -> None:
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        position = 0
        while position < size:
            if stop.is_set():
                raise CopyStopped
            try:
                data = os.pread(fd, min(_CHUNK, size - position), position)
            except OSError as exc:
                raise CopyReadError(exc) from exc
            if not data:
                raise CopyStale(f"{target.name} ends at {position}, before {size}")
            _write_all(out, data)
            position += len(data)
            future.copied += len(data)
            if pace is not None:
                pace(len(data))
    finally:
        os.close(out)


def _copy_file(source: Path, target: Path, future: FutureReplica,
               stop: threading.Event) -> None:
    """A small file (an index, a snapshot); one that is gone (retention deleted its segment,
    a newer snapshot replaced it) is left out: the copy rebuilds or does without it."""
    if stop.is_set():
        raise CopyStopped
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CopyReadError(exc) from exc
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(out, data)
    finally:
        os.close(out)
    future.copied += len(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
