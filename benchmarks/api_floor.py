"""What PySpark's Python data source API costs by itself: the floor under every ``spark.read.format`` /
``df.write.format`` ratio of mergetable's data source.

:class:`ApiFloor` (registered as ``mergetable_api_floor``) hands Spark the rows of the Parquet files named by
its ``paths`` option (comma-separated) and does nothing else: no snapshot, no planning, no merge. Each worker
process decodes a file once and keeps its Arrow batches, so after a warm-up query a read through it pays only
what the API itself costs on this PySpark: a Python worker per task, every batch over a socket, the JVM
turning every batch into rows, no column pruning. Its writer drains its input (the JVM's conversion of every
row to Arrow) and writes nothing. For the same query, then,

* ``floor / native`` is what no Python data source can avoid, and
* ``mergetable / floor`` is what mergetable adds on top of it.

Give the read its schema (``spark.read.format("mergetable_api_floor").schema(...)``); the data source infers
none. :func:`register` makes the class available to a session (it is shipped to the workers by value).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

NAME = "mergetable_api_floor"
_CACHE = "_mergetable_api_floor_decoded"


def balanced(paths: Sequence[str], sizes: Sequence[int], parts: int) -> list[list[str]]:
    """``paths`` in at most ``parts`` groups of about equal bytes (largest first, each to the lightest group).

    >>> balanced(["a", "b", "c", "d"], [5, 4, 3, 2], 2)
    [['a', 'd'], ['b', 'c']]
    """
    groups: list[list[str]] = [[] for _ in range(max(1, min(parts, len(paths))))]
    weight = [0] * len(groups)
    for size, path in sorted(zip(sizes, paths, strict=True), key=lambda sp: -sp[0]):
        lightest = weight.index(min(weight))
        groups[lightest].append(path)
        weight[lightest] += size
    return groups


class FloorReader(DataSourceReader):
    def __init__(self, paths: list[str], schema: StructType, parts: int) -> None:
        self.paths = paths
        self.parts = parts
        self.names = schema.fieldNames()
        self.target = pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in schema.fields])

    def partitions(self) -> list[InputPartition]:
        groups = balanced(self.paths, [os.path.getsize(p) for p in self.paths], self.parts)
        return [InputPartition(tuple(g)) for g in groups]  # each task reads its files one after another

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        decoded = _decoded()
        for path in partition.value:
            key = (path, tuple(self.names))
            if key not in decoded:
                table = pq.read_table(path, columns=self.names)
                decoded[key] = [pa.RecordBatch.from_arrays(b.columns, schema=self.target) for b in table.to_batches()]
            yield from decoded[key]


class DrainWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class ApiFloor(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def reader(self, schema: StructType) -> DataSourceReader:
        paths = [p for p in str(self.options.get("paths", "")).split(",") if p]
        return FloorReader(paths, schema, int(self.options.get("partitions", "2")))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return DrainWriter()


def _decoded() -> dict[tuple[str, tuple[str, ...]], list[pa.RecordBatch]]:
    """This worker process's decoded files: after a warm-up query the floor hands Spark Arrow batches already in
    memory, so it times the API alone, not Parquet decoding. Kept on ``sys``: Spark unpickles this module's code
    anew for every task, while a worker process serves task after task."""
    cache: dict[tuple[str, tuple[str, ...]], list[pa.RecordBatch]] = sys.__dict__.setdefault(_CACHE, {})
    return cache


def _arrow_type(dt: Any) -> pa.DataType:
    from pyspark.sql import types as T

    known = {T.LongType: pa.int64(), T.IntegerType: pa.int32(), T.DoubleType: pa.float64(), T.StringType: pa.string()}
    for cls, arrow in known.items():
        if isinstance(dt, cls):
            return arrow
    raise TypeError(f"{NAME} reads long, int, double and string columns, not {dt}")


def register(spark: Any) -> None:
    """Make ``mergetable_api_floor`` available to ``spark`` (its workers unpickle this module's classes by value)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(ApiFloor)
