"""LogManager with one of its two data directories on a small tmpfs that fills up: the failed
directory goes offline as a whole, nothing more is written there (no later append, however
small, no checkpoint, no clean-shutdown marker), new logs go to the directory still online, and
the next start recovers the failed one up to the last whole batch. Needs root for the mount
(failing without it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import tmpfs

from samsa.config import BrokerConfig
from samsa.errors import KafkaStorageError
from samsa.records.record import RecordInput, encode_batch
from samsa.storage import LogManager

T0 = 1_700_000_000_000
MARKER = ".kafka_cleanshutdown"
RECOVERY = "recovery-point-offset-checkpoint"


def manager(*dirs: Path) -> LogManager:
    return LogManager(BrokerConfig({"log.dirs": ",".join(str(d) for d in dirs)}))


def batch(value: bytes) -> bytes:
    return encode_batch([RecordInput(value, None, T0)])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    reason = tmpfs.available()
    assert reason is None, f"these tests need real mounts (root, libfuse2): {reason}"
    with tmpfs.tmpfs(tmp_path / "a", "4m") as mounted:
        yield mounted


def test_a_full_directory_goes_offline_and_recovers_after_repair(tmp_path: Path,
                                                                 small_disk: Path) -> None:
    a, b = small_disk, tmp_path / "b"
    m = manager(a, b)
    m.startup()
    first, second, third = (m.get_or_create("t", p) for p in range(3))
    assert m.dir_of(("t", 0)) == a and m.dir_of(("t", 1)) == b and m.dir_of(("t", 2)) == a
    for log_ in (first, second, third):
        log_.append(batch(b"kept"))
    m.checkpoint()
    before = (a / RECOVERY).read_bytes()

    filler = tmpfs.fill(a)
    with pytest.raises(KafkaStorageError, match="No space left"):
        first.append(batch(b"x" * (64 << 10)))
    assert list(m.failures.offline_dirs) == [a]
    assert m.live_dirs == [b]
    assert m.offline_partitions() == [("t", 0), ("t", 2)]
    # the whole directory refuses work, even an append that would fit in the page it has
    with pytest.raises(KafkaStorageError, match="offline"):
        third.append(batch(b"y"))
    with pytest.raises(KafkaStorageError, match="offline"):
        third.read(0, 1 << 20)
    second.append(batch(b"online"))  # the other directory is untouched

    assert m.handle_log_dir_failure(a) == [("t", 0), ("t", 2)]
    assert sorted(m.logs) == [("t", 1)]
    with pytest.raises(KafkaStorageError, match="offline log directory"):
        m.get_or_create("t", 0)  # never a second copy elsewhere
    assert m.get_or_create("t", 3) is not None and m.dir_of(("t", 3)) == b
    m.shutdown()
    assert (b / MARKER).exists() and not (a / MARKER).exists()
    assert (a / RECOVERY).read_bytes() == before

    filler.unlink()  # repaired
    again = manager(a, b)
    again.startup()
    try:
        for p, values in {0: [b"kept"], 1: [b"kept", b"online"], 2: [b"kept"]}.items():
            log_ = again.get("t", p)
            assert log_ is not None
            assert log_.log_end_offset == len(values), p
            data = log_.read_batches(0)
            assert all(v in data for v in values)
        assert b"y" not in again.get("t", 2).read_batches(0)  # type: ignore[union-attr]
    finally:
        again.shutdown()
