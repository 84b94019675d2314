"""Change data in Spark: ``spark.readStream.format("mergetable")``, batch ``incremental-between`` and ``$audit_log``.

Planning is the read tier's (:mod:`mergetable.read.stream`, :mod:`mergetable.read.changes`); this module
only adapts it to PySpark's ``DataSourceStreamReader`` / ``DataSourceReader``.

Offsets are :class:`~mergetable.read.stream.Position` s as JSON (``{"nextSnapshot": N, "fullScan": b, "tableId": id}``,
:meth:`~mergetable.read.stream.ChangeStream.offset`: a restart on a table re-created at the path is refused),
so a query restarted from its checkpoint continues exactly where it stopped. ``Trigger.AvailableNow`` is
supported (the target is the latest snapshot when the query starts); ``max-snapshots-per-trigger`` always
applies and ``read.stream.maxFilesPerTrigger`` / ``maxRowsPerTrigger`` are handed to Spark as the default
read limit (Spark's ``ReadMaxFiles`` / ``ReadMaxRows``), which it may override.

Spark's Python data sources infer one schema for batch and streaming reads, so the ``_row_kind`` column
is part of the schema only when the read asks for change data: ``read.changelog=true`` (Delta's
``readChangeFeed``), any streaming option (``scan.mode``, ``consumer-id`` …) or an ``incremental-between*``
option. A stream without any of them (``spark.readStream.format("mergetable").load(uri)``, or
``read.changelog=false``) is read in the table's own schema, as Paimon's and Delta's Spark sources stream a
table: the latest snapshot, then each later commit's **after-images** (``+I`` and ``+U`` rows). ``-U`` and ``-D``
rows are dropped (:func:`~mergetable.read.changes.after_images`): a row without a kind cannot say it was
deleted, and delivering a delete as if it were a row would resurrect it downstream. Paimon's Spark source
has no kind column without ``read.changelog`` either (a Spark row carries no kind), so its consumers cannot
tell a delete from an insert; ask for ``read.changelog=true`` to see deletes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StringType, StructField, StructType

from mergetable.core.option_map import OptionMap
from mergetable.core.predicates import Conjunct
from mergetable.core.rowkind import ROW_KIND_COLUMN
from mergetable.read.change_api import AUDIT_ROW_KIND
from mergetable.read.changes import ChangeSplit, after_images
from mergetable.read.scan_modes import IncrementalOptions, StreamOptions
from mergetable.read.stream import ChangeStream, Position
from mergetable.spark.options import CHANGE_KEYS, READ_CHANGELOG_KEYS
from mergetable.spark.types import spark_arrow_schema, spark_batches
from mergetable.table import Table

AUDIT_LOG_SUFFIX = "$audit_log"
READ_CHANGELOG = "read.changelog"


def wants_changes(options: Mapping[str, str]) -> bool:
    """Whether a read asks for change rows (a ``_row_kind`` column)."""
    opts = OptionMap.of(options)
    if (given := opts.first(*READ_CHANGELOG_KEYS)) is not None:
        return opts.flag(given[0])
    time_travel_too = {"scan.snapshot-id", "scan.timestamp-millis", "scan.timestamp", "scan.tag-name"}
    return any(k in opts for k in CHANGE_KEYS - time_travel_too - set(READ_CHANGELOG_KEYS))


def split_audit_log(path: str) -> tuple[str, bool]:
    """``uri$audit_log`` → (``uri``, True)."""
    if path.endswith(AUDIT_LOG_SUFFIX):
        return path[: -len(AUDIT_LOG_SUFFIX)], True
    return path, False


def with_row_kind(schema: StructType, audit_log: bool) -> StructType:
    kind = StructField(AUDIT_ROW_KIND if audit_log else ROW_KIND_COLUMN, StringType(), True)
    return StructType([kind, *schema.fields]) if audit_log else StructType([*schema.fields, kind])


def _data_columns(schema: StructType) -> tuple[list[str], str | None]:
    names = schema.fieldNames()
    kind = next((k for k in (ROW_KIND_COLUMN, AUDIT_ROW_KIND) if k in names), None)
    return [n for n in names if n != kind], kind


class ChangePartition(InputPartition):
    def __init__(self, change: ChangeSplit) -> None:
        super().__init__(change.snapshot_id)
        self.change = change


class _ChangeRows:
    """Reads change splits into Arrow batches shaped as Spark expects (``_row_kind`` last or ``rowkind`` first)."""

    def __init__(self, stream: ChangeStream, schema: StructType, dnf: list[Conjunct] | None, batch_size: int) -> None:
        self.stream = stream
        self.columns, self.kind_column = _data_columns(schema)
        self.target = spark_arrow_schema(schema)
        self.dnf = dnf
        self.batch_size = batch_size

    def rows(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        change = getattr(partition, "change", None)
        if change is None:
            return
        reader = self.stream.reader(self.columns, self.dnf)
        for table in self.stream.read_split(reader, change):
            if self.kind_column is None:  # the table's own schema: after-images only (see the module)
                yield from spark_batches(after_images(table), self.target, self.batch_size)
                continue
            kinds = table.column(ROW_KIND_COLUMN)
            data = table.drop_columns([ROW_KIND_COLUMN])
            if self.kind_column == AUDIT_ROW_KIND:
                out = data.add_column(0, self.kind_column, kinds)
            else:
                out = data.append_column(ROW_KIND_COLUMN, kinds)
            yield from spark_batches(out, self.target, self.batch_size)


class MergeTableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("mergetable")``: one micro-batch = whole snapshots, never part of one."""

    def __init__(self, table: Table, schema: StructType, options: StreamOptions, batch_size: int) -> None:
        columns, _ = _data_columns(schema)  # no kind column: after-images in the table's schema
        table.split_reader(columns)  # every column must exist
        self.stream = ChangeStream(table.fileio, table.table_schema, options)
        self.rows = _ChangeRows(self.stream, schema, None, batch_size)
        self.until: int | None = None
        self.committed: Position | None = None

    def initialOffset(self) -> dict[str, Any]:
        return self.stream.offset(self.stream.initial())

    def prepareForTriggerAvailableNow(self) -> None:
        self.until = self.stream.snapshots.latest_id() or 0

    def getDefaultReadLimit(self) -> ReadLimit:
        opts = self.stream.options
        if opts.max_files_per_trigger is not None:
            return ReadMaxFiles(opts.max_files_per_trigger)
        if opts.max_rows_per_trigger is not None:
            return ReadMaxRows(opts.max_rows_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit | None = None) -> dict[str, Any]:
        position = self.stream.position(start)
        # Spark asks for the batch after `start` only once everything before `start` reached the sink, so the
        # consumer's progress can be recorded here: Spark's own commit() of the last batch comes lazily, at the
        # next batch or at the next run (never at the end of a Trigger.AvailableNow run).
        self.commit(start)
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self.stream.offset(self.stream.latest(position, self.until, max_files, max_rows))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        latest = self.stream.snapshots.latest_id()
        return None if latest is None else self.stream.offset(Position(latest + 1))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        changes = self.stream.plan(self.stream.position(start), self.stream.position(end))
        return [ChangePartition(c) for c in changes]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.rows.rows(partition)

    def commit(self, end: dict[str, Any]) -> None:
        position = self.stream.position(end)
        if position != self.committed:
            self.stream.commit(position)
            self.committed = position


