"""The load job's table: Parquet files and the offsets they hold, committed together atomically.

Layout, for a table at ``warehouse/events``::

    warehouse/events                -> .events.versions/v00000003   (a symbolic link)
    warehouse/.events.versions/v00000003/date=2026-11-22/hour=9/part-....parquet
    warehouse/.events.versions/v00000003/_samsa_offsets.json
    warehouse/.events.lock

Each committed version is a directory holding every Parquet file of the table (the files of the
version before it as hard links, plus the new ones) and ``_samsa_offsets.json``, the next offset
to load of every topic-partition. A load builds version n+1 next to version n and commits it by
replacing the link, one ``rename``: until then readers (``spark.read.parquet("warehouse/events")``,
which skips ``_`` files) see version n and its offsets, so a failed or killed load leaves nothing
visible, and its half-built directory is removed by the next load. The lock file keeps two loads
of one table apart.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from samsa.durable import fsync_dir, write_atomically

OFFSETS_FILE = "_samsa_offsets.json"
_VERSION = re.compile(r"^v(\d{8})$")

#: ``{topic: {partition: next offset to load}}``
Offsets = dict[str, dict[int, int]]


class TableError(RuntimeError):
    """The table is in use or not a samsa table."""


@dataclass(frozen=True)
class Version:
    number: int
    path: Path | None  # None: the empty table before the first load
    offsets: Offsets


class Table:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.versions = self.path.parent / f".{self.path.name}.versions"
        self.lock_path = self.path.parent / f".{self.path.name}.lock"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the table's lock (one load at a time); fails at once if another load has it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TableError(f"another load is running on {self.path}") from None
            yield

    def current(self) -> Version:
        """The committed version, its offsets included."""
        if not self.path.is_symlink():
            if self.path.exists():
                raise TableError(f"{self.path} exists and is not a samsa table (a link to "
                                 f"{self.versions.name}/)")
            return Version(0, None, {})
        target = self.path.resolve()
        match = _VERSION.match(target.name)
        if match is None or target.parent != self.versions.resolve():
            raise TableError(f"{self.path} points at {target}, not at a version of the table")
        raw = json.loads((target / OFFSETS_FILE).read_text())
        offsets = {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
        return Version(int(match[1]), target, offsets)

    def begin(self, base: Version) -> Path:
        """A fresh directory for version ``base.number + 1`` holding ``base``'s data files.

        Leftovers of loads that never committed are removed first.
        """
        self.remove_versions(keep={base.number, base.number - 1})
        staging = self.versions / f"v{base.number + 1:08d}"
        staging.mkdir(parents=True)
        if base.path is not None:
            for src in base.path.rglob("*"):
                rel = src.relative_to(base.path)
                if src.is_dir():
                    (staging / rel).mkdir(parents=True, exist_ok=True)
                elif rel.name != OFFSETS_FILE:
                    (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.link(src, staging / rel)
        return staging

    def commit(self, staging: Path, offsets: Offsets) -> Version:
        """Write ``offsets`` into ``staging`` and make it the table's version, atomically."""
        number = int(_VERSION.match(staging.name)[1])  # type: ignore[index]
        data = {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in offsets.items()}
        text = json.dumps(data, indent=1, sort_keys=True)
        write_atomically(staging / OFFSETS_FILE, text.encode())
        _fsync_tree(staging)
        link = self.path.parent / f".{self.path.name}.link-{number}"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(staging.relative_to(self.path.parent))
        os.replace(link, self.path)
        fsync_dir(self.path.parent)
        # readers that resolved the previous version may still be reading it: keep that one
        self.remove_versions(keep={number, number - 1})
        return Version(number, staging, offsets)

    def remove_versions(self, keep: set[int]) -> None:
        if not self.versions.is_dir():
            return
        for child in self.versions.iterdir():
            match = _VERSION.match(child.name)
            if match is not None and int(match[1]) not in keep:
                shutil.rmtree(child, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    """fsync every new file and directory under ``root`` (Spark's writer does not)."""
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            fsync_dir(path)
        else:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

