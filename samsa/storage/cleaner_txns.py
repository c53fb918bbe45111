"""What the log cleaner may remove of transactions, by Kafka's rules (KIP-98, KIP-534).

* Batches of aborted transactions go (they never enter the offset map either).
* An abort marker stays while any batch of its transaction was seen in this pass, and its
  ``.txnindex`` entry goes with it into the cleaned segment; once none is left, the marker may
  go.
* A commit marker stays while any batch of its transaction was seen in this pass; once none is
  left it may go (otherwise a reload would find the transaction's data without its end).
* A marker that may go first gets a delete horizon (as tombstones do) and is removed by a pass
  after it, so read_committed consumers that are behind still see it. A producer's last
  marker stays regardless: it carries the epoch that fences zombies.

One ``TxnCleaning`` serves a whole cleaning pass, whose groups of segments run in log order
from the log start; aborted transactions come from the segments' transaction indexes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping

from samsa.records.batch import BatchHeader
from samsa.records.control import Marker
from samsa.storage.txn_index import AbortedTxn


class TxnCleaning:
    def __init__(
        self, aborted: Iterable[AbortedTxn], last_markers: Mapping[int, tuple[int, int]]
    ) -> None:
        """``last_markers``: producer id -> (epoch, offset after which that producer has no
        data) for producers whose newest entry in the log may be a marker."""
        self._aborted: dict[int, list[AbortedTxn]] = {}
        for txn in sorted(aborted, key=lambda t: t.first_offset):
            self._aborted.setdefault(txn.producer_id, []).append(txn)
        self._firsts = {pid: [t.first_offset for t in txns]
                        for pid, txns in self._aborted.items()}
        self._last_markers = last_markers
        self._seen_aborted: set[tuple[int, int]] = set()  # (pid, first offset) with batches
        self._open_committed: set[int] = set()
        self.index_entries: list[AbortedTxn] = []  # for the group being written

    def aborted_txn(self, header: BatchHeader) -> AbortedTxn | None:
        """The aborted transaction a data batch belongs to, if any."""
        if not header.is_transactional or header.is_control:
            return None
        firsts = self._firsts.get(header.producer_id)
        if not firsts:
            return None
        i = bisect_right(firsts, header.base_offset) - 1
        if i < 0:
            return None
        txn = self._aborted[header.producer_id][i]
        return txn if header.base_offset < txn.last_offset else None

    def on_batch(self, header: BatchHeader) -> bool:
        """Note a data batch; True when it belongs to an aborted transaction (drop it)."""
        txn = self.aborted_txn(header)
        if txn is not None:
            self._seen_aborted.add((txn.producer_id, txn.first_offset))
            return True
        if header.is_transactional:
            self._open_committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: Marker) -> bool:
        """Note a marker; True when it may go (after its delete horizon)."""
        pid = header.producer_id
        if marker.commit:
            seen = pid in self._open_committed
            self._open_committed.discard(pid)
            removable = not seen
        else:
            txn = self._aborted_ending_at(pid, header.base_offset)
            seen = txn is not None and (pid, txn.first_offset) in self._seen_aborted
            if seen and txn is not None:
                self.index_entries.append(txn)
            removable = not seen
        last = self._last_markers.get(pid)
        if last is not None and last[0] == header.producer_epoch and header.base_offset > last[1]:
            return False  # the producer's newest word: keep its epoch in the log
        return removable

    def _aborted_ending_at(self, pid: int, offset: int) -> AbortedTxn | None:
        for txn in self._aborted.get(pid, ()):
            if txn.last_offset == offset:
                return txn
        return None

    def take_index_entries(self) -> list[AbortedTxn]:
        entries, self.index_entries = self.index_entries, []
        return entries
