"""Batch reading: splits packed into Spark partitions (see :mod:`mergetable.spark.packing`), merged in the
Python workers, Arrow batches out.

:class:`MergeTableReader` never overrides ``pushFilters``, so it works whatever
``spark.sql.python.filterPushdown.enabled`` is (Spark filters the rows). :class:`PushdownMergeTableReader`
adds ``pushFilters``; PySpark refuses such a reader when the conf is off, so the data source hands it out
only when it is being created by Spark's filter-pushdown worker (see :func:`created_for_pushdown`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from mergetable.core.options import DEFAULT_SPLIT_SIZE
from mergetable.core.predicates import Conjunct
from mergetable.read.scan import Sections, Split
from mergetable.spark.filters import and_dnf, split_filters
from mergetable.spark.options import DEFAULT_BATCH_SIZE
from mergetable.spark.packing import pack_splits
from mergetable.spark.types import spark_arrow_schema, spark_batches
from mergetable.table import Table

_PUSHDOWN_WORKER = "data_source_pushdown_filters.py"


def created_for_pushdown() -> bool:
    """Whether the reader being created will be offered filters (we run inside Spark's pushdown worker).

    Spark plans a filtered read in ``pyspark/sql/worker/data_source_pushdown_filters.py`` only when
    ``spark.sql.python.filterPushdown.enabled`` is true; any other caller gets the plain reader, which is
    always safe (Spark then applies every filter itself).
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_PUSHDOWN_WORKER):
            return True
        frame = frame.f_back
    return False


class SplitPartition(InputPartition):
    """Some :class:`~mergetable.read.scan.Split` s (each some key-disjoint sections of one bucket), read in turn."""

    def __init__(self, split: Split, *more: Split) -> None:
        super().__init__((split, *more))
        self.split = split
        self.splits = (split, *more)

    def __repr__(self) -> str:
        where = [(list(s.partition), s.bucket) for s in self.splits]
        return f"SplitPartition(buckets={where}, files={sum(len(s.files) for s in self.splits)})"


class MergeTableReader(DataSourceReader):
    """Reads one snapshot of a table: merged, filtered by ``dnf``, projected to ``schema``'s columns."""

    def __init__(
        self,
        table: Table,
        snapshot_id: int | None,
        schema: StructType,
        dnf: list[Conjunct] | None = None,
        split_size: int = DEFAULT_SPLIT_SIZE,
        batch_size: int = DEFAULT_BATCH_SIZE,
        incremental_between: tuple[int | str, int | str] | None = None,
        sections: Sections = "all",
    ) -> None:
        self.table = table
        self.sections: Sections = sections
        self.incremental_between = incremental_between
        self.snapshot_id = snapshot_id
        self.columns: list[str] = list(schema.fieldNames())
        self.target: pa.Schema = spark_arrow_schema(schema)
        self.dnf = dnf
        self.split_size = split_size
        self.batch_size = batch_size

    def partitions(self) -> Sequence[InputPartition]:
        if self.incremental_between is not None:
            splits = self.table.plan(
                filter=self.dnf, incremental_between=self.incremental_between, target_split_size=self.split_size
            )
            return self._packed(splits)
        if self.snapshot_id is None:
            return []
        splits = self.table.plan(
            filter=self.dnf, snapshot_id=self.snapshot_id, target_split_size=self.split_size, sections=self.sections
        )
        return self._packed(splits)

    def _packed(self, splits: Sequence[Split]) -> list[InputPartition]:
        return [SplitPartition(*group) for group in pack_splits(splits, self.split_size)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        splits = getattr(partition, "splits", None)
        if splits is None:  # Spark's placeholder partition of an empty plan
            return
        reader = self.table.split_reader(self.columns, self.dnf)
        for split in splits:
            for table in reader.read_split(split, even=True):  # one split at a time: nothing queues windows
                yield from spark_batches(table, self.target, self.batch_size)


class PushdownMergeTableReader(MergeTableReader):
    """A reader that takes the filters it can apply exactly (see :mod:`mergetable.spark.filters`)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        accepted, rejected = split_filters(filters, self.table.schema)
        self.dnf = and_dnf(self.dnf, accepted)
        return rejected


__all__ = ["MergeTableReader", "PushdownMergeTableReader", "SplitPartition", "created_for_pushdown"]
