"""Faults against a real cluster, with Jepsen's workloads and checks.

    python -m chaos.run --scenario leader-isolated         (from tests/, as root)
    python -m chaos.run --rounds 5 --seed 7                (random faults; ``make chaos``)

A run builds a private network (``netns.Network``: namespaces ``ctl``, ``zk``, ``b1``..``b3``),
then runs itself again inside ``ctl`` (``--inside``), where it starts ZooKeeper and three
brokers in their namespaces (``nodes.ChaosCluster``), the queue and the transaction workloads
(``workloads.py``), and the faults of the scenario, each held for a while and then healed.
After the last fault heals, it waits for the cluster to recover and for consumption to
resume, stops the producers, lets the consumers drain, reads every topic back and checks the
history (``checker.py``). The report (JSON) goes to ``--out``; the outer process prints it as
a table, and removes every process and namespace of the run whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faults.faultfs import FaultFs
from faults.tmpfs import fill

from .checker import Report, check_queue, check_txn
from .netns import Network, Node, available
from .nodes import ChaosCluster
from .workloads import (
    SEND_OFFSETS_HANG_S,
    History,
    QueueWorkload,
    TxnWorkload,
    end_offsets,
    final_read,
)

NODES = ("ctl", "zk", "b1", "b2", "b3")
TESTS_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = TESTS_DIR.parent


@dataclass(frozen=True)
class Fault:
    """One fault: ``apply`` starts it, ``heal`` ends it, held ``hold_s`` seconds between; what
    ``heal`` returns, when a string, is what it saw (for the run's log). ``failing_disk``: it
    needs the brokers' failing log dirs (``ChaosCluster.failing_disks``)."""

    name: str
    apply: Callable[[Network, ChaosCluster], Any]
    heal: Callable[[Network, ChaosCluster], Any]
    hold_s: float
    failing_disk: bool = False


def _leader(cluster: ChaosCluster, topic: str = "queue", partition: int = 0) -> int:
    state = cluster.partition_states(topic).get(partition)
    return state["leader"] if state and state["leader"] > 0 else 1


def _brokers(cluster: ChaosCluster, but: int) -> list[str]:
    return [f"b{b}" for b in cluster.brokers if b != but]


def _heal_network(network: Network, _cluster: ChaosCluster) -> str | None:
    seen = len(network.delayed)
    network.heal()
    done = network.delayed[seen:]
    return f"delayers: {done}" if done else None


def leader_isolated(hold: float) -> Fault:
    """The queue's leader cut off from the other brokers (it still reaches ZooKeeper and the
    clients): it must stop acknowledging acks=all writes it cannot replicate."""
    return Fault("leader cut off from its followers",
                 lambda n, c: n.partition([f"b{_leader(c)}"], _brokers(c, _leader(c))),
                 _heal_network, hold)


def zk_isolated(hold: float) -> Fault:
    """The queue's leader cut off from ZooKeeper only: its session expires, another broker
    leads, and the old leader (still reachable by clients) must not acknowledge writes."""
    return Fault("leader cut off from ZooKeeper",
                 lambda n, c: n.partition([f"b{_leader(c)}"], ["zk"]), _heal_network, hold)


def majority_minority(hold: float) -> Fault:
    """The queue's leader alone with the clients, against the other brokers and ZooKeeper."""
    return Fault("leader in the minority",
                 lambda n, c: n.partition([f"b{_leader(c)}"], [*_brokers(c, _leader(c)), "zk"]),
                 _heal_network, hold)


def one_way(hold: float) -> Fault:
    """The followers' packets to the leader are lost; the leader's to them arrive."""
    def apply(n: Network, c: ChaosCluster) -> None:
        leader = _leader(c)
        for follower in _brokers(c, leader):
            n.cut(follower, f"b{leader}")
    return Fault("followers cannot reach the leader (one way)", apply, _heal_network, hold)


def lossy(hold: float) -> Fault:
    return Fault("30% packet loss at the leader",
                 lambda n, c: n.lossy(f"b{_leader(c)}", 0.3), _heal_network, hold)


def delay(hold: float) -> Fault:
    """The queue's leader's links to the other brokers slow: each packet held back 100 to 500
    ms each way (round trips of about 0.6 s). Fetches, ISR changes and acks=all writes wait on
    them; nothing may be lost or duplicated for it."""
    def apply(n: Network, c: ChaosCluster) -> None:
        leader = _leader(c)
        n.delay(f"b{leader}", _brokers(c, leader), 0.3, 0.2, max_s=hold + 60)
    return Fault("leader's links to its followers delayed 300 +- 200 ms", apply, _heal_network,
                 hold)


def delay_all(hold: float) -> Fault:
    """Every link between two nodes (brokers, ZooKeeper, the clients) slow: 100 to 300 ms each
    way."""
    def apply(n: Network, _c: ChaosCluster) -> None:
        for name in NODES:
            n.delay_inbound(name, [o for o in NODES if o != name], 0.2, 0.1, max_s=hold + 60)
    return Fault("every link delayed 200 +- 100 ms", apply, _heal_network, hold)


def _process_fault(name: str, action: str, undo: str, hold: float) -> Fault:
    chosen: dict[str, int] = {}

    def apply(_n: Network, c: ChaosCluster) -> None:
        chosen["broker"] = _leader(c)
        getattr(c.brokers[chosen["broker"]], action)()

    def heal(_n: Network, c: ChaosCluster) -> None:
        broker = c.brokers[chosen["broker"]]
        if undo == "start":
            if not broker.running:
                broker.start()
        else:
            getattr(broker, undo)()
    return Fault(name, apply, heal, hold)


def pause_long(hold: float) -> Fault:
    return _process_fault("leader paused past its session timeout", "pause", "resume", hold)


def pause_short(hold: float) -> Fault:
    return _process_fault("leader paused within its session timeout", "pause", "resume", hold)


def kill_restart(hold: float) -> Fault:
    return _process_fault("leader killed, restarted later", "kill", "start", hold)


def isolated_then_killed(hold: float) -> Fault:
    """The queue's leader cut off from its followers (it still reaches ZooKeeper and the
    clients), then killed while cut off, and started again after the network heals. With
    Kafka's durability settings nothing acknowledged is lost; with ``min.insync.replicas=1`` and
    unclean leader election, writes it acknowledged alone are (the control experiment)."""
    chosen: dict[str, int] = {}

    def apply(n: Network, c: ChaosCluster) -> None:
        chosen["broker"] = leader = _leader(c)
        n.partition([f"b{leader}"], _brokers(c, leader))
        time.sleep(hold)
        c.brokers[leader].kill()

    def heal(n: Network, c: ChaosCluster) -> None:
        n.heal()
        c.wait(lambda: chosen["broker"] not in c.registered(),
               "the killed broker's session to expire", 60)
        c.brokers[chosen["broker"]].start()
    return Fault("leader cut off from its followers, then killed", apply, heal, hold)


def _start_repaired(c: ChaosCluster, broker_id: int) -> None:
    """After a disk fault, the disk repaired: the broker started again if it halted, restarted
    if it runs with a log dir offline (Kafka takes a failed dir back only at a restart)."""
    broker = c.brokers[broker_id]
    if not broker.running:
        broker.start()
    elif c.offline_replicas(broker_id):
        broker.restart()


def disk_full(hold: float) -> Fault:
    """The queue's leader's disk fills up: the broker takes its log dirs offline and, having no
    other, halts (Kafka's rule); the disk is emptied and the broker started again."""
    chosen: dict[str, Any] = {}

    def apply(_n: Network, c: ChaosCluster) -> None:
        chosen["broker"] = broker = _leader(c)
        chosen["filler"] = fill(c.brokers[broker].disk)

    def heal(_n: Network, c: ChaosCluster) -> None:
        chosen["filler"].unlink()
        _start_repaired(c, chosen["broker"])
    return Fault("leader's disk full", apply, heal, hold)


def _hosted(failing: FaultFs) -> set[tuple[str, int]]:
    """The partitions whose logs are in this log dir (its backing directory)."""
    out = set()
    for entry in failing.backing.iterdir():
        topic, _, partition = entry.name.rpartition("-")
        if topic and partition.isdigit():
            out.add((topic, int(partition)))
    return out


def _leaderships(c: ChaosCluster) -> dict[tuple[str, int], dict[str, Any]]:
    assert c.zk is not None
    return {(topic, p): state for topic in c.zk.get_children("/brokers/topics")
            for p, state in c.partition_states(topic).items()}


def eio(hold: float) -> Fault:
    """A broker's second log dir starts failing every write with EIO (faultfs): the broker
    leading the most partitions there. It must take the dir offline (its replicas there answer
    KAFKA_STORAGE_ERROR), list them for the controller, which moves their leaderships away, and
    go on with its other dir. Healed as Kafka requires: the disk repaired and the broker
    restarted. Unless it was stopped or paused meanwhile (another fault), the heal first waits
    (60 s at most) until no partition of that dir is led by it."""
    chosen: dict[str, Any] = {}

    def apply(_n: Network, c: ChaosCluster) -> None:
        states = _leaderships(c)

        def led_there(broker: int) -> int:
            failing = c.brokers[broker].failing_dir
            assert failing is not None, "the cluster was started without failing_disks"
            return sum(1 for tp in _hosted(failing) if states.get(tp, {}).get("leader") == broker)
        chosen["broker"] = broker = max(sorted(c.brokers), key=led_there)
        failing = c.brokers[broker].failing_dir
        assert failing is not None
        chosen["partitions"] = _hosted(failing)
        failing.fail()

    def heal(_n: Network, c: ChaosCluster) -> str:
        broker = c.brokers[chosen["broker"]]
        failing = broker.failing_dir
        assert failing is not None
        partitions = chosen["partitions"]

        def moved() -> bool:
            if not broker.running or broker.paused:
                return True  # another fault stopped it: it may not have written since
            states = _leaderships(c)
            return not any(tp in states and states[tp]["leader"] == broker.broker_id
                           for tp in partitions)
        c.wait(moved, f"the leaderships of broker {broker.broker_id}'s failed log dir "
               f"({len(partitions)} partitions) to move away", 60)
        if broker.running and not broker.paused:
            seen = (f"broker {broker.broker_id}: {len(c.offline_replicas(broker.broker_id))} "
                    f"replicas offline (of {len(partitions)} in {failing.mountpoint})")
        else:
            seen = f"broker {broker.broker_id} was stopped or paused"
        failing.heal()
        _start_repaired(c, broker.broker_id)
        return seen
    return Fault("a log dir failing with EIO", apply, heal, hold, failing_disk=True)


def combined(first: Fault, second: Fault) -> Fault:
    """Two faults at once: applied in order, healed in reverse."""
    def apply(n: Network, c: ChaosCluster) -> None:
        first.apply(n, c)
        second.apply(n, c)

    def heal(n: Network, c: ChaosCluster) -> str:
        seen = [second.heal(n, c), first.heal(n, c)]
        return "; ".join(s for s in seen if isinstance(s, str))
    return Fault(f"{first.name} + {second.name}", apply, heal,
                 max(first.hold_s, second.hold_s), first.failing_disk or second.failing_disk)


def clock_jump(hold: float, offset_s: float = 600.0) -> Fault:
    chosen: dict[str, int] = {}

    def apply(_n: Network, c: ChaosCluster) -> None:
        chosen["broker"] = _leader(c)
        c.brokers[chosen["broker"]].set_clock(offset_s)

    def heal(_n: Network, c: ChaosCluster) -> None:
        c.brokers[chosen["broker"]].set_clock(0)
    return Fault(f"leader's wall clock {offset_s:+.0f} s", apply, heal, hold)


def clock_back(hold: float) -> Fault:
    return clock_jump(hold, -600.0)


FAULTS: dict[str, Callable[[float], Fault]] = {
    "leader-isolated": leader_isolated, "zk-isolated": zk_isolated,
    "majority-minority": majority_minority, "one-way": one_way, "lossy": lossy,
    "pause-long": pause_long, "pause-short": pause_short, "kill-restart": kill_restart,
    "clock-forward": clock_jump, "clock-back": clock_back,
    "disk-full": disk_full, "isolated-then-killed": isolated_then_killed,
    "delay": delay, "delay-all": delay_all, "eio": eio,
}
# What a random schedule draws from (the control experiment's fault needs its settings).
RANDOM_FAULTS = sorted(set(FAULTS) - {"isolated-then-killed"})
# How long each fault is held by default: the session-bound ones past the ZooKeeper session.
HOLD_S = {"pause-short": 2.0, "pause-long": 12.0, "zk-isolated": 12.0,
          "majority-minority": 12.0, "kill-restart": 8.0}


def schedule(scenario: str, rounds: int, seed: int) -> list[Fault]:
    if scenario != "random":
        return [FAULTS[scenario](HOLD_S.get(scenario, 8.0)) for _ in range(rounds)]
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):  # one fault, or two different ones at once
        names = rng.sample(RANDOM_FAULTS, 2 if rng.random() < 0.5 else 1)
        faults = [FAULTS[n](HOLD_S.get(n, 8.0)) for n in names]
        out.append(faults[0] if len(faults) == 1 else combined(*faults))
    return out


