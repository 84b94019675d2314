"""Merge-on-read: read a split's sections and merge them through the table's merge engine, vectorized.

A section with one sorted run holds at most one record per key, so it is read as is (retracts dropped),
row-group slice by slice. A section with several runs is read window by window (:mod:`mergetable.read.windows`:
every run cut at the same key bound, chosen from row-group statistics; key filters pushed into Parquet); a
window's rows are concatenated oldest file first and merged with one stable sort + per-key selection. Value
filters are applied exactly, after the merge. Memory is bounded by :data:`WINDOW_BYTES` of row groups per
section being read, not by the size of a bucket.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.schemas import SchemaManager
from mergetable.core.fileio import FileIO
from mergetable.core.filters import to_expression
from mergetable.core.option_values import MIB
from mergetable.core.paths import PathFactory
from mergetable.core.predicates import Conjunct, columns_of, point_values, restrict
from mergetable.core.rowkind import RowKind, any_retract, is_retract
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from mergetable.merge import MergeFunction
from mergetable.merge.base import WRITE_MASK, drop_write_mask, with_write_mask
from mergetable.merge.layout import take_keyed
from mergetable.metadata.models import DataFileMeta
from mergetable.read.datafile import (
    RowGroupSlice,
    RowGroupStream,
    group_slices,
    read_data_file,
    read_key_points,
    row_group_stats,
)
from mergetable.read.deletion import has_vectors, merged_with_vectors, read_section
from mergetable.read.key_ranges import range_filter
from mergetable.read.order import effective_sequence, oldest_first, repeated, sequence_ordered
from mergetable.read.parallel import merge_threads, ordered_map, ordered_streams
from mergetable.read.plain import plain_file
from mergetable.read.projection import FileProjection
from mergetable.read.scan import Split
from mergetable.read.streamed import concat_or_empty, merged_windows
from mergetable.read.whole import merged_whole
from mergetable.read.windows import PIECE_ROWS, windowable

#: Uncompressed bytes of row groups buffered while one section is read (shared by its runs).
WINDOW_BYTES = 64 * MIB
MERGE_AHEAD_STREAMING = 1
"""Windows of a streaming scan merged at once. A scan's memory holds each of them (and the rows cut for the next):
20M rows in one bucket, six runs, with 16 threads, peaked at 339 MB merging one at a time, 461 MB two, 507 MB four."""
POINT_VALUES = 1024
"""The most first-key values a filter may pin for a read to look them up (see :func:`read_key_points`)."""


class SplitReader:
    """Reads splits of one table into merged Arrow data with the user's projection and filter."""

    def __init__(
        self,
        fileio: FileIO,
        schema: TableSchema,
        merge_function: MergeFunction,
        columns: Sequence[str] | None = None,
        dnf: list[Conjunct] | None = None,
    ) -> None:
        self.fileio = fileio
        self.schema = schema
        self.merge_function = merge_function
        self.paths = PathFactory.for_table(fileio.root, schema)
        self.columns = list(columns) if columns is not None else list(schema.column_names)
        self.dnf = dnf
        self.snapshot_ordering = schema.table_options.sequence_snapshot_ordering
        # Parquet statistics leave NaN out, and pyarrow then skips row groups holding the NaNs a filter
        # matches: filters on float columns are applied after reading instead.
        self.row_group_pruning = not any(
            pa.types.is_floating(schema.arrow_schema.field(c).type) for c in columns_of(dnf)
        )
        self.filter_expr = to_expression(dnf, schema.arrow_schema) if dnf is not None else None
        keys = list(schema.trimmed_primary_keys)
        filter_cols = [p[0] for c in (dnf or []) for p in c]
        wanted = list(dict.fromkeys([*self.columns, *filter_cols]))
        values = [c for c in merge_function.required_columns(wanted) if c not in keys]
        system = [] if schema.is_append_table else [SEQUENCE_NUMBER, VALUE_KIND]  # append files: user columns
        self.read_columns = [*keys, *system, *[c for c in schema.column_names if c in values]]
        self.read_columns = list(dict.fromkeys(self.read_columns))
        key_dnf = restrict(dnf, keys)
        self.key_filter = to_expression(key_dnf, schema.arrow_schema) if key_dnf is not None else None
        self.afs = fileio.arrow_fs()
        fs = schema.file_schema
        self.read_schema = pa.schema([fs.field(c) for c in self.read_columns])
        self.out_schema = pa.schema([schema.arrow_schema.field(c) for c in self.columns])
        # A single sorted run without retracts needs no system columns and takes every filter.
        plain = set(self.columns) | set(filter_cols)
        self.plain_columns = [c for c in fs.names if c in plain]
        self.unsequenced_columns = [c for c in self.read_columns if c != SEQUENCE_NUMBER]
        self.plain_schema = pa.schema([fs.field(c) for c in self.plain_columns])
        self.batch_size = schema.table_options.read_batch_size
        self.window_bytes = WINDOW_BYTES
        self.piece_rows = PIECE_ROWS
        first = keys[0] if keys else None
        self.window_key = first if first is not None and windowable(fs.field(first).type) else None
        self.single_key = first if len(keys) == 1 else None
        self.points = None if first is None else point_values(dnf, first, fs.field(first).type, POINT_VALUES)
        self._projections: dict[int, FileProjection] = {}

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_projections": {}}

    def projection(self, schema_id: int) -> FileProjection | None:
        """How files of ``schema_id`` are read into this reader's schema (None: as they are)."""
        if schema_id == self.schema.id:
            return None
        p = self._projections.get(schema_id)
        if p is None:
            p = FileProjection(SchemaManager(self.fileio).schema(schema_id), self.schema)
            self._projections[schema_id] = p
        return None if p.identity else p

    def _read_columns(
        self,
        path: str,
        f: DataFileMeta,
        columns: Sequence[str],
        filter_expr: pc.Expression | None,
        row_groups: RowGroupSlice | None = None,
    ) -> pa.Table:
        """``columns`` (reading names) of one file (or of ``row_groups`` of it), projected by field id when it
        has another schema."""
        p = self.projection(f.schema_id)
        if p is None and self.points is not None and filter_expr is not None:
            key = self.schema.trimmed_primary_keys[0]
            groups = row_groups.ids if row_groups is not None and row_groups.ids else None
            table = read_key_points(self.fileio, self.afs, path, columns, key, self.points, groups)
            return table.filter(filter_expr) if table.num_rows else table
        if p is None:
            return read_data_file(
                self.fileio, self.afs, path, f, columns, filter_expr, self.row_group_pruning, row_groups
            )
        table = read_data_file(self.fileio, self.afs, path, f, p.file_columns(columns), None, True, row_groups)
        fs = self.schema.file_schema
        table = p.project(table, pa.schema([fs.field(c) for c in columns]))
        return table if filter_expr is None else table.filter(filter_expr)

    # -- files ----------------------------------------------------------------------------------
    def read_file(
        self,
        split: Split,
        f: DataFileMeta,
        filter_expr: pc.Expression | None,
        plain: bool = False,
        sequenced: bool = True,
        row_groups: RowGroupSlice | None = None,
        visible: bool = False,
    ) -> pa.Table:
        """Read one data file (only ``row_groups`` of it, when given). ``plain``: only user columns;
        ``sequenced=False``: ``_SEQUENCE_NUMBER`` is replaced by the file's maximum (valid when runs are
        merged in sequence order, see merged_section); ``visible``: for a merge whose visible rows are all its
        caller keeps (see :meth:`_file_columns`)."""
        path = self.paths.data_file(split.partition, split.bucket, f.file_name)
        columns = self._file_columns(plain, sequenced, f if visible else None)
        return self._as_read(self._read_columns(path, f, columns, filter_expr, row_groups), f, plain, sequenced)

    def _file_columns(self, plain: bool, sequenced: bool, visible: DataFileMeta | None = None) -> list[str]:
        """The columns read of a file: ``plain``: the user's; else the key-value columns, ``_SEQUENCE_NUMBER`` only
        when ``sequenced``, and ``_VALUE_KIND`` unless ``visible`` is a file without retractions read for visible
        rows (which do not tell +I from +U: :meth:`_as_read` fills in +I)."""
        if plain:
            return self.plain_columns
        columns = self.read_columns if sequenced else self.unsequenced_columns
        if visible is not None and visible.delete_row_count == 0 and visible.write_cols is None:
            return [c for c in columns if c != VALUE_KIND]
        return columns

    def _as_read(self, table: pa.Table, f: DataFileMeta, plain: bool, sequenced: bool) -> pa.Table:
        """Rows read from ``f`` (:meth:`_file_columns`) as the reader's key-value (or ``plain``) schema; system
        columns left unread are filled in, uncopied (:func:`.order.repeated`)."""
        schema = self.plain_schema if plain else self.read_schema
        if not plain:
            if sequenced:
                table = effective_sequence(table, f, self.snapshot_ordering)
            names = table.schema.names
            filled = {SEQUENCE_NUMBER: f.max_sequence_number, VALUE_KIND: int(RowKind.INSERT)}
            missing = [c for c in self.read_columns if c in filled and c not in names]
            for c in missing:
                table = table.append_column(schema.field(c), repeated(filled[c], table.num_rows, schema.field(c).type))
            if missing:
                table = table.select(self.read_columns)
        if not table.schema.equals(schema):
            table = table.cast(schema)
        if f.write_cols is not None and not plain:
            p = self.projection(f.schema_id)
            table = with_write_mask(table, self.schema, p.written_names(f.write_cols) if p else f.write_cols)
        return table

    def stream_file(
        self,
        split: Split,
        f: DataFileMeta,
        columns: Sequence[str],
        groups: Sequence[Sequence[int]] | None,
        ahead_bytes: int,
        row_bytes: float,
    ) -> RowGroupStream | None:
        """Row groups of ``f``, read ``groups`` at a time (None: the whole file at once), decoded about
        ``ahead_bytes`` ahead of their consumer (rows of about ``row_bytes`` each); None when ``f`` has another
        schema (read with :meth:`read_file` instead)."""
        if self.projection(f.schema_id) is not None:
            return None
        path = self.paths.data_file(split.partition, split.bucket, f.file_name)
        ahead = int(ahead_bytes / max(1.0, row_bytes))
        return RowGroupStream(self.fileio, self.afs, path, groups, columns, self.piece_rows, ahead)

    # -- sections -------------------------------------------------------------------------------
    def merged_section(
        self, split: Split, runs: Sequence[Sequence[DataFileMeta]], exact_sequence: bool = True
    ) -> pa.Table:
        """Key-value rows of one section after merging (retracts still present). ``exact_sequence=False`` is for
        callers that drop ``_SEQUENCE_NUMBER``: the output then carries a file's maximum instead of each record's."""
        key = self.split_filters(split)[0]
        return self.merge_files(runs, lambda f, seq: self.read_file(split, f, key, sequenced=seq), exact_sequence)

    def merge_files(
        self,
        runs: Sequence[Sequence[DataFileMeta]],
        read: Callable[[DataFileMeta, bool], pa.Table],
        exact_sequence: bool = True,
    ) -> pa.Table:
        """:meth:`merged_section` of rows the caller reads: ``read(f, sequenced)`` gives file ``f``'s key-value
        rows as :meth:`read_file` does (for a lookup, only some keys' rows, see :mod:`mergetable.read.lookup`)."""
        partial = any(f.write_cols is not None for r in runs for f in r)
        if len(runs) == 1 and not partial:
            return concat_or_empty([read(f, True) for f in runs[0]], self.read_schema)
        # Files oldest first: the stable merge sort then breaks sequence ties by file age (read.order).
        files = oldest_first(f for r in runs for f in r)
        seq_ordered = sequence_ordered(files)
        # With ascending, disjoint sequence ranges, each file's maximum orders the records of a key exactly as
        # their own sequence numbers do (keys are unique within a level), so those need not be read.
        tables = [read(f, not seq_ordered or exact_sequence) for f in files]
        if partial:
            tables = [t if WRITE_MASK in t.schema.names else with_write_mask(t, self.schema) for t in tables]
        rows = concat_or_empty(tables, tables[0].schema if tables else self.read_schema)
        if rows.num_rows == 0:
            return rows
        return drop_write_mask(self.merge_function.merge(rows, seq_ordered=seq_ordered))

    def split_filters(self, split: Split) -> tuple[pc.Expression | None, pc.Expression | None]:
        """The key filter and the full filter of ``split``: the reader's, narrowed to its key range."""
        if split.key_range is None:
            return self.key_filter, self.filter_expr
        key = self.schema.trimmed_primary_keys[0]
        narrow = range_filter(key, self.schema.file_schema.field(key).type, split.key_range)
        if narrow is None:
            return self.key_filter, self.filter_expr
        return tuple(narrow if e is None else e & narrow for e in (self.key_filter, self.filter_expr))

    def slices(self, split: Split, f: DataFileMeta, budget: int) -> list[RowGroupSlice | None]:
        """How to read ``f`` in pieces of about ``budget`` uncompressed bytes (``None``: the whole file at once,
        for files small enough; its first key then comes from the file's metadata)."""
        if f.file_size * 4 <= budget:
            return [None]
        path = self.paths.data_file(split.partition, split.bucket, f.file_name)
        return list(group_slices(row_group_stats(self.fileio, self.afs, path, self.window_key), budget))

    def merged_windows(
        self,
        split: Split,
        runs: Sequence[Sequence[DataFileMeta]],
        exact_sequence: bool = True,
        window_bytes: int | None = None,
        visible: bool = False,
        prefetch: bool = False,
        even: bool = False,
        merge_ahead: int = 1,
    ) -> Iterator[pa.Table]:
        """:meth:`merged_section`, streamed window by window (key order; the same rows in the same order);
        ``visible``: each window as :meth:`finish` makes it (a reader's rows); ``prefetch``: files are decoded
        ahead of the merge by threads of their own (faster; up to twice the row groups in memory); ``even`` (implied
        by ``prefetch``): even windows (:attr:`RunCursor.least_rows`) for a consumer that queues none; otherwise
        runs show half pieces, so the windows a streaming scan queues between its workers are half as large;
        ``merge_ahead``: windows merged at once by the process's merge threads (:func:`.parallel.ordered_map`)."""
        return merged_windows(self, split, runs, exact_sequence, window_bytes, visible, prefetch, even, merge_ahead)

    def _visible(self, rows: pa.Table, seq_ordered: bool) -> pa.Table:
        """``finish(merge(rows))``; when the merge selects rows, only the columns a reader returns are taken."""
        idx = self.merge_function.survivors(rows, seq_ordered)
        if idx is None:
            return self.finish(drop_write_mask(self.merge_function.merge(rows, seq_ordered=seq_ordered)))
        if any_retract(rows.column(VALUE_KIND)):
            idx = idx[~is_retract(np.asarray(rows.column(VALUE_KIND).to_numpy())[idx])]
        return self._user_rows(take_keyed(rows.select(self.plain_columns), idx, self.single_key))

    def read_split_kv(self, split: Split) -> Iterator[pa.Table]:
        for runs in split.sections:
            yield (
                merged_with_vectors(self, split, runs) if has_vectors(split, runs) else self.merged_section(split, runs)
            )

    def read_split(
        self,
        split: Split,
        window_bytes: int | None = None,
        prefetch: bool = False,
        even: bool = False,
        merge_ahead: int = 1,
    ) -> Iterator[pa.Table]:
        """Visible rows of a split (user columns), a section at a time, each in windows of bounded size
        (``prefetch``, ``even``, ``merge_ahead``: see :meth:`merged_windows`). With ``prefetch`` and merge threads,
        sections of one run each (a deletion-vector table's files, a compacted bucket) are read side by side."""
        filter_expr = self.split_filters(split)[1]
        sections = split.sections
        if prefetch and merge_ahead > 1 and len(sections) > 1 and all(len(runs) == 1 for runs in sections):

            def one(runs: Sequence[Sequence[DataFileMeta]]) -> list[pa.Table]:  # no merge thread used inside
                return list(self._section(split, runs, filter_expr, window_bytes, prefetch, even, 1))

            for tables in ordered_map(one, sections, merge_ahead):
                yield from tables
            return
        for runs in sections:
            yield from self._section(split, runs, filter_expr, window_bytes, prefetch, even, merge_ahead)

    def _section(
        self,
        split: Split,
        runs: Sequence[Sequence[DataFileMeta]],
        filter_expr: pc.Expression | None,
        window_bytes: int | None,
        prefetch: bool,
        even: bool,
        merge_ahead: int,
    ) -> Iterator[pa.Table]:
        if has_vectors(split, runs):
            yield from read_section(self, split, runs, filter_expr)
            return
        if len(runs) == 1 and all(not f.delete_row_count and f.write_cols is None for f in runs[0]):
            for f in runs[0]:
                budget = window_bytes or self.window_bytes
                for table in plain_file(self, split, f, filter_expr, budget, prefetch):
                    if table.num_rows:
                        yield self._projected(table)
            return
        partial = any(f.write_cols is not None for r in runs for f in r)
        if prefetch and merge_ahead > 1 and self.window_key is not None and not partial:
            yield from merged_whole(self, split, runs, merge_ahead)
            return
        for out in self.merged_windows(split, runs, False, window_bytes, True, prefetch, even, merge_ahead):
            if out.num_rows:
                yield out

    def read_splits(
        self, splits: Iterable[Split], workers: int | None = None, ahead: int | None = 1
    ) -> Iterator[pa.Table]:
        """Visible rows of several splits, read by a thread pool, in split order.

        At most ``workers`` splits are read at once, sharing one window budget, each ``ahead`` windows ahead of
        the consumer, so memory stays bounded for streaming scans (``ahead=None``: as far as they can, their
        files decoded ahead too, for a consumer that keeps every row anyway).
        """
        for _, rows in self.split_windows(splits, workers, ahead):
            yield rows

    def split_windows(
        self, splits: Iterable[Split], workers: int | None = None, ahead: int | None = 1
    ) -> Iterator[tuple[Split, pa.Table]]:
        """:meth:`read_splits`, each window with the split it was read from."""
        prefetch = ahead is None
        merging = merge_threads() if prefetch else min(MERGE_AHEAD_STREAMING, merge_threads())
        if isinstance(splits, Sequence) and len(splits) <= 1:
            for split in splits:
                yield from ((split, rows) for rows in self.read_split(split, prefetch=prefetch, merge_ahead=merging))
            return
        workers = workers or min(8, os.cpu_count() or 1)
        if isinstance(splits, Sequence):
            workers = min(workers, len(splits))
        share = max(1, self.window_bytes // workers)  # the workers share one window budget, and the merge threads
        each = max(1, merging // workers)

        def read(split: Split) -> Iterator[tuple[Split, pa.Table]]:
            return ((split, rows) for rows in self.read_split(split, share, prefetch, merge_ahead=each))

        yield from ordered_streams(splits, read, workers, ahead)

    def batches(
        self, splits: Iterable[Split], workers: int | None = None, ahead: int | None = 1
    ) -> Iterator[pa.RecordBatch]:
        """:meth:`read_splits` as record batches of at most ``read.batch-size`` rows."""
        for table in self.read_splits(splits, workers, ahead):
            yield from table.to_batches(max_chunksize=self.batch_size)

    def finish(self, kv: pa.Table) -> pa.Table:
        """Drop retracts, apply the exact filter, project to the user's columns."""
        if any_retract(kv.column(VALUE_KIND)):
            kv = kv.filter(pa.array(~is_retract(np.asarray(kv.column(VALUE_KIND).to_numpy()))))
        return self._user_rows(kv)

    def _user_rows(self, rows: pa.Table) -> pa.Table:
        """Visible ``rows`` filtered exactly and projected to the user's columns."""
        if self.filter_expr is not None and rows.num_rows:
            rows = rows.filter(self.filter_expr)
        return self._projected(rows)

    def _projected(self, rows: pa.Table) -> pa.Table:
        rows = rows.select(self.columns)
        return rows if rows.schema.equals(self.out_schema) else rows.cast(self.out_schema)
