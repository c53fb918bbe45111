"""``samsa pipeline stream`` with real PySpark and a real broker: available-now and continuous.

(The data source's own SIGKILL-and-restart test is ``tests/spark/test_stream_kill.py``.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pipeline_data import loaded_keys, produced
from pyspark.sql import SparkSession

import samsa
from samsa.pipeline.audit import audit
from samsa.pipeline.events import Topics
from samsa.pipeline.generate import generate
from samsa.pipeline.stream import stream

TIMEOUT_S = 180.0


def test_available_now_streams_each_event_once(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("streamed-")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    generate(broker.bootstrap_servers, events=1500, topics=topics, seed=21)

    first = stream(spark, broker.bootstrap_servers, out, checkpoint, topics=topics,
                   max_offsets_per_trigger=400, timeout_s=TIMEOUT_S)
    assert first.rows == 1500 and first.batches >= 4
    generate(broker.bootstrap_servers, events=500, topics=topics, seed=22)
    second = stream(spark, broker.bootstrap_servers, out, checkpoint, topics=topics,
                    timeout_s=TIMEOUT_S)

    assert second.rows == 500
    assert loaded_keys(spark, out) == sorted(produced(broker.bootstrap_servers, topics))
    assert audit(spark, broker.bootstrap_servers, out, topics=topics).ok
    assert {p.name.split("=")[0] for p in out.glob("*=*")} == {"date"}


def test_a_continuous_stream_stopped_by_sigterm_resumes_where_it_stopped(
    spark: SparkSession, broker: samsa.Broker, tmp_path: Path
) -> None:
    topics = Topics("live-")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    generate(broker.bootstrap_servers, events=200, topics=topics, seed=23)
    feed = threading.Thread(
        target=generate,
        args=(broker.bootstrap_servers,),
        kwargs={"events": 2400, "topics": topics, "realtime": True, "rate": 100.0,
                "seed": 24},
    )
    command = [sys.executable, "-m", "samsa.cli", "pipeline", "stream", "--bootstrap-server",
               broker.bootstrap_servers, "--topic-prefix", topics.prefix, "--output", str(out),
               "--checkpoint", str(checkpoint), "--master", "local[2]", "--trigger",
               "continuous", "--interval", "0.5", "--max-offsets-per-trigger", "100",
               "--timeout", str(TIMEOUT_S)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S

        def wait_for_commits(count: int) -> None:
            while len(list((checkpoint / "commits").glob("[0-9]*"))) < count:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, f"the query committed < {count} batches"
                time.sleep(0.1)

        wait_for_commits(1)  # Spark is up: now the live feed
        feed.start()
        wait_for_commits(4)
        assert feed.is_alive(), "stop the query while events still arrive"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if feed.is_alive() or feed.ident is not None:
            feed.join(TIMEOUT_S)
    assert proc.returncode == 0, stderr
    assert "streamed" in stdout

    stream(spark, broker.bootstrap_servers, out, checkpoint, topics=topics, timeout_s=TIMEOUT_S)

    assert loaded_keys(spark, out) == sorted(produced(broker.bootstrap_servers, topics))
    assert audit(spark, broker.bootstrap_servers, out, topics=topics).ok
