"""A wall clock that the fault tests can move, loaded into a broker process (this directory on
its PYTHONPATH, ``SAMSA_CLOCK_FILE`` in its environment).

``time.time`` and ``time.time_ns`` (what the broker's timestamps, timeouts and retention read)
add the offset in seconds written in that file, read again at most every 0.2 s of the
monotonic clock, which stays true as a real machine's does when its wall clock jumps. This
stands in for libfaketime, which breaks CPython's ``time.sleep`` (EINVAL from
``clock_nanosleep``) on this project's machines."""

from __future__ import annotations

import os
import time

_FILE = os.environ.get("SAMSA_CLOCK_FILE")

if _FILE:
    _real_time, _real_time_ns, _monotonic = time.time, time.time_ns, time.monotonic
    _state = {"offset_ns": 0, "read_at": -1.0}

    def _offset_ns() -> int:
        now = _monotonic()
        if now - _state["read_at"] >= 0.2:
            _state["read_at"] = now
            try:
                with open(_FILE) as f:  # noqa: PTH123 - the shim keeps its imports minimal
                    _state["offset_ns"] = int(float(f.read().strip() or 0) * 1e9)
            except (OSError, ValueError):
                pass
        return int(_state["offset_ns"])

    def _time() -> float:
        return _real_time() + _offset_ns() / 1e9

    def _time_ns() -> int:
        return _real_time_ns() + _offset_ns()

    time.time = _time
    time.time_ns = _time_ns
