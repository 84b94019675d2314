"""Compaction jobs: plan the buckets of a snapshot, compact them, commit one COMPACT snapshot.

The same loop serves the dedicated job (:meth:`mergetable.Table.compact`, the ``mergetable compact`` CLI,
``mergetable.spark.compact``) and the compaction a writer runs after its commit. Buckets are compacted by
an *executor*: in this process one after the other, or spread over Spark tasks.

Concurrency. A compaction is planned on the latest snapshot and committed as one COMPACT snapshot that
deletes the files it replaced and adds the new ones. The commit checks that every file it deletes is still
live and that level ≥ 1 key ranges of each bucket stay disjoint; if not (a concurrent compaction, or an
overwrite, got there first), nothing becomes visible, and the job drops the results of the buckets that
changed, deletes their files, compacts them again on the new snapshot and retries — up to
``commit.max-retries`` times, then fails with :class:`CommitConflictError`.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.schemas import SchemaManager
from mergetable.commit.snapshots import SnapshotManager
from mergetable.commit.transaction import WriteTransaction
from mergetable.compaction.append import AppendCompactor, pick_append
from mergetable.compaction.clustering import Strategy, check_strategy, sort_columns
from mergetable.compaction.compaction import BucketCompactor
from mergetable.compaction.deletion import deletion_files
from mergetable.compaction.postpone import move_postponed
from mergetable.core.buckets import BucketId, Partition, bucket_order
from mergetable.core.deletion_vectors import DELETION_VECTORS_INDEX
from mergetable.core.errors import (
    ArgumentError,
    CommitConflictError,
    SchemaError,
    SnapshotNotFoundError,
)
from mergetable.core.fileio import FileIO
from mergetable.core.model import JsonModel
from mergetable.core.options import POSTPONE_BUCKET, ChangelogProducer
from mergetable.core.progress import Progress as Progress
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction, create_merge_function
from mergetable.metadata.models import (
    CommitKind,
    CommitMessage,
    DataFileMeta,
    IndexFileMeta,
    ManifestEntry,
    Snapshot,
)

log = logging.getLogger(__name__)

FULL_COMPACTION_PROPERTY = "mergetable.full-compaction"
"""Set to ``true`` on the COMPACT snapshot of a full compaction of every bucket that needed one."""


class BucketPlan(JsonModel):
    """One bucket to compact: its live files on the planned snapshot. Picklable and JSON-able."""

    partition: Partition
    bucket: int
    total_buckets: int
    files: tuple[DataFileMeta, ...]
    full: bool = False
    index_files: tuple[IndexFileMeta, ...] = ()
    """The bucket's deletion-vector index files on the planned snapshot (a deletion-vector table)."""
    order_by: tuple[str, ...] = ()
    """A sort compaction of an append table: its rows rewritten in this order (see ``strategy``)."""
    strategy: Strategy = "order"

    @property
    def bucket_id(self) -> BucketId:
        return (self.partition, self.bucket)


Executor = Callable[[Sequence[BucketPlan]], list[CommitMessage]]
"""Runs :func:`run_plan` for every plan (anywhere) and returns the non-empty messages."""


def run_plan(fileio: FileIO, schema: TableSchema, merge_function: MergeFunction, plan: BucketPlan) -> CommitMessage:
    """Compact one planned bucket; an empty message when nothing was worth doing."""
    if schema.is_append_table:
        compactor = AppendCompactor(fileio, schema, merge_function)
        result = compactor.compact(
            plan.partition, plan.bucket, plan.files, plan.full, plan.order_by, plan.strategy, plan.index_files
        )
    else:
        result = BucketCompactor(fileio, schema, merge_function).compact(
            plan.partition, plan.bucket, plan.files, plan.full, plan.index_files
        )
    if result is None:
        return CommitMessage(partition=plan.partition, bucket=plan.bucket, total_buckets=plan.total_buckets)
    return CommitMessage(
        partition=plan.partition,
        bucket=plan.bucket,
        total_buckets=plan.total_buckets,
        compact_before=tuple(result.before),
        compact_after=tuple(result.after),
        compact_changelog_files=tuple(result.changelog),
        compact_index_files=tuple(result.index_after),
        compact_deleted_index_files=tuple(result.index_before),
    )


