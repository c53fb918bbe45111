"""A log directory that fails under a single broker: a full disk (a small tmpfs, filled) and a
disk whose writes fail with EIO (faultfs.py, a FUSE passthrough switched to fail).

As Kafka: the directory goes offline on the first I/O error in it; every partition in it then
answers KAFKA_STORAGE_ERROR (produce, fetch, ListOffsets) while the partitions in the other
directory are served as before, and the broker keeps running. Nothing acknowledged is lost:
after the disk is repaired and the broker restarted, recovery finds every acknowledged record.
With its only directory failed, a broker process halts with Kafka's one-line reason.

At start-up (Kafka's LogManager) a directory that cannot be read or written is offline from
the start and the broker starts on the others; its partitions are offline, never created
afresh in a good directory. A single node's first directory holds its metadata (Kafka's
default metadata.log.dir): when it fails the broker halts, and it does not start without it.

Real mounts, so these tests need root (CI runs as root); they fail without it, never skip.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import ConnectionClosed, FrameClient
from kio.schema.errors import ErrorCode
from waiting import wait_for

import samsa
from samsa.errors import KafkaStorageError
from samsa.records.batch import iter_headers
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.tools.zookeeper_server import free_port

from . import faultfs, tmpfs

pytestmark = pytest.mark.timeout(180)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, CREATE_TOPICS = 0, 1, 2, 3, 19
TOPIC, PARTITIONS = "events", 4
STORAGE_ERROR = ErrorCode.kafka_storage_error
BIG = b"x" * (64 << 10)  # needs fresh pages: a full tmpfs refuses it
LATEST = -1


class Wire(FrameClient):
    """The requests these tests send, answered per partition."""

    def create_topic(self, name: str, partitions: int) -> None:
        result = self.request(CREATE_TOPICS, 5, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout": 10_000, "validate_only": False}).topics[0]
        assert result.error_code == ErrorCode.none, result

    def produce(self, partition: int, *values: bytes) -> Any:
        batch = encode_batch([RecordInput(v) for v in values],
                             timestamp=int(time.time() * 1000))
        return self.request(PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": partition, "records": batch}]}]}).responses[0].partition_responses[0]

    def fetch(self, partition: int, offset: int = 0) -> Any:
        return self.request(FETCH, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 16 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 16 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}).responses[0].partitions[0]

    def list_offset(self, partition: int) -> Any:
        return self.request(LIST_OFFSETS, 5, {
            "replica_id": -1, "isolation_level": 0, "topics": [{
                "name": TOPIC, "partitions": [{"partition_index": partition,
                                               "current_leader_epoch": -1,
                                               "timestamp": LATEST}]}]}).topics[0].partitions[0]

    def offline_replicas(self) -> dict[int, list[int]]:
        """partition -> its offline replicas, as Metadata lists them."""
        topic = self.request(METADATA, 9, {
            "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}).topics[0]
        return {p.partition_index: list(p.offline_replicas) for p in topic.partitions}

    def values(self, partition: int) -> list[bytes]:
        """Every record value of the partition, fetched from offset 0 to its high watermark."""
        out: list[bytes] = []
        offset, deadline = 0, time.monotonic() + 30
        while True:
            data = self.fetch(partition, offset)
            assert data.error_code == ErrorCode.none, data
            records = bytes(data.records or b"")
            for pos, header in iter_headers(records):
                for record in decode_records(records[pos:pos + header.size]):
                    out.append(bytes(record.value or b""))
                offset = header.last_offset + 1
            if offset >= data.high_watermark:
                return out
            assert time.monotonic() < deadline, f"no records past offset {offset}"


def partitions_in(directory: Path) -> list[int]:
    return sorted(p for p in range(PARTITIONS) if (directory / f"{TOPIC}-{p}").is_dir())


def produce_acked(wire: Wire, acked: dict[int, list[bytes]], partition: int, count: int
                  ) -> None:
    for i in range(count):
        value = f"{partition}:{len(acked.setdefault(partition, []))}:{i}".encode()
        result = wire.produce(partition, value)
        assert result.error_code == ErrorCode.none, result
        acked[partition].append(value)


def broker_config(dir_a: Path, dir_b: Path) -> dict[str, Any]:
    """``dir_b`` first: a single node keeps its metadata (topics, producer id blocks) in its
    first log dir, Kafka's default metadata.log.dir, and halts when that one fails."""
    return {"log.dirs": f"{dir_b},{dir_a}", "num.partitions": 1}


