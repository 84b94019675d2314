"""Compacting an append table (no primary key): runs of small files rewritten into fewer, larger ones.

As in Paimon's append compaction, a bucket's files are taken in commit order (``minSequenceNumber``) and cut
into runs of consecutive *small* files (below ``target-file-size`` * ``compaction.small-file-ratio``); a large
file ends a run. A run of at least ``compaction.min.file-num`` files (or of two, in a full compaction, which
also rewrites large files) is read and written again as files rolled at ``target-file-size``, its rows in
the order they were committed. The new files take the run's sequence numbers, which no other file's overlap:
the table's commit order, and so every read and stream, is unchanged.

With ``deletion-vectors.enabled`` a file is read without the rows its vector marks, so a rewrite drops them;
a file whose vector marks more than ``compaction.delete-ratio-threshold`` of its rows (any marked row, in a
full compaction) is rewritten on its own even when no run takes it. The bucket's index files are then
written again without the rewritten files' vectors.

A compaction only deletes the files it rewrote, so a concurrent append (which only adds files) never
conflicts with it; a concurrent overwrite or row-level rewrite of one of its files does, and the job then
compacts the bucket again on the new snapshot (:mod:`mergetable.compaction.job`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from mergetable.commit.discard import discard_uncommitted
from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.compaction.clustering import Strategy, order_indices
from mergetable.compaction.deletion import deletion_files
from mergetable.compaction.result import CompactResult
from mergetable.core.buckets import Partition
from mergetable.core.deletion_vectors import DeletionFile
from mergetable.core.fileio import FileIO
from mergetable.core.options import TableOptions
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import CommitMessage, DataFileMeta, FileSource, IndexFileMeta
from mergetable.read.append import commit_order
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split
from mergetable.write.append import write_append_files


def pick_runs(files: Sequence[DataFileMeta], options: TableOptions, full: bool = False) -> list[list[DataFileMeta]]:
    """The runs of ``files`` (one bucket's live files) worth rewriting, each consecutive in commit order.

    A run is cut when it reaches ``target-file-size`` (so one run makes about one file) and at every large
    file; a full compaction counts every file as small.
    """
    small = int(options.target_file_size * options.compaction_small_file_ratio)
    least = 2 if full else options.compaction_min_file_num
    runs: list[list[DataFileMeta]] = []
    current: list[DataFileMeta] = []
    size = 0

    def close() -> None:
        nonlocal current, size
        if len(current) >= least:
            runs.append(current)
        current, size = [], 0

    for f in commit_order(files):
        if not full and f.file_size >= small:
            close()
            continue
        current.append(f)
        size += f.file_size
        if size >= options.target_file_size:
            close()
    close()
    return runs


def pick_append(
    files: Sequence[DataFileMeta],
    options: TableOptions,
    full: bool = False,
    vectors: Mapping[str, DeletionFile] | None = None,
) -> list[list[DataFileMeta]]:
    """:func:`pick_runs`, and each file whose deletion vector (``vectors``) marks enough rows to be worth
    rewriting that no run takes (see the module docstring)."""
    runs = pick_runs(files, options, full)
    if not vectors:
        return runs
    taken = {f.file_name for run in runs for f in run}
    ratio = options.compaction_delete_ratio_threshold
    for f in commit_order(files):
        marked = vectors[f.file_name].cardinality or 0 if f.file_name in vectors else 0
        if f.file_name not in taken and marked and (full or marked > ratio * f.row_count):
            runs.append([f])
    return runs


class AppendCompactor:
    """Picks and runs the compaction of one bucket of an append table."""

    def __init__(self, fileio: FileIO, schema: TableSchema, merge_function: MergeFunction) -> None:
        self.fileio = fileio
        self.schema = schema
        self.reader = SplitReader(fileio, schema, merge_function)

    def compact(
        self,
        partition: Partition,
        bucket: int,
        files: Sequence[DataFileMeta],
        full: bool = False,
        order_by: Sequence[str] = (),
        strategy: Strategy = "order",
        index_files: Sequence[IndexFileMeta] = (),
    ) -> CompactResult | None:
        """Rewrite the runs :func:`pick_append` finds among ``files`` (``index_files``: the bucket's deletion-
        vector index files); None when there is none. With ``order_by`` (a sort compaction, see
        :mod:`mergetable.compaction.clustering`) every file of the bucket is rewritten in that order instead.
        A failure deletes every file this call wrote."""
        vectors = deletion_files(index_files)
        if order_by:
            runs = [commit_order(files)] if files else []
        else:
            runs = pick_append(files, self.schema.table_options, full, vectors)
        if not runs:
            return None
        result = CompactResult()
        try:
            for run in runs:
                result.after.extend(self._rewrite(partition, bucket, run, order_by, strategy, vectors))
                result.before.extend(run)
            rewritten = {f.file_name for f in result.before}
            if rewritten & set(vectors):  # the bucket's vectors, less the rewritten files'
                indexes = IndexManifestIO(self.fileio)
                kept = {n: v for n, v in indexes.vectors(vectors).items() if n not in rewritten}
                opts = self.schema.table_options
                target = opts.deletion_vector_index_file_target_size
                result.index_after.extend(indexes.write_vectors(kept, opts.deletion_vectors_bitmap64, target))
                result.index_before.extend(index_files)
        except BaseException:
            total = self.schema.table_options.bucket
            message = CommitMessage(
                partition=partition,
                bucket=bucket,
                total_buckets=total,
                compact_after=tuple(result.after),
                compact_index_files=tuple(result.index_after),
            )
            discard_uncommitted(self.fileio, self.schema, [message])
            raise
        return result

    def _rewrite(
        self,
        partition: Partition,
        bucket: int,
        run: Sequence[DataFileMeta],
        order_by: Sequence[str] = (),
        strategy: Strategy = "order",
        vectors: Mapping[str, DeletionFile] | None = None,
    ) -> list[DataFileMeta]:
        own = tuple((f.file_name, vectors[f.file_name]) for f in run if vectors and f.file_name in vectors)
        split = Split(0, partition, bucket, tuple(((f,),) for f in run), deletion_files=own)
        parts = list(self.reader.read_split(split, prefetch=True))
        rows = pa.concat_tables(parts) if parts else self.schema.arrow_schema.empty_table()
        if order_by and rows.num_rows:
            rows = rows.take(order_indices(rows, order_by, strategy))
        return write_append_files(
            self.fileio, self.schema, partition, bucket, rows, run[0].min_sequence_number, FileSource.COMPACT
        )


__all__ = ["AppendCompactor", "pick_append", "pick_runs"]
