"""Spark writes into cross-partition upsert tables (a primary key without every partition key, ``bucket`` = -1).

Such a table is merged on the key alone, so each key is routed to the partition it lives in
(:mod:`mergetable.write.cross_partition`) before its bucket is placed. For one Spark job to route exactly,
every row of a key, whatever partition it names, must reach one task:

* :func:`mergetable.spark.write` shuffles the rows by key channel **only** (not by partition:
  :func:`mergetable.spark.dynamic.shuffle_by_channel`), and passes the channel count as the write option
  :data:`~mergetable.spark.dynamic.CHANNELS_OPTION`. Each task routes its rows with a
  :class:`~mergetable.write.cross_partition.CrossPartitionRouter` whose key locations are read from the snapshot
  the driver pinned when it planned the write (:func:`task_router`), the same for every attempt of the task, so
  a retried or speculative attempt writes the same rows to the same partitions and buckets. The buckets are
  then placed as for dynamic-bucket tables: channel ``c`` owns the buckets ``b % channels == c`` of every
  partition. The driver commits one attempt per task, refused with
  :class:`~mergetable.core.errors.BucketAssignmentConflictError` when a commit other than a compaction landed
  after the pinned snapshot (:func:`commit_precondition`, the Python writers'
  :func:`~mergetable.commit.cross_partition.key_route_guard`): the table is left as it was.
* ``df.write.format("mergetable")`` and the streaming sink get the rows wherever they are, so two tasks could
  route one key to two partitions: they are refused (:func:`check_write`), naming :func:`mergetable.spark.write`
  (and, for streams, :func:`mergetable.spark.foreach_batch`, which writes each micro-batch through it).

An overwrite of the whole table (``mode("overwrite")``, static) routes against no keys; a partition overwrite
(dynamic, ``replaceWhere``) is refused, as for :meth:`mergetable.Table.write`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from mergetable.commit.cross_partition import key_route_guard
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.errors import UnsupportedError
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.table import Table
from mergetable.write.cross_partition import CrossPartitionRouter, KeyLocations, router_for

log = logging.getLogger(__name__)
Precondition = Callable[[Sequence[CommitMessage], Snapshot | None], None]


def check_write(schema: TableSchema, overwrite: bool | dict[str, Any], channels: int | None) -> None:
    """Refuse, on the driver, a Spark write into the cross-partition table of ``schema`` (the write's options
    applied) that cannot route its keys exactly: rows not shuffled by key channel (``channels`` None), or a
    partition overwrite. Nothing for other tables.

    >>> import pyarrow as pa
    >>> s = TableSchema.create(pa.schema([("id", pa.int64()), ("dt", pa.string())]), ["id"], ["dt"])
    >>> check_write(s, False, 4)
    >>> check_write(s, False, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mergetable.core.errors.UnsupportedError: ... Use mergetable.spark.write(df, uri, ...), which shuffles ...

    Raises:
        UnsupportedError: naming the table mode and the write to use instead.
    """
    if not schema.is_cross_partition:
        return
    if overwrite is not False:
        router_for(schema, None, overwrite)  # refuses a partition overwrite
    if channels is None:
        raise UnsupportedError(
            f"df.write.format('mergetable') and writeStream into a cross-partition upsert table (primary key "
            f"{list(schema.primary_keys)} without partition key(s) "
            f"{[p for p in schema.partition_keys if p not in schema.primary_keys]}) are not supported: rows of one "
            "key may reach several tasks, which could route it to two partitions. Use mergetable.spark.write(df, "
            "uri, ...), which shuffles the rows by key first (for a stream: writeStream.foreachBatch("
            "mergetable.spark.foreach_batch(uri, app_id))), or include the partition keys in the primary key"
        )


def pinned_keys(table: Table, snapshot_id: int | None) -> Callable[[], KeyLocations]:
    """The key locations of snapshot ``snapshot_id`` of ``table`` (None: an empty table), read when called.

    If the snapshot expired meanwhile the latest is read: the commit is refused anyway unless only compactions
    came since (:func:`commit_precondition`), which leave every key where it was.
    """
    schema = table.table_schema

    def load() -> KeyLocations:
        if snapshot_id is None:
            return KeyLocations.of(schema, pa.table({}), None)
        sid: int | None = snapshot_id
        if not SnapshotManager(table.fileio).exists(snapshot_id):
            sid = table.latest_snapshot_id()
            log.warning("snapshot %s of the write's plan is gone: routing keys against snapshot %s", snapshot_id, sid)
            if sid is None:
                return KeyLocations.of(schema, pa.table({}), None)
        columns = [*schema.trimmed_primary_keys, *schema.partition_keys]
        return KeyLocations.of(schema, table.read(columns, snapshot_id=sid), sid)

    return load


def task_router(table: Table, base_snapshot_id: int | None, overwrite: bool | dict[str, Any]) -> CrossPartitionRouter:
    """The router of one task attempt of a Spark write into the cross-partition table ``table``: against the
    keys of the pinned snapshot ``base_snapshot_id`` (an overwrite: against none).

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> s = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        >>> t = mt.create_table(tempfile.mkdtemp(), s, ["id"], ["dt"])
        >>> _ = t.write(pa.table({"id": [1], "dt": ["a"]}))
        >>> rows, kinds = task_router(t, 1, False).route(pa.table({"id": [1], "dt": ["b"]}), pa.array([0], pa.int8()))
        >>> rows.to_pydict(), kinds.to_pylist()
        ({'id': [1, 1], 'dt': ['a', 'b']}, [3, 0])
    """
    if overwrite is not False:
        router: CrossPartitionRouter = router_for(table.table_schema, None, overwrite)
        return router
    return CrossPartitionRouter(table.table_schema, pinned_keys(table, base_snapshot_id))


def commit_precondition(
    table: Table, overwrite: bool | dict[str, Any], base_snapshot_id: int | None, routed: bool
) -> Precondition | None:
    """The driver's commit precondition of a Spark write into a cross-partition table (None for other tables,
    and when no task routed a row but retracts): refused when a commit other than a compaction landed after
    the pinned snapshot ``base_snapshot_id``. ``table``: the table as the commit writes it (a session's
    dynamic partition overwrite, known only now, is refused here).

    Raises:
        UnsupportedError: a partition overwrite.
    """
    schema = table.table_schema
    if not schema.is_cross_partition:
        return None
    if overwrite is not False:
        router_for(schema, None, overwrite)  # refuses a partition overwrite
        return None  # the whole table is replaced by whatever the tasks routed against no keys
    if not routed:
        return None
    guard = key_route_guard(table.fileio, base_snapshot_id)

    def precondition(messages: Sequence[CommitMessage], latest: Snapshot | None) -> None:
        guard(latest)

    return precondition


__all__ = ["check_write", "commit_precondition", "pinned_keys", "task_router"]
