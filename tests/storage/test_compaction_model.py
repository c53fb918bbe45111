"""Stateful property test of log compaction (``samsa.storage.cleaner``) against a model.

Random sequences of keyed appends (values and tombstones, every codec, some from idempotent
producers), segment rolls, cleanings at random points (full-size and tiny offset maps, so that
the map fills and a cleaning stops early), a clock that moves past ``delete.retention.ms`` and
``min.compaction.lag.ms``, clean and crash-style reopens, and crashes in the middle of a
cleaner's segment swap. The model remembers every record ever appended (offset -> key, value,
timestamp, the clock at append) and which offsets the log still holds.

After every step the whole log is read back, from the log start to the log end as a consumer
would (``Log.read`` returns one segment's region at a time), and must satisfy:

(a) offsets strictly increase and keep their meaning: every record read is the one appended at
    its offset (key, value, timestamp); nothing removed ever comes back;
(b) the latest record of every key is still there, unless it is a tombstone that a cleaning
    at least ``delete.retention.ms`` after its append removed; a key whose latest tombstone is
    gone has no older value left (no resurrection);
(c) a tombstone appended less than ``delete.retention.ms`` ago is still readable;
(d) records at or after the first uncleanable offset of a cleaning (the active segment, and
    segments younger than ``min.compaction.lag.ms``) are not removed by it;
(e) every batch has a valid CRC-32C, the base offset and last offset of the batch it was
    appended in, the same producer id / epoch / base sequence, its codec (an empty batch
    excepted), a max timestamp covering its records, and a delete horizon only when it holds a
    tombstone, stamped as some cleaning's time + ``delete.retention.ms``;
(f) an idempotent producer, after cleanings and reopens, can append its next sequence and a
    retry of its last batch is answered as a duplicate with the original offsets.

Also on the way: DeleteRecords and (``cleanup.policy=compact,delete``) retention move the log
start offset (records below it no longer count), LogAppendTime topics, tiny index files,
ListOffsets by timestamp and -3 on the compacted log.

Removals happen only in cleaning steps; there every removed record is justified by a later
record of its key or by an expired tombstone.

The two bugs this model found (tombstones past a full map's end removed, stale max timestamps
of rewritten batches) are fixed; their reproductions are at the end.
``SAMSA_COMPACTION_EXAMPLES`` sets the examples per test (100; 600 for a longer hunt),
``SAMSA_COMPACTION_SHRINK=1`` shrinks a failure (minutes: every step does file I/O; off by
default to keep a failing run bounded).
"""

from __future__ import annotations

import itertools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from samsa.config import LogConfig
from samsa.records.batch import Attr, BatchHeader, Compression, crc_of, read_header
from samsa.records.record import Record, RecordInput, decode_records, encode_batch
from samsa.storage.cleaner import (
    CleanerError,
    CleanStats,
    OffsetMap,
    build_offset_map,
    clean_log,
    cleanable,
    group_segments,
    write_cleaned,
)
from samsa.storage.log import Log

from .conftest import FakeClock, split_batches

KEYS = [b"k0", b"k1", b"k2", b"k3"]
PRODUCER_IDS = [7001, 7002]
BIG_MAP = 100_000
EXAMPLES = int(os.environ.get("SAMSA_COMPACTION_EXAMPLES", "100"))
SHRINK = os.environ.get("SAMSA_COMPACTION_SHRINK") == "1"


def check(ok: bool, message: str) -> None:
    if not ok:
        raise AssertionError(message)


# (key, value or None for a tombstone, how many ms before the clock its timestamp is)
records_strategy = st.lists(
    st.tuples(
        st.sampled_from(KEYS),
        st.one_of(st.none(), st.binary(min_size=0, max_size=12)),
        st.integers(0, 20),
    ),
    min_size=1,
    max_size=5,
)
codecs = st.one_of(st.just(Compression.NONE), st.sampled_from(list(Compression)))
producers = st.one_of(st.none(), st.sampled_from(PRODUCER_IDS))
# Tiny maps (1..5 entries, batches hold up to 5 records) fill up and stop a cleaning early,
# or raise CleanerError when the first dirty batch alone does not fit.
map_caps = st.one_of(st.just(BIG_MAP), st.integers(1, 5))

