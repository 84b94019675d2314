"""Deletion vectors applied inside Spark: the files of a deletion-vector table read by Spark's Parquet reader.

A file above level 0 of a deletion-vector table is read on its own, minus the rows its vector marks
(:mod:`mergetable.read.deletion`). :func:`mergetable.spark.native.native_read` reads such files with
``spark.read.parquet`` too, and :func:`without_marked` drops the marked rows inside Spark, so no row crosses
into Python:

* files whose vector marks nothing are read as they are, with the table's other plain files;
* every other file is its own scan, filtered on ``_metadata.row_index`` (the row's position in its file, which
  Spark's Parquet reader computes whatever row groups a filter skips): a few marked positions with ``NOT IN``,
  more with the vector as a bitset, a literal ``array<bigint>`` of 64 positions a word over the marked range,
  tested with a shift (no join, no hash probe, nothing for Spark to collect or broadcast at each query);
* beyond :data:`FILTERED_FILES` such files, or :data:`FILTERED_WORDS` words of bitsets, the remaining files are
  one scan whose rows are anti-joined (broadcast) on a 64-bit key, the file's number above the row's position,
  against the vectors' positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.read.scan import Split
from mergetable.table import Table

_KEY = "__mt_marked"
_ROW_BITS = 40
"""Bits of a marked row's key that hold its position (a file holds fewer than 2^40 rows)."""
BROADCAST_ROWS = 4_000_000
"""The most marked positions sent to every task with the join (more: Spark plans the anti-join itself)."""
IN_LIST = 64
"""The most marked positions of a file matched with ``NOT IN`` rather than a bitset."""
FILTERED_FILES = 64
"""The most files with marked rows read each as its own filtered scan (the others: one scan and the join)."""
FILTERED_WORDS = 1 << 22
"""The most 64-bit words of bitsets (32 MiB) the filtered scans' literals hold together."""


@dataclass(frozen=True)
class VectorFile:
    """A data file read on its own: its path, its row count and the positions its vector marks (sorted)."""

    path: str
    rows: int
    marked: np.ndarray


def vector_files(table: Table, splits: Sequence[Split]) -> list[VectorFile]:
    """The files of ``splits`` (planned with ``sections="vectored"``: each of their files read on its own) with
    the positions their vectors mark.

    >>> import pyarrow as pa, mergetable as mt, tempfile
    >>> t = mt.create_table(tempfile.mkdtemp() + "/t", pa.schema([("id", pa.int64())]), ["id"],
    ...                     options={"deletion-vectors.enabled": "true"})
    >>> _ = t.write(pa.table({"id": [1, 2, 3]})), t.write(pa.table({"id": [2]}))
    >>> [(f.rows, f.marked.tolist()) for f in vector_files(t, t.plan(sections="vectored"))]
    [(3, [1])]
    """
    out: list[VectorFile] = []
    indexes = IndexManifestIO(table.fileio)
    for split in splits:
        vectors = indexes.vectors(split.vectors) if split.deletion_files else {}
        for f in split.files:
            vector = vectors.get(f.file_name)
            marked = np.asarray(vector.to_array(), np.int64) if vector is not None else np.empty(0, np.int64)
            path = table.path_factory.data_file(split.partition, split.bucket, f.file_name)
            out.append(VectorFile(path, f.row_count, marked))
    return out


def without_marked(
    spark: SparkSession, scan: Callable[[list[str]], DataFrame], files: Sequence[VectorFile]
) -> list[DataFrame]:
    """Scans (``scan(paths)``: ``spark.read.parquet`` of those files, one schema) of ``files`` without the rows
    their vectors mark, to be unioned; see the module docstring for how."""
    plain = [f.path for f in files if not len(f.marked)]
    marked = [f for f in files if len(f.marked)]
    out = [scan(plain)] if plain else []
    words = 0
    for i, f in enumerate(marked):
        need = 0 if len(f.marked) <= IN_LIST else _words(f.marked)
        if i >= FILTERED_FILES or words + need > FILTERED_WORDS:
            out.append(_anti_joined(spark, scan, marked[i:]))
            break
        words += need
        out.append(scan([f.path]).where(kept(f.marked)))
    return out


def kept(marked: np.ndarray) -> Column:
    """Whether the row at ``_metadata.row_index`` is not one of the sorted positions ``marked``."""
    position = F.col("_metadata.row_index")
    if len(marked) <= IN_LIST:
        return ~position.isin(*[int(p) for p in marked])
    low, high = int(marked[0]), int(marked[-1])
    bits = np.zeros(_words(marked) * 64, np.uint8)
    bits[marked - low] = 1
    words = np.packbits(bits, bitorder="little").view("<i8")  # word k, bit j: position low + 64k + j
    bitset = F.split(F.lit(",".join(map(str, words.tolist()))), ",").cast("array<bigint>")  # folded once
    offset = position - F.lit(low)
    word = F.get(bitset, F.shiftright(offset, 6).cast("int"))
    bit = F.call_function("shiftright", word, offset.bitwiseAND(63).cast("int")).bitwiseAND(1)
    return (position < F.lit(low)) | (position > F.lit(high)) | (bit == 0)


def _words(marked: np.ndarray) -> int:
    return (int(marked[-1]) - int(marked[0])) // 64 + 1


def _anti_joined(spark: SparkSession, scan: Callable[[list[str]], DataFrame], files: Sequence[VectorFile]) -> DataFrame:
    """One scan of ``files`` anti-joined on (file number, position) against the positions their vectors mark."""
    names = {f.path.rsplit("/", 1)[-1]: i for i, f in enumerate(files)}
    numbers = F.create_map(*[c for name, i in names.items() for c in (F.lit(name), F.lit(i))])
    file_id = F.element_at(numbers, F.col("_metadata.file_name")).cast("long")
    rows = scan([f.path for f in files])
    keyed = rows.select("*", (file_id * F.lit(1 << _ROW_BITS) + F.col("_metadata.row_index")).alias(_KEY))
    keys = np.concatenate([f.marked | (i << _ROW_BITS) for i, f in enumerate(files)])
    deleted = spark.createDataFrame(pa.table({_KEY: pa.array(keys, pa.int64())}))
    if len(keys) <= BROADCAST_ROWS:
        deleted = F.broadcast(deleted)
    return keyed.join(deleted, [_KEY], "left_anti").drop(_KEY)


__all__ = ["VectorFile", "kept", "vector_files", "without_marked"]
