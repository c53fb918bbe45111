"""samsa on Spark: a PySpark (4.x) Python Data Source with the options of Spark's Kafka connector.

    import samsa.spark
    samsa.spark.register(spark)
    df = (spark.read.format("samsa")
          .option("kafka.bootstrap.servers", broker.bootstrap_servers)
          .option("subscribe", "events")
          .load())

Reads (``spark.read``, ``spark.readStream``) and writes (``df.write.mode("append")``,
``df.writeStream``) with Spark's Kafka option names and schema. Needs ``pyspark>=4.0`` and
``pyarrow`` (the ``spark`` extra).
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
