"""Build outputs the tests need, brought up to date by the Makefile's own rules."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def classpath(target: Path, what: str) -> str:
    """The classpath file ``target`` (under build/), after ``make`` brought it up to date: one
    test process at a time, as the xdist workers share build/."""
    target.parent.mkdir(parents=True, exist_ok=True)
    make = shutil.which("make")
    assert make is not None, f"make is needed to build {what} (see the Makefile)"
    with (target.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            [make, "-s", "--no-print-directory", str(target.relative_to(ROOT))],
            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (
        f"building {what} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return target.read_text().strip()
