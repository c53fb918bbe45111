"""Producer id allocation for a single node, in blocks persisted before use.

Like Kafka's ZooKeeper-mode ProducerIdManager: the end of the block in use is written to disk
before any id of it is handed out, so a restart never reuses an id.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from samsa.durable import write_atomically

PRODUCER_IDS_FILE = "__samsa_producer_id_block"
BLOCK_SIZE = 1000


class ProducerIdManager:
    """Ids from a local block file (one node), or from ``take_block`` (cluster mode:
    ZooKeeper's ``/latest_producer_id_block``, so ids are unique across brokers)."""

    def __init__(self, directory: Path,
                 take_block: Callable[[], tuple[int, int]] | None = None) -> None:
        self.take_block = take_block
        self.path = Path(directory) / PRODUCER_IDS_FILE
        try:
            self._next = int(self.path.read_text().strip())
        except (FileNotFoundError, ValueError):
            self._next = 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self.take_block is not None:
            if self._next >= self._block_end:
                start, end = self.take_block()
                self._next, self._block_end = start, end + 1
            pid = self._next
            self._next += 1
            return pid
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_atomically(self.path, str(self._block_end).encode())
        pid = self._next
        self._next += 1
        return pid
