"""The ``mergetable`` PySpark data source: ``spark.read.format("mergetable")`` and ``df.write.format("mergetable")``.

Snapshot pinning: the snapshot a DataFrame reads is resolved once, when it is loaded (``schema()``), so every
action on that DataFrame reads the same snapshot whether filter pushdown is on or off. Load again to see
newer commits.

Filter pushdown (``pushdown`` read option):

* ``false``: never take filters; Spark applies them all.
* ``true``: when ``spark.sql.python.filterPushdown.enabled`` is on, take the filters mergetable can apply
  exactly (partition, bucket and key-range pruning, then exact filtering after the merge).
* ``auto`` (default): ``true`` on PySpark versions that scope pushdown results to one scan, ``false`` on
  those (PySpark 4.3 and older) that keep one read plan per loaded relation and run it for every scan of
  the DataFrame, whatever that scan's filters: a later scan pushing nothing, or another scan of the same
  DataFrame in one query (a self-union, a self-join filtered two ways), would run the last pushed query's
  plan. Nothing about the scan reaches ``partitions()`` or ``read()``, so on those versions the plan must not
  depend on Spark's filters (the ``filter`` read option prunes per DataFrame and is always safe).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.core.filters import bind_filters
from mergetable.core.read_options import ReadRequest
from mergetable.read.scan_modes import StreamOptions
from mergetable.spark.changes import (
    MergeTableStreamReader,
    batch_change_reader,
    split_audit_log,
    wants_changes,
    with_row_kind,
)
from mergetable.spark.options import ReadOptions
from mergetable.spark.reader import MergeTableReader, PushdownMergeTableReader, created_for_pushdown
from mergetable.spark.sink import MergeTableStreamWriter, plan_stream_write
from mergetable.spark.system import SystemRead, SystemTableReader, per_query, without_resolve_option
from mergetable.spark.types import spark_schema
from mergetable.spark.views import LatestPerQueryReader
from mergetable.spark.writer import MergeTableWriter, plan_write
from mergetable.table import Table, open_table

_UNPINNED = "unpinned"


def pushdown_scoped_per_scan() -> bool:
    """Whether this PySpark keeps pushed-down read plans per scan (they came together with ``pushLimit``)."""
    return hasattr(DataSourceReader, "pushLimit")


def resolve_snapshot_id(table: Table, request: ReadRequest) -> int | None:
    """The snapshot id a read of ``request`` uses (None: the table has no snapshot)."""
    t = request.travel
    if not t.given:
        return table.latest_snapshot_id()
    snap = table.resolve_snapshot(t.snapshot_id, t.timestamp_ms, t.tag, t.version)
    if snap is None and t.given:
        key, value = request.source or ("time travel", "?")
        raise SnapshotNotFoundError(f"no snapshot for {key}={value}")
    return None if snap is None else snap.id


class MergeTableDataSource(DataSource):
    """Batch read and write of mergetable tables. Registered as ``mergetable``."""

    @classmethod
    def name(cls) -> str:
        return "mergetable"

    # -- reading ----------------------------------------------------------------------------------
    def _read_options(self) -> ReadOptions:
        options = without_resolve_option(self.options)
        path, self._audit_log = split_audit_log(str(options.get("path", "")))
        return ReadOptions.parse({**options, "path": path} if self._audit_log else options)

    def _changes(self) -> bool:
        """Whether this read returns change rows (``$audit_log``, ``read.changelog``, a stream's options)."""
        return bool(getattr(self, "_audit_log", False)) or wants_changes(self.options)

    def _pinned_snapshot(self, table: Table, opts: ReadOptions) -> int | None:
        if per_query(self.options):
            return resolve_snapshot_id(table, opts.request)
        pinned: Any = getattr(self, "_snapshot_id", _UNPINNED)
        if pinned == _UNPINNED:
            pinned = resolve_snapshot_id(table, opts.request)
            self._snapshot_id = pinned
        return None if pinned is None else int(pinned)

    def _travelled(self, table: Table, opts: ReadOptions) -> Table:
        """``table`` with the schema its time-travel snapshot was committed with (the current one otherwise)."""
        if not opts.request.travel.given or self._changes():
            return table
        snapshot_id = self._pinned_snapshot(table, opts)
        return table if snapshot_id is None else table.as_of_schema(table.snapshot(snapshot_id).schema_id)

    def schema(self) -> StructType:
        if (system := SystemRead.of(self.options)) is not None:
            return system.spark_schema()
        opts = self._read_options()
        table = self._travelled(open_table(opts.uri, opts.storage), opts)
        self._pinned_snapshot(table, opts)
        schema = spark_schema(table.schema, opts.columns)
        return with_row_kind(schema, self._audit_log) if self._changes() else schema

    def reader(self, schema: StructType) -> DataSourceReader:
        if (system := SystemRead.of(self.options)) is not None:
            return SystemTableReader(system, schema)
        opts = self._read_options()
        table = self._travelled(open_table(opts.uri, opts.storage), opts)
        dnf = bind_filters(opts.request.filter, table.schema)
        if self._changes():
            if opts.sections != "all":
                raise OptionsError("sections", "must be 'all' for a read of changes")
            snapshot = self._pinned_snapshot(table, opts)
            return batch_change_reader(table, schema, self.options, snapshot, dnf, opts.batch_size)
        spark_schema(table.schema, schema.fieldNames())  # a user-given schema must name table columns
        pushdown = opts.pushdown == "true" or (opts.pushdown == "auto" and pushdown_scoped_per_scan())
        cls: type[MergeTableReader] = MergeTableReader
        if pushdown and created_for_pushdown():
            cls = PushdownMergeTableReader  # planned per scan by Spark: the pinned snapshot is resolved per query
        elif per_query(self.options) and not opts.request.travel.given and opts.request.incremental_between is None:
            cls = LatestPerQueryReader
        snapshot = self._pinned_snapshot(table, opts)
        return cls(
            table,
            snapshot,
            schema,
            dnf,
            opts.split_size,
            opts.batch_size,
            opts.request.incremental_between,
            opts.sections,
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = self._read_options()
        table = open_table(opts.uri, opts.storage)
        return MergeTableStreamReader(table, schema, StreamOptions.parse(self.options), opts.batch_size)

    # -- writing ----------------------------------------------------------------------------------
    def writer(self, schema: StructType, overwrite: bool) -> MergeTableWriter:
        return MergeTableWriter(plan_write(dict(self.options), schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> MergeTableStreamWriter:
        return MergeTableStreamWriter(plan_stream_write(dict(self.options), schema, overwrite))


DefaultSource = MergeTableDataSource

__all__ = ["DefaultSource", "MergeTableDataSource", "pushdown_scoped_per_scan", "resolve_snapshot_id"]
