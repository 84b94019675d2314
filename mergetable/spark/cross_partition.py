"""Spark writes into cross-partition upsert tables (a primary key without every partition key, ``bucket`` = -1).

Such a table is merged on the key alone, so each key is routed to the partition it lives in
(:mod:`mergetable.write.cross_partition`) before its bucket is placed. Two tasks of one job that each routed
one key against what they alone saw could leave it live in two partitions:

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
* ``df.write.format("mergetable")`` takes the rows where they are, so rows of one key may reach several tasks.
  Each task routes its rows as above, and places new keys by their hash and the pinned base index alone
  (:class:`~mergetable.spark.dynamic.OpenBucketAssigner`), the same in every task; its commit message carries,
  for every key it routed, the 64-bit key hash and the partition it left the key live in
  (:class:`RoutingReport`, by :func:`task_report`). The driver refuses the commit (:func:`check_reports`:
  :class:`~mergetable.core.errors.UnsupportedError`, naming :func:`mergetable.spark.write` and a repartition by
  the key) when two tasks left one key live in different partitions, which could leave it live in both; tasks
  that agree (an update in place, one move) commit. A hash collision can only refuse a write, never let a key
  through. The report costs 12 bytes a key routed.
* ``writeStream`` takes the rows where they are too, and a micro-batch comes after the previous one's commit,
  so the snapshot the query was planned against is stale. Each task attempt of a micro-batch routes (and places
  buckets) against the **latest** snapshot when it starts, and reports the snapshot it routed against
  (:attr:`RoutingReport.snapshot_id`) with its keys as above. The driver checks the reports as above, and runs
  :func:`~mergetable.commit.cross_partition.key_route_guard` from the **earliest** snapshot a committed task
  routed against (:func:`commit_precondition`, ``latest``): tasks that saw different snapshots commit only when
  nothing but compactions (which leave every key where it was) came between, else the batch is refused
  and the query fails, with nothing of the batch committed. A replayed micro-batch is skipped
  (:mod:`mergetable.spark.sink`).

An overwrite of the whole table (``mode("overwrite")``, static) routes against no keys; a partition overwrite
(dynamic, ``replaceWhere``) is refused, as for :meth:`mergetable.Table.write`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mergetable.commit.cross_partition import key_route_guard
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.buckets import Partition
from mergetable.core.errors import UnsupportedError
from mergetable.core.hashing import hash_keys
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.read.key_index import read_key_rows
from mergetable.table import Table
from mergetable.write.cross_partition import CrossPartitionRouter, KeyLocations, router_for

log = logging.getLogger(__name__)
Precondition = Callable[[Sequence[CommitMessage], Snapshot | None], None]


def check_write(schema: TableSchema, overwrite: bool | dict[str, Any]) -> None:
    """Refuse, on the driver, a partition overwrite of the cross-partition table of ``schema`` (the write's
    options applied): a key could stay live in a partition it keeps. Nothing for other tables and writes.

    >>> import pyarrow as pa
    >>> s = TableSchema.create(pa.schema([("id", pa.int64()), ("dt", pa.string())]), ["id"], ["dt"])
    >>> check_write(s, False)
    >>> check_write(s, {"dt": "a"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mergetable.core.errors.UnsupportedError: overwrite: a partition overwrite of a cross-partition upsert table ...

    Raises:
        UnsupportedError: naming the table mode and what to write instead.
    """
    if schema.is_cross_partition and overwrite is not False:
        router_for(schema, None, overwrite)  # refuses a partition overwrite


def pinned_keys(table: Table, snapshot_id: int | None) -> Callable[[], KeyLocations]:
    """The key locations of snapshot ``snapshot_id`` of ``table`` (None: an empty table), read when called.

    If the snapshot expired meanwhile the latest is read: the commit is refused anyway unless only compactions
    came since (:func:`commit_precondition`), which leave every key where it was.
    """
    schema = table.table_schema

    def load() -> KeyLocations:
        if snapshot_id is None:
            return KeyLocations.of(schema, pa.table({}), None)
        sid = snapshot_id
        if not SnapshotManager(table.fileio).exists(snapshot_id):
            latest = table.latest_snapshot_id()
            log.warning(
                "snapshot %s of the write's plan is gone: routing keys against snapshot %s", snapshot_id, latest
            )
            if latest is None:
                return KeyLocations.of(schema, pa.table({}), None)
            sid = latest
        columns = [*schema.trimmed_primary_keys, *schema.partition_keys]
        return KeyLocations.of(schema, read_key_rows(table, columns, sid), sid)

    return load


def task_router(
    table: Table, base_snapshot_id: int | None, overwrite: bool | dict[str, Any], shuffled: bool = True
) -> CrossPartitionRouter:
    """The router of one task attempt of a Spark write into the cross-partition table ``table``: against the
    keys of the pinned snapshot ``base_snapshot_id`` (an overwrite: against none). ``shuffled``: the rows were
    shuffled by key channel; if not, the router logs where it left each key, for :func:`task_report`.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> s = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        >>> t = mt.create_table(tempfile.mkdtemp(), s, ["id"], ["dt"])
        >>> _ = t.write(pa.table({"id": [1], "dt": ["a"]}))
        >>> rows, kinds = task_router(t, 1, False).route(pa.table({"id": [1], "dt": ["b"]}), pa.array([0], pa.int8()))
        >>> rows.to_pydict(), kinds.to_pylist()
        ({'id': [1, 1], 'dt': ['a', 'b']}, [3, 0])
    """
    router: CrossPartitionRouter
    if overwrite is not False:
        router = router_for(table.table_schema, None, overwrite)
    else:
        router = CrossPartitionRouter(table.table_schema, pinned_keys(table, base_snapshot_id))
    if not shuffled:
        router.key_log = []
    return router


@dataclass(frozen=True)
class RoutingReport:
    """What one task attempt routed (see the module docstring). Picklable."""

    routed_rows: bool
    """Rows but retracts were routed: the commit checks for concurrent writes."""
    hashes: np.ndarray | None = None
    """Rows not shuffled by key: the uint64 hash of each key the task left live (None: shuffled)."""
    partition_ids: np.ndarray | None = None
    """The partition (index into ``partitions``) each of ``hashes`` was left live in."""
    partitions: tuple[Partition, ...] = ()
    snapshot_id: int | None = None
    """The snapshot whose keys the task routed against (None: an empty table, or no row routed)."""


def task_report(router: CrossPartitionRouter) -> RoutingReport:
    """The :class:`RoutingReport` of a task whose rows ``router`` routed (each key: its last batch's partition).

    Example:
        >>> s = TableSchema.create(pa.schema([("id", pa.int64()), ("dt", pa.string())]), ["id"], ["dt"])
        >>> router = CrossPartitionRouter(s, lambda: KeyLocations.of(s, pa.table({}), None))
        >>> router.key_log = []
        >>> _ = router.route(pa.table({"id": [1, 2], "dt": ["a", "b"]}), pa.array([0, 0], pa.int8()))
        >>> _ = router.route(pa.table({"id": [1], "dt": ["c"]}), pa.array([0], pa.int8()))
        >>> r = task_report(router)
        >>> len(r.hashes), [r.partitions[i] for i in r.partition_ids[np.argsort(r.hashes)]] in (
        ...     [("c",), ("b",)], [("b",), ("c",)])
        (2, True)
    """
    log_ = router.key_log
    if log_ is None:
        return RoutingReport(router.routed_rows, snapshot_id=router.base_snapshot_id)
    if not log_:  # no rows: the keys were never read
        return RoutingReport(router.routed_rows, np.empty(0, np.uint64), np.empty(0, np.int32))
    partitions = router.locations().partitions
    keys = pa.concat_tables([k for k, _ in log_])
    final = np.concatenate([f for _, f in log_])
    names = list(router.schema.trimmed_primary_keys)
    hashes = hash_keys([keys.column(c) for c in names], names)
    last = len(hashes) - 1 - np.unique(hashes[::-1], return_index=True)[1]  # a key's last batch decides
    live = last[final[last] >= 0]
    snapshot = router.base_snapshot_id
    return RoutingReport(router.routed_rows, hashes[live], final[live].astype(np.int32), partitions, snapshot)


def check_reports(schema: TableSchema, reports: Sequence[RoutingReport], stream: bool = False) -> None:
    """Refuse the commit of tasks that left one key live in different partitions (see the module docstring).
    ``stream``: the tasks of a micro-batch of ``writeStream``, which the message names.

    Raises:
        UnsupportedError: naming how many keys, one key hash and its partitions, and the writes to use instead.
    """
    codes: dict[Partition, int] = {}
    hashes, parts = [], []
    for r in reports:
        if r.hashes is None or r.partition_ids is None or len(r.hashes) == 0:
            continue
        mapping = np.array([codes.setdefault(p, len(codes)) for p in r.partitions], dtype=np.int64)
        hashes.append(r.hashes)
        parts.append(mapping[r.partition_ids])
    if len(hashes) < 2:
        return
    h, p = np.concatenate(hashes), np.concatenate(parts)
    order = np.lexsort((p, h))
    h, p = h[order], p[order]
    clash = np.flatnonzero((h[1:] == h[:-1]) & (p[1:] != p[:-1]))
    if len(clash):
        names = {v: k for k, v in codes.items()}
        i = int(clash[0])
        what = "writeStream.format('mergetable')" if stream else "df.write.format('mergetable')"
        instead = "foreachBatch(mergetable.spark.foreach_batch(uri, app_id))" if stream else "mergetable.spark.write"
        raise UnsupportedError(
            f"{what} into a cross-partition upsert table: {len(clash)} key(s) of the "
            f"primary key {list(schema.primary_keys)} reached several write tasks that left them live in different "
            f"partitions (key hash {int(h[i]):#018x}: partitions {list(names[int(p[i])])} and "
            f"{list(names[int(p[i + 1])])}), which could leave a key live in two partitions, so nothing was "
            f"committed; write with {instead}, which shuffles the rows by key, or "
            f"repartition the DataFrame by {list(schema.trimmed_primary_keys)} first"
        )


def commit_precondition(
    table: Table,
    overwrite: bool | dict[str, Any],
    base_snapshot_id: int | None,
    reports: Sequence[RoutingReport],
    latest: bool = False,
) -> Precondition | None:
    """The driver's commit precondition of a Spark write into a cross-partition table (None for other tables,
    and when no task routed a row but retracts): refused when a commit other than a compaction landed after
    the pinned snapshot ``base_snapshot_id``. ``reports``: the committed tasks', checked first
    (:func:`check_reports`). ``table``: the table as the commit writes it (a session's
    dynamic partition overwrite, known only now, is refused here). ``latest``: each task routed against the
    latest snapshot when it started (a micro-batch of ``writeStream``): the guard runs from the earliest snapshot
    a task that routed rows reported, not from ``base_snapshot_id``.

    Example:
        >>> import tempfile, mergetable as mt
        >>> s = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        >>> t = mt.create_table(tempfile.mkdtemp(), s, ["id"], ["dt"])
        >>> for d in ("a", "b"):
        ...     _ = t.write(pa.table({"id": [1], "dt": [d]}))
        >>> saw = [RoutingReport(True, snapshot_id=1), RoutingReport(True, snapshot_id=2)]  # tasks of one batch
        >>> commit_precondition(t, False, None, saw, latest=True)(  # doctest: +ELLIPSIS
        ...     [], t.latest_snapshot())
        Traceback (most recent call last):
        mergetable.core.errors.BucketAssignmentConflictError: ... routed its keys against snapshot 1, and snapshot 2 ...
        >>> commit_precondition(t, False, None, saw[1:], latest=True)([], t.latest_snapshot())

    Raises:
        UnsupportedError: a partition overwrite, or tasks that left a key live in different partitions.
    """
    schema = table.table_schema
    if not schema.is_cross_partition:
        return None
    check_reports(schema, reports, latest)
    if overwrite is not False:
        router_for(schema, None, overwrite)  # refuses a partition overwrite
        return None  # the whole table is replaced by whatever the tasks routed against no keys
    if not any(r.routed_rows for r in reports):
        return None
    if latest:
        base_snapshot_id = min(r.snapshot_id or 0 for r in reports if r.routed_rows) or None
    guard = key_route_guard(table.fileio, base_snapshot_id)

    def precondition(messages: Sequence[CommitMessage], head: Snapshot | None) -> None:
        guard(head)

    return precondition


__all__ = [
    "RoutingReport",
    "check_reports",
    "check_write",
    "commit_precondition",
    "pinned_keys",
    "task_report",
    "task_router",
]
