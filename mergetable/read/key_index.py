"""The key index of a cross-partition upsert table: where each live key is, bootstrapped from a snapshot.

A writer of such a table (:mod:`mergetable.write.cross_partition`) needs the partition of every live key of the
latest snapshot. The HASH index files hold key hashes only, so the index is read from the data: the trimmed
primary key and the partition columns of every partition, merged, so a deleted key is not listed (as Paimon's
``IndexBootstrap``, which reads the table). A :class:`KeyIndex` keeps it per table object by snapshot id: a
later snapshot that only compacted (or expired) keeps it, and a writer's commit that directly follows the
snapshot it routed against hands in the locations it leaves (:meth:`KeyIndex.remember`), so consecutive
writes of one table object read the keys once.

Two table options shape the read (:func:`read_key_rows`), as Paimon's: ``cross-partition-upsert.bootstrap-parallelism``
(default 10) bounds the threads that read the splits, and ``cross-partition-upsert.index-ttl`` leaves out every
bucket whose data files were all created before ``now - ttl``: a key only in such files is not in the index, so
a write treats it as new and it may end up live in two partitions (Paimon's documented trade-off). As the index
then depends on the clock (and a compaction, which rewrites files, makes their keys recent again), a table with
a TTL reads it afresh for every write instead of keeping it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.fileio import FileIO
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind
from mergetable.write.cross_partition import KeyLocations

ReadKeys = Callable[[Sequence[str], int], pa.Table]
"""Reads the merged rows of columns ``columns`` of snapshot ``snapshot_id`` (``Table.read``)."""
MAX_SKIPPED = 64
"""The most snapshots checked for being compactions only before the index is read again."""


class KeyIndex:
    """The key locations of a table's latest snapshot (see the module docstring).

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> s = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        >>> t = mt.create_table(tempfile.mkdtemp(), s, ["id"], ["dt"])
        >>> _ = t.write(pa.table({"id": [1, 2], "dt": ["a", "b"]}))
        >>> index = KeyIndex(t.fileio, t.table_schema, lambda cols, sid: t.read(cols, snapshot_id=sid))
        >>> loc = index()
        >>> loc.snapshot_id, loc.partitions
        (1, (('a',), ('b',)))
    """

    def __init__(self, fileio: FileIO, schema: TableSchema, read: ReadKeys) -> None:
        self.snapshots = SnapshotManager(fileio)
        self.schema = schema
        self.read = read
        self.keeps = schema.table_options.cross_partition_upsert_index_ttl is None
        """Whether the index is kept between writes (not with a TTL: see the module docstring)."""
        self._cached: KeyLocations | None = None
        self._stamp: tuple[int, str] | None = None  # the cached snapshot's time and user (a rollback reuses ids)
        self._lock = threading.Lock()

    def __call__(self) -> KeyLocations:
        latest = self.snapshots.latest()
        if latest is None:
            return KeyLocations.of(self.schema, pa.table({}), None)
        with self._lock:
            cached, stamp = self._cached, self._stamp
        if cached is not None and self.keeps and self._still(cached, stamp, latest.id):
            return cached
        columns = [*self.schema.trimmed_primary_keys, *self.schema.partition_keys]
        out = KeyLocations.of(self.schema, self.read(columns, latest.id), latest.id)
        self.remember(out)
        return out

    def _stamp_of(self, snapshot_id: int) -> tuple[int, str] | None:
        if not self.snapshots.exists(snapshot_id):
            return None
        snap = self.snapshots.load(snapshot_id)
        return snap.time_millis, snap.commit_user

    def _still(self, cached: KeyLocations, stamp: tuple[int, str] | None, latest_id: int) -> bool:
        """Whether the cached snapshot is still in the history and every later one up to ``latest_id`` only
        compacted."""
        base = cached.snapshot_id
        if base is None or base > latest_id or latest_id - base > MAX_SKIPPED or self._stamp_of(base) != stamp:
            return False
        for sid in range(base + 1, latest_id + 1):
            if not self.snapshots.exists(sid) or self.snapshots.load(sid).commit_kind is not CommitKind.COMPACT:
                return False
        return True

    def remember(self, locations: KeyLocations) -> None:
        """Keep ``locations`` (those of snapshot ``locations.snapshot_id``) unless newer ones are kept."""
        if not self.keeps:
            return
        stamp = None if locations.snapshot_id is None else self._stamp_of(locations.snapshot_id)
        with self._lock:
            old = self._cached
            if stamp is not None and (old is None or (old.snapshot_id or 0) <= (locations.snapshot_id or 0)):
                self._cached, self._stamp = locations, stamp


def read_key_rows(table: Any, columns: Sequence[str], snapshot_id: int, now_ms: int | None = None) -> pa.Table:
    """The merged rows of ``columns`` of snapshot ``snapshot_id`` of ``table`` (a :class:`mergetable.Table`) that
    the key index holds: those of the buckets with a data file created at ``now_ms - ttl`` or later (default: now)
    when ``cross-partition-upsert.index-ttl`` is set, read by at most ``cross-partition-upsert.bootstrap-parallelism``
    threads.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> s = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        >>> t = mt.create_table(tempfile.mkdtemp(), s, ["id"], ["dt"], {"cross-partition-upsert.index-ttl": "1 h"})
        >>> _ = t.write(pa.table({"id": [1, 2], "dt": ["a", "b"]}))
        >>> read_key_rows(t, ["id"], 1).sort_by("id")["id"].to_pylist()
        [1, 2]
        >>> read_key_rows(t, ["id"], 1, now_ms=int(time.time() * 1000) + 3_600_001).num_rows  # an hour later
        0
    """
    options = table.table_schema.table_options  # the table's options now, whatever schema the snapshot has
    table = table.as_of_schema(table.snapshot(snapshot_id).schema_id)
    splits = table.plan(snapshot_id=snapshot_id)
    ttl = options.cross_partition_upsert_index_ttl
    if ttl is not None:
        oldest = (int(time.time() * 1000) if now_ms is None else now_ms) - ttl
        recent = {(s.partition, s.bucket) for s in splits if any(f.creation_time >= oldest for f in s.files)}
        splits = [s for s in splits if (s.partition, s.bucket) in recent]  # a bucket is kept or left out whole
    reader = table.split_reader(columns)
    workers = max(1, min(options.cross_partition_upsert_bootstrap_parallelism, len(splits)))
    tables = list(reader.read_splits(splits, workers=workers, ahead=None))
    return pa.concat_tables(tables) if tables else reader.out_schema.empty_table()


def key_index(table: Any) -> KeyIndex | None:
    """The :class:`KeyIndex` kept on ``table`` (a :class:`mergetable.Table`), made on first use; None unless it
    is a cross-partition table."""
    schema: TableSchema = table.table_schema
    if not schema.is_cross_partition:
        return None
    index: KeyIndex | None = getattr(table, "_key_index", None)
    if index is None:
        index = KeyIndex(table.fileio, schema, lambda columns, sid: read_key_rows(table, columns, sid))
        table._key_index = index
    return index


__all__ = ["MAX_SKIPPED", "KeyIndex", "ReadKeys", "key_index", "read_key_rows"]
