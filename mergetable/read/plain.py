"""Reading a sorted run that needs no merge: a file's user columns, whole or a few row groups at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import DataFileMeta
from mergetable.read.datafile import RowGroupSlice, row_group_stats
from mergetable.read.key_ranges import chunk_slices, slices_in_range, trim_edges
from mergetable.read.scan import Split


class FileReading(Protocol):
    """:meth:`~mergetable.read.reader.SplitReader.read_file`, which the reading modules call back."""

    def read_file(
        self,
        split: Split,
        f: DataFileMeta,
        filter_expr: pc.Expression | None,
        plain: bool = ...,
        sequenced: bool = ...,
        row_groups: RowGroupSlice | None = ...,
        visible: bool = ...,
    ) -> pa.Table: ...


class PlainReader(FileReading, Protocol):
    """What this module needs of :class:`~mergetable.read.reader.SplitReader` (which calls into it)."""

    fileio: FileIO
    paths: PathFactory
    afs: Any
    schema: TableSchema
    window_key: str | None
    filter_expr: pc.Expression | None
    plain_schema: pa.Schema

    def slices(self, split: Split, f: DataFileMeta, budget: int) -> Sequence[RowGroupSlice | None]: ...


def plain_file(
    reader: PlainReader, split: Split, f: DataFileMeta, filter_expr: pc.Expression | None, budget: int, whole: bool
) -> Iterator[pa.Table]:
    """The user columns of ``f`` (rows matching ``filter_expr``), read ``budget`` bytes at a time (``whole``:
    at once, as fast as Arrow reads a file, for a consumer that keeps every row anyway)."""
    key = reader.window_key
    if split.key_range is not None and reader.filter_expr is None and key is not None:
        key_type = reader.schema.file_schema.field(key).type
        if pa.types.is_integer(key_type):
            yield from _plain_in_range(reader, split, f, filter_expr, None if whole else budget, key, key_type)
            return
    if whole:
        yield reader.read_file(split, f, filter_expr, plain=True)
        return
    for part in reader.slices(split, f, budget):
        yield reader.read_file(split, f, filter_expr, plain=True, row_groups=part)


def _plain_in_range(
    reader: PlainReader,
    split: Split,
    f: DataFileMeta,
    range_expr: pc.Expression | None,
    budget: int | None,
    key: str,
    key_type: pa.DataType,
) -> Iterator[pa.Table]:
    """:func:`plain_file` of a key-range split on an integer key: the row groups the range's statistics rule
    out are not read, and only those at its edges are filtered (a whole file's range filter would copy
    every row); ``budget`` None: every row group at once."""
    path = reader.paths.data_file(split.partition, split.bucket, f.file_name)
    inside: set[tuple[str, tuple[int, ...]]] = set()
    kept = slices_in_range(f, row_group_stats(reader.fileio, reader.afs, path, key), split.key_range, key_type, inside)
    for chunk in chunk_slices(kept, budget):
        ids = tuple(i for g in chunk for i in g.ids)
        joined = RowGroupSlice(ids, sum(g.rows for g in chunk), sum(g.nbytes for g in chunk))
        table = reader.read_file(split, f, None, plain=True, row_groups=joined)
        edges = [(f.file_name, g.ids) not in inside for g in chunk]
        yield trim_edges(table, chunk, edges, range_expr, reader.plain_schema)
