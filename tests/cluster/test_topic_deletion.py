"""A deleted topic is gone from every replica before its name can be used again.

Kafka's controller removes a topic's znodes only once every live replica acknowledged its
deletion (StopReplica with delete=true); until then the name is taken (CreateTopics: the topic
is marked for deletion). Three real ``samsa server`` processes on a real ZooKeeper
(tests/cluster/processes.py): one replica is frozen (SIGSTOP: still registered, deleting
nothing) while the topic is deleted and created again under the same name. Whenever the new
topic exists, no replica may hold a record of the old one, and its offsets start at 0.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .processes import ProcessCluster, process_cluster, read_partitions, replica_records

TOPIC = "again"
PARTITIONS = 3


def produce(bootstrap: str, prefix: str, count: int) -> list[tuple[int, int]]:
    """(partition, offset) of ``count`` acks=all records ``<prefix>-<i>``."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 30000})
    acked: list[tuple[int, int]] = []
    failed: list[object] = []

    def done(err: object, msg: object) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]
        else:
            failed.append(err)

    for i in range(count):
        producer.produce(TOPIC, b"%s-%d" % (prefix.encode(), i), partition=i % PARTITIONS,
                         on_delivery=done)
        producer.poll(0)
    assert producer.flush(30) == 0 and not failed, failed
    return acked


def try_create(admin: AdminClient) -> bool:
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(15)
    except KafkaException as exc:
        assert "already exists" in str(exc) or "marked for deletion" in str(exc), exc
        return False
    return True


@pytest.mark.timeout(180)
def test_a_topic_deleted_while_a_replica_is_frozen_is_recreated_empty(tmp_path: Path) -> None:
    with process_cluster(tmp_path, overrides={"zookeeper.session.timeout.ms": "30000",
                                              "replica.lag.time.max.ms": "30000"}) as c:
        run(c)


def run(c: ProcessCluster) -> None:
    c.create_topic(TOPIC, PARTITIONS, 3)
    produce(c.bootstrap, "old", 30)
    controller = c.controller()
    frozen = next(b for b in sorted(c.brokers) if b != controller)
    c.wait(lambda: sum(len(replica_records(c.broker(frozen), TOPIC, p))
                       for p in range(PARTITIONS)) == 30,
           f"broker {frozen} to hold every old record", topics=[TOPIC])
    others = [b for b in sorted(c.brokers) if b != frozen]
    bootstrap = ",".join(c.broker(b).address for b in others)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    c.broker(frozen).pause()
    # its own client: the broker answers one request of a connection at a time, and this
    # one waits until the deletion is done (or 30 s)
    deleter = AdminClient({"bootstrap.servers": bootstrap})
    deletion = deleter.delete_topics([TOPIC], operation_timeout=30)[TOPIC]
    # the name is taken while the frozen replica has not deleted its copy
    deadline = time.monotonic() + 5
    created = False
    while not created and time.monotonic() < deadline:
        created = try_create(admin)
    c.broker(frozen).resume()
    if not created:
        c.wait(lambda: try_create(admin), f"{TOPIC} to be created again", topics=[TOPIC])
    assert frozen in c.registered()
    c.wait_full_isr(TOPIC, range(PARTITIONS))

    for broker in c.brokers.values():
        for p in range(PARTITIONS):
            left = [v for _, v in replica_records(broker, TOPIC, p) if v.startswith(b"old")]
            assert not left, (f"broker {broker.id} (broker {frozen} was frozen) holds "
                              f"{len(left)} old records in {TOPIC}-{p}")
    new = produce(bootstrap, "new", 9)
    assert sorted(new) == [(p, o) for p in range(PARTITIONS) for o in range(3)]
    read = read_partitions(c.bootstrap, TOPIC, range(PARTITIONS))
    assert all(v.startswith(b"new") for records in read.values() for _, v in records), read
    assert sum(len(records) for records in read.values()) == 9
    deletion.result(30)  # done: the topic it deleted is gone (the one there now is another)
    assert not created, "the name was free while a live replica still held the old topic"
