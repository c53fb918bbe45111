"""A consumer group fails over from A to B at the translated offsets: checkpoints in
A.checkpoints.internal, committed to B's group by sync.group.offsets, or by
``samsa groups --reset-offsets --to-checkpoint A``."""

from __future__ import annotations

import struct
import subprocess
import sys
import time

from confluent_kafka import Consumer
from waiting import wait_for

import samsa
from samsa.tools.mirror_client import translate_offsets

from .helpers import create_topic, mm2_properties, produce, read_all, running_mirror, topics

LAG_MAX = 10  # offset.lag.max: how far a translated offset may be behind


def consume(broker: samsa.Broker, group: str, topic: str, count: int | None,
            timeout: float = 30.0) -> list:
    """Read with ``group`` (committing) until ``count`` records or, with None, until idle."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + timeout
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            want = 1 if count is None else min(100, count - len(got))
            msgs = [m for m in consumer.consume(want, timeout=0.5) if not m.error()]
            got += msgs
            if msgs:
                idle_since = time.monotonic()
                consumer.commit(asynchronous=False)
            if count is not None and len(got) >= count:
                break
            if count is None and got and time.monotonic() - idle_since > 3:
                break
        return got
    finally:
        consumer.close()


def setup_and_consume_on_a(a: samsa.Broker, b: samsa.Broker) -> tuple[dict, list]:
    create_topic(a, "orders", 2)
    produce(a, "orders", [{"key": str(i).encode(), "value": b"v", "partition": i % 2}
                          for i in range(200)])
    read_on_a = consume(a, "app", "orders", 130)
    assert len(read_on_a) == 130
    committed = {}
    for m in read_on_a:
        committed[m.partition()] = max(committed.get(m.partition(), 0), m.offset() + 1)
    return committed, read_on_a


def wait_checkpoints(b: samsa.Broker, committed: dict) -> dict:
    def found():
        t = translate_offsets({"bootstrap.servers": b.bootstrap_servers}, "A", "app")
        return t if {p for (_, p) in t} == set(committed) else None
    return wait_for(found, 60, "checkpoints of group app")


def test_group_fails_over_with_synced_offsets(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        committed, read_on_a = setup_and_consume_on_a(a, b)
        props = mm2_properties({"A": a, "B": b}, ["A->B"], {
            "sync.group.offsets.enabled": "true", "offset.lag.max": str(LAG_MAX),
            "groups": "app"})
        with running_mirror(props):
            assert len(read_all(b, "A.orders", expected=200)) == 200
            translated = wait_checkpoints(b, committed)
            for (topic, p), (offset, _) in translated.items():
                assert topic == "A.orders"
                assert committed[p] - LAG_MAX <= offset <= committed[p]
            # sync.group.offsets: B's group app (empty there) gets the translated offsets
            def synced():
                c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "app"})
                from confluent_kafka import TopicPartition
                got = c.committed([TopicPartition("A.orders", p) for p in committed], 30)
                c.close()
                return all(tp.offset == translated[("A.orders", tp.partition)][0] for tp in got)
            wait_for(synced, 60, "group app's offsets synced to B")
        # the application moves to B: it resumes near where it stopped on A
        read_on_b = consume(b, "app", "A.orders", None)
        keys_a = {m.key() for m in read_on_a}
        keys_b = [m.key() for m in read_on_b]
        assert keys_a | set(keys_b) == {str(i).encode() for i in range(200)}
        reread = len(set(keys_b) & keys_a)
        assert reread <= 2 * LAG_MAX, f"re-read {reread} records"
        assert len(keys_b) == len(set(keys_b))


def test_samsa_groups_applies_the_translation(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        committed, read_on_a = setup_and_consume_on_a(a, b)
        props = mm2_properties({"A": a, "B": b}, ["A->B"], {
            "offset.lag.max": str(LAG_MAX),
            "offset-syncs.topic.location": "target"})  # the syncs in B this time
        with running_mirror(props):
            assert len(read_all(b, "A.orders", expected=200)) == 200
            translated = wait_checkpoints(b, committed)
            assert "mm2-offset-syncs.B.internal" in topics(b)
            assert "mm2-offset-syncs.B.internal" not in topics(a)
            # the checkpoint records are Kafka's Checkpoint structs
            raw = read_all(b, "A.checkpoints.internal")
            key = raw[-1].key()
            n = struct.unpack(">h", key[:2])[0]
            assert key[2:2 + n] == b"app"
            value = raw[-1].value()
            assert struct.unpack(">h", value[:2])[0] == 0 and len(value) == 2 + 8 + 8 + 2
        base = [sys.executable, "-m", "samsa.cli", "groups", "--bootstrap-server",
                b.bootstrap_servers, "--group", "app", "--reset-offsets", "--all-topics",
                "--to-checkpoint", "A"]
        dry = subprocess.run([*base, "--dry-run"], capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
        rows = [line.split() for line in dry.stdout.splitlines() if "A.orders" in line]
        assert sorted((r[1], int(r[2]), int(r[3])) for r in rows) == sorted(
            (t, p, o) for (t, p), (o, _) in translated.items())
        done = subprocess.run([*base, "--execute"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        read_on_b = consume(b, "app", "A.orders", None)
        keys_a = {m.key() for m in read_on_a}
        keys_b = {m.key() for m in read_on_b}
        assert keys_a | keys_b == {str(i).encode() for i in range(200)}
        assert len(keys_b & keys_a) <= 2 * LAG_MAX
        bad = subprocess.run([*base[:-1], "C", "--dry-run"], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode == 1
        assert bad.stderr.splitlines() == ["samsa: --to-checkpoint C: no topic "
                                           "C.checkpoints.internal in this cluster (no mirror "
                                           "writes checkpoints here)"]
