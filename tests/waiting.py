"""Polling with a deadline, for tests that wait on something another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DEFAULT_TIMEOUT_S = 20.0


def wait_for(predicate: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT_S,
             what: str = "condition", interval: float = 0.05,
             details: Callable[[], str] | None = None) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{extra}")
        time.sleep(interval)