configs = st.builds(
    LogConfig,
    cleanup_policy=st.sampled_from([("compact",), ("compact",), ("compact", "delete")]),
    segment_bytes=st.integers(250, 700),
    index_interval_bytes=st.sampled_from([0, 100, 4096]),
    # As small as one or two entries: segments roll on a full index, merged ones overflow it.
    segment_index_bytes=st.sampled_from([LogConfig().segment_index_bytes, 16, 40]),
    delete_retention_ms=st.sampled_from([0, 500, 5000]),
    min_compaction_lag_ms=st.sampled_from([0, 0, 2000]),
    retention_ms=st.sampled_from([-1, 1000, 6000]),
    message_timestamp_type=st.sampled_from(["CreateTime", "CreateTime", "LogAppendTime"]),
)


@dataclass(frozen=True)
class Written:
    key: bytes
    value: bytes | None
    timestamp: int
    appended_at: int  # the clock at the append
    batch_base: int


@dataclass(frozen=True)
class WrittenBatch:
    base: int
    last: int
    codec: Compression
    producer_id: int
    producer_epoch: int
    base_sequence: int


@dataclass
class ProducerModel:
    next_seq: int = 0
    last_bytes: bytes | None = None  # the client's bytes of its last batch, for a retry
    last_first: int = -1
    last_last: int = -1



def read_log(log: Log) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from the log start to the log end, through ``Log.read``."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        region = log.read(offset, 2**31 - 1)
        if region is None:
            break
        batches = split_batches(region.read())
        assert batches, f"an empty region at offset {offset}"
        for batch in batches:
            out.append((read_header(batch), batch))
        nxt = out[-1][0].next_offset
        assert nxt > offset, f"read at {offset} did not move forward"
        offset = nxt
    return out


def scan_segments(log: Log) -> list[bytes]:
    """Every batch of every segment file, straight from the files (to cross-check read)."""
    out = []
    for segment in log.segments:
        for pos, header in segment.scan(0):
            out.append(segment.read_bytes(pos, header.size))
    return out