# --- inside the ctl namespace ----------------------------------------------------------------


def run_inside(args: argparse.Namespace, network: Network) -> dict[str, Any]:
    work = Path(args.work_dir)
    overrides = dict(o.split("=", 1) for o in args.override or ())
    faults = schedule(args.scenario, args.rounds, args.seed)
    cluster = ChaosCluster(network, work, overrides=overrides,
                           failing_disks=any(f.failing_disk for f in faults))
    history = History()
    queue = txn = None
    log: list[str] = []

    def note(line: str) -> None:
        log.append(f"{time.strftime('%H:%M:%S')} {line}")
        print(log[-1], file=sys.stderr, flush=True)

    try:
        cluster.start()
        note(f"cluster up: {cluster.bootstrap}")
        queue = QueueWorkload(cluster.bootstrap, history)
        txn = TxnWorkload(cluster.bootstrap, history, seed=args.seed)
        queue.start()
        cluster.wait_full_isr("queue", queue.partitions)
        txn.start()
        cluster.wait(lambda: history.count("ack") >= 50 and history.count("txn-committed") >= 2,
                     "the workloads to get going", 90, ("queue", "txn"))
        for fault in faults:
            before = history.count("ack")
            note(f"fault: {fault.name} (hold {fault.hold_s:g} s)")
            fault.apply(network, cluster)
            time.sleep(fault.hold_s)
            seen = fault.heal(network, cluster)
            note(f"healed: {fault.name}; acks during it: {history.count('ack') - before}"
                 + (f"; {seen}" if isinstance(seen, str) and seen else ""))
            _wait_recovered(cluster, history, queue, txn, progress=not args.control)
        note("stopping the producers")
        queue_acked = history.count("ack")
        txn.stop_producing()
        queue.stop_producing()
        if not args.control:  # with durability given up, lost writes are never read
            _drain(cluster, history, queue, txn)
        queue.stop()
        txn.stop(stuck=("txn-processor",) if history.count("ctp-stalled") else ())
        note(f"drained; {queue_acked} queue acks")
        report = Report()
        reads = {
            "queue": final_read(cluster.bootstrap, "queue", queue.partitions),
            "txn": final_read(cluster.bootstrap, "txn", txn.partitions, "read_committed"),
            "txn-uncommitted": final_read(cluster.bootstrap, "txn", txn.partitions),
            "txn-out": final_read(cluster.bootstrap, "txn-out", txn.partitions,
                                  "read_committed"),
        }
        _save(work, history, reads)
        check_queue(history, reads["queue"], report)
        check_txn(history, reads["txn"], reads["txn-out"], txn.per_txn, report)
        return {"ok": report.ok, "counts": report.counts, "examples": report.examples,
                "totals": report.totals, "liveness": report.liveness, "log": log}
    except BaseException as exc:
        with contextlib.suppress(Exception):
            _save(work, history, {})
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "log": log,
                "details": cluster.details(("queue", "txn", "txn-out")),
                "client_threads": _thread_stacks()}
    finally:
        for workload in (queue, txn):
            if workload is not None:
                workload.stopping.set()
        cluster.close()


