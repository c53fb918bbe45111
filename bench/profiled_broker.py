"""A broker process under cProfile whose statistics can be taken while it runs.

    python bench/profiled_broker.py OUT_PREFIX server --override key=value ...

runs ``samsa.cli`` (the arguments after OUT_PREFIX) with cProfile on. Each SIGUSR1 writes the
statistics so far to ``OUT_PREFIX.<n>.prof`` (n = 1, 2, ...; written to a temporary name and
renamed, so a file that exists is whole) and profiling goes on; the benches take one before
and one after a workload and subtract (``pstats`` call counts are cumulative). The samsa it
runs is the first on ``sys.path`` (``PYTHONPATH`` picks a source tree). Only the main thread
(the event loop) is profiled.
"""

from __future__ import annotations

import cProfile
import os
import runpy
import signal
import sys
from types import FrameType


def main() -> None:
    prefix = sys.argv[1]
    sys.argv = ["samsa", *sys.argv[2:]]
    profile = cProfile.Profile()
    dumps = [0]

    def dump(_signum: int, _frame: FrameType | None) -> None:
        dumps[0] += 1
        path = f"{prefix}.{dumps[0]}.prof"
        profile.dump_stats(path + ".tmp")  # disables the profiler
        os.replace(path + ".tmp", path)
        profile.enable()

    signal.signal(signal.SIGUSR1, dump)
    profile.enable()
    try:
        runpy.run_module("samsa.cli", run_name="__main__", alter_sys=True)
    finally:
        profile.disable()


if __name__ == "__main__":
    main()
