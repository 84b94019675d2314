"""Batch reading: splits packed into Spark partitions (see :mod:`mergetable.spark.packing`), merged in the
Python workers, Arrow batches out.

The data source parses its options once into a :class:`~mergetable.spark.options.ReadOptions` (the shared
:class:`~mergetable.core.read_options.ReadRequest` plus Spark's own options), binds the filter once, pins the
snapshot, and hands all of it to the reader ``spark.source.reader_class`` picks; the reader plans with
``Table.plan_bound`` and reads with a ``SplitReader`` of that bound filter, validating and binding nothing again.

:class:`MergeTableReader` never overrides ``pushFilters``, so it works whatever
``spark.sql.python.filterPushdown.enabled`` is (Spark filters the rows). :class:`PushdownMergeTableReader`
adds ``pushFilters``; PySpark refuses such a reader when the conf is off, so the data source hands it out
only when it is being created by Spark's filter-pushdown worker (see :func:`created_for_pushdown`).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from mergetable.core.predicates import Conjunct
from mergetable.core.read_options import TimeTravel
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split
from mergetable.spark.filters import and_dnf, split_filters
from mergetable.spark.options import ReadOptions
from mergetable.spark.packing import pack_splits
from mergetable.spark.types import spark_arrow_schema, spark_batches
from mergetable.table import Table

_PUSHDOWN_WORKER = "data_source_pushdown_filters.py"


def created_for_pushdown() -> bool:
    """Whether the reader being created will be offered filters (we run inside Spark's pushdown worker).

    Why the call stack: PySpark 4.3 creates a reader (``DataSource.reader``) in one of two workers.
    ``pyspark/sql/worker/data_source_pushdown_filters.py`` runs only when
    ``spark.sql.python.filterPushdown.enabled`` is on and Spark has filters to offer; it calls ``pushFilters``.
    ``plan_data_source_read.py`` runs otherwise, and refuses (``DATA_SOURCE_PUSHDOWN_DISABLED``) a reader
    that overrides ``pushFilters`` when the conf is off. The conf's value reaches neither the data source's
    options nor its ``reader()`` call (the planning worker reads it into a local variable), and a Python worker
    has no Spark session to ask, so which worker is calling is the only thing that says whether a reader with
    ``pushFilters`` will be accepted. Without it, ``pushdown=true`` with the conf off would fail every query
    instead of leaving the filters to Spark. Any other caller gets the plain reader, which is always safe.
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
    """Reads one snapshot (or an incremental range) of a table: merged, filtered by the bound ``dnf``,
    projected to ``schema``'s columns, as ``opts`` (parsed by the data source) asks."""

    def __init__(
        self, table: Table, snapshot_id: int | None, schema: StructType, dnf: list[Conjunct] | None, opts: ReadOptions
    ) -> None:
        self.table = table
        self.snapshot_id = snapshot_id
        self.request = opts.request
        self.sections = opts.sections
        self.batch_size = opts.batch_size
        self.columns: list[str] = list(schema.fieldNames())
        self.target: pa.Schema = spark_arrow_schema(schema)
        self.dnf = dnf

    @property
    def split_size(self) -> int:
        return self.request.split_size

    def partitions(self) -> Sequence[InputPartition]:
        if self.request.incremental_between is not None:
            return self._packed(self.table.plan_bound(self.request, self.dnf))
        if self.snapshot_id is None:
            return []
        return self._packed(self._plan_snapshot(self.table, self.snapshot_id))

    def _plan_snapshot(self, table: Table, snapshot_id: int) -> list[Split]:
        """The splits of snapshot ``snapshot_id`` of ``table`` (the pinned one, or a task's latest)."""
        pinned = dataclasses.replace(self.request, travel=TimeTravel(snapshot_id=snapshot_id))
        return table.plan_bound(pinned, self.dnf, self.sections)

    def _packed(self, splits: Sequence[Split]) -> list[InputPartition]:
        return [SplitPartition(*group) for group in pack_splits(splits, self.split_size)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        splits = getattr(partition, "splits", None)
        if splits is None:  # Spark's placeholder partition of an empty plan
            return
        table = self.table  # the columns were checked and the filter bound by the data source
        reader = SplitReader(table.fileio, table.table_schema, table.merge_function, self.columns, self.dnf)
        for split in splits:
            for table in reader.read_split(split, even=True):  # one split at a time: nothing queues windows
                yield from spark_batches(table, self.target, self.batch_size)


class PushdownMergeTableReader(MergeTableReader):
    """A reader that takes the filters it can apply exactly (see :mod:`mergetable.spark.filters`)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        accepted, rejected = split_filters(filters, self.table.schema)
        self.dnf = and_dnf(self.dnf, accepted)
        return rejected


__all__ = [
    "MergeTableReader",
    "PushdownMergeTableReader",
    "SplitPartition",
    "created_for_pushdown",
]
