"""A disk that fails on demand: a FUSE passthrough filesystem (fusepy over libfuse2) mounted
over a backing directory, whose writes can be switched to fail with EIO.

Run as its own process (``python faultfs.py BACKING MOUNTPOINT``), so that a broker in the
test's process never waits on a filesystem served by a thread of that same process. It reads
commands from stdin, one a line, and answers each with ``ok`` on stdout once it holds:

* ``fail``: from now on every write (``write``, ``fsync``, ``fsyncdir``, ``create``, ``mkdir``,
  ``mknod``, ``rename``, ``truncate``, ``unlink``, ``rmdir``, ``link``, ``chmod``,
  ``utimens``) fails with EIO; reads keep working, as on a disk whose writes fail;
* ``fail-reads``: from now on every read of what the partition directories hold (``open``,
  ``read`` and ``readdir`` below the top level) fails with EIO, as on a disk whose sectors
  under the segments went bad: the top-level files (``meta.properties``, the checkpoints) still
  read, so a broker starting on it gets as far as loading its logs;
* ``heal``: reads and writes pass through again.

What was written before ``fail`` is in the backing directory, so a test can check it after the
"disk" is repaired. ``FaultFs`` (below) starts it, waits for the mount, switches it, and
unmounts it.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def available() -> str | None:
    """None when this process can mount a FUSE filesystem; else why not."""
    if os.geteuid() != 0:
        return "needs root to mount a FUSE filesystem"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as exc:  # fusepy raises OSError when libfuse2 is missing
        return f"fusepy cannot load libfuse2: {exc}"
    return None


# --- the filesystem (in the faultfs process) ---------------------------------------------------


def _serve(backing: str, mountpoint: str) -> None:
    from fuse import FUSE, FuseOSError, Operations

    failing = threading.Event()
    failing_reads = threading.Event()

    def writes(method: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(self: Any, *args: Any) -> Any:
            if failing.is_set():
                raise FuseOSError(errno.EIO)
            return method(self, *args)

        return guarded

    def below_top(path: str) -> bool:
        """Inside a partition directory (or any other below the mount's top level)."""
        return "/" in path.strip("/")

    def reads(method: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(self: Any, path: str, *args: Any) -> Any:
            if failing_reads.is_set() and below_top(path):
                raise FuseOSError(errno.EIO)
            return method(self, path, *args)

        return guarded

    class Passthrough(Operations):  # type: ignore[misc]
        def __init__(self, root: str) -> None:
            self.root = root

        def _path(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        # reads
        def access(self, path: str, mode: int) -> None:
            if not os.access(self._path(path), mode):
                raise FuseOSError(errno.EACCES)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            return {key: getattr(st, key) for key in (
                "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size",
                "st_uid", "st_blocks")}

        def readdir(self, path: str, fh: int) -> list[str]:
            if failing_reads.is_set() and path.strip("/"):
                raise FuseOSError(errno.EIO)
            return [".", "..", *os.listdir(self._path(path))]

        def readlink(self, path: str) -> str:
            return os.readlink(self._path(path))

        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(self._path(path))
            return {key: getattr(st, key) for key in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
                "f_flag", "f_frsize", "f_namemax")}

        @reads
        def open(self, path: str, flags: int) -> int:
            if failing.is_set() and flags & os.O_TRUNC:
                raise FuseOSError(errno.EIO)
            # the kernel gives every write its offset (O_APPEND's too); pwrite on an O_APPEND
            # descriptor would ignore it
            return os.open(self._path(path), flags & ~os.O_APPEND)

        @reads
        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def flush(self, path: str, fh: int) -> None:
            return None

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

        # writes
        @writes
        def create(self, path: str, mode: int, fi: Any = None) -> int:
            return os.open(self._path(path), os.O_RDWR | os.O_CREAT, mode)

        @writes
        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            return os.pwrite(fh, data, offset)

        @writes
        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._path(path), length)

        @writes
        def fsync(self, path: str, datasync: int, fh: int) -> None:
            os.fsync(fh)

        @writes
        def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
            return None

        @writes
        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._path(path), mode)

        @writes
        def mknod(self, path: str, mode: int, dev: int) -> None:
            os.mknod(self._path(path), mode, dev)

        @writes
        def rmdir(self, path: str) -> None:
            os.rmdir(self._path(path))

        @writes
        def unlink(self, path: str) -> None:
            os.unlink(self._path(path))

        @writes
        def rename(self, old: str, new: str) -> None:
            os.replace(self._path(old), self._path(new))

        @writes
        def link(self, target: str, source: str) -> None:
            os.link(self._path(source), self._path(target))

        @writes
        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._path(path), mode)

        @writes
        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(self._path(path), uid, gid)

        @writes
        def utimens(self, path: str, times: tuple[float, float] | None = None) -> None:
            os.utime(self._path(path), times)

    def commands() -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "fail":
                failing.set()
            elif command == "fail-reads":
                failing_reads.set()
            elif command == "heal":
                failing.clear()
                failing_reads.clear()
            else:
                print(f"unknown command {command!r}", flush=True)
                continue
            print("ok", flush=True)

    threading.Thread(target=commands, name="faultfs-commands", daemon=True).start()
    FUSE(Passthrough(backing), mountpoint, foreground=True, nothreads=False, fsname="faultfs")


# --- the test's side -------------------------------------------------------------------------


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


def unmount(path: Path) -> None:
    """Unmount ``path`` (lazily if something still has files open there)."""
    if not _mounted(path):
        return
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=True)


class FaultFs:
    """The fault filesystem over ``backing``, mounted at ``mountpoint`` (both created)."""

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        self.backing, self.mountpoint = backing, mountpoint
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> FaultFs:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        from samsa.tools.cluster import die_with_parent

        # SIGTERM when the test process dies: libfuse then unmounts before it exits
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.backing), str(self.mountpoint)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True,
            preexec_fn=die_with_parent())
        deadline = time.monotonic() + 20
        while not _mounted(self.mountpoint):
            if self.proc.poll() is not None:
                raise RuntimeError(f"faultfs exited with code {self.proc.returncode}")
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError(f"faultfs did not mount {self.mountpoint} within 20 s")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _command(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer == "ok", f"faultfs answered {answer!r} to {command!r}"

    def fail(self) -> None:
        """Every write from now on fails with EIO."""
        self._command("fail")

    def fail_reads(self) -> None:
        """Every read inside the partition directories from now on fails with EIO."""
        self._command("fail-reads")

    def heal(self) -> None:
        self._command("heal")

    def close(self) -> None:
        unmount(self.mountpoint)
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
