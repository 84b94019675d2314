"""The table writer: sequence numbers, a bounded write buffer with pre-merge, level-0 files, input changelog."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from mergetable.core.arguments import name_list
from mergetable.core.buckets import BucketId, Partition, bucket_order
from mergetable.core.errors import MergeError, UnsupportedError
from mergetable.core.fileio import FileIO
from mergetable.core.options import ChangelogProducer, DeleteBehavior
from mergetable.core.rowkind import RowKind, is_retract
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema, check_column
from mergetable.merge import MergeFunction
from mergetable.merge.base import drop_write_mask, with_write_mask
from mergetable.metadata.models import CommitMessage, DataFileMeta
from mergetable.write.bucket_assign import DynamicBucketAssigner, known_buckets
from mergetable.write.cross_partition import CrossPartitionRouter
from mergetable.write.files import write_kv_files
from mergetable.write.flushing import bounded_map
from mergetable.write.input import (
    BucketAssign,
    RowKindArg,
    conform,
    input_tables,
    partitions_of,
    row_kinds,
    split_by_bucket,
    to_arrow_table,
)

Discard = Callable[[Sequence[CommitMessage]], object]
"""Deletes the files of messages that will not be committed (the commit tier's ``discard_uncommitted``)."""
SPILL_MARGIN = 16
"""The buffer spills once less than ``write-buffer-size / SPILL_MARGIN`` bytes of room are left: input is buffered
in slices of half the room, so the room halves with each slice and the buffer never outgrows the bound."""
GIVE_BACK_FRACTION = 8
"""A flush of at least ``write-buffer-size / GIVE_BACK_FRACTION`` bytes gives its freed pages back to the OS."""
MergeRuns = Callable[[Partition, int, Sequence[Sequence[DataFileMeta]], int], list[DataFileMeta]]
"""Merges the sorted runs one writer spilled for a (partition, bucket) into one level-0 run whose records are
numbered in key order from the given writer-local number (the compaction tier's
:func:`mergetable.compaction.spill.merge_spilled_runs`, which reads the runs back)."""


class TableWriter:
    """Buffers rows per (partition, bucket) and writes pre-merged level-0 files.

    Records are numbered per bucket in input order from 0: writer-local numbers, which the committer
    shifts above every earlier commit's (:mod:`mergetable.commit.sequence`). ``first_sequence`` starts
    buckets elsewhere (format version 1 writers numbered from their base snapshot's largest number).

    Memory is bounded by ``write-buffer-size``: the buffered Arrow data and the sorted copy that flushing its
    largest bucket makes stay below it (one bucket: half of it for the rows, half for their copy; four even
    buckets: four fifths for the rows), with the HASH indexes of a dynamic-bucket table's :attr:`assigner`
    (8 bytes a key of each partition written, counted up to half of it), and when little room is left
    (:data:`SPILL_MARGIN`) every bucket is spilled as a sorted run of level-0 files, one bucket at a time; a
    stream is never held whole.
    ``prepare_commit`` flushes the rest and, with ``write-buffer-spillable`` (default, as Paimon's batch
    writers) and a :attr:`merge_runs`, merges each bucket's spilled runs into one, so that a commit adds one
    sorted run per bucket however often the buffer filled (compaction then sees one run per commit, as in
    Paimon). It returns one :class:`CommitMessage` per touched bucket. Nothing is visible until those
    messages are committed.
    ``discard`` deletes the files of :meth:`abort`; it comes from the commit tier
    (:func:`mergetable.commit.transaction.open_writer`).
    """

    merge_runs: MergeRuns | None = None
    """Merges a bucket's spilled runs in :meth:`prepare_commit` (None: each spill stays a run of its own)."""

    def __init__(
        self,
        fileio: FileIO,
        schema: TableSchema,
        merge_function: MergeFunction,
        discard: Discard,
        first_sequence: Mapping[BucketId, int] | None = None,
        assigner: DynamicBucketAssigner | None = None,
    ) -> None:
        schema.check_writable()
        self.fileio = fileio
        self.schema = schema
        self.options = schema.table_options
        self.merge_function = merge_function
        self._discard = discard
        self._next_seq: dict[BucketId, int] = dict(first_sequence or {})
        self._buffer: dict[BucketId, list[pa.Table]] = {}
        self._buffer_bytes = 0
        self._bucket_bytes: dict[BucketId, int] = {}
        self._buffer_cols: tuple[str, ...] | None = None
        self._new_files: dict[BucketId, list[DataFileMeta]] = {}
        self._runs: dict[BucketId, list[list[DataFileMeta]]] = {}
        self._changelog_files: dict[BucketId, list[DataFileMeta]] = {}
        self.assigner = assigner
        """Places the rows of a dynamic-bucket table (:mod:`mergetable.write.bucket_assign`)."""
        self.index_bases: dict[Partition, frozenset[str]] = {}
        """The HASH index files each partition's rows were assigned against, for the commit's check."""
        self.partition_check: Callable[[list[tuple[str | None, ...]]], None] | None = None
        """Called with the partitions of each input before anything is buffered or written (it may raise)."""
        self.bucket_counts: Callable[[Partition], int] | None = None
        """A postpone table's batch write (``postpone.batch-write-fixed-bucket``): each partition's fixed bucket
        count, which rows are hashed with; None: the rows of a postpone table are postponed (bucket -2)."""
        self._totals: dict[Partition, int] = {}
        self._give_back = False
        self.router: CrossPartitionRouter | None = None
        """Routes the rows of a cross-partition table to their key's partition first
        (:mod:`mergetable.write.cross_partition`); such a table is not written without one."""

    # -- input ------------------------------------------------------------------------------------
    def write(
        self,
        data: Any,
        row_kind: RowKindArg = None,
        target_columns: Sequence[str] | None = None,
        cast: bool = False,
        buckets: np.ndarray | None = None,
    ) -> None:
        """Buffer ``data`` with its row kinds, streamed where the input streams; see :meth:`mergetable.Table.write`.

        One kind per row needs the rows at once; otherwise a stream is buffered a batch at a time.
        ``buckets``: on a dynamic-bucket table, the bucket each row's key is in already (-1: not known), as a
        row-level operation knows it of the rows it read from their bucket; such rows go there without a HASH
        index lookup (a key never moves). Ignored where the rows are routed or filtered first.
        """
        per_row = row_kind is not None and not isinstance(row_kind, str | int | RowKind)
        for table in [to_arrow_table(data)] if per_row or buckets is not None else input_tables(data):
            self._write_table(table, row_kind, target_columns, cast, buckets)

    def _write_table(
        self,
        table: pa.Table,
        row_kind: RowKindArg,
        target_columns: Sequence[str] | None,
        cast: bool = False,
        buckets: np.ndarray | None = None,
    ) -> None:
        rowkind_field = self.options.rowkind_field
        if rowkind_field is not None and row_kind is None and rowkind_field in table.schema.names:
            kinds = row_kinds(table.num_rows, table.column(rowkind_field), rowkind_field)
        else:
            kinds = row_kinds(table.num_rows, row_kind)
        cols = None if target_columns is None else name_list(target_columns, "target_columns")
        if cols is not None:
            for c in cols:
                check_column(c, self.schema.column_names, "target column")
            cols = tuple(c for c in self.schema.column_names if c in cols)
        retracts = is_retract(np.asarray(kinds.to_numpy(zero_copy_only=False)))
        table = conform(table, self.schema, cols, retracts=retracts if retracts.any() else None, cast=cast)
        table, kinds = self._filter_kinds(table, kinds)
        if table.num_rows == 0:
            return
        if self.schema.is_cross_partition:
            if self.router is None:
                raise UnsupportedError(
                    "a cross-partition upsert table is written through Table.write or Table.writing (which route "
                    "each key to the partition it lives in), not a bare writer"
                )
            table, kinds = self.router.route(table, kinds)
        if self.partition_check is not None:
            self.partition_check(partitions_of(table, self.schema))
        if cols != self._buffer_cols and self._buffer:
            self.flush()
        self._buffer_cols = cols
        table = table.append_column(VALUE_KIND, kinds)
        counts = self._count if self.bucket_counts is not None else None
        assign = self.assigner.assign if self.assigner is not None else None
        if buckets is not None and (assign is None or self.schema.is_cross_partition or len(buckets) != len(table)):
            buckets = None  # not a dynamic-bucket table's rows as they were given
        row_bytes = max(1, table.nbytes // max(1, table.num_rows))
        start = 0
        while start < table.num_rows:
            # A slice may land in one bucket: it takes twice its bytes of the room (its rows and their copy).
            step = max(1, self._room() // 2 // row_bytes)
            place: BucketAssign | None = assign
            if self.assigner is not None and buckets is not None:
                place = known_buckets(self.assigner, buckets[start : start + step])
            for partition, bucket, rows in split_by_bucket(table.slice(start, step), self.schema, place, counts):
                bucket_id = (partition, bucket)
                self._buffer.setdefault(bucket_id, []).append(rows)
                self._buffer_bytes += rows.nbytes
                self._bucket_bytes[bucket_id] = self._bucket_bytes.get(bucket_id, 0) + rows.nbytes
            start += step
            if self._room() < self.options.write_buffer_size // SPILL_MARGIN:
                self.flush()

    def _count(self, partition: Partition) -> int:
        if partition not in self._totals and self.bucket_counts is not None:
            self._totals[partition] = self.bucket_counts(partition)
        return self._totals[partition]

    def _filter_kinds(self, table: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        opts = self.options
        k = np.asarray(kinds.to_numpy(zero_copy_only=False))
        drop = np.zeros(len(k), dtype=bool)
        if opts.ignore_delete or opts.delete_behavior is DeleteBehavior.IGNORE:
            drop |= is_retract(k)
        elif opts.ignore_update_before:
            drop |= k == RowKind.UPDATE_BEFORE
        if opts.delete_behavior is DeleteBehavior.DISABLE and is_retract(k[~drop]).any():
            raise MergeError(
                "Delete operations are disabled for this table. The table.delete.behavior is set to 'disable'."
            )
        self.merge_function.check_kinds(k[~drop] if drop.any() else k)
        if drop.any():
            keep = pa.array(~drop)
            return table.filter(keep), kinds.filter(keep)
        return table, kinds

    # -- flushing ---------------------------------------------------------------------------------
    def _room(self) -> int:
        """Bytes that may still be buffered: ``write-buffer-size`` less the buffered rows, the sorted copy that
        flushing the largest bucket makes (buckets are flushed one at a time, each releasing its rows) and the
        HASH indexes a dynamic-bucket table's assigner holds (at most half of it: the rows keep the other half)."""
        size = self.options.write_buffer_size
        largest = max(self._bucket_bytes.values(), default=0)
        held = min(self.assigner.held_bytes, size // 2) if self.assigner is not None else 0
        return size - held - self._buffer_bytes - largest

    def flush(self) -> None:
        """Spill every buffered bucket as a sorted run (level-0 files), several buckets at once on threads while
        their sorted copies fit in the room the buffer leaves (:func:`mergetable.write.flushing.bounded_map`),
        each releasing its rows as it finishes."""
        jobs: list[tuple[BucketId, pa.Table, int]] = []
        sizes: list[int] = []
        while self._buffer:
            bucket_id = next(iter(self._buffer))
            parts = self._buffer.pop(bucket_id)
            # One contiguous table: taking rows from a chunked one first concatenates every chunk (a third copy).
            rows = pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
            del parts
            first = self._next_seq.get(bucket_id, 0)
            self._next_seq[bucket_id] = first + rows.num_rows
            jobs.append((bucket_id, rows, first))
            sizes.append(self._bucket_bytes.get(bucket_id, rows.nbytes))
        size = self.options.write_buffer_size
        held = min(self.assigner.held_bytes, size // 2) if self.assigner is not None else 0
        free = size - held - self._buffer_bytes
        self._buffer_bytes = 0
        self._bucket_bytes.clear()
        # Arrow's allocator keeps freed pages for reuse, each thread its own: after a large flush the next run's
        # rows arrive as new batches, so the pages of each bucket's rows (the buffer's) are given back here and
        # those of its copies by the thread that made them (a 20M-row stream peaked 70 MB higher without). A small
        # flush keeps them for the next: faulting them in again made a 200k-row merge 4% slower.
        self._give_back = sum(sizes) >= size // GIVE_BACK_FRACTION
        flushed = bounded_map(self._flush_bucket, jobs, sizes, free)
        del jobs  # each bucket's rows now live only until its flush is done (bounded_map holds them no longer)
        for bucket_id, changelog, files in flushed:
            self._flushed(bucket_id, changelog, files)
            if self._give_back:
                pa.default_memory_pool().release_unused()

    def _flush_bucket(
        self, job: tuple[BucketId, pa.Table, int]
    ) -> tuple[BucketId, list[DataFileMeta], list[DataFileMeta]]:
        """One bucket's rows (numbered from ``first``) as (its changelog files, its level-0 run); on a thread."""
        bucket_id, rows, first = job
        partition, bucket = bucket_id
        n = rows.num_rows
        kv = self._to_kv(rows, np.arange(first, first + n, dtype=np.int64))
        del rows
        write_cols = self._buffer_cols
        changelog: list[DataFileMeta] = []
        if self.options.changelog_producer is ChangelogProducer.INPUT:
            changelog = write_kv_files(
                self.fileio, self.schema, partition, bucket, kv, level=0, changelog=True, write_cols=write_cols
            )
        if write_cols is not None:
            kv = with_write_mask(kv, self.schema, write_cols)
        try:
            merged = drop_write_mask(self.merge_function.merge(kv, seq_ordered=True))
            del kv
            files = write_kv_files(
                self.fileio, self.schema, partition, bucket, merged, level=0, write_cols=write_cols, number=first
            )
            del merged
            if self._give_back:
                pa.default_memory_pool().release_unused()
        except BaseException:
            if changelog:  # written already: handed to the writer, whose abort deletes them
                total = self.options.bucket
                message = CommitMessage(
                    partition=partition, bucket=bucket, total_buckets=total, changelog_files=tuple(changelog)
                )
                self._discard([message])
            raise
        return bucket_id, changelog, files

    def _flushed(self, bucket_id: BucketId, changelog: list[DataFileMeta], files: list[DataFileMeta]) -> None:
        """Record the files one bucket's flush wrote: its changelog and a sorted run of level-0 files."""
        if changelog:
            self._changelog_files.setdefault(bucket_id, []).extend(changelog)
        self._new_files.setdefault(bucket_id, []).extend(files)
        self._runs.setdefault(bucket_id, []).append(files)

    def _to_kv(self, rows: pa.Table, seq: np.ndarray) -> pa.Table:
        fs = self.schema.file_schema
        cols = []
        for name in fs.names:
            if name == SEQUENCE_NUMBER:
                cols.append(pa.array(seq))
            else:
                cols.append(rows.column(name))
        return pa.Table.from_arrays(cols, schema=fs)

    # -- results ----------------------------------------------------------------------------------
    def prepare_commit(self) -> list[CommitMessage]:
        """Flush and return the files written so far (one message per touched bucket); resets the writer."""
        self.flush()
        self._merge_spilled_runs()
        return self._take_messages()

    def _merge_spilled_runs(self) -> None:
        """Replace the several runs of a bucket by one (see the class); the spilled files are deleted.

        Runs of a partial write (``target_columns``) stay as they are: their records merge only at the bottom of
        the tree. On failure the spilled files are still this writer's, for :meth:`abort` to delete.
        """
        runs_of = self._runs
        self._runs = {}
        if self.merge_runs is None or not self.options.write_buffer_spillable:
            return
        total = self.options.bucket
        for bucket_id, runs in runs_of.items():
            spilled = [f for run in runs for f in run]
            if len(runs) < 2 or any(f.write_cols is not None for f in spilled):
                continue
            partition, bucket = bucket_id
            first = min(f.min_sequence_number for f in spilled)
            self._new_files[bucket_id] = self.merge_runs(partition, bucket, runs, first)
            self._discard(
                [CommitMessage(partition=partition, bucket=bucket, total_buckets=total, new_files=tuple(spilled))]
            )

    def _take_messages(self) -> list[CommitMessage]:
        """The files written so far, one message per touched bucket; the writer forgets them."""
        messages = []
        for bucket_id in sorted(set(self._new_files) | set(self._changelog_files), key=bucket_order):
            partition, bucket = bucket_id
            new_index, replaced = self.assigner.index_files(partition, bucket) if self.assigner else ((), ())
            messages.append(
                CommitMessage(
                    partition=partition,
                    bucket=bucket,
                    total_buckets=self._totals.get(partition, self.options.bucket) if bucket >= 0 else bucket,
                    new_files=tuple(self._new_files.get(bucket_id, ())),
                    changelog_files=tuple(self._changelog_files.get(bucket_id, ())),
                    new_index_files=new_index,
                    deleted_index_files=replaced,
                )
            )
        if self.assigner is not None:
            self.index_bases.update(self.assigner.take_bases())
        self._new_files.clear()
        self._runs.clear()
        self._changelog_files.clear()
        return messages

    def abort(self) -> None:
        """Delete every file written and not yet handed out by :meth:`prepare_commit`."""
        self._buffer.clear()
        self._buffer_bytes = 0
        self._bucket_bytes.clear()
        if self.assigner is not None:
            self.assigner.take_bases()  # no HASH index file for rows that are dropped
        self._discard(self._take_messages())
