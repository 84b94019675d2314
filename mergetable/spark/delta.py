"""``MergeTable``: Delta's ``DeltaTable`` API over a mergetable table, so Delta code ports by changing the class.

>>> from mergetable.spark import MergeTable
>>> t = MergeTable.forPath(spark, "/tmp/tables/orders")                              # doctest: +SKIP
>>> t.delete("dt < '2024-01-01'")                                                    # doctest: +SKIP
>>> t.update("id = 3", {"total": "total * 2"})                                       # doctest: +SKIP
>>> (t.alias("t").merge(updates.alias("s"), "t.id = s.id")
...   .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())                   # doctest: +SKIP

Every row-level operation reads the latest snapshot, computes in Spark the ``+I``/``+U``/``-D`` records it
amounts to, and writes them with the batch writer as **one** commit. What each operation means on the
aggregation, partial-update and first-row engines is in :mod:`mergetable.dml.rules`, shared with the Python
:class:`mergetable.Table`.
Concurrent writers are not refused: the records are applied by key over whatever was committed meanwhile.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mergetable.commit.rollback import RollbackResult
from mergetable.core.errors import MergeError, MergeTableError, OptionsError, SchemaError, UnsupportedError
from mergetable.dml.rules import check_assigned, check_delete, check_update, nulls_refused
from mergetable.metadata.models import Snapshot
from mergetable.spark.compact import compact
from mergetable.spark.delta_merge import NULL_ASSIGNED, ROW_KIND, MergeBuilder, as_column, assignments
from mergetable.spark.native import native_read
from mergetable.spark.options import STORAGE_JSON
from mergetable.spark.source import MergeTableDataSource
from mergetable.spark.types import spark_schema
from mergetable.table import Table, open_table

_HISTORY = T.StructType(
    [
        T.StructField("version", T.LongType(), False),
        T.StructField("timestamp", T.TimestampType(), False),
        T.StructField("userId", T.StringType(), True),
        T.StructField("operation", T.StringType(), False),
        T.StructField("operationParameters", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("readVersion", T.LongType(), True),
        T.StructField("operationMetrics", T.MapType(T.StringType(), T.StringType()), True),
    ]
)


class OptimizeBuilder:
    """Delta's ``DeltaOptimizeBuilder``: ``optimize().where("dt = '2024-01-01'").executeCompaction()``."""

    def __init__(self, table: MergeTable) -> None:
        self._table = table
        self._partitions: list[dict[str, Any]] | None = None

    def where(self, partition_filter: str) -> OptimizeBuilder:
        """Only the partition ``k = 'v' [AND k2 = 'v2']`` (equalities on partition columns)."""
        spec: dict[str, Any] = {}
        for part in partition_filter.split(" AND " if " AND " in partition_filter else " and "):
            key, sep, value = part.partition("=")
            if not sep or key.strip() not in self._table.table.partition_keys:
                raise SchemaError(f"optimize().where needs equalities on partition columns, got '{partition_filter}'")
            spec[key.strip()] = value.strip().strip("'\"")
        self._partitions = [spec]
        return self

    def executeCompaction(self) -> Snapshot | None:
        """Compact (fully) with Spark tasks and commit one COMPACT snapshot; None when nothing needed it."""
        t = self._table
        return compact(t.spark, t.table.uri, full=True, partitions=self._partitions, storage_options=t.storage)


