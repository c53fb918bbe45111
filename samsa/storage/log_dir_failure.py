"""Which log directories have failed (Kafka's LogDirFailureChannel): the one place that knows.

Any I/O error under a log directory (an append, a flush, a segment roll, an index or checkpoint
write; a full disk, ENOSPC, included) takes the whole directory offline for the life of the
process, as Kafka does: what the failed write left on disk is not trusted again until the
broker restarts and recovers the directory. ``Log`` reports its own errors here and refuses
further work once its directory is offline; ``LogManager`` and ``Replicas`` ask here which
partitions are offline (their requests answer KAFKA_STORAGE_ERROR); the broker is told of each
newly offline directory (``listeners``), on whatever thread the error happened, and handles it
on its event loop (Kafka's LogDirFailureHandler thread): it stops serving the directory's
partitions, tells the controller, and halts once every directory is offline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}  # directory -> what failed there first
        self._lock = threading.Lock()
        # told (directory) once, when it goes offline; may be any thread
        self.listeners: list[Callable[[Path], None]] = []

    def maybe_add_offline_log_dir(self, directory: Path, message: str,
                                  error: BaseException | None = None) -> bool:
        """Take ``directory`` offline (``message``: what failed, ``error``: the I/O error);
        True when this call did it, False when it already was."""
        directory = Path(directory)
        with self._lock:
            if directory in self._offline:
                return False
            self._offline[directory] = f"{message}: {error}" if error is not None else message
        log.error("log directory %s is offline: %s%s", directory, message,
                  f" ({error})" if error is not None else "")
        for listener in list(self.listeners):
            listener(directory)
        return True

    def is_offline(self, directory: Path) -> bool:
        return directory in self._offline

    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Every offline directory and the failure that took it offline."""
        with self._lock:
            return dict(self._offline)
