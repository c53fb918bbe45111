"""Run every fuzz target in turn and print what each executed: ``make fuzz``.

    python fuzz/run_all.py                   # the default budget: 1,000,000 executions in all
    python fuzz/run_all.py --scale 0.1       # a tenth of it
    python fuzz/run_all.py --merge           # then keep what added coverage in tests/fuzz_corpus

Each target starts from its kept corpus (tests/fuzz_corpus/<target>, left as it is) and writes
what it finds into a working corpus under ``--out`` (fuzz/out by default). Each is bounded by
its number of runs and by ``-max_total_time``. A crash stops that target and this script fails,
naming the input; replay it with ``python fuzz/fuzz_<target>.py <crash file>``.

``--merge`` runs libFuzzer's ``-set_cover_merge=1`` over the kept and the working corpus into
a fresh directory (a small set of inputs with the same coverage features), then replaces the
kept corpus's non-seed files with it: what tests/test_fuzz_corpus.py replays stays small.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fuzz_corpus"

# executions per target: 1,000,000 in all; the request path is the slowest per input
RUNS = {
    "requests": 200_000,
    "records": 250_000,
    "compression": 250_000,
    "coordinator_records": 300_000,
}
_DONE = re.compile(r"^Done (\d+) runs in (\d+) second", re.MULTILINE)
_EXECUTED = re.compile(r"^stat::number_of_executed_units: (\d+)", re.MULTILINE)
_CRASH = re.compile(r"Test unit written to (\S+)")


def run_target(target: str, runs: int, max_time: int, out: Path, python: str) -> dict:
    work = out / "corpus" / target
    work.mkdir(parents=True, exist_ok=True)
    artifacts = out / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [
        python, str(ROOT / "fuzz" / f"fuzz_{target}.py"), str(work), str(CORPUS / target),
        f"-runs={runs}", f"-max_total_time={max_time}", "-timeout=30", "-rss_limit_mb=3072",
        f"-artifact_prefix={artifacts}/{target}-", "-print_final_stats=1",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.monotonic() - started
    log = out / f"{target}.log"
    log.write_text(done.stdout + done.stderr)
    executed = _EXECUTED.findall(done.stderr)
    crash = _CRASH.search(done.stderr)
    return {
        "target": target,
        "runs": int(executed[-1]) if executed else 0,
        "seconds": seconds,
        "ok": done.returncode == 0 and crash is None,
        "crash": crash.group(1) if crash else None,
        "log": log,
    }


def merge(target: str, out: Path, python: str) -> int:
    """Keep the smallest set of inputs with the coverage of the kept and working corpora."""
    kept = CORPUS / target
    merged = out / "merged" / target
    candidates = out / "candidates" / target
    for directory in (merged, candidates):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    # the seeds stay (make_seeds.py writes them): only what adds to them is merged in
    for path in kept.iterdir():
        shutil.copy(path, (merged if path.name.startswith("seed-") else candidates) / path.name)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(
        [python, str(ROOT / "fuzz" / f"fuzz_{target}.py"), "-set_cover_merge=1", str(merged),
         str(candidates), str(out / "corpus" / target)],
        check=True, capture_output=True, env=env, cwd=ROOT,
    )
    for path in kept.iterdir():
        if not path.name.startswith("seed-"):
            path.unlink()
    added = 0
    for path in sorted(merged.iterdir()):
        if not path.name.startswith("seed-"):
            shutil.copy(path, kept / path.name)
            added += 1
    return added


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="times the default runs")
    parser.add_argument("--max-time", type=int, default=900,
                        help="seconds at most per target (-max_total_time)")
    parser.add_argument("--targets", nargs="*", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--out", type=Path, default=ROOT / "fuzz" / "out")
    parser.add_argument("--merge", action="store_true",
                        help="then merge what added coverage into tests/fuzz_corpus")
    args = parser.parse_args()
    results = []
    for target in args.targets:
        runs = max(1, int(RUNS[target] * args.scale))
        print(f"fuzzing {target}: {runs} runs, at most {args.max_time} s ...", flush=True)
        result = run_target(target, runs, args.max_time, args.out, sys.executable)
        results.append(result)
        print(f"  {result['runs']:>9,} executions in {result['seconds']:6.0f} s"
              f" ({result['runs'] / max(result['seconds'], 1e-9):,.0f}/s)"
              + ("" if result["ok"] else f"  CRASH: {result['crash'] or result['log']}"),
              flush=True)
    total = sum(r["runs"] for r in results)
    seconds = sum(r["seconds"] for r in results)
    print(f"{'target':<22}{'executions':>12}{'seconds':>9}")
    for r in results:
        print(f"{r['target']:<22}{r['runs']:>12,}{r['seconds']:>9.0f}"
              + ("" if r["ok"] else "  CRASH"))
    print(f"{'total':<22}{total:>12,}{seconds:>9.0f}")
    failed = [r for r in results if not r["ok"]]
    for r in failed:
        print(f"{r['target']} crashed: {r['crash'] or 'see ' + str(r['log'])}; replay it with "
              f"python fuzz/fuzz_{r['target']}.py {r['crash'] or '<input>'}", file=sys.stderr)
    if failed:
        return 1
    if args.merge:
        for target in args.targets:
            print(f"merged {target}: {merge(target, args.out, sys.executable)} inputs kept "
                  "besides the seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
