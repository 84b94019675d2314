"""The table facade: create/open, write/delete, read/scan with time travel, tags, maintenance.

Orchestration only; the work is done by the write, commit and read tiers.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from mergetable.commit.committer import Committer, Overwrite
from mergetable.commit.maintenance import ExpireResult, expire_snapshots, remove_orphan_files
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.restore import restore
from mergetable.commit.rollback import RollbackResult, expire_tags, retained_ms, rollback_to
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.compaction.job import CompactionJob, Executor, Progress
from mergetable.core import paths
from mergetable.core.errors import (
    CommitStateUnknownError,
    CorruptMetadataError,
    MergeTableError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
)
from mergetable.core.fileio import FileIO
from mergetable.core.options import DEFAULT_SPLIT_SIZE, TableOptions
from mergetable.core.predicates import Filters, normalize_filters
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction, create_merge_function, validate_merge_options
from mergetable.metadata.models import CommitMessage, DataFileMeta, Snapshot, Tag
from mergetable.read.incremental import (
    SnapshotRef,
    delta_splits,
    read_changelog,
    resolve_range,
    snapshots_between,
)
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Planner, Split
from mergetable.read.system_tables import system_table
from mergetable.write.files import data_file_path
from mergetable.write.input import RowKindArg, to_arrow_table
from mergetable.write.writer import TableWriter

_identifiers = itertools.count(1)
log = logging.getLogger(__name__)


def create_table(
    uri: str,
    schema: pa.Schema,
    primary_key: Sequence[str],
    partition_keys: Sequence[str] = (),
    options: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    comment: str | None = None,
    exist_ok: bool = False,
) -> Table:
    """Create a primary-key table at ``uri`` (a path or any fsspec URL) and return it."""
    fileio = FileIO(uri, storage_options)
    table_schema = TableSchema.create(schema, list(primary_key), list(partition_keys), options, comment)
    validate_merge_options(table_schema)
    path = fileio.join(paths.schema_path(0))
    if not fileio.write_if_absent(path, table_schema.to_json().encode()):
        if exist_ok:
            existing = open_table(uri, storage_options)
            if existing.table_schema.primary_keys != table_schema.primary_keys:
                raise TableExistsError(f"a table with another primary key already exists at {uri}")
            return existing
        raise TableExistsError(f"a table already exists at {uri}")
    return Table(fileio, table_schema)


def open_table(uri: str, storage_options: dict[str, Any] | None = None) -> Table:
    """Open the table at ``uri`` with its newest schema."""
    fileio = FileIO(uri, storage_options)
    ids = [
        int(n[len("schema-") :])
        for n in fileio.list_names(fileio.join(paths.SCHEMA_DIR))
        if n.startswith("schema-") and n[len("schema-") :].isdigit()
    ]
    if not ids:
        raise TableNotFoundError(f"no mergetable table at {uri}")
    path = fileio.join(paths.schema_path(max(ids)))
    schema = TableSchema.from_json(fileio.read_bytes(path), path)
    try:
        schema.table_options  # noqa: B018 - validate stored options eagerly
    except MergeTableError as exc:
        raise CorruptMetadataError(path, f"invalid stored options: {exc}") from exc
    return Table(fileio, schema)


def table_exists(uri: str, storage_options: dict[str, Any] | None = None) -> bool:
    fileio = FileIO(uri, storage_options)
    return bool(fileio.list_names(fileio.join(paths.SCHEMA_DIR)))


class Table:
    """A mergetable table. Obtain with :func:`create_table` or :func:`open_table`."""

    def __init__(self, fileio: FileIO, schema: TableSchema) -> None:
        self.fileio = fileio
        self.table_schema = schema
        self.snapshot_manager = SnapshotManager(fileio)
        self.tag_manager = TagManager(fileio)
        self.manifests = ManifestIO(fileio)
        self._merge_function: MergeFunction | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Table, (self.fileio, self.table_schema))

    def __repr__(self) -> str:
        return f"Table({self.uri!r}, primary_key={list(self.primary_key)})"

    # -- description ------------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        return self.fileio.uri

    @property
    def schema(self) -> pa.Schema:
        return self.table_schema.arrow_schema

    @property
    def primary_key(self) -> tuple[str, ...]:
        return self.table_schema.primary_keys

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.table_schema.partition_keys

    @property
    def options(self) -> dict[str, str]:
        return dict(self.table_schema.options)

    @property
    def table_options(self) -> TableOptions:
        return self.table_schema.table_options

    @property
    def merge_function(self) -> MergeFunction:
        if self._merge_function is None:
            self._merge_function = create_merge_function(self.table_schema)
        return self._merge_function

    # -- writing ----------------------------------------------------------------------------------
    def new_writer(self, snapshot: Snapshot | None = None) -> TableWriter:
        """A writer whose sequence numbers continue after each bucket's maximum in ``snapshot`` (default latest)."""
        base = snapshot if snapshot is not None else self.snapshot_manager.latest()
        max_seq: dict[tuple[tuple[str | None, ...], int], int] = {}
        for e in self.manifests.live_entries(base):
            k = (e.partition, e.bucket)
            max_seq[k] = max(max_seq.get(k, -1), e.file.max_sequence_number)
        return TableWriter(
            self.fileio, self.table_schema, self.merge_function, lambda p, b: max_seq.get((p, b), -1) + 1
        )

    def commit(
        self,
        messages: Sequence[CommitMessage],
        overwrite: bool | dict[str, Any] = False,
        commit_user: str | None = None,
        identifier: int | None = None,
        properties: dict[str, str] | None = None,
    ) -> Snapshot | None:
        """Publish files written by writers as one snapshot (plus a COMPACT one if compaction files are present).

        On failure the table is unchanged and the messages' files are deleted, unless the outcome is
        unknown (:class:`CommitStateUnknownError`), in which case they are kept.
        """
        spec = self._overwrite_spec(messages, overwrite)
        committer = Committer(self.fileio, self.table_schema, commit_user or str(uuid.uuid4()))
        try:
            snaps = committer.commit(messages, identifier or next(_identifiers), spec, properties)
        except CommitStateUnknownError:
            raise
        except BaseException:
            self.abort(messages)
            raise
        touched = {(m.partition, m.bucket) for m in messages if m.new_files}
        if snaps and touched:
            try:
                self.compaction_job().after_write(touched, snaps[-1].commit_identifier)
            except (MergeTableError, OSError) as exc:  # the data is committed: do not report the write as failed
                log.warning("compaction after snapshot %d failed and was skipped: %s", snaps[-1].id, exc)
        return snaps[-1] if snaps else None

    def abort(self, messages: Sequence[CommitMessage | None]) -> None:
        """Delete the files of uncommitted messages (never files that a snapshot references)."""
        live = {e.file.file_name for e in self.manifests.live_entries(self.snapshot_manager.latest())}
        doomed = []
        for m in messages:
            if m is None:
                continue
            upgraded = {f.file_name for f in m.compact_before}  # same file at a new level: still referenced
            for f in (*m.new_files, *m.changelog_files, *m.compact_after, *m.compact_changelog_files):
                if f.file_name not in live and f.file_name not in upgraded:
                    doomed.append(data_file_path(self.fileio, self.table_schema, m.partition, m.bucket, f.file_name))
        self.fileio.delete_quietly(doomed)

    def _overwrite_spec(self, messages: Sequence[CommitMessage], overwrite: bool | dict[str, Any]) -> Overwrite | None:
        if overwrite is False:
            return None
        if isinstance(overwrite, dict):
            unknown = [k for k in overwrite if k not in self.partition_keys]
            if unknown:
                raise SchemaError(f"overwrite partition spec names non-partition columns {unknown}")
            spec = {k: None if v is None else str(v) for k, v in overwrite.items()}
            idx = {k: self.partition_keys.index(k) for k in spec}
            for m in messages:
                if any(m.partition[idx[k]] != v for k, v in spec.items()):
                    raise SchemaError(f"data of partition {list(m.partition)} is outside the overwrite spec {spec}")
            return Overwrite(spec=tuple((idx[k], v) for k, v in spec.items()))
        if self.partition_keys and self.table_options.dynamic_partition_overwrite:
            return Overwrite(partitions=frozenset(m.partition for m in messages))
        return Overwrite()

    def write(
        self,
        data: Any,
        row_kind: RowKindArg = None,
        overwrite: bool | dict[str, Any] = False,
        target_columns: Sequence[str] | None = None,
    ) -> Snapshot | None:
        """Write rows as one atomic commit and return the new snapshot (None if nothing was written).

        ``data``: pa.Table, RecordBatch, iterable of batches or pandas DataFrame with the table's columns.
        ``row_kind``: None (all +I), one of "+I" "-U" "+U" "-D", or one kind per row.
        ``overwrite``: True replaces the table (partitioned tables: only the partitions present in the
        data, unless ``dynamic-partition-overwrite`` is false), or a partition spec ``{"dt": "2024-01-01"}``.
        ``target_columns``: write only these columns (a partial write; must include the primary key).
        """
        writer = self.new_writer()
        try:
            writer.write(data, row_kind, target_columns)
            messages = writer.prepare_commit()
        except BaseException:
            writer.abort()
            raise
        if not messages and overwrite is False:
            return None
        return self.commit(messages, overwrite)

    def delete(self, keys: Any) -> Snapshot | None:
        """Delete rows by primary key (``keys`` holds the key columns; other columns may be omitted)."""
        table = to_arrow_table(keys)
        missing = [f for f in self.schema if f.name not in table.schema.names and f.name not in self.primary_key]
        for f in missing:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
        return self.write(table, row_kind="-D")

    # -- snapshots, time travel, tags ---------------------------------------------------------------
    def snapshots(self) -> list[Snapshot]:
        return self.snapshot_manager.snapshots()

    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.latest()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.snapshot_manager.load(snapshot_id)

    def resolve_snapshot(
        self, snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None
    ) -> Snapshot | None:
        """The snapshot a read should use (latest when nothing is given)."""
        given = [x for x in (snapshot_id, timestamp_ms, tag) if x is not None]
        if len(given) > 1:
            raise MergeTableError("give at most one of snapshot_id, timestamp_ms and tag")
        if snapshot_id is not None:
            return self.snapshot_manager.load(int(snapshot_id))
        if timestamp_ms is not None:
            return self.snapshot_manager.at_or_before(int(timestamp_ms))
        if tag is not None:
            return self.tag_manager.get(tag).to_snapshot()
        return self.snapshot_manager.latest()

    def create_tag(
        self,
        name: str,
        snapshot_id: int | None = None,
        time_retained_ms: int | None = None,
        time_retained: datetime.timedelta | int | None = None,
    ) -> Tag:
        """Tag a snapshot (latest by default); ``time_retained`` (timedelta or ms) lets snapshot expiration
        delete the tag once its creation time plus the retention has passed."""
        snap = self.resolve_snapshot(snapshot_id=snapshot_id)
        if snap is None:
            raise MergeTableError("cannot tag an empty table (no snapshot yet)")
        retained = retained_ms(time_retained if time_retained is not None else time_retained_ms)
        return self.tag_manager.create(name, snap, retained)

    def rollback_to(self, snapshot_id: int | None = None, tag: str | None = None) -> RollbackResult:
        """Make a snapshot (or a tag's snapshot) the latest again, removing later snapshots, tags and files."""
        return rollback_to(self.fileio, self.table_schema, snapshot_id, tag)

    def restore(
        self, snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None
    ) -> Snapshot | None:
        """Commit a new snapshot with the state of an earlier one (Delta's RESTORE; nothing is removed)."""
        target = self.resolve_snapshot(snapshot_id, timestamp_ms, tag)
        if target is None:
            raise MergeTableError("cannot restore an empty table (no snapshot yet)")
        return restore(self.fileio, self.table_schema, target)

    def system_table(self, name: str, **time_travel: Any) -> pa.Table:
        """Paimon's system table ``name`` (``snapshots``, ``files``, ...) as Arrow; see docs/evolution.md."""
        return system_table(self.fileio, self.table_schema, name, **time_travel)

    def delete_tag(self, name: str) -> None:
        self.tag_manager.delete(name)

    def tags(self) -> dict[str, Tag]:
        return self.tag_manager.list()

    # -- reading ----------------------------------------------------------------------------------
    def plan(
        self,
        filter: Filters | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
        target_split_size: int = DEFAULT_SPLIT_SIZE,
        incremental_between: tuple[SnapshotRef, SnapshotRef] | None = None,
    ) -> list[Split]:
        dnf = normalize_filters(filter, self.schema)
        if incremental_between is not None:
            if any(x is not None for x in (snapshot_id, timestamp_ms, tag)):
                raise MergeTableError("incremental_between cannot be combined with snapshot_id, timestamp_ms or tag")
            start, end = resolve_range(self.snapshot_manager, self.tag_manager, incremental_between)
            return delta_splits(
                self.manifests, snapshots_between(self.snapshot_manager, start, end), self.table_schema, dnf
            )
        snap = self.resolve_snapshot(snapshot_id, timestamp_ms, tag)
        return Planner(self.manifests, self.table_schema).plan(snap, dnf, target_split_size)

    def split_reader(self, columns: Sequence[str] | None = None, filter: Filters | None = None) -> SplitReader:
        if columns is not None:
            for c in columns:
                if c not in self.table_schema.column_names:
                    raise SchemaError("column not found in table schema", c)
        dnf = normalize_filters(filter, self.schema)
        return SplitReader(self.fileio, self.table_schema, self.merge_function, columns, dnf)

    def _tables(
        self,
        columns: Sequence[str] | None,
        filter: Filters | None,
        snapshot_id: int | None,
        timestamp_ms: int | None,
        tag: str | None,
        incremental_between: tuple[SnapshotRef, SnapshotRef] | None = None,
    ) -> tuple[pa.Schema, Iterator[pa.Table]]:
        reader = self.split_reader(columns, filter)
        splits = self.plan(filter, snapshot_id, timestamp_ms, tag, incremental_between=incremental_between)
        return reader.out_schema, reader.read_splits(splits)

    def read(
        self,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
        incremental_between: tuple[SnapshotRef, SnapshotRef] | None = None,
    ) -> pa.Table:
        """The merged rows of a snapshot (latest by default) as one Arrow table.

        ``incremental_between=(start, end)`` (snapshot ids or tag names, start exclusive) reads instead,
        per key, the merge of what the data commits in that range wrote (Paimon's ``delta`` incremental
        read); see :meth:`changelog` for the changes with their row kinds.
        """
        schema, tables = self._tables(columns, filter, snapshot_id, timestamp_ms, tag, incremental_between)
        parts = list(tables)
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def scan(
        self,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
        incremental_between: tuple[SnapshotRef, SnapshotRef] | None = None,
    ) -> pa.RecordBatchReader:
        """Like :meth:`read`, streamed: memory is bounded by one section of one bucket at a time."""
        schema, tables = self._tables(columns, filter, snapshot_id, timestamp_ms, tag, incremental_between)
        return pa.RecordBatchReader.from_batches(schema, (b for t in tables for b in t.to_batches()))

    def files(self, snapshot_id: int | None = None) -> list[tuple[tuple[str | None, ...], int, DataFileMeta]]:
        """(partition, bucket, file) of every live data file."""
        snap = self.resolve_snapshot(snapshot_id)
        return [(e.partition, e.bucket, e.file) for e in self.manifests.live_entries(snap)]

    def changelog(
        self,
        start_snapshot_exclusive: SnapshotRef,
        end_snapshot_inclusive: SnapshotRef,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
    ) -> pa.Table:
        """The changes of snapshots ``(start, end]`` in commit order, with a ``_row_kind`` column (+I -U +U -D).

        From the changelog files of ``changelog-producer`` input, lookup or full-compaction; with ``none``,
        derived from each data commit's merged delta.
        """
        start, end = resolve_range(
            self.snapshot_manager, self.tag_manager, (start_snapshot_exclusive, end_snapshot_inclusive)
        )
        snaps = snapshots_between(self.snapshot_manager, start, end)
        return read_changelog(self.manifests, snaps, self.table_schema, self.split_reader(columns, filter))

    # -- maintenance ------------------------------------------------------------------------------
    def compaction_job(self, executor: Executor | None = None, progress: Progress | None = None) -> CompactionJob:
        return CompactionJob(self.fileio, self.table_schema, self.merge_function, executor, progress)

    def compact(
        self,
        full: bool = False,
        partitions: Sequence[dict[str, Any]] | None = None,
        executor: Executor | None = None,
        progress: Progress | None = None,
    ) -> Snapshot | None:
        """Compact now and commit one COMPACT snapshot (None when nothing needed compacting).

        ``full`` compacts every bucket into the top level; otherwise each bucket gets the compaction
        universal compaction picks for it. ``partitions``: partial specs such as ``[{"dt": "2024-01-01"}]``.
        A concurrent conflicting commit makes the changed buckets compact again on the new snapshot;
        :class:`CommitConflictError` when that keeps failing (the table is then unchanged).
        """
        return self.compaction_job(executor, progress).compact(full, partitions)

    def expire_snapshots(self, now_ms: int | None = None) -> ExpireResult:
        """Expire tags past their retention, then old snapshots per ``snapshot.*`` options, deleting files no
        kept snapshot or tag uses."""
        tags, tag_files = expire_tags(self.fileio, self.table_schema, now_ms)
        result = expire_snapshots(self.fileio, self.table_schema, now_ms)
        result.expired_tags, result.deleted_files = tags, [*tag_files, *result.deleted_files]
        return result

    def remove_orphan_files(self, older_than_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete files no snapshot or tag references, older than ``older_than_ms`` (default: 1 day ago)."""
        return remove_orphan_files(self.fileio, self.table_schema, older_than_ms, dry_run)
