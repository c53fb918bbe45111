"""A few named fault scenarios, each against its own three-broker cluster in network namespaces
(``chaos.run``): the faults Jepsen found lost or inconsistent data under in other Kafka-like
systems. Every check of the history must count 0. ``make chaos`` runs every fault and random
ones; these are the short deterministic subset run by ``make test``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

from .netns import Network, Node, available
from .run import run, table

SCENARIOS = ["zk-isolated", "leader-isolated", "pause-long", "kill-restart", "clock-forward",
             "delay", "eio"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_acknowledged_write_is_lost_or_duplicated_under(scenario: str, tmp_path: Path) -> None:
    problem = available()
    assert problem is None, f"the fault tests need network namespaces and iptables: {problem}"
    report = run(scenario, rounds=1, seed=1, work_dir=tmp_path)
    assert report.get("ok"), (
        f"{table([(scenario, report)])}\n"
        + json.dumps({k: v for k, v in report.items() if k != "totals"}, indent=1,
                     default=str)[:12000])
    totals = report["totals"]
    assert totals["acked"] > 100 and totals["txns_committed"] > 0, totals  # the run did work


@pytest.mark.timeout(900)
def test_the_checks_see_loss_when_durability_is_given_up(tmp_path: Path) -> None:
    """The control experiment: with min.insync.replicas=1 and unclean leader election, a
    leader that acknowledged writes alone and then died loses them, and the checks say so
    (the harness can fail)."""
    problem = available()
    assert problem is None, f"the fault tests need network namespaces and iptables: {problem}"
    report = run("isolated-then-killed", rounds=1, seed=1, work_dir=tmp_path, overrides={
        "min.insync.replicas": "1", "unclean.leader.election.enable": "true"}, control=True)
    assert "error" not in report, report.get("error")
    assert report["counts"]["lost"] > 0, table([("isolated-then-killed", report)])


# A connection attempt to a closed port: the SYN out and the RST back, one round trip.
_RTT = """
import socket, statistics, sys, time
times = []
for _ in range(5):
    with socket.socket() as s:
        s.settimeout(5)
        start = time.monotonic()
        try:
            s.connect((sys.argv[1], 9))
        except ConnectionRefusedError:
            pass
        times.append(time.monotonic() - start)
print(statistics.median(times))
"""
# Answers each connection with the number of bytes it asks for (8 digits), for 60 s at most.
_SERVER = """
import socket, time
deadline = time.monotonic() + 60
with socket.create_server(("0.0.0.0", 7000)) as server:
    print("listening", flush=True)
    while time.monotonic() < deadline:
        server.settimeout(deadline - time.monotonic())
        connection, _ = server.accept()
        with connection:
            connection.settimeout(10)
            connection.sendall(b"x" * int(connection.recv(8)))
"""
# How long fetching that many bytes takes, connection included.
_FETCH = """
import socket, sys, time
start = time.monotonic()
with socket.create_connection((sys.argv[1], 7000), timeout=20) as s:
    s.sendall(b"%08d" % int(sys.argv[2]))
    size = 0
    while size < int(sys.argv[2]):
        size += len(s.recv(1 << 16))
print(time.monotonic() - start)
"""


def _rtt(source: Node, target: Node) -> float:
    return float(source.run(sys.executable, "-c", _RTT, target.ip).stdout)


def _fetch(source: Node, target: Node, size: int) -> float:
    return float(source.run(sys.executable, "-c", _FETCH, target.ip, str(size)).stdout)


@pytest.mark.timeout(120)
def test_a_delayed_link_has_the_delay_both_ways_until_healed() -> None:
    """The harness's delay fault (NFQUEUE and delay.py, for want of netem) really holds packets
    back: a round trip between two namespaces grows by twice the one-way delay, and is fast
    again once healed. TCP still moves data at a round trip's pace (slow start), not throttled
    by the delay (as it is when packets are held on their way out)."""
    problem = available()
    assert problem is None, f"the fault tests need network namespaces and iptables: {problem}"
    with Network(("a", "b", "c")) as network:
        a, b, c = network["a"], network["b"], network["c"]
        server = subprocess.Popen([*b.exec_prefix(), sys.executable, "-c", _SERVER],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and server.stdout.readline() == "listening\n"
            assert _rtt(a, b) < 0.05 and _fetch(a, b, 100_000) < 0.5
            network.delay("a", ["b"], 0.15, 0.02)
            delayed = [_rtt(a, b) for _ in range(3)]
            assert all(0.25 < t < 1.0 for t in delayed), delayed  # 2 x (150 +- 20 ms)
            assert _rtt(b, a) > 0.25  # the other way round too
            assert _rtt(a, c) < 0.05 and _rtt(c, b) < 0.05  # only that link
            # a connection and five or six round trips of slow start: about 2 s
            assert 1.0 < _fetch(a, b, 100_000) < 4.0
            network.heal()
            wait_for(lambda: _rtt(a, b) < 0.05, timeout=10, what="a fast link again after heal")
        finally:
            server.kill()
            server.wait()
        done = network.delayed  # a delayer at each end, for what it receives
        assert len(done) == 2 and all(d["packets"] >= 20 for d in done), done
        assert all(math.isclose(d["mean_delay_s"], 0.15, abs_tol=0.02) for d in done), done
        assert all(d["queue_dropped"] == 0 and d["user_dropped"] == 0 for d in done), done
