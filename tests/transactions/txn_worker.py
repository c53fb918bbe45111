"""One exactly-once consume-transform-produce worker, run as its own OS process by
test_txn_kill.py (which SIGKILLs it at random points and starts it again).

    python txn_worker.py --bootstrap HOST:PORT --input IN --output OUT --group G
        --transactional-id ID [--session-timeout-ms 1500] [--batch 100] [--work-ms 0]
        [--idle-s 3] [--lifetime-s 60]

A consumer in group G (read_committed, no auto commit, earliest) subscribed to IN and a
transactional producer with a fixed transactional.id. init_transactions() runs before the
consumer joins: it fences the previous incarnation of this id and aborts its open transaction
(and with it that transaction's input offsets), so the consumer then starts from the last
committed offsets. Each loop: consume up to --batch messages; begin; produce every "in-<i>" as
"out-<i>" (same key) to OUT; send_offsets_to_transaction(the consumer's positions, its group
metadata); commit. Half of --work-ms (the transform's work, where most kills land) is spent
before sending the offsets and half after, so a kill leaves an open transaction with or
without pending offsets. Rebalance callbacks only run inside consume(), between transactions.

An abortable error aborts the transaction and rewinds every assigned partition to its committed
offset. The worker exits 0 once it has seen nothing for --idle-s while every partition it owns
is committed up to its end, 2 at --lifetime-s, 3 on a fatal error (fenced, ...). One line per
event on stdout, flushed, so the test can read it after a SIGKILL:

    started <pid> | ready | assigned <p,..|-> | revoked <p,..|-> | lost <p,..|->
    begin <n> <p:first-last,..> | offsets <p:o,..> | committed <n> | aborted <n> <why>
    dropped <count> <why> | retry <why> | idle-exit | deadline-exit | fatal <why>
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

POLL_S = 0.2
TXN_TIMEOUT_S = 10.0  # client-side timeout of each transactional call


def say(*words: Any) -> None:
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def parts(tps: list[TopicPartition]) -> str:
    return ",".join(str(p) for p in sorted(tp.partition for tp in tps)) or "-"


def transform(value: bytes) -> bytes:
    text = value.decode()
    if not text.startswith("in-"):
        raise ValueError(f"unexpected input value {text!r}")
    return ("out-" + text[3:]).encode()


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = time.monotonic() + args.lifetime_s
        self.txns = 0
        self.producer = Producer({
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "linger.ms": 5,
            "message.timeout.ms": args.transaction_timeout_ms,
        })
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": args.transactional_id,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 5),
            "max.poll.interval.ms": 20000,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 2000,
        })

    # --- rebalance callbacks (run inside consume(), never inside a transaction) -------------

    def on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        say("assigned", parts(tps))

    def on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        say("revoked", parts(tps))

    def on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        say("lost", parts(tps))

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        say("started", os.getpid())
        self.producer.init_transactions(TXN_TIMEOUT_S * 3)
        say("ready")
        self.consumer.subscribe([self.args.input], on_assign=self.on_assign,
                                on_revoke=self.on_revoke, on_lost=self.on_lost)
        last_input = time.monotonic()
        try:
            while True:
                if time.monotonic() > self.deadline:
                    say("deadline-exit")
                    return 2
                batch = self.poll_batch()
                if batch:
                    last_input = time.monotonic()
                    self.process(batch)
                elif time.monotonic() - last_input > self.args.idle_s and self.caught_up():
                    say("idle-exit")
                    return 0
        finally:
            self.consumer.close()

    def poll_batch(self) -> list[Message]:
        batch = []
        for msg in self.consumer.consume(self.args.batch, POLL_S):
            err = msg.error()
            if err is None:
                batch.append(msg)
            elif err.code() != KafkaError._PARTITION_EOF:
                say("consumer-error", err)
                if err.fatal():
                    raise KafkaException(err)
        # librdkafka purges messages of partitions revoked during the call; check anyway.
        owned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        kept = [m for m in batch if (m.topic(), m.partition()) in owned]
        if len(kept) != len(batch):
            say("dropped", len(batch) - len(kept), "not-owned")
        return kept

    def process(self, batch: list[Message]) -> None:
        self.txns += 1
        n = self.txns
        ranges: dict[int, list[int]] = {}
        for m in batch:
            ranges.setdefault(m.partition(), []).append(m.offset())
        say("begin", n, ",".join(f"{p}:{min(o)}-{max(o)}" for p, o in sorted(ranges.items())))
        try:
            self.producer.begin_transaction()
            for m in batch:
                self.producer.produce(self.args.output, key=m.key(),
                                      value=transform(m.value()))
                self.producer.poll(0)
            time.sleep(self.args.work_ms / 2000)
            positions = [tp for tp in self.consumer.position(self.consumer.assignment())
                         if tp.offset >= 0]
            say("offsets", ",".join(f"{tp.partition}:{tp.offset}" for tp in positions))
            self.producer.send_offsets_to_transaction(
                positions, self.consumer.consumer_group_metadata(), TXN_TIMEOUT_S)
            time.sleep(self.args.work_ms / 2000)
            self.commit()
            say("committed", n)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() or not err.txn_requires_abort():
                say("fatal", err)
                raise
            say("aborted", n, err)
            self.producer.abort_transaction(TXN_TIMEOUT_S)
            self.rewind()

    def commit(self) -> None:
        deadline = time.monotonic() + 3 * TXN_TIMEOUT_S
        while True:
            try:
                self.producer.commit_transaction(TXN_TIMEOUT_S)
                return
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    say("retry", err)
                    continue
                raise

    def rewind(self) -> None:
        """Every assigned partition back to its committed offset (the aborted batch again)."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        for tp in self.consumer.committed(assignment, TXN_TIMEOUT_S):
            if tp.error is not None:
                raise KafkaException(tp.error)
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            say("rewound", f"{tp.partition}:{offset}")

    def caught_up(self) -> bool:
        """Whether this member owns partitions and all of them are committed to their end."""
        assignment = self.consumer.assignment()
        if not assignment:
            return False
        try:
            committed = self.consumer.committed(assignment, 5)
            for tp in committed:
                marks = self.consumer.get_watermark_offsets(tp, 5)
                if tp.error is not None or marks is None or tp.offset < marks[1]:
                    return False
        except KafkaException as exc:
            say("retry", exc.args[0])
            return False
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=1500)
    parser.add_argument("--transaction-timeout-ms", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--work-ms", type=int, default=0)
    parser.add_argument("--idle-s", type=float, default=3.0)
    parser.add_argument("--lifetime-s", type=float, default=60.0)
    args = parser.parse_args()
    try:
        return Worker(args).run()
    except KafkaException as exc:
        say("fatal", exc.args[0])
        return 3


if __name__ == "__main__":
    sys.exit(main())
