"""The fuzz corpora, replayed: every kept input of tests/fuzz_corpus/<target>/ goes through the
same check its fuzz target runs (fuzz/fuzz_<target>.py's ``check``), without atheris, and none
may crash. tests/fuzz_corpus/regressions/ holds each input that once crashed a target, named
``<target>-<what it found>``; each is a test of its own.

The corpora come from fuzz/make_seeds.py and ``make fuzz`` (README, "Fuzzing").
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
TARGETS = ("requests", "records", "compression", "coordinator_records")
REGRESSIONS = sorted(p.name for p in (CORPUS / "regressions").glob("*"))


@pytest.fixture(scope="module")
def checks() -> Iterator[dict[str, Callable[[bytes], None]]]:
    sys.path.insert(0, str(ROOT / "fuzz"))
    try:
        modules = {t: importlib.import_module(f"fuzz_{t}") for t in TARGETS}
        yield {t: m.check for t, m in modules.items()}
        for module in modules.values():
            close = getattr(module, "close", None)
            if close is not None:
                close()
    finally:
        sys.path.remove(str(ROOT / "fuzz"))


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_replays_without_a_crash(
    target: str, checks: dict[str, Callable[[bytes], None]]
) -> None:
    files = sorted((CORPUS / target).iterdir())
    assert files, f"no corpus for {target}: run fuzz/make_seeds.py"
    crashed = []
    for path in files:
        try:
            checks[target](path.read_bytes())
        except Exception as exc:
            crashed.append(f"{path.name}: {type(exc).__name__}: {exc}")
    assert not crashed, f"{len(crashed)} of {len(files)} inputs crash:\n" + "\n".join(crashed)


@pytest.mark.parametrize("name", REGRESSIONS)
def test_a_crash_once_found_stays_fixed(
    name: str, checks: dict[str, Callable[[bytes], None]]
) -> None:
    target = name.split("-", 1)[0]
    assert target in checks, f"{name} should start with a target's name: {', '.join(TARGETS)}"
    checks[target]((CORPUS / "regressions" / name).read_bytes())


def test_the_kept_corpus_stays_small() -> None:
    """A few hundred inputs a target at most (``make fuzz-merge`` keeps the ones that add
    coverage), under 2 MB in all."""
    for directory in CORPUS.iterdir():
        assert len(list(directory.iterdir())) <= 500, directory.name
    files = [p for p in CORPUS.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 2 * 1024 * 1024
