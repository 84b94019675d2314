"""Batch writing: Arrow tasks write level-0 files, the driver commits them all as one snapshot.

Exactly-once with retried and speculative tasks
-----------------------------------------------
* The job gets a random id when Spark plans the write. Every data (and changelog) file a task of the job
  writes is named ``<data-file.prefix><job tag>-<uuid>-<n>.parquet``, so the job's files can be told apart.
* A dynamic-bucket table's HASH index files that a task writes are named ``index-<job tag>-<uuid>-<n>`` (see
  :mod:`mergetable.spark.dynamic`), so they are swept with the data files.
* Before writing anything, each task attempt leaves a marker ``_spark_staging/<job id>/<partition>-<attempt>-<task
  attempt id>`` under the table.
* ``commit`` takes exactly one task message per Spark partition id (Spark hands over the successful attempts;
  duplicates are dropped defensively) and publishes all their files as **one** snapshot with the job's
  ``commit_user`` and a fixed identifier. A repeated commit of the same job finds that snapshot and does nothing.
* Files of attempts whose message was not committed (failed, killed or losing speculative attempts) are
  found through the markers: if any marker is not a committed attempt, the job's files are swept by name
  prefix and every one not in the committed snapshot is deleted. The markers are then removed.
* ``abort`` deletes every file of the job that the job's snapshot (if it was published after all) does not
  reference, so it is safe after a commit that already landed.
A zombie attempt still running after the sweep can leave orphan files and its marker; they are never
visible and ``Table.remove_orphan_files`` deletes them.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StringType, StructField, StructType

from mergetable.commit.schemas import table_identity
from mergetable.commit.transaction import WriteTransaction
from mergetable.core import paths
from mergetable.core.dynamic_buckets import hash_index_file_prefix
from mergetable.core.errors import AlreadyCommittedError, SchemaError, TableRecreatedError, UnsupportedError
from mergetable.core.fileio import FileIO
from mergetable.core.option_values import MIB
from mergetable.core.options import MergeEngine
from mergetable.core.schema import TableSchema
from mergetable.core.txn import Txn
from mergetable.merge import validate_merge_options
from mergetable.metadata.models import CommitMessage
from mergetable.spark.cross_partition import RoutingReport, check_write, commit_precondition, task_report, task_router
from mergetable.spark.dynamic import index_prefix, live_index_files, take_channels, task_assigner
from mergetable.spark.errors import concise_errors
from mergetable.spark.merge_schema import data_schema, evolve_for_write
from mergetable.spark.options import WriteOptions
from mergetable.spark.staging import (
    job_tag,
    leave_marker,
    remove_staging,
    sweep_tagged_files,
    tagged_prefixes,
    tagged_schema,
    unknown_attempts,
)
from mergetable.spark.types import arrow_schema_of, check_write_schema, spark_arrow_schema
from mergetable.spark.write_modes import SESSION_OVERWRITE_MODE, case_renames, parse_write_mode
from mergetable.table import Table, create_table, open_table, table_exists
from mergetable.write.append import AppendWriter

COMMIT_IDENTIFIER = 1
STAGING_DIR = paths.STAGING_DIR
_CHUNK_BYTES = 32 * MIB
DEFAULT_ROW_KIND_COLUMN = "_row_kind"
DYNAMIC = "dynamic-partition-overwrite"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteJob:
    """Everything tasks and the committer need to know about one Spark write job. Picklable."""

    uri: str
    storage: dict[str, Any] | None
    schema: TableSchema
    """The table schema with the write's option overrides (never persisted); commits use it."""
    overwrite: bool | dict[str, str]
    """True, or a static partition spec (``replaceWhere``)."""
    create: bool
    job_id: str
    base_snapshot_id: int | None = None
    row_kind_column: str | None = None
    target_columns: tuple[str, ...] | None = None
    create_options: dict[str, str] = field(default_factory=dict)
    txn: Txn | None = None
    """The write's application transaction (``txnAppId``/``txnVersion``): skipped when already committed."""
    user: str | None = None
    """The commit user (default: one per job); streaming sinks use the query's, stable across restarts."""
    identifier: int = COMMIT_IDENTIFIER
    renames: dict[str, str] = field(default_factory=dict)
    """Data column → table column where only the case differs (``caseSensitive=false``)."""
    session_overwrite_mode: bool = False
    """An overwrite the session's ``partitionOverwriteMode`` decides, as the tasks report it (static unless
    a task saw ``dynamic``; see :mod:`mergetable.spark.write_modes`)."""
    dynamic_channels: int | None = None
    """A dynamic-bucket table's rows arrive shuffled by that many key channels (:mod:`mergetable.spark.dynamic`)."""
    index_latest: bool = False
    """Each task attempt routes and places keys against the latest snapshot when it starts (a micro-batch)."""

    @property
    def commit_user(self) -> str:
        return self.user or f"spark-{self.job_id}"

    @property
    def file_prefixes(self) -> tuple[str, ...]:
        """Name prefixes of the data, changelog and HASH index files the job's tasks write."""
        data, changelog = tagged_prefixes(self.schema, self.job_id)
        return data, changelog, hash_index_file_prefix(data)

    def fileio(self) -> FileIO:
        return FileIO(self.uri, self.storage)

    def table(self) -> Table:
        """The table as commits (and the compactions they trigger) see it: ordinary file names."""
        return Table(self.fileio(), self.schema)

    def task_table(self) -> Table:
        """The table as the job's tasks write it: files named with the job's prefixes."""
        return Table(self.fileio(), tagged_schema(self.schema, self.job_id))