def check_dir_fails_alone(tmp_path: Path, dir_a: Path, fail: Callable[[], None],
                          repair: Callable[[], None]) -> None:
    """The scenario both kinds of failure share: ``dir_a`` fails under a broker with a
    healthy ``dir_b``; then the disk is repaired and the broker restarted."""
    dir_b = tmp_path / "dirB"
    acked: dict[int, list[bytes]] = {}
    with samsa.Broker(tmp_path, config=broker_config(dir_a, dir_b)) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        wire.create_topic(TOPIC, PARTITIONS)
        in_a, in_b = partitions_in(dir_a), partitions_in(dir_b)
        assert len(in_a) >= 2 and in_b, (in_a, in_b)
        for p in range(PARTITIONS):
            produce_acked(wire, acked, p, 3)

        fail()
        failed = wire.produce(in_a[0], BIG)
        assert failed.error_code == STORAGE_ERROR, failed

        # the whole directory is offline: every partition in it, even one that was not written
        for p in in_a:
            assert wire.produce(p, b"small").error_code == STORAGE_ERROR
            assert wire.fetch(p).error_code == STORAGE_ERROR
            assert wire.list_offset(p).error_code == STORAGE_ERROR
        failures = broker.server.log_manager.failures
        assert list(failures.offline_dirs) == [dir_a]
        me = broker.server.broker_id
        assert wire.offline_replicas() == {p: [me] if p in in_a else []
                                           for p in range(PARTITIONS)}
        # the other directory serves on, and the broker is alive
        for p in in_b:
            produce_acked(wire, acked, p, 2)
            assert wire.values(p) == acked[p]
        assert broker.halted is None

    repair()
    with samsa.Broker(tmp_path, config=broker_config(dir_a, dir_b)) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        for p in range(PARTITIONS):  # recovery kept what was acknowledged, and nothing else
            assert wire.values(p) == acked[p], p
        for p in in_a:  # and the directory takes writes again
            produce_acked(wire, acked, p, 1)
            assert wire.values(p) == acked[p]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    reason = tmpfs.available()
    assert reason is None, f"these tests need real mounts (root, libfuse2): {reason}"
    with tmpfs.tmpfs(tmp_path / "dirA", "8m") as mounted:
        yield mounted


@pytest.fixture
def faulty_disk(tmp_path: Path) -> Iterator[faultfs.FaultFs]:
    reason = faultfs.available()
    assert reason is None, f"these tests need real mounts (root, libfuse2): {reason}"
    with faultfs.FaultFs(tmp_path / "backingA", tmp_path / "dirA") as fs:
        yield fs


def test_full_disk_takes_its_log_dir_offline(tmp_path: Path, small_disk: Path) -> None:
    """ENOSPC: the produce that hits it gets KAFKA_STORAGE_ERROR, the directory goes offline,
    the other one serves; with the filler gone the restarted broker has every acked record."""
    filler: list[Path] = []
    check_dir_fails_alone(tmp_path, small_disk, lambda: filler.append(tmpfs.fill(small_disk)),
                          lambda: filler[0].unlink())


def test_write_errors_take_their_log_dir_offline(tmp_path: Path,
                                                 faulty_disk: faultfs.FaultFs) -> None:
    """EIO on every write: the same as a full disk."""
    check_dir_fails_alone(tmp_path, faulty_disk.mountpoint, faulty_disk.fail,
                          faulty_disk.heal)


