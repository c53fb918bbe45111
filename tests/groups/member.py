"""One consumer-group member, run as its own OS process by the group tests.

    python member.py --client confluent|kafka-python|aiokafka --bootstrap HOST:PORT
        --group G --topic T --assignor range|roundrobin|cooperative-sticky|uniform
        [--group-protocol classic|consumer] [--instance-id ID] [--session-timeout-ms 6000]
        [--commit-delay-ms 0] --out FILE

The member subscribes to one topic and appends to FILE (flushed after every write, so the lines
survive a SIGKILL):

    <partition> <offset> <value>          every message it processed
    started <time> <pid>
    assigned <time> <p,p,...|->           partitions the rebalance callback gave it
    revoked <time> <p,p,...|->            partitions it gave up (after committing them)
    lost <time> <p,p,...|->               partitions taken away without a chance to commit
    committed <time> <p:offset,...>       after a successful synchronous commit
    commitfail <time> <error>             a commit the broker (or client) refused
    error <time> <error>                  a consumer error
    closed <time>                         after a clean close (SIGTERM)

Processing a poll batch means writing its lines; the member then (after --commit-delay-ms, a
slow consumer's window of processed but uncommitted messages) commits synchronously the next
offset of every partition it processed, and commits again in the revocation callback before it
gives partitions up. SIGTERM (or SIGINT) ends the poll loop: a last commit, then a clean close.
Event times are ``time.time()``, comparable across the member processes of one test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
import time
from typing import Any

POLL_S = 0.2
# kafka-python 3.0.12 drops a rebalance whose SyncGroup answer arrives after poll()'s timer ran
# out (the member stays without partitions until its session expires); on a loaded machine a
# 200 ms poll hits that. poll() returns as soon as it has records, so a longer one costs nothing.
KAFKA_PYTHON_POLL_MS = 1000
MAX_BATCH = 100


class Output:
    """The append-only output file."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def event(self, kind: str, detail: str | None = None) -> None:
        line = f"{kind} {time.time():.6f}"
        self.write(f"{line} {detail}\n" if detail is not None else f"{line}\n")

    def parts_event(self, kind: str, partitions: list[int]) -> None:
        self.event(kind, ",".join(map(str, sorted(partitions))) or "-")

    def messages(self, batch: list[tuple[int, int, str]]) -> None:
        if batch:
            self.write("".join(f"{p} {o} {v}\n" for p, o, v in batch))


