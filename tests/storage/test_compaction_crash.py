"""Log compaction: crashes in the middle of a segment swap, the cleaner's checkpoint file, and
``clean_batch`` one batch at a time.

A cleaner swap (``Log.replace_segments``) goes ``<base>.log.cleaned`` (with ``.index.cleaned``
and ``.timeindex.cleaned``, all fsynced by ``write_cleaned``) -> ``<base>.log.swap`` (the commit
point, then a directory fsync) -> old segments deleted -> ``.swap`` renamed to ``<base>.log`` and
the ``.cleaned`` indexes to theirs. Start-up (``Log._finish_swaps``, then the leftover sweep)
must bring every crash point back to either the log as it was (before the commit point) or the
cleaned log (after it). The crashes are simulated the way a dead process leaves them:
``Log.abandon()`` (nothing flushed or snapshotted), the files as the crash point has them, then
a new ``Log`` with ``had_clean_shutdown=False``.

A torn ``.swap`` cannot happen without disk corruption: the ``.cleaned`` file is fsynced before
it is renamed (``test_cleaned_files_are_fsynced_before_the_commit_point`` checks the order).
``test_torn_swap_file_still_gives_a_valid_log`` only documents what start-up makes of one.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from samsa.config import BrokerConfig, LogConfig
from samsa.records.batch import Attr, BatchHeader, Compression, crc_of, read_header
from samsa.records.record import decode_records
from samsa.storage.cleaner import (
    CleanStats,
    OffsetMap,
    build_offset_map,
    clean_batch,
    clean_log,
    cleanable,
    group_segments,
    write_cleaned,
)
from samsa.storage.log import Log
from samsa.storage.log_cleaner import CLEANER_CHECKPOINT_FILE, LogCleaner
from samsa.storage.manager import LogManager

from .conftest import BASE_TIME_MS, FakeClock, make_batch, split_batches

pytestmark = pytest.mark.timeout(60)

RETENTION_MS = 1000
PRODUCER_ID = 4242
# One group for every inactive segment (the group limit is segment.bytes).
CONFIG = LogConfig(
    cleanup_policy=("compact",), segment_bytes=1 << 20, delete_retention_ms=RETENTION_MS,
    index_interval_bytes=64,
)

# What each segment of the crash-test log gets, one batch per entry:
# (keys, values or None for tombstones, codec, idempotent producer's batch?)
SEGMENTS = [
    [([b"a", b"b", b"u0"], [b"a0", b"b0", b"u0"], Compression.NONE, False),
     ([b"p"], [b"p0"], Compression.NONE, True)],
    [([b"a", b"t"], [b"a1", b"t1"], Compression.GZIP, False),
     ([b"u1"], [b"u1"], Compression.NONE, False)],
    [([b"b", b"a"], [None, b"a2"], Compression.LZ4, False),
     ([b"u2", b"c"], [b"u2", b"c2"], Compression.ZSTD, False)],
    [([b"t"], [None], Compression.NONE, False),
     ([b"c", b"u3"], [b"c3", b"u3"], Compression.SNAPPY, False),
     ([b"p"], [b"p3"], Compression.NONE, False)],
]
ACTIVE = [([b"a"], [b"a4"], Compression.NONE, False)]


# --- helpers --------------------------------------------------------------------------------------


def read_log(log: Log) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from the log start to the log end, through ``Log.read`` (one segment's
    region at a time)."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 2**31 - 1)
        if region is None:
            break
        for batch in split_batches(region.read()):
            out.append((read_header(batch), batch))
        assert out[-1][0].next_offset > offset
        offset = out[-1][0].next_offset
    return out


def records_of(log: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    return [
        (r.offset, r.key, r.value, r.timestamp)
        for _, batch in read_log(log)
        for r in decode_records(batch)
    ]


def assert_valid(log: Log) -> None:
    """Every batch whole, with a valid CRC, in offset order; every record findable by
    offset through the indexes."""
    last = -1
    for header, batch in read_log(log):
        assert crc_of(batch, 0, header.size) == header.crc
        assert header.base_offset > last
        last = header.last_offset
        for record in decode_records(batch):
            region = log.read(record.offset, 2**31 - 1)
            assert region is not None
            first = read_header(region.read())
            assert first.base_offset <= record.offset <= first.last_offset


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap")))


def append_spec(log: Log, spec, clock: FakeClock, seq: list[int]) -> None:
    for keys, values, codec, idempotent in spec:
        extra = {}
        if idempotent:
            extra = dict(producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq[0])
            seq[0] += len(keys)
        log.append(make_batch(values, keys=keys, timestamp=clock.now, compression=codec,
                              **extra))


def build_log(directory: Path, clock: FakeClock) -> Log:
    """Four inactive segments (offsets 0-3, 4-6, 7-10, 11-14) and an active one (15)."""
    log = Log(directory, CONFIG, clock=clock)
    seq = [0]
    for spec in SEGMENTS:
        append_spec(log, spec, clock, seq)
        log.roll()
    append_spec(log, ACTIVE, clock, seq)
    assert [s.base_offset for s in log.segments] == [0, 4, 7, 11, 15]
    return log


def segment_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".log"}


def reopen(directory: Path, clock: FakeClock, recovery_point: int = 0) -> Log:
    return Log(directory, CONFIG, recovery_point=recovery_point, had_clean_shutdown=False,
               clock=clock)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(BASE_TIME_MS)


@pytest.fixture
def prepared(tmp_path: Path, clock: FakeClock):
    """The crash-test log, the cleaned result (a copy cleaned for real, same clock), and the
    original with its first group's ``.cleaned`` files written and the broker dead."""
    directory = tmp_path / "log"
    log = build_log(directory, clock)
    log.close()
    expected_dir = tmp_path / "expected"
    shutil.copytree(directory, expected_dir)
    before = segment_files(directory)

    log = reopen(directory, clock, recovery_point=16)
    before_records = records_of(log)
    state = cleanable(log, None, clock.now)
    offset_map = OffsetMap(1000)
    end = build_offset_map(log, state.first_dirty, state.first_uncleanable, offset_map,
                           CleanStats())
    assert end == 15
    groups = group_segments(list(log.segments), end, CONFIG.segment_bytes)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 4, 7, 11]]
    cleaned = write_cleaned(log, groups[0], offset_map, clock.now, CleanStats(), map_end=end)
    assert cleaned.name == "00000000000000000000.log.cleaned"
    log.abandon()

    expected = reopen(expected_dir, clock, recovery_point=16)
    state = cleanable(expected, None, clock.now)
    clean_log(expected, state.first_dirty, state.first_uncleanable, OffsetMap(1000),
              now_ms=clock.now)
    expected_batches = [b for _, b in read_log(expected)]
    expected_records = records_of(expected)
    assert [s.base_offset for s in expected.segments] == [0, 15]
    expected.close()
    return directory, before, before_records, expected_batches, expected_records