@dataclass
class TaskCommit(WriterCommitMessage):
    """What one task attempt wrote: its messages (one per touched bucket)."""

    partition_id: int
    attempt: int
    task_attempt_id: int
    messages: list[CommitMessage]
    rows: int = 0
    partition_overwrite_mode: str | None = None
    """The session's ``spark.sql.sources.partitionOverwriteMode`` as the task saw it (None: not asked or unset)."""
    routing: RoutingReport | None = None
    """What a cross-partition table's task routed, which the commit checks (:mod:`mergetable.spark.cross_partition`)."""

    @property
    def marker(self) -> str:
        return paths.attempt_marker(self.partition_id, self.attempt, self.task_attempt_id)

    @property
    def file_names(self) -> set[str]:
        names = {f.file_name for m in self.messages for f in (*m.new_files, *m.changelog_files)}
        return names | {f.file_name for m in self.messages for f in m.new_index_files}


def _renamed(schema: StructType, renames: dict[str, str]) -> StructType:
    if not renames:
        return schema
    return StructType([StructField(renames.get(f.name, f.name), f.dataType, f.nullable) for f in schema.fields])


def plan_write(options: dict[str, str], schema: StructType, overwrite: bool) -> WriteJob:
    """Validate a write on the driver (before any task runs) and describe the job."""
    columns = list(schema.fieldNames())
    options, channels = take_channels(options)
    wo = WriteOptions.parse(options, columns)
    rk = wo.row_kind_column
    if rk is None and DEFAULT_ROW_KIND_COLUMN in columns:
        rk = _default_row_kind_column(wo)
    if rk is not None and not isinstance(schema[rk].dataType, StringType):
        raise SchemaError("the row-kind column must be a STRING column holding +I, -U, +U or -D", rk)
    job_id = uuid.uuid4().hex
    ignore = [rk] if rk else []
    if table_exists(wo.uri, wo.storage):
        table = open_table(wo.uri, wo.storage)
        overrides = wo.check_against(table.table_options, table.primary_key, table.partition_keys)
        mode = parse_write_mode(options, overwrite, table.partition_keys)
        renames = case_renames([c for c in columns if c not in ignore], table.schema.names, mode.case_sensitive)
        if mode.merge_schema:
            evolve_for_write(table, spark_arrow_schema(_renamed(data_schema(schema, ignore), renames)), mode)
        partial = table.table_options.merge_engine is MergeEngine.PARTIAL_UPDATE
        present = check_write_schema(_renamed(schema, renames), table.schema, table.primary_key, partial, ignore)
        job = WriteJob(
            uri=wo.uri,
            storage=wo.storage,
            schema=table.table_schema.with_options(
                {**table.table_schema.options, **overrides, **mode.option_overrides}
            ),
            overwrite=mode.overwrite,
            session_overwrite_mode=mode.session_overwrite_mode,
            renames=renames,
            create=False,
            job_id=job_id,
            base_snapshot_id=table.latest_snapshot_id(),
            row_kind_column=rk,
            target_columns=None if len(present) == len(table.schema) else tuple(present),
            txn=wo.txn,
            dynamic_channels=channels,
        )
        check_write(job.schema, job.overwrite)
        return job
    # Without 'primary-key' the table created is an append table (rows kept as written), as in Paimon.
    data = StructType([f for f in schema.fields if f.name not in ignore])
    created = TableSchema.create(arrow_schema_of(data), wo.primary_key, wo.partition_keys or (), wo.table_options)
    validate_merge_options(created)
    mode = parse_write_mode(options, overwrite, created.partition_keys)
    job = WriteJob(
        uri=wo.uri,
        storage=wo.storage,
        schema=created.with_options({**created.options, **mode.option_overrides}),
        overwrite=mode.overwrite,
        create=True,
        job_id=job_id,
        row_kind_column=rk,
        create_options=dict(wo.table_options),
        txn=wo.txn,
        dynamic_channels=channels,
    )
    check_write(job.schema, job.overwrite)
    return job


