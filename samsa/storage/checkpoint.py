"""Checkpoint files in Kafka's text format: a version line, a count line, then entries.

    0
    2
    orders 0 1200
    orders 1 998

Written atomically (temporary file, fsync, rename, fsync of the directory), so a crash leaves
either the old file or the new one. A file that cannot be parsed is reported and treated as
absent: the log then recovers from its segments, which is slower but loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from samsa.durable import write_atomically

log = logging.getLogger(__name__)

VERSION = 0

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def _write_entries(path: Path, entries: list[str]) -> None:
    text = f"{VERSION}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)
    write_atomically(path, text.encode())


def _read_entries(path: Path, fields: int) -> list[list[str]] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        lines = raw.decode("utf-8").splitlines()
        if int(lines[0]) != VERSION:
            raise ValueError(f"unknown version {lines[0]}")
        count = int(lines[1])
        entries = [line.split() for line in lines[2 : 2 + count]]
        if len(entries) != count or any(len(e) != fields for e in entries):
            raise ValueError("entry count or shape does not match")
        return entries
    except (IndexError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        log.warning("ignoring malformed checkpoint file %s: %s", path, exc)
        return None


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Per-partition offsets of one data directory (recovery points, log start offsets, high
    watermarks)."""
    _write_entries(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    entries = _read_entries(path, 3) or []
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in entries:
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            log.warning("ignoring malformed entry in %s: %s %s %s", path, topic, partition, offset)
    return out


def write_epochs(path: Path, epochs: Iterable[tuple[int, int]]) -> None:
    """Leader epoch -> start offset entries of one partition."""
    _write_entries(path, [f"{e} {o}" for e, o in epochs])


def read_epochs(path: Path) -> list[tuple[int, int]]:
    entries = _read_entries(path, 2) or []
    try:
        return [(int(e), int(o)) for e, o in entries]
    except ValueError:
        log.warning("ignoring malformed leader epoch checkpoint %s", path)
        return []
