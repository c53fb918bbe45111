"""LogManager: data directories, locking, Kafka's checkpoint files and clean-shutdown marker."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from samsa.config import BrokerConfig, LogConfig
from samsa.errors import KafkaStorageError, OffsetOutOfRangeError
from samsa.records.record import RecordInput, encode_batch
from samsa.storage import Log, LogManager

T0 = 1_700_000_000_000
MARKER = ".kafka_cleanshutdown"
RECOVERY = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
EPOCHS = "leader-epoch-checkpoint"


class Clock:
    def __init__(self, now: int = T0 + 1000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def manager(*dirs: Path, clock: Clock | None = None, **props: object) -> LogManager:
    config = BrokerConfig({"log.dirs": ",".join(str(d) for d in dirs), **props})
    return LogManager(config, clock=clock or Clock())


def batch(i: int, records: int = 2, ts: int | None = None) -> bytes:
    stamp = T0 + i if ts is None else ts
    return encode_batch(
        [RecordInput(f"v{i}.{j}".encode() * 5, f"k{i}".encode(), stamp) for j in range(records)]
    )


def fill(log: Log, n: int, start: int = 0, epoch: int = 0) -> list[bytes]:
    """Append ``n`` two-record batches; returns what each must read back as."""
    out = []
    for i in range(start, start + n):
        info = log.append(batch(i), leader_epoch=epoch)
        out.append(
            encode_batch(
                [
                    RecordInput(f"v{i}.{j}".encode() * 5, f"k{i}".encode(), T0 + i)
                    for j in range(2)
                ],
                base_offset=info.first_offset,
                leader_epoch=epoch,
            )
        )
    return out


def read_all(log: Log) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read_batches(offset)
        assert data
        pos = 0
        while pos < len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            out.append(data[pos : pos + 12 + length])
            pos += 12 + length
            offset = base + delta + 1
    return out


def checkpoint_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


# --- checkpoints and the clean-shutdown marker --------------------------------------------------


def test_shutdown_writes_kafka_checkpoints_and_marker(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.startup()
    assert not (tmp_path / MARKER).exists()
    assert (tmp_path / ".lock").exists()
    a0 = m.get_or_create("orders", 0)
    a10 = m.get_or_create("orders", 10)
    m.get_or_create("orders", 2)
    b = m.get_or_create("audit-log", 0)
    fill(a0, 3)
    fill(a10, 1)
    fill(b, 5)
    b.delete_records_before(4)
    m.shutdown()

    assert (tmp_path / MARKER).exists()
    assert (tmp_path / MARKER).read_bytes() == b""
    assert checkpoint_lines(tmp_path / RECOVERY) == [
        "0",
        "4",
        "audit-log 0 10",
        "orders 0 6",
        "orders 2 0",
        "orders 10 2",
    ]
    assert checkpoint_lines(tmp_path / LOG_START) == [
        "0",
        "4",
        "audit-log 0 4",
        "orders 0 0",
        "orders 2 0",
        "orders 10 0",
    ]
    assert (tmp_path / RECOVERY).read_text().endswith("\n")
    assert not list(tmp_path.glob("*.tmp"))


def test_startup_removes_the_marker_and_trusts_a_clean_shutdown(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.startup()
    expected = fill(m.get_or_create("t", 0), 4)
    m.shutdown()
    assert (tmp_path / MARKER).exists()

    m = manager(tmp_path)
    m.startup()
    try:
        assert not (tmp_path / MARKER).exists()
        log = m.get("t", 0)
        assert log is not None
        assert log.recovery_point == log.log_end_offset == 8
        assert read_all(log) == expected
    finally:
        m.shutdown()


def test_crash_leaves_no_marker_and_recovers(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.startup()
    expected = fill(m.get_or_create("t", 0), 4)
    m.abandon()
    assert not (tmp_path / MARKER).exists()
    assert not (tmp_path / RECOVERY).exists()

    m = manager(tmp_path)
    m.startup()
    try:
        log = m.get("t", 0)
        assert log.log_end_offset == 8
        assert read_all(log) == expected
    finally:
        m.shutdown()


def test_empty_broker_writes_empty_checkpoints(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.startup()
    m.shutdown()
    assert checkpoint_lines(tmp_path / RECOVERY) == ["0", "0"]
    assert checkpoint_lines(tmp_path / LOG_START) == ["0", "0"]
    m = manager(tmp_path)
    m.startup()
    assert m.logs == {}
    m.shutdown()


# --- locking ------------------------------------------------------------------------------------


def test_second_manager_on_a_locked_dir_fails(tmp_path: Path) -> None:
    first = manager(tmp_path)
    first.startup()
    fill(first.get_or_create("t", 0), 1)
    second = manager(tmp_path)
    with pytest.raises(KafkaStorageError) as exc:
        second.startup()
    assert str(tmp_path) in str(exc.value)
    # The running broker is undisturbed.
    assert first.get("t", 0).log_end_offset == 2
    first.shutdown()
    assert (tmp_path / MARKER).exists()

    third = manager(tmp_path)
    third.startup()  # the lock is released by a clean shutdown
    assert third.get("t", 0).log_end_offset == 2
    third.abandon()
    fourth = manager(tmp_path)
    fourth.startup()  # ... and by a crash (the process is gone)
    fourth.shutdown()


def test_failed_startup_releases_what_it_took(tmp_path: Path) -> None:
    """A startup that stops at a locked directory must not keep the directories it already
    locked, nor consume their clean-shutdown marker (Kafka locks every directory first)."""
    free, busy = tmp_path / "free", tmp_path / "busy"
    m = manager(free)
    m.startup()
    fill(m.get_or_create("t", 0), 2)
    m.shutdown()
    assert (free / MARKER).exists()

    holder = manager(busy)
    holder.startup()
    try:
        doomed = manager(free, busy)
        with pytest.raises(KafkaStorageError):
            doomed.startup()
        assert (free / MARKER).exists(), "the failed startup consumed the clean-shutdown marker"
        again = manager(free)
        again.startup()  # raises if the failed startup still holds free/.lock
        again.shutdown()
    finally:
        holder.shutdown()


# --- partition directories ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "partition"),
    [("my-topic-name", 12), ("topic-7", 0), ("a", 3), ("x_y.z-99", 100)],
)
def test_topic_names_with_dashes_survive_reopen(
    tmp_path: Path, topic: str, partition: int
) -> None:
    m = manager(tmp_path)
    m.startup()
    log = m.get_or_create(topic, partition)
    assert log.dir == tmp_path / f"{topic}-{partition}"
    expected = fill(log, 3)
    m.shutdown()
    assert f"{topic} {partition} 6" in checkpoint_lines(tmp_path / RECOVERY)

    m = manager(tmp_path)
    m.startup()
    try:
        assert set(m.logs) == {(topic, partition)}
        reopened = m.get(topic, partition)
        assert read_all(reopened) == expected
        assert [p for p, _ in m.partitions(topic)] == [partition]
    finally:
        m.shutdown()


def test_unrelated_entries_in_a_data_dir_are_ignored(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.startup()
    fill(m.get_or_create("t", 0), 1)
    m.shutdown()
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "notes-1").write_text("a file, not a partition directory")
    (tmp_path / "meta.properties").write_text("version=1\n")
    m = manager(tmp_path)
    m.startup()
    try:
        assert set(m.logs) == {("t", 0)}
    finally:
        m.shutdown()


def test_many_partitions_and_topics_reopen(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.startup()
    expected = {}
    for t in ("a", "b-c"):
        for p in range(4):
            expected[(t, p)] = fill(m.get_or_create(t, p), p + 1, start=p)
    m.shutdown()
    m = manager(tmp_path)
    m.startup()
    try:
        assert set(m.logs) == set(expected)
        for tp, batches in expected.items():
            assert read_all(m.logs[tp]) == batches
        assert sorted(p for p, _ in m.partitions("b-c")) == [0, 1, 2, 3]
    finally:
        m.shutdown()


# --- log start offset ---------------------------------------------------------------------------


def _small_segments(*dirs: Path, clock: Clock | None = None, **props: object) -> LogManager:
    return manager(*dirs, clock=clock, **{"log.segment.bytes": 400, **props})


@pytest.mark.parametrize("start", [5, 13])
def test_log_start_offset_survives_clean_restart(tmp_path: Path, start: int) -> None:
    m = _small_segments(tmp_path)
    m.startup()
    log = m.get_or_create("t", 0)
    expected = fill(log, 10)
    assert len(log.segments) >= 3
    assert log.delete_records_before(start) == start
    m.shutdown()
    assert f"t 0 {start}" in checkpoint_lines(tmp_path / LOG_START)

    m = _small_segments(tmp_path)
    m.startup()
    try:
        log = m.get("t", 0)
        assert log.log_start_offset == start
        with pytest.raises(OffsetOutOfRangeError):
            log.read(start - 1, 1000)
        first = log.read_batches(start, 1)
        base, _ = struct.unpack_from(">qi", first, 0)
        assert base <= start < base + 2
        assert read_all(log)[-1] == expected[-1]
        assert log.log_end_offset == 20
    finally:
        m.shutdown()


@pytest.mark.parametrize("start", [5, 13])
def test_log_start_offset_survives_a_crash_after_its_checkpoint(
    tmp_path: Path, start: int
) -> None:
    m = _small_segments(tmp_path)
    m.startup()
    log = m.get_or_create("t", 0)
    expected = fill(log, 10)
    log.delete_records_before(start)
    m.checkpoint_log_start_offsets()
    m.abandon()
    assert not (tmp_path / MARKER).exists()

    m = _small_segments(tmp_path)
    m.startup()
    try:
        log = m.get("t", 0)
        assert log.log_start_offset == start
        assert log.log_end_offset == 20
        with pytest.raises(OffsetOutOfRangeError):
            log.read(start - 1, 1000)
        assert read_all(log) == expected[start // 2 :]
    finally:
        m.shutdown()


def test_log_start_offset_past_a_crash_truncated_end(tmp_path: Path) -> None:
    """A checkpointed log start offset beyond what survived the crash: the log restarts
    empty at the log start offset."""
    m = _small_segments(tmp_path)
    m.startup()
    log = m.get_or_create("t", 0)
    fill(log, 10)
    log.delete_records_before(19)
    m.checkpoint_log_start_offsets()
    m.abandon()
    active = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with open(active, "r+b") as f:  # tear the last batch (offsets 18, 19)
        f.truncate(active.stat().st_size - 3)
    m = _small_segments(tmp_path)
    m.startup()
    try:
        log = m.get("t", 0)
        assert log.log_start_offset == log.log_end_offset == 19
        info = log.append(batch(50))
        assert info.first_offset == 19
    finally:
        m.shutdown()


# --- malformed checkpoint files -----------------------------------------------------------------

MALFORMED = {
    "empty": b"",
    "version-only": b"0\n",
    "unknown-version": b"1\n1\nt 0 4\n",
    "count-too-big": b"0\n3\nt 0 4\n",
    "bad-count": b"0\nmany\nt 0 4\n",
    "wrong-shape": b"0\n1\nt 0\n",
    "not-a-number": b"0\n1\nt 0 four\n",
    "binary": bytes(range(256)),
    "latin-1": b"0\n1\n\xe9t\xe9 0 4\n",
}


@pytest.mark.parametrize("which", [RECOVERY, LOG_START])
@pytest.mark.parametrize("content", list(MALFORMED))
def test_malformed_checkpoint_is_ignored_with_a_warning(
    tmp_path: Path, caplog, which: str, content: str
) -> None:
    m = _small_segments(tmp_path)
    m.startup()
    log = m.get_or_create("t", 0)
    expected = fill(log, 10)
    m.shutdown()
    (tmp_path / which).write_bytes(MALFORMED[content])

    m = _small_segments(tmp_path)
    with caplog.at_level(logging.WARNING, logger="samsa"):
        m.startup()
    try:
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(which in r.getMessage() for r in warnings), [r.getMessage() for r in warnings]
        log = m.get("t", 0)
        assert log.log_start_offset == 0
        assert log.log_end_offset == 20
        assert read_all(log) == expected
        assert log.append(batch(99)).first_offset == 20
    finally:
        m.shutdown()
    # The next clean shutdown rewrites it in the right format.
    assert checkpoint_lines(tmp_path / which)[:2] == ["0", "1"]


@pytest.mark.parametrize("content", ["empty", "wrong-shape", "not-a-number", "binary"])
def test_malformed_leader_epoch_checkpoint_does_not_stop_the_log(
    tmp_path: Path, caplog, content: str
) -> None:
    m = _small_segments(tmp_path)
    m.startup()
    expected = fill(m.get_or_create("t", 0), 4, epoch=3)
    m.shutdown()
    path = tmp_path / "t-0" / EPOCHS
    assert checkpoint_lines(path) == ["0", "1", "3 0"]
    path.write_bytes(MALFORMED[content])

    m = _small_segments(tmp_path)
    with caplog.at_level(logging.WARNING, logger="samsa"):
        m.startup()
    try:
        assert any(EPOCHS in r.getMessage() for r in caplog.records), caplog.text
        log = m.get("t", 0)
        assert read_all(log) == expected
    finally:
        m.shutdown()


def test_missing_checkpoints_after_a_clean_shutdown(tmp_path: Path) -> None:
    m = _small_segments(tmp_path)
    m.startup()
    log = m.get_or_create("t", 0)
    expected = fill(log, 10)
    m.shutdown()
    (tmp_path / RECOVERY).unlink()
    (tmp_path / LOG_START).unlink()
    m = _small_segments(tmp_path)
    m.startup()
    try:
        log = m.get("t", 0)
        assert read_all(log) == expected
        assert log.log_end_offset == 20
    finally:
        m.shutdown()


def test_high_watermarks_checkpoint_round_trip(tmp_path: Path) -> None:
    """replication-offset-checkpoint: Kafka's format, one file per data directory with its
    logs; a log without a high watermark given keeps the last one; a deleted log's goes."""
    one, two = tmp_path / "one", tmp_path / "two"
    m = manager(one, two)
    m.startup()
    for p in range(4):
        fill(m.get_or_create("t", p), 5)
    assert m.checkpointed_high_watermark("t", 0) is None
    m.checkpoint_high_watermarks({("t", 0): 3, ("t", 1): 10, ("t", 2): 7, ("t", 3): 0,
                                  ("gone", 0): 5})
    dirs = {tp: m.dir_of(tp) for tp in m.logs}
    for directory in (one, two):
        lines = checkpoint_lines(directory / HIGH_WATERMARK)
        assert lines[0] == "0"
        assert lines[2:] == [f"t {p} {hw}" for p, hw in enumerate([3, 10, 7, 0])
                             if dirs[("t", p)] == directory]
        assert int(lines[1]) == len(lines) - 2
    m.checkpoint_high_watermarks({("t", 0): 4})  # t-1..3 not open as replicas (yet)
    m.delete("t", 3)
    m.shutdown()

    m = manager(one, two)
    m.startup()
    try:
        assert [m.checkpointed_high_watermark("t", p) for p in range(4)] == [4, 10, 7, None]
        fill(m.get_or_create("t", 3), 1)  # the same name again: a new log, no high watermark
        assert m.checkpointed_high_watermark("t", 3) is None
    finally:
        m.shutdown()


