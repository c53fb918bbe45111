"""The paper's deployment end to end: two live clusters, the mirror (its own process) into an
offline cluster with the schema registry, frontends whose schema evolves mid-run, repeated loads
and the audit per topic, window and source cluster."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from samsa.pipeline.audit import audit_deployment
from samsa.pipeline.events import Topics
from samsa.pipeline.latency import latency
from samsa.pipeline.schemas import ACTIVITY_SUBJECT, registered_schemas
from samsa.pipeline_deployment import LIVE, Deployment

EVENTS = 1500  # per live cluster
RATE = 300.0  # events per second per live cluster: five seconds of traffic


def test_mirror_killed_and_live_broker_restarted_mid_run_schema_evolved_and_audit_passes(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "warehouse" / "events"
    killed: list[float] = []
    restarted: list[float] = []
    with Deployment(tmp_path / "clusters", topics=Topics()) as deployment:
        assert deployment.mirror is not None

        def during(seconds: float) -> None:
            # live1's broker restarted under its frontends and the running mirror, then, once
            # live1 is back, the mirror SIGKILLed and started again (a mirror that starts while
            # a source cluster is down stops with one line, as it should). Both in one tick: on
            # a loaded machine the restart and a periodic load can outlast the frontends, and
            # there is no later tick.
            if seconds >= 2 and not killed:
                deployment.restart_live("live1")  # returns once live1 is up again
                restarted.append(seconds)
                assert deployment.mirror is not None
                deployment.mirror.kill()
                killed.append(seconds)
                deployment.mirror.start()

        run = deployment.run(table, spark, events=EVENTS, rate=RATE, window_ms=2000,
                             evolve_at=0.5, load_interval_s=3.0, during=during)
        result = audit_deployment(spark, deployment.offline_bootstrap, table, LIVE,
                                  schema_registry_url=deployment.schema_registry_url,
                                  read_committed=True)
        writers = registered_schemas(deployment.schema_registry_url)
        from confluent_kafka.schema_registry import SchemaRegistryClient

        versions = SchemaRegistryClient({"url": deployment.schema_registry_url}).get_versions(
            ACTIVITY_SUBJECT)
    assert killed, "the mirror was never killed"
    assert restarted, "live1's broker was never restarted"
    assert run.events == 2 * EVENTS
    # loads run every 3 s while the frontends publish; how many find mirrored records before
    # the final one depends on the machine's speed (the mirror restarts meanwhile)
    assert run.loads, "no load stored anything"
    assert result.ok, [w for w in result.mismatches]
    assert result.rows == 2 * EVENTS
    assert {w.cluster for w in result.windows} == set(LIVE)
    assert {w.topic.split(".")[0] for w in result.windows} == set(LIVE)
    # the schema evolved mid-run: version 2 registered, both versions' rows loaded as written
    assert versions == [1, 2]
    rows = spark.read.parquet(str(table))
    per_schema: dict[int, int] = {}
    for generated in run.generated.values():
        for schema_id, count in generated.per_schema.items():
            per_schema[schema_id] = per_schema.get(schema_id, 0) + count
    assert len(per_schema) == 2 and set(per_schema) <= set(writers)
    old, new = sorted(per_schema)
    with_referrer = rows.where(F.col("referrer").isNotNull()).count()
    assert 0 < with_referrer < per_schema[new]  # v2 writes a referrer half the time
    lat = latency(spark, table, run.loads)
    assert lat.rows == 2 * EVENTS
    assert 0 < lat.p50_s < 60
    print(f"end-to-end latency: mean {lat.mean_s:.1f} s, p50 {lat.p50_s:.1f} s, "
          f"p99 {lat.p99_s:.1f} s, max {lat.max_s:.1f} s")


def test_a_record_deleted_from_the_offline_cluster_is_caught_by_the_audit(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "warehouse" / "events"
    topics = Topics()
    with Deployment(tmp_path / "clusters", topics=topics) as deployment:
        victim = f"live1.{topics.activity('page_view')}"

        def drop_one() -> None:  # the record at the log start of partition 0 goes
            admin = AdminClient({"bootstrap.servers": deployment.offline_bootstrap})
            low = _log_start(deployment.offline_bootstrap, victim)
            futures = admin.delete_records([TopicPartition(victim, 0, low + 1)])
            for future in futures.values():
                future.result(30)

        deployment.run(table, spark, events=600, rate=300.0, window_ms=2000, evolve_at=None,
                       load_interval_s=None, before_final_load=drop_one)
        result = audit_deployment(spark, deployment.offline_bootstrap, table, LIVE,
                                  schema_registry_url=deployment.schema_registry_url,
                                  read_committed=True)
    assert not result.ok
    (missing,) = result.mismatches
    assert (missing.cluster, missing.topic, missing.status) == ("live1", victim, "MISSING")
    assert missing.monitored - missing.loaded == 1


def _log_start(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-start"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        return int(low)
    finally:
        consumer.close()
