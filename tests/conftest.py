"""Fixtures shared by the test packages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole test session (Spark's start-up is slow), with
    samsa's data source registered: the pipeline's own session settings (UTC, loopback)."""
    from samsa.pipeline.session import spark_session

    session = spark_session("local[2]", app="samsa-tests")
    try:
        yield session
    finally:
        session.stop()