# --- crash points ---------------------------------------------------------------------------------


def test_expected_cleaning(prepared) -> None:
    """The cleaned log the crash tests compare against, spelled out."""
    _, _, before_records, _, expected_records = prepared
    assert [o for o, *_ in before_records] == list(range(16))
    kept = [(o, k, v) for o, k, v, _ in expected_records]
    assert kept == [
        (2, b"u0", b"u0"), (6, b"u1", b"u1"), (7, b"b", None), (8, b"a", b"a2"),
        (9, b"u2", b"u2"), (11, b"t", None), (12, b"c", b"c3"), (13, b"u3", b"u3"),
        (14, b"p", b"p3"), (15, b"a", b"a4"),
    ]
    # The idempotent producer's only batch (offset 3, superseded by 14) stays as an empty
    # batch; the tombstones got a delete horizon.
    _, _, _, batches, _ = prepared
    headers = [read_header(b) for b in batches]
    empty = [h for h in headers if h.records_count == 0]
    assert [(h.base_offset, h.producer_id, h.base_sequence) for h in empty] == [
        (3, PRODUCER_ID, 0)
    ]
    stamped = [h.base_offset for h in headers if h.attributes & Attr.DELETE_HORIZON]
    assert stamped == [7, 11]


@pytest.mark.parametrize("recovery_point", [0, 16])
def test_crash_with_only_cleaned_files(prepared, clock: FakeClock, recovery_point: int) -> None:
    """(i) before the commit point: the ``.cleaned`` files go, the log is as it was."""
    directory, before, before_records, _, _ = prepared
    assert leftovers(directory) == [
        "00000000000000000000.index.cleaned", "00000000000000000000.log.cleaned",
        "00000000000000000000.timeindex.cleaned",
    ]
    log = reopen(directory, clock, recovery_point)
    assert leftovers(directory) == []
    assert segment_files(directory) == before
    assert records_of(log) == before_records
    assert [s.base_offset for s in log.segments] == [0, 4, 7, 11, 15]
    assert_valid(log)
    log.close()


