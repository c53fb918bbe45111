"""MirrorMaker: the flows, checkpoints and heartbeats of one mm2.properties, each in a thread,
until stopped; the first thread to fail stops the others and its error is raised."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from samsa.mirror.checkpoint import CheckpointFlow
from samsa.mirror.config import MirrorMakerConfig
from samsa.mirror.heartbeat import Heartbeats
from samsa.mirror.metrics import Progress
from samsa.mirror.source import SourceFlow
from samsa.mirror.task import MirrorTask
from samsa.tools.common import describe_error


class MirrorError(RuntimeError):
    """A flow failed: one line naming it."""


class MirrorMaker:
    def __init__(self, config: MirrorMakerConfig, clusters: Iterable[str] | None = None,
                 worker_id: str | None = None) -> None:
        """``clusters``: run only the flows into these targets (connect-mirror-maker.sh's
        --clusters); all by default."""
        self.config = config
        self.stop_event = threading.Event()
        targets = set(clusters) if clusters else set(config.clusters)
        unknown = targets - set(config.clusters)
        if unknown:
            raise MirrorError(f"--clusters: {', '.join(sorted(unknown))} not in clusters")
        flows = [f for f in config.flows() if f.target in targets]
        # tasks.max copy loops per flow in this process, sharing its partitions as workers do
        self.sources = [SourceFlow(config, f, self.stop_event, worker_id, task)
                        for f in flows for task in range(config.get_int(f, "tasks.max"))]
        self.checkpoints = [
            CheckpointFlow(config, s.flow, self.stop_event, s.metrics) for s in self.sources
            if s.task == 0 and (config.get_bool(s.flow, "emit.checkpoints.enabled")
                                or config.get_bool(s.flow, "sync.group.offsets.enabled"))]
        self.heartbeats = Heartbeats(config, self.stop_event)
        self.heartbeats.pairs = [p for p in self.heartbeats.pairs if p.target in targets]
        self.tasks: list[MirrorTask] = [*self.sources, *self.checkpoints]
        if self.heartbeats.pairs:
            self.tasks.append(self.heartbeats)
        self.progress = Progress([s.metrics for s in self.sources])
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for i, task in enumerate(self.tasks):
            thread = threading.Thread(target=task.run, name=f"mirror-{i}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def wait_ready(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        return all(s.ready.wait(max(0.0, deadline - time.monotonic())) for s in self.sources)

    def stop(self, timeout: float = 60.0) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def failure(self) -> str | None:
        for task in self.tasks:
            if task.error is not None:
                name = getattr(task, "flow", "heartbeats")
                return f"{name}: {describe_error(task.error) or type(task.error).__name__}"
        return None

    def run(self, progress_interval_s: float, report: Callable[[str], None]) -> None:
        """Run until stop_event is set (a signal) or a task fails; report progress lines."""
        self.start()
        next_report = time.monotonic() + progress_interval_s
        while not self.stop_event.wait(0.2):
            if time.monotonic() >= next_report:
                report(self.progress.line())
                next_report += progress_interval_s
        self.stop()
        report(self.progress.line())
        failure = self.failure()
        if failure is not None:
            raise MirrorError(failure)