def test_broker_halts_when_its_only_log_dir_fails(tmp_path: Path, small_disk: Path) -> None:
    """A broker process whose every log directory failed halts (exit code 1) with Kafka's
    line; after the disk is repaired it starts again with every acknowledged record."""
    port = free_port()
    output = tmp_path / "broker.log"

    def start() -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "samsa.cli", "server"]
        for key, value in {"log.dirs": str(small_disk), "num.partitions": "1",
                           "listeners": f"PLAINTEXT://127.0.0.1:{port}"}.items():
            command += ["--override", f"{key}={value}"]
        start = output.stat().st_size if output.exists() else 0
        with output.open("ab") as out:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
        wait_for(lambda: proc.poll() is not None or b"is ready" in output.read_bytes()[start:],
                 timeout=60, what="the broker to start")
        assert proc.poll() is None, output.read_text()
        return proc

    acked: dict[int, list[bytes]] = {}
    proc = start()
    try:
        with Wire(("127.0.0.1", port)) as wire:
            wire.create_topic(TOPIC, 2)
            for p in range(2):
                produce_acked(wire, acked, p, 3)
            filler = tmpfs.fill(small_disk)
            try:
                result = wire.produce(0, BIG)
            except (ConnectionClosed, OSError):
                pass  # it may halt before the answer goes out
            else:
                assert result.error_code == STORAGE_ERROR, result
        assert proc.wait(30) == 1
        line = f"Shutdown broker because all log dirs in {small_disk} have failed"
        assert line in output.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    filler.unlink()
    proc = start()
    try:
        with Wire(("127.0.0.1", port)) as wire:
            for p in range(2):
                assert wire.values(p) == acked[p], p
    finally:
        proc.terminate()
        proc.wait(30)


# --- a log dir that fails while the broker starts ----------------------------------------------


def fail_at_start(disk: faultfs.FaultFs, how: str) -> None:
    """``reads``: the segments cannot be read (the top-level files can: the broker gets as far
    as loading its logs); ``writes``: nothing can be written (meta.properties, its first write,
    fails)."""
    if how == "reads":
        disk.fail_reads()
    else:
        disk.fail()


@pytest.mark.parametrize("how", ["reads", "writes"])
def test_log_dir_failing_at_start_up_is_offline_and_the_broker_starts(
        tmp_path: Path, faulty_disk: faultfs.FaultFs, how: str) -> None:
    """Kafka's LogManager: a log dir that cannot be read (or written) while the broker starts
    is offline, with its partitions, and the broker starts on the others. Its partitions
    answer KAFKA_STORAGE_ERROR and are listed offline; they are never created again in the
    good dir (which would fork them); once the disk is repaired a restart serves them all."""
    dir_a, dir_b = faulty_disk.mountpoint, tmp_path / "dirB"
    acked: dict[int, list[bytes]] = {}
    with samsa.Broker(tmp_path, config=broker_config(dir_a, dir_b)) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        wire.create_topic(TOPIC, PARTITIONS)
        in_a, in_b = partitions_in(dir_a), partitions_in(dir_b)
        assert in_a and in_b, (in_a, in_b)
        for p in range(PARTITIONS):
            produce_acked(wire, acked, p, 3)

    fail_at_start(faulty_disk, how)
    with samsa.Broker(tmp_path, config=broker_config(dir_a, dir_b)) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        offline = broker.server.log_manager.failures.offline_dirs
        assert list(offline) == [dir_a]
        first_failure = {"reads": "Error while loading log dir",
                         "writes": "writing meta.properties"}[how]
        assert offline[dir_a].startswith(first_failure), offline
        me = broker.server.broker_id
        assert wire.offline_replicas() == {p: [me] if p in in_a else []
                                           for p in range(PARTITIONS)}
        for p in in_a:
            assert wire.produce(p, b"lost?").error_code == STORAGE_ERROR
            assert wire.fetch(p).error_code == STORAGE_ERROR
            assert wire.list_offset(p).error_code == STORAGE_ERROR
        for p in in_b:
            assert wire.values(p) == acked[p]
            produce_acked(wire, acked, p, 2)
        # a new topic's partitions all go to the good dir
        wire.create_topic("later", 2)
        assert not (dir_b / f"{TOPIC}-{in_a[0]}").exists()
        assert {p.name for p in dir_b.iterdir() if p.name.startswith("later-")} == {
            "later-0", "later-1"}
        assert broker.halted is None

    faulty_disk.heal()
    with samsa.Broker(tmp_path, config=broker_config(dir_a, dir_b)) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        assert not broker.server.log_manager.failures.offline_dirs
        assert partitions_in(dir_a) == in_a and partitions_in(dir_b) == in_b
        for p in range(PARTITIONS):
            assert wire.values(p) == acked[p], p
        for p in in_a:
            produce_acked(wire, acked, p, 1)
            assert wire.values(p) == acked[p]