def _thread_stacks() -> dict[str, str]:
    """Where each client thread is (a workload that stopped making progress)."""
    import threading
    import traceback
    names = {t.ident: t.name for t in threading.enumerate()}
    return {names.get(ident, str(ident)): "".join(traceback.format_stack(frame)[-6:])
            for ident, frame in sys._current_frames().items()}


def _save(work: Path, history: History, reads: dict[str, dict[int, list[tuple[int, bytes]]]]
          ) -> None:
    """The history and the final reads, for a failed run's post-mortem."""
    with (work / "history.jsonl").open("w") as out:
        for event in history.events:
            out.write(json.dumps(event) + "\n")
    (work / "final-reads.json").write_text(json.dumps(
        {topic: {p: [[o, v.decode(errors="replace")] for o, v in records]
                 for p, records in read.items()} for topic, read in reads.items()}))


def _wait_recovered(cluster: ChaosCluster, history: History, queue: QueueWorkload,
                    txn: TxnWorkload, progress: bool = True) -> None:
    """Every broker back, every partition with a full ISR, and both workloads going again
    (``progress``; an idempotent producer that lost writes fails for good, as it should)."""
    cluster.wait(lambda: cluster.registered() == set(cluster.brokers), "every broker back",
                 120)
    for topic, partitions in (("queue", queue.partitions), ("txn", txn.partitions)):
        cluster.wait_full_isr(topic, partitions, 120)
    if not progress:
        return
    acks, commits = history.count("ack"), history.count("txn-committed")
    cluster.wait(lambda: history.count("ack") >= acks + 20
                 and history.count("txn-committed") >= commits + 1,
                 "the workloads to make progress after the fault", 120, ("queue", "txn"))


