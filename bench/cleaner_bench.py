"""Log cleaner benchmark: `clean_log` throughput on a compacted log, size before and after.

The question (the compaction issue): cleaner throughput in MB/s on a 1 GiB log with 10% unique
keys, and the size before and after. What one run does, per codec (``--codecs``):

* **build** (untimed, its time is reported apart): a ``cleanup.policy=compact`` log with
  ``--segment-bytes`` segments (128 MiB: a 1 GiB log fills 9 of them) holding ``--size`` bytes
  of keyed records as a producer sends them: batches of ``--batch-records`` (100) records, each
  with a 14-byte key and a ``--value-bytes`` (100) value, no headers, no producer id. Exactly
  ``--unique`` (10%) of the records have distinct keys: the key list holds every key once plus
  keys drawn uniformly at random for the rest, shuffled; the key of the record at offset i is
  ``keys[i]``. A value is the record's offset as 16 ASCII digits and 84 bytes of text-like
  filler (words from a small vocabulary, so that lz4 and zstd find something to compress).
  Batches are assembled from per-position record templates (``bytes`` formatting, one
  CRC-32C per batch) rather than ``encode_batch``, which would take minutes for 1 GiB; the first
  batch is checked byte for byte against ``encode_batch``. They are appended as a follower does
  (``assign_offsets=False``, about 1 MiB of batches per call), which skips the key check a
  leader runs on compacted topics. Then one extra roll, so every record is in an inactive
  segment, a clean close, ``os.sync()``, and the log is opened again. A compressed variant holds
  the same records (same keys, same values), so its log is smaller on disk.
* **plain read** (the baseline): ``os.pread`` of every segment file in 1 MiB chunks, the same
  bytes the cleaner is about to read; three times, the median counts. Both it and the cleaner
  read from the page cache (the log was just written and the machine has the memory): this
  compares CPU costs, not the disk.
* **clean**: one ``clean_log`` from offset 0 to the dirty range ``cleanable`` reports (all of
  the inactive segments), with an ``OffsetMap`` large enough for every key
  (``OffsetMap(distinct keys + records per batch)``: ``room_for`` counts each record of a batch
  as a new key), no ``swap`` callback (the swap runs inline, as in tests). The
  clock covers the whole call: the offset map pass, the rewrite of each segment group into a
  ``.cleaned`` file with its fsync, and the swaps (which re-validate each cleaned segment and
  rebuild its indexes). MB/s = log bytes before / seconds / 1e6; messages/s = records before /
  seconds. The cleaner reads every byte twice (map pass, then rewrite), the baseline once.
* **breakdown**: ``cleaner.build_offset_map``, ``cleaner.write_cleaned``, ``Log.replace_segments``
  and ``os.fsync`` are wrapped with timers for the duration of the call (one wrapper call per
  segment group, so the wrappers cost nothing measurable). fsync time is taken out of the phase
  it happens in and shown apart; "other" is what is left of the total (grouping, bookkeeping).
* **verify** (untimed): every batch of the cleaned log passes CRC-32C and framing, offsets
  strictly increase, the log end offset is unchanged, and every key is present exactly once with
  the offset of its last occurrence and that offset in its value. That is the whole key space,
  not a sample: the cleaned log is a tenth the size.
* **profile**: before the timed runs, ``clean_log`` on a ``--profile-size`` log of each codec
  under cProfile; the top functions by own time. cProfile slows call-heavy Python code more
  than C, so the shares are indicative.

* **baseline** (``--baseline TREE``): every run cleans a fresh copy of the same log twice, once
  with this tree's cleaner and once with the other tree's, each in a worker process (this script
  with ``--worker``, that tree first on ``PYTHONPATH``), in alternating order; verify checks
  both. A table gives the cleaning process's CPU microseconds per message (medians) and the
  Python calls per message under cProfile of one cleaning of the ``--profile-size`` log per
  tree (deterministic), side by side, with their ratios.

With ``--repeat`` the log is built once per codec and copied (untimed) for each run; the tables
show medians. At most about twice ``--size`` is on disk at a time (three times with
``--repeat``); data goes to a temporary directory under ``--dir`` (default: the system
temporary directory), removed at the end.

    .venv/bin/python bench/cleaner_bench.py                        # 1 GiB, none and lz4
    .venv/bin/python bench/cleaner_bench.py --size 256M --codecs none,lz4,zstd --repeat 3
    .venv/bin/python bench/cleaner_bench.py --size 256M --repeat 3 --baseline /tmp/old

Timings never fail the run; a verification failure exits with status 1.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crc32c import crc32c

from samsa.config import LogConfig
from samsa.records import compression
from samsa.records.batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, Compression
from samsa.records.batch import validate_batches as _validate_batches
from samsa.records.record import RecordInput, decode_records, encode_batch, write_varint
from samsa.storage import cleaner
from samsa.storage.cleaner import CleanStats, OffsetMap, clean_log, cleanable
from samsa.storage.log import Log

PROJECT_DIR = Path(__file__).resolve().parent.parent
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
KEY_FORMAT = b"key-%010d"
KEY_BYTES = len(KEY_FORMAT % 0)
# one record: length .. key length (per offset delta), key, value length, offset, filler, headers
RECORD_FORMAT = b"%b" + KEY_FORMAT + b"%b%016d%b\x00"
OFFSET_DIGITS = 16  # a value starts with its record's offset, so verify can check it
FILLERS = 4093  # distinct value fillers, used in turn (a prime: no period shared with batches)
APPEND_BYTES = 1 * MiB  # batches handed to Log.append per call while building
READ_CHUNK = 1 * MiB
PLAIN_READS = 3  # the baseline is a fraction of a second: take the median of three
WORKER_TIMEOUT = 3600.0
WORDS = (
    b"order customer item price amount status shipped pending paid refund store region "
    b"north south east west code total tax discount coupon user session click view cart "
    b"device mobile desktop country city street number phone email account balance"
).split()


# --- inputs ---------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """Bytes from '1073741824', '1G', '1GiB', '256M', '512k' (binary units)."""
    units = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": GiB * 1024}
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = s[-1] if s and s[-1] in "KMGT" else ""
    number = s[: len(s) - len(unit)]
    try:
        value = int(float(number) * units[unit])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from exc
    if value < 0:
        raise argparse.ArgumentTypeError(f"size must not be negative: {text!r}")
    return value


def parse_codecs(text: str) -> list[Compression]:
    try:
        return [Compression[name.strip().upper()] for name in text.split(",") if name.strip()]
    except KeyError as exc:
        raise argparse.ArgumentTypeError(
            f"unknown codec {exc}; one of {', '.join(c.name.lower() for c in Compression)}"
        ) from None


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1 << 20):.1f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


# --- the workload: keys, values, batches ----------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    write_varint(n, out)
    return bytes(out)


@dataclass
class Workload:
    """What one log holds: ``records`` records in batches of ``per_batch``; the record at offset
    i has key ``KEY_FORMAT % keys[i]`` and a value starting with i."""

    records: int
    per_batch: int
    value_bytes: int
    keys: list[int]
    distinct: int
    timestamp: int
    fillers: list[bytes]
    prefixes: list[bytes] = field(default_factory=list)  # per offset delta: length .. key length
    value_length: bytes = b""

    def __post_init__(self) -> None:
        filler = self.value_bytes - OFFSET_DIGITS
        for delta in range(self.per_batch):
            inner = (1 + len(_varint(0)) + len(_varint(delta)) + len(_varint(KEY_BYTES))
                     + KEY_BYTES + len(_varint(self.value_bytes)) + OFFSET_DIGITS + filler + 1)
            self.prefixes.append(_varint(inner) + b"\x00" + _varint(0) + _varint(delta)
                                 + _varint(KEY_BYTES))
        self.value_length = _varint(self.value_bytes)

    @property
    def batches(self) -> int:
        return self.records // self.per_batch

    def key(self, offset: int) -> bytes:
        return KEY_FORMAT % self.keys[offset]

    def value(self, offset: int) -> bytes:
        return b"%016d" % offset + self.fillers[offset % FILLERS]

    def body(self, base: int) -> bytes:
        """The uncompressed records of the batch starting at offset ``base``."""
        keys, fillers, prefixes, vlen = self.keys, self.fillers, self.prefixes, self.value_length
        return b"".join([
            RECORD_FORMAT % (prefixes[d], keys[o], vlen, o, fillers[o % FILLERS])
            for d, o in enumerate(range(base, base + self.per_batch))
        ])

    def batch(self, number: int, codec: Compression) -> bytes:
        """Batch ``number`` (offsets from number * per_batch), as ``encode_batch`` builds it."""
        base = number * self.per_batch
        payload = compression.compress(codec, self.body(base))
        out = bytearray(HEADER_SIZE) + payload
        ts = self.timestamp + number
        HEADER.pack_into(out, 0, base, len(out) - LOG_OVERHEAD, -1, 2, 0, int(codec),
                         self.per_batch - 1, ts, ts, -1, -1, -1, self.per_batch)
        struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_START:]))
        return bytes(out)

    def reference_batch(self, number: int, codec: Compression) -> bytes:
        base = number * self.per_batch
        records = [RecordInput(value=self.value(o), key=self.key(o))
                   for o in range(base, base + self.per_batch)]
        return encode_batch(records, base_offset=base, timestamp=self.timestamp + number,
                            compression_type=codec)


def make_workload(size: int, unique: float, per_batch: int, value_bytes: int,
                  seed: int) -> Workload:
    """Enough records that the uncompressed log is about ``size`` bytes; keys as described."""
    rng = random.Random(seed)
    fillers = []
    for _ in range(FILLERS):
        text = b""
        while len(text) < value_bytes - OFFSET_DIGITS:
            text += rng.choice(WORDS) + b" "
        fillers.append(text[: value_bytes - OFFSET_DIGITS])
    probe = Workload(per_batch, per_batch, value_bytes, [0] * per_batch, 1, 0, fillers)
    batch_bytes = len(probe.batch(0, Compression.NONE))
    records = max(1, size // batch_bytes) * per_batch
    distinct = max(1, round(records * unique))
    keys = list(range(distinct))
    keys += rng.choices(range(distinct), k=records - distinct)
    rng.shuffle(keys)
    return Workload(records, per_batch, value_bytes, keys, distinct,
                    time.time_ns() // 1_000_000 - 3_600_000, fillers)


def log_config(segment_bytes: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, cleanup_policy=("compact",))


@dataclass
class Built:
    path: Path
    bytes: int
    segments: int
    seconds: float
    settle_seconds: float


def build_log(path: Path, work: Workload, codec: Compression, segment_bytes: int) -> Built:
    """Write the workload into a compacted log at ``path``, roll, close and settle (untimed)."""
    for number in (0, work.batches - 1):
        if work.batch(number, codec) != work.reference_batch(number, codec):
            raise RuntimeError(f"batch {number} ({codec.name}) differs from encode_batch's")
    start = time.perf_counter()
    log = Log(path, log_config(segment_bytes))
    chunk: list[bytes] = []
    chunk_bytes = 0
    for number in range(work.batches):
        batch = work.batch(number, codec)
        chunk.append(batch)
        chunk_bytes += len(batch)
        if chunk_bytes >= APPEND_BYTES:
            log.append(b"".join(chunk), assign_offsets=False)
            chunk, chunk_bytes = [], 0
    if chunk:
        log.append(b"".join(chunk), assign_offsets=False)
    log.roll()
    size, segments = log.size, len(log.segments) - 1
    log.close()
    seconds = time.perf_counter() - start
    began = time.perf_counter()
    os.sync()
    return Built(path, size, segments, seconds, time.perf_counter() - began)


# --- the measurements -----------------------------------------------------------------------------


def plain_read(log: Log) -> tuple[int, float]:
    """os.pread of every inactive segment file in 1 MiB chunks, ``PLAIN_READS`` times:
    (bytes, median seconds)."""
    paths = [s.log_path for s in log.segments[:-1]]
    total = 0
    times = []
    for _ in range(PLAIN_READS):
        total = 0
        start = time.perf_counter()
        for path in paths:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                pos = 0
                while data := os.pread(fd, READ_CHUNK, pos):
                    pos += len(data)
                total += pos
            finally:
                os.close(fd)
        times.append(time.perf_counter() - start)
    return total, statistics.median(times)


PHASES = ("offset map", "filter + write", "fsync", "swap", "other")
CPU = "cpu"  # timed_clean's phases also carry the process's CPU seconds under this key


class PhaseTimer:
    """Seconds per phase of one clean_log, from wrappers around the functions it calls."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.current: str | None = None
        self.cpu_seconds = 0.0

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            outer, self.current = self.current, phase
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - start
                self.current = outer

        return timed

    def wrap_fsync(self, fn: Callable[[int], None]) -> Callable[[int], None]:
        def timed(fd: int) -> None:
            start = time.perf_counter()
            try:
                fn(fd)
            finally:
                took = time.perf_counter() - start
                self.seconds["fsync"] += took
                if self.current is not None:
                    self.seconds[self.current] -= took

        return timed


