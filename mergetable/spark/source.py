"""The ``mergetable`` PySpark data source: ``spark.read.format("mergetable")`` and ``df.write.format("mergetable")``.

Snapshot pinning: the snapshot a DataFrame reads is resolved once, when it is loaded (``schema()``), so every
action on that DataFrame reads the same snapshot whether filter pushdown is on or off. Load again to see
newer commits.

Filter pushdown (``pushdown`` read option):

* ``false``: never take filters; Spark applies them all.
* ``true``: when ``spark.sql.python.filterPushdown.enabled`` is on, take the filters mergetable can apply
  exactly (partition, bucket and key-range pruning, then exact filtering after the merge). Refused (an
  ``OptionsError`` naming ``pushdown``) on PySpark versions that keep one read plan per loaded relation
  (PySpark 4.x up to 4.3), where it would return a filtered query's rows to a later unfiltered scan.
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
from mergetable.spark.errors import concise_errors, require_location
from mergetable.spark.options import ReadOptions, pushdown_scoped_per_scan
from mergetable.spark.reader import MergeTableReader, PushdownMergeTableReader, created_for_pushdown
from mergetable.spark.sink import MergeTableStreamWriter, plan_stream_write
from mergetable.spark.system import SystemRead, SystemTableReader, per_query, without_resolve_option
from mergetable.spark.types import spark_schema
from mergetable.spark.views import LatestPerQueryReader
from mergetable.spark.writer import MergeTableWriter, plan_write
from mergetable.table import Table, open_table

_UNPINNED = "unpinned"


def takes_filters(opts: ReadOptions) -> bool:
    """Whether a read of ``opts`` may take Spark's filters: ``pushdown=true``, or ``auto`` where
    :func:`pushdown_scoped_per_scan` (see the module documentation)."""
    return opts.pushdown == "true" or (opts.pushdown == "auto" and pushdown_scoped_per_scan())


def reader_class(opts: ReadOptions, per_query: bool) -> type[MergeTableReader]:
    """The reader of a table read of ``opts`` (``per_query``: ``resolve-snapshot=per-query``).

    The pushdown reader when the read takes filters and Spark is about to offer some (it is planned per scan
    by Spark, so its pinned snapshot is resolved per query); else, for a per-query read of the latest
    snapshot, the reader that resolves it in each task; else the plain reader. Whether Spark offers filters
    is asked of :func:`~mergetable.spark.reader.created_for_pushdown`, only when the read takes them: its
    documentation says why nothing else on PySpark 4.3 can tell.
    """
    if takes_filters(opts) and created_for_pushdown():
        return PushdownMergeTableReader
    if per_query and not opts.request.travel.given and opts.request.incremental_between is None:
        return LatestPerQueryReader
    return MergeTableReader


def resolve_snapshot_id(table: Table, request: ReadRequest) -> int | None:
    """The snapshot id a read of ``request`` uses (None: the table has no snapshot), resolved by
    :func:`mergetable.commit.travel.resolve_travel`."""
    snap = table.resolve_travel(request.travel)
    if snap is None and request.travel.given:
        key, value = request.source or ("time travel", "?")
        raise SnapshotNotFoundError(f"no snapshot for {key}={value}")
    return None if snap is None else snap.id


class MergeTableDataSource(DataSource):
    """Batch read and write of mergetable tables. Registered as ``mergetable``.

    A read's options are parsed once, by whichever of ``schema()`` and ``reader()`` runs first (PySpark
    pickles the data source between them, parsed options and pinned snapshot included).
    """

    @classmethod
    def name(cls) -> str:
        return "mergetable"

    # -- reading ----------------------------------------------------------------------------------
    def _read_options(self) -> ReadOptions:
        parsed: ReadOptions | None = self.__dict__.get("_parsed")
        if parsed is None:
            options = without_resolve_option(self.options)
            path, self._audit_log = split_audit_log(options.get("path", ""))
            parsed = ReadOptions.parse({**options, "path": path})
            self._parsed = parsed
        return parsed

    def _system(self) -> SystemRead | None:
        system: SystemRead | str | None = self.__dict__.get("_system_read", _UNPINNED)
        if system == _UNPINNED:
            system = SystemRead.of(self.options)
            self._system_read = system
        return None if isinstance(system, str) else system

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

    @concise_errors
    def schema(self) -> StructType:
        require_location(self.options)  # CREATE TABLE ... USING mergetable (no columns) calls only this
        if (system := self._system()) is not None:
            return system.spark_schema()
        opts = self._read_options()
        table = self._travelled(open_table(opts.uri, opts.storage), opts)
        self._pinned_snapshot(table, opts)
        schema = spark_schema(table.schema, opts.columns)
        return with_row_kind(schema, self._audit_log) if self._changes() else schema

    @concise_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        require_location(self.options)
        if (system := self._system()) is not None:
            return SystemTableReader(system, schema)
        opts = self._read_options()
        table = self._travelled(open_table(opts.uri, opts.storage), opts)
        dnf = bind_filters(opts.request.filter, table.schema)  # the one binding of the read's filter
        if self._changes():
            if opts.sections != "all":
                raise OptionsError("sections", "must be 'all' for a read of changes")
            snapshot = self._pinned_snapshot(table, opts)
            return batch_change_reader(table, schema, self.options, snapshot, dnf, opts.batch_size)
        spark_schema(table.schema, schema.fieldNames())  # a user-given schema must name table columns
        cls = reader_class(opts, per_query(self.options))
        return cls(table, self._pinned_snapshot(table, opts), schema, dnf, opts)

    @concise_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        require_location(self.options)
        opts = self._read_options()
        table = open_table(opts.uri, opts.storage)
        return MergeTableStreamReader(table, schema, StreamOptions.parse(self.options), opts.batch_size)

    # -- writing ----------------------------------------------------------------------------------
    @concise_errors
    def writer(self, schema: StructType, overwrite: bool) -> MergeTableWriter:
        require_location(self.options)
        return MergeTableWriter(plan_write(dict(self.options), schema, overwrite))

    @concise_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> MergeTableStreamWriter:
        require_location(self.options)
        return MergeTableStreamWriter(plan_stream_write(dict(self.options), schema, overwrite))


DefaultSource = MergeTableDataSource

__all__ = [
    "DefaultSource",
    "MergeTableDataSource",
    "pushdown_scoped_per_scan",
    "reader_class",
    "resolve_snapshot_id",
    "takes_filters",
]
