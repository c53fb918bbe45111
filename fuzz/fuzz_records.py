"""Fuzz target: the record batch validator and the log's append path.

The input is a mode byte and then arbitrary bytes taken as the records of a produce (or of a
follower's fetch). The mode byte's bits:

* 0-1: the log: 0 a plain one, 1 compacted (every record needs a key, so the append looks
  inside the batches), 2 LogAppendTime (the batch is copied, stamped and re-checksummed),
  3 small segments and a small max.message.bytes (rolls, MESSAGE_TOO_LARGE);
* 2: a follower's append (``assign_offsets=False``: the batches keep their offsets);
* 3: keep the CRCs as they are (by default the harness rewrites each framed batch's CRC-32C,
  so the mutations reach what is checked after it);
* 4: ``internal`` (the broker's own writers: control batches, sequence-less producers).

``read_header`` and ``iter_headers`` see the same bytes. ``validate_batches`` and
``Log.append`` may refuse the bytes only with a KafkaError (CorruptRecordError,
InvalidRecordError, ...). When ``validate_batches`` accepts them, ``iter_headers`` must frame
the same batches; when the log accepts them, reading the appended offsets back must give the
same batches, stamped with their offsets (and, on LogAppendTime, the time) and still valid.

    python fuzz/fuzz_records.py tests/fuzz_corpus/records -runs=200000
"""

from __future__ import annotations

import atexit
import shutil
import struct
import tempfile
from pathlib import Path

from samsa.config import LogConfig
from samsa.errors import KafkaError
from samsa.records.batch import (
    CRC,
    HEADER_SIZE,
    crc_of,
    iter_headers,
    read_header,
    validate_batches,
)
from samsa.storage.log import Log

NOW = 1_700_000_000_000
APPENDS_PER_LOG = 500  # then the logs start again, empty
_UINT32 = struct.Struct(">I")

FOLLOWER, KEEP_CRC, INTERNAL = 0x04, 0x08, 0x10

_CONFIGS = [
    LogConfig(),
    LogConfig(cleanup_policy=("compact",)),
    LogConfig(message_timestamp_type="LogAppendTime"),
    LogConfig(segment_bytes=4096, max_message_bytes=512, segment_index_bytes=64,
              index_interval_bytes=64),
]


class _Logs:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="samsa-fuzz-records-"))
        atexit.register(shutil.rmtree, self.dir, True)
        self.generation = 0
        self.appends = 0
        self.logs: dict[int, Log] = {}

    def get(self, kind: int) -> Log:
        if self.appends >= APPENDS_PER_LOG:
            self.reset()
        self.appends += 1
        log = self.logs.get(kind)
        if log is None:
            log = Log(self.dir / f"g{self.generation}-{kind}", _CONFIGS[kind], clock=lambda: NOW)
            self.logs[kind] = log
        return log

    def reset(self) -> None:
        for log in self.logs.values():
            log.close()
        for child in self.dir.iterdir():
            shutil.rmtree(child, ignore_errors=True)
        self.logs.clear()
        self.generation += 1
        self.appends = 0


_logs: _Logs | None = None


def logs() -> _Logs:
    global _logs
    if _logs is None:
        _logs = _Logs()
    return _logs


def close() -> None:
    global _logs
    if _logs is not None:
        _logs.reset()
        shutil.rmtree(_logs.dir, ignore_errors=True)
        _logs = None


def fix_crcs(buf: bytearray) -> None:
    """Rewrite the CRC-32C of every batch the framing finds."""
    for pos, header in iter_headers(buf):
        _UINT32.pack_into(buf, pos + CRC, crc_of(buf, pos, header.size))


def _check_validator(buf: bytes, internal: bool, from_client: bool) -> None:
    if len(buf) >= HEADER_SIZE:
        read_header(buf)
    framed = list(iter_headers(buf))
    try:
        headers = validate_batches(buf, internal=internal, from_client=from_client)
    except KafkaError:
        return
    if [h for _, h in framed] != headers:
        raise AssertionError(f"iter_headers framed {len(framed)} batches, "
                             f"validate_batches accepted {len(headers)}")


def _check_append(log: Log, buf: bytes, follower: bool, internal: bool) -> None:
    try:
        info = log.append(buf, assign_offsets=not follower, internal=internal)
    except KafkaError:
        return
    if info.duplicate:
        return
    region = log.read(info.first_offset, len(buf), max_offset=info.last_offset + 1)
    if region is None:
        raise AssertionError(f"offsets {info.first_offset}-{info.last_offset} do not read back")
    stored = region.read()
    if len(stored) != len(buf):
        raise AssertionError(f"appended {len(buf)} bytes, read back {len(stored)}")
    stored_headers = validate_batches(stored, internal=True, from_client=False)
    offset = info.first_offset
    for (pos, sent), got in zip(iter_headers(buf), stored_headers, strict=True):
        expected_base = sent.base_offset if follower else offset
        if got.base_offset != expected_base or got.records_count != sent.records_count:
            raise AssertionError(f"batch at {pos} stored as {got}, sent as {sent}")
        lat = log.config.log_append_time and not follower
        body_from = HEADER_SIZE if lat else 16  # LogAppendTime rewrites the header
        if stored[pos + body_from : pos + got.size] != buf[pos + body_from : pos + sent.size]:
            raise AssertionError(f"the bytes of the batch at {pos} changed in the log")
        offset = got.next_offset


def check(data: bytes) -> None:
    if not data:
        return
    mode, buf = data[0], bytearray(data[1:])
    if not mode & KEEP_CRC:
        fix_crcs(buf)
    records = bytes(buf)
    follower, internal = bool(mode & FOLLOWER), bool(mode & INTERNAL)
    _check_validator(records, internal, from_client=not follower)
    _check_append(logs().get(mode & 0x03), records, follower, internal)


if __name__ == "__main__":
    from fuzzing import fuzz

    fuzz(check)