def _commit(directory: Path, deleted: tuple[int, ...]) -> None:
    """The crash after the ``.swap`` rename, with the old segments ``deleted`` (indexes into
    the group [0, 4, 7, 11]) gone."""
    os.replace(directory / "00000000000000000000.log.cleaned",
               directory / "00000000000000000000.log.swap")
    for i in deleted:
        base = [0, 4, 7, 11][i]
        for suffix in (".log", ".index", ".timeindex"):
            (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)


def _check_cleaned(log: Log, directory: Path, expected_batches, expected_records) -> None:
    assert leftovers(directory) == []
    assert [s.base_offset for s in log.segments] == [0, 15]
    assert [b for _, b in read_log(log)] == expected_batches
    assert records_of(log) == expected_records
    assert_valid(log)
    # The idempotent producer's last batch (offset 3) is an empty batch now; a retry of it is
    # still a duplicate and its next sequence goes on.
    retry = make_batch([b"p0"], keys=[b"p"], timestamp=BASE_TIME_MS, producer_id=PRODUCER_ID,
                       producer_epoch=0, base_sequence=0)
    info = log.append(retry)
    assert info.duplicate and (info.first_offset, info.last_offset) == (3, 3)
    nxt = make_batch([b"p5"], keys=[b"p"], timestamp=BASE_TIME_MS, producer_id=PRODUCER_ID,
                     producer_epoch=0, base_sequence=1)
    info = log.append(nxt)
    assert not info.duplicate and info.first_offset == 16


@pytest.mark.parametrize("deleted", [(), (0,), (3,), (1, 2), (0, 1, 2), (0, 1, 2, 3)],
                         ids=lambda d: "deleted-" + ("-".join(map(str, d)) or "none"))
@pytest.mark.parametrize("recovery_point", [0, 16])
def test_crash_after_the_commit_point(prepared, clock: FakeClock, deleted, recovery_point) -> None:
    """(ii) ``.cleaned`` renamed to ``.swap``, none, some or all old segments deleted:
    start-up finishes the swap and the log is the cleaned one."""
    directory, _, _, expected_batches, expected_records = prepared
    _commit(directory, deleted)
    log = reopen(directory, clock, recovery_point)
    _check_cleaned(log, directory, expected_batches, expected_records)
    log.close()
    log = Log(directory, CONFIG, recovery_point=log.recovery_point, had_clean_shutdown=True,
              clock=clock)
    assert records_of(log)[:-1] == expected_records
    log.close()


@pytest.mark.parametrize("renamed_indexes", [0, 1, 2])
def test_crash_after_the_swap_became_the_log(prepared, clock: FakeClock,
                                             renamed_indexes: int) -> None:
    """The ``.swap`` already renamed to ``.log``, none or some of the ``.cleaned`` indexes
    renamed: the leftover ``.cleaned`` index goes and the index is rebuilt."""
    directory, _, _, expected_batches, expected_records = prepared
    _commit(directory, (0, 1, 2, 3))
    base = directory / "00000000000000000000"
    os.replace(f"{base}.log.swap", f"{base}.log")
    for suffix in (".index", ".timeindex")[:renamed_indexes]:
        os.replace(f"{base}{suffix}.cleaned", f"{base}{suffix}")
    log = reopen(directory, clock)
    _check_cleaned(log, directory, expected_batches, expected_records)
    log.close()


def test_crash_then_clean_again(prepared, clock: FakeClock) -> None:
    """After a crash before the commit point the next cleaning gives the same result."""
    directory, _, _, expected_batches, _ = prepared
    log = reopen(directory, clock)
    state = cleanable(log, None, clock.now)
    clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(1000), now_ms=clock.now)
    assert [b for _, b in read_log(log)] == expected_batches
    log.close()


