"""A small disk that fills up: a tmpfs of a few MiB mounted for a test (root only), and a
filler file that takes every byte left on it, so that the next write that needs a new page
fails with ENOSPC. Removing the filler is repairing the disk."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .faultfs import unmount

FILLER = "filler"


def available() -> str | None:
    """None when this process can mount a tmpfs; else why not."""
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs"
    return None


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (created) until the block ends."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True, capture_output=True)
    try:
        yield path
    finally:
        unmount(path)


def fill(directory: Path) -> Path:
    """Write ``directory/filler`` until the filesystem has no byte left; returns its path."""
    path = directory / FILLER
    chunk = b"\0" * (1 << 16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                if os.write(fd, chunk) < len(chunk):
                    chunk = chunk[: max(1, len(chunk) // 2)]
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    return path
