"""The ``mergetable`` PySpark data source: ``spark.read.format("mergetable")`` and ``df.write.format("mergetable")``.

Snapshot pinning: the snapshot a DataFrame reads is resolved once, when it is loaded (``schema()``), so every
action on that DataFrame reads the same snapshot whether filter pushdown is on or off. Load again to see
newer commits.

Filter pushdown (``pushdown`` read option):

* ``false``: never take filters; Spark applies them all.
* ``true``: when ``spark.sql.python.filterPushdown.enabled`` is on, take the filters mergetable can apply
  exactly (partition, bucket and key-range pruning, then exact filtering after the merge).
* ``auto`` (default): ``true`` on PySpark versions that scope pushdown results to one scan, ``false`` on
  those (PySpark 4.3 and older) that keep the last pushed-down read plan on the DataFrame and reuse it for
  later scans of the same DataFrame, which then return the earlier query's filtered rows.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.core.predicates import normalize_filters
from mergetable.spark.options import ReadOptions, parse_int_option, parse_timestamp_ms
from mergetable.spark.reader import MergeTableReader, PushdownMergeTableReader, created_for_pushdown
from mergetable.spark.system import SystemRead, SystemTableReader, per_query, without_resolve_option
from mergetable.spark.types import spark_schema
from mergetable.spark.views import LatestPerQueryReader
from mergetable.spark.writer import MergeTableWriter, plan_write
from mergetable.table import Table, open_table

_UNPINNED = "unpinned"


def pushdown_scoped_per_scan() -> bool:
    """Whether this PySpark keeps pushed-down read plans per scan (they came together with ``pushLimit``)."""
    return hasattr(DataSourceReader, "pushLimit")


def resolve_snapshot_id(table: Table, travel: dict[str, str]) -> int | None:
    """The snapshot id a read with time-travel options ``travel`` uses (None: the table has no snapshot)."""
    if not travel:
        return table.latest_snapshot_id()
    ((key, value),) = travel.items()
    if key == "snapshot-id":
        snap = table.resolve_snapshot(snapshot_id=parse_int_option(key, value))
    elif key == "timestamp-millis":
        snap = table.resolve_snapshot(timestamp_ms=parse_int_option(key, value))
    elif key == "timestamp":
        snap = table.resolve_snapshot(timestamp_ms=parse_timestamp_ms(key, value))
    elif key == "tag":
        snap = table.resolve_snapshot(tag=value)
    else:  # version: a tag name, else a snapshot id
        if value in table.tags():
            snap = table.resolve_snapshot(tag=value)
        elif value.strip().isdigit():
            snap = table.resolve_snapshot(snapshot_id=int(value))
        else:
            raise SnapshotNotFoundError(f"version '{value}' is neither a tag nor a snapshot id")
    if snap is None:
        raise SnapshotNotFoundError(f"no snapshot for {key}={value}")
    return snap.id


class MergeTableDataSource(DataSource):
    """Batch read and write of mergetable tables. Registered as ``mergetable``."""

    @classmethod
    def name(cls) -> str:
        return "mergetable"

    # -- reading ----------------------------------------------------------------------------------
    def _read_options(self) -> ReadOptions:
        return ReadOptions.parse(without_resolve_option(self.options))

    def _pinned_snapshot(self, table: Table, opts: ReadOptions) -> int | None:
        if per_query(self.options):
            return resolve_snapshot_id(table, opts.time_travel)
        pinned: Any = getattr(self, "_snapshot_id", _UNPINNED)
        if pinned == _UNPINNED:
            pinned = resolve_snapshot_id(table, opts.time_travel)
            self._snapshot_id = pinned
        return None if pinned is None else int(pinned)

    def schema(self) -> StructType:
        if (system := SystemRead.of(self.options)) is not None:
            return system.spark_schema()
        opts = self._read_options()
        table = open_table(opts.uri, opts.storage)
        self._pinned_snapshot(table, opts)
        return spark_schema(table.schema, opts.columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        if (system := SystemRead.of(self.options)) is not None:
            return SystemTableReader(system, schema)
        opts = self._read_options()
        table = open_table(opts.uri, opts.storage)
        spark_schema(table.schema, schema.fieldNames())  # a user-given schema must name table columns
        dnf = normalize_filters(opts.filter, table.schema) if opts.filter is not None else None
        if dnf is not None:
            dnf = [[_typed(p, table) for p in conj] for conj in dnf]
        pushdown = opts.pushdown == "true" or (opts.pushdown == "auto" and pushdown_scoped_per_scan())
        cls: type[MergeTableReader] = MergeTableReader
        if pushdown and created_for_pushdown():
            cls = PushdownMergeTableReader  # planned per scan by Spark: the pinned snapshot is resolved per query
        elif per_query(self.options) and not opts.time_travel and opts.incremental_between is None:
            cls = LatestPerQueryReader
        snapshot = self._pinned_snapshot(table, opts)
        return cls(table, snapshot, schema, dnf, opts.split_size, opts.batch_size, opts.incremental_between)

    # -- writing ----------------------------------------------------------------------------------
    def writer(self, schema: StructType, overwrite: bool) -> MergeTableWriter:
        return MergeTableWriter(plan_write(dict(self.options), schema, overwrite))


def _typed(pred: tuple[str, str, Any], table: Table) -> tuple[str, str, Any]:
    """A JSON filter literal converted to its column's type (dates, timestamps and decimals may be strings)."""
    import pyarrow as pa

    column, op, value = pred
    t = table.schema.field(column).type

    def conv(v: Any) -> Any:
        if v is None:
            raise OptionsError("filter", f"null literal for column '{column}' (use IS NULL in Spark instead)")
        try:
            return pa.scalar(v).cast(t).as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise OptionsError("filter", f"'{v}' is not a valid {t} for column '{column}': {exc}") from None

    if op in ("in", "not in"):
        if not isinstance(value, list):
            raise OptionsError("filter", f"'{op}' on column '{column}' needs a list")
        return column, op, [conv(v) for v in value]
    return column, op, conv(value)


DefaultSource = MergeTableDataSource

__all__ = ["DefaultSource", "MergeTableDataSource", "pushdown_scoped_per_scan", "resolve_snapshot_id"]
