"""The same client scenarios against Apache Kafka and against samsa, compared field by field.

Both brokers start once for the module: Kafka from the jars ``make reference`` resolves (one
KRaft node), samsa in this process, configured alike (brokers.py). Each scenario runs once on
each (scenarios.py); its responses are normalized (normalize.py) and must agree, except for the
fields differences.py explains: a deliberate difference must still differ, and each known bug
is a strict expected failure, so fixing one shows. docs/compatibility.md's generated parts must
match what the two brokers advertise and what differences.py says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import api_table, scenarios
from .brokers import kafka_broker, samsa_broker
from .differences import DELIBERATE, Difference, covers
from .normalize import diff, plain

pytestmark = pytest.mark.timeout(240)

Steps = dict[str, Any]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(Kafka's address, samsa's address)."""
    directory: Path = tmp_path_factory.mktemp("differential")
    with kafka_broker(directory / "kafka") as kafka, samsa_broker(directory / "samsa") as samsa:
        yield kafka, samsa


@pytest.fixture(scope="module")
def results(brokers: tuple[str, str]) -> Callable[[str], tuple[Steps, Steps]]:
    """scenario name -> (Kafka's steps, samsa's steps), normalized; each scenario runs once."""
    done: dict[str, tuple[Steps, Steps]] = {}

    def run(name: str) -> tuple[Steps, Steps]:
        if name not in done:
            kafka, samsa = (scenarios.run(name, address) for address in brokers)
            done[name] = ({step: plain(r) for step, r in kafka},
                          {step: plain(r) for step, r in samsa})
            assert list(done[name][0]) == list(done[name][1]), "the steps differ"
        return done[name]

    return run


def _explained(path: str, *differences: Difference | None) -> bool:
    return any(d is not None and any(covers(f, path) for f in d.fields) for d in differences)


@pytest.mark.parametrize("name", list(scenarios.SCENARIOS))
def test_scenario(results: Callable[[str], tuple[Steps, Steps]], name: str) -> None:
    kafka, samsa = results(name)
    unexplained = []
    for step, expected in kafka.items():
        found = diff(expected, samsa[step])
        deliberate = DELIBERATE.get((name, step))
        for path, difference in found:
            if not _explained(path, deliberate):
                unexplained.append(f"[{step}] {path}: {difference}")
        if deliberate is not None:
            for field in deliberate.fields:
                assert any(covers(field, path) for path, _ in found), (
                    f"[{step}] {field} no longer differs: remove it from DELIBERATE")
    assert not unexplained, "samsa answers otherwise than Kafka:\n" + "\n".join(unexplained)


def test_every_listed_step_exists(results: Callable[[str], tuple[Steps, Steps]]) -> None:
    for scenario, step in DELIBERATE:
        assert step in results(scenario)[0], f"no step {step!r} in scenario {scenario!r}"


def test_compatibility_doc(brokers: tuple[str, str]) -> None:
    """docs/compatibility.md's table and lists are what the brokers and differences.py say
    (``cd tests && python -m differential.api_table`` rewrites them)."""
    kafka, samsa = brokers
    expected = api_table.generated(api_table.advertised(kafka), api_table.advertised(samsa))
    assert api_table.parts(api_table.DOC.read_text()) == expected, (
        "docs/compatibility.md is out of date: run "
        "'cd tests && ../.venv/bin/python -m differential.api_table'")
