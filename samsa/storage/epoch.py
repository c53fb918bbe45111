"""Leader epoch -> start offset history of one partition (``leader-epoch-checkpoint``).

Kept so that OffsetForLeaderEpoch can tell a consumer or follower where an epoch ended, which
is how a reader detects that the log it followed was truncated (KIP-101, KIP-320).
"""

from __future__ import annotations

from pathlib import Path

from samsa.storage.checkpoint import LEADER_EPOCH_FILE, read_epochs, write_epochs

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / LEADER_EPOCH_FILE
        self.entries: list[tuple[int, int]] = read_epochs(self.path)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (ignored unless it is newer)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries.append((epoch, start_offset))
        self._save()

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka answers OffsetForLeaderEpoch: the end offset of the
        largest epoch <= ``requested`` is the start offset of the next epoch."""
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == self.latest_epoch:
            return requested, log_end_offset
        higher = next((e for e in self.entries if e[0] > requested), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = [e for e in self.entries if e[0] <= requested]
        return (floor[-1][0] if floor else requested), higher[1]

    def epoch_for(self, offset: int) -> int:
        """The leader epoch in which ``offset`` was (or will be) written; -1 when unknown."""
        epoch = UNDEFINED_EPOCH
        for e, start in self.entries:
            if start > offset:
                break
            epoch = e
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was cut there)."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch that covers it starts there."""
        before = [e for e in self.entries if e[1] <= start_offset]
        if not before or (len(before) == 1 and before[0][1] == start_offset):
            return
        kept = [(before[-1][0], start_offset)] + [e for e in self.entries if e[1] > start_offset]
        self.entries = kept
        self._save()

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Take another replica's history (a copy of the log that replaces it)."""
        if entries != self.entries:
            self.entries = list(entries)
            self._save()

    def clear(self) -> None:
        self.entries = []
        self._save()

    def _save(self) -> None:
        write_epochs(self.path, self.entries)
