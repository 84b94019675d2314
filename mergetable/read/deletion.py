"""Reading the files of a deletion-vector table: each file's rows minus the positions its vector marks.

A file above level 0 of a deletion-vector table holds at most one live row per key across the bucket (every
older copy of a key is marked in its file's vector), so it is read on its own, with no merge
(:func:`read_masked`): the row groups a value filter cannot rule out are read whole (positions are counted
from the file's start), the marked rows dropped with a boolean mask built from the vector, then the filter
applied exactly. With ``deletion-vectors.merge-on-read``, a bucket that still has level-0 files is merged
(:func:`merged_with_vectors`): its files are read masked and merged with the table's merge engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from mergetable.core.deletion_vectors import Vector, kept_mask, load_vector
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import DataFileMeta
from mergetable.read.datafile import RowGroupSlice, row_group_stats
from mergetable.read.projection import FileProjection
from mergetable.read.scan import Split


class VectorReader(Protocol):
    """What this module needs of :class:`~mergetable.read.reader.SplitReader` (which calls into it)."""

    fileio: FileIO
    schema: TableSchema
    paths: PathFactory
    afs: Any
    row_group_pruning: bool

    def read_file(
        self,
        split: Split,
        f: DataFileMeta,
        filter_expr: pc.Expression | None,
        plain: bool = False,
        sequenced: bool = True,
        row_groups: RowGroupSlice | None = None,
    ) -> pa.Table: ...
    def projection(self, schema_id: int) -> FileProjection | None: ...
    def split_filters(self, split: Split) -> tuple[pc.Expression | None, pc.Expression | None]: ...
    def merge_files(
        self, runs: Sequence[Sequence[DataFileMeta]], read: Callable[[DataFileMeta, bool], pa.Table]
    ) -> pa.Table: ...
    def finish(self, kv: pa.Table) -> pa.Table: ...
    def _projected(self, rows: pa.Table) -> pa.Table: ...


def vector_of(reader: VectorReader, split: Split, f: DataFileMeta) -> Vector | None:
    """The deletion vector of ``f`` in ``split`` (None: it has none)."""
    deletion = split.vectors.get(f.file_name)
    if deletion is None:
        return None
    return load_vector(reader.fileio, reader.paths.index_dir, deletion)


def read_masked(
    reader: VectorReader,
    split: Split,
    f: DataFileMeta,
    filter_expr: pc.Expression | None,
    plain: bool = False,
) -> pa.Table:
    """The rows of ``f`` its vector does not mark, matching ``filter_expr`` (``plain``: user columns only, as
    :meth:`~mergetable.read.reader.SplitReader.read_file` reads them)."""
    vector = vector_of(reader, split, f)
    if vector is None or not len(vector):
        return reader.read_file(split, f, filter_expr, plain=plain)
    groups = _candidate_groups(reader, split, f, filter_expr)
    if groups is None:
        table = reader.read_file(split, f, None, plain=plain)
        mask = kept_mask(vector, 0, table.num_rows)
    else:
        slices, starts = groups
        if not slices:
            return reader.read_file(split, f, pc.scalar(False), plain=plain)
        joined = RowGroupSlice(tuple(i for g in slices for i in g.ids), sum(g.rows for g in slices), 0)
        table = reader.read_file(split, f, None, plain=plain, row_groups=joined)
        masks = [kept_mask(vector, start, g.rows) for g, start in zip(slices, starts, strict=True)]
        mask = None
        if any(m is not None for m in masks):
            mask = np.concatenate(
                [np.ones(g.rows, bool) if m is None else m for g, m in zip(slices, masks, strict=True)]
            )
    if mask is not None:
        table = table.filter(pa.array(mask))
    return table if filter_expr is None else table.filter(filter_expr)


def _candidate_groups(
    reader: VectorReader, split: Split, f: DataFileMeta, filter_expr: pc.Expression | None
) -> tuple[list[RowGroupSlice], list[int]] | None:
    """The row groups of ``f`` that ``filter_expr`` may match (by their statistics) and where each starts;
    None: read the whole file (no filter, a file of another schema, or statistics that cannot be trusted)."""
    if filter_expr is None or not reader.row_group_pruning or reader.projection(f.schema_id) is not None:
        return None
    path = reader.paths.data_file(split.partition, split.bucket, f.file_name)
    every = row_group_stats(reader.fileio, reader.afs, path, None)
    if len(every) <= 1:
        return None
    fragment = ds.ParquetFileFormat().make_fragment(path, filesystem=reader.afs)
    kept = {rg.id for rg in fragment.subset(filter_expr).row_groups}
    starts = np.concatenate([[0], np.cumsum([g.rows for g in every])[:-1]]).tolist()
    chosen = [(g, s) for g, s in zip(every, starts, strict=True) if g.ids and g.ids[0] in kept]
    return [g for g, _ in chosen], [int(s) for _, s in chosen]


def has_vectors(split: Split, runs: Sequence[Sequence[DataFileMeta]]) -> bool:
    """Whether a file of ``runs`` has a deletion vector in ``split``."""
    return bool(split.deletion_files) and any(f.file_name in split.vectors for run in runs for f in run)


def read_alone(reader: VectorReader, runs: Sequence[Sequence[DataFileMeta]]) -> bool:
    """Whether the files of a section are read on their own, each minus its vector: one run above level 0
    without retracts, or any file of an append table (nothing to merge)."""
    append = reader.schema.is_append_table
    return len(runs) == 1 and all((f.level > 0 or append) and not f.delete_row_count for f in runs[0])


def read_section(
    reader: VectorReader, split: Split, runs: Sequence[Sequence[DataFileMeta]], filter_expr: pc.Expression | None
) -> Iterator[pa.Table]:
    """The visible rows (user columns) of a section of ``split`` whose files have vectors."""
    if read_alone(reader, runs):
        for f in runs[0]:
            table = read_masked(reader, split, f, filter_expr, plain=True)
            if table.num_rows:
                yield reader._projected(table)
        return
    yield reader.finish(merged_with_vectors(reader, split, runs))


def merged_with_vectors(reader: VectorReader, split: Split, runs: Sequence[Sequence[DataFileMeta]]) -> pa.Table:
    """The merged key-value rows of a section (retracts kept), each file read without its marked rows."""
    key = reader.split_filters(split)[0]
    return reader.merge_files(runs, lambda f, _: read_masked(reader, split, f, key))


__all__ = ["has_vectors", "merged_with_vectors", "read_alone", "read_masked", "read_section", "vector_of"]