@pytest.mark.parametrize("content", list(MALFORMED))
def test_malformed_high_watermark_checkpoint_is_ignored_with_a_warning(
    tmp_path: Path, caplog, content: str
) -> None:
    m = manager(tmp_path)
    m.startup()
    expected = fill(m.get_or_create("t", 0), 4)
    m.checkpoint_high_watermarks({("t", 0): 8})
    m.shutdown()
    (tmp_path / HIGH_WATERMARK).write_bytes(MALFORMED[content])

    m = manager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="samsa"):
        m.startup()
    try:
        assert any(HIGH_WATERMARK in r.getMessage() for r in caplog.records), caplog.text
        assert m.checkpointed_high_watermark("t", 0) is None
        assert read_all(m.get("t", 0)) == expected
        m.checkpoint_high_watermarks({("t", 0): 8})
        assert checkpoint_lines(tmp_path / HIGH_WATERMARK) == ["0", "1", "t 0 8"]
    finally:
        m.shutdown()


# --- several data directories -------------------------------------------------------------------


def test_new_partitions_go_to_the_least_loaded_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2", tmp_path / "d3"]
    m = manager(*dirs)
    m.startup()
    placed: dict[int, Path] = {}
    for p in range(7):
        counts = {d: sum(1 for v in placed.values() if v == d) for d in dirs}
        log = m.get_or_create("t", p)
        placed[p] = log.dir.parent
        assert log.dir == placed[p] / f"t-{p}"
        assert counts[placed[p]] == min(counts.values()), (p, counts, placed[p])
        fill(log, 1)
    counts = {d: sum(1 for v in placed.values() if v == d) for d in dirs}
    assert sorted(counts.values()) == [2, 2, 3]
    # Empty one directory: it becomes the only one with the fewest partitions.
    victim = next(d for d in dirs if counts[d] == 2)
    for p in [p for p, d in placed.items() if d == victim]:
        m.delete("t", p)
    assert m.get_or_create("u", 0).dir.parent == victim
    assert m.get_or_create("u", 1).dir.parent == victim
    m.shutdown()
    for d in dirs:
        assert (d / MARKER).exists()
        lines = checkpoint_lines(d / RECOVERY)
        names = sorted(p.name for p in d.iterdir() if p.is_dir())
        assert int(lines[1]) == len(names)
        assert sorted(f"{t}-{p}" for t, p, _ in (line.split() for line in lines[2:])) == names


