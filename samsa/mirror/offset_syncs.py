"""Offset syncs: when MM2 emits an (upstream, downstream) pair, and how checkpoints translate a
group's upstream offset with them (Kafka's OffsetSyncWriter.PartitionState and
OffsetSyncStore.translateDownstream)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from samsa.tools.mirror_client import OffsetSync

# Syncs kept per partition for translation; older ones are thinned out (Kafka keeps 64 with
# exponentially spaced offsets; a group far behind translates against the oldest kept).
SYNCS_PER_PARTITION = 64


@dataclass
class PartitionState:
    """Decides, record by record, whether a copied record's offsets are worth a sync."""

    max_offset_lag: int
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1

    def update(self, upstream: int, downstream: int, contiguous: bool | None = None) -> bool:
        """True when this record's pair should be synced now: the first of this lifetime, the
        last sync too stale (offset.lag.max), an upstream gap (compaction, transaction markers,
        a seek) or a downstream rewind (the remote topic truncated).

        ``contiguous``: whether the record directly followed its upstream predecessor, for a
        caller that shows only some records (None: every record is shown)."""
        gap = (upstream - self.previous_upstream != 1 if contiguous is None
               else not contiguous)
        emit = (self.last_sync_downstream == -1
                or downstream - (self.last_sync_downstream + 1) >= self.max_offset_lag
                or gap
                or downstream < self.previous_downstream)
        if emit:
            self.last_sync_downstream = downstream
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        return emit


@dataclass
class OffsetSyncStore:
    """The syncs read from the offset-syncs topic, by source topic partition."""

    syncs: dict[tuple[str, int], list[OffsetSync]] = field(default_factory=dict)
    read_to_end: bool = False

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        kept = self.syncs.setdefault(key, [])
        if kept and sync.upstream_offset < kept[-1].upstream_offset:
            # the upstream topic was rewound (recreated, truncated): older syncs mean nothing
            kept.clear()
        elif kept and sync.upstream_offset == kept[-1].upstream_offset:
            kept.pop()
        kept.append(sync)
        if len(kept) > SYNCS_PER_PARTITION:
            # drop every other of the older half: recent syncs stay dense, old ones sparse
            half = len(kept) // 2
            del kept[1:half:2]

    def translate_downstream(self, topic: str, partition: int, upstream: int) -> int | None:
        """The downstream offset a group at ``upstream`` may resume from: None while the syncs
        topic was not yet read to its end or the partition has no sync, -1 when the offset is
        older than every sync kept (not translatable, no checkpoint)."""
        if not self.read_to_end:
            return None
        kept = self.syncs.get((topic, partition))
        if not kept:
            return None
        i = bisect.bisect_right([s.upstream_offset for s in kept], upstream) - 1
        if i < 0:
            return -1
        sync = kept[i]
        # Past a sync only one offset past its downstream is known to be safe: records after it
        # may have been filtered or not yet copied, and overshooting would skip records.
        return sync.downstream_offset + (0 if upstream == sync.upstream_offset else 1)