@dataclass
class Run:
    bytes_before: int
    bytes_after: int
    records_before: int
    records_after: int
    segments_before: int
    segments_after: int
    seconds: float
    plain_bytes: int
    plain_seconds: float
    phases: dict[str, float]
    stats: CleanStats
    cpu_seconds: float = 0.0  # the cleaning process's CPU time during clean_log

    @property
    def cpu_us_per_msg(self) -> float:
        return self.cpu_seconds * 1e6 / self.records_before if self.records_before else 0.0

    @property
    def mb_s(self) -> float:
        return self.bytes_before / self.seconds / 1e6 if self.seconds else 0.0

    @property
    def msgs_s(self) -> float:
        return self.records_before / self.seconds if self.seconds else 0.0

    @property
    def plain_mb_s(self) -> float:
        return self.plain_bytes / self.plain_seconds / 1e6 if self.plain_seconds else 0.0


def timed_clean(log: Log, offset_map: OffsetMap) -> tuple[CleanStats, float, dict[str, float]]:
    """clean_log over the whole dirty range, with the phase wrappers in place."""
    state = cleanable(log, None, int(time.time() * 1000))
    timer = PhaseTimer()
    saved = (cleaner.build_offset_map, cleaner.write_cleaned, os.fsync)
    cleaner.build_offset_map = timer.wrap("offset map", saved[0])
    cleaner.write_cleaned = timer.wrap("filter + write", saved[1])
    os.fsync = timer.wrap_fsync(saved[2])
    log.replace_segments = timer.wrap("swap", log.replace_segments)  # type: ignore[method-assign]
    try:
        start, cpu = time.perf_counter(), time.process_time()
        stats = clean_log(log, state.first_dirty, state.first_uncleanable, offset_map)
        seconds = time.perf_counter() - start
        timer.cpu_seconds = time.process_time() - cpu
    finally:
        cleaner.build_offset_map, cleaner.write_cleaned, os.fsync = saved
        del log.replace_segments
    timer.seconds["other"] = seconds - sum(timer.seconds[p] for p in PHASES[:-1])
    return stats, seconds, {**timer.seconds, CPU: timer.cpu_seconds}


