"""The load job's table: versions committed by replacing a link, offsets inside each version."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from samsa.pipeline.table import OFFSETS_FILE, Table, TableError, Version

SUBPROCESS_TIMEOUT_S = 60


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (through links) by relative path, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _write(staging: Path, rel: str, data: bytes) -> None:
    path = staging / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _version_numbers(table: Table) -> set[int]:
    if not table.versions.is_dir():
        return set()
    return {int(p.name[1:]) for p in table.versions.iterdir() if p.name.startswith("v")}


@pytest.fixture
def table(tmp_path: Path) -> Table:
    return Table(tmp_path / "warehouse" / "events")


def test_layout_names(table: Table) -> None:
    warehouse = table.path.parent
    assert table.versions == warehouse / ".events.versions"
    assert table.lock_path == warehouse / ".events.lock"


def test_empty_table_is_version_zero(table: Table) -> None:
    assert table.current() == Version(0, None, {})
    assert not table.path.exists()
    assert not table.path.is_symlink()


def test_begin_commit_makes_version_one_visible(table: Table) -> None:
    with table.locked():
        base = table.current()
        staging = table.begin(base)
        assert staging == table.versions / "v00000001"
        assert staging.is_dir() and list(staging.iterdir()) == []
        _write(staging, "date=2026-11-22/hour=9/part-0.parquet", b"rows of hour 9")
        offsets = {"page_views": {0: 10, 1: 7, 2: 0}, "clicks": {0: 3}}
        committed = table.commit(staging, offsets)
    assert committed == Version(1, staging, offsets)
    assert table.path.is_symlink()
    # a relative link, so the warehouse can move
    assert os.readlink(table.path) == os.path.join(".events.versions", "v00000001")
    current = table.current()
    assert current.number == 1
    assert current.path == staging.resolve()
    assert current.offsets == offsets
    assert all(isinstance(p, int) for parts in current.offsets.values() for p in parts)
    # readers go through the link: the data file and the offsets file are there
    assert _files(table.path) == {
        "date=2026-11-22/hour=9/part-0.parquet": b"rows of hour 9",
        OFFSETS_FILE: (staging / OFFSETS_FILE).read_bytes(),
    }
    stored = json.loads((table.path / OFFSETS_FILE).read_text())
    assert stored == {"clicks": {"0": 3}, "page_views": {"0": 10, "1": 7, "2": 0}}
    # no temporary file or spare link is left behind
    assert sorted(p.name for p in table.path.parent.iterdir()) == [
        ".events.lock", ".events.versions", "events",
    ]
    assert not (staging / (OFFSETS_FILE + ".tmp")).exists()


def test_commit_with_no_offsets(table: Table) -> None:
    staging = table.begin(table.current())
    table.commit(staging, {})
    assert table.current() == Version(1, staging.resolve(), {})


def test_next_version_hard_links_the_data_files(table: Table) -> None:
    v1 = table.begin(table.current())
    _write(v1, "date=2026-11-22/hour=9/part-a.parquet", b"a")
    _write(v1, "date=2026-11-22/hour=10/part-b.parquet", b"bb")
    _write(v1, "_SUCCESS", b"")
    (v1 / "date=2026-11-22" / "hour=11").mkdir(parents=True)  # an empty directory too
    table.commit(v1, {"page_views": {0: 2}})

    v2 = table.begin(table.current())
    assert v2 == table.versions / "v00000002"
    # the data files are there before the load writes anything, the offsets file is not
    assert _files(v2) == {
        "date=2026-11-22/hour=9/part-a.parquet": b"a",
        "date=2026-11-22/hour=10/part-b.parquet": b"bb",
        "_SUCCESS": b"",
    }
    assert not (v2 / OFFSETS_FILE).exists()
    assert (v2 / "date=2026-11-22" / "hour=11").is_dir()
    for rel in ("date=2026-11-22/hour=9/part-a.parquet", "date=2026-11-22/hour=10/part-b.parquet"):
        old, new = (v1 / rel).stat(), (v2 / rel).stat()
        assert (old.st_dev, old.st_ino) == (new.st_dev, new.st_ino)  # a hard link, not a copy
        assert new.st_nlink == 2

    _write(v2, "date=2026-11-22/hour=10/part-c.parquet", b"ccc")
    table.commit(v2, {"page_views": {0: 5}})
    assert table.current().number == 2
    assert table.current().offsets == {"page_views": {0: 5}}
    visible = _files(table.path)
    assert visible.pop(OFFSETS_FILE)
    assert visible == {
        "date=2026-11-22/hour=9/part-a.parquet": b"a",
        "date=2026-11-22/hour=10/part-b.parquet": b"bb",
        "date=2026-11-22/hour=10/part-c.parquet": b"ccc",
        "_SUCCESS": b"",
    }
    # version 1, which a reader may still be reading, is intact
    assert json.loads((v1 / OFFSETS_FILE).read_text()) == {"page_views": {"0": 2}}
    assert not (v1 / "date=2026-11-22/hour=10/part-c.parquet").exists()


def test_uncommitted_version_is_invisible_and_removed_by_next_begin(table: Table) -> None:
    v1 = table.begin(table.current())
    _write(v1, "date=2026-11-22/hour=9/part-a.parquet", b"a")
    table.commit(v1, {"page_views": {0: 1}})

    # a load that dies after writing half its files
    abandoned = table.begin(table.current())
    _write(abandoned, "date=2026-11-22/hour=9/part-dead.parquet", b"half written")
    _write(abandoned, OFFSETS_FILE + ".tmp", b'{"page_views": {"0": 99}}')
    assert table.current() == Version(1, v1.resolve(), {"page_views": {0: 1}})
    assert os.readlink(table.path) == os.path.join(".events.versions", "v00000001")
    assert "date=2026-11-22/hour=9/part-dead.parquet" not in _files(table.path)

    # the next load starts from version 1 again and finds no trace of the dead one
    retry = table.begin(table.current())
    assert retry == abandoned
    assert _files(retry) == {"date=2026-11-22/hour=9/part-a.parquet": b"a"}
    table.commit(retry, {"page_views": {0: 4}})
    assert table.current().number == 2
    assert table.current().offsets == {"page_views": {0: 4}}


def test_first_load_abandoned_leaves_an_empty_table(table: Table) -> None:
    staging = table.begin(table.current())
    _write(staging, "date=2026-11-22/hour=9/part-a.parquet", b"a")
    assert table.current() == Version(0, None, {})
    assert not table.path.exists()
    again = table.begin(table.current())
    assert _files(again) == {}


def test_versions_before_the_previous_one_are_removed(table: Table) -> None:
    for n in range(1, 6):
        staging = table.begin(table.current())
        _write(staging, f"date=2026-11-22/hour={n}/part-{n}.parquet", str(n).encode())
        table.commit(staging, {"page_views": {0: n}})
        # the new version and the one before it (a reader may still be on it), nothing older
        assert _version_numbers(table) == {n, n - 1} - {0}
    assert table.current().number == 5
    data = _files(table.path)
    data.pop(OFFSETS_FILE)
    assert data == {f"date=2026-11-22/hour={n}/part-{n}.parquet": str(n).encode()
                    for n in range(1, 6)}
    # the old versions' hard links are gone: each file has the two links of v4 and v5 left
    assert (table.path / "date=2026-11-22/hour=1/part-1.parquet").stat().st_nlink == 2


def test_remove_versions_ignores_other_entries(table: Table) -> None:
    staging = table.begin(table.current())
    table.commit(staging, {})
    (table.versions / "notes.txt").write_text("keep me")
    (table.versions / "v123").mkdir()  # not eight digits: not a version
    table.remove_versions(keep=set())
    assert sorted(p.name for p in table.versions.iterdir()) == ["notes.txt", "v123"]


def test_second_lock_in_the_same_process_fails(table: Table) -> None:
    with table.locked():
        with pytest.raises(TableError, match="another load is running on .*events"), Table(
            table.path
        ).locked():
            pass
        # the failed attempt did not take the lock away from its holder
        with pytest.raises(TableError), table.locked():
            pass
    # released: it can be taken again, twice in a row
    with table.locked():
        pass
    with table.locked():
        pass


def test_lock_excludes_another_process(table: Table) -> None:
    script = textwrap.dedent(
        """
        import sys
        from samsa.pipeline.table import Table, TableError
        try:
            with Table(sys.argv[1]).locked():
                print("locked")
        except TableError as exc:
            print("TableError:", exc)
        """
    )
    command = [sys.executable, "-c", script, str(table.path)]
    with table.locked():
        held = subprocess.run(command, capture_output=True, text=True,
                              timeout=SUBPROCESS_TIMEOUT_S, check=True)
    assert held.stdout.startswith("TableError: another load is running on "), held.stderr
    free = subprocess.run(command, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT_S, check=True)
    assert free.stdout == "locked\n", free.stderr


def test_lock_creates_the_parent_directory(tmp_path: Path) -> None:
    table = Table(tmp_path / "a" / "b" / "events")
    with table.locked():
        assert table.lock_path.exists()


def test_a_directory_is_not_a_table(table: Table) -> None:
    table.path.mkdir(parents=True)
    (table.path / "part-0.parquet").write_bytes(b"someone else's data")
    with pytest.raises(TableError, match="exists and is not a samsa table"):
        table.current()


def test_a_regular_file_is_not_a_table(table: Table) -> None:
    table.path.parent.mkdir(parents=True)
    table.path.write_text("not a table")
    with pytest.raises(TableError, match="exists and is not a samsa table"):
        table.current()


def test_a_link_elsewhere_is_not_a_table(table: Table, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "v00000001"
    elsewhere.mkdir(parents=True)
    table.path.parent.mkdir(parents=True)
    table.path.symlink_to(elsewhere)
    with pytest.raises(TableError, match="not at a version of the table"):
        table.current()


def test_a_link_to_a_non_version_is_not_a_table(table: Table) -> None:
    (table.versions / "latest").mkdir(parents=True)
    table.path.symlink_to(Path(table.versions.name) / "latest")
    with pytest.raises(TableError, match="not at a version of the table"):
        table.current()


def test_the_table_can_move(table: Table, tmp_path: Path) -> None:
    staging = table.begin(table.current())
    _write(staging, "part-0.parquet", b"x")
    table.commit(staging, {"clicks": {0: 1}})
    moved = tmp_path / "moved"
    shutil.move(table.path.parent, moved)
    again = Table(moved / "events")
    assert again.current().number == 1
    assert again.current().offsets == {"clicks": {0: 1}}
    assert (again.path / "part-0.parquet").read_bytes() == b"x"


# --- randomized: whatever happens, readers see the last committed version ------------------


class TableMachine(RuleBasedStateMachine):
    """Loads that commit, and loads that die after writing some files, in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="samsa-table-"))
        self.table = Table(self.root / "warehouse" / "events")
        # the model: what the last commit made visible
        self.number = 0
        self.files: dict[str, bytes] = {}
        self.offsets: dict[str, dict[int, int]] = {}
        # the load in progress, if any
        self.staging: Path | None = None
        self.staging_files: dict[str, bytes] = {}
        self.serial = 0

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @precondition(lambda self: self.staging is None)
    @rule()
    def begin(self) -> None:
        base = self.table.current()
        assert base.number == self.number
        self.staging = self.table.begin(base)
        assert self.staging.name == f"v{self.number + 1:08d}"
        # the new version starts as the old one's data files (no offsets, nothing of dead loads)
        assert _files(self.staging) == self.files
        self.staging_files = dict(self.files)

    @precondition(lambda self: self.staging is not None)
    @rule(hour=st.integers(0, 3), size=st.integers(0, 64))
    def write(self, hour: int, size: int) -> None:
        assert self.staging is not None
        self.serial += 1
        rel = f"date=2026-11-22/hour={hour}/part-{self.serial:05d}.parquet"
        data = os.urandom(size)
        _write(self.staging, rel, data)
        self.staging_files[rel] = data

    @precondition(lambda self: self.staging is not None)
    @rule(
        offsets=st.dictionaries(
            st.sampled_from(["page_views", "searches", "clicks"]),
            st.dictionaries(st.integers(0, 20), st.integers(0, 2**62), max_size=3),
            max_size=3,
        )
    )
    def commit(self, offsets: dict[str, dict[int, int]]) -> None:
        assert self.staging is not None
        version = self.table.commit(self.staging, offsets)
        self.number += 1
        assert version.number == self.number
        self.files = self.staging_files
        self.offsets = offsets
        self.staging = None
        self.staging_files = {}

    @precondition(lambda self: self.staging is not None)
    @rule()
    def abandon(self) -> None:
        """The load dies: its directory stays, half written, until the next begin."""
        self.staging = None
        self.staging_files = {}

    @invariant()
    def readers_see_the_last_commit(self) -> None:
        current = self.table.current()
        assert current.number == self.number
        assert current.offsets == self.offsets
        if self.number == 0:
            assert current.path is None
            assert not self.table.path.exists()
            return
        assert os.readlink(self.table.path) == os.path.join(
            ".events.versions", f"v{self.number:08d}"
        )
        visible = _files(self.table.path)
        assert OFFSETS_FILE in visible
        del visible[OFFSETS_FILE]
        assert visible == self.files

    @invariant()
    def old_versions_are_cleaned_up(self) -> None:
        kept = _version_numbers(self.table)
        allowed = {self.number - 1, self.number, self.number + 1} - {0}
        assert kept <= allowed, (kept, self.number)


def test_random_loads_commits_and_crashes() -> None:
    run_state_machine_as_test(
        TableMachine,
        settings=settings(
            max_examples=60,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
