"""AlterReplicaLogDirs (34): a replica moved between the log directories of one broker, asked
by kafka-python's KafkaAdminClient while an idempotent confluent-kafka producer keeps writing.
A consumer then reads every acknowledged record exactly once and nothing twice; DescribeLogDirs
shows the copy while it is made (``is_future_key``) and the replica in its new directory after;
the checkpoint files of both directories follow; a restart finds the data there. Kafka's errors
for what cannot be moved, and what a stop at each point of a move leaves is sorted out at the
next start (the files are made as a crash would leave them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.errors import ErrorCode
from samsa.storage.checkpoint import (
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    read_offsets,
)
from samsa.tools.zookeeper_server import free_port

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartitionReplica
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.timeout(180)

SEGMENT_BYTES = 256 * 1024  # many segments: the inactive ones are copied with their indexes
CHECKPOINTS = (RECOVERY_POINT_FILE, LOG_START_OFFSET_FILE, HIGH_WATERMARK_FILE)


# --- helpers -------------------------------------------------------------------------------------


def two_dirs(root: Path, *more: Path, **config: Any) -> samsa.Broker:
    dirs = [root / "a", root / "b", *more]
    return samsa.Broker(root, config={"log.dirs": ",".join(map(str, dirs)),
                                      "replica.high.watermark.checkpoint.interval.ms": 200,
                                      **config})


def create_topic(broker: samsa.Broker, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config={
        "segment.bytes": str(SEGMENT_BYTES)})])[name].result(30)


def producer_for(broker: samsa.Broker) -> Producer:
    return Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 2, "batch.size": 16000})


def produce(broker: samsa.Broker, topic: str, values: list[bytes]) -> None:
    producer = producer_for(broker)
    failed: list[Any] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _m: err and failed.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed


def consume(broker: samsa.Broker, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition 0, from its start to its end."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    try:
        def read() -> bool:
            msg = consumer.poll(0.5)
            if msg is None:
                return False
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return True
                raise KafkaException(msg.error())
            out.append((msg.offset(), msg.value()))
            return False

        wait_for(read, timeout=60, interval=0, what=f"the end of {topic}-0")
    finally:
        consumer.close()
    return out


def admin_for(broker: samsa.Broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                            request_timeout_ms=10000, bootstrap_timeout_ms=10000)


def alter(admin: KafkaAdminClient, broker: samsa.Broker, moves: dict[tuple[str, int], str]
          ) -> dict[tuple[str, int], int]:
    me = broker.server.broker_id
    answer = admin.alter_replica_log_dirs({TopicPartitionReplica(t, p, me): str(d)
                                          for (t, p), d in moves.items()})
    return {(r.topic, r.partition): error.errno for r, error in answer.items()}


def located(admin: KafkaAdminClient, broker: samsa.Broker, topic: str, partition: int = 0
            ) -> set[tuple[str, bool]]:
    """(log dir, is future) of every listing of the partition in DescribeLogDirs."""
    [answer] = admin.describe_log_dirs(brokers=[broker.server.broker_id])
    return {(d["log_dir"], p["is_future_key"]) for d in answer["log_dirs"]
            for t in d["topics"] if t["name"] == topic
            for p in t["partitions"] if p["partition_index"] == partition}


def partition_dirs(directory: Path, topic: str) -> list[str]:
    """The names of the directories of ``topic``'s partition 0 in a log dir (moved ones too)."""
    return sorted(p.name for p in directory.iterdir()
                  if p.is_dir() and p.name.startswith(f"{topic}-0"))


def where(broker: samsa.Broker, topic: str) -> Path:
    found = broker.server.log_manager.dir_of((topic, 0))
    assert found is not None
    return found


def other(root: Path, directory: Path) -> Path:
    return root / ("b" if directory.name == "a" else "a")


# --- the move ------------------------------------------------------------------------------------


