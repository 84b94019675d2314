"""Reading one data file, verified: page checksums, the row count its metadata records, typed errors.

Files are written with CRC page checksums; every read verifies them, so a flipped bit in a data page is
an error, never different rows. Parts of a Parquet file that no page checksum covers (page headers, the
footer) are checked as far as the table's metadata allows: an unfiltered read must return exactly the
row count recorded in the file's :class:`DataFileMeta`. Every failure is a :class:`DataFileError`
naming the file.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mergetable.core.errors import DataFileError
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import DataFileMeta
from mergetable.read.parallel import Prefetched


def read_data_file(
    fileio: FileIO,
    afs: pafs.FileSystem,
    path: str,
    meta: DataFileMeta,
    columns: Sequence[str],
    filter_expr: pc.Expression | None = None,
    row_group_pruning: bool = True,
    row_groups: RowGroupSlice | None = None,
) -> pa.Table:
    """``columns`` of the data file at ``path`` (rows matching ``filter_expr``), verified against ``meta``.

    ``row_group_pruning=False`` applies ``filter_expr`` after reading rather than letting Parquet
    statistics skip row groups (they cannot be trusted for NaN). ``row_groups``: read only those row
    groups (see :func:`row_group_stats`); the unfiltered row count is then checked against theirs.
    """
    pushed = filter_expr if row_group_pruning else None
    expected = meta.row_count if row_groups is None else row_groups.rows
    try:
        if row_groups is None:
            table = pq.read_table(
                path,
                columns=list(columns),
                filters=pushed,
                filesystem=afs,
                use_threads=True,
                page_checksum_verification=True,
            )
        else:
            table = _read_row_groups(afs, path, row_groups.ids, columns, pushed)
    except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
        raise _read_error(fileio, path, exc) from (None if isinstance(exc, FileNotFoundError) else exc)
    if pushed is None and table.num_rows != expected:
        raise DataFileError(path, f"holds {table.num_rows} rows but the table recorded {expected} (corrupt?)")
    return table if pushed is not None or filter_expr is None else table.filter(filter_expr)


PROBE_ROWS = 64 * 1024
"""Rows of the key column decoded at a time while a point lookup looks for its keys in a row group."""
TAKE_ROWS = 4 * 1024
"""Rows decoded at a time while a point lookup takes its rows: decoding stops soon after the last of them."""


def read_key_points(
    fileio: FileIO,
    afs: pafs.FileSystem,
    path: str,
    columns: Sequence[str],
    key: str,
    values: pa.Array,
    groups: Sequence[int] | None = None,
) -> pa.Table:
    """``columns`` of the rows whose ``key`` is one of ``values``, in the data file at ``path`` (sorted by
    ``key``; only row groups ``groups``, when given).

    A point lookup decodes little: row groups whose statistics rule the values out are skipped, the key
    column alone is decoded to find the rows (up to the first key past the largest value), and the other
    columns only in row groups holding one of them, up to the last of them. Page checksums are verified.
    """
    lowest, highest = (v.as_py() for v in pc.min_max(values).values())
    try:
        with afs.open_input_file(path) as source:
            pf = pq.ParquetFile(source, page_checksum_verification=True)
            md = pf.metadata
            leaves = [md.schema.column(j).path for j in range(md.num_columns)]
            index = leaves.index(key)
            batches: list[pa.RecordBatch] = []
            for g in range(md.num_row_groups) if groups is None else groups:
                stats = md.row_group(g).column(index).statistics
                if stats is not None and stats.has_min_max and (stats.max < lowest or stats.min > highest):
                    continue
                rows = _key_rows(pf, g, key, values, highest)
                if len(rows):
                    batches.extend(_take_rows(pf, g, columns, rows))
            schema = pa.schema([pf.schema_arrow.field(c) for c in columns])
    except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
        raise _read_error(fileio, path, exc) from (None if isinstance(exc, FileNotFoundError) else exc)
    return pa.Table.from_batches(batches, schema=schema)


def _key_rows(pf: pq.ParquetFile, group: int, key: str, values: pa.Array, highest: Any) -> np.ndarray:
    """Positions in row group ``group`` of the rows whose ``key`` is in ``values`` (ascending)."""
    found = []
    seen = 0
    wanted = np.sort(values.to_numpy()) if pa.types.is_integer(values.type) else None
    for batch in pf.iter_batches(batch_size=PROBE_ROWS, row_groups=[group], columns=[key], use_threads=False):
        keys = batch.column(0)
        if wanted is not None:  # sorted integers: binary search
            sorted_keys = keys.to_numpy()
            lo, hi = np.searchsorted(sorted_keys, wanted, "left"), np.searchsorted(sorted_keys, wanted, "right")
            hits = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True) if b > a] or [lo[:0]])
        else:
            hits = np.flatnonzero(pc.is_in(keys, value_set=values).to_numpy(zero_copy_only=False))
        found.append(hits + seen)
        seen += batch.num_rows
        if keys[-1].as_py() > highest:  # sorted: no later row holds one of the values
            break
    else:
        recorded = pf.metadata.row_group(group).num_rows
        if seen != recorded:
            raise ValueError(f"row group {group} holds {seen} keys but its metadata records {recorded} rows")
    return np.concatenate(found) if found else np.zeros(0, np.int64)


def _take_rows(pf: pq.ParquetFile, group: int, columns: Sequence[str], rows: np.ndarray) -> list[pa.RecordBatch]:
    """The rows at ``rows`` (ascending positions) of row group ``group``, decoded only up to the last one."""
    out = []
    seen = 0
    last = int(rows[-1])
    for batch in pf.iter_batches(batch_size=TAKE_ROWS, row_groups=[group], columns=list(columns), use_threads=False):
        n = batch.num_rows
        lo, hi = np.searchsorted(rows, [seen, seen + n])
        if hi > lo:
            out.append(batch.take(pa.array(rows[lo:hi] - seen)))
        seen += n
        if seen > last:
            return out
    raise ValueError(f"row group {group} ends at row {seen}, before row {last} its keys hold")


def _decode(
    afs: pafs.FileSystem,
    path: str,
    groups: Sequence[Sequence[int]] | None,
    columns: Sequence[str],
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """The batches of row groups ``groups`` of a file, group after group (Arrow's threads decode a group)."""
    for ids in [None] if groups is None else groups:
        table = _read_row_groups(afs, path, ids, columns, None)
        batches = deque(table.to_batches(max_chunksize=batch_rows))
        del table  # held only by its batches: each is released once its consumer is done with it
        while batches:
            yield batches.popleft()


def _read_row_groups(
    afs: pafs.FileSystem, path: str, ids: Sequence[int] | None, columns: Sequence[str], pushed: pc.Expression | None
) -> pa.Table:
    """Row groups ``ids`` (None: all) in file order, those that ``pushed`` cannot rule out by their statistics, filtered
    by it. Read as a dataset fragment: Arrow's scanner decodes in batches and in parallel, about 1.7x faster
    than ``ParquetFile.read_row_groups`` on the same row groups (and it keeps their order)."""
    fragment = _PARQUET.make_fragment(path, filesystem=afs, row_groups=None if ids is None else list(ids))
    return fragment.to_table(columns=list(columns), filter=pushed, use_threads=True)


_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
)