def _drain(cluster: ChaosCluster, history: History, queue: QueueWorkload,
           txn: TxnWorkload) -> None:
    """Until the group has read every acknowledged write and the processor has copied the
    whole transactional topic (consumption resumed after the faults)."""
    acked = {(e["producer"], e["seq"]) for e in history.of("ack")}

    def group_done() -> bool:
        return acked <= {(e["producer"], e["seq"]) for e in history.of("read")}
    cluster.wait(group_done, "the group to read every acknowledged write", 120, ("queue",))

    def settled(topic: str) -> bool:  # every transaction ended: nothing holds the LSO
        stable = end_offsets(cluster.bootstrap, topic, txn.partitions, "read_committed")
        return stable is not None and stable == end_offsets(
            cluster.bootstrap, topic, txn.partitions, "read_uncommitted")
    cluster.wait(lambda: settled("txn"), "every transaction on txn to end (last stable "
                 "offset = high watermark)", 120, ("txn",))
    target = sum(len(v) for v in final_read(cluster.bootstrap, "txn", txn.partitions,
                                            "read_committed").values())

    def copied() -> bool:
        out = final_read(cluster.bootstrap, "txn-out", txn.partitions, "read_committed")
        return sum(len(v) for v in out.values()) >= target
    try:
        cluster.wait(copied, "the processor to copy every committed record",
                     120 + SEND_OFFSETS_HANG_S, ("txn-out",))
    except AssertionError:
        history.add("ctp-stalled", threads=_thread_stacks().get("txn-processor", ""))
    cluster.wait(lambda: settled("txn-out"), "every transaction on txn-out to end", 120,
                 ("txn-out",))