def test_swap_whose_last_old_segments_cleaned_to_nothing(tmp_path: Path, clock: FakeClock) -> None:
    """A limitation shared with Kafka (``LogLoader``: segments in [swap base, swap next
    offset) are deleted): start-up learns the swap's range from its batches, so an old segment
    past the swap's last batch (its records all cleaned away) survives a crash taken before it
    was deleted, with its old content. Nothing is lost or reordered: those records come back as
    they were before the cleaning and the next cleaning removes them again."""
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=400,
                       delete_retention_ms=RETENTION_MS)
    log = Log(tmp_path, config, clock=clock)
    for keys, values in [([b"a", b"k"], [b"1", b"k"]), ([b"b"], [b"1"]),  # segment 0
                         ([b"a"], [b"2"]), ([b"b"], [b"2"]),  # segment 2: superseded below
                         ([b"a"], [b"3"]), ([b"b"], [b"3"]),  # segment 4
                         ([b"c"], [b"3"])]:  # active
        log.append(make_batch(values, keys=keys, timestamp=clock.now))
        if log.log_end_offset in (3, 5, 7):
            log.roll()
    assert [s.base_offset for s in log.segments] == [0, 3, 5, 7]
    before = records_of(log)
    state = cleanable(log, None, clock.now)
    offset_map = OffsetMap(1000)
    end = build_offset_map(log, state.first_dirty, state.first_uncleanable, offset_map,
                           CleanStats())
    groups = group_segments(list(log.segments), end, config.segment_bytes)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 3], [5]]
    cleaned = write_cleaned(log, groups[0], offset_map, clock.now, CleanStats(), map_end=end)
    cleaned_records = [
        r.offset for b in split_batches(cleaned.read_bytes()) for r in decode_records(b)
    ]
    assert cleaned_records == [1]  # segment 3 (a=2, b=2) cleaned to nothing
    log.abandon()
    os.replace(cleaned, tmp_path / "00000000000000000000.log.swap")
    log = reopen(tmp_path, clock)
    assert leftovers(tmp_path) == []
    after = [o for o, *_ in records_of(log)]
    assert after in ([1, 5, 6, 7], [1, 3, 4, 5, 6, 7])  # cleaned, or segment 3 back as it was
    assert [r for r in records_of(log) if r[0] in (3, 4)] == [r for r in before if r[0] in (3, 4)]
    assert_valid(log)
    # The next cleaning finishes the job.
    state = cleanable(log, None, clock.now)
    clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(1000), now_ms=clock.now)
    assert [o for o, *_ in records_of(log)] == [1, 5, 6, 7]
    log.close()


def test_torn_swap_file_still_gives_a_valid_log(prepared, clock: FakeClock) -> None:
    """(iii) Not a real crash point (the ``.cleaned`` file is fsynced before its rename): a
    ``.swap`` cut inside a batch, as only disk corruption makes one. Start-up finishes the swap
    from its whole batches (deleting the old segments whose base offset they cover), then
    recovery truncates the torn batch and, as for any corrupt segment (Kafka does the same),
    deletes every segment after it: the log ends where the swap's whole batches end (offset 9),
    valid and ordered, every offset left keeping its meaning."""
    directory, _, before_records, _, expected_records = prepared
    _commit(directory, ())
    swap = directory / "00000000000000000000.log.swap"
    data = swap.read_bytes()
    batches = split_batches(data)
    cut = sum(len(b) for b in batches[:4]) + 20  # inside the batch of offsets 9-10
    swap.write_bytes(data[:cut])
    log = reopen(directory, clock)
    assert leftovers(directory) == []
    assert_valid(log)
    after = records_of(log)
    offsets = [o for o, *_ in after]
    assert offsets == sorted(offsets)
    known = {r[0]: r for r in before_records}
    assert all(known[r[0]] == r for r in after)  # offsets keep their meaning
    assert offsets == [o for o, *_ in expected_records[:4]] == [2, 6, 7, 8]
    assert log.log_end_offset == 9
    assert [s.base_offset for s in log.segments] == [0]
    log.close()