def verify(log: Log, work: Workload, end_offset: int) -> tuple[int, list[str]]:
    """Check the cleaned log against the workload: (records, problems)."""
    problems: list[str] = []
    last = dict(zip(work.keys, range(work.records), strict=True))  # key -> its last offset
    seen: set[int] = set()
    previous = -1
    records = 0
    if log.log_end_offset != end_offset:
        problems.append(f"log end offset {log.log_end_offset}, was {end_offset}")
    for segment in log.segments[:-1]:
        if segment.size == 0:  # every record of the segment had a later value
            continue
        data = segment.read_bytes(0, segment.size)
        try:
            headers = _validate_batches(data, from_client=False)
        except Exception as exc:  # CorruptRecordError and friends: report, do not crash
            problems.append(f"{segment.log_path.name}: {exc}")
            continue
        pos = 0
        for header in headers:
            for record in decode_records(memoryview(data)[pos : pos + header.size]):
                records += 1
                key = int(record.key[4:]) if record.key else -1
                if record.offset <= previous:
                    problems.append(f"offset {record.offset} after {previous}")
                previous = record.offset
                if last.get(key) != record.offset:
                    problems.append(f"key {record.key!r} at offset {record.offset}: its last "
                                    f"offset is {last.get(key)}")
                elif record.value != work.value(record.offset):
                    problems.append(f"offset {record.offset}: wrong value")
                if key in seen:
                    problems.append(f"key {record.key!r} kept twice")
                seen.add(key)
            pos += header.size
        if len(problems) > 20:
            break
    if len(seen) != work.distinct and len(problems) <= 20:
        problems.append(f"{len(seen)} keys survive, {work.distinct} distinct keys were written")
    return records, problems[:20]