def test_broker_whose_every_log_dir_fails_at_start_up_does_not_start(
        tmp_path: Path, faulty_disk: faultfs.FaultFs) -> None:
    """With no log dir left after loading, the broker process exits (code 1) with Kafka's
    line instead of serving nothing; repaired, it starts with everything."""
    disk = faulty_disk.mountpoint
    port = free_port()
    config = {"log.dirs": str(disk), "num.partitions": 1,
              "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    acked: dict[int, list[bytes]] = {}
    with samsa.Broker(tmp_path, config=config), Wire(("127.0.0.1", port)) as wire:
        wire.create_topic(TOPIC, 2)
        for p in range(2):
            produce_acked(wire, acked, p, 2)

    faulty_disk.fail_reads()
    command = [sys.executable, "-m", "samsa.cli", "server"]
    for key, value in config.items():
        command += ["--override", f"{key}={value}"]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"Shutdown broker because all log dirs in {disk} have failed" in done.stderr

    faulty_disk.heal()
    with samsa.Broker(tmp_path, config=config), Wire(("127.0.0.1", port)) as wire:
        for p in range(2):
            assert wire.values(p) == acked[p]


# --- the metadata log dir ------------------------------------------------------------------------


def test_single_node_halts_when_its_metadata_log_dir_fails(
        tmp_path: Path, faulty_disk: faultfs.FaultFs) -> None:
    """A single node keeps its topics and producer id blocks in its first log dir (Kafka's
    default metadata.log.dir). When that dir fails the broker halts, as Kafka's does when its
    metadata log dir fails (KIP-858), even with another dir good; it does not start while the
    dir is failed; repaired, it starts with every acknowledged record."""
    dir_a, dir_b = faulty_disk.mountpoint, tmp_path / "dirB"
    config = {"log.dirs": f"{dir_a},{dir_b}", "num.partitions": 1}
    acked: dict[int, list[bytes]] = {}
    with samsa.Broker(tmp_path, config=config) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        wire.create_topic(TOPIC, PARTITIONS)
        in_a = partitions_in(dir_a)
        assert in_a
        for p in range(PARTITIONS):
            produce_acked(wire, acked, p, 2)
        faulty_disk.fail()
        try:
            result = wire.produce(in_a[0], BIG)
        except (ConnectionClosed, OSError):
            pass  # it may halt before the answer goes out
        else:
            assert result.error_code == STORAGE_ERROR, result
        wait_for(lambda: broker.halted is not None, timeout=30, what="the broker to halt")
        assert broker.halted == f"Shutdown broker because the metadata log dir {dir_a} has failed"

    with pytest.raises(KafkaStorageError,
                       match=f"I/O error in metadata log directory {dir_a}"):
        samsa.Broker(tmp_path, config=config).start()

    faulty_disk.heal()
    with samsa.Broker(tmp_path, config=config) as broker, \
            Wire(("127.0.0.1", broker.port)) as wire:
        for p in range(PARTITIONS):
            assert wire.values(p) == acked[p], p
