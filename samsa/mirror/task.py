"""What the runner's threads run: a task whose failure is kept for the runner and stops the
other tasks (the runner then raises it as one line)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod


class MirrorTask(ABC):
    stop: threading.Event
    error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # handed to the runner, which stops the process
            self.error = exc
            self.stop.set()

    @abstractmethod
    def _run(self) -> None:
        """The task's work, until ``stop`` is set."""