class CompactionMachine(RuleBasedStateMachine):
    def __init__(self, directory: Path, *, tiny_maps: bool) -> None:
        super().__init__()
        self.dir = directory
        self.tiny_maps = tiny_maps  # else every map is big enough for the whole dirty range
        self.clock = FakeClock()
        self.cfg = LogConfig(cleanup_policy=("compact",))
        self.log: Log | None = None
        self.written: dict[int, Written] = {}
        self.batches: dict[int, WrittenBatch] = {}  # by base offset
        self.latest: dict[bytes, int] = {}  # key -> offset of its last record written
        self.present: set[int] = set()  # offsets the log must hold right now
        self.checkpoint: int | None = None  # the cleaner's checkpoint (first dirty offset)
        self.clean_times: set[int] = set()
        self.producers = {pid: ProducerModel() for pid in PRODUCER_IDS}
        self.leo = 0
        self.start = 0  # the log start offset (DeleteRecords, retention)

    # --- helpers ------------------------------------------------------------------------------

    def open_log(self, *, clean: bool, recovery_point: int = 0) -> None:
        self.log = Log(
            self.dir, self.cfg, recovery_point=recovery_point, log_start_offset=self.start,
            had_clean_shutdown=clean, clock=self.clock,
        )
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.start

    def records_by_offset(self) -> dict[int, Record]:
        """The records a consumer sees (a batch that holds the log start offset comes whole:
        its records below it do not count)."""
        out: dict[int, Record] = {}
        for _, batch in read_log(self.log):
            for record in decode_records(batch):
                if record.offset >= self.start:
                    out[record.offset] = record
        return out

    def move_start(self, new_start: int) -> None:
        assert self.start <= new_start <= self.leo
        self.start = new_start
        self.present = {o for o in self.present if o >= new_start}

    def check_removals(self, removed: set[int], now: int, first_uncleanable: int,
                       map_end: int, what: str) -> None:
        """Records a cleaning at ``now`` whose offset map ended at ``map_end`` removed must
        have been removable."""
        lag = self.cfg.min_compaction_lag_ms
        for offset in sorted(removed):
            w = self.written[offset]
            assert offset < first_uncleanable, (
                f"{what} removed offset {offset} at or after the first uncleanable offset "
                f"{first_uncleanable}"
            )
            check(
                offset < map_end,
                f"{what} removed offset {offset} ({w}) past its offset map's end {map_end}",
            )
            if lag > 0:
                assert w.timestamp <= now - lag, (
                    f"{what} removed offset {offset} (timestamp {w.timestamp}) younger than "
                    f"min.compaction.lag.ms {lag} at {now}"
                )
            if self.latest[w.key] == offset:
                assert w.value is None, (
                    f"{what} removed offset {offset}, the latest value of key {w.key!r}"
                )
                age = now - w.appended_at
                assert age >= self.cfg.delete_retention_ms, (
                    f"{what} removed the tombstone of {w.key!r} at offset {offset} only {age} ms "
                    f"after its append (delete.retention.ms {self.cfg.delete_retention_ms})"
                )

    def clean_and_check(self, cap: int) -> None:
        cap = cap if self.tiny_maps else BIG_MAP
        now = self.clock.now
        state = cleanable(self.log, self.checkpoint, now)
        active_base = self.log.active.base_offset
        assert state.first_uncleanable <= active_base
        assert state.first_dirty <= state.first_uncleanable
        if self.checkpoint is not None:
            assert state.first_dirty >= min(self.checkpoint, state.first_uncleanable)
        before = set(self.records_by_offset())
        assert before == self.present
        raw_before = scan_segments(self.log)
        try:
            stats = clean_log(self.log, state.first_dirty, state.first_uncleanable,
                              OffsetMap(cap), now_ms=now)
        except CleanerError:
            # Only when the first dirty batch alone is bigger than the map; nothing changed.
            assert cap < BIG_MAP
            assert scan_segments(self.log) == raw_before
            return
        assert state.first_dirty <= stats.end_offset <= state.first_uncleanable
        self.checkpoint = stats.end_offset
        self.clean_times.add(now)
        after = set(self.records_by_offset())
        assert after <= before, f"cleaning brought back offsets {sorted(after - before)}"
        self.check_removals(before - after, now, state.first_uncleanable, stats.end_offset,
                            "a cleaning")
        self.present = after
        assert self.log.log_end_offset == self.leo

    # --- rules --------------------------------------------------------------------------------

    @initialize(cfg=configs)
    def create(self, cfg: LogConfig) -> None:
        self.cfg = cfg
        self.open_log(clean=False)

    @rule(records=records_strategy, codec=codecs, pid=producers)
    def append(self, records, codec: Compression, pid: int | None) -> None:
        now = self.clock.now
        producer = self.producers[pid] if pid is not None else None
        extra = {}
        if producer is not None:
            extra = dict(producer_id=pid, producer_epoch=0, base_sequence=producer.next_seq)
        data = encode_batch(
            [RecordInput(value, key=key, timestamp=now - back) for key, value, back in records],
            compression_type=codec, **extra,
        )
        append_time = self.cfg.log_append_time
        info = self.log.append(data, leader_epoch=0)
        assert not info.duplicate
        assert info.first_offset == self.leo
        assert info.last_offset == self.leo + len(records) - 1
        base = self.leo
        header = read_header(data)
        self.batches[base] = WrittenBatch(
            base, info.last_offset, codec, header.producer_id, header.producer_epoch,
            header.base_sequence,
        )
        for i, (key, value, back) in enumerate(records):
            timestamp = now if append_time else now - back
            self.written[base + i] = Written(key, value, timestamp, now, base)
            self.latest[key] = base + i
            self.present.add(base + i)
        self.leo = info.last_offset + 1
        if producer is not None:
            producer.next_seq += len(records)
            producer.last_bytes = data
            producer.last_first, producer.last_last = info.first_offset, info.last_offset

    @rule(batches=st.lists(st.tuples(records_strategy, codecs, producers), min_size=2,
                           max_size=10))
    def append_several(self, batches) -> None:
        """Appends are most of a log's life: several per step, so segments fill and roll."""
        for records, codec, pid in batches:
            self.append(records, codec, pid)

    @rule(key=st.sampled_from(KEYS), pid=producers)
    def delete_key(self, key: bytes, pid: int | None) -> None:
        self.append([(key, None, 0)], Compression.NONE, pid)

    @precondition(lambda self: any(p.last_bytes for p in self.producers.values()))
    @rule(pick=st.sampled_from(PRODUCER_IDS))
    def retry_last_batch(self, pick: int) -> None:
        """(f) a retry of a producer's last batch is a duplicate with the original offsets."""
        producer = self.producers[pick]
        if producer.last_bytes is None:
            pick = next(pid for pid, p in self.producers.items() if p.last_bytes)
            producer = self.producers[pick]
        if producer.last_first < self.start:
            # Its last batch went with the log start offset (DeleteRecords, retention): the
            # producer may be forgotten, as Kafka forgets it, and the retry written anew.
            return
        info = self.log.append(producer.last_bytes, leader_epoch=0)
        assert info.duplicate, f"producer {pick}: a retry of its last batch was appended again"
        assert (info.first_offset, info.last_offset) == (producer.last_first, producer.last_last)
        assert self.log.log_end_offset == self.leo

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.one_of(st.integers(1, 300), st.sampled_from([501, 2001, 5001])))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(cap=map_caps)
    def clean(self, cap: int) -> None:
        self.clean_and_check(cap)

    @rule(cap=map_caps, rounds=st.integers(2, 4), ms=st.sampled_from([0, 1, 501, 5001]))
    def clean_rounds(self, cap: int, rounds: int, ms: int) -> None:
        """A cleaner thread's loop: passes with a clock step between (a tombstone's horizon
        stamped by one pass may have passed at the next)."""
        for _ in range(rounds):
            self.clean_and_check(cap)
            self.clock.advance(ms)

    @rule(pick=st.integers(0, 2**16), delta=st.sampled_from([-1, 0, 1]))
    def offset_for_timestamp(self, pick: int, delta: int) -> None:
        """ListOffsets by timestamp on a compacted log: the first record still there whose
        timestamp is at least the target."""
        records = self.records_by_offset()
        if records:
            target = list(records.values())[pick % len(records)].timestamp + delta
        else:
            target = self.clock.now - pick % 50
        expected = next(
            ((o, r.timestamp) for o, r in sorted(records.items()) if r.timestamp >= target), None
        )
        found = self.log.offset_for_timestamp(target)
        assert (None if found is None else (found.offset, found.timestamp)) == expected

    @rule()
    def max_timestamp_offset(self) -> None:
        """ListOffsets -3 (KIP-734) on a compacted log. An idempotent producer's emptied batch
        keeps its max timestamp (as in Kafka), so the answer may be newer than every record
        still there, and name that batch's last offset."""
        records = self.records_by_offset()
        found = self.log.max_timestamp_offset()
        if not records:
            return
        assert found is not None
        assert found.timestamp >= max(r.timestamp for r in records.values())
        assert found.offset < self.leo
        if found.offset in records:
            check(
                records[found.offset].timestamp == found.timestamp,
                f"ListOffsets -3 answered {found}, record {found.offset} has timestamp "
                f"{records[found.offset].timestamp}",
            )

    @rule(pick=st.integers(0, 2**16))
    def delete_records(self, pick: int) -> None:
        """DeleteRecords on a compacted topic: the log start offset moves, whole segments
        below it go."""
        target = self.start + pick % (self.leo - self.start + 1)
        assert self.log.delete_records_before(target) == target
        self.move_start(target)

    @precondition(lambda self: self.cfg.delete)
    @rule()
    def apply_retention(self) -> None:
        """cleanup.policy=compact,delete: segments past retention.ms go as well."""
        now = self.clock.now
        self.log.delete_old_segments()
        new_start = self.log.log_start_offset
        for offset in sorted(o for o in self.present if o < new_start):
            age = now - self.written[offset].timestamp
            assert age > self.cfg.retention_ms, (
                f"retention removed offset {offset}, {age} ms old (retention.ms "
                f"{self.cfg.retention_ms})"
            )
        self.move_start(new_start)

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.open_log(clean=True, recovery_point=self.leo)

    @rule(from_zero=st.booleans())
    def reopen_after_crash(self, from_zero: bool) -> None:
        recovery_point = 0 if from_zero else self.log.recovery_point
        self.log.abandon()
        self.open_log(clean=False, recovery_point=recovery_point)

    @rule(cap=map_caps, point=st.integers(0, 4), pick=st.integers(0, 2**16))
    def crash_during_swap(self, cap: int, point: int, pick: int) -> None:
        """The cleaner writes a group's ``.cleaned`` files; the broker dies at ``point``:
        0 before the ``.swap`` rename, 1 right after it, 2 after deleting some of the old
        segments, 3 after deleting all of them, 4 after renaming the ``.swap`` to ``.log``."""
        cap = cap if self.tiny_maps else BIG_MAP
        now = self.clock.now
        state = cleanable(self.log, self.checkpoint, now)
        offset_map = OffsetMap(cap)
        stats = CleanStats()
        try:
            end = build_offset_map(self.log, state.first_dirty, state.first_uncleanable,
                                   offset_map, stats)
        except CleanerError:
            return
        groups = group_segments(list(self.log.segments), end, self.cfg.segment_bytes)
        if not groups:
            return
        group = groups[0]
        cleaned = write_cleaned(self.log, group, offset_map, now, stats, map_end=end)
        self.clean_times.add(now)  # what the .cleaned file holds may be swapped in
        cleaned_offsets = {
            record.offset
            for batch in split_batches(cleaned.read_bytes())
            for record in decode_records(batch)
            if record.offset >= self.start
        }
        group_bases = [s.base_offset for s in group]
        group_end = self.log.segments[len(group)].base_offset  # the group is a prefix
        assert self.log.segments[0] is group[0]
        old_files = [
            [s.log_path, s.index.path, s.time_index.path] for s in group
        ]
        recovery_point = self.log.recovery_point
        self.log.abandon()

        base_name = group[0].log_path.name
        swap = cleaned.with_name(base_name + ".swap")
        if point >= 1:
            os.replace(cleaned, swap)
        deleted = [False] * len(group)
        if point == 2:
            deleted = [bool(pick >> i & 1) for i in range(len(group))]
        elif point >= 3:
            deleted = [True] * len(group)
        for files, gone in zip(old_files, deleted, strict=True):
            if gone:
                for path in files:
                    path.unlink(missing_ok=True)
        if point == 4:
            os.replace(swap, group[0].log_path)
            for path in (group[0].index.path, group[0].time_index.path):
                os.replace(path.with_name(path.name + ".cleaned"), path)

        self.open_log(clean=False, recovery_point=recovery_point)
        leftovers = [p.name for p in self.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        assert not leftovers, f"files left after start-up: {leftovers}"
        after = set(self.records_by_offset())
        if point == 0:
            assert after == self.present, "a crash before the swap changed the log"
            return
        outside = {o for o in self.present if not group_bases[0] <= o < group_end}
        expected = outside | cleaned_offsets
        # Kafka's (and samsa's) start-up deletes only the old segments whose base offset is
        # within the .swap file's batches: an old segment past its last batch (cleaned to
        # nothing) survives with its old content. Harmless (the records come back as they
        # were), and documented in test_compaction_crash.py.
        last_swapped = max(cleaned_offsets, default=group_bases[0])
        stale = {
            o for o in self.present
            for i, base in enumerate(group_bases)
            if base > last_swapped and not deleted[i]
            and base <= o < (group_bases[i + 1] if i + 1 < len(group_bases) else group_end)
        }
        assert expected <= after <= expected | stale, (
            f"after a crash at point {point}: missing {sorted(expected - after)}, "
            f"unexpected {sorted(after - expected - stale)}"
        )
        assert after <= self.present
        self.check_removals(self.present - after, now, state.first_uncleanable, end,
                            f"a swap finished at start-up (crash point {point})")
        self.present = after

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def log_matches_model(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.leo
        batches = read_log(self.log)
        assert [b for _, b in batches] == [
            b for b in scan_segments(self.log)
            if read_header(b).last_offset >= self.log.log_start_offset
        ], "Log.read does not return what the segment files hold"
        previous_last = -1
        seen: dict[int, Record] = {}
        retention = self.cfg.delete_retention_ms
        for header, batch in batches:
            # (e) the batch itself
            assert header.magic == 2
            assert crc_of(batch, 0, header.size) == header.crc, (
                f"CRC-32C mismatch in the batch at offset {header.base_offset}"
            )
            assert header.base_offset > previous_last, "batches out of offset order"
            previous_last = header.last_offset
            original = self.batches.get(header.base_offset)
            assert original is not None, f"a batch at {header.base_offset} nobody appended"
            assert header.last_offset == original.last, (
                f"batch at {header.base_offset}: last offset {header.last_offset}, "
                f"appended with {original.last}"
            )
            assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
                original.producer_id, original.producer_epoch, original.base_sequence
            )
            assert header.leader_epoch == 0
            if header.records_count:
                assert header.compression == original.codec, (
                    f"batch at {header.base_offset}: codec {header.compression.name}, "
                    f"appended as {original.codec.name}"
                )
            else:
                assert original.producer_id >= 0, "an empty batch of no producer"
            records = list(decode_records(batch))
            assert len(records) == header.records_count
            tombstones = 0
            for record in records:
                # (a) offsets keep their meaning
                assert header.base_offset <= record.offset <= header.last_offset
                assert record.offset not in seen, f"offset {record.offset} twice"
                w = self.written[record.offset]
                assert (record.key, record.value, record.timestamp) == (
                    w.key, w.value, w.timestamp
                ), f"offset {record.offset} reads {record}, was appended as {w}"
                assert record.headers == []
                assert header.max_timestamp >= record.timestamp
                if record.offset >= self.start:
                    seen[record.offset] = record
                tombstones += record.value is None
            if records:
                check(
                header.max_timestamp == max(r.timestamp for r in records),
                    f"batch at {header.base_offset}: maxTimestamp {header.max_timestamp}, its "
                    f"records' timestamps {[r.timestamp for r in records]}",
                )
            if header.attributes & Attr.DELETE_HORIZON:
                assert tombstones, f"batch at {header.base_offset}: a horizon, no tombstone"
                assert header.base_timestamp - retention in self.clean_times, (
                    f"batch at {header.base_offset}: delete horizon {header.base_timestamp} "
                    f"is no cleaning's time + {retention}"
                )
        offsets = list(seen)
        assert offsets == sorted(offsets)
        assert set(seen) == self.present, (
            f"offsets gone outside a cleaning: {sorted(self.present - set(seen))}; "
            f"came back: {sorted(set(seen) - self.present)}"
        )
        now = self.clock.now
        for key, last in self.latest.items():
            w = self.written[last]
            if last in seen or last < self.start:  # there, or gone with the log start
                continue
            # (b) only an expired tombstone may go, (c) never a young one
            assert w.value is None, f"the latest value of {key!r} (offset {last}) is gone"
            assert now - w.appended_at >= retention, (
                f"tombstone of {key!r} at {last} gone {now - w.appended_at} ms after append"
            )
            resurrected = [
                o for o, r in seen.items() if r.key == key and r.value is not None
            ]
            check(
                not resurrected,
                f"key {key!r} was deleted (tombstone at offset {last} removed) but older "
                f"values at offsets {resurrected} are readable again",
            )

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_model(directory: Path, *, tiny_maps: bool) -> None:
    counter = itertools.count()

    def factory() -> CompactionMachine:
        return CompactionMachine(directory / f"case-{next(counter)}", tiny_maps=tiny_maps)

    run_state_machine_as_test(
        factory,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,
            database=None,
            phases=list(Phase) if SHRINK else [p for p in Phase if p is not Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash here is the process dying, not the machine: the page cache survives, so fsync
    only costs time (most of it)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.mark.timeout(150)
def test_compaction_against_model(tmp_path: Path, no_fsync: None) -> None:
    """Every map holds the whole dirty range: each cleaning ends at the first uncleanable
    offset."""
    run_model(tmp_path, tiny_maps=False)


@pytest.mark.timeout(150)
def test_compaction_against_model_with_full_maps(tmp_path: Path, no_fsync: None) -> None:
    """Maps of 1..5 entries too: cleanings stop early where the map fills, or refuse
    (CleanerError) when the first dirty batch alone does not fit."""
    run_model(tmp_path, tiny_maps=True)


# --- regressions: bugs this model found, minimal ----------------------------------------------

T0 = 1_700_000_000_000


def _records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, r.value) for _, batch in read_log(log) for r in decode_records(batch)
    ]


def test_tombstone_past_a_full_maps_end_stays(tmp_path: Path) -> None:
    """a=1, b=2, a=tombstone in one segment; two passes with a one-entry map, the second after
    delete.retention.ms. Pass 1 maps offset 0 only (end 1) but still stamps the tombstone at 2
    with a delete horizon; pass 2 maps offset 1 only (end 2) and dropped the tombstone (horizon
    passed) while a=1 at offset 0 stayed: key a was readable again. Kafka keeps every record
    past the map's latest offset (``Cleaner.shouldRetainRecord``: ``pastLatestOffset``)."""
    clock = FakeClock(T0)
    log = Log(tmp_path, LogConfig(cleanup_policy=("compact",), delete_retention_ms=1000),
              clock=clock)
    for key, value in [(b"a", b"1"), (b"b", b"2"), (b"a", None)]:
        log.append(encode_batch([RecordInput(value, key=key, timestamp=T0)]))
    log.roll()
    log.append(encode_batch([RecordInput(b"x", key=b"c", timestamp=T0)]))
    state = cleanable(log, None, clock.now)
    first = clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(1),
                      now_ms=clock.now)
    assert first.end_offset == 1
    clock.advance(1000)
    state = cleanable(log, first.end_offset, clock.now)
    second = clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(1),
                       now_ms=clock.now)
    assert second.end_offset == 2
    records = _records(log)
    a_values = [value for _, key, value in records if key == b"a"]
    # a=1 may stay until a pass maps offset 2, but never without the tombstone after it
    assert not a_values or a_values[-1] is None, f"key a after its delete: {records}"
    log.close()


