"""What compaction may remove of transactions (samsa/storage/cleaner_txns.py), on a Log in a
temporary directory with the cleaner called directly and a clock the test moves:

* aborted records are removed and never shadow committed values of their keys;
* markers stay while their transaction has data, then get a delete horizon, then go;
* an abort marker's .txnindex entry lives exactly as long as its data;
* nothing at or past the first unstable offset (an open transaction) is cleaned;
* a producer's last marker stays (it carries the epoch that fences zombies).
"""

from __future__ import annotations

from pathlib import Path

from samsa.config import LogConfig
from samsa.records.batch import Attr, iter_headers
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.storage.cleaner import OffsetMap, clean_log, cleanable
from samsa.storage.log import Log

NOW = 1_700_000_000_000
RETENTION_MS = 1000
PID_A, PID_B = 7, 8


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def new_log(tmp_path: Path, clock: Clock) -> Log:
    config = LogConfig.from_props({"cleanup.policy": "compact",
                                   "delete.retention.ms": str(RETENTION_MS)})
    return Log(tmp_path / "t-0", config, clock=clock)


class Writer:
    """Transactional and plain keyed writes with correct sequences per producer."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, *pairs: tuple[str, str], epoch: int = 0) -> None:
        seq = self.seq.get(pid, 0)
        records = [RecordInput(v.encode(), k.encode()) for k, v in pairs]
        self.log.append(encode_batch(records, timestamp=NOW, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=seq,
                                     transactional=True))
        self.seq[pid] = seq + len(records)

    def plain(self, *pairs: tuple[str, str]) -> None:
        records = [RecordInput(v.encode(), k.encode()) for k, v in pairs]
        self.log.append(encode_batch(records, timestamp=NOW))

    def end(self, pid: int, commit: bool, epoch: int = 0) -> None:
        self.log.append_marker(pid, epoch, commit, 0)


def clean(log: Log, clock: Clock) -> None:
    log.roll()
    state = cleanable(log, None, clock.now)
    clean_log(log, state.first_dirty, state.first_uncleanable, OffsetMap(10_000),
              now_ms=clock.now)


def contents(log: Log) -> tuple[list[tuple[int, str, str]], list[tuple[int, int, bool]]]:
    """(offset, key, value) of every data record; (offset, pid, has horizon) of every
    control batch."""
    data = log.read_batches(log.log_start_offset)
    records, markers = [], []
    for pos, header in iter_headers(data):
        batch = data[pos : pos + header.size]
        if header.is_control:
            markers.append((header.base_offset, header.producer_id,
                            bool(header.attributes & Attr.DELETE_HORIZON)))
            continue
        for r in decode_records(batch):
            records.append((r.offset, (r.key or b"").decode(), (r.value or b"").decode()))
    return records, markers


def latest(records: list[tuple[int, str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, key, value in records:
        out[key] = value
    return out


def aborted_entries(log: Log) -> list[tuple[int, int, int]]:
    return [(t.producer_id, t.first_offset, t.last_offset)
            for s in log.segments for t in s.txn_index.entries]


def test_aborted_values_never_shadow_committed_ones(tmp_path: Path) -> None:
    """An aborted write of a key after its committed value: the committed value survives and
    the aborted records are gone after one cleaning."""
    clock = Clock()
    log = new_log(tmp_path, clock)
    w = Writer(log)
    w.txn(PID_A, ("k1", "committed-1"), ("k2", "committed-2"))
    w.end(PID_A, commit=True)
    w.txn(PID_A, ("k1", "aborted-1"), ("k3", "aborted-3"))
    w.end(PID_A, commit=False)
    w.plain(("k4", "plain-4"))
    before, _ = contents(log)
    assert {v for _, _, v in before} >= {"aborted-1", "aborted-3"}
    clean(log, clock)
    after, markers = contents(log)
    assert latest(after) == {"k1": "committed-1", "k2": "committed-2", "k4": "plain-4"}
    assert not any(v.startswith("aborted") for _, _, v in after)
    # the abort marker stays this pass (its data was seen), with its index entry
    assert [m[0] for m in markers] == [2, 5]
    assert aborted_entries(log) == [(PID_A, 3, 5)]


def test_markers_get_a_horizon_then_go(tmp_path: Path) -> None:
    """Once no batch of a transaction is left its markers are stamped with a delete horizon,
    and a cleaning after the horizon removes them and their index entries; the producer's
    last marker stays."""
    clock = Clock()
    log = new_log(tmp_path, clock)
    w = Writer(log)
    w.txn(PID_A, ("k1", "a1"))
    w.end(PID_A, commit=True)                 # offset 1: superseded below
    w.txn(PID_A, ("k2", "aborted"))
    w.end(PID_A, commit=False)                # offset 3
    w.txn(PID_B, ("k1", "b1"))                # supersedes k1=a1
    w.end(PID_B, commit=True)                 # offset 5: B's last word
    w.txn(PID_A, ("k9", "a9"))
    w.end(PID_A, commit=True)                 # offset 7: A's last word
    clean(log, clock)                         # k1=a1 and the aborted data go
    _, markers = contents(log)
    assert [(o, h) for o, _, h in markers] == [(1, False), (3, False), (5, False), (7, False)]
    clean(log, clock)                         # nothing left of txns ending at 1 and 3
    _, markers = contents(log)
    assert [(o, h) for o, _, h in markers] == [(1, True), (3, True), (5, False), (7, False)]
    assert aborted_entries(log) == []
    clean(log, clock)                         # horizon not passed yet: still there
    assert [o for o, _, _ in contents(log)[1]] == [1, 3, 5, 7]
    clock.now += RETENTION_MS + 1
    clean(log, clock)
    records, markers = contents(log)
    assert [o for o, _, _ in markers] == [5, 7]
    assert latest(records) == {"k1": "b1", "k9": "a9"}


def test_open_transaction_is_not_cleaned(tmp_path: Path) -> None:
    """Cleaning stops at the first unstable offset: an open transaction's records stay, even
    when later plain writes supersede their keys, until it ends."""
    clock = Clock()
    log = new_log(tmp_path, clock)
    w = Writer(log)
    w.plain(("k1", "old"))
    w.txn(PID_A, ("k1", "open"))              # offset 1, still open
    w.plain(("k1", "newest"))
    log.roll()
    state = cleanable(log, None, clock.now)
    assert state.first_uncleanable == 1
    clean(log, clock)
    values = [v for _, _, v in contents(log)[0]]
    assert "open" in values
    w.end(PID_A, commit=False)
    clean(log, clock)
    records, _ = contents(log)
    assert latest(records) == {"k1": "newest"}
    assert "open" not in [v for _, _, v in records]


def test_cleaned_log_reopens_with_the_same_transactions(tmp_path: Path) -> None:
    """After cleaning and a restart the last stable offset and the aborted-transaction
    entries read back the same."""
    clock = Clock()
    log = new_log(tmp_path, clock)
    w = Writer(log)
    w.txn(PID_A, ("k1", "x"))
    w.end(PID_A, commit=False)
    w.txn(PID_B, ("k2", "y"))
    clean(log, clock)
    entries = aborted_entries(log)
    unstable = log.first_unstable_offset
    assert unstable == 2 and entries == [(PID_A, 0, 1)]
    log.close()
    reopened = Log(tmp_path / "t-0", log.config, clock=clock, had_clean_shutdown=True,
                   recovery_point=log.log_end_offset)
    assert reopened.first_unstable_offset == unstable
    assert aborted_entries(reopened) == entries
    reopened.close()
