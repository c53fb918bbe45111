"""``samsa dump-log``: the installed console script run on segment files written by a Log."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from samsa.config import LogConfig
from samsa.records.batch import Compression
from samsa.records.record import RecordInput, encode_batch
from samsa.storage import Log

T0 = 1_700_000_000_000
_HEADER = struct.Struct(">qiibIhiqqqhii")
_SCRIPT = Path(sys.executable).parent / "samsa"
BATCH_LINE = re.compile(r"^baseOffset: ")
FIELD = re.compile(r"(\w+): (\S+)")
RECORD_LINE = re.compile(
    r"^\| offset: (?P<offset>\d+) (?P<type>\w+): (?P<ts>-?\d+)"
    r" key: (?P<key>.*) payload: (?P<value>.*) headers: \[(?P<headers>.*)\]$"
)
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def samsa(*args: str | Path, module: bool = False) -> subprocess.CompletedProcess[str]:
    if module or not _SCRIPT.exists():
        command = [sys.executable, "-m", "samsa.cli"]
    else:
        command = [str(_SCRIPT)]
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


# Each batch: (records, options); offsets are assigned by the log.
BATCHES = [
    (
        [
            RecordInput(b"v0", b"k0", T0, [("trace", b"t0"), ("none", None)]),
            RecordInput(None, b"tombstone", T0 + 1),
            RecordInput(b"v2", None, T0 + 7),
        ],
        {},
    ),
    ([RecordInput(b"gz" * 50, b"k3", T0 + 10)], {"compression_type": Compression.GZIP}),
    (
        [RecordInput(b"idem", b"k4", T0 + 20), RecordInput(b"idem2", b"k5", T0 + 19)],
        {"producer_id": 4242, "producer_epoch": 3, "base_sequence": 0},
    ),
    (
        [RecordInput(b"txn", b"k6", T0 + 30)],
        {
            "producer_id": 7,
            "producer_epoch": 0,
            "base_sequence": 0,
            "transactional": True,
            "compression_type": Compression.ZSTD,
        },
    ),
]


def write_segment(directory: Path, config: LogConfig | None = None, now: int = T0) -> Path:
    log = Log(directory, config or LogConfig(), clock=lambda: now)
    for records, options in BATCHES:
        log.append(encode_batch(records, **options), leader_epoch=6)
    log.close()
    [segment] = sorted(directory.glob("*.log"))
    return segment


def expected_batches(segment: Path) -> list[dict[str, str]]:
    """The batch fields, read from the file with struct (independently of samsa)."""
    data = segment.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        h = _HEADER.unpack_from(data, pos)
        size = h[1] + 12
        out.append(
            {
                "baseOffset": str(h[0]),
                "lastOffset": str(h[0] + h[6]),
                "count": str(h[12]),
                "position": str(pos),
                "size": str(size),
                "magic": str(h[3]),
                "compresscodec": CODEC_NAMES[h[5] & 7],
                "crc": str(h[4]),
                "isTransactional": str(bool(h[5] & 0x10)).lower(),
                "isControl": str(bool(h[5] & 0x20)).lower(),
                "producerId": str(h[9]),
                "producerEpoch": str(h[10]),
                "baseSequence": str(h[11]),
                "partitionLeaderEpoch": str(h[2]),
                "timestampType": "LogAppendTime" if h[5] & 0x08 else "CreateTime",
                "maxTimestamp": str(h[8]),
            }
        )
        pos += size
    assert pos == len(data)
    return out


def parse_batch_line(line: str) -> dict[str, str]:
    fields = dict(FIELD.findall(line))
    for label in ("CreateTime", "LogAppendTime"):
        if label in fields:
            fields["timestampType"] = label
            fields["maxTimestamp"] = fields.pop(label)
    return fields


def batch_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if BATCH_LINE.match(line)]


# --- output -------------------------------------------------------------------------------------


def test_one_line_per_batch(tmp_path: Path) -> None:
    segment = write_segment(tmp_path / "t-0")
    result = samsa("dump-log", segment)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert not any(line.startswith("|") for line in lines)
    assert not any("trailing" in line for line in lines)
    got = [parse_batch_line(line) for line in batch_lines(result.stdout)]
    assert len(got) == len(lines) - 1 == len(BATCHES)
    want = expected_batches(segment)
    for g, w in zip(got, want, strict=True):
        assert {k: g.get(k) for k in w} == w
    assert [g["baseOffset"] for g in got] == ["0", "3", "4", "6"]
    assert got[1]["compresscodec"] == "gzip"
    assert got[3]["compresscodec"] == "zstd"
    assert got[3]["isTransactional"] == "true"
    assert got[2]["producerId"] == "4242" and got[2]["baseSequence"] == "0"
    assert {g["partitionLeaderEpoch"] for g in got} == {"6"}


def test_print_data_log_prints_every_record(tmp_path: Path) -> None:
    segment = write_segment(tmp_path / "t-0")
    result = samsa("dump-log", "--print-data-log", segment)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {segment}"
    # Each batch line is followed by one line per record of that batch.
    shape = ["B" if BATCH_LINE.match(line) else "R" for line in lines[1:]]
    assert shape == ["B", "R", "R", "R", "B", "R", "B", "R", "R", "B", "R"]
    records = [RECORD_LINE.match(line) for line in lines[1:] if line.startswith("|")]
    assert all(records), lines
    flat = [r for batch, _ in BATCHES for r in batch]
    assert [int(m["offset"]) for m in records] == list(range(len(flat)))
    for m, r in zip(records, flat, strict=True):
        assert m["type"] == "CreateTime"
        assert int(m["ts"]) == r.timestamp
        assert m["key"] == repr(r.key)
        assert m["value"] == repr(r.value)
        assert m["headers"] == ",".join(f"{k}:{v!r}" for k, v in r.headers)


def test_several_files(tmp_path: Path) -> None:
    first = write_segment(tmp_path / "a-0")
    second = write_segment(tmp_path / "b-0")
    result = samsa("dump-log", first, second)
    assert result.returncode == 0, result.stderr
    dumping = [line for line in result.stdout.splitlines() if line.startswith("Dumping")]
    assert dumping == [f"Dumping {first}", f"Dumping {second}"]
    assert len(batch_lines(result.stdout)) == 2 * len(BATCHES)


def test_module_entry_point(tmp_path: Path) -> None:
    segment = write_segment(tmp_path / "t-0")
    result = samsa("dump-log", segment, module=True)
    assert result.returncode == 0, result.stderr
    assert len(batch_lines(result.stdout)) == len(BATCHES)


def test_empty_segment(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"")
    result = samsa("dump-log", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"Dumping {path}"]


def test_log_append_time_batches_are_labelled_log_append_time(tmp_path: Path) -> None:
    """kafka-dump-log prints the batch's timestamp type: "LogAppendTime: <ms>" for a
    LogAppendTime batch (and for its records), not "CreateTime"."""
    broker_time = T0 + 555_000
    config = LogConfig(message_timestamp_type="LogAppendTime")
    segment = write_segment(tmp_path / "t-0", config, now=broker_time)
    result = samsa("dump-log", "--print-data-log", segment)
    assert result.returncode == 0, result.stderr
    got = [parse_batch_line(line) for line in batch_lines(result.stdout)]
    assert [g["maxTimestamp"] for g in got] == [str(broker_time)] * len(BATCHES)
    assert {g["timestampType"] for g in got} == {"LogAppendTime"}, batch_lines(result.stdout)
    records = [RECORD_LINE.match(line) for line in result.stdout.splitlines() if line[:1] == "|"]
    assert {(m["type"], int(m["ts"])) for m in records} == {("LogAppendTime", broker_time)}


# --- errors and damaged files -------------------------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["--print-data-log"]])
def test_missing_file_is_one_line_on_stderr(tmp_path: Path, flags: list[str]) -> None:
    missing = tmp_path / "nope" / "00000000000000000000.log"
    result = samsa("dump-log", *flags, missing)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("samsa:")
    assert str(missing) in lines[0]
    assert "Traceback" not in result.stderr


def test_directory_instead_of_file(tmp_path: Path) -> None:
    result = samsa("dump-log", tmp_path)
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("samsa:")


def test_no_file_argument(tmp_path: Path) -> None:
    result = samsa("dump-log")
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("samsa:"), result.stderr


def test_second_file_missing(tmp_path: Path) -> None:
    segment = write_segment(tmp_path / "t-0")
    missing = tmp_path / "gone.log"
    result = samsa("dump-log", segment, missing)
    assert result.returncode != 0
    assert len(batch_lines(result.stdout)) == len(BATCHES)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("samsa:") and str(missing) in lines[0]


@pytest.mark.parametrize("cut", [1, 12, 60, 61, 62, -1])
def test_torn_file_reports_trailing_bytes(tmp_path: Path, cut: int) -> None:
    segment = write_segment(tmp_path / "t-0")
    batches = expected_batches(segment)
    last_pos = int(batches[-1]["position"])
    last_size = int(batches[-1]["size"])
    keep = last_pos + (cut if cut > 0 else last_size + cut)
    torn = tmp_path / "00000000000000000000.log"
    shutil.copyfile(segment, torn)
    with open(torn, "r+b") as f:
        f.truncate(keep)
    result = samsa("dump-log", "--print-data-log", torn)
    assert result.returncode == 0, result.stderr
    got = [parse_batch_line(line) for line in batch_lines(result.stdout)]
    assert [g["baseOffset"] for g in got] == [b["baseOffset"] for b in batches[:-1]]
    trailing = [line for line in result.stdout.splitlines() if "trailing bytes" in line]
    assert trailing == [
        f"Found {keep - last_pos} trailing bytes at position {last_pos} (a torn batch)"
    ]
    assert result.stdout.splitlines()[-1] == trailing[0]


def test_garbage_only_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 3)
    result = samsa("dump-log", path)
    assert result.returncode == 0, result.stderr
    assert batch_lines(result.stdout) == []
    assert "Found 768 trailing bytes at position 0" in result.stdout


def test_undecodable_records_are_reported_not_fatal(tmp_path: Path) -> None:
    segment = write_segment(tmp_path / "t-0")
    batches = expected_batches(segment)
    gzip_batch = batches[1]
    assert gzip_batch["compresscodec"] == "gzip"
    data = bytearray(segment.read_bytes())
    start = int(gzip_batch["position"]) + 61
    end = int(gzip_batch["position"]) + int(gzip_batch["size"])
    data[start:end] = bytes(end - start)  # the compressed payload is now zeros
    broken = tmp_path / "00000000000000000000.log"
    broken.write_bytes(bytes(data))
    result = samsa("dump-log", "--print-data-log", broken)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(batch_lines(result.stdout)) == len(BATCHES)
    assert sum(line.startswith("| cannot decode records:") for line in lines) == 1
    # The batches after the broken one are still dumped with their records.
    assert sum(bool(RECORD_LINE.match(line)) for line in lines) == 3 + 2 + 1


def test_unknown_codec_in_a_damaged_batch_gives_one_stderr_line(tmp_path: Path) -> None:
    """A damaged attributes field (codec 7): the tool stops with one line, no traceback."""
    segment = write_segment(tmp_path / "t-0")
    data = bytearray(segment.read_bytes())
    data[21 + 1] |= 0x07  # low byte of the first batch's attributes
    broken = tmp_path / "00000000000000000000.log"
    broken.write_bytes(bytes(data))
    result = samsa("dump-log", broken)
    assert "Traceback" not in result.stderr
    if result.returncode != 0:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("samsa:"), result.stderr


def test_dump_log_shows_markers_and_the_transaction_index(tmp_path: Path) -> None:
    """A transaction's marker prints as kafka-dump-log prints it (endTxnMarker, coordinator
    epoch), and a .txnindex file prints its aborted transactions."""
    log = Log(tmp_path / "t-0")
    log.append(encode_batch([RecordInput(b"v", b"k")], producer_id=3, producer_epoch=0,
                            base_sequence=0, transactional=True,
                            timestamp=time.time_ns() // 1_000_000))
    log.append_marker(3, 0, False, 5)
    log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    result = samsa("dump-log", "--print-data-log", segment)
    assert result.returncode == 0, result.stderr
    assert "isTransactional: true isControl: true" in result.stdout
    assert "| offset: 1 CreateTime:" in result.stdout
    assert "endTxnMarker: ABORT coordinatorEpoch: 5" in result.stdout
    result = samsa("dump-log", segment.with_suffix(".txnindex"))
    assert result.returncode == 0, result.stderr
    assert ("version: 0 producerId: 3 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"
            in result.stdout)
