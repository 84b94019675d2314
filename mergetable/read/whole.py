"""A section merged on every core, for a reader that keeps every row (``Table.read``): decode all, cut, merge.

The streamed merge (:mod:`mergetable.read.windows`) cuts windows on one thread while each run is decoded by a
stream of its own, row group after row group, so on many cores the decoding of the longest run is its critical
path, whatever the threads merging windows do. A reader that keeps every row anyway decodes every file of the
section at once instead (each file by Arrow's threads, the files side by side), then cuts the section into
windows at first-key bounds taken from the largest file (a binary search in each file: files are sorted) and
merges the windows on the process's merge threads (:func:`.parallel.ordered_map`). Each row group is decoded
once, and no window depends on another: records of one key share the first key column, so a key never spans two
windows, and windows come out in key order, the rows the streamed merge gives, in the same order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.metadata.models import DataFileMeta
from mergetable.read.order import oldest_first, sequence_ordered
from mergetable.read.parallel import ordered_map
from mergetable.read.plain import FileReading
from mergetable.read.scan import Split

WINDOW_ROWS = 128 * 1024
"""Rows a window holds at least, when the section has that many (fewer, larger windows merge faster)."""


class WholeReader(FileReading, Protocol):
    """What this module needs of :class:`~mergetable.read.reader.SplitReader`."""

    window_key: str | None

    def split_filters(self, split: Split) -> tuple[pc.Expression | None, pc.Expression | None]: ...

    def _visible(self, rows: pa.Table, seq_ordered: bool) -> pa.Table: ...


def merged_whole(
    reader: WholeReader, split: Split, runs: Sequence[Sequence[DataFileMeta]], threads: int
) -> Iterator[pa.Table]:
    """The visible rows of section ``runs`` (as :meth:`SplitReader.read_split` gives them), window by window,
    with ``threads`` windows merged at once; the reader's ``window_key`` must be set."""
    key = reader.window_key
    assert key is not None
    files = oldest_first(f for r in runs for f in r)  # the merge's order: oldest first (read.order)
    seq_ordered = sequence_ordered(files)
    key_filter = reader.split_filters(split)[0]

    def decode(f: DataFileMeta) -> pa.Table:
        return reader.read_file(split, f, key_filter, sequenced=not seq_ordered, visible=True)

    tables = list(ordered_map(decode, files, max(2, len(files))))
    keys = [t.column(key) if t.num_rows else None for t in tables]
    if any(k is not None and k.null_count for k in keys):  # a null key orders nowhere: one window
        yield from _merge_all(reader, tables, seq_ordered)
        return
    total = sum(t.num_rows for t in tables)
    count = max(1, min(4 * threads, total // WINDOW_ROWS))
    largest = max(range(len(tables)), key=lambda i: tables[i].num_rows)
    bounds = _bounds(keys[largest], count)
    cuts = [[0, *(_count_through(k, b) for b in bounds), len(k)] if k is not None else [0] for k in keys]

    def window(w: int) -> list[pa.Table]:
        return [t.slice(c[w], c[w + 1] - c[w]) for t, c in zip(tables, cuts, strict=True) if len(c) > w + 1]

    def merge(w: int) -> pa.Table:
        pieces = [p for p in window(w) if p.num_rows]
        if not pieces:
            return tables[0].schema.empty_table()
        return reader._visible(pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0], seq_ordered)

    for out in ordered_map(merge, range(len(bounds) + 1), threads):
        if out.num_rows:
            yield out


def _merge_all(reader: WholeReader, tables: list[pa.Table], seq_ordered: bool) -> Iterator[pa.Table]:
    kept = [t for t in tables if t.num_rows]
    if kept:
        yield reader._visible(pa.concat_tables(kept), seq_ordered)


def _bounds(keys: pa.ChunkedArray | None, count: int) -> list[Any]:
    """Up to ``count - 1`` distinct, ascending first-key values of a sorted column, evenly spaced by position."""
    if keys is None or count <= 1:
        return []
    n = len(keys)
    out: list[Any] = []
    for i in range(1, count):
        v = keys[i * n // count].as_py()
        if not out or v > out[-1]:
            out.append(v)
    return out


def _count_through(keys: pa.ChunkedArray, bound: Any) -> int:
    """Rows of an ascending, null-free column whose value is ``<= bound`` (a binary search, chunk by chunk: the
    column is not copied)."""
    count = 0
    for chunk in keys.chunks:
        if not len(chunk):
            continue
        if pa.types.is_integer(chunk.type):
            values = chunk.to_numpy()
            if values[-1] <= bound:
                count += len(values)
                continue
            return count + int(np.searchsorted(values, bound, side="right"))
        if chunk[len(chunk) - 1].as_py() <= bound:
            count += len(chunk)
            continue
        return count + _bisect(functools.partial(_through, chunk, bound), len(chunk))
    return count


def _through(chunk: pa.Array, bound: Any, i: int) -> bool:
    return bool(chunk[i].as_py() <= bound)


def _bisect(through: Callable[[int], bool], n: int) -> int:
    """The first index in ``[0, n)`` for which ``through`` is False (it is True, then False)."""
    low, high = 0, n
    while low < high:
        mid = (low + high) // 2
        if through(mid):
            low = mid + 1
        else:
            high = mid
    return low