def test_cleaned_files_are_fsynced_before_the_commit_point(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order that makes a ``.swap`` always whole: the ``.cleaned`` log and indexes are
    fsynced, then renamed, then the directory is fsynced, and only then are old segments
    deleted."""
    log = build_log(tmp_path, clock)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, Path.unlink

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("replace", f"{Path(src).name}->{Path(dst).name}"))
        real_replace(src, dst)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        events.append(("unlink", self.name))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    state = cleanable(log, None, clock.now)
    clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(1000), now_ms=clock.now)
    monkeypatch.undo()

    def at(kind: str, name: str) -> int:
        return next(i for i, (k, n) in enumerate(events) if k == kind and n.endswith(name))

    commit = at("replace", "00000000000000000000.log.cleaned->00000000000000000000.log.swap")
    for name in ("0.log.cleaned", "0.index.cleaned", "0.timeindex.cleaned"):
        assert at("fsync", name) < commit, events
    dir_sync = next(i for i, (k, n) in enumerate(events)
                    if i > commit and k == "fsync" and n == os.path.realpath(tmp_path))
    first_delete = next(i for i, (k, _) in enumerate(events) if i > commit and k == "unlink")
    assert dir_sync < first_delete, events
    assert at("replace", "0.log.swap->00000000000000000000.log") > first_delete
    log.close()


def test_replace_refused_when_the_log_changed(tmp_path: Path, clock: FakeClock) -> None:
    """The log's segments changed between writing the ``.cleaned`` files and the swap
    (retention, DeleteRecords): the swap is refused, the files are removed, nothing changes."""
    log = build_log(tmp_path, clock)
    state = cleanable(log, None, clock.now)
    offset_map = OffsetMap(1000)
    end = build_offset_map(log, state.first_dirty, state.first_uncleanable, offset_map,
                           CleanStats())
    group = group_segments(list(log.segments), end, CONFIG.segment_bytes)[0]
    cleaned = write_cleaned(log, group, offset_map, clock.now, CleanStats(), map_end=end)
    log.delete_records_before(4)  # segment 0 goes
    before = records_of(log)
    assert log.replace_segments(group, cleaned) is False
    assert leftovers(tmp_path) == []
    assert records_of(log) == before
    log.close()


# --- the cleaner's checkpoint --------------------------------------------------------------------


def _manager(directory: Path, clock: FakeClock, config: LogConfig) -> LogManager:
    broker = BrokerConfig({"log.dirs": str(directory)})
    manager = LogManager(
        broker, topic_config=lambda topic: config if topic != "plain" else LogConfig(),
        clock=clock,
    )
    manager.startup()
    return manager


def test_cleaner_checkpoint_is_written_and_read_back(tmp_path: Path, clock: FakeClock) -> None:
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=1 << 20,
                       min_cleanable_dirty_ratio=0.01)
    manager = _manager(tmp_path, clock, config)
    log = manager.get_or_create("orders", 3)
    build_into = [([b"a"], [b"1"]), ([b"a"], [b"2"]), ([b"b"], [b"1"])]
    for keys, values in build_into:
        log.append(make_batch(values, keys=keys, timestamp=clock.now))
    log.roll()
    log.append(make_batch([b"3"], keys=[b"a"], timestamp=clock.now))
    other = manager.get_or_create("plain", 0)  # not compacted: never cleaned
    other.append(make_batch([b"x"], keys=[b"a"], timestamp=clock.now))
    other.roll()

    cleaner = LogCleaner(manager, dedupe_buffer_size=1 << 20, backoff_ms=10)
    assert cleaner.checkpoint_of(("orders", 3)) is None
    stats = cleaner.clean_filthiest()
    assert stats is not None and stats.end_offset == 3
    assert cleaner.clean_filthiest() is None  # nothing dirty any more
    path = tmp_path / CLEANER_CHECKPOINT_FILE
    assert path.read_text() == "0\n1\norders 3 3\n"  # Kafka's format

    # A new cleaner (a broker restart) starts where the last one stopped.
    assert LogCleaner(manager).checkpoint_of(("orders", 3)) == 3
    manager.shutdown()
    manager = _manager(tmp_path, clock, config)
    cleaner = LogCleaner(manager, dedupe_buffer_size=1 << 20)
    assert cleaner.checkpoint_of(("orders", 3)) == 3
    assert cleaner.checkpoint_of(("plain", 0)) is None
    assert cleaner.clean_filthiest() is None
    log = manager.get("orders", 3)
    assert [(o, k, v) for o, k, v, _ in records_of(log)] == [(1, b"a", b"2"), (2, b"b", b"1"),
                                                             (3, b"a", b"3")]
    cleaner.forget(("orders", 3))
    assert path.read_text() == "0\n0\n"
    assert LogCleaner(manager).checkpoint_of(("orders", 3)) is None
    manager.shutdown()


def test_cleaner_thread_cleans_and_checkpoints(tmp_path: Path, clock: FakeClock) -> None:
    """The cleaner thread finds the dirty log by itself; the checkpoint file follows."""
    config = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01)
    manager = _manager(tmp_path, clock, config)
    log = manager.get_or_create("t", 0)
    for value in (b"1", b"2", b"3"):
        log.append(make_batch([value], keys=[b"k"], timestamp=clock.now))
    log.roll()
    swaps: list[int] = []
    lock = threading.Lock()

    def run_swap(swap) -> bool:
        with lock:  # as the broker: the swap runs where appends run
            swaps.append(1)
            return swap()

    cleaner = LogCleaner(manager, dedupe_buffer_size=1 << 20, backoff_ms=20, run_swap=run_swap)
    cleaner.start()
    try:
        deadline = time.monotonic() + 10
        while cleaner.checkpoint_of(("t", 0)) != 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cleaner.checkpoint_of(("t", 0)) == 3
    finally:
        cleaner.shutdown(timeout_s=10)
    assert swaps == [1]
    assert cleaner.metrics.runs >= 1 and cleaner.metrics.errors == 0
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text() == "0\n1\nt 0 3\n"
    with lock:
        assert [(o, v) for o, _, v, _ in records_of(log)] == [(2, b"3")]
    manager.shutdown()


# --- clean_batch ---------------------------------------------------------------------------------


def _one_batch(directory: Path, batch: bytes):
    """``batch`` appended as a follower would (its offsets kept, empty batches allowed) to a
    fresh log (not compacted: keyless records allowed); returns the log and (segment,
    position, header) of it."""
    log = Log(directory, LogConfig(), clock=FakeClock())
    log.append(batch, assign_offsets=False)
    segment = log.segments[0]
    pos, header = next(segment.scan(0))
    return log, segment, pos, header


def _clean(directory: Path, batch: bytes, offsets: dict[bytes, int], *, now: int = BASE_TIME_MS,
           producers: dict[int, int] | None = None, retention: int = RETENTION_MS):
    log, segment, pos, header = _one_batch(directory, batch)
    offset_map = OffsetMap(100)
    offset_map.offsets.update(offsets)
    stats = CleanStats()
    out = clean_batch(memoryview(segment.read_bytes(pos, header.size)), header, offset_map, now,
                      retention, producers or {}, stats)
    original = segment.read_bytes(pos, header.size)
    log.close()
    return original, out, stats


def _check_batch(batch: bytes) -> BatchHeader:
    header = read_header(batch)
    assert header.size == len(batch)
    assert crc_of(batch, 0, header.size) == header.crc
    assert header.magic == 2
    return header


CODECS = list(Compression)
TS = [BASE_TIME_MS - 30, BASE_TIME_MS - 20, BASE_TIME_MS - 10]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_batch_with_every_record_kept_is_copied_byte_for_byte(tmp_path: Path, codec) -> None:
    batch = make_batch([b"1", b"2", b"3"], keys=[b"a", b"b", b"c"], timestamps=TS,
                       compression=codec)
    original, out, stats = _clean(tmp_path, batch, {b"a": 0, b"b": 1})  # c not in the map
    assert out == original
    assert (stats.messages_read, stats.messages_written) == (3, 3)


def test_batch_with_every_record_superseded_is_dropped(tmp_path: Path) -> None:
    batch = make_batch([b"1", b"2"], keys=[b"a", b"b"], timestamps=TS[:2])
    _, out, stats = _clean(tmp_path, batch, {b"a": 5, b"b": 6})
    assert out is None
    assert (stats.messages_read, stats.messages_written) == (2, 0)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_producers_last_batch_becomes_an_empty_batch(tmp_path: Path, codec) -> None:
    """Kafka's RETAIN_EMPTY: the header stays so the producer keeps its sequence (an empty
    batch has no records to compress: codec none, as Kafka's ``writeEmptyHeader``)."""
    batch = make_batch([b"1", b"2", b"3"], keys=[b"a", b"b", b"a"], timestamps=TS,
                       compression=codec, producer_id=77, producer_epoch=3, base_sequence=40)
    original, out, _ = _clean(tmp_path, batch, {b"a": 9, b"b": 9}, producers={77: 2})
    assert out is not None
    header = _check_batch(out)
    before = read_header(original)
    assert header.records_count == 0
    assert header.size == 61  # a bare header
    assert (header.base_offset, header.last_offset_delta) == (0, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 40)
    assert header.last_sequence == 42
    assert header.compression == Compression.NONE
    assert not header.attributes & Attr.DELETE_HORIZON
    assert header.max_timestamp == before.max_timestamp
    assert list(decode_records(out)) == []


def test_superseded_batch_of_a_producer_that_wrote_later_is_dropped(tmp_path: Path) -> None:
    batch = make_batch([b"1"], keys=[b"a"], producer_id=77, producer_epoch=0, base_sequence=0)
    _, out, _ = _clean(tmp_path, batch, {b"a": 9}, producers={77: 9})
    assert out is None


def test_empty_batch_is_kept_as_it_is(tmp_path: Path) -> None:
    batch = make_batch([b"1"], keys=[b"a"], producer_id=77, producer_epoch=0, base_sequence=0)
    _, empty, _ = _clean(tmp_path / "1", batch, {b"a": 9}, producers={77: 0})
    _, out, _ = _clean(tmp_path / "2", empty, {b"a": 9}, producers={77: 0})
    assert out == empty


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_tombstones_get_a_delete_horizon(tmp_path: Path, codec) -> None:
    """KIP-534: the first pass that keeps a tombstone stamps its batch: attribute bit 6, base
    timestamp = now + delete.retention.ms; the records' timestamps do not change."""
    now = BASE_TIME_MS + 5
    batch = make_batch([b"1", None, b"3"], keys=[b"a", b"b", b"c"], timestamps=TS,
                       compression=codec)
    original, out, _ = _clean(tmp_path, batch, {b"a": 0, b"b": 1, b"c": 2}, now=now)
    assert out is not None and out != original
    header = _check_batch(out)
    before = read_header(original)
    assert header.attributes & Attr.DELETE_HORIZON
    assert header.attributes & ~Attr.DELETE_HORIZON == before.attributes
    assert header.base_timestamp == now + RETENTION_MS
    assert header.compression == codec
    for field in ("base_offset", "last_offset_delta", "records_count", "producer_id",
                  "max_timestamp", "leader_epoch"):
        assert getattr(header, field) == getattr(before, field), field
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(out)] == [
        (r.offset, r.key, r.value, r.timestamp) for r in decode_records(original)
    ]