def _default_row_kind_column(wo: WriteOptions) -> str | None:
    """``_row_kind`` (the column change reads produce) holds the row kinds unless the table has such a column."""
    if table_exists(wo.uri, wo.storage) and DEFAULT_ROW_KIND_COLUMN in open_table(wo.uri, wo.storage).schema.names:
        return None
    return DEFAULT_ROW_KIND_COLUMN


class MergeTableWriter(DataSourceArrowWriter):
    """The ``DataSourceArrowWriter`` of one Spark write job (see the module docstring for the protocol)."""

    def __init__(self, job: WriteJob) -> None:
        self.job = job

    # -- tasks (executors) ------------------------------------------------------------------------
    @concise_errors
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return self.write_task(iterator, 0, 0, 0)
        task = self.write_task(iterator, ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId())
        if self.job.session_overwrite_mode:  # Spark hands a job's tasks the session's SQL settings
            task.partition_overwrite_mode = ctx.getLocalProperty(SESSION_OVERWRITE_MODE)
        return task

    def write_task(
        self, batches: Iterable[pa.RecordBatch], partition_id: int, attempt: int, task_attempt_id: int
    ) -> TaskCommit:
        """Write one task attempt's batches to level-0 files of the job (not visible until commit)."""
        job = self.job
        fileio = job.fileio()
        leave_marker(fileio, job.job_id, paths.attempt_marker(partition_id, attempt, task_attempt_id))
        rows, base = 0, job.table().latest_snapshot_id() if job.index_latest else job.base_snapshot_id
        with job.task_table().writing() as tx:  # the driver commits: the task hands its messages off
            if job.schema.is_dynamic_bucket:
                tx.writer.assigner = task_assigner(
                    fileio,
                    job.schema,
                    base_snapshot_id=base,
                    overwrite=job.overwrite is not False,
                    channels=job.dynamic_channels,
                    tag=job_tag(job.job_id),
                )
            router = None
            if job.schema.is_cross_partition:  # every attempt routes against the pinned snapshot's keys
                router = task_router(job.table(), base, job.overwrite, job.dynamic_channels is not None)
                tx.writer.router = router
            pending: list[pa.RecordBatch] = []
            size = 0
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                pending.append(batch)
                size += batch.nbytes
                rows += batch.num_rows
                if size >= _CHUNK_BYTES:
                    self._write_chunk(tx, pending)
                    pending, size = [], 0
            if pending:
                self._write_chunk(tx, pending)
            if rows and isinstance(tx.writer, AppendWriter) and tx.writer.take_retracts() is not None:
                raise UnsupportedError(
                    f"column {job.row_kind_column!r}: -D rows that remove stored records of an append table are not "
                    "written through Spark (as in Paimon, whose append tables take inserts only); delete them with "
                    "Table.delete(filter) or Table.write(rows, row_kind=...) in Python"
                )
            routing, messages = None if router is None else task_report(router), tx.hand_off()
        return TaskCommit(partition_id, attempt, task_attempt_id, messages, rows, routing=routing)

    def _write_chunk(self, tx: WriteTransaction, batches: list[pa.RecordBatch]) -> None:
        data = pa.Table.from_batches(batches)
        if self.job.renames:
            data = data.rename_columns([self.job.renames.get(n, n) for n in data.column_names])
        kinds = None
        rk = self.job.row_kind_column
        if rk is not None:
            kinds = data.column(rk)
            data = data.drop_columns([rk])
        tx.write(data, row_kind=kinds, target_columns=self.job.target_columns)

    # -- driver -----------------------------------------------------------------------------------
    @concise_errors
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Publish every task's files as one snapshot, then delete files of attempts that lost."""
        job = self.job
        winners, losers = choose_attempts(messages)
        table = self._table_for_commit()
        if job.session_overwrite_mode and any(str(w.partition_overwrite_mode).lower() == "dynamic" for w in winners):
            schema = table.table_schema
            table = Table(table.fileio, schema.with_options({**schema.options, DYNAMIC: "true"}))
        done = table.find_commit(job.commit_user, job.identifier, job.base_snapshot_id)
        keep = set().union(*(w.file_names for w in winners))
        if done is None:
            reports = [w.routing for w in winners if w.routing is not None]
            guard = commit_precondition(table, job.overwrite, job.base_snapshot_id, reports, job.index_latest)
            tx = table.writing(
                job.overwrite, commit_user=job.commit_user, identifier=job.identifier, txn=job.txn, precondition=guard
            )
            tx.adopt([m for w in winners for m in w.messages])
            try:
                tx.commit()
            except AlreadyCommittedError as exc:  # an idempotent replay: its files were deleted
                log.warning("%s", exc)
                keep = set()
        self._discard(table, [m for lo in losers for m in lo.messages], keep)
        self._clean_staging(table.fileio, {w.marker for w in winners}, keep)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Delete the job's files that no published snapshot of the job references (safe after a commit)."""
        job = self.job
        fileio = job.fileio()
        keep = self._committed_files(fileio)
        tasks = [m for m in messages if isinstance(m, TaskCommit)]
        self._discard(job.table(), [m for t in tasks for m in t.messages], keep)
        known = {t.marker for t in tasks} if len(tasks) == len(messages) else None
        self._clean_staging(fileio, known, keep)
        if job.create and not table_exists(job.uri, job.storage):
            _remove_if_empty(fileio)

    # -- helpers ----------------------------------------------------------------------------------
    def _discard(self, table: Table, messages: list[CommitMessage], keep: set[str]) -> None:
        """End the tasks' messages that will not be committed: their files go, but those in ``keep``."""
        tx = table.writing()
        tx.adopt(messages)
        tx.discard(keep)

    def _table_for_commit(self) -> Table:
        job = self.job
        if not job.create:
            table = job.table()
            planned, now = job.schema.table_uuid, table_identity(table.fileio)
            if planned is not None and now != planned:  # deleted and created again since the job was planned
                raise TableRecreatedError(
                    job.uri,
                    "the write was planned",
                    planned,
                    now,
                    "nothing was committed; run the write again (a streaming query: restart it, with a new "
                    "checkpoint location if it also reads the re-created table)",
                )
            return table
        arrow = job.schema.arrow_schema
        created = create_table(
            job.uri,
            arrow,
            job.schema.primary_keys,
            job.schema.partition_keys,
            job.create_options,
            job.storage,
            exist_ok=True,
        )
        ts = created.table_schema
        if (ts.fields, ts.primary_keys, ts.partition_keys) != (
            job.schema.fields,
            job.schema.primary_keys,
            job.schema.partition_keys,
        ):
            raise SchemaError(f"another writer created the table at {job.uri} with a different schema meanwhile")
        return Table(created.fileio, ts)

    def _committed_files(self, fileio: FileIO) -> set[str]:
        """Names of the job's files in the job's published snapshot(s), if the commit landed."""
        job = self.job
        if not table_exists(job.uri, job.storage):
            return set()
        table = job.table()
        snap = table.find_commit(job.commit_user, job.identifier, job.base_snapshot_id)
        if snap is None:
            return set()
        entries = [*table.delta_entries(snap), *table.changelog_entries(snap)]
        return {e.file.file_name for e in entries} | live_index_files(table.fileio, snap)

    def _clean_staging(self, fileio: FileIO, known_markers: set[str] | None, keep: set[str]) -> None:
        """Sweep the job's files unless every attempt that left a marker is known; then drop the markers."""
        if known_markers is None or unknown_attempts(fileio, self.job.job_id, known_markers):
            sweep_job_files(fileio, self.job, keep)
        remove_staging(fileio, self.job.job_id)