class CompactionJob:
    """Compacts the buckets of one table selected by a filter, committing once."""

    def __init__(
        self,
        fileio: FileIO,
        schema: TableSchema,
        merge_function: MergeFunction,
        executor: Executor | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.fileio = fileio
        self.schema = schema
        self.options = schema.table_options
        self.merge_function = merge_function
        self.compactor = BucketCompactor(fileio, schema, merge_function)
        self.snapshots = SnapshotManager(fileio)
        self.manifests = ManifestIO(fileio)
        self.indexes = IndexManifestIO(fileio)
        self.executor = executor or self._run_here
        self.progress = progress or Progress()
        self.order_by: tuple[str, ...] = ()
        """Set by :meth:`compact`: the columns of a sort compaction (append tables), in ``strategy``'s order."""
        self.strategy: Strategy = "order"

    def _run_here(self, plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        """Compact the planned buckets in this process, a few at a time (Parquet and Arrow release the GIL)."""
        error: BaseException | None = None
        workers = max(1, min(len(plans), os.cpu_count() or 1))
        with self._transaction() as tx, ThreadPoolExecutor(workers, thread_name_prefix="mergetable-compact") as pool:
            futures = [pool.submit(run_plan, self.fileio, self.schema, self.merge_function, p) for p in plans]
            for future in as_completed(futures):
                try:
                    message = future.result()
                except BaseException as exc:  # re-raised below, after the others finish
                    error = error or exc
                    continue
                if not message.is_empty:
                    tx.adopt([message])
                self.progress.advance()
            if error is not None:
                raise error  # the transaction discards what the other buckets wrote
            return tx.hand_off()

    # -- planning -------------------------------------------------------------------------------------
    def buckets(self, snapshot: Snapshot | None) -> dict[BucketId, list[ManifestEntry]]:
        out: dict[BucketId, list[ManifestEntry]] = {}
        for e in self.manifests.live_entries(snapshot):
            out.setdefault((e.partition, e.bucket), []).append(e)
        return out

    def plan(
        self, entries: Sequence[ManifestEntry], full: bool, index_files: Sequence[IndexFileMeta] = ()
    ) -> BucketPlan | None:
        """A plan for the bucket of ``entries`` (with ``index_files``) if it has something worth compacting."""
        files = [e.file for e in entries]
        if self.order_by:
            pass  # a sort compaction rewrites every bucket it selects
        elif self.schema.is_append_table:
            if not pick_append(files, self.options, full, deletion_files(index_files)):
                return None
        elif self.compactor.pick(self.compactor.levels(files), full, index_files) is None:
            return None
        first = entries[0]
        return BucketPlan(
            partition=first.partition,
            bucket=first.bucket,
            total_buckets=first.total_buckets,
            files=tuple(files),
            full=full,
            index_files=tuple(index_files),
            order_by=self.order_by,
            strategy=self.strategy,
        )

    def runs(self, entries: Sequence[ManifestEntry]) -> int:
        if self.schema.is_append_table:  # no sorted runs: reads never merge, nothing stalls a writer
            return 0
        return self.compactor.levels([e.file for e in entries]).number_of_sorted_runs()

    # -- the loop -------------------------------------------------------------------------------------
    def compact(
        self,
        full: bool = False,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        order_by: Sequence[str] | None = None,
        strategy: str = "order",
    ) -> Snapshot | None:
        """The dedicated compaction: every bucket (of ``partitions``) that needs it, or a full compaction; with
        ``order_by`` (append tables) a sort compaction of every selected bucket (``strategy`` ``order`` or
        ``zorder``, :mod:`mergetable.compaction.clustering`)."""
        if order_by is not None:
            self.order_by, self.strategy = sort_columns(self.schema, order_by), check_strategy(strategy)
        select = partition_selector(self.schema, partitions)
        moved = move_postponed(self.fileio, self.schema, self.merge_function, select)
        done = self.run(full=full, select=select, properties=_FULL if full and partitions is None else None)
        return done or moved

    def run(
        self,
        full: bool = False,
        select: Callable[[BucketId], bool] = lambda b: True,
        max_attempts: int | None = None,
        identifier: int | None = None,
        properties: dict[str, str] | None = None,
    ) -> Snapshot | None:
        """Compact every selected bucket that needs it and commit one COMPACT snapshot (None: nothing to do).

        On a conflicting concurrent commit the buckets that changed are compacted again on the new
        snapshot, up to ``max_attempts`` attempts (default ``commit.max-retries`` + 1), after which a
        :class:`CommitConflictError` is raised and the table is left unchanged.
        """
        attempts = max_attempts if max_attempts is not None else self.options.commit_max_retries + 1
        ident = identifier if identifier is not None else int(time.time() * 1000)
        kept: dict[BucketId, tuple[CommitMessage, frozenset[tuple[str, int]], frozenset[str]]] = {}
        started = False
        last_error: CommitConflictError | None = None
        with self._transaction(ident, properties) as tx:  # on any failure: every kept result is discarded
            for attempt in range(1, attempts + 1):
                latest = self.snapshots.latest()
                buckets = {b: es for b, es in self.buckets(latest).items() if b[1] >= 0 and select(b)}
                if self._adopt_newer_schema(buckets.values()):
                    tx.schema = self.schema
                indexes: dict[BucketId, list[IndexFileMeta]] = {}
                for e in self.indexes.entries(latest):
                    if e.index_file.index_type == DELETION_VECTORS_INDEX:  # a HASH index stays as it is
                        indexes.setdefault((e.partition, e.bucket), []).append(e.index_file)
                tx.drop(self._drop_stale(kept, buckets, indexes))
                todo = [buckets[b] for b in sorted(buckets, key=bucket_order) if b not in kept]
                plans = [
                    p
                    for p in (self.plan(es, full, indexes.get((es[0].partition, es[0].bucket), ())) for es in todo)
                    if p is not None
                ]
                if not started:
                    self.progress.start(len(plans))
                    started = True
                for message in self.executor(plans):
                    bid = (message.partition, message.bucket)
                    kept[bid] = (message, _upper_files(buckets[bid]), _names(indexes.get(bid, ())))
                    tx.adopt([message])
                if not kept:
                    return None
                try:
                    return tx.commit(keep_on_conflict=True)
                except CommitConflictError as exc:
                    log.info("compaction attempt %d of %d conflicted: %s", attempt, attempts, exc)
                    last_error = exc
            raise CommitConflictError(
                f"compaction gave up after {attempts} attempts, each conflicting with a concurrent commit "
                f"(nothing was changed): {last_error}"
            )

    def _transaction(self, identifier: int | None = None, properties: dict[str, str] | None = None) -> WriteTransaction:
        """The lifecycle of this job's results: committed as one COMPACT snapshot, or discarded."""
        user = f"compact-{uuid.uuid4()}"
        tx = WriteTransaction(
            self.fileio,
            self.schema,
            self.merge_function,
            commit_user=user,
            identifier=identifier,
            properties=properties,
        )
        tx.expires = True  # the dedicated job expires snapshots for write-only writers, as in Paimon
        return tx

    def _adopt_newer_schema(self, buckets: Iterable[list[ManifestEntry]]) -> bool:
        """Compact into the newest schema when a file was written with a newer one than this job's (a job
        opened before a schema change must not drop the columns added since). True if the schema changed."""
        if all(e.file.schema_id <= self.schema.id for es in buckets for e in es):
            return False
        schema = SchemaManager(self.fileio).latest()
        if schema is None or schema.id <= self.schema.id:
            return False
        self.schema, self.options = schema, schema.table_options
        self.merge_function = create_merge_function(schema)
        self.compactor = BucketCompactor(self.fileio, schema, self.merge_function)
        return True

    def _drop_stale(
        self,
        kept: dict[BucketId, tuple[CommitMessage, frozenset[tuple[str, int]], frozenset[str]]],
        buckets: dict[BucketId, list[ManifestEntry]],
        indexes: Mapping[BucketId, Sequence[IndexFileMeta]],
    ) -> list[CommitMessage]:
        """Forget (and return, for deletion) the results whose bucket changed below level 0, lost an input or
        had its deletion vectors changed."""
        stale = []
        for bid in list(kept):
            message, upper, index_names = kept[bid]
            entries = buckets.get(bid, [])
            live = {(e.file.file_name, e.file.level) for e in entries}
            inputs_live = all((f.file_name, f.level) in live for f in message.compact_before)
            vectors_changed = _names(indexes.get(bid, ())) != index_names
            if not inputs_live or _upper_files(entries) != upper or vectors_changed:
                stale.append(message)
                del kept[bid]
        return stale

    # -- after a write ----------------------------------------------------------------------------------
    def after_commit(self, messages: Iterable[CommitMessage], snapshot: Snapshot) -> None:
        """:meth:`after_write` for the buckets that ``messages`` (committed as ``snapshot``) wrote to.

        Never raises for a failed compaction (it is logged and skipped): the data is committed.
        """
        touched = {(m.partition, m.bucket) for m in messages if m.new_files}
        if not touched:
            return
        try:
            self.after_write(touched, snapshot.commit_identifier)
        except Exception as exc:  # whatever failed, the data is committed: never report the write as failed
            log.warning("compaction after snapshot %d failed and was skipped: %s", snapshot.id, exc)

    def after_write(self, touched: Iterable[BucketId], identifier: int | None = None) -> Snapshot | None:
        """The compaction a writer runs after its commit (never raises on a conflict: the data is committed).

        A full compaction of every bucket when ``full-compaction.delta-commits`` or
        ``changelog-producer.compaction-interval`` says one is due; otherwise the picked compaction of
        each bucket the write touched. When a touched bucket has more sorted runs than
        ``num-sorted-run.stop-trigger``, a conflict is retried like the dedicated job does; otherwise the
        compaction is simply skipped and left to the next commit.
        """
        opts = self.options
        if opts.write_only:
            return None
        wanted = set(touched)
        staged = {p for p, b in wanted if b == POSTPONE_BUCKET}
        if staged:  # a postpone table's staged rows: moved into their buckets first
            mover = functools.partial(move_postponed, self.fileio, self.schema, self.merge_function)
            self._quietly(lambda: mover(lambda b: b[0] in staged), "postpone")
        latest = self.snapshots.latest()
        if self._full_compaction_due(latest):
            return self._quietly(lambda: self.run(full=True, identifier=identifier, properties=_FULL), "full")
        buckets = self.buckets(latest)
        behind = any(self.runs(buckets[b]) > opts.stop_trigger for b in wanted if b in buckets)
        attempts = opts.commit_max_retries + 1 if behind else 1
        return self._quietly(
            lambda: self.run(select=wanted.__contains__, max_attempts=attempts, identifier=identifier), "minor"
        )

    @staticmethod
    def _quietly(job: Callable[[], Snapshot | None], kind: str) -> Snapshot | None:
        try:
            return job()
        except CommitConflictError as exc:
            log.warning("%s compaction after the write was skipped (the write itself is committed): %s", kind, exc)
            return None

    def _full_compaction_due(self, latest: Snapshot | None) -> bool:
        """Whether ``full-compaction.delta-commits`` data commits, or ``changelog-producer.compaction-interval``
        (full-compaction producer only), have passed since the last full compaction."""
        opts = self.options
        every = opts.full_compaction_delta_commits
        interval = opts.changelog_compaction_interval
        if opts.changelog_producer is not ChangelogProducer.FULL_COMPACTION:
            interval = None
        if latest is None or (every is None and interval is None):
            return False
        cutoff = None if interval is None else int(time.time() * 1000) - interval
        earliest = self.snapshots.earliest_id() or 1
        data_commits = 0
        for sid in range(latest.id, earliest - 1, -1):
            try:
                snap = latest if sid == latest.id else self.snapshots.load(sid)
            except SnapshotNotFoundError:  # expired meanwhile
                break
            if snap.commit_kind is CommitKind.COMPACT and (snap.properties or {}).get(FULL_COMPACTION_PROPERTY):
                return cutoff is not None and snap.time_millis <= cutoff
            if snap.commit_kind is not CommitKind.COMPACT:
                data_commits += 1
            if every is not None and data_commits >= every:
                return True
            if cutoff is not None and snap.time_millis <= cutoff:
                return True
        return cutoff is not None and earliest > 1  # the last full compaction predates the kept history


_FULL = {FULL_COMPACTION_PROPERTY: "true"}


def partition_selector(
    schema: TableSchema, partitions: Sequence[Mapping[str, Any]] | None
) -> Callable[[BucketId], bool]:
    """A bucket filter keeping the partitions matching any of ``partitions`` (each a partial spec
    ``{"dt": "2024-01-01"}``; values compare as their string form, None or the default partition name
    meaning null). None selects everything."""
    if partitions is None:
        return lambda b: True
    if isinstance(partitions, Mapping | str) or any(not isinstance(s, Mapping) for s in partitions):
        raise ArgumentError(
            "partitions", f"expected a list of partition specs such as [{{'dt': '2024-01-01'}}], got {partitions!r}"
        )
    keys = schema.partition_keys
    default = schema.table_options.partition_default_name
    specs: list[list[tuple[int, str | None]]] = []
    for spec in partitions:
        unknown = [k for k in spec if k not in keys]
        if unknown:
            raise SchemaError(f"partition spec names non-partition columns {unknown} (partition keys: {list(keys)})")
        specs.append([(keys.index(k), None if v is None or str(v) == default else str(v)) for k, v in spec.items()])
    return lambda b: any(all(b[0][i] == v for i, v in spec) for spec in specs)


def _upper_files(entries: Iterable[ManifestEntry]) -> frozenset[tuple[str, int]]:
    return frozenset((e.file.file_name, e.file.level) for e in entries if e.file.level > 0)


def _names(index_files: Iterable[IndexFileMeta]) -> frozenset[str]:
    return frozenset(f.file_name for f in index_files)