def test_a_replica_moves_while_a_producer_writes_and_nothing_is_lost_or_doubled(
        tmp_path: Path) -> None:
    with two_dirs(tmp_path) as broker:
        create_topic(broker, "moving")
        produce(broker, "moving", [b"before-%d-" % i + b"x" * 100 for i in range(20000)])
        source = where(broker, "moving")
        dest = other(tmp_path, source)

        acked: list[bytes] = []
        failed: list[Any] = []
        stop = threading.Event()

        def keep_producing() -> None:
            producer = producer_for(broker)

            def done(err: Any, msg: Any) -> None:
                (failed if err else acked).append(err or msg.value())

            i = 0
            while not stop.is_set():
                producer.produce("moving", b"during-%d" % i, on_delivery=done)
                producer.poll(0)
                i += 1
                if i % 200 == 0:
                    producer.flush(10)  # bounded: the broker keeps up, the test keeps going
            assert producer.flush(60) == 0

        writer = threading.Thread(target=keep_producing)
        writer.start()
        admin = admin_for(broker)
        try:
            wait_for(lambda: len(acked) > 1000, what="the producer to be under way")
            assert alter(admin, broker, {("moving", 0): dest}) == {("moving", 0): 0}
            wait_for(lambda: located(admin, broker, "moving") == {(str(dest), False)},
                     what="the replica in its new directory")
            moved_at = len(acked)
            wait_for(lambda: len(acked) > moved_at + 1000, what="appends after the move")
        finally:
            stop.set()
            writer.join(90)
        assert not failed, failed[:3]

        records = consume(broker, "moving")
        values = [v for _, v in records]
        assert [o for o, _ in records] == list(range(len(records)))
        assert len(set(values)) == len(values), "a record was written twice"
        assert values[:20000] == [b"before-%d-" % i + b"x" * 100 for i in range(20000)]
        assert set(acked) <= set(values[20000:]), "an acknowledged record was lost"

        # the replaced directory goes; the checkpoints of both directories follow
        wait_for(lambda: partition_dirs(source, "moving") == [], what="the old replica deleted")
        assert partition_dirs(dest, "moving") == ["moving-0"]
        for name in CHECKPOINTS:
            wait_for(lambda name=name: ("moving", 0) in read_offsets(dest / name),
                     what=f"{name} in {dest}")
            assert ("moving", 0) not in read_offsets(source / name), name
        wait_for(lambda: read_offsets(dest / HIGH_WATERMARK_FILE)[("moving", 0)] == len(records),
                 what="the high watermark checkpointed")
        admin.close()
    for name in CHECKPOINTS:  # after a clean stop too
        assert read_offsets(dest / name)[("moving", 0)] == (0 if name == LOG_START_OFFSET_FILE
                                                             else len(records)), name
        assert ("moving", 0) not in read_offsets(source / name), name

    with two_dirs(tmp_path) as again:  # the data is where it moved, and all of it
        admin = admin_for(again)
        try:
            assert located(admin, again, "moving") == {(str(dest), False)}
        finally:
            admin.close()
        assert consume(again, "moving") == records
        produce(again, "moving", [b"after restart"])
        assert consume(again, "moving")[-1] == (len(records), b"after restart")


def test_describe_log_dirs_shows_the_copy_while_it_is_made(tmp_path: Path) -> None:
    """AlterReplicaLogDirs and DescribeLogDirs sent together: the answer to the second sees
    the copy of a 12 MB log being made (the first step copies in a worker thread)."""
    with two_dirs(tmp_path) as broker:
        create_topic(broker, "big")
        produce(broker, "big", [b"%d-" % i + b"y" * 600 for i in range(20000)])
        source = where(broker, "big")
        dest = other(tmp_path, source)
        me = broker.server.broker_id
        with FrameClient(("127.0.0.1", broker.port)) as client:
            client.send(34, 2, {"dirs": [
                {"path": str(dest), "topics": [{"name": "big", "partitions": [0]}]}]})
            client.send(35, 4, {"topics": [{"topic": "big", "partitions": [0]}]})
            _, altered = client.recv(34, 2)
            _, described = client.recv(35, 4)
        assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in altered.results] == [("big", [(0, 0)])]
        listed = {(d.log_dir, p.is_future_key): p for d in described.results
                  for t in d.topics for p in t.partitions}
        assert set(listed) == {(str(source), False), (str(dest), True)}
        assert listed[(str(dest), True)].offset_lag > 0
        assert listed[(str(source), False)].offset_lag == 0
        admin = admin_for(broker)
        try:
            wait_for(lambda: located(admin, broker, "big") == {(str(dest), False)},
                     what="the move to finish")
        finally:
            admin.close()
        assert me == broker.server.broker_id
        assert len(consume(broker, "big")) == 20000


