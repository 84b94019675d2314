"""Counting merged rows without materializing them.

A section that is one sorted run without retracts or partial writes holds exactly one visible row per
record, so with no filter it is counted from the files' row counts, no data read. Other sections are
merged reading only what the reader's columns need (the key columns plus the system columns, and the
value columns the merge engine needs to decide whether a row survives).
"""

from __future__ import annotations

from collections.abc import Iterable

from mergetable.core.deletion_vectors import DeletionFile
from mergetable.metadata.models import DataFileMeta
from mergetable.read.deletion import has_vectors, read_alone, read_section
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split

_NONE = DeletionFile("", 0, 0, 0)


def count_rows(reader: SplitReader, splits: Iterable[Split]) -> int:
    """The number of rows ``reader`` would return for ``splits``."""
    total = 0
    for split in splits:
        for runs in split.sections:
            if has_vectors(split, runs):
                total += _count_with_vectors(reader, split, runs)
                continue
            plain = len(runs) == 1 and all(not f.delete_row_count and f.write_cols is None for f in runs[0])
            if plain and reader.dnf is None and split.key_range is None:
                total += sum(f.row_count for f in runs[0])
            elif plain:
                filter_expr = reader.split_filters(split)[1]
                total += sum(reader.read_file(split, f, filter_expr, plain=True).num_rows for f in runs[0])
            else:
                windows = reader.merged_windows(split, runs, exact_sequence=False, visible=True)
                total += sum(w.num_rows for w in windows)
    return total


def _count_with_vectors(reader: SplitReader, split: Split, runs: tuple[tuple[DataFileMeta, ...], ...]) -> int:
    """Rows of a section whose files have deletion vectors: row counts minus the vectors' cardinalities when
    the files are read on their own without a filter, else the rows read."""
    vectors = split.vectors
    alone = read_alone(reader, runs)
    if alone and reader.dnf is None and all(vectors.get(f.file_name, _NONE).cardinality is not None for f in runs[0]):
        return sum(f.row_count - (vectors[f.file_name].cardinality or 0) if f.file_name in vectors else f.row_count
                   for f in runs[0])  # fmt: skip
    return sum(t.num_rows for t in read_section(reader, split, runs, reader.split_filters(split)[1]))
