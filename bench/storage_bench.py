"""Storage benchmark: samsa's partition log against plain sequential file I/O on the same disk.

What is measured, in one run and on one filesystem:

* **append**: ``Log.append`` of a pre-built RecordBatch v2, the same bytes over and over, until
  ``--size`` bytes are in the log. Once with 16 KiB batches, once with 1 MiB batches. The batch
  is built once with ``encode_batch`` before the clock starts: a broker receives batches as bytes
  from the socket, and building them is the client's cost. What the clock sees is what the
  broker pays per produce: ``validate_batches`` (header parse and CRC-32C), offset assignment,
  index bookkeeping and one ``os.writev``.
* **plain write** (the baseline): ``os.write`` of a buffer of the same size, in a loop, to one
  file opened with ``O_APPEND`` (as a segment file is). Neither side calls fsync: both write
  into the page cache, which is where Kafka's append goes too.
* **read**: a sequential consumer over the 1 MiB-batch log: ``Log.read(offset, 1 MiB)``, then
  ``FileRegion.read()`` (a ``pread``; the broker will ``sendfile`` the region instead), then the
  next offset from the last batch header in the region. The baseline is ``os.pread`` of the
  plain-write file in 1 MiB chunks. Both files were just written, so both reads come from the
  page cache: this measures the per-fetch CPU cost of the log, not the disk.

The point of the comparison: an append that writes the producer's bytes without copying them
should cost little more than the write itself, so samsa's append at 1 MiB batches is expected
to reach at least 70% of the plain-write throughput. At 16 KiB the fixed per-batch Python cost
weighs more; its batches/s are reported too.

Method: workloads run in the order plain 16 KiB, samsa 16 KiB, plain 1 MiB, samsa 1 MiB, then
the two reads. The 16 KiB files are deleted before the next workload, so at most about twice
``--size`` is on disk. Before each timed write, ``--size`` bytes are written to a scratch file
that is deleted at once (not timed, ``--no-prime`` turns it off): on a virtual machine whose
balloon driver returns free memory to the host, a writer that gets pages not recently used pays
the host's page faults, and without priming the second of two writers in a row is the slow
one, whichever it is. After each write workload the page cache is settled with ``os.sync()``
(not timed), so that no workload competes with the writeback of the previous one. Each
workload stops at ``--time-limit`` seconds and then reports on what it did in that time.
MB/s is bytes / seconds / 1e6. With ``--repeat`` the table shows the median.

    .venv/bin/python bench/storage_bench.py                 # 1 GiB per workload
    .venv/bin/python bench/storage_bench.py --size 256M --repeat 3 --json

Timings never fail the run: the exit status is 0 whatever the numbers are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from samsa.config import LogConfig
from samsa.records.batch import BatchHeader, iter_headers, read_header
from samsa.records.record import RecordInput, encode_batch
from samsa.storage.log import Log

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
BATCH_SIZES = (16 * KiB, 1 * MiB)
RECORD_VALUE_BYTES = 1 * KiB
READ_MAX_BYTES = 1 * MiB  # a consumer's fetch.max.bytes / max.partition.fetch.bytes scale
CHECK_BYTES = 8 * MiB  # look at the clock once per this many bytes written or read
AIM_RATIO = 0.70
PROJECT_DIR = Path(__file__).resolve().parent.parent
DEFAULT_PARENT = PROJECT_DIR / "bench" / "out"  # git-ignored, on the repository's disk
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_RAM_FILESYSTEMS = {"tmpfs", "ramfs", "devtmpfs"}


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
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return value


def build_batch(target: int, rng: random.Random) -> tuple[bytes, int]:
    """One uncompressed v2 batch of exactly ``target`` bytes: records with 1 KiB values, the
    last one sized to fill. Returns (batch, record count)."""
    timestamp = time.time_ns() // 1_000_000
    full = RecordInput(value=rng.randbytes(RECORD_VALUE_BYTES))
    count = max(1, (target - 61) // (RECORD_VALUE_BYTES + 16))
    records = [full] * count
    tail: list[RecordInput] = []
    for _ in range(8):  # varint lengths make the fill converge in a step or two
        batch = encode_batch(records + tail, timestamp=timestamp)
        gap = target - len(batch)
        if gap == 0:
            break
        # A new tail record costs about 8 bytes besides its value; a resized one, nothing.
        tail_size = len(tail[0].value or b"") + gap if tail else gap - 8
        tail = [RecordInput(value=bytes(max(0, tail_size)))]
    return batch, len(records) + len(tail)


# --- the environment ------------------------------------------------------------------------------


def filesystem_of(path: Path) -> tuple[str, str, str]:
    """(mount point, filesystem type, device) holding ``path``, from /proc/self/mountinfo."""
    real = os.path.realpath(path)
    best = ("?", "unknown", "?")
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[0].replace("?", "")):
            best = (mount, tail[0], tail[1])
    return best


def memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1 << 20):.1f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the workloads --------------------------------------------------------------------------------


@dataclass
class Measure:
    bytes: int
    ops: int
    seconds: float
    limited: bool  # stopped by --time-limit before the whole volume

    @property
    def mb_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def ops_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def plain_write(path: Path, buf: bytes, count: int, limit_s: float) -> Measure:
    """os.write of ``buf`` ``count`` times to an O_APPEND file (no fsync)."""
    step = max(1, CHECK_BYTES // len(buf))
    fd = os.open(path, _OPEN_FLAGS, 0o644)
    written = done = 0
    limited = False
    try:
        start = time.perf_counter()
        deadline = start + limit_s
        while done < count:
            for _ in range(min(step, count - done)):
                n = os.write(fd, buf)
                if n != len(buf):  # a short write: finish the buffer as Log does
                    rest = memoryview(buf)[n:]
                    while rest:
                        k = os.write(fd, rest)
                        rest, n = rest[k:], n + k
                written += n
                done += 1
            if time.perf_counter() > deadline and done < count:
                limited = True
                break
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
    return Measure(written, done, seconds, limited)


def samsa_append(log: Log, batch: bytes, count: int, limit_s: float) -> Measure:
    """Log.append of the same batch ``count`` times (the log assigns the offsets)."""
    step = max(1, CHECK_BYTES // len(batch))
    append = log.append
    done = 0
    limited = False
    start = time.perf_counter()
    deadline = start + limit_s
    while done < count:
        for _ in range(min(step, count - done)):
            append(batch)
            done += 1
        if time.perf_counter() > deadline and done < count:
            limited = True
            break
    seconds = time.perf_counter() - start
    return Measure(done * len(batch), done, seconds, limited)


def plain_read(path: Path, chunk: int, limit_s: float) -> Measure:
    """Sequential os.pread of the whole file in ``chunk``-byte reads."""
    step = max(1, CHECK_BYTES // chunk)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    total = ops = 0
    limited = eof = False
    try:
        start = time.perf_counter()
        deadline = start + limit_s
        while not eof:
            for _ in range(step):
                data = os.pread(fd, chunk, total)
                if not data:
                    eof = True
                    break
                total += len(data)
                ops += 1
            if not eof and time.perf_counter() > deadline:
                limited = True
                break
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
    return Measure(total, ops, seconds, limited)


def samsa_read(log: Log, max_bytes: int, limit_s: float) -> Measure:
    """A sequential consumer: Log.read + region.read(), then on from the region's last batch."""
    step = max(1, CHECK_BYTES // max_bytes)
    offset, end = log.log_start_offset, log.log_end_offset
    total = ops = 0
    limited = False
    start = time.perf_counter()
    deadline = start + limit_s
    while offset < end:
        for _ in range(step):
            region = log.read(offset, max_bytes)
            if region is None:
                offset = end
                break
            data = region.read()
            last: BatchHeader | None = None
            for _, last in iter_headers(data):  # noqa: B007 (the last one is what we need)
                pass
            if last is None:
                raise RuntimeError(f"Log.read at offset {offset} returned no whole batch")
            offset = last.next_offset
            total += len(data)
            ops += 1
            if offset >= end:
                break
        if offset < end and time.perf_counter() > deadline:
            limited = True
            break
    seconds = time.perf_counter() - start
    return Measure(total, ops, seconds, limited)


def prime_pages(work: Path, buf: bytes, size: int, limit_s: float) -> float:
    """Write ``size`` bytes to a scratch file and delete it (untimed), so that the timed
    workload after it takes page-cache pages the kernel has just freed.

    Without this the order of the workloads decides the result on a virtual machine whose
    balloon driver hands free memory back to the host: whichever workload allocates pages that
    were not recently in use pays the host's page faults and runs at a fraction of the speed.
    """
    start = time.perf_counter()
    path = work / "prime.bin"
    plain_write(path, buf, max(1, size // len(buf)), limit_s)
    path.unlink()
    return time.perf_counter() - start


def settle() -> float:
    """Write back dirty pages (untimed), so the next workload starts from a quiet page cache."""
    start = time.perf_counter()
    os.sync()
    return time.perf_counter() - start


# --- one run --------------------------------------------------------------------------------------


@dataclass
class Row:
    workload: str
    batch_bytes: int
    samsa: list[Measure] = field(default_factory=list)
    plain: list[Measure] = field(default_factory=list)

    @staticmethod
    def _median(values: list[float]) -> float:
        return statistics.median(values) if values else 0.0

    @property
    def samsa_mb_s(self) -> float:
        return self._median([m.mb_s for m in self.samsa])

    @property
    def plain_mb_s(self) -> float:
        return self._median([m.mb_s for m in self.plain])

    @property
    def samsa_ops_s(self) -> float:
        return self._median([m.ops_s for m in self.samsa])

    @property
    def plain_ops_s(self) -> float:
        return self._median([m.ops_s for m in self.plain])

    @property
    def ratio(self) -> float | None:
        return self.samsa_mb_s / self.plain_mb_s if self.plain_mb_s else None

    @property
    def time_limited(self) -> bool:
        return any(m.limited for m in self.samsa + self.plain)


def run_once(
    work: Path,
    size: int,
    batches: dict[int, bytes],
    rows: dict[str, Row],
    limit_s: float,
    prime: bool,
) -> None:
    small, large = BATCH_SIZES

    def before_write() -> None:
        if prime:
            seconds = prime_pages(work, batches[large], size, limit_s)
            say(f"    primed the page allocator in {seconds:.2f} s")

    for batch_size in (small, large):
        batch = batches[batch_size]
        count = max(1, size // len(batch))
        label, human = _label(batch_size), _fmt(batch_size)
        plain_path = work / f"plain-{label}.bin"
        log_dir = work / f"samsa-{label}-0"

        say(f"  plain write, {human} buffers x {count} ...")
        before_write()
        m = plain_write(plain_path, batch, count, limit_s)
        rows[f"append-{label}"].plain.append(m)
        say(_result(m))
        if batch_size == small:
            plain_path.unlink()
        say(f"    settled in {settle():.2f} s")

        say(f"  samsa append, {human} batches x {count} ...")
        before_write()
        log = Log(log_dir, LogConfig())
        try:
            m = samsa_append(log, batch, count, limit_s)
            rows[f"append-{label}"].samsa.append(m)
            say(_result(m, f"{len(log.segments)} segment(s)"))
            if batch_size == small:
                continue
            say(f"    settled in {settle():.2f} s")

            say(f"  plain read, {_fmt(READ_MAX_BYTES)} chunks ...")
            m = plain_read(plain_path, READ_MAX_BYTES, limit_s)
            rows[f"read-{label}"].plain.append(m)
            say(_result(m))
            expected_plain = rows[f"append-{label}"].plain[-1].bytes
            if not m.limited and m.bytes != expected_plain:
                say(f"    WARNING: read {m.bytes} bytes, {expected_plain} were written")

            say(f"  samsa read, max_bytes {_fmt(READ_MAX_BYTES)} ...")
            m = samsa_read(log, READ_MAX_BYTES, limit_s)
            rows[f"read-{label}"].samsa.append(m)
            say(_result(m))
            if not m.limited and m.bytes != log.size:
                say(f"    WARNING: read {m.bytes} bytes, the log holds {log.size}")
        finally:
            log.abandon()  # no close: its fsync would only write out what is deleted next
            shutil.rmtree(log_dir, ignore_errors=True)
            plain_path.unlink(missing_ok=True)
            say(f"    settled in {settle():.2f} s")


def _result(m: Measure, extra: str = "") -> str:
    parts = [f"{m.seconds:.2f} s", f"{m.ops} ops", extra, "time-limited" if m.limited else ""]
    return f"    {m.mb_s:9.1f} MB/s  ({', '.join(p for p in parts if p)})"


def _label(n: int) -> str:
    return f"{n // MiB}MiB" if n >= MiB and n % MiB == 0 else f"{n // KiB}KiB"


def _fmt(n: int) -> str:
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} bytes"


# --- output ---------------------------------------------------------------------------------------


def to_json(row: Row) -> dict[str, object]:
    ratio = row.ratio
    return {
        "bench": "storage",
        "workload": row.workload,
        "batch_bytes": row.batch_bytes,
        "bytes": row.samsa[-1].bytes if row.samsa else 0,
        "samsa_mb_s": round(row.samsa_mb_s, 1),
        "plain_mb_s": round(row.plain_mb_s, 1),
        "ratio": None if ratio is None else round(ratio, 3),
        "samsa_ops_s": round(row.samsa_ops_s, 1),
        "plain_ops_s": round(row.plain_ops_s, 1),
        "samsa_runs_mb_s": [round(m.mb_s, 1) for m in row.samsa],
        "plain_runs_mb_s": [round(m.mb_s, 1) for m in row.plain],
        "time_limited": row.time_limited,
    }


def format_table(rows: list[Row]) -> list[str]:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else "-"

    head = ("workload", "samsa MB/s", "plain MB/s", "ratio")
    body: list[tuple[str, str, str, str]] = []
    for row in rows:
        mark = " *" if row.time_limited else ""
        body.append((
            f"{row.workload}{mark}",
            f"{row.samsa_mb_s:.1f}",
            f"{row.plain_mb_s:.1f}",
            ratio(row.samsa_mb_s, row.plain_mb_s),
        ))
        if row.workload.startswith("append") and row.batch_bytes < MiB:
            body.append((
                f"append {_fmt(row.batch_bytes)}, batches/s (plain: writes/s){mark}",
                f"{row.samsa_ops_s:,.0f}",
                f"{row.plain_ops_s:,.0f}",
                ratio(row.samsa_ops_s, row.plain_ops_s),
            ))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(4)]

    def line(cells: tuple[str, str, str, str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "| " + " | ".join([first, *rest]) + " |"

    rule = "|" + "|".join(["-" * (widths[0] + 2)] + ["-" * (w + 1) + ":" for w in widths[1:]]) + "|"
    return [line(head), rule, *[line(r) for r in body]]


# --- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="samsa Log.append / Log.read against plain sequential file I/O.",
        epilog="Progress goes to stderr. Exit status 0 whatever the timings are.",
    )
    parser.add_argument("--size", type=parse_size, default=GiB,
                        help="bytes per workload, e.g. 1G, 256M (default 1G)")
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"where to write (a temporary directory is made inside it and "
                             f"removed afterwards; default {DEFAULT_PARENT})")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the whole sequence this many times; the table shows medians")
    parser.add_argument("--time-limit", type=float, default=120.0,
                        help="seconds after which one workload stops and reports (default 120)")
    parser.add_argument("--no-prime", action="store_true",
                        help="do not write and delete a scratch file before each timed write "
                             "(see prime_pages)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON line per workload on stdout (the table goes to stderr)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.size < max(BATCH_SIZES):
        parser.error(f"--size must be at least {max(BATCH_SIZES)} bytes")

    parent: Path = args.dir if args.dir is not None else DEFAULT_PARENT
    made_parent = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(parent).free
    if free < 3 * args.size:
        if made_parent:
            parent.rmdir()
        print(f"storage_bench: {free / GiB:.1f} GiB free in {parent}, need 3 x --size = "
              f"{3 * args.size / GiB:.1f} GiB; use a smaller --size or another --dir",
              file=sys.stderr)
        return 1
    mount, fstype, device = filesystem_of(parent)
    repo_mount = filesystem_of(PROJECT_DIR)[0]

    rng = random.Random(1)
    batches: dict[int, bytes] = {}
    composition: list[str] = []
    for target in BATCH_SIZES:
        batch, n = build_batch(target, rng)
        header = read_header(batch)
        assert header.records_count == n and header.size == len(batch)
        batches[target] = batch
        composition.append(f"{_fmt(target)} = {len(batch)} bytes, {n} records")

    say(f"samsa storage bench: {_fmt(args.size)} "
        f"per workload, repeat {args.repeat}, time limit {args.time_limit:.0f} s per workload")
    say(f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {memory_total()}")
    say(f"data: {parent} on {fstype} {device} (mounted at {mount}), "
        f"{free / GiB:.1f} GiB free")
    if fstype in _RAM_FILESYSTEMS:
        say(f"WARNING: {parent} is on {fstype}, a RAM filesystem: these are not disk numbers")
    if mount != repo_mount:
        say(f"note: not the repository's filesystem ({repo_mount})")
    say(f"batches: {'; '.join(composition)}; values {RECORD_VALUE_BYTES} bytes, uncompressed")

    rows: dict[str, Row] = {}
    for b in BATCH_SIZES:
        rows[f"append-{_label(b)}"] = Row(f"append {_fmt(b)}", b)
    rows[f"read-{_label(BATCH_SIZES[1])}"] = Row(
        f"read {_fmt(BATCH_SIZES[1])} batches, {_fmt(READ_MAX_BYTES)} fetches", BATCH_SIZES[1]
    )

    work = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=parent))
    try:
        for i in range(args.repeat):
            say(f"run {i + 1}/{args.repeat}")
            run_once(work, args.size, batches, rows, args.time_limit, not args.no_prime)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if made_parent:
            try:
                parent.rmdir()
            except OSError:
                pass

    table = format_table(list(rows.values()))
    ratio = rows[f"append-{_label(BATCH_SIZES[1])}"].ratio or 0.0
    verdict = "PASS" if ratio >= AIM_RATIO else "BELOW AIM"
    aim = (f"aim: append at {_fmt(BATCH_SIZES[1])} batches >= {AIM_RATIO:.0%} of plain write: "
           f"{ratio:.0%} -> {verdict}")
    notes = ["MB/s = bytes / seconds / 1e6; no fsync on either side (page cache); "
             "reads are page-cache warm"]
    if any(row.time_limited for row in rows.values()):
        notes.append("* stopped by --time-limit: measured over the part that ran")

    out: Callable[[str], None] = say if args.json else print
    out("")
    for text in [*table, "", aim, *notes]:
        out(text)
    if args.json:
        for row in rows.values():
            print(json.dumps(to_json(row)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
