"""``LogDirMover`` on a real LogManager and Replicas, on the test's event loop, where each
step of a move can be met: a log truncated while it is copied is copied again, appends between
the steps all reach the copy, another destination asked for mid-way cancels the first copy, a
failing destination ends the move and leaves the replica serving.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from samsa.cluster import log_dir_mover
from samsa.cluster.partition import Partition
from samsa.cluster.replicas import Replicas
from samsa.cluster.topic_admin import LocalTopicAdmin
from samsa.cluster.topics import TopicStore
from samsa.config import BrokerConfig
from samsa.errors import ErrorCode
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.storage.manager import LogManager

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


@pytest_asyncio.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[Replicas]:
    config = BrokerConfig({"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"})
    logs = LogManager(config)
    found = Replicas(logs)
    found.start(1, TopicStore(tmp_path))
    logs.startup()
    LocalTopicAdmin(found, None, lambda _listener: ("127.0.0.1", 9092)).create_topic(
        "t", 1, {"segment.bytes": "8192"})
    try:
        yield found
    finally:
        await found.mover.stop()
        logs.shutdown()


def append(partition: Partition, first: int, count: int) -> None:
    for i in range(first, first + count):
        partition.append(encode_batch([RecordInput(b"value-%d" % i * 4)]))


def values(partition: Partition) -> list[bytes]:
    log, found = partition.log, []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for record in decode_records(log.read_batches(offset)):
            found.append(record.value or b"")
            offset = record.offset + 1
    return found


def elsewhere(replicas: Replicas) -> Path:
    here = replicas.log_manager.dir_of(("t", 0))
    return next(d for d in replicas.log_manager.dirs if d != here)


async def moved(replicas: Replicas) -> None:
    while replicas.mover.moves:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("chunks", [False, True], ids=["one last step", "in chunks"])
async def test_appends_between_the_steps_all_reach_the_copy(
        replicas: Replicas, chunks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``in chunks``: the catching up takes many turns of the loop (small shares, a small last
    step), each with appends after it as large as a share: what is left stops shrinking, and
    the last step takes it."""
    if chunks:
        monkeypatch.setattr(log_dir_mover, "CHUNK_BYTES", 300)
        monkeypatch.setattr(log_dir_mover, "LAST_STEP_BYTES", 200)
        monkeypatch.setattr(log_dir_mover, "MAX_LAST_STEP_BYTES", 2000)
    partition = replicas.partition("t", 0)
    assert partition is not None
    append(partition, 0, 500)
    dest = elsewhere(replicas)
    assert replicas.mover.alter("t", 0, str(dest)) == ErrorCode.none
    assert replicas.mover.alter("t", 0, str(dest)) == ErrorCode.none  # the same move
    count, turns = 500, 0
    while replicas.mover.moves:  # appends at every turn of the loop, until the swap
        append(partition, count, 3)
        count += 3
        turns += 1
        await asyncio.sleep(0)
    if chunks:
        assert turns > 20
    assert replicas.log_manager.dir_of(("t", 0)) == dest
    assert partition.log is replicas.log_manager.get("t", 0)
    assert partition.log.parent_dir == dest
    assert values(partition) == [b"value-%d" % i * 4 for i in range(count)]


async def test_a_log_truncated_while_it_is_copied_is_copied_again(
        replicas: Replicas, caplog: pytest.LogCaptureFixture) -> None:
    partition = replicas.partition("t", 0)
    assert partition is not None
    append(partition, 0, 2000)
    dest = elsewhere(replicas)
    caplog.set_level(logging.INFO, "samsa.cluster.log_dir_mover")
    assert replicas.mover.alter("t", 0, str(dest)) == ErrorCode.none
    await asyncio.sleep(0)  # the move's first step: its files are planned and being copied
    partition.log.truncate_to(1500)  # a follower diverging from its leader
    await moved(replicas)
    assert "copying the log again" in caplog.text
    assert replicas.log_manager.dir_of(("t", 0)) == dest
    assert values(partition) == [b"value-%d" % i * 4 for i in range(1500)]


async def test_another_destination_cancels_the_first_copy(replicas: Replicas,
                                                          tmp_path: Path) -> None:
    partition = replicas.partition("t", 0)
    assert partition is not None
    append(partition, 0, 2000)
    here = replicas.log_manager.dir_of(("t", 0))
    assert here is not None
    dest = elsewhere(replicas)
    assert replicas.mover.alter("t", 0, str(dest)) == ErrorCode.none
    await asyncio.sleep(0)
    # back where it is: the move stops and its copy goes
    assert replicas.mover.alter("t", 0, str(here)) == ErrorCode.none
    assert not replicas.mover.moves
    await replicas.mover.stop()  # waits for the copy's deletion
    assert replicas.log_manager.dir_of(("t", 0)) == here
    assert not replicas.log_manager.futures
    assert [p.name for p in dest.iterdir() if p.is_dir()] == []
    assert values(partition) == [b"value-%d" % i * 4 for i in range(2000)]


async def test_a_failing_destination_ends_the_move_and_the_replica_serves(
        replicas: Replicas) -> None:
    partition = replicas.partition("t", 0)
    assert partition is not None
    append(partition, 0, 200)
    here = replicas.log_manager.dir_of(("t", 0))
    dest = elsewhere(replicas)
    assert replicas.mover.alter("t", 0, str(dest)) == ErrorCode.none
    [future] = replicas.log_manager.futures.values()
    future.path.rmdir()
    future.path.write_bytes(b"")  # the copy's directory cannot be written: an I/O error
    await moved(replicas)
    assert replicas.log_manager.failures.is_offline(dest)
    assert replicas.log_manager.dir_of(("t", 0)) == here
    assert not replicas.log_manager.futures
    append(partition, 200, 1)
    assert values(partition)[-1] == b"value-200" * 4
