"""CPU time of processes, threads and the whole machine, read from Linux's /proc.

The bench scripts beside this file import it (a script's own folder is first on ``sys.path``).
Times are in seconds, counted in clock ticks (``SC_CLK_TCK``) as the kernel keeps them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from os import sysconf

CLK_TCK = sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """What a /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat) line says of CPU time."""

    comm: str
    ppid: int
    cpu_s: float  # utime + stime: the process (every thread) or the one thread
    children_s: float  # cutime + cstime: the process's waited-for children (a thread's file too)
    system_s: float  # stime alone: the kernel's part of cpu_s (syscalls, copies)


def read_stat(path: str) -> ProcStat | None:
    """The stat file at ``path``; None if it cannot be read (the process or thread is gone)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(path) as f:
            text = f.read()
        # comm may hold spaces and parentheses: it ends at the last ")"
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        return ProcStat(
            comm=comm,
            ppid=int(fields[1]),
            cpu_s=(int(fields[11]) + int(fields[12])) / CLK_TCK,
            children_s=(int(fields[13]) + int(fields[14])) / CLK_TCK,
            system_s=int(fields[12]) / CLK_TCK,
        )
    return None


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process, all its threads, from /proc/<pid>/stat (0 if gone or None)."""
    if pid is None:
        return 0.0
    stat = read_stat(f"/proc/{pid}/stat")
    return 0.0 if stat is None else stat.cpu_s


def machine_busy_seconds() -> float:
    """CPU time all processes of the machine have used (every core): /proc/stat's first line,
    all but idle and iowait (0 if it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        return (sum(fields) - fields[3] - fields[4]) / CLK_TCK
    return 0.0