def run_once(built: Built, work: Workload, segment_bytes: int, tree: Path | None = None
             ) -> tuple[Run, list[str]]:
    """One cleaning of ``built``: in this process, or (``tree``) in a worker process running
    that samsa source tree's cleaner; then the checks, here."""
    log = Log(built.path, log_config(segment_bytes), had_clean_shutdown=True)
    end_offset = log.log_end_offset
    before = log.size
    segments_before = len(log.segments) - 1
    plain_bytes, plain_seconds = plain_read(log)
    if plain_bytes != before:
        log.abandon()
        raise RuntimeError(f"plain read saw {plain_bytes} bytes, the log holds {before}")
    # room_for counts every record of a batch as a new key: leave one batch of slack
    map_entries = work.distinct + work.per_batch
    if tree is not None:
        log.abandon()
        answer = worker(tree, "clean", built.path, segment_bytes, map_entries)
        known = {f.name for f in dataclasses.fields(CleanStats)}
        stats = CleanStats(**{k: v for k, v in answer["stats"].items() if k in known})
        seconds, phases = answer["seconds"], answer["phases"]
        log = Log(built.path, log_config(segment_bytes), had_clean_shutdown=True)
    try:
        if tree is None:
            offset_map = OffsetMap(map_entries)
            stats, seconds, phases = timed_clean(log, offset_map)
        say(f"    clean_log{f' ({tree})' if tree else ''}: {seconds:.2f} s, "
            f"{before / seconds / 1e6:.1f} MB/s, {phases[CPU] * 1e6 / work.records:.2f} CPU "
            f"us/msg; plain read {plain_bytes / plain_seconds / 1e6:.0f} MB/s")
        if stats.end_offset != end_offset:
            raise RuntimeError(f"clean_log stopped at {stats.end_offset}, not {end_offset}")
        after = log.size
        began = time.perf_counter()
        kept, problems = verify(log, work, end_offset)
        say(f"    verified {kept:,} records in {time.perf_counter() - began:.1f} s: "
            + ("ok" if not problems else f"{len(problems)} problem(s)"))
        inactive = log.segments[:-1]
        run = Run(before, after, work.records, kept, segments_before,
                  sum(1 for s in inactive if s.size), seconds, plain_bytes, plain_seconds, phases,
                  stats, phases[CPU])
        return run, problems
    finally:
        log.abandon()


