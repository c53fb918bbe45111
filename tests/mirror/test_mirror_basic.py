"""Two clusters: topic selection and remote names, records kept, partitions and configs."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions
from waiting import wait_for

import samsa

from .helpers import (
    create_topic,
    mm2_properties,
    produce,
    read_all,
    running_mirror,
    topics,
    wait_topic,
)


def test_topics_selected_named_and_copied_with_headers_and_timestamps(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "orders", 3)
        create_topic(a, "clicks", 1)
        create_topic(a, "secret.stuff", 1)
        records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 3,
                    "headers": [("h", f"x{i}".encode()), ("h", None)],
                    "timestamp": 1_600_000_000_000 + i} for i in range(60)]
        produce(a, "orders", records)
        produce(a, "clicks", [{"value": b"c"}] * 5)
        produce(a, "secret.stuff", [{"value": b"s"}])
        props = mm2_properties({"A": a, "B": b}, ["A->B"],
                               {"topics": "orders, click.*, secret\\..*",
                                "topics.exclude": "secret\\..*"})
        with running_mirror(props):
            wait_topic(b, "A.orders")
            copied = read_all(b, "A.orders", expected=60)
            clicks = read_all(b, "A.clicks", expected=5)
        assert len(clicks) == 5
        assert "A.secret.stuff" not in topics(b)
        assert "secret.stuff" not in topics(b)
        md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=30)
        assert len(md.topics["A.orders"].partitions) == 3
        by_key = {m.key(): m for m in copied}
        assert len(copied) == 60 and len(by_key) == 60
        for i in range(60):
            m = by_key[f"k{i}".encode()]
            assert m.value() == f"v{i}".encode()
            assert m.partition() == i % 3
            assert m.timestamp() == (1, 1_600_000_000_000 + i)
            assert m.headers() == [("h", f"x{i}".encode()), ("h", None)]
        # upstream order within a partition is kept
        for p in range(3):
            keys = [int(m.key()[1:]) for m in copied if m.partition() == p]
            assert keys == sorted(keys)


def test_new_partitions_and_config_changes_follow(tmp_path):
    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "events", 2, {"retention.ms": "3600000"})
        admin_a = AdminClient({"bootstrap.servers": a.bootstrap_servers})
        admin_b = AdminClient({"bootstrap.servers": b.bootstrap_servers})

        def remote_config(name):
            res = ConfigResource(ConfigResource.Type.TOPIC, "A.events")
            return admin_b.describe_configs([res])[res].result(30)[name].value

        def remote_partitions():
            md = admin_b.list_topics(timeout=30)
            return len(md.topics["A.events"].partitions) if "A.events" in md.topics else 0

        with running_mirror(mm2_properties({"A": a, "B": b}, ["A->B"])):
            wait_topic(b, "A.events")
            assert remote_partitions() == 2
            wait_for(lambda: remote_config("retention.ms") == "3600000", 30, "config copied")
            admin_a.create_partitions([NewPartitions("events", 4)])["events"].result(30)
            res = ConfigResource(ConfigResource.Type.TOPIC, "events",
                                 set_config={"retention.ms": "7200000"})
            admin_a.alter_configs([res])[res].result(30)
            wait_for(lambda: remote_partitions() == 4, 30, "partitions synced")
            wait_for(lambda: remote_config("retention.ms") == "7200000", 30, "config synced")
            produce(a, "events", [{"value": b"p3", "partition": 3}])
            copied = read_all(b, "A.events", expected=1)
            assert [(m.partition(), m.value()) for m in copied] == [(3, b"p3")]


def test_samsa_mirror_command_progress_metrics_and_sigint(tmp_path):
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    from .helpers import write_properties

    with samsa.Broker(tmp_path / "a") as a, samsa.Broker(tmp_path / "b") as b:
        create_topic(a, "logs", 2)
        path = write_properties(tmp_path / "mm2.properties", mm2_properties(
            {"A": a, "B": b}, ["A->B"], {"topics": "logs", "emit.heartbeats.enabled": "false"}))
        proc = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "mirror", str(path), "--progress-interval",
             "0.5", "--metrics-listener", "http://127.0.0.1:0"],
            stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            lines = [proc.stderr.readline(), proc.stderr.readline()]
            assert lines[0] == "samsa mirror: replicating A->B\n"
            url = re.fullmatch(r"samsa mirror: metrics at (\S+)\n", lines[1])[1]
            produce(a, "logs", [{"value": b"x" * 200, "partition": i % 2} for i in range(50)])

            def copied():
                text = urllib.request.urlopen(url, timeout=10).read().decode()
                found = re.search(r'^kafka_connect_mirror_mirrorsourceconnector_record_count'
                                  r'\{source="A",target="B"\} (\S+)$', text, re.M)
                return text if found and float(found[1]) == 50 else None
            text = wait_for(copied, 30, "record_count 50 at the metrics endpoint")
            assert re.search(r'^samsa_mirror_records_lag\{source="A",target="B"\} 0\.0$', text,
                             re.M)
            assert re.search(r'^kafka_connect_mirror_mirrorsourceconnector_byte_count'
                             r'\{source="A",target="B"\} 10000\.0$', text, re.M)
            while True:  # a progress line with the 50 records
                line = proc.stderr.readline()
                assert line, "the mirror ended"
                if line.startswith("mirror A->B: 50 records ("):
                    assert re.search(r"records/s, [\d.]+ MB/s\), lag 0 records on 2 partitions",
                                     line)
                    break
            proc.send_signal(signal.SIGINT)
            rest = proc.stderr.read()
            assert proc.wait(60) == 0
            assert rest.rstrip().endswith("samsa mirror: stopped")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
