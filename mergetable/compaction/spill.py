"""Merging the sorted runs a writer spilled for one bucket into the one run its commit adds.

A writer whose buffer fills spills each bucket as a sorted run of level-0 files. Paimon's batch writers spill
their buffer to local disk instead (``write-buffer-spillable``, on for batch writes) and merge the spilled
data into one sorted run when they flush at commit, so that each commit adds one run per bucket. mergetable
does the same with the runs it spilled: :func:`merge_spilled_runs` merges them with the table's merge engine
(the merged read of :class:`~mergetable.read.reader.SplitReader`, window by window, so memory stays bounded
by the read window, not by the runs) and writes one level-0 run. Its records are not committed yet, so they
are numbered again inside the writer's block of numbers, each file's records with one number (as each spilled
run was, :func:`~mergetable.write.files.numbered`): the merged run stays newer than every earlier commit and
older than every later one, and its ``_SEQUENCE_NUMBER`` column costs nothing to store.

Why it matters: compaction counts sorted runs. A commit that spilled once added two runs per bucket, so the
run-count trigger (``num-sorted-run.compaction-trigger``) fired after half as many commits and the
size-amplification rule rewrote the bucket twice as often. On the benchmark table (a 4M-row load and five
upserts of 4M rows, 4 buckets, default options), each commit spilled once and the whole table directory
(every file kept for time travel) held 573 MB; with one run per commit, 426 MB: one full compaction at the
fifth commit instead of two. The merge costs a rewrite of the commit's rows, which the writer's buffer
accounting avoids where it can (a commit spills only when its rows and the copy of its largest bucket, with
the HASH index a dynamic-bucket table's writer holds, outgrow ``write-buffer-size``).

The writer calls it through :attr:`mergetable.write.writer.TableWriter.merge_runs` (the write tier cannot
read data files itself); :meth:`mergetable.Table.writing` and :meth:`~mergetable.Table.new_writer` set it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from mergetable.core.buckets import Partition
from mergetable.core.fileio import FileIO
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import DataFileMeta, FileSource
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split
from mergetable.write.rolling import RollingKvWriter
from mergetable.write.writer import MergeRuns


def merge_spilled_runs(
    fileio: FileIO,
    schema: TableSchema,
    merge_function: MergeFunction,
    partition: Partition,
    bucket: int,
    runs: Sequence[Sequence[DataFileMeta]],
    first: int,
) -> list[DataFileMeta]:
    """Merge ``runs`` (uncommitted level-0 runs of one bucket, each a list of files in key order) into one
    level-0 run rolled at ``target-file-size``, each file's records stored with one number: ``first`` plus the
    offset of the file's first row in the run.

    Retracts are kept (older commits may hold the keys they retract). The input files are left for the caller
    to delete; a failure deletes what this call wrote.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
        >>> w = t.new_writer()
        >>> w.write(pa.table({"id": [1, 3], "v": ["a", "c"]})); w.flush()
        >>> w.write(pa.table({"id": [3, 2], "v": ["C", "b"]})); w.flush()
        >>> files = w.prepare_commit()[0].new_files  # two spilled runs, merged into one
        >>> [(f.row_count, f.min_sequence_number, f.max_sequence_number) for f in files]
        [(3, 0, 0)]
    """
    reader = SplitReader(fileio, schema, merge_function)
    split = Split(0, partition, bucket, ())
    with RollingKvWriter(fileio, schema, partition, bucket, 0, FileSource.APPEND, number=first) as writer:
        for rows in reader.merged_windows(split, runs):
            if rows.num_rows:
                writer.write(rows)
        return writer.close()


def spill_merger(fileio: FileIO, schema: TableSchema, merge_function: MergeFunction) -> MergeRuns:
    """:func:`merge_spilled_runs` for one table: a writer's :attr:`~mergetable.write.writer.TableWriter.merge_runs`."""
    return functools.partial(merge_spilled_runs, fileio, schema, merge_function)
