"""``samsa.Broker``: a broker inside your Python process, for development and tests.

    with samsa.Broker(tmp_path) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    async with samsa.Broker(tmp_path, num_partitions=3) as broker: ...

Keyword arguments are broker config keys with dots written as underscores
(``log_segment_bytes=1048576``); ``config={"log.segment.bytes": ...}`` takes Kafka's names as
they are. By default the broker listens on a free loopback port and, as Kafka's test
harnesses do, sets ``group.initial.rebalance.delay.ms=0``. Used synchronously, it runs its
event loop in a background thread.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samsa.server.kafka_server import KafkaServer
from samsa.storage.log_cleaner import CleanerMetrics

log = logging.getLogger(__name__)

_START_TIMEOUT = 60


class Broker:
    def __init__(
        self,
        data_dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        self._temp = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="samsa-")) if data_dir is None else Path(
            data_dir
        )
        props: dict[str, Any] = {
            "log.dirs": str(self.data_dir),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            # As Kafka's own test harnesses do: a test's first consumer should not wait 3 s.
            "group.initial.rebalance.delay.ms": 0,
        }
        props.update(config or {})
        props.update({k.replace("_", "."): v for k, v in overrides.items()})
        self.server = KafkaServer(props)
        # every log directory failed: a broker process halts, an embedded one stops serving
        self.server.halt = self._halt
        self.halted: str | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _halt(self, message: str) -> None:
        log.critical("%s", message)
        self.halted = message
        self._stopping = asyncio.get_running_loop().create_task(self.server.stop())

    @property
    def bootstrap_servers(self) -> str:
        return self.server.bootstrap_servers

    @property
    def port(self) -> int:
        return self.server.bound[0].port

    def cleaner_metrics(self) -> CleanerMetrics | None:
        """The log cleaner's counters (None with ``log.cleaner.enable=false``)."""
        cleaner = self.server.cleaner
        return None if cleaner is None else cleaner.metrics

    # --- async use ------------------------------------------------------------------------

    async def __aenter__(self) -> Broker:
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()
        self._cleanup()

    # --- sync use -------------------------------------------------------------------------

    def __enter__(self) -> Broker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the broker on its own event loop thread; returns once it serves requests."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="samsa-broker", daemon=True)
        self._thread.start()
        if not ready.wait(_START_TIMEOUT):
            raise TimeoutError("samsa broker did not start within 60 s")
        if failure:
            raise failure[0]

    def stop(self) -> None:
        """Graceful shutdown (flush, checkpoints, clean-shutdown marker)."""
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_START_TIMEOUT)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._temp:
            shutil.rmtree(self.data_dir, ignore_errors=True)