class RowGroupStream:
    """Row groups of one data file, read ``groups`` at a time (each a list of row-group ids read together; None:
    the whole file at once) and taken in file order. With ``readahead_rows``, a thread of their own reads them
    ahead of the consumer, keeping at most about that many decoded rows queued (plus the group being read), so
    decoding overlaps the work done on the rows already taken; without, each group is read when needed.

    Page checksums are verified, and :meth:`take` checks it got the rows the row-group metadata promised.
    """

    def __init__(
        self,
        fileio: FileIO,
        afs: pafs.FileSystem,
        path: str,
        groups: Sequence[Sequence[int]] | None,
        columns: Sequence[str],
        batch_rows: int,
        readahead_rows: int,
    ) -> None:
        self.fileio, self.afs, self.path = fileio, afs, path
        self.groups = None if groups is None else [list(g) for g in groups]
        self.columns = list(columns)
        self.batch_rows = max(1, batch_rows)
        self.readahead = -(-max(0, readahead_rows) // self.batch_rows)
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._held: pa.RecordBatch | None = None

    def _next(self) -> pa.RecordBatch | None:
        if self._held is not None:
            batch, self._held = self._held, None
            return batch
        try:
            if self._batches is None:
                source = _decode(self.afs, self.path, self.groups, self.columns, self.batch_rows)
                self._batches = Prefetched(source, self.readahead) if self.readahead else source
            return next(self._batches, None)
        except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
            raise _read_error(self.fileio, self.path, exc) from (None if isinstance(exc, FileNotFoundError) else exc)

    def close(self) -> None:
        """Stop reading ahead (the stream ends here)."""
        if isinstance(self._batches, Prefetched):
            self._batches.close()

    def take(self, rows: int) -> pa.Table:
        """The next ``rows`` rows (fewer: the file is shorter than its metadata says, an error)."""
        batches: list[pa.RecordBatch] = []
        got = 0
        while got < rows:
            batch = self._next()
            if batch is None:
                raise DataFileError(self.path, f"holds {got} rows where its row groups recorded {rows} (corrupt?)")
            if got + batch.num_rows > rows:
                self._held = batch.slice(rows - got)
                batch = batch.slice(0, rows - got)
            batches.append(batch)
            got += batch.num_rows
        return pa.Table.from_batches(batches, schema=batches[0].schema) if batches else self._empty()

    def _empty(self) -> pa.Table:
        try:
            with self.afs.open_input_file(self.path) as source:
                return pq.ParquetFile(source).schema_arrow.empty_table().select(self.columns)
        except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
            raise _read_error(self.fileio, self.path, exc) from exc


@dataclass(frozen=True)
class RowGroupSlice:
    """Consecutive row groups of one data file: their ids, rows, uncompressed bytes and smallest first key
    (``None``: unknown, from the first row group's Parquet statistics of ``column``)."""

    ids: tuple[int, ...]
    rows: int
    nbytes: int
    min_key: Any = None


def _read_error(fileio: FileIO, path: str, exc: BaseException) -> DataFileError:
    """The error of a failed read of a data file: missing, or unreadable (corrupt)."""
    if isinstance(exc, FileNotFoundError) or not fileio.exists(path):
        return DataFileError(path, "data file is missing (the table references it)")
    return DataFileError(path, f"cannot read data file (corrupt?): {exc}")


def _footer(fileio: FileIO, afs: pafs.FileSystem, path: str) -> pq.FileMetaData:
    try:
        with afs.open_input_file(path) as source:
            return pq.ParquetFile(source).metadata
    except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
        raise _read_error(fileio, path, exc) from (None if isinstance(exc, FileNotFoundError) else exc)


def row_group_stats(fileio: FileIO, afs: pafs.FileSystem, path: str, column: str | None) -> list[RowGroupSlice]:
    """Every row group of the data file at ``path``, with the minimum of ``column`` where Parquet recorded it."""
    metadata = _footer(fileio, afs, path)
    leaves = [metadata.schema.column(j).path for j in range(metadata.num_columns)]
    index = leaves.index(column) if column in leaves else -1
    out = []
    for i in range(metadata.num_row_groups):
        rg = metadata.row_group(i)
        lo = None
        if index >= 0:
            stats = rg.column(index).statistics
            if stats is not None and stats.has_min_max:
                lo = stats.min
        out.append(RowGroupSlice((i,), rg.num_rows, arrow_bytes(rg), lo))
    return out


def records_bounds(fileio: FileIO, afs: pafs.FileSystem, path: str, columns: Sequence[str]) -> bool:
    """Whether a row group of the data file at ``path`` records a Parquet min/max for one of ``columns``."""
    metadata = _footer(fileio, afs, path)
    leaves = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    found = [leaves[c] for c in columns if c in leaves]
    return any(
        (stats := metadata.row_group(g).column(j).statistics) is not None and stats.has_min_max
        for g in range(metadata.num_row_groups)
        for j in found
    )


_FIXED_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


def arrow_bytes(rg: pq.RowGroupMetaData) -> int:
    """About the bytes a row group takes once decoded to Arrow: its Parquet uncompressed size understates it
    (dictionary, delta and run-length encodings), so every column counts at least its Arrow value width per row
    (a 4-byte offset plus 8 bytes for variable-width values)."""
    rows = rg.num_rows
    total = 0
    for j in range(rg.num_columns):
        c = rg.column(j)
        kind = c.physical_type
        width = _FIXED_WIDTH.get(kind)
        if width is None:  # BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY
            width = 4 + max(8, c.total_uncompressed_size // max(1, rows))
        total += max(c.total_uncompressed_size, rows * width)
    return total


def group_slices(slices: Sequence[RowGroupSlice], budget: int) -> list[RowGroupSlice]:
    """Consecutive row groups joined into slices of about ``budget`` uncompressed bytes (at least one each)."""
    out: list[RowGroupSlice] = []
    for s in slices:
        last = out[-1] if out else None
        if last is not None and last.nbytes + s.nbytes <= budget:
            out[-1] = RowGroupSlice((*last.ids, *s.ids), last.rows + s.rows, last.nbytes + s.nbytes, last.min_key)
        else:
            out.append(s)
    return out


def whole_file(f: DataFileMeta, key_type: pa.DataType) -> RowGroupSlice:
    """A whole file as one slice; its first key from the file's metadata where that is exact (ints, strings)."""
    low = f.min_key[0] if f.min_key else None
    exact = (pa.types.is_integer(key_type) and isinstance(low, int)) or (
        (pa.types.is_string(key_type) or pa.types.is_large_string(key_type)) and isinstance(low, str)
    )
    return RowGroupSlice((), f.row_count, f.file_size, low if exact else None)