class MergeTable:
    """A mergetable table with Delta's ``DeltaTable`` methods (see the module docstring)."""

    def __init__(self, spark: SparkSession, uri: str, storage: dict[str, Any] | None, alias: str | None) -> None:
        self.spark, self.storage, self._alias = spark, storage, alias
        spark.dataSource.register(MergeTableDataSource)  # this session may not have the format yet
        self.table: Table = open_table(uri, storage)

    @classmethod
    def forPath(cls, spark: SparkSession, path: str, storage_options: dict[str, Any] | None = None) -> MergeTable:
        return cls(spark, path, storage_options, None)

    def alias(self, name: str) -> MergeTable:
        """The same table, its columns named ``name.<column>`` in merge conditions and expressions."""
        return MergeTable(self.spark, self.table.uri, self.storage, name)

    def _reader_options(self) -> dict[str, str]:
        return {STORAGE_JSON: json.dumps(self.storage)} if self.storage else {}

    def toDF(self) -> DataFrame:
        """The latest snapshot as a DataFrame (pinned: it keeps reading that snapshot), its raw-convertible
        sections read by Spark's Parquet reader as :func:`mergetable.spark.read` does."""
        options = self._reader_options()
        df = native_read(self.spark, self.table.uri, options)
        if df is None:
            df = self.spark.read.format("mergetable").options(**options).load(self.table.uri)
        return df.alias(self._alias) if self._alias else df

    def _keyed(self, operation: str) -> None:
        """Refuse a row-level operation on an append table: its changes are ``-D``/``+U`` records of a key."""
        if self.table.table_schema.is_append_table:
            raise UnsupportedError(
                f"MergeTable.{operation} needs a primary key; on an append table use the Python Table's "
                f"{operation}() (rows changed by position, see docs/table-types.md)"
            )

    def target_df(self) -> DataFrame:
        return self.toDF() if self._alias else self.toDF().alias("target")

    # -- row-level operations -------------------------------------------------------------------------
    def delete(self, condition: str | Column | None = None) -> None:
        """Delete the rows where ``condition`` holds (all rows when None), as ``-D`` records in one commit."""
        self._keyed("delete")
        check_delete(self.table.table_options, "delete")
        target = self.target_df()
        cond = as_column(condition)
        rows = target if cond is None else target.filter(cond)
        self.commit_changes(rows.select(*target.columns, F.lit("-D").alias(ROW_KIND)), "delete")

    def update(self, condition: str | Column | None = None, set: Mapping[str, str | Column] | None = None) -> None:
        """Assign ``set`` (``{column: expression}``) to the rows where ``condition`` holds, in one commit."""
        self._keyed("update")
        check_update(self.table.table_options, "update")
        if not set:
            raise SchemaError("update needs set={column: expression}")
        columns = list(self.table.schema.names)
        values = assignments(set, columns, "update")
        check_assigned(self.table.table_schema, values, "update")
        target = self.target_df()
        cond = as_column(condition) if not isinstance(condition, Mapping) else None
        rows = target if cond is None else target.filter(cond)
        null_assigned: Column = F.lit(False)
        for c, v in values.items():
            null_assigned = null_assigned | (v.isNull() & target[c].isNotNull())
        out = rows.select(
            *(values.get(c, target[c]).alias(c) for c in columns),
            F.lit("+U").alias(ROW_KIND),
            null_assigned.alias(NULL_ASSIGNED),
        )
        self.commit_changes(out, "update")

    def merge(self, source: DataFrame, condition: str | Column) -> MergeBuilder:
        """Start a merge of ``source`` into this table on ``condition``; add clauses, then ``execute()``."""
        self._keyed("merge")
        return MergeBuilder(self, source, condition)

    def commit_changes(self, changes: DataFrame, operation: str) -> None:
        """Write change rows (table columns + row kind) with the batch writer as one commit."""
        if NULL_ASSIGNED in changes.columns:
            if nulls_refused(self.table.table_options):
                bad = changes.filter(F.col(NULL_ASSIGNED)).limit(1).collect()
                if bad:
                    raise MergeError(
                        f"{operation}: assigning NULL on a partial-update table would be skipped (partial update "
                        f"ignores NULLs); offending row: {bad[0].asDict()}"
                    )
            changes = changes.drop(NULL_ASSIGNED)
        target = spark_schema(self.table.schema)  # assignments are cast to the column types, as Delta does
        changes = changes.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in target.fields), ROW_KIND)
        writer = changes.write.format("mergetable").mode("append").option("row-kind-column", ROW_KIND)
        writer.options(**self._reader_options()).save(self.table.uri)

    # -- history and time travel ---------------------------------------------------------------------
    def history(self, limit: int | None = None) -> DataFrame:
        """One row per snapshot, newest first, in Delta's history columns (``version`` = snapshot id), from
        the same rows as :meth:`mergetable.Table.history`."""
        rows = [
            (
                h["version"],
                h["timestamp"],
                h["commit_user"],
                h["operation"],
                dict(h["properties"] or []),
                h["read_version"],
                {
                    "numOutputRows": str(h["delta_record_count"]),
                    "totalRecordCount": str(h["total_record_count"]),
                    "numAddedFiles": str(h["added_files"]),
                    "numRemovedFiles": str(h["deleted_files"]),
                },
            )
            for h in self.table.history(limit).to_pylist()
        ]
        return self.spark.createDataFrame(rows, _HISTORY)

    def restoreToVersion(self, version: int) -> Snapshot | None:
        """Commit the state of snapshot ``version`` as a new snapshot (nothing is removed)."""
        return self.table.restore(snapshot_id=int(version))

    def restoreToTimestamp(self, timestamp: str | datetime.datetime | int) -> Snapshot | None:
        """Commit the state of the latest snapshot at or before ``timestamp`` (ISO string, datetime or ms)."""
        if isinstance(timestamp, int):
            ms = timestamp
        else:
            ts = timestamp if isinstance(timestamp, datetime.datetime) else _parse(timestamp)
            ms = int(ts.timestamp() * 1000)
        return self.table.restore(timestamp_ms=ms)

    def rollbackTo(self, version: int | str) -> RollbackResult:
        """Paimon's rollback (not Delta's restore): the state of snapshot ``version`` (an id, or a tag name) is
        committed as the latest, later snapshots leave the history and later tags are deleted
        (:meth:`mergetable.Table.rollback_to`)."""
        text = str(version).strip()
        if not text.isdigit() or (isinstance(version, str) and text in self.table.tags()):
            return self.table.rollback_to(tag=text)
        return self.table.rollback_to(snapshot_id=int(text))

    # -- maintenance ----------------------------------------------------------------------------------
    def optimize(self) -> OptimizeBuilder:
        return OptimizeBuilder(self)

    def vacuum(self, retentionHours: float | None = None) -> list[str]:
        """Expire snapshots (and tags past retention) per the table's options, then delete the table's files
        that nothing references and that are older than ``retentionHours`` (default 168, Delta's 7 days; at
        least 24, the orphan cleaner's safety margin). Returns the deleted files."""
        hours = 168.0 if retentionHours is None else float(retentionHours)
        if hours < 24:
            raise OptionsError(
                "retentionHours", f"vacuum keeps files younger than 24 h (writes in flight own them), got {hours}"
            )
        result = self.table.expire_snapshots()
        older = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000 - hours * 3_600_000)
        return [*result.deleted_files, *self.table.remove_orphan_files(older_than_ms=older)]


def _parse(text: str) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise MergeTableError(f"restoreToTimestamp: '{text}' is not an ISO-8601 timestamp") from None


__all__ = ["MergeTable", "OptimizeBuilder"]
