"""samsa on Spark: a PySpark (4.x) Python Data Source with the options of Spark's Kafka connector.

    import samsa.spark
    samsa.spark.register(spark)
    df = (spark.read.format("samsa")
          .option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", "events")
          .load())

Needs ``pyspark>=4.0`` and ``pyarrow``. Only the batch read path exists so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.spark.source import SamsaDataSource, SamsaSourceError, kafka_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SamsaDataSource", "SamsaSourceError", "kafka_schema", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("samsa")`` available in this Spark session."""
    spark.dataSource.register(SamsaDataSource)
