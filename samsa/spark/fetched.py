"""Which batches of a Fetch answer a consumer returns records of, as Kafka's Java consumer
decides (``CompletedFetch.nextFetchedRecord``): whole batches only (a fetch may end inside
one), never a control batch (transaction markers), and under read_committed never a batch of a
transaction the answer lists as aborted.

Under read_committed the answer's aborted transactions are (producer id, first offset) pairs; a
transactional batch of a producer is skipped from the first offset of its aborted transaction
until that producer's abort marker, which closes it (a later transaction of the producer may
commit).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from samsa.records.batch import BatchHeader, iter_headers
from samsa.records.control import read_marker


@dataclass(frozen=True)
class Visible:
    """The batches to decode (``(position, header)`` in the answer's records) and the offset
    after the last whole batch, where the next fetch starts (None: no whole batch)."""

    batches: list[tuple[int, BatchHeader]]
    next_offset: int | None


def visible_batches(
    records: bytes | memoryview,
    *,
    read_committed: bool,
    aborted: Iterable[tuple[int, int]] = (),
) -> Visible:
    """The batches of ``records`` (one partition's records of a Fetch answer) whose records a
    consumer returns; ``aborted``: the answer's aborted transactions, (producer id, first
    offset), used under read_committed only."""
    pending = sorted((first, pid) for pid, first in aborted) if read_committed else []
    aborting: set[int] = set()
    out: list[tuple[int, BatchHeader]] = []
    next_offset: int | None = None
    for pos, header in iter_headers(records):
        next_offset = header.next_offset
        if header.magic != 2:
            # an old message set (v0/v1) is not read here; the caller falls back
            raise UnsupportedBatch(f"message format v{header.magic} at offset "
                                   f"{header.base_offset}")
        if read_committed and header.producer_id >= 0:
            while pending and pending[0][0] <= header.last_offset:
                aborting.add(heapq.heappop(pending)[1])
            if header.is_control:
                if header.producer_id in aborting and _is_abort(records, pos, header):
                    aborting.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborting:
                continue
        if header.is_control:
            continue
        out.append((pos, header))
    return Visible(out, next_offset)


class UnsupportedBatch(Exception):
    """A batch of a format this reader does not decode (magic 0 or 1)."""


def _is_abort(records: bytes | memoryview, pos: int, header: BatchHeader) -> bool:
    marker = read_marker(memoryview(records)[pos : pos + header.size])
    return marker is not None and not marker.commit

