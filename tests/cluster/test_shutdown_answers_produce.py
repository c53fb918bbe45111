"""A broker that shuts down answers the acks=all writes it holds before it closes.

An acks=all write waits on the leader until the in-sync replicas have it. When the leader
stops cleanly its leaderships move away first (controlled shutdown), and like Kafka's
DelayedProduce the waiting write is answered NOT_LEADER_OR_FOLLOWER at that moment: the client
knows the write did not happen and sends it again to the new leader. A connection closed on it
instead leaves the client unsure whether the write happened, and librdkafka's idempotent
producer can then report it delivered although the new leader never had it (seen in
test_cluster_schedule.py: librdkafka sent the next batch to the new leader before retrying the
unsure one, and counted the earlier one as written when the later one was).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from confluent_kafka.admin import NewTopic
from kafka_frames import ConnectionClosed, FrameClient

from samsa.records.record import RecordInput, encode_batch

from .processes import process_cluster

NOT_LEADER_OR_FOLLOWER = 6


def test_a_write_waiting_for_replicas_is_answered_when_its_leader_shuts_down(
        tmp_path: Path) -> None:
    # the ISR keeps the paused follower for the whole test, so the write cannot complete
    with process_cluster(tmp_path, 3, {"replica.lag.time.max.ms": "60000"}) as cluster:
        controller = cluster.controller()
        # a paused follower holds the high watermark back; the controller must stay awake
        paused = 3 if controller != 3 else 2
        cluster.admin.create_topics(
            [NewTopic("held", 1, replica_assignment=[[1, 2, 3]])])["held"].result(30)
        cluster.wait_full_isr("held", [0], timeout=30)
        cluster.wait_leading("held", [0], timeout=30)  # broker 1 has applied its leadership
        cluster.broker(paused).pause()
        answer: dict[str, Any] = {}
        sent = threading.Event()

        def write() -> None:
            with FrameClient(cluster.broker(1).address, timeout=60) as client:
                try:
                    client.send(0, 9, {
                        "transactional_id": None, "acks": -1, "timeout": 30000,
                        "topic_data": [{"name": "held", "partition_data": [
                            {"index": 0, "records": encode_batch([RecordInput(b"v")])}]}]})
                    sent.set()
                    answer["response"] = client.recv(0, 9)[1]
                except (ConnectionClosed, OSError) as exc:
                    answer["closed"] = exc

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        assert sent.wait(30), answer
        writer.join(1.0)  # held: nothing answers it while the follower sleeps
        assert writer.is_alive(), f"the write was answered at once: {answer}"
        broker = cluster.broker(1)
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        writer.join(60)
        assert not writer.is_alive(), "the write was not answered"
        assert "closed" not in answer, (
            f"the leader closed the connection on a waiting acks=all write: {answer['closed']!r}"
            f"\n{broker.log_tail()}")
        result = answer["response"].responses[0].partition_responses[0]
        assert result.error_code == NOT_LEADER_OR_FOLLOWER, result
        broker.proc.wait(60)
        assert broker.proc.returncode == 0, broker.log_tail()
        cluster.broker(paused).resume()