def test_tombstones_go_once_the_horizon_passed(tmp_path: Path) -> None:
    now = BASE_TIME_MS
    batch = make_batch([b"1", None, b"3"], keys=[b"a", b"b", b"c"], timestamps=TS,
                       compression=Compression.ZSTD)
    offsets = {b"a": 0, b"b": 1, b"c": 2}
    _, stamped, _ = _clean(tmp_path / "1", batch, offsets, now=now)
    horizon = now + RETENTION_MS
    # Before the horizon (and a second stamping pass): the batch stays as it is.
    _, same, _ = _clean(tmp_path / "2", stamped, offsets, now=horizon - 1)
    assert same == stamped
    # At the horizon the tombstone goes; no tombstone left, so no horizon either.
    _, out, _ = _clean(tmp_path / "3", stamped, offsets, now=horizon)
    header = _check_batch(out)
    assert not header.attributes & Attr.DELETE_HORIZON
    assert header.compression == Compression.ZSTD
    assert (header.base_offset, header.last_offset_delta) == (0, 2)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(out)] == [
        (0, b"a", b"1", TS[0]), (2, b"c", b"3", TS[2])
    ]
    # A batch of tombstones only goes whole.
    only = make_batch([None, None], keys=[b"x", b"y"], timestamps=TS[:2])
    _, stamped, _ = _clean(tmp_path / "4", only, {b"x": 0, b"y": 1}, now=now)
    assert read_header(stamped).attributes & Attr.DELETE_HORIZON
    _, out, _ = _clean(tmp_path / "5", stamped, {b"x": 0, b"y": 1}, now=horizon)
    assert out is None