def test_rewritten_batch_gets_its_records_max_timestamp(tmp_path: Path) -> None:
    """A batch [a@T0, b@T0-1] where a is superseded is rewritten holding b only; it kept
    maxTimestamp T0 (Kafka: the retained records' max, T0-1), and ListOffsets -3 answered
    offset 1 with timestamp T0, a timestamp record 1 does not have."""
    clock = FakeClock(T0)
    log = Log(tmp_path, LogConfig(cleanup_policy=("compact",)), clock=clock)
    log.append(encode_batch([RecordInput(b"1", key=b"a", timestamp=T0),
                             RecordInput(b"2", key=b"b", timestamp=T0 - 1)]))
    log.append(encode_batch([RecordInput(b"3", key=b"a", timestamp=T0 - 5)]))
    log.roll()
    log.append(encode_batch([RecordInput(b"4", key=b"c", timestamp=T0 - 5)]))
    state = cleanable(log, None, clock.now)
    clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(BIG_MAP),
              now_ms=clock.now)
    assert [(o, k) for o, k, _ in _records(log)] == [(1, b"b"), (2, b"a"), (3, b"c")]
    header, batch = read_log(log)[0]
    assert [r.timestamp for r in decode_records(batch)] == [T0 - 1]
    try:
        assert header.max_timestamp == T0 - 1, f"maxTimestamp {header.max_timestamp - T0:+d}"
        found = log.max_timestamp_offset()
        assert (found.offset, found.timestamp) == (1, T0 - 1), found
    finally:
        log.close()
