"""When a follower is in sync, as Kafka's ``Replica.updateFetchState`` decides it: a follower is
caught up when it fetches from the leader's log end, or from the log end the leader had at the
follower's previous fetch (then it was caught up at that previous fetch). Under a steady
producer and a slow link a follower never reaches the current log end, yet it keeps up: it must
stay in the ISR; one that stops fetching forward leaves after ``replica.lag.time.max.ms``.

The hosted replicas alone, on a real log, with the partition's clock in the test's hands."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.cluster import partition as partition_module
from samsa.cluster.replicas import Replicas
from samsa.config import BrokerConfig
from samsa.records.record import RecordInput, encode_batch
from samsa.storage.manager import LogManager

LEADER, FOLLOWER = 1, 2
LAG_MAX_MS = 4000
FETCH_EVERY_MS = 1000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(partition_module, "_now_ms", clock)
    return clock


def leader(path: Path) -> partition_module.Partition:
    manager = LogManager(BrokerConfig({"log.dirs": str(path)}))
    manager.startup()
    replicas = Replicas(manager)
    replicas.broker_id = LEADER
    partition = replicas.open_replica("lag", 0, (LEADER, FOLLOWER))
    partition.make_leader((LEADER, FOLLOWER), {LEADER, FOLLOWER}, 1)
    return partition


def append(partition: partition_module.Partition) -> None:
    partition.log.append(encode_batch([RecordInput(b"v")]))


def test_a_follower_one_round_trip_behind_a_steady_producer_stays_in_sync(
        tmp_path: Path, clock: Clock) -> None:
    partition = leader(tmp_path)
    end_at_last_fetch = partition.log.log_end_offset
    for _ in range(4 * LAG_MAX_MS // FETCH_EVERY_MS):
        append(partition)  # the producer appended while the follower's fetch was on the way
        clock.ms += FETCH_EVERY_MS
        partition.record_follower_fetch(FOLLOWER, end_at_last_fetch)
        assert partition.log.log_end_offset > end_at_last_fetch  # never at the current end
        end_at_last_fetch = partition.log.log_end_offset
        assert partition.shrink_isr(LAG_MAX_MS) == set()
    assert partition.isr == {LEADER, FOLLOWER}


def test_a_follower_that_stops_fetching_forward_leaves_after_the_lag_time(
        tmp_path: Path, clock: Clock) -> None:
    partition = leader(tmp_path)
    append(partition)
    partition.record_follower_fetch(FOLLOWER, partition.log.log_end_offset)  # caught up
    stuck_at = partition.log.log_end_offset
    left_after = None
    for step in range(1, 2 * LAG_MAX_MS // FETCH_EVERY_MS):
        append(partition)
        clock.ms += FETCH_EVERY_MS
        partition.record_follower_fetch(FOLLOWER, stuck_at)  # it fetches, but gets nowhere
        if partition.shrink_isr(LAG_MAX_MS) == {FOLLOWER}:
            left_after = step * FETCH_EVERY_MS
            break
    # its first stuck fetch reached the end the leader had at its caught-up fetch, so it was
    # caught up then; never after: it leaves at the first check past the lag time
    assert left_after == LAG_MAX_MS + FETCH_EVERY_MS
    assert partition.isr == {LEADER}