def worker(tree: Path, what: str, path: Path, segment_bytes: int, map_entries: int
           ) -> dict[str, Any]:
    """Run ``--worker what`` of this script with ``tree``'s samsa first on the path; its
    JSON answer."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", what, "--worker-log",
         str(path), "--segment-bytes", str(segment_bytes), "--worker-map", str(map_entries)],
        env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True, text=True,
        timeout=WORKER_TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the worker for {tree} failed: {done.stderr.strip()[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def run_worker(what: str, path: Path, segment_bytes: int, map_entries: int) -> None:
    """The worker's side: clean the log at ``path`` (``clean``: timed, with its phases;
    ``calls``: under cProfile, its Python calls) and print one JSON line."""
    log = Log(path, log_config(segment_bytes), had_clean_shutdown=True)
    try:
        if what == "clean":
            stats, seconds, phases = timed_clean(log, OffsetMap(map_entries))
            answer: dict[str, Any] = {"seconds": seconds, "phases": phases}
        else:
            state = cleanable(log, None, int(time.time() * 1000))
            profiler = cProfile.Profile()
            stats = profiler.runcall(clean_log, log, state.first_dirty,
                                     state.first_uncleanable, OffsetMap(map_entries))
            raw = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
            answer = {"calls": sum(entry[1] for entry in raw.values()),
                      "samsa": str(Path(cleaner.__file__).parent.parent)}
        answer["stats"] = dataclasses.asdict(stats)
    finally:
        log.abandon()
    print(json.dumps(answer), flush=True)


# --- the profile ----------------------------------------------------------------------------------


def profile(parent: Path, work: Workload, codec: Compression, segment_bytes: int,
            top: int) -> tuple[list[str], float, int]:
    """clean_log under cProfile on a small log: (table lines, seconds, log bytes)."""
    path = parent / "profile-0"
    built = build_log(path, work, codec, segment_bytes)
    log = Log(path, log_config(segment_bytes), had_clean_shutdown=True)
    try:
        state = cleanable(log, None, int(time.time() * 1000))
        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.runcall(clean_log, log, state.first_dirty, state.first_uncleanable,
                         OffsetMap(work.distinct + work.per_batch))
        seconds = time.perf_counter() - start
    finally:
        log.abandon()
        shutil.rmtree(path, ignore_errors=True)
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values()) or 1.0
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    body = []
    for (filename, line, name), (_, calls, own, cumulative, _) in rows:
        where = _short_path(filename)
        label = f"{where}:{line} {name}" if line else name
        body.append((label, f"{calls:,}", f"{own:.2f}", f"{own / total:.0%}",
                     f"{cumulative:.2f}"))
    head = ("function (by own time)", "calls", "own s", "share", "cumulative s")
    return _table(head, body), seconds, built.bytes


def compare(work_dir: Path, codec: Compression, args: argparse.Namespace, this: Result,
            base: Result) -> tuple[str, ...]:
    """A row of the baseline table: CPU us per message (medians of the runs) and Python calls
    per message (one profiled cleaning of the --profile-size log per tree)."""
    calls: dict[str, float] = {}
    if args.profile_size:
        small = make_workload(args.profile_size, args.unique, args.batch_records,
                              args.value_bytes, args.seed)
        built = build_log(work_dir / "calls-0", small, codec, args.segment_bytes)
        try:
            for label, tree in (("this", PROJECT_DIR), ("base", args.baseline)):
                target = work_dir / "calls-run"
                shutil.copytree(built.path, target)
                try:
                    answer = worker(tree, "calls", target, args.segment_bytes,
                                    small.distinct + small.per_batch)
                finally:
                    shutil.rmtree(target, ignore_errors=True)
                calls[label] = answer["calls"] / small.records
        finally:
            shutil.rmtree(built.path, ignore_errors=True)
    cpu_base = base.median(lambda r: r.cpu_us_per_msg)
    cpu_this = this.median(lambda r: r.cpu_us_per_msg)
    row = (codec.name.lower(), f"{cpu_base:.2f}", f"{cpu_this:.2f}",
           f"{cpu_this / cpu_base:.2f}x" if cpu_base else "-",
           f"{calls['base']:.2f}" if calls else "-", f"{calls['this']:.2f}" if calls else "-",
           f"{calls['this'] / calls['base']:.2f}x" if calls else "-",
           " / ".join(f"{r.cpu_us_per_msg:.2f}" for r in base.runs),
           " / ".join(f"{r.cpu_us_per_msg:.2f}" for r in this.runs))
    say("    " + ", ".join(f"{h} {v}" for h, v in zip(
        ("codec", "CPU us/msg base", "this", "ratio", "calls/msg base", "this", "ratio"),
        row, strict=False)))
    return row


def _short_path(filename: str) -> str:
    for marker in ("/samsa/", "/site-packages/", "/lib/python"):
        if marker in filename:
            return filename[filename.index(marker) + 1 :]
    return filename


# --- output ---------------------------------------------------------------------------------------


def _table(head: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "| " + " | ".join([first, *rest]) + " |"

    rule = "|" + "|".join(["-" * (widths[0] + 2)] + ["-" * (w + 1) + ":" for w in widths[1:]]) + "|"
    return [line(head), rule, *[line(r) for r in body]]


def _mib(n: float) -> str:
    return f"{n / MiB:,.1f} MiB"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass
class Result:
    codec: Compression
    built: Built
    runs: list[Run] = field(default_factory=list)

    def median(self, fn: Callable[[Run], float]) -> float:
        return _median([fn(r) for r in self.runs])


def tables(results: list[Result]) -> list[str]:
    speed = []
    sizes = []
    phases = []
    for res in results:
        name = res.codec.name.lower()
        first = res.runs[0]
        seconds = res.median(lambda r: r.seconds)
        mb_s, plain = res.median(lambda r: r.mb_s), res.median(lambda r: r.plain_mb_s)
        speed.append((name, _mib(first.bytes_before), f"{seconds:.2f}", f"{mb_s:.1f}",
                      f"{res.median(lambda r: r.msgs_s):,.0f}", f"{plain:,.0f}",
                      f"{plain / mb_s:,.0f}x" if mb_s else "-"))
        after = res.median(lambda r: r.bytes_after)
        sizes.append((name, f"{first.records_before:,}", f"{first.records_after:,}",
                      f"{first.segments_before} -> {first.segments_after}",
                      _mib(first.bytes_before), _mib(after),
                      f"{1 - after / first.bytes_before:.1%}" if first.bytes_before else "-"))
        cells = []
        for phase in PHASES:
            value = res.median(lambda r, p=phase: r.phases[p])  # type: ignore[misc]
            cells.append(f"{value:.2f} s ({value / seconds:.0%})" if seconds else "-")
        phases.append((name, *cells, f"{seconds:.2f} s"))
    return [
        *_table(("codec", "log before", "clean s", "cleaner MB/s", "messages/s",
                 "plain read MB/s", "plain / cleaner"), speed),
        "",
        *_table(("codec", "records before", "records after", "segments", "size before",
                 "size after", "reduction"), sizes),
        "",
        *_table(("codec", *PHASES, "total"), phases),
    ]


def to_json(res: Result) -> dict[str, object]:
    first = res.runs[0]
    return {
        "bench": "cleaner",
        "codec": res.codec.name.lower(),
        "bytes_before": first.bytes_before,
        "bytes_after": res.median(lambda r: r.bytes_after),
        "records_before": first.records_before,
        "records_after": first.records_after,
        "segments": res.built.segments,
        "seconds": round(res.median(lambda r: r.seconds), 3),
        "mb_s": round(res.median(lambda r: r.mb_s), 2),
        "messages_s": round(res.median(lambda r: r.msgs_s)),
        "plain_read_mb_s": round(res.median(lambda r: r.plain_mb_s), 1),
        "phases_s": {p: round(res.median(lambda r, p=p: r.phases[p]), 3)  # type: ignore[misc]
                     for p in PHASES},
        "runs_mb_s": [round(r.mb_s, 2) for r in res.runs],
        "build_s": round(res.built.seconds, 2),
    }


# --- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="samsa log cleaner (clean_log) throughput and size before/after.",
        epilog="Progress goes to stderr. Exit status 1 only if the cleaned log is wrong.",
    )
    parser.add_argument("--size", type=parse_size, default=GiB,
                        help="uncompressed log bytes to clean, e.g. 1G, 256M (default 1G)")
    parser.add_argument("--unique", type=float, default=0.10,
                        help="distinct keys as a fraction of the records (default 0.10)")
    parser.add_argument("--segment-bytes", type=parse_size, default=128 * MiB,
                        help="segment.bytes of the log (default 128M)")
    parser.add_argument("--batch-records", type=int, default=100,
                        help="records per batch (default 100)")
    parser.add_argument("--value-bytes", type=int, default=100,
                        help="bytes per value (default 100, at least 16)")
    parser.add_argument("--codecs", type=parse_codecs, default=parse_codecs("none,lz4"),
                        help="comma-separated batch codecs, each a separate log "
                             "(default none,lz4; also gzip, snappy, zstd)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="clean a fresh copy of each log this many times; medians shown")
    parser.add_argument("--profile-size", type=parse_size, default=32 * MiB,
                        help="log bytes for the cProfile run, 0 to skip (default 32M)")
    parser.add_argument("--profile-top", type=int, default=12,
                        help="functions shown from each profile (default 12)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where to write (a temporary directory is made inside it and "
                             "removed afterwards; default the system temporary directory)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON line per codec on stdout (the tables go to stderr)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another samsa source tree: each run cleans a copy of the same log"
                        " with it too, interleaved (every other run first), both in worker"
                        " processes; adds a table of CPU us and Python calls per message")
    parser.add_argument("--worker", choices=("clean", "calls"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-log", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-map", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args.worker, args.worker_log, args.segment_bytes, args.worker_map)
        return 0
    if args.baseline is not None:
        if not (args.baseline / "samsa" / "storage" / "cleaner.py").exists():
            parser.error(f"--baseline {args.baseline} is not a samsa source tree")
        args.baseline = args.baseline.resolve()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if not 0 < args.unique <= 1:
        parser.error("--unique must be in (0, 1]")
    if args.value_bytes < OFFSET_DIGITS or args.batch_records < 1:
        parser.error(f"--value-bytes must be at least {OFFSET_DIGITS}, --batch-records >= 1")
    if args.size < args.batch_records * (args.value_bytes + 64):
        parser.error("--size is smaller than one batch")
    if not args.codecs:
        parser.error("--codecs names no codec")

    args.dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.dir).free
    need = args.size * (3 if args.repeat > 1 else 2)
    if free < need:
        print(f"cleaner_bench: {free / GiB:.1f} GiB free in {args.dir}, need {need / GiB:.1f} "
              "GiB; use a smaller --size or another --dir", file=sys.stderr)
        return 1

    say(f"samsa cleaner bench: {_mib(args.size)} log, {args.unique:.0%} unique keys, "
        f"segment.bytes {_mib(args.segment_bytes)}, {args.batch_records} records of "
        f"{KEY_BYTES}-byte keys and {args.value_bytes}-byte values per batch, codecs "
        f"{','.join(c.name.lower() for c in args.codecs)}, repeat {args.repeat}")
    say(f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {memory_total()}; data in {args.dir} ({free / GiB:.0f} GiB free)")

    load_start = os.getloadavg()[0]
    work_dir = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.dir))
    results: list[Result] = []
    comparison: list[tuple[str, ...]] = []
    problems: list[str] = []
    profile_lines: list[str] = []
    notes: list[str] = []
    try:
        if args.profile_size:
            small = make_workload(args.profile_size, args.unique, args.batch_records,
                                  args.value_bytes, args.seed)
            for codec in args.codecs:
                say(f"profile: clean_log of a {_mib(args.profile_size)} log, "
                    f"{codec.name.lower()}, under cProfile ...")
                lines, seconds, size = profile(work_dir, small, codec, args.segment_bytes,
                                               args.profile_top)
                profile_lines += ["", f"cProfile, {codec.name.lower()}: clean_log of "
                                  f"{_mib(size)} ({small.records:,} records) took {seconds:.2f} "
                                  "s under the profiler", *lines]

        began = time.perf_counter()
        work = make_workload(args.size, args.unique, args.batch_records, args.value_bytes,
                             args.seed)
        keys_s = time.perf_counter() - began
        say(f"workload: {work.records:,} records, {work.distinct:,} distinct keys, "
            f"{work.batches:,} batches (keys drawn and shuffled in {keys_s:.1f} s)")

        for codec in args.codecs:
            name = codec.name.lower()
            say(f"{name}: building the log ...")
            built = build_log(work_dir / f"{name}-0", work, codec, args.segment_bytes)
            say(f"    {_mib(built.bytes)} in {built.segments} segments, built in "
                f"{built.seconds:.1f} s ({built.bytes / built.seconds / 1e6:.0f} MB/s), "
                f"settled in {built.settle_seconds:.1f} s")
            notes.append(f"build {name}: {built.seconds:.1f} s for {_mib(built.bytes)} "
                         f"({built.segments} segments; {work.records / built.seconds:,.0f} "
                         "records/s, untimed)")
            result = Result(codec, built)
            base = Result(codec, built)
            trees: list[tuple[Path | None, Result]] = [(None, result)]
            if args.baseline is not None:
                trees = [(PROJECT_DIR, result), (args.baseline, base)]
            for i in range(args.repeat):
                for tree, into in trees if i % 2 == 0 else list(reversed(trees)):
                    target = built.path
                    if args.repeat > 1 or len(trees) > 1:
                        target = work_dir / f"{name}-run"
                        shutil.copytree(built.path, target)
                        os.sync()
                    say(f"  run {i + 1}/{args.repeat}" + (f", {tree}" if tree else ""))
                    try:
                        run, found = run_once(Built(target, built.bytes, built.segments, 0, 0),
                                              work, args.segment_bytes, tree)
                    finally:
                        if target != built.path:
                            shutil.rmtree(target, ignore_errors=True)
                    into.runs.append(run)
                    which = " (baseline)" if into is base else ""
                    problems += [f"{name}{which}: {p}" for p in found]
            if args.baseline is not None:
                comparison.append(compare(work_dir, codec, args, result, base))
            shutil.rmtree(built.path, ignore_errors=True)
            results.append(result)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)

    out: Callable[[str], None] = say if args.json else print
    out("")
    for line in tables(results):
        out(line)
    out("")
    if comparison:
        out(f"this tree ({PROJECT_DIR}) against --baseline {args.baseline}, interleaved, "
            f"medians of {args.repeat}; CPU: the cleaning process's, during clean_log; calls: "
            f"cProfile's Python calls per message cleaning the {_mib(args.profile_size)} "
            "log (deterministic)")
        out("")
        for line in _table(("codec", "CPU us/msg base", "CPU us/msg this", "ratio",
                            "calls/msg base", "calls/msg this", "ratio", "runs (us/msg) base",
                            "runs (us/msg) this"), comparison):
            out(line)
        out("")
    notes += [
        "MB/s = log bytes before / clean_log seconds / 1e6; messages/s = records before / "
        "seconds; one full pass from offset 0, OffsetMap(distinct keys + one batch), "
        "page-cache warm",
        "plain read: os.pread of the same segment files in 1 MiB chunks, median of three "
        "reads (one read each; the cleaner reads every byte twice)",
        "segments: inactive segments holding data, before -> after (a cleaned segment can be "
        "left empty; the next cleaning merges it)",
        "phases: offset map = build_offset_map; filter + write = write_cleaned without its "
        "fsync; swap = Log.replace_segments (re-validates the cleaned segment, rebuilds its "
        "indexes) without fsync",
        "verify: " + ("every key present once with its last offset and value, offsets "
                      "increasing, CRCs valid: ok" if not problems else "FAILED"),
        f"load average (1 min): {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
        f"end, {os.cpu_count()} CPUs; the cleaner runs on one: other busy processes slow it",
    ]
    for text in notes:
        out(text)
    for line in profile_lines:
        out(line)
    for problem in problems:
        say(f"PROBLEM {problem}")
    if args.json:
        for res in results:
            print(json.dumps(to_json(res)), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
