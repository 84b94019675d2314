"""Row-level changes of an append table by row position: copy-on-write or deletion vectors.

An append table has no key, so a row-level operation (``delete``, ``update``, ``merge``, a keyless
changelog's ``-D`` rows) says *which stored rows* it removes or replaces: positions in the live files of
the snapshot it read (:func:`live_files` reads each file's live rows with their positions, the rows its
deletion vector marks left out). :func:`stage_edits` then hands a write transaction the change:

* **copy-on-write** (the default): each touched file is written again without its removed rows and with
  its replaced rows in place (new sequence numbers, so a read lists them after the rows committed before);
  the commit removes the old file;
* **deletion vectors** (``deletion-vectors.enabled``): the positions are added to the files' vectors and
  the bucket's index files are written again (the old ones replaced); replacement rows are appended as new
  files. A file whose every row is marked is removed instead.

Inserted rows (a merge's, a changelog's ``+I``) are appended either way. The commit is an ``OVERWRITE``
snapshot: the files it removes, the index files it replaces and the files its vectors mark must still be
live, else it fails with a :class:`~mergetable.core.errors.CommitConflictError` and the operation computes
again on the new snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyroaring import BitMap, BitMap64

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.transaction import WriteTransaction
from mergetable.core.buckets import Partition
from mergetable.core.deletion_vectors import Vector, kept_mask, load_vector
from mergetable.core.predicates import Filters
from mergetable.dml.apply import DmlTable
from mergetable.metadata.models import CommitMessage, DataFileMeta, Snapshot
from mergetable.read.scan import Split
from mergetable.write.append import write_append_files


@dataclass
class LiveFile:
    """The live rows of one data file (in the table's current schema) and their positions in the file."""

    split: Split
    file: DataFileMeta
    rows: pa.Table
    positions: np.ndarray


@dataclass
class Edit:
    """What an operation does to one file: rows removed and rows replaced (indexes into ``live.rows``)."""

    live: LiveFile
    removed: np.ndarray
    replaced: np.ndarray | None = None
    new_rows: pa.Table | None = None
    """The rows replacing ``replaced``, in the same order."""


def live_files(
    table: DmlTable,
    snapshot: Snapshot,
    filter: Filters | None = None,
    buckets: set[tuple[Partition, int]] | None = None,
) -> Iterator[LiveFile]:
    """The files of ``snapshot`` that ``filter`` may match (by partition and statistics; of ``buckets`` when
    given), each with its live rows, in commit order within a bucket."""
    reader = table.split_reader()
    indexes = IndexManifestIO(table.fileio)
    for split in table.plan(filter, snapshot_id=snapshot.id):
        if buckets is not None and (split.partition, split.bucket) not in buckets:
            continue
        vectors = split.vectors
        for f in split.files:
            one = Split(split.snapshot_id, split.partition, split.bucket, (((f,),),), split.total_buckets)
            parts = list(reader.read_split(one, prefetch=True))
            rows = pa.concat_tables(parts) if parts else table.schema.empty_table()
            positions = np.arange(rows.num_rows, dtype=np.int64)
            deletion = vectors.get(f.file_name)
            if deletion is not None:
                mask = kept_mask(load_vector(table.fileio, indexes.paths.index_dir, deletion), 0, rows.num_rows)
                if mask is not None:
                    rows, positions = rows.filter(pa.array(mask)), positions[mask]
            yield LiveFile(one, f, rows, positions)


def stage_edits(table: DmlTable, base: Snapshot, edits: list[Edit], tx: WriteTransaction) -> None:
    """Hand ``tx`` the messages of ``edits`` on snapshot ``base`` (see the module docstring)."""
    edits = [e for e in edits if len(e.removed) or (e.replaced is not None and len(e.replaced))]
    if table.table_options.deletion_vectors_enabled:
        _with_vectors(table, base, edits, tx)
        return
    next_seq: dict[tuple[Partition, int], int] = {}
    schema = table.table_schema
    for e in edits:
        split = e.live.split
        rows = _rewritten(e)
        bucket_id = (split.partition, split.bucket)
        first = next_seq.get(bucket_id, 0)
        next_seq[bucket_id] = first + rows.num_rows
        written = write_append_files(table.fileio, schema, split.partition, split.bucket, rows, first)
        message = CommitMessage(
            partition=split.partition,
            bucket=split.bucket,
            total_buckets=split.total_buckets,
            new_files=tuple(written),
            deleted_files=(e.live.file,),
        )
        tx.adopt([message])


def _rewritten(e: Edit) -> pa.Table:
    """The live rows of ``e``'s file with its replaced rows in place and its removed rows left out."""
    rows = e.live.rows
    if e.replaced is not None and e.new_rows is not None and len(e.replaced):
        source = np.arange(rows.num_rows)
        source[e.replaced] = rows.num_rows + np.arange(len(e.replaced))
        new = e.new_rows.cast(rows.schema)
        rows = pa.concat_tables([rows, new]).take(pa.array(source))
    if len(e.removed):
        keep = np.ones(rows.num_rows, dtype=bool)
        keep[e.removed] = False
        rows = rows.filter(pa.array(keep))
    return rows


def _with_vectors(table: DmlTable, base: Snapshot, edits: list[Edit], tx: WriteTransaction) -> None:
    opts = table.table_options
    bitmap64 = opts.deletion_vectors_bitmap64
    indexes = IndexManifestIO(table.fileio)
    deletion = indexes.deletion_files(base)
    by_bucket: dict[tuple[Partition, int], list[Edit]] = {}
    for e in edits:
        by_bucket.setdefault((e.live.split.partition, e.live.split.bucket), []).append(e)
    for (partition, bucket), group in by_bucket.items():
        vectors: dict[str, Vector] = indexes.vectors(deletion.get((partition, bucket), {}))
        dropped: list[DataFileMeta] = []
        for e in group:
            f = e.live.file
            taken = e.removed if e.replaced is None else np.concatenate([e.removed, e.replaced])
            positions = e.live.positions[taken]
            old = vectors.get(f.file_name)
            fresh: Vector = BitMap64(positions.tolist()) if bitmap64 else BitMap(positions.astype(np.uint32))
            if old is not None:
                fresh = (BitMap64(old) if bitmap64 else BitMap(old)) | fresh  # type: ignore[operator]
            if len(fresh) >= f.row_count:  # nothing left: the file goes
                vectors.pop(f.file_name, None)
                dropped.append(f)
            else:
                vectors[f.file_name] = fresh
            if e.new_rows is not None and e.new_rows.num_rows:
                tx.write(e.new_rows)
        before = indexes.bucket_index_files(base, partition, bucket)
        after = indexes.write_vectors(vectors, bitmap64, opts.deletion_vector_index_file_target_size)
        total = group[0].live.split.total_buckets
        message = CommitMessage(
            partition=partition,
            bucket=bucket,
            total_buckets=total,
            deleted_files=tuple(dropped),
            new_index_files=tuple(after),
            deleted_index_files=tuple(before),
        )
        tx.adopt([message])


__all__ = ["Edit", "LiveFile", "live_files", "stage_edits"]