def batch_change_reader(
    table: Table,
    schema: StructType,
    options: Mapping[str, str],
    snapshot_id: int | None,
    dnf: list[Conjunct] | None,
    batch_size: int,
) -> ChangeDataReader:
    """The batch reader of an ``incremental-between*`` read, or of ``$audit_log`` at ``snapshot_id``."""
    planner = table.change_planner()
    incremental = IncrementalOptions.parse(options)
    if incremental is not None:
        window = (
            table.change_range(timestamps=incremental.timestamps)
            if incremental.timestamps is not None
            else table.change_range(*incremental.between)  # type: ignore[misc]
        )
        changes = planner.between(window, incremental.mode, dnf)
    elif snapshot_id is not None:
        changes = planner.snapshot(table.snapshot(snapshot_id), dnf)
    else:
        changes = []
    return ChangeDataReader(table, schema, changes, dnf, batch_size)


class ChangeDataReader(DataSourceReader):
    """Batch change data: ``incremental-between(-timestamp)`` with its scan mode, or ``$audit_log``."""

    def __init__(self, table: Table, schema: StructType, changes: list[ChangeSplit], dnf: list[Conjunct] | None,
                 batch_size: int) -> None:  # fmt: skip
        self.changes = changes
        self.rows = _ChangeRows(
            ChangeStream(table.fileio, table.table_schema, StreamOptions()), schema, dnf, batch_size
        )

    def partitions(self) -> Sequence[InputPartition]:
        return [ChangePartition(c) for c in self.changes]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.rows.rows(partition)


__all__ = [
    "AUDIT_LOG_SUFFIX",
    "CHANGE_KEYS",
    "ChangeDataReader",
    "MergeTableStreamReader",
    "batch_change_reader",
    "split_audit_log",
    "wants_changes",
    "with_row_kind",
]
