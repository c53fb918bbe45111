"""Delivery: at-least-once across restarts of the mirror and of both clusters; exactly-once
(exactly.once.support = enabled) across SIGKILLs of a ``samsa mirror`` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from waiting import wait_for

import samsa
from samsa.mirror.offset_store import read_offsets

from .helpers import (
    create_topic,
    mm2_properties,
    produce,
    read_all,
    running_mirror,
    wait_topic,
    write_properties,
)


def batch(start: int, count: int, partitions: int) -> list[dict]:
    return [{"key": str(i).encode(), "value": b"x" * 100, "partition": i % partitions}
            for i in range(start, start + count)]


def restarted(broker: samsa.Broker, path: Path) -> samsa.Broker:
    """The same cluster again: same data, same port."""
    port = broker.port
    broker.stop()
    fresh = samsa.Broker(path, config={"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    fresh.start()
    return fresh


def test_restarts_of_mirror_and_clusters_lose_nothing(tmp_path):
    a = samsa.Broker(tmp_path / "a")
    b = samsa.Broker(tmp_path / "b")
    a.start()
    b.start()
    try:
        create_topic(a, "t", 2)
        props = mm2_properties({"A": a, "B": b}, ["A->B"])
        produce(a, "t", batch(0, 300, 2))
        with running_mirror(props):
            wait_topic(b, "A.t")
            assert len(read_all(b, "A.t", expected=300)) >= 300
            # A's heartbeats (emitted by the disabled B->A flow, as MM2 does) are copied too:
            # their topic may appear in A after the records above were copied
            wait_topic(b, "A.heartbeats")
            assert read_all(b, "A.heartbeats", expected=1)
        # progress is in the target: the mirror stopped cleanly, so nothing is copied twice
        stored = read_offsets({"bootstrap.servers": b.bootstrap_servers}, "A")
        assert {k: v for k, v in stored.items() if k[0] == "t"} == {("t", 0): 149, ("t", 1): 149}
        assert ("heartbeats", 0) in stored  # A's heartbeats (B->A's) are mirrored too
        produce(a, "t", batch(300, 300, 2))  # while the mirror is down
        b = restarted(b, tmp_path / "b")
        with running_mirror(props):
            assert len(read_all(b, "A.t", expected=600)) >= 600
            a = restarted(a, tmp_path / "a")  # the source goes away under a running mirror
            produce(a, "t", batch(600, 300, 2))
            b = restarted(b, tmp_path / "b")  # and the target
            copied = read_all(b, "A.t", expected=900, timeout=60)
        keys = [int(m.key()) for m in copied]
        assert set(keys) == set(range(900))
        assert len(keys) == 900  # clean stops and restarts: no duplicate either
    finally:
        a.stop()
        b.stop()


def start_mirror(path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "samsa.cli", "mirror", str(path),
                             "--progress-interval", "1", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_copying(proc: subprocess.Popen[str], timeout: float = 60.0) -> list[str]:
    """Read the mirror's lines until a progress line shows records copied."""
    import time

    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("mirror ") and not line.startswith("mirror A->B: 0 records"):
            return lines
    raise AssertionError(f"the mirror copied nothing: {''.join(lines)}")


class SteadyProducer(threading.Thread):
    """Produces numbered records to the source until stopped, so a kill lands mid-copy."""

    def __init__(self, broker: samsa.Broker, topic: str, start: int, partitions: int) -> None:
        super().__init__(daemon=True)
        self.broker, self.topic, self.next, self.partitions = broker, topic, start, partitions
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.02):
            produce(self.broker, self.topic, batch(self.next, 50, self.partitions))
            self.next += 50


@pytest.mark.parametrize("eos", [True, False], ids=["exactly_once", "at_least_once"])
def test_sigkill_of_the_mirror(tmp_path, eos):
    """SIGKILLs land inside the mirror's work: exactly-once gives read_committed consumers
    every record once; at-least-once every record, perhaps twice."""
    extra = {"B.exactly.once.source.support": "enabled",  # Kafka's MM2 key (docs/ops.html)
             # long transactions: the kills land inside one
             "transaction.boundary": "interval",
             "transaction.boundary.interval.ms": "3000"} if eos else {
             "offset.flush.interval.ms": "3000"}
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "payments", 3)
        path = write_properties(tmp_path / "mm2.properties", mm2_properties(
            {"A": a, "B": b}, ["A->B"], extra))
        total = 0
        for _round in range(3):
            producer = SteadyProducer(a, "payments", total, 3)
            producer.start()
            proc = start_mirror(path, "--worker-id", "w1")
            try:
                wait_copying(proc)
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                producer.halt.set()
                producer.join(30)
            total = producer.next
        proc = start_mirror(path, "--worker-id", "w1")
        isolation = "read_committed" if eos else "read_uncommitted"
        try:
            def complete():
                # duplicates count too: at-least-once waits for every key, not for a number
                found = read_all(b, "A.payments", expected=total, timeout=30,
                                 isolation=isolation)
                return found if {int(m.key()) for m in found} == set(range(total)) else None
            copied = wait_for(complete, 90, "every record copied")
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "samsa mirror: stopped" in out
        keys = [int(m.key()) for m in copied]
        assert set(keys) == set(range(total))
        if eos:
            assert len(keys) == total
            # still exactly once after the clean stop
            assert len(read_all(b, "A.payments", isolation="read_committed")) == total
            # the killed mirrors' open transactions were aborted: their records are in the log
            assert len(read_all(b, "A.payments")) > total
        else:
            # progress was stored every 3 s: the kills left records copied but not recorded
            assert len(keys) > total
