"""Planning reads of an append table (no primary key): every file read on its own, in commit order.

An append table's rows are its files' rows: no file holds a newer version of another file's row, so a read
merges nothing, each file is a section of its own (one run, read as plain Parquet with projection and filter
pushdown), and a file is skipped when its column statistics rule the filter out (value statistics are safe
to prune with here, unlike in a key table). Files are ordered by ``minSequenceNumber``: the order in which
their rows were committed (:mod:`mergetable.write.append`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mergetable.core.predicates import Conjunct, comparable, may_match
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import DataFileMeta, ManifestEntry


def commit_order(files: Sequence[DataFileMeta]) -> list[DataFileMeta]:
    """``files`` in the order their rows were committed (compaction keeps a run's numbers: its order holds)."""
    return sorted(files, key=lambda f: (f.min_sequence_number, f.max_sequence_number, f.file_name))


def append_sections(files: Sequence[DataFileMeta]) -> list[list[list[DataFileMeta]]]:
    """One section of one run per file, in commit order (nothing to merge)."""
    return [[[f]] for f in commit_order(files)]


def may_hold(entry: ManifestEntry, dnf: list[Conjunct], schema: TableSchema) -> bool:
    """Whether the file of ``entry`` may hold rows matching ``dnf``, by its column statistics (files written
    with another schema are kept: their statistics name that schema's columns)."""
    f = entry.file
    if dnf is None or f.schema_id != schema.id or not f.value_stats_cols:
        return True
    arrow = schema.arrow_schema
    stats = f.value_stats
    ranges: dict[str, tuple[object, object]] = {}
    for c, lo, hi in zip(f.value_stats_cols, stats.min_values, stats.max_values, strict=False):
        if lo is None or hi is None or c not in arrow.names:
            continue
        t = arrow.field(c).type
        if pa.types.is_floating(t) or pa.types.is_nested(t):
            continue
        ranges[c] = (comparable(lo, t), comparable(hi, t))
    return may_match(dnf, ranges.get, arrow)


__all__ = ["append_sections", "commit_order", "may_hold"]
