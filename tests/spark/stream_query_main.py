"""A streaming query in a process of its own, for tests/spark/test_stream_kill.py (which SIGKILLs
it): samsa topic -> parquet, with a checkpoint.

    python stream_query_main.py --bootstrap 127.0.0.1:9092 --topic t --out OUT \
        --checkpoint CKPT --local-dir DIR --trigger processing|available-now \
        [--max-offsets N] [--timeout SECONDS]

``processing`` runs with ``trigger(processingTime="500 milliseconds")`` until it is killed (or
``--timeout`` passes: exit code 3, so an orphan never runs for ever); ``available-now`` runs with
``trigger(availableNow=True)`` and exits 0 when the query is done. A failed query exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--local-dir", required=True)
    parser.add_argument("--trigger", choices=("processing", "available-now"), required=True)
    parser.add_argument("--max-offsets", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)

    # Python workers must run this interpreter (the one with samsa and confluent-kafka).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    import samsa.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"samsa-stream-{args.trigger}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.local.dir", args.local_dir)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(spark)

    reader = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
    )
    if args.max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets))
    writer = (
        reader.load()
        .selectExpr("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.trigger == "processing":
        writer = writer.trigger(processingTime="500 milliseconds")
    else:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    print(f"started query {query.id} run {query.runId}", flush=True)

    finished = query.awaitTermination(args.timeout)
    if not finished:
        print(f"query still running after {args.timeout}s: stopping it", flush=True)
        query.stop()
        spark.stop()
        return 3
    if query.exception() is not None:
        print(f"query failed: {query.exception()}", flush=True)
        spark.stop()
        return 2
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"query done: {rows} rows in batches {batches}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
