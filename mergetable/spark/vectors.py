"""Deletion vectors applied inside Spark: the files of a deletion-vector table read by Spark's Parquet reader.

A file above level 0 of a deletion-vector table is read on its own, minus the rows its vector marks
(:mod:`mergetable.read.deletion`). :func:`mergetable.spark.native.native_read` reads such files with
``spark.read.parquet`` too; :func:`without_marked` then drops the marked rows with a broadcast anti-join of
``_metadata.file_name`` (as a file number) and ``_metadata.row_index`` (the row's position in its file, which
Spark's Parquet reader computes whatever row groups a filter skips), packed into one 64-bit key, against the
vectors' positions, so no row crosses into Python. Marks that form few runs of consecutive positions (a range
deleted, as a delete of an append table by a column its rows arrived in order of often is) are dropped by a
filter on the same key instead, with no join (:data:`RANGE_RUNS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.read.scan import Split
from mergetable.table import Table

_KEY = "__mt_marked"
_ROW_BITS = 40
"""Bits of a marked row's key that hold its position (a file holds fewer than 2^40 rows)."""
RANGE_RUNS = 32
"""The most runs of consecutive marked positions (all files together) dropped by a range filter, not a join."""
BROADCAST_ROWS = 4_000_000
"""The most marked positions sent to every task with the join (more: Spark plans the anti-join itself)."""


def vector_files(table: Table, splits: Sequence[Split]) -> tuple[list[str], Marked] | None:
    """The paths of the files of ``splits`` that are read on their own with a vector, and the positions those
    vectors mark; None when a section of ``splits`` needs more than that (a merge-on-read bucket, a file of an
    older schema, a partial write)."""
    schema_id = table.table_schema.id
    append = table.table_schema.is_append_table  # an append table's files are all at level 0, read on their own
    paths: list[str] = []
    ids: dict[str, int] = {}
    keys: list[np.ndarray] = []
    indexes = IndexManifestIO(table.fileio)
    for split in splits:
        if not split.deletion_files:
            return None
        vectors = indexes.vectors(split.vectors)
        for section in split.sections:
            if len(section) != 1:
                return None
            for f in section[0]:
                if (
                    (f.level == 0 and not append)
                    or f.delete_row_count != 0
                    or f.write_cols is not None
                    or f.schema_id != schema_id
                ):
                    return None
                paths.append(table.path_factory.data_file(split.partition, split.bucket, f.file_name))
                vector = vectors.get(f.file_name)
                if vector is not None and len(vector):
                    file_id = ids.setdefault(f.file_name, len(ids))
                    keys.append(np.asarray(vector.to_array(), dtype=np.int64) | (file_id << _ROW_BITS))
    return paths, Marked(ids, np.concatenate(keys) if keys else np.empty(0, np.int64))


@dataclass(frozen=True)
class Marked:
    """The marked rows of some files as one 64-bit key each: the file's number (``ids``) above the row's position."""

    ids: dict[str, int]
    keys: np.ndarray


def with_positions(rows: DataFrame, marked: Marked) -> DataFrame:
    """``rows`` of a Parquet scan with each row's key (file number and position, for :func:`without_marked`)."""
    if not marked.ids:
        return rows
    numbers = F.create_map(*[c for name, i in marked.ids.items() for c in (F.lit(name), F.lit(i))])
    file_id = F.coalesce(F.element_at(numbers, F.col("_metadata.file_name")).cast("long"), F.lit(-1))
    return rows.select("*", (file_id * F.lit(1 << _ROW_BITS) + F.col("_metadata.row_index")).alias(_KEY))


def without_marked(spark: SparkSession, rows: DataFrame, marked: Marked) -> DataFrame:
    """``rows`` (from :func:`with_positions`) without the ``marked`` ones, and without the key column. The join is
    on one 64-bit key, which Spark's broadcast hash join probes as a long hash map."""
    if not marked.ids:
        return rows
    runs = _runs(marked.keys)
    if runs is not None:
        key = F.col(_KEY)
        hit = reduce(lambda a, b: a | b, [key.between(int(lo), int(hi)) for lo, hi in runs])
        return rows.where(~hit).drop(_KEY)
    deleted = spark.createDataFrame(pa.table({_KEY: pa.array(marked.keys, pa.int64())}))
    if len(marked.keys) <= BROADCAST_ROWS:
        deleted = F.broadcast(deleted)
    return rows.join(deleted, [_KEY], "left_anti").drop(_KEY)


def _runs(keys: np.ndarray) -> list[tuple[int, int]] | None:
    """The runs of consecutive ``keys`` (first, last), None when there are more than :data:`RANGE_RUNS`.

    >>> _runs(np.array([7, 3, 4, 5, 9, 8]))
    [(3, 5), (7, 9)]
    """
    ordered = np.unique(keys)
    if not len(ordered):
        return None
    breaks = np.nonzero(np.diff(ordered) != 1)[0]
    if len(breaks) + 1 > RANGE_RUNS:
        return None
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(ordered) - 1]])
    return [(int(ordered[s]), int(ordered[e])) for s, e in zip(starts, ends, strict=True)]


__all__ = ["Marked", "vector_files", "with_positions", "without_marked"]
