"""The ceiling of any PySpark Python data source on this machine: a source that does no work.

``format("python_floor")`` has samsa's schema (Spark's Kafka source schema) and as many
partitions as the topic; each task builds one Arrow record batch of ``BATCH_ROWS`` rows
(100-byte values, null keys, the topic's name, offsets, timestamps) once and yields it again and
again until it has handed over its share of ``rows``. Nothing is fetched and nothing decoded, so
what a query of it costs is PySpark's own: starting the Python workers, sending Arrow batches to
the JVM and turning them into Spark rows. ``bench/spark_bench.py``'s ``floor_count`` and
``floor_scan`` run it beside ``samsa_count`` and ``samsa_scan``: the samsa source cannot be
faster than this floor, whatever its decoding costs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from samsa.spark.source import BATCH_ROWS, arrow_schema, kafka_schema

if TYPE_CHECKING:
    import pyarrow as pa


class FloorPartition(InputPartition):
    def __init__(self, index: int, rows: int) -> None:
        super().__init__(index)
        self.index, self.rows = index, rows


class FloorReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.rows = int(options["rows"])
        self.partitions_ = int(options.get("partitions", "3"))
        self.value_bytes = int(options.get("valueBytes", "100"))
        self.topic = options.get("topic", "floor")

    def partitions(self) -> Sequence[InputPartition]:
        n = self.partitions_
        return [FloorPartition(i, self.rows // n + (1 if i < self.rows % n else 0))
                for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FloorPartition)
        batch = self._batch(partition.index, min(BATCH_ROWS, partition.rows))
        left = partition.rows
        while left > 0:
            yield batch if left >= batch.num_rows else batch.slice(0, left)
            left -= batch.num_rows

    def _batch(self, index: int, rows: int) -> pa.RecordBatch:
        import numpy as np
        import pyarrow as pa

        width = self.value_bytes
        values = pa.Array.from_buffers(
            pa.binary(), rows,
            [None, pa.py_buffer(np.arange(rows + 1, dtype=np.int32) * width),
             pa.py_buffer(np.random.default_rng(index).bytes(rows * width))])
        offsets = np.arange(rows, dtype=np.int64)
        columns = [
            pa.nulls(rows, pa.binary()),
            values,
            pa.array([self.topic] * rows, pa.string()),
            pa.array(np.full(rows, index, np.int32)),
            pa.array(offsets),
            pa.array(offsets * 1000 + 1_700_000_000_000_000, pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(rows, np.int32)),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False))


class FloorDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "python_floor"

    def schema(self) -> StructType:
        return kafka_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return FloorReader(dict(self.options))
