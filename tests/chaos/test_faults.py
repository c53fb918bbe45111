"""A few named fault scenarios, each against its own three-broker cluster in network namespaces
(``chaos.run``): the faults Jepsen found lost or inconsistent data under in other Kafka-like
systems. Every check of the history must count 0. ``make chaos`` runs every fault and random
ones; these are the short deterministic subset run by ``make test``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .netns import available
from .run import run, table

SCENARIOS = ["zk-isolated", "leader-isolated", "pause-long", "kill-restart", "clock-forward"]


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
