"""franz-go's own integration tests against a 3-broker samsa cluster at replication factor 3.

franz-go (twmb/franz-go, the version pinned in ``franzgo/go.mod`` and ``go.sum``) tests its
client against a real cluster given in ``KGO_SEEDS``. Two of its end-to-end tests run here:

* ``TestGroupETL``: an idempotent producer writes records to a new topic, consumer groups
  (range, cooperative-sticky, static membership) read them, produce them to a second topic and
  commit, with members joining and leaving; every record must arrive exactly once and in order.
* ``TestTxnEtl``: the same with a transactional producer and consume-transform-produce
  transactions (read_committed readers, offsets sent to the transaction).

These found that a cluster acknowledged writes to new partitions that it then lost (issue 14).
Besides franz-go's verdict, no follower may truncate its log during the run: nothing fails
here, so a follower that must truncate held records the leader never had.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cluster.processes import process_cluster

pytestmark = pytest.mark.timeout(900)

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
BINARY = ROOT / "build" / "franz-go" / "kgo.test"
RECORDS = 100_000  # franz-go's default is 500,000; the runs used 100,000
# a follower's log had to be cut back: records the leader never had (replica_fetcher.py)
TRUNCATION = re.compile(
    r"truncating from (\d+) to (\d+)|below the local end|cannot append what the leader sent")


@pytest.fixture(scope="module")
def kgo_tests() -> Path:
    """franz-go's pkg/kgo test binary, built from the pinned module (Go's build cache makes a
    rebuild quick)."""
    go = shutil.which("go")
    assert go is not None, "Go is needed to build franz-go's tests (see the Makefile)"
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    build = subprocess.run(
        [go, "test", "-c", "-o", str(BINARY), "github.com/twmb/franz-go/pkg/kgo"],
        cwd=HERE / "franzgo", capture_output=True, text=True, timeout=600,
        env={**os.environ, "GOFLAGS": "-mod=readonly"})
    assert build.returncode == 0, f"building franz-go's tests failed:\n{build.stderr[-4000:]}"
    return BINARY


def truncations(log_text: str) -> list[str]:
    found = []
    for line in log_text.splitlines():
        match = TRUNCATION.search(line)
        if match is None:
            continue
        if match.group(1) is not None and int(match.group(1)) <= int(match.group(2)):
            continue  # nothing was cut
        found.append(line)
    return found


def test_truncation_lines_are_recognised() -> None:
    assert truncations("x: t-0: the log diverged from the leader's (leader epoch 0 ends at 0): "
                       "truncating from 75 to 0")
    assert not truncations("truncating from 7 to 7")
    assert truncations("t-1: the leader's log ends at 3, below the local end 9: truncating")


@pytest.mark.parametrize("test", ["TestGroupETL", "TestTxnEtl"])
def test_franz_go(kgo_tests: Path, tmp_path: Path, test: str) -> None:
    # Kafka's defaults for the internal topics (50 partitions, replication factor 3)
    overrides = {"offsets.topic.num.partitions": "50",
                 "replica.lag.time.max.ms": "30000"}
    with process_cluster(tmp_path, 3, overrides) as cluster:
        output = tmp_path / f"{test}.out"
        with output.open("w") as out:
            run = subprocess.run(
                [str(kgo_tests), "-test.run", f"^{test}$", "-test.v", "-test.timeout", "780s"],
                cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=840,
                env={**os.environ, "KGO_SEEDS": cluster.bootstrap, "KGO_TEST_RF": "3",
                     "KGO_TEST_RECORDS": str(RECORDS), "KGO_LOG_LEVEL": "info"})
        text = output.read_text(errors="replace")
        verdicts = [line for line in text.splitlines()
                    if re.match(r"\s*--- (PASS|FAIL|SKIP)", line)]
        failures = [line for line in text.splitlines()
                    if "--- FAIL" in line or re.search(r"_test\.go:\d+: .*(exp|!=|unable)", line)]
        assert run.returncode == 0, (
            f"franz-go's {test} failed (exit {run.returncode}):\n"
            + "\n".join(failures[:40]) + "\n" + text[-3000:] + "\n" + cluster.details())
        assert f"--- PASS: {test} " in text, verdicts
        cut = {b.id: truncations(b.log_text()) for b in cluster.brokers.values()}
        assert not any(cut.values()), f"followers truncated their logs: {cut}"