def test_existing_partitions_count_after_restart(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = manager(d1)
    m.startup()
    for p in range(3):
        fill(m.get_or_create("t", p), 1)
    m.shutdown()
    m = manager(d1, d2)
    m.startup()
    try:
        assert {log.dir.parent for log in m.logs.values()} == {d1}
        new = [m.get_or_create("u", p) for p in range(3)]
        assert [log.dir.parent for log in new] == [d2, d2, d2]
        for log in new:
            fill(log, 1)
    finally:
        m.shutdown()
    m = manager(d1, d2)
    m.startup()
    try:
        assert len(m.logs) == 6
        assert m.get("u", 2).dir.parent == d2
        assert "u 2 2" in checkpoint_lines(d2 / RECOVERY)
        assert all(not line.startswith("u ") for line in checkpoint_lines(d1 / RECOVERY))
        assert m.get_or_create("v", 0).dir.parent in (d1, d2)
        assert m.get_or_create("v", 1).dir.parent != m.get("v", 0).dir.parent
    finally:
        m.shutdown()


# --- delete and cleanup -------------------------------------------------------------------------


def test_delete_removes_the_partition_directory(tmp_path: Path) -> None:
    m = _small_segments(tmp_path)
    m.startup()
    log = m.get_or_create("gone-topic", 4)
    fill(log, 10, epoch=2)
    keep = m.get_or_create("kept", 0)
    expected = fill(keep, 2)
    directory = log.dir
    assert len(list(directory.iterdir())) > 3
    m.delete("gone-topic", 4)
    assert not directory.exists()
    assert m.get("gone-topic", 4) is None
    assert list(m.partitions("gone-topic")) == []
    m.delete("gone-topic", 4)  # deleting again is harmless
    m.shutdown()
    assert all(not line.startswith("gone-topic") for line in checkpoint_lines(tmp_path / RECOVERY))

    m = _small_segments(tmp_path)
    m.startup()
    try:
        assert set(m.logs) == {("kept", 0)}
        assert read_all(m.get("kept", 0)) == expected
        fresh = m.get_or_create("gone-topic", 4)
        assert fresh.log_end_offset == 0 and fresh.log_start_offset == 0
        assert fresh.epochs.entries == []
    finally:
        m.shutdown()


def test_cleanup_applies_retention_and_checkpoints_log_start(tmp_path: Path) -> None:
    clock = Clock(T0 + 1000)
    m = _small_segments(tmp_path, clock=clock, **{"log.retention.ms": 10_000})
    m.startup()
    old = m.get_or_create("t", 0)
    fill(old, 10)  # record timestamps T0..T0+9
    assert len(old.segments) >= 3
    young = m.get_or_create("young", 0)
    fill(young, 10, start=20_000)  # record timestamps T0+20000..: never too old here
    m.checkpoint_log_start_offsets()
    assert "t 0 0" in checkpoint_lines(tmp_path / LOG_START)

    assert m.cleanup() == 0  # nothing is old enough yet
    clock.now = T0 + 9 + 10_001  # every segment of "t" except the active one is now too old
    before = [s.base_offset for s in old.segments]
    deleted = m.cleanup()
    assert deleted == len(before) - 1
    assert [s.base_offset for s in old.segments] == before[-1:]
    assert old.log_start_offset == before[-1]
    assert f"t 0 {before[-1]}" in checkpoint_lines(tmp_path / LOG_START)
    assert "young 0 0" in checkpoint_lines(tmp_path / LOG_START)
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [f"{before[-1]:020d}.log"]
    m.abandon()

    m = _small_segments(tmp_path, clock=clock, **{"log.retention.ms": 10_000})
    m.startup()
    try:
        assert m.get("t", 0).log_start_offset == before[-1]
    finally:
        m.shutdown()


def test_cleanup_by_retention_bytes(tmp_path: Path) -> None:
    m = _small_segments(tmp_path, **{"log.retention.bytes": 500})
    m.startup()
    log = m.get_or_create("t", 0)
    fill(log, 12)
    sizes = [s.size for s in log.segments]
    assert len(sizes) >= 4
    assert m.cleanup() > 0
    # Kafka's rule: drop the oldest segments while what is left stays >= retention.bytes.
    assert log.size >= 500
    assert log.size - log.segments[0].size < 500
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert f"t 0 {log.log_start_offset}" in checkpoint_lines(tmp_path / LOG_START)
    m.shutdown()


def test_topic_config_callback_is_used(tmp_path: Path) -> None:
    configs = {"small": LogConfig(segment_bytes=300), "big": LogConfig()}
    m = LogManager(
        BrokerConfig({"log.dirs": str(tmp_path)}),
        topic_config=lambda topic: configs[topic],
        clock=Clock(),
    )
    m.startup()
    small, big = m.get_or_create("small", 0), m.get_or_create("big", 0)
    fill(small, 10)
    fill(big, 10)
    assert len(small.segments) > 1 and len(big.segments) == 1
    m.shutdown()
    m = LogManager(
        BrokerConfig({"log.dirs": str(tmp_path)}),
        topic_config=lambda topic: configs[topic],
        clock=Clock(),
    )
    m.startup()
    try:
        assert m.get("small", 0).config.segment_bytes == 300
        assert m.get("big", 0).config == LogConfig()
    finally:
        m.shutdown()
