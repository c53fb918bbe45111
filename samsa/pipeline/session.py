"""The local SparkSession the pipeline's jobs run in, with ``format("samsa")`` registered."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_session(
    master: str = "local[*]", app: str = "samsa-pipeline", progress: bool = False
) -> SparkSession:
    """A SparkSession (Spark's UI off, UTC, loopback) that can read and write samsa topics.

    ``progress`` turns on Spark's console progress bar for the stages of long jobs.
    """
    from pyspark.sql import SparkSession

    import samsa.spark

    # Python workers must run this interpreter: the one with samsa, fastavro and confluent-kafka.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver and tasks stay on loopback
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    samsa.spark.register(session)
    return session
