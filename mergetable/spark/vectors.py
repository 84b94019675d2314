"""Deletion vectors applied inside Spark: the files of a deletion-vector table read by Spark's Parquet reader.

A file above level 0 of a deletion-vector table is read on its own, minus the rows its vector marks
(:mod:`mergetable.read.deletion`). :func:`mergetable.spark.native.native_read` reads such files with
``spark.read.parquet`` too; :func:`without_marked` then drops the marked rows with a broadcast anti-join of
``_metadata.file_name`` and ``_metadata.row_index`` (the row's position in its file, which Spark's Parquet
reader computes whatever row groups a filter skips) against the vectors' positions, so no row crosses into
Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.read.scan import Split
from mergetable.table import Table

_FILE, _ROW = "__mt_file", "__mt_row"
BROADCAST_ROWS = 4_000_000
"""The most marked positions sent to every task with the join (more: Spark plans the anti-join itself)."""


def vector_files(table: Table, splits: Sequence[Split]) -> tuple[list[str], pa.Table] | None:
    """The paths of the files of ``splits`` that are read on their own with a vector, and the positions those
    vectors mark (``__mt_file``: file name, ``__mt_row``: position); None when a section of ``splits`` needs
    more than that (a merge-on-read bucket, a file of an older schema, a partial write)."""
    schema_id = table.table_schema.id
    paths: list[str] = []
    names: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    indexes = IndexManifestIO(table.fileio)
    for split in splits:
        if not split.deletion_files:
            return None
        vectors = indexes.vectors(split.vectors)
        for section in split.sections:
            if len(section) != 1:
                return None
            for f in section[0]:
                if f.level == 0 or f.delete_row_count != 0 or f.write_cols is not None or f.schema_id != schema_id:
                    return None
                paths.append(table.path_factory.data_file(split.partition, split.bucket, f.file_name))
                vector = vectors.get(f.file_name)
                if vector is not None and len(vector):
                    positions = np.asarray(vector.to_array(), dtype=np.int64)
                    rows.append(positions)
                    names.append(np.full(len(positions), f.file_name, dtype=object))
    marked = pa.table(
        {
            _FILE: pa.array(np.concatenate(names) if names else [], pa.string()),
            _ROW: pa.array(np.concatenate(rows) if rows else [], pa.int64()),
        }
    )
    return paths, marked


def with_positions(rows: DataFrame) -> DataFrame:
    """``rows`` of a Parquet scan with each row's file name and position (for :func:`without_marked`)."""
    return rows.select("*", F.col("_metadata.file_name").alias(_FILE), F.col("_metadata.row_index").alias(_ROW))


def without_marked(spark: SparkSession, rows: DataFrame, marked: pa.Table) -> DataFrame:
    """``rows`` (from :func:`with_positions`) without those ``marked``, and without the position columns."""
    if marked.num_rows:
        deleted = spark.createDataFrame(marked)
        if marked.num_rows <= BROADCAST_ROWS:
            deleted = F.broadcast(deleted)
        rows = rows.join(deleted, [_FILE, _ROW], "left_anti")
    return rows.drop(_FILE, _ROW)


__all__ = ["vector_files", "with_positions", "without_marked"]