class State:
    """What this member owns and how far it processed and committed each partition."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.owned: set[int] = set()
        self.position: dict[int, int] = {}  # next offset to process, per partition processed
        self.committed: dict[int, int] = {}

    def assigned(self, partitions: list[int]) -> None:
        self.out.parts_event("assigned", partitions)
        self.owned |= set(partitions)

    def gone(self, kind: str, partitions: list[int]) -> None:
        self.out.parts_event(kind, partitions)
        for p in partitions:
            self.owned.discard(p)
            self.position.pop(p, None)
            self.committed.pop(p, None)

    def processed(self, batch: list[tuple[int, int, str]]) -> None:
        self.out.messages(batch)
        for p, o, _ in batch:
            self.position[p] = o + 1

    def to_commit(self, partitions: Any = None) -> dict[int, int]:
        """Processed offsets not committed yet (of ``partitions``, default all)."""
        wanted = self.position if partitions is None else partitions
        return {
            p: self.position[p] for p in wanted
            if p in self.position and self.position[p] != self.committed.get(p)
        }

    def commit_done(self, offsets: dict[int, int]) -> None:
        self.committed.update(offsets)
        self.out.event("committed", ",".join(f"{p}:{o}" for p, o in sorted(offsets.items())))


# --- confluent-kafka -------------------------------------------------------------------------


def run_confluent(args: argparse.Namespace, out: Output, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": 20000,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 2000,
    }
    if args.group_protocol == "consumer":
        # KIP-848: the broker assigns (group.remote.assignor) and sets the session timeout
        # and the heartbeat interval; partitions come and go incrementally
        conf["group.protocol"] = "consumer"
        if args.assignor in ("uniform", "range"):
            conf["group.remote.assignor"] = args.assignor
    else:
        conf.update({"session.timeout.ms": args.session_timeout_ms,
                     "heartbeat.interval.ms": args.heartbeat_ms,
                     "partition.assignment.strategy": args.assignor})
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    cooperative = args.assignor == "cooperative-sticky" or args.group_protocol == "consumer"
    consumer = Consumer(conf)
    state = State(out)

    def commit(partitions: Any = None) -> None:
        offsets = state.to_commit(partitions)
        if not offsets:
            return
        try:
            result = consumer.commit(
                offsets=[TopicPartition(args.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as exc:
            out.event("commitfail", str(exc.args[0]))
            return
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            out.event("commitfail", "; ".join(f"{tp.partition}: {tp.error}" for tp in failed))
            return
        state.commit_done(offsets)

    def on_assign(c: Any, tps: list[Any]) -> None:
        state.assigned([tp.partition for tp in tps])
        if cooperative:
            c.incremental_assign(tps)
        else:
            c.assign(tps)

    def on_revoke(c: Any, tps: list[Any]) -> None:
        partitions = [tp.partition for tp in tps]
        commit(partitions)
        state.gone("revoked", partitions)
        if cooperative:
            c.incremental_unassign(tps)
        else:
            c.unassign()

    def on_lost(c: Any, tps: list[Any]) -> None:
        state.gone("lost", [tp.partition for tp in tps])
        if cooperative:
            c.incremental_unassign(tps)
        else:
            c.unassign()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not stop.is_set():
        batch = []
        for msg in consumer.consume(MAX_BATCH, POLL_S):
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    out.event("error", str(err))
                continue
            batch.append((msg.partition(), msg.offset(), msg.value().decode()))
        if batch:
            state.processed(batch)
            time.sleep(args.commit_delay_ms / 1000)
            commit()
    commit()
    consumer.close()  # revokes (the callback commits) and leaves the group unless static


# --- kafka-python ----------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, out: Output, stop: threading.Event) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError

    assignor = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }[args.assignor]
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        group_instance_id=args.instance_id or None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        max_poll_interval_ms=20000,
        fetch_max_wait_ms=100,
        partition_assignment_strategy=[assignor],
        metadata_max_age_ms=2000,
    )
    state = State(out)

    def offsets_of(partitions: Any = None) -> tuple[dict[int, int], dict[Any, Any]]:
        offsets = state.to_commit(partitions)
        return offsets, {
            TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()
        }

    class Listener(AsyncConsumerRebalanceListener):
        # Runs on kafka-python's IO thread, inside the user thread's poll(): a blocking
        # commit() would deadlock there, so it awaits commit_async's future instead.
        async def on_partitions_revoked(self, revoked: Any) -> None:
            partitions = [tp.partition for tp in revoked]
            offsets, request = offsets_of(partitions)
            if offsets:
                try:
                    await consumer.commit_async(request)
                    state.commit_done(offsets)
                except KafkaError as exc:
                    out.event("commitfail", repr(exc))
            state.gone("revoked", partitions)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            state.assigned([tp.partition for tp in assigned])

        async def on_partitions_lost(self, lost: Any) -> None:
            state.gone("lost", [tp.partition for tp in lost])

    def commit() -> None:
        offsets, request = offsets_of()
        if not offsets:
            return
        try:
            consumer.commit(request)
        except KafkaError as exc:
            out.event("commitfail", repr(exc))
            return
        state.commit_done(offsets)

    consumer.subscribe([args.topic], listener=Listener())
    while not stop.is_set():
        polled = consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_MS, max_records=MAX_BATCH)
        batch = [
            (r.partition, r.offset, r.value.decode())
            for records in polled.values() for r in records
        ]
        if batch:
            state.processed(batch)
            time.sleep(args.commit_delay_ms / 1000)
            commit()
    commit()
    consumer.close(autocommit=False)


# --- aiokafka --------------------------------------------------------------------------------


async def run_aiokafka(args: argparse.Namespace, out: Output) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    assignor = {"range": RangePartitionAssignor,
                "roundrobin": RoundRobinPartitionAssignor}[args.assignor]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        group_instance_id=args.instance_id or None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        max_poll_interval_ms=20000,
        rebalance_timeout_ms=20000,
        fetch_max_wait_ms=100,
        partition_assignment_strategy=(assignor,),
        metadata_max_age_ms=2000,
    )
    state = State(out)

    async def commit(partitions: Any = None) -> None:
        offsets = state.to_commit(partitions)
        if not offsets:
            return
        try:
            await consumer.commit({TopicPartition(args.topic, p): o for p, o in offsets.items()})
        except KafkaError as exc:  # CommitFailedError, IllegalStateError, ...
            out.event("commitfail", repr(exc))
            return
        state.commit_done(offsets)

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            partitions = [tp.partition for tp in revoked]
            await commit(partitions)
            state.gone("revoked", partitions)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            state.assigned([tp.partition for tp in assigned])

    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    try:
        while not stop.is_set():
            polled = await consumer.getmany(timeout_ms=int(POLL_S * 1000),
                                            max_records=MAX_BATCH)
            # No await between taking the batch and writing it: the coordinator task (and
            # with it the revocation callback) cannot run in the middle of processing.
            batch = [
                (r.partition, r.offset, r.value.decode())
                for records in polled.values() for r in records
            ]
            if batch:
                state.processed(batch)
                await asyncio.sleep(args.commit_delay_ms / 1000)
                await commit()
        await commit()
    finally:
        await consumer.stop()


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", required=True,
                        choices=["confluent", "kafka-python", "aiokafka"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic",
                        help="confluent only: consumer is KIP-848's protocol")
    parser.add_argument("--instance-id", default="")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--commit-delay-ms", type=int, default=0,
                        help="wait between processing a batch and committing it")
    parser.add_argument("--name", default="member")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    out = Output(args.out)
    out.event("started", str(os.getpid()))
    if args.client == "aiokafka":
        asyncio.run(run_aiokafka(args, out))
    else:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        run = run_confluent if args.client == "confluent" else run_kafka_python
        run(args, out, stop)
    out.event("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
