"""Fixtures shared by the test packages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import built
import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


SPARK_KAFKA_CLASSPATH = built.ROOT / "build" / "spark-kafka" / "classpath.txt"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole test session (Spark's start-up is slow), with
    samsa's data source registered: the pipeline's own session settings (UTC, loopback), and
    Spark's own Kafka connector (``format("kafka")``) on its classpath."""
    from samsa.pipeline.session import spark_session

    jars = built.classpath(SPARK_KAFKA_CLASSPATH, "Spark's Kafka connector (make reference)")
    session = spark_session("local[2]", app="samsa-tests", jars=jars.split(":"))
    try:
        yield session
    finally:
        session.stop()
