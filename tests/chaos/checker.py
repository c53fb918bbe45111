"""The checks over a run's full history (``workloads.History``) and the final reads.

Each check counts its violations and keeps a few examples; a run passes when every count is
0. Jepsen's anomalies, as they apply here:

queue
* ``lost``: an acknowledged write not in the final read;
* ``moved``: an acknowledged write found at another offset than the one acknowledged;
* ``duplicated``: a value in the log more than once;
* ``reordered``: one producer's writes to a partition not in the order it sent them;
* ``inconsistent_reads``: a group consumer or an assign-mode reader read at an offset
  something else than the final read has there (a read of data later lost or rewritten);
* ``nonmonotonic_reads``: an assign-mode reader's next read of a partition at an offset not
  past its previous one (Jepsen's nonmonotonic poll);
* ``skipped_reads``: an assign-mode reader's next read of a partition jumped over offsets the
  final read has (Jepsen's poll skip);
* ``commit_regressions``: the group's committed offset of a partition went backwards;
* ``unconsumed``: acknowledged writes the group never read (consumption did not resume);
* ``client_crashes``: a client thread ended by an exception the client library should not
  have raised;

transactions
* ``aborted_read``: a record of an aborted transaction seen by a read_committed reader;
* ``partial``: a transaction of which a read_committed reader saw some records but not all;
* ``committed_lost``: a transaction whose commit was acknowledged, missing from the final read;
* ``txn_duplicated``: a record of a transaction seen twice by the final read;
* ``ctp_wrong``: the consume-transform-produce output is not each committed input exactly once
  (or, when the processor stalled, holds something twice or from an uncommitted input);
* ``ctp_stalled``: the processor did not copy every committed input in time after the faults
  healed (consumption did not resume).

Reported beside, not failed: ``client_hangs``, the processor's calls that librdkafka left
blocked far past their timeout (a known client bug, see ``workloads.TxnWorkload._send_offsets``);
the processor goes on with a new producer.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .workloads import History

EXAMPLES = 5


@dataclass
class Report:
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Any]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    # what the clients did wrong (reported, not failed): client_hangs
    liveness: dict[str, int] = field(default_factory=dict)

    def flag(self, check: str, items: list[Any]) -> None:
        self.counts[check] = self.counts.get(check, 0) + len(items)
        if items:
            self.examples.setdefault(check, []).extend(items[:EXAMPLES])

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def problems(self) -> str:
        return "; ".join(f"{k}: {v} (e.g. {self.examples.get(k, [])[:EXAMPLES]})"
                         for k, v in self.counts.items() if v)


def check_queue(history: History, final: dict[int, list[tuple[int, bytes]]],
                report: Report) -> None:
    acked = {(e["producer"], e["seq"]): (e["partition"], e["offset"]) for e in history.of("ack")}
    at: dict[tuple[int, int], tuple[int, int]] = {}
    where: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    by_offset: dict[tuple[int, int], tuple[int, int]] = {}
    reordered = []
    for partition, records in final.items():
        last_seq: dict[int, int] = {}
        for offset, value in records:
            producer, seq = (int(x) for x in value.decode().split(":"))
            where[(producer, seq)].append((partition, offset))
            at[(producer, seq)] = (partition, offset)
            by_offset[(partition, offset)] = (producer, seq)
            if seq <= last_seq.get(producer, -1):
                reordered.append((partition, offset, producer, seq))
            last_seq[producer] = seq
    report.flag("lost", [k for k in acked if k not in where])
    report.flag("moved", [(k, v, where[k]) for k, v in acked.items()
                          if k in where and v not in where[k]])
    report.flag("duplicated", [(k, v) for k, v in where.items() if len(v) > 1])
    report.flag("reordered", reordered)
    reads = history.of("read")
    assigned = history.of("assign-read")
    report.flag("inconsistent_reads", [
        (e["partition"], e["offset"], (e["producer"], e["seq"]),
         by_offset.get((e["partition"], e["offset"])))
        for e in (*reads, *assigned) if by_offset.get((e["partition"], e["offset"]))
        != (e["producer"], e["seq"])])
    nonmonotonic, skipped = [], []
    previous: dict[tuple[int, int], int] = {}
    for e in assigned:  # in the order each reader read them
        key = (e["reader"], e["partition"])
        before = previous.get(key, -1)
        if e["offset"] <= before:
            nonmonotonic.append((*key, before, e["offset"]))
        elif any((e["partition"], o) in by_offset for o in range(before + 1, e["offset"])):
            skipped.append((*key, before, e["offset"]))
        previous[key] = e["offset"]
    report.flag("nonmonotonic_reads", nonmonotonic)
    report.flag("skipped_reads", skipped)
    regressions = []
    last: dict[int, int] = {}
    for e in sorted(history.of("committed"), key=lambda e: e["t"]):
        if e["offset"] < last.get(e["partition"], -1):
            regressions.append((e["partition"], last[e["partition"]], e["offset"]))
        last[e["partition"]] = max(e["offset"], last.get(e["partition"], -1))
    report.flag("commit_regressions", regressions)
    read_values = {(e["producer"], e["seq"]) for e in reads}
    report.flag("unconsumed", sorted(k for k in acked if k not in read_values))
    report.flag("client_crashes", history.of("crash"))
    report.totals.update(sent=history.count("send"), acked=len(acked),
                         failed=history.count("fail"), read=len(reads),
                         assign_read=len(assigned),
                         in_log=sum(len(r) for r in final.values()))


def check_txn(history: History, final: dict[int, list[tuple[int, bytes]]],
              output: dict[int, list[tuple[int, bytes]]], per_txn: int,
              report: Report) -> None:
    def txn_of(value: str) -> tuple[int, int]:
        producer, number, _ = value.split(":")
        return int(producer), int(number)

    committed = {(e["producer"], e["number"]) for e in history.of("txn-committed")}
    aborted = {(e["producer"], e["number"]) for e in history.of("txn-aborted")}
    final_values = [v.decode() for records in final.values() for _, v in records]
    live_values = [e["value"] for e in history.of("txn-read")]
    report.flag("aborted_read", sorted({v for v in final_values + live_values
                                        if txn_of(v) in aborted}))
    seen: dict[tuple[int, int], set[str]] = defaultdict(set)
    for value in final_values:
        seen[txn_of(value)].add(value)
    report.flag("partial", sorted((k, sorted(v)) for k, v in seen.items()
                                  if len(v) != per_txn))
    report.flag("committed_lost", sorted(k for k in committed if k not in seen))
    report.flag("txn_duplicated", sorted(v for v, n in Counter(final_values).items() if n > 1))
    outputs = Counter(v.decode().removeprefix("out:") for records in output.values()
                      for _, v in records)
    wrong = [(v, n) for v, n in outputs.items() if n != 1 or txn_of(v) not in seen]
    stalled = history.of("ctp-stalled")
    if not stalled:  # what a stalled processor did not copy is counted once, as the stall
        wrong += [(v, 0) for v in set(final_values) if v not in outputs]
    report.flag("ctp_wrong", sorted(wrong))
    report.flag("ctp_stalled", [e.get("threads", "")[-300:] for e in stalled])
    report.liveness["client_hangs"] = history.count("ctp-client-hang")
    report.totals.update(txns_committed=len(committed), txns_aborted=len(aborted),
                         txns_unknown=history.count("txn-unknown"),
                         txn_records=len(final_values), ctp_outputs=sum(outputs.values()))
