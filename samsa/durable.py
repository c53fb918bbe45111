"""Durable file writes: a whole file replaced atomically (temporary file, fsync, rename, fsync
of the directory), so a crash leaves either the old file or the new one. Used by the broker's
checkpoints and metadata and by the pipeline's table commits (it imports no broker code)."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``mode``: the permissions of a new file (0o600 for one that holds secrets)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