def test_a_move_is_held_to_the_log_dirs_throttle(tmp_path: Path) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second (a dynamic broker config, as
    kafka-reassign-partitions --replica-alter-log-dirs-throttle sets it): 3 MB moved at
    300 KB/s takes about 10 s (Kafka's rate over the elapsed time), so well over 5 s."""
    with two_dirs(tmp_path) as broker:
        create_topic(broker, "held")
        values = [b"%d-" % i + b"z" * 1000 for i in range(3000)]
        produce(broker, "held", values)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(ResourceType.BROKER, str(broker.server.broker_id),
                                  incremental_configs=[ConfigEntry(
                                      "replica.alter.log.dirs.io.max.bytes.per.second",
                                      "300000",
                                      incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        source = where(broker, "held")
        dest = other(tmp_path, source)
        kafka_admin = admin_for(broker)
        try:
            started = time.monotonic()
            assert alter(kafka_admin, broker, {("held", 0): str(dest)}) == {("held", 0): 0}
            wait_for(lambda: located(kafka_admin, broker, "held") == {(str(dest), False)},
                     timeout=120, what="the throttled move to finish")
            took = time.monotonic() - started
        finally:
            kafka_admin.close()
        assert took > 5.0, f"3 MB moved in {took:.1f} s despite a 300 KB/s throttle"
        assert [v for _, v in consume(broker, "held")] == values


# --- what cannot be moved ----------------------------------------------------------------------


def test_kafkas_errors_for_what_cannot_be_moved(tmp_path: Path) -> None:
    with two_dirs(tmp_path) as broker:
        create_topic(broker, "t")
        long_name = "l" * 220  # its future directory's name would pass 255 characters
        create_topic(broker, long_name)
        produce(broker, "t", [b"v"])
        here = where(broker, "t")
        there = other(tmp_path, here)
        admin = admin_for(broker)
        try:
            assert alter(admin, broker, {("t", 0): tmp_path / "nowhere"}) == {
                ("t", 0): ErrorCode.log_dir_not_found}
            # Kafka compares the path as the broker names its directories
            assert alter(admin, broker, {("t", 0): f"{there}/"}) == {
                ("t", 0): ErrorCode.log_dir_not_found}
            assert alter(admin, broker, {("no-such-topic", 0): there, ("t", 5): there}) == {
                ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
                ("t", 5): ErrorCode.unknown_topic_or_partition}
            assert alter(admin, broker, {(long_name, 0): there}) == {
                (long_name, 0): ErrorCode.invalid_topic_exception}
            # where it is already: nothing to do
            assert alter(admin, broker, {("t", 0): here}) == {("t", 0): 0}
            assert located(admin, broker, "t") == {(str(here), False)}
            assert not broker.server.log_manager.futures
        finally:
            admin.close()
        assert partition_dirs(here, "t") == ["t-0"] and partition_dirs(there, "t") == []


def test_a_partition_named_twice_goes_where_it_was_named_last(tmp_path: Path) -> None:
    """Kafka keeps the request's partitions in a map: the last directory named wins."""
    with two_dirs(tmp_path) as broker:
        create_topic(broker, "twice")
        produce(broker, "twice", [b"v%d" % i for i in range(10)])
        here = where(broker, "twice")
        there = other(tmp_path, here)
        with FrameClient(("127.0.0.1", broker.port)) as client:
            answer = client.request(34, 1, {"dirs": [
                {"path": str(there), "topics": [{"name": "twice", "partitions": [0]}]},
                {"path": str(here), "topics": [{"name": "twice", "partitions": [0]}]},
                {"path": str(there), "topics": [{"name": "twice", "partitions": [0]}]}]})
        assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in answer.results] == [("twice", [(0, 0)])]
        wait_for(lambda: where(broker, "twice") == there and not broker.server.log_manager
                 .futures, what="the move")
        assert [v for _, v in consume(broker, "twice")] == [b"v%d" % i for i in range(10)]


def test_no_move_while_a_log_dir_is_offline(tmp_path: Path) -> None:
    """KAFKA_STORAGE_ERROR for an offline destination, and (Kafka's rule) for any move while a
    directory is offline: the replica's copy could be in it."""
    broken = tmp_path / "broken"
    broken.write_text("a file where a log directory should be\n")
    with two_dirs(tmp_path, broken) as broker:
        create_topic(broker, "t")
        here = where(broker, "t")
        admin = admin_for(broker)
        try:
            assert alter(admin, broker, {("t", 0): broken}) == {
                ("t", 0): ErrorCode.kafka_storage_error}
            assert alter(admin, broker, {("t", 0): other(tmp_path, here)}) == {
                ("t", 0): ErrorCode.kafka_storage_error}
            assert located(admin, broker, "t") == {(str(here), False)}
        finally:
            admin.close()


# --- what a stop leaves ------------------------------------------------------------------------


def _moved_name(kind: str) -> str:
    return f"t-0.{uuid.uuid4().hex}-{kind}"


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[tuple[Path, Path, list[tuple[int, bytes]]]]:
    """A broker's two log dirs after a clean stop: (where t-0 is, the other, its records)."""
    with two_dirs(tmp_path) as broker:
        create_topic(broker, "t")
        produce(broker, "t", [b"r%d-" % i + b"z" * 200 for i in range(5000)])
        records = consume(broker, "t")
        here = where(broker, "t")
    yield here, other(tmp_path, here), records


def check_served_from(root: Path, directory: Path, records: list[tuple[int, bytes]]) -> None:
    with two_dirs(root) as broker:
        assert where(broker, "t") == directory
        admin = admin_for(broker)
        try:
            assert located(admin, broker, "t") == {(str(directory), False)}
        finally:
            admin.close()
        assert consume(broker, "t") == records
    assert partition_dirs(directory, "t") == ["t-0"]
    assert partition_dirs(other(root, directory), "t") == []


def test_an_unfinished_copy_goes_at_the_next_start(
        tmp_path: Path, stopped: tuple[Path, Path, list[tuple[int, bytes]]]) -> None:
    here, there, records = stopped
    copy = there / _moved_name("future")
    shutil.copytree(here / "t-0", copy)
    for segment in sorted(copy.glob("*.log"))[1:]:
        segment.write_bytes(segment.read_bytes()[:1000])  # torn, as a copy cut short
    check_served_from(tmp_path, here, records)


def test_a_swap_cut_short_after_its_commit_is_finished_at_the_next_start(
        tmp_path: Path, stopped: tuple[Path, Path, list[tuple[int, bytes]]]) -> None:
    """The replaced replica was renamed ``-delete`` (the commit) and the copy still has its
    ``-future`` name: the copy is the replica."""
    here, there, records = stopped
    shutil.copytree(here / "t-0", there / _moved_name("future"))
    (here / "t-0").rename(here / _moved_name("delete"))
    check_served_from(tmp_path, there, records)


def test_a_replaced_replica_left_behind_is_deleted_at_the_next_start(
        tmp_path: Path, stopped: tuple[Path, Path, list[tuple[int, bytes]]]) -> None:
    here, there, records = stopped
    shutil.copytree(here / "t-0", there / "t-0")
    (here / "t-0").rename(here / _moved_name("delete"))
    check_served_from(tmp_path, there, records)


# --- compaction, cancelled moves, a killed broker ---------------------------------------------


def test_a_compacted_log_moves_with_its_cleaner_checkpoint(tmp_path: Path) -> None:
    with two_dirs(tmp_path, **{"log.cleaner.backoff.ms": 100}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("compacted", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01"})])["compacted"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 2,
                             "batch.size": 4000})
        for i in range(3000):
            producer.produce("compacted", b"value-%d" % i, key=b"key-%d" % (i % 50))
            producer.poll(0)
        assert producer.flush(60) == 0
        here = where(broker, "compacted")
        there = other(tmp_path, here)
        checkpoint = "cleaner-offset-checkpoint"
        wait_for(lambda: ("compacted", 0) in read_offsets(here / checkpoint),
                 what="the cleaner to clean the log")
        kafka_admin = admin_for(broker)
        try:
            assert alter(kafka_admin, broker, {("compacted", 0): there}) == {
                ("compacted", 0): 0}
            wait_for(lambda: located(kafka_admin, broker, "compacted") == {(str(there), False)},
                     what="the move")
        finally:
            kafka_admin.close()
        assert ("compacted", 0) in read_offsets(there / checkpoint)
        assert ("compacted", 0) not in read_offsets(here / checkpoint)
        latest = {b"key-%d" % (i % 50): b"value-%d" % i for i in range(3000)}
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "c",
                             "enable.partition.eof": True})
        consumer.assign([TopicPartition("compacted", 0, 0)])
        seen: dict[bytes, bytes] = {}
        try:
            while (msg := consumer.poll(10)) is not None and not msg.error():
                seen[msg.key()] = msg.value()
        finally:
            consumer.close()
        assert seen == latest


def test_a_move_cut_short_leaves_no_copy_behind(tmp_path: Path) -> None:
    """A move of a 12 MB log is cut short by the deletion of its topic, and another by the
    broker's stop: no copy is left, and the replica stays where it was."""
    with two_dirs(tmp_path) as broker:
        for topic in ("doomed", "kept"):
            create_topic(broker, topic)
            produce(broker, topic, [b"%d-" % i + b"w" * 600 for i in range(20000)])
        doomed_dir, kept_dir = where(broker, "doomed"), where(broker, "kept")
        with FrameClient(("127.0.0.1", broker.port)) as client:
            client.send(34, 2, {"dirs": [{"path": str(other(tmp_path, doomed_dir)), "topics": [
                {"name": "doomed", "partitions": [0]}]}]})
            client.send(20, 6, {"topics": [{"name": "doomed", "topic_id": None}],
                                "timeout": 10000})
            assert [p.error_code for t in client.recv(34, 2)[1].results for p in t.partitions
                    ] == [0]
            assert [t.error_code for t in client.recv(20, 6)[1].responses] == [0]
            client.request(34, 2, {"dirs": [{"path": str(other(tmp_path, kept_dir)), "topics": [
                {"name": "kept", "partitions": [0]}]}]})
        wait_for(lambda: not partition_dirs(doomed_dir, "doomed")
                 and not partition_dirs(other(tmp_path, doomed_dir), "doomed"),
                 what="the deleted topic's replica and copy to go")
    # the broker stopped while "kept" was being copied (it was, or the move was done)
    assert len(partition_dirs(tmp_path / "a", "kept") + partition_dirs(tmp_path / "b", "kept")
               ) == 1
    with two_dirs(tmp_path) as again:
        assert len(consume(again, "kept")) == 20000


def test_a_broker_killed_during_a_move_starts_with_one_replica_and_every_record(
        tmp_path: Path) -> None:
    """``samsa server`` killed (SIGKILL) just after it took a move, and again just after a move
    ended: each time it starts with exactly one replica of the partition, holding every
    acknowledged record once."""
    port = free_port()
    output = tmp_path / "broker.log"
    dirs = [tmp_path / "a", tmp_path / "b"]

    def start() -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "samsa.cli", "server"]
        for key, value in {"log.dirs": ",".join(map(str, dirs)), "num.partitions": "1",
                           "listeners": f"PLAINTEXT://127.0.0.1:{port}"}.items():
            command += ["--override", f"{key}={value}"]
        begin = output.stat().st_size if output.exists() else 0
        with output.open("ab") as out:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
        wait_for(lambda: proc.poll() is not None or b"is ready" in output.read_bytes()[begin:],
                 timeout=60, what="the broker to start")
        assert proc.poll() is None, output.read_text()
        return proc

    def replicas() -> list[Path]:
        return [d / name for d in dirs for name in partition_dirs(d, "killed")]

    def move(wait: bool) -> None:
        [current] = replicas()
        dest = other(tmp_path, current.parent)
        with FrameClient(("127.0.0.1", port)) as client:
            answer = client.request(34, 2, {"dirs": [{"path": str(dest), "topics": [
                {"name": "killed", "partitions": [0]}]}]})
            assert [p.error_code for t in answer.results for p in t.partitions] == [0]
            if wait:
                wait_for(lambda: {(d.log_dir, p.is_future_key) for d in client.request(
                    35, 4, {"topics": [{"topic": "killed", "partitions": [0]}]}).results
                    for t in d.topics for p in t.partitions} == {(str(dest), False)},
                    what="the move to end")

    proc = start()
    try:
        servers = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True,
                             "linger.ms": 5})
        values = [b"%d-" % i + b"k" * 600 for i in range(20000)]
        for value in values:
            producer.produce("killed", value)
            producer.poll(0)
        assert producer.flush(60) == 0
        for wait in (False, True):
            move(wait)
            proc.kill()
            proc.wait(10)
            proc = start()
            assert len(replicas()) == 1, replicas()
            consumer = Consumer({"bootstrap.servers": servers, "group.id": "k",
                                 "enable.partition.eof": True})
            consumer.assign([TopicPartition("killed", 0, 0)])
            got: list[bytes] = []
            try:
                while (msg := consumer.poll(10)) is not None and not msg.error():
                    got.append(msg.value())
            finally:
                consumer.close()
            assert got == values
    finally:
        proc.kill()
        proc.wait(10)