def choose_attempts(messages: Sequence[WriterCommitMessage | None]) -> tuple[list[TaskCommit], list[TaskCommit]]:
    """(one task message per Spark partition id, the surplus attempts). Unknown messages are an error."""
    winners: dict[int, TaskCommit] = {}
    losers: list[TaskCommit] = []
    for m in messages:
        if m is None:
            continue
        if not isinstance(m, TaskCommit):
            raise TypeError(f"unexpected commit message {type(m).__name__}")
        if m.partition_id in winners:
            losers.append(m)
        else:
            winners[m.partition_id] = m
    return [winners[k] for k in sorted(winners)], losers


def sweep_job_files(fileio: FileIO, job: WriteJob, keep: set[str]) -> list[str]:
    """Delete every file of ``job`` under the table (found by its file-name prefixes) not in ``keep``.

    Files live in the latest snapshot are never deleted, whatever ``keep`` says.
    """

    def live() -> set[str]:
        if not table_exists(job.uri, job.storage):
            return set()
        table = job.table()
        return {f.file_name for _, _, f in table.files()} | live_index_files(table.fileio, table.latest_snapshot())

    prefixes = (*job.file_prefixes, index_prefix(job_tag(job.job_id)))
    return sweep_tagged_files(fileio, prefixes, keep, live)


def _remove_if_empty(fileio: FileIO) -> None:
    """Remove the directories a failed first write left under the table location, if they hold no file."""
    if any(True for _ in fileio.walk_files(fileio.root)):
        return
    for name in fileio.list_names(fileio.root):
        with contextlib.suppress(OSError):
            fileio.fs.rm(fileio.join(name), recursive=True)


__all__ = [
    "COMMIT_IDENTIFIER",
    "DEFAULT_ROW_KIND_COLUMN",
    "STAGING_DIR",
    "MergeTableWriter",
    "TaskCommit",
    "WriteJob",
    "choose_attempts",
    "plan_write",
    "sweep_job_files",
]