# --- outside: the network, and cleaning up ---------------------------------------------------


def run(scenario: str, rounds: int, seed: int, work_dir: Path, timeout: float = 1500,
        overrides: dict[str, str] | None = None, control: bool = False) -> dict[str, Any]:
    """Build the network, run a scenario inside it, remove everything; the report."""
    problem = available()
    if problem is not None:
        raise RuntimeError(f"cannot build the fault tests' network: {problem}")
    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / "report.json"
    network = Network(NODES).open()
    try:
        description = {name: [node.namespace, node.ip] for name, node in network.nodes.items()}
        env = dict(os.environ, SAMSA_CHAOS_NETWORK=json.dumps({"tag": network.tag,
                                                                "nodes": description}),
                   PYTHONPATH=os.pathsep.join([str(TESTS_DIR), str(PROJECT_DIR)]))
        command = [*network["ctl"].exec_prefix(), sys.executable, "-m", "chaos.run",
                   "--inside", "--scenario", scenario, "--rounds", str(rounds),
                   "--seed", str(seed), "--work-dir", str(work_dir), "--out", str(out)]
        for key, value in (overrides or {}).items():
            command += ["--override", f"{key}={value}"]
        if control:
            command.append("--control")
        with (work_dir / "driver.log").open("ab") as log:
            proc = subprocess.Popen(command, cwd=TESTS_DIR, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"ok": False, "error": f"the run took more than {timeout:g} s",
                        "log": (work_dir / "driver.log").read_text(errors="replace")[-4000:]}
        if not out.exists():
            return {"ok": False, "error": f"the driver exited {proc.returncode} without a report",
                    "log": (work_dir / "driver.log").read_text(errors="replace")[-4000:]}
        report: dict[str, Any] = json.loads(out.read_text())
        return report
    finally:
        _kill_everything_in(network)
        network.close()