def test_superseded_tombstone_goes_at_once(tmp_path: Path) -> None:
    batch = make_batch([None, b"2"], keys=[b"a", b"b"], timestamps=TS[:2])
    _, out, _ = _clean(tmp_path, batch, {b"a": 7, b"b": 1})
    header = _check_batch(out)
    assert not header.attributes & Attr.DELETE_HORIZON
    assert [(r.offset, r.value) for r in decode_records(out)] == [(1, b"2")]


def test_keyless_records_are_dropped(tmp_path: Path) -> None:
    batch = make_batch([b"1", b"2", b"3"], keys=[None, b"b", None], timestamps=TS)
    _, out, stats = _clean(tmp_path, batch, {b"b": 1})
    header = _check_batch(out)
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 1)
    assert [(r.offset, r.key, r.timestamp) for r in decode_records(out)] == [(1, b"b", TS[1])]
    assert (stats.messages_read, stats.messages_written) == (3, 1)
    keyless = make_batch([b"1"], keys=[None])
    _, out, _ = _clean(tmp_path / "2", keyless, {})
    assert out is None


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_partly_kept_batch_keeps_its_codec_and_metadata(tmp_path: Path, codec) -> None:
    batch = make_batch([b"v" * 50, b"w" * 50, b"x" * 50], keys=[b"a", b"b", b"c"],
                       timestamps=TS, compression=codec, producer_id=5, producer_epoch=1,
                       base_sequence=10)
    original, out, _ = _clean(tmp_path, batch, {b"a": 9, b"b": 1, b"c": 9})
    header = _check_batch(out)
    before = read_header(original)
    assert header.compression == codec
    assert header.attributes == before.attributes
    for field in ("base_offset", "last_offset_delta", "producer_id", "producer_epoch",
                  "base_sequence", "leader_epoch"):
        assert getattr(header, field) == getattr(before, field), field
    assert header.records_count == 1
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(out)] == [
        (1, b"b", b"w" * 50, TS[1])
    ]
    assert header.max_timestamp == TS[1]  # the kept records' max, as Kafka's builder has it


