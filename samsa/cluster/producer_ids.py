"""Producer id allocation for a single node, in blocks persisted before use.

Like Kafka's ZooKeeper-mode ProducerIdManager: the end of the block in use is written to disk
before any id of it is handed out, so a restart never reuses an id. The block file is in the
single node's metadata dir (its first log dir, see ``samsa.cluster.topics``): an I/O error on
it takes that dir offline (``failures``) and no id is handed out (KafkaStorageError). In
cluster mode the blocks come from ZooKeeper and the file is never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from samsa.durable import write_atomically
from samsa.errors import KafkaStorageError
from samsa.storage.log_dir_failure import LogDirFailureChannel

PRODUCER_IDS_FILE = "__samsa_producer_id_block"
BLOCK_SIZE = 1000


class ProducerIdManager:
    """Ids from a local block file (one node), or from ``take_block`` (cluster mode:
    ZooKeeper's ``/latest_producer_id_block``, so ids are unique across brokers)."""

    def __init__(self, directory: Path,
                 take_block: Callable[[], tuple[int, int]] | None = None,
                 failures: LogDirFailureChannel | None = None) -> None:
        self.take_block = take_block
        self.directory = Path(directory)
        self.path = self.directory / PRODUCER_IDS_FILE
        self._failures = failures
        self._next = 0
        if take_block is None:
            try:
                self._next = int(self.path.read_text().strip())
            except (FileNotFoundError, ValueError):
                pass
            except OSError as exc:
                self._io_error("reading", exc)
        self._block_end = self._next

    def _io_error(self, what: str, exc: OSError) -> None:
        if self._failures is not None:
            self._failures.maybe_add_offline_log_dir(
                self.directory, f"{what} {PRODUCER_IDS_FILE}", exc)
        raise KafkaStorageError(f"I/O error {what} {self.path}: {exc}") from exc

    def next_id(self) -> int:
        if self.take_block is not None:
            if self._next >= self._block_end:
                start, end = self.take_block()
                self._next, self._block_end = start, end + 1
            pid = self._next
            self._next += 1
            return pid
        if self._next >= self._block_end:
            end = self._next + BLOCK_SIZE
            if self._failures is not None and self._failures.is_offline(self.directory):
                raise KafkaStorageError(f"the log dir {self.directory} of {PRODUCER_IDS_FILE} "
                                        "is offline")
            try:
                write_atomically(self.path, str(end).encode())
            except OSError as exc:
                self._io_error("writing", exc)
            self._block_end = end
        pid = self._next
        self._next += 1
        return pid
