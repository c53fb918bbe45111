"""Several clusters: active/active without cycles (heartbeats and remote topic names in
Kafka's formats), three clusters into one, and two workers sharing a flow."""

from __future__ import annotations

import struct
import time

from waiting import wait_for

import samsa
from samsa.mirror.source import worker_group
from samsa.tools.mirror_client import Heartbeat

from .helpers import create_topic, mm2_properties, produce, read_all, running_mirror, topics


def kafka_string(data: bytes, pos: int) -> tuple[str, int]:
    """A Kafka Struct STRING, read by hand: INT16 length, UTF-8."""
    (n,) = struct.unpack_from(">h", data, pos)
    return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def test_active_active_has_no_cycles(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "t", 1)
        create_topic(b, "t", 1)
        produce(a, "t", [{"value": b"from-a"}] * 10)
        produce(b, "t", [{"value": b"from-b"}] * 7)
        props = mm2_properties({"A": a, "B": b}, ["A->B", "B->A"])
        with running_mirror(props) as mirror:
            assert [m.value() for m in read_all(b, "A.t", expected=10)] == [b"from-a"] * 10
            assert [m.value() for m in read_all(a, "B.t", expected=7)] == [b"from-b"] * 7
            wait_for(lambda: "A.heartbeats" in topics(b) and "B.heartbeats" in topics(a), 30,
                     "heartbeats mirrored both ways")
            # three more topic refreshes of each flow: nothing comes back
            done = [s.refreshes + 3 for s in mirror.sources]
            wait_for(lambda: all(s.refreshes >= n for s, n in zip(mirror.sources, done,
                                                                   strict=True)),
                     30, "three topic refreshes")
            a_topics, b_topics = topics(a), topics(b)
        assert not any(t.startswith(("A.B.", "B.A.")) for t in a_topics | b_topics)
        assert "A.t" not in a_topics and "B.t" not in b_topics
        assert len(read_all(a, "t")) == 10 and len(read_all(b, "t")) == 7
        # heartbeats in B: B's own, written as Kafka's Heartbeat struct
        beats = read_all(b, "heartbeats")
        assert beats
        key, value = beats[0].key(), beats[0].value()
        source, pos = kafka_string(key, 0)
        target, pos = kafka_string(key, pos)
        assert (source, target, pos) == ("A", "B", len(key))
        version, timestamp = struct.unpack(">hq", value)
        assert version == 0 and abs(timestamp - time.time() * 1000) < 120_000
        assert Heartbeat.deserialize(key, value) == Heartbeat("A", "B", timestamp)
        # A.heartbeats in B: A's heartbeats (B->A pair), mirrored
        mirrored = read_all(b, "A.heartbeats")
        assert {Heartbeat.deserialize(m.key(), m.value()).source_cluster_alias
                for m in mirrored} == {"B"}


def test_three_clusters_into_one(tmp_path):
    with samsa.Broker(tmp_path / "l1") as l1, samsa.Broker(tmp_path / "l2") as l2, \
            samsa.Broker(tmp_path / "off") as off:
        for live, name in ((l1, "live1"), (l2, "live2")):
            create_topic(live, "events", 2)
            produce(live, "events", [{"key": f"{name}-{i}".encode(), "value": b"v",
                                      "partition": i % 2} for i in range(40)])
        props = mm2_properties({"live1": l1, "live2": l2, "offline": off},
                               ["live1->offline", "live2->offline"], {"topics": "events"})
        with running_mirror(props):
            got1 = read_all(off, "live1.events", expected=40)
            got2 = read_all(off, "live2.events", expected=40)
        assert sorted(m.key() for m in got1) == sorted(f"live1-{i}".encode() for i in range(40))
        assert sorted(m.key() for m in got2) == sorted(f"live2-{i}".encode() for i in range(40))
        # no flow out of offline, and the live clusters only got heartbeats
        assert not any(t.startswith("offline.") for t in topics(l1) | topics(l2))
        assert "mm2-offset-syncs.offline.internal" in topics(l1)
        assert {"live1.checkpoints.internal", "live2.checkpoints.internal",
                "mm2-offsets.live1.internal", "mm2-offsets.live2.internal"} <= topics(off)


def test_two_workers_share_a_flow(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "big", 4)
        props = mm2_properties({"A": a, "B": b}, ["A->B"], {"topics": "big",
                                                            "emit.heartbeats.enabled": "false"})
        with running_mirror(props, worker_id="w1") as w1, \
                running_mirror(props, worker_id="w2") as w2:
            def shared():
                p1, p2 = w1.sources[0].metrics.partitions, w2.sources[0].metrics.partitions
                return p1 > 0 and p2 > 0 and p1 + p2 == 4
            wait_for(shared, 60, "both workers holding partitions")
            produce(a, "big", [{"key": str(i).encode(), "value": b"v", "partition": i % 4}
                               for i in range(400)])
            copied = read_all(b, "A.big", expected=400)
            wait_for(lambda: w1.sources[0].metrics.record_count > 0
                     and w2.sources[0].metrics.record_count > 0, 30, "both copying")
            counts = [w.sources[0].metrics.record_count for w in (w1, w2)]
            assert sum(counts) == 400
        assert sorted(int(m.key()) for m in copied) == list(range(400))
        assert worker_group(w1.sources[0].flow) == "mm2-A->B"


def test_tasks_max_splits_a_flow_in_one_process(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "big", 4)
        props = mm2_properties({"A": a, "B": b}, ["A->B"], {
            "topics": "big", "emit.heartbeats.enabled": "false", "tasks.max": "2"})
        with running_mirror(props) as mirror:
            assert [s.task for s in mirror.sources] == [0, 1]
            wait_for(lambda: all(s.metrics.partitions == 2 for s in mirror.sources), 60,
                     "two partitions per task")
            produce(a, "big", [{"key": str(i).encode(), "value": b"v", "partition": i % 4}
                               for i in range(200)])
            copied = read_all(b, "A.big", expected=200)
            wait_for(lambda: sum(s.metrics.record_count for s in mirror.sources) == 200, 30,
                     "both tasks' acknowledgements")
            assert all(s.metrics.record_count == 100 for s in mirror.sources)
            assert "A->B: 200 records" in mirror.progress.line()
        assert sorted(int(m.key()) for m in copied) == list(range(200))