def _clean_from(directory: Path, batch: bytes, offsets: dict[bytes, int], now: int,
                map_end: int):
    log, segment, pos, header = _one_batch(directory, batch)
    offset_map = OffsetMap(100)
    offset_map.offsets.update(offsets)
    out = clean_batch(memoryview(segment.read_bytes(pos, header.size)), header, offset_map, now,
                      RETENTION_MS, {}, CleanStats(), map_end=map_end)
    log.close()
    return out


def test_batch_past_the_maps_end_is_kept_as_it_is(tmp_path: Path) -> None:
    """Where a full map stopped, nothing after is known: a batch at or past the map's end
    keeps every record, even a tombstone whose delete horizon has passed (Kafka:
    ``pastLatestOffset``), and gets no horizon stamped."""
    batch = make_batch([b"1", None], keys=[b"a", b"b"], timestamps=TS[:2])
    _, stamped, _ = _clean(tmp_path / "1", batch, {b"a": 0, b"b": 1})
    assert read_header(stamped).attributes & Attr.DELETE_HORIZON
    late = BASE_TIME_MS + RETENTION_MS
    assert _clean_from(tmp_path / "2", stamped, {b"a": 9}, late, map_end=0) == stamped
    assert _clean_from(tmp_path / "3", batch, {b"a": 9}, late, map_end=0) == batch
    # Before the map's end the same batch is cleaned.
    out = _clean_from(tmp_path / "4", stamped, {b"a": 9}, late, map_end=2)
    assert out is None
