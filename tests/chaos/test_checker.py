"""The checks themselves, on made-up histories with one anomaly each: each is seen, counted
once, and a clean history passes."""

from __future__ import annotations

from .checker import Report, check_queue, check_txn
from .workloads import History


def _queue(acks: list[tuple[int, int, int, int]], reads: list[tuple[int, int, int, int]] = (),
           committed: list[tuple[int, int]] = ()) -> History:
    history = History()
    for producer, seq, partition, offset in acks:
        history.add("send", producer=producer, seq=seq, partition=partition)
        history.add("ack", producer=producer, seq=seq, partition=partition, offset=offset)
    for producer, seq, partition, offset in reads:
        history.add("read", consumer=0, partition=partition, offset=offset, producer=producer,
                    seq=seq)
    for partition, offset in committed:
        history.add("committed", partition=partition, offset=offset)
    return history


ACKS = [(0, 0, 0, 0), (0, 1, 0, 1), (1, 0, 0, 2), (0, 2, 0, 3)]
LOG = {0: [(0, b"0:0"), (1, b"0:1"), (2, b"1:0"), (3, b"0:2")]}
READS = [(p, s, part, o) for p, s, part, o in ACKS]


def _check(history: History, log: dict[int, list[tuple[int, bytes]]]) -> Report:
    report = Report()
    check_queue(history, log, report)
    return report


def test_a_clean_queue_history_passes() -> None:
    report = _check(_queue(ACKS, READS, [(0, 2), (0, 4)]), LOG)
    assert report.ok, report.problems()
    assert report.totals["acked"] == 4


def test_queue_anomalies_are_each_seen() -> None:
    lost = _check(_queue(ACKS, READS), {0: LOG[0][:3]})
    assert lost.counts["lost"] == 1 and lost.examples["lost"] == [(0, 2)]
    moved = _check(_queue(ACKS, READS), {0: [*LOG[0][:3], (4, b"0:2")]})
    assert moved.counts["moved"] == 1
    duplicated = _check(_queue(ACKS, READS), {0: [*LOG[0], (4, b"0:2")]})
    assert duplicated.counts["duplicated"] == 1
    reordered = _check(_queue(ACKS, READS), {0: [(0, b"0:1"), (1, b"0:0"), (2, b"1:0"),
                                                 (3, b"0:2")]})
    assert reordered.counts["reordered"] == 1
    inconsistent = _check(_queue(ACKS, [*READS, (1, 0, 0, 3)]), LOG)
    assert inconsistent.counts["inconsistent_reads"] == 1
    regression = _check(_queue(ACKS, READS, [(0, 3), (0, 1)]), LOG)
    assert regression.counts["commit_regressions"] == 1
    unconsumed = _check(_queue(ACKS, READS[:3]), LOG)
    assert unconsumed.counts["unconsumed"] == 1


def _txns(committed: list[tuple[int, int]], aborted: list[tuple[int, int]]) -> History:
    history = History()
    for producer, number in committed:
        history.add("txn-committed", producer=producer, number=number)
    for producer, number in aborted:
        history.add("txn-aborted", producer=producer, number=number)
    return history


def _records(*values: str) -> dict[int, list[tuple[int, bytes]]]:
    return {0: [(i, v.encode()) for i, v in enumerate(values)]}


def _check_txn(history: History, log: dict[int, list[tuple[int, bytes]]],
               out: dict[int, list[tuple[int, bytes]]]) -> Report:
    report = Report()
    check_txn(history, log, out, 2, report)
    return report


def test_a_clean_transaction_history_passes() -> None:
    report = _check_txn(_txns([(0, 0), (0, 2)], [(0, 1)]),
                        _records("0:0:0", "0:0:1", "0:2:0", "0:2:1"),
                        _records("out:0:0:0", "out:0:0:1", "out:0:2:0", "out:0:2:1"))
    assert report.ok, report.problems()


def test_transaction_anomalies_are_each_seen() -> None:
    history = _txns([(0, 0), (0, 2)], [(0, 1)])
    aborted = _check_txn(history, _records("0:0:0", "0:0:1", "0:1:0", "0:1:1"),
                         _records("out:0:0:0", "out:0:0:1", "out:0:1:0", "out:0:1:1"))
    assert aborted.counts["aborted_read"] == 2
    partial = _check_txn(history, _records("0:0:0", "0:0:1", "0:2:0"),
                         _records("out:0:0:0", "out:0:0:1", "out:0:2:0"))
    assert partial.counts["partial"] == 1
    assert partial.counts["committed_lost"] == 0
    lost = _check_txn(history, _records("0:0:0", "0:0:1"), _records("out:0:0:0", "out:0:0:1"))
    assert lost.counts["committed_lost"] == 1
    twice = _check_txn(history, _records("0:0:0", "0:0:1", "0:0:1", "0:2:0", "0:2:1"),
                       _records("out:0:0:0", "out:0:0:1", "out:0:2:0", "out:0:2:1"))
    assert twice.counts["txn_duplicated"] == 1
    copied_twice = _check_txn(history, _records("0:0:0", "0:0:1", "0:2:0", "0:2:1"),
                              _records("out:0:0:0", "out:0:0:1", "out:0:0:1", "out:0:2:0",
                                       "out:0:2:1"))
    assert copied_twice.counts["ctp_wrong"] == 1
    not_copied = _check_txn(history, _records("0:0:0", "0:0:1", "0:2:0", "0:2:1"),
                            _records("out:0:0:0", "out:0:0:1", "out:0:2:0"))
    assert not_copied.counts["ctp_wrong"] == 1


def test_a_stalled_processor_fails_and_a_client_hang_is_reported_beside() -> None:
    log = _records("0:0:0", "0:0:1", "0:2:0", "0:2:1")
    stalled = _txns([(0, 0), (0, 2)], [(0, 1)])
    stalled.add("ctp-stalled", threads="... in send_offsets_to_transaction")
    report = _check_txn(stalled, log, _records("out:0:0:0", "out:0:0:1"))
    assert not report.ok
    assert report.counts["ctp_stalled"] == 1
    assert report.counts["ctp_wrong"] == 0  # the missing copies are the stall, counted once
    hung = _txns([(0, 0), (0, 2)], [(0, 1)])
    hung.add("ctp-client-hang", seconds=90.0, known="confluentinc/librdkafka#5511")
    report = _check_txn(hung, log, _records("out:0:0:0", "out:0:0:1", "out:0:2:0",
                                            "out:0:2:1"))
    assert report.ok, report.problems()
    assert report.liveness["client_hangs"] == 1


def test_assign_mode_reads_are_checked() -> None:
    def reads(*at: tuple[int, int]) -> History:
        history = _queue(ACKS, READS)
        values = dict(((o, (p, s_)) for p, s_, _, o in ACKS))
        for partition, offset in at:
            producer, seq = values.get(offset, (9, 9))
            history.add("assign-read", reader=0, partition=partition, offset=offset,
                        producer=producer, seq=seq)
        return history

    clean = _check(reads((0, 0), (0, 1), (0, 2), (0, 3)), LOG)
    assert clean.ok, clean.problems()
    assert clean.totals["assign_read"] == 4
    backwards = _check(reads((0, 0), (0, 1), (0, 1), (0, 2), (0, 3)), LOG)
    assert backwards.counts["nonmonotonic_reads"] == 1
    skip = _check(reads((0, 0), (0, 2), (0, 3)), LOG)
    assert skip.counts["skipped_reads"] == 1
    wrong = _check(reads((0, 0), (0, 5)), LOG)
    assert wrong.counts["inconsistent_reads"] == 1
