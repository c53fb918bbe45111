"""Heartbeats (MirrorHeartbeatConnector): every cluster pair S->T whose heartbeats are on
writes Heartbeat(S, T, now) to T's ``heartbeats`` topic each emit.heartbeats.interval.seconds.
Flows replicate ``heartbeats`` like any topic (``A.heartbeats`` in B), which shows that a
flow is alive and, through the remote topic names, which way records travel."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from samsa.mirror import clients
from samsa.mirror.config import MirrorMakerConfig, SourceAndTarget
from samsa.mirror.task import MirrorTask
from samsa.mirror.topics import ensure_internal_topic
from samsa.tools.mirror_client import Heartbeat


class Heartbeats(MirrorTask):
    def __init__(self, config: MirrorMakerConfig, stop: threading.Event) -> None:
        self.config, self.stop = config, stop
        self.pairs = [p for p in config.heartbeat_pairs()
                      if config.get_bool(p, "emit.heartbeats.enabled")]

    def _run(self) -> None:
        producers: dict[str, Producer] = {}
        topic = self.config.policy().heartbeats_topic()
        for target in sorted({p.target for p in self.pairs}):
            admin = clients.admin(self.config, target, f"heartbeats-{target}-admin")
            rf = max(self.config.get_int(p, "heartbeats.topic.replication.factor")
                     for p in self.pairs if p.target == target)
            ensure_internal_topic(admin, topic, rf)
            producers[target] = clients.producer(self.config, target, f"heartbeats-{target}")
        due: dict[SourceAndTarget, float] = {p: 0.0 for p in self.pairs}
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                for pair in self.pairs:
                    if now >= due[pair]:
                        beat = Heartbeat(pair.source, pair.target, int(time.time() * 1000))
                        producers[pair.target].produce(topic, beat.record_value(),
                                                       beat.record_key(), partition=0)
                        due[pair] = now + self.config.get_int(
                            pair, "emit.heartbeats.interval.seconds")
                for p in producers.values():
                    p.poll(0)
                self.stop.wait(max(0.05, min(due.values()) - time.monotonic()))
        finally:
            for p in producers.values():
                p.flush(10)