def _kill_everything_in(network: Network) -> None:
    for node in network.nodes.values():
        result = subprocess.run(["ip", "netns", "pids", node.namespace], capture_output=True,
                                text=True, timeout=30)
        for pid in result.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _network_from_env() -> Network:
    spec = json.loads(os.environ["SAMSA_CHAOS_NETWORK"])
    network = Network(tuple(spec["nodes"]), tag=spec["tag"])
    network.nodes = {name: Node(name, ns, ip) for name, (ns, ip) in spec["nodes"].items()}
    return network


def table(reports: list[tuple[str, dict[str, Any]]]) -> str:
    checks = ("lost", "moved", "duplicated", "reordered", "inconsistent_reads",
              "nonmonotonic_reads", "skipped_reads", "commit_regressions", "unconsumed",
              "client_crashes", "aborted_read", "partial",
              "committed_lost", "txn_duplicated", "ctp_wrong", "ctp_stalled")
    lines = [f"{'scenario':<20}{'acked':>8}{'txns':>6} " + " ".join(f"{c[:10]:>10}"
                                                                   for c in checks)]
    for name, r in reports:
        if "error" in r:
            lines.append(f"{name:<20} ERROR {r['error']}")
            continue
        totals, counts = r["totals"], r["counts"]
        hangs = r.get("liveness", {}).get("client_hangs", 0)
        note = f" ({hangs} librdkafka hang(s))" if hangs else ""
        lines.append(f"{name:<20}{totals.get('acked', 0):>8}{totals.get('txns_committed', 0):>6} "
                     + " ".join(f"{counts.get(c, 0):>10}" for c in checks) + note)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=["all", "random", *FAULTS],
                        help="repeatable; all: every fault alone, then random ones")
    parser.add_argument("--rounds", type=int, default=1, help="faults per run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="a broker config for every broker (repeatable)")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--control", action="store_true",
                        help="a control run: durability given up, losses expected")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        args.scenario = args.scenario[0]
        report = run_inside(args, _network_from_env())
        Path(args.out).write_text(json.dumps(report, default=str))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # a client thread stuck in librdkafka must not hold the exit
    # stopped (make chaos interrupted): the run's cleanup removes its processes and namespaces
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    scenarios = args.scenario or ["all"]
    if "all" in scenarios:
        scenarios = [*RANDOM_FAULTS, "random"]
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="samsa-chaos-"))
    reports = []
    for scenario in scenarios:
        overrides = dict(o.split("=", 1) for o in args.override or ())
        report = run(scenario, args.rounds, args.seed, work / scenario, overrides=overrides,
                     control=args.control)
        reports.append((scenario, report))
        print(table(reports[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        if not report.get("ok"):
            print(json.dumps({k: v for k, v in report.items() if k != "totals"}, indent=1,
                             default=str)[:8000], file=sys.stderr)
    print(table(reports))
    print(f"work dirs (histories, broker logs): {work}")
    if not all(r.get("ok") for _, r in reports):
        sys.exit(1)


if __name__ == "__main__":
    main()
