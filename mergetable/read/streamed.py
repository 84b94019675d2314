"""A section of several sorted runs merged window by window, its files decoded as streams (see
:mod:`mergetable.read.windows`); the windows merge on the process's merge threads (:func:`.parallel.ordered_map`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction
from mergetable.merge.base import WRITE_MASK, drop_write_mask, with_write_mask
from mergetable.metadata.models import DataFileMeta
from mergetable.read.datafile import RowGroupSlice, RowGroupStream, whole_file
from mergetable.read.key_ranges import slices_in_range
from mergetable.read.order import oldest_first, sequence_ordered
from mergetable.read.parallel import ordered_map
from mergetable.read.plain import FileReading
from mergetable.read.scan import Split
from mergetable.read.windows import Piece, RunCursor, windows


class StreamReader(FileReading, Protocol):
    """What this module needs of :class:`~mergetable.read.reader.SplitReader` (which calls into it)."""

    schema: TableSchema
    merge_function: MergeFunction
    window_key: str | None
    key_filter: pc.Expression | None
    window_bytes: int
    piece_rows: int
    read_schema: pa.Schema

    def merged_section(
        self, split: Split, runs: Sequence[Sequence[DataFileMeta]], exact_sequence: bool = ...
    ) -> pa.Table: ...
    def finish(self, kv: pa.Table) -> pa.Table: ...
    def _visible(self, rows: pa.Table, seq_ordered: bool) -> pa.Table: ...
    def split_filters(self, split: Split) -> tuple[pc.Expression | None, pc.Expression | None]: ...
    def slices(self, split: Split, f: DataFileMeta, budget: int) -> list[RowGroupSlice | None]: ...
    def _as_read(self, table: pa.Table, f: DataFileMeta, plain: bool, sequenced: bool) -> pa.Table: ...
    def _file_columns(self, plain: bool, sequenced: bool, visible: DataFileMeta | None = ...) -> list[str]: ...
    def stream_file(
        self,
        split: Split,
        f: DataFileMeta,
        columns: Sequence[str],
        groups: Sequence[Sequence[int]] | None,
        ahead_bytes: int,
        row_bytes: float,
    ) -> RowGroupStream | None: ...


def merged_windows(
    reader: StreamReader,
    split: Split,
    runs: Sequence[Sequence[DataFileMeta]],
    exact_sequence: bool = True,
    window_bytes: int | None = None,
    visible: bool = False,
    prefetch: bool = False,
    even: bool = False,
    merge_ahead: int = 1,
) -> Iterator[pa.Table]:
    """:meth:`SplitReader.merged_windows <mergetable.read.reader.SplitReader.merged_windows>`."""
    partial = any(f.write_cols is not None for r in runs for f in r)
    key = reader.window_key
    if key is None:
        kv = reader.merged_section(split, runs, exact_sequence)
        yield reader.finish(kv) if visible else kv
        return
    files = oldest_first(f for r in runs for f in r)
    seq_ordered = sequence_ordered(files)
    sequenced = not seq_ordered or exact_sequence
    age = {f.file_name: i for i, f in enumerate(files)}
    budget = max(1, (window_bytes or reader.window_bytes) // len(runs))
    key_type = reader.read_schema.field(key).type

    key_filter = reader.split_filters(split)[0]
    # Without a key predicate of the user's, files are decoded ahead of the merge as streams and a key-range
    # split prunes row groups by their statistics itself (integer keys: exact statistics).
    stream = reader.key_filter is None and (split.key_range is None or pa.types.is_integer(key_type))
    streams: dict[str, RowGroupStream | None] = {}
    inside: set[tuple[str, tuple[int, ...]]] = set()  # slices wholly within the split's key range

    def load(f: DataFileMeta, part: RowGroupSlice) -> pa.Table:
        source = streams.get(f.file_name)
        if source is None:
            groups = part if part.ids else None
            table = reader.read_file(split, f, key_filter, sequenced=sequenced, row_groups=groups, visible=visible)
        else:
            table = reader._as_read(source.take(part.rows), f, False, sequenced)
            if key_filter is not None and (f.file_name, part.ids) not in inside:
                table = table.filter(key_filter)
        if partial and WRITE_MASK not in table.schema.names:
            table = with_write_mask(table, reader.schema)
        return table

    def pending(f: DataFileMeta) -> list[tuple[DataFileMeta, RowGroupSlice]]:
        parts = [s or whole_file(f, key_type) for s in reader.slices(split, f, budget)]
        if not stream:
            return [(f, p) for p in parts]
        kept = slices_in_range(f, parts, split.key_range, key_type, inside)
        groups = None if len(parts) == 1 and not parts[0].ids else [p.ids for p in kept]
        rows = sum(p.rows for p in parts)
        row_bytes = sum(p.nbytes for p in parts) / max(1, rows)
        columns = reader._file_columns(False, sequenced, f if visible else None)
        if kept:
            ahead = budget if prefetch else 0
            streams[f.file_name] = reader.stream_file(split, f, columns, groups, ahead, row_bytes)
        return [(f, p) for p in kept]

    half = max(1, reader.piece_rows // 2)
    piece, least = (reader.piece_rows, half) if prefetch or even else (half, 1)
    cursors = [
        RunCursor(deque(item for f in run for item in pending(f)), piece_rows=piece, least_rows=least) for run in runs
    ]
    single = len(runs) == 1 and not partial

    def merged(pieces: list[Piece]) -> pa.Table:  # on a merge thread: touches only its own window
        if single:
            kv = concat_or_empty([t for _, t in pieces], reader.read_schema)
            return reader.finish(kv) if visible else kv
        pieces.sort(key=lambda p: age[p[0].file_name])  # stable: a file's pieces stay in key order
        rows = concat_or_empty([t for _, t in pieces], pieces[0][1].schema)
        if visible:
            return reader._visible(rows, seq_ordered)
        return drop_write_mask(reader.merge_function.merge(rows, seq_ordered=seq_ordered))

    try:
        yield from ordered_map(merged, windows(cursors, key, load, True), 1 if single else merge_ahead)
    finally:
        for source in streams.values():
            if source is not None:
                source.close()


def concat_or_empty(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """``tables`` as one table (``schema``'s empty table when there are none; one table as it is)."""
    if not tables:
        return schema.empty_table()
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


__all__ = ["StreamReader", "concat_or_empty", "merged_windows"]
