"""The paper's deployment (§4): live clusters mirrored into an offline cluster, a schema
registry, frontends, repeated load jobs, and the audit across the whole way.

- ``live1``, ``live2``: one embedded broker each; their frontends (``pipeline.generate``, live
  time) publish Avro with ids registered in the schema registry, and the activity schema
  evolves to version 2 mid-run.
- ``offline``: an embedded broker with the schema registry beside it (its ``_schemas`` topic);
  ``samsa mirror`` (MirrorMaker 2, its own process) copies live1->offline and live2->offline,
  exactly once, into ``live1.page_views``, ``live2.monitoring``... (DefaultReplicationPolicy).
- The load job runs every ``load_interval_s`` on the offline cluster (read_committed, schemas
  resolved through the registry); the end-to-end latency of a row is its version's commit time
  less its event time (stamped by the frontend as it generated it).
- The audit reconciles the frontends' counts per topic, window and source cluster.

It lives above ``samsa.pipeline`` and ``samsa.mirror`` (it starts brokers).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

import samsa
from samsa.pipeline.events import DEFAULT_TOPICS, Topics
from samsa.pipeline.generate import GenerateResult, generate
from samsa.pipeline.latency import LoadRecord
from samsa.pipeline.load import LoadError, load
from samsa.tools.mirror_client import DefaultReplicationPolicy
from samsa.tools.zookeeper_server import terminate_process

LIVE = ("live1", "live2")
OFFLINE = "offline"
CATCH_UP_S = 120.0


class DeploymentError(RuntimeError):
    """The deployment could not run to its end (the mirror died, it did not catch up)."""


def mirror_properties(live: dict[str, str], offline: str, topics: Topics) -> dict[str, str]:
    """mm2.properties for live*->offline, exactly once, with quick intervals."""
    names = [*topics.all_activity, topics.monitoring]
    props = {
        "clusters": ", ".join([*live, OFFLINE]),
        f"{OFFLINE}.bootstrap.servers": offline,
        "topics": ", ".join(n.replace(".", "\\.") for n in names),
        f"{OFFLINE}.exactly.once.source.support": "enabled",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "refresh.topics.interval.seconds": "1",
        "sync.topic.configs.interval.seconds": "5",
        "emit.checkpoints.enabled": "false",
        "offset.flush.interval.ms": "500",
    }
    for alias, bootstrap in live.items():
        props[f"{alias}.bootstrap.servers"] = bootstrap
        props[f"{alias}->{OFFLINE}.enabled"] = "true"
    return props


class MirrorProcess:
    """``samsa mirror mm2.properties`` as a child process, which can be SIGKILLed."""

    def __init__(self, properties: Path, log: Path) -> None:
        self.properties = properties
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = self.log.open("ab")
        code = "from samsa.cli import run; run()"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, "mirror", str(self.properties),
             "--progress-interval", "5"],
            stdout=out, stderr=out, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        out.close()

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()  # SIGKILL
            self.process.wait(30)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            terminate_process(self.process, 60)
            self.process = None

    def check(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:]
            raise DeploymentError(f"the mirror exited ({self.process.returncode}): "
                                  f"{' '.join(tail)}")


@dataclass
class DeploymentRun:
    generated: dict[str, GenerateResult] = field(default_factory=dict)
    loads: list[LoadRecord] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def events(self) -> int:
        return sum(r.events for r in self.generated.values())


class Deployment:
    """Two live clusters, an offline one with the schema registry, and the mirror."""

    def __init__(self, workdir: Path, *, topics: Topics = DEFAULT_TOPICS,
                 live: Sequence[str] = LIVE) -> None:
        self.workdir = Path(workdir)
        self.topics = topics
        self.aliases = tuple(live)
        self.live: dict[str, samsa.Broker] = {}
        self.offline: samsa.Broker | None = None
        self.mirror: MirrorProcess | None = None
        self._stack = ExitStack()

    def __enter__(self) -> Deployment:
        try:
            for alias in self.aliases:
                self.live[alias] = samsa.Broker(self.workdir / alias)
                self.live[alias].start()
                # by alias: the broker restart_live put in its place is the one to stop
                self._stack.callback(lambda a: self.live[a].stop(), alias)
            self.offline = self._stack.enter_context(
                samsa.Broker(self.workdir / OFFLINE, schema_registry=True))
            props = mirror_properties(
                {a: b.bootstrap_servers for a, b in self.live.items()},
                self.offline.bootstrap_servers, self.topics)
            path = self.workdir / "mm2.properties"
            path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
            self.mirror = MirrorProcess(path, self.workdir / "mirror.log")
            self._stack.callback(self.mirror.stop)
            self.mirror.start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def restart_live(self, alias: str) -> None:
        """A live cluster's broker stopped and started again on its port with its data, under
        the frontends publishing to it and the mirror reading from it."""
        old = self.live[alias]
        port = old.port
        old.stop()
        fresh = samsa.Broker(self.workdir / alias,
                             config={"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
        fresh.start()
        self.live[alias] = fresh

    @property
    def offline_bootstrap(self) -> str:
        assert self.offline is not None
        return self.offline.bootstrap_servers

    @property
    def schema_registry_url(self) -> str:
        assert self.offline is not None
        return self.offline.schema_registry_url

    def remote(self, alias: str, topic: str) -> str:
        return DefaultReplicationPolicy().format_remote_topic(alias, topic)

    def run(
        self,
        table: Path,
        spark: Any,
        *,
        events: int,
        rate: float,
        window_ms: int = 10_000,
        evolve_at: float | None = 0.5,
        load_interval_s: float | None = 5.0,
        during: Callable[[float], None] | None = None,
        before_final_load: Callable[[], None] | None = None,
        report: Callable[[str], None] = lambda _: None,
        fail_on_data_loss: bool = True,
    ) -> DeploymentRun:
        """Frontends publish ``events`` per live cluster at ``rate`` per second; the load runs
        every ``load_interval_s`` (None: once, at the end) until the offline cluster holds
        everything the frontends published, then once more. ``during(seconds)`` is called
        about every second while the frontends run (a test kills the mirror there)."""
        began = time.monotonic()
        run = DeploymentRun()
        errors: list[BaseException] = []

        def frontends(alias: str, seed: int) -> None:
            try:
                run.generated[alias] = generate(
                    self.live[alias].bootstrap_servers, events=events, realtime=True,
                    rate=rate, window_ms=window_ms, seed=seed, topics=self.topics,
                    schema_registry_url=self.schema_registry_url, evolve_at=evolve_at)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=frontends, args=(a, i + 1), name=f"frontends-{a}")
                   for i, a in enumerate(self.aliases)]
        for thread in threads:
            thread.start()
        next_load = time.monotonic() + (load_interval_s or 0.0)
        next_tick = time.monotonic() + 1.0
        while any(t.is_alive() for t in threads):
            time.sleep(0.1)
            if during is not None and time.monotonic() >= next_tick:
                during(time.monotonic() - began)
                next_tick += 1.0
            if load_interval_s is not None and time.monotonic() >= next_load:
                self._load(table, spark, run, report, fail_on_data_loss, final=False)
                next_load = time.monotonic() + load_interval_s
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        report("frontends done; waiting for the mirror to carry everything to offline")
        self.wait_mirrored(run)
        if before_final_load is not None:
            before_final_load()
        self._load(table, spark, run, report, fail_on_data_loss)
        run.seconds = time.monotonic() - began
        return run

    def _load(self, table: Path, spark: Any, run: DeploymentRun,
              report: Callable[[str], None], fail_on_data_loss: bool,
              final: bool = True) -> None:
        """One load of the offline cluster. A periodic one (not ``final``) that finds the
        mirror has not made every remote topic yet (it was just restarted) is skipped: the
        final load comes once everything is mirrored."""
        assert self.mirror is not None
        self.mirror.check()
        try:
            result = load(spark, self.offline_bootstrap, table, topics=self.topics,
                          sources=self.aliases, schema_registry_url=self.schema_registry_url,
                          read_committed=True, fail_on_data_loss=fail_on_data_loss)
        except LoadError as exc:
            if final:
                raise
            report(f"load skipped: {exc}")
            return
        committed_ms = int(time.time() * 1000)
        if result.loaded:
            run.loads.append(LoadRecord(result.version, committed_ms, result.start, result.end))
            report(f"load: {result.rows:,} rows, table version {result.version}")

    def wait_mirrored(self, run: DeploymentRun, timeout_s: float = CATCH_UP_S) -> None:
        """Until every record the frontends published is in the offline cluster."""
        deadline = time.monotonic() + timeout_s
        for alias, generated in run.generated.items():
            wanted = dict(generated.per_topic)
            wanted[self.topics.monitoring] = generated.monitoring_events
            for topic, count in wanted.items():
                remote = self.remote(alias, topic)
                while (found := committed_records(self.offline_bootstrap, remote)) < count:
                    assert self.mirror is not None
                    self.mirror.check()
                    if time.monotonic() > deadline:
                        raise DeploymentError(f"{remote}: {found} of {count} records mirrored "
                                              f"after {timeout_s:.0f} s")
                    time.sleep(0.5)


def committed_records(bootstrap: str, topic: str, timeout_s: float = 30.0) -> int:
    """How many committed records ``topic`` holds (0 while it does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "samsa-deployment-count",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return 0
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])
        count, eof = 0, set[int | None]()
        deadline = time.monotonic() + timeout_s
        while len(eof) < len(meta.partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                error = msg.error()
                if error is None:
                    count += 1
                    eof.discard(msg.partition())
                elif error.code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
        return count
    finally:
        consumer.close()
