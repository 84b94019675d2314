"""Key-range splits: a section larger than ``split.target-size`` cut into ranges of its first key column.

Every sorted run of the section is cut at the same key values, chosen from row-group statistics (the
smallest first key of each row group, weighted by the row group's share of the section's bytes), so each
range holds about ``target`` bytes and the ranges can be read, merged and written by separate workers.
Ranges are ``[low, high)`` on the first key column (``None``: unbounded); all records of a key share
that column, so a key never spans two ranges, and a file belongs to every range its key range meets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mergetable.metadata.models import DataFileMeta
from mergetable.read.datafile import RowGroupSlice

KeyRange = tuple[Any, Any]
Runs = Sequence[Sequence[DataFileMeta]]


def exact_first_key(f: DataFileMeta, bound: int, t: pa.DataType) -> Any:
    """The first key column's value of ``f``'s min (``bound=0``) or max (``bound=1``) key where it is exact."""
    keys = f.min_key if bound == 0 else f.max_key
    v = keys[0] if keys else None
    if pa.types.is_integer(t) and isinstance(v, int) and not isinstance(v, bool):
        return v
    if (pa.types.is_string(t) or pa.types.is_large_string(t)) and isinstance(v, str):
        return v
    return None


def cut_points(runs: Runs, target: int, row_groups: Callable[[DataFileMeta], list[RowGroupSlice]]) -> list[Any]:
    """First-key values cutting ``runs`` into ranges of about ``target`` stored bytes at most, of even sizes
    (ascending, distinct)."""
    weighted: list[tuple[Any, float]] = []
    for run in runs:
        for f in run:
            groups = [g for g in row_groups(f) if g.min_key is not None]
            total = sum(g.nbytes for g in groups) or 1
            weighted.extend((g.min_key, f.file_size * g.nbytes / total) for g in groups)
    if not weighted:
        return []
    try:
        weighted.sort(key=lambda w: w[0])
    except TypeError:
        return []
    # ranges of even size: as many as ``target`` asks for, none of them a small remainder
    stored = sum(w for _, w in weighted)
    target = int(stored / max(1, math.ceil(stored / max(1, target))))
    cuts: list[Any] = []
    size = 0.0
    lowest = weighted[0][0]
    for key, nbytes in weighted:
        if size >= target and key != lowest and (not cuts or key > cuts[-1]):
            cuts.append(key)
            size = 0.0
        size += nbytes
    return cuts


def ranges_of(cuts: Sequence[Any]) -> list[KeyRange]:
    bounds = [None, *cuts, None]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def runs_in_range(runs: Runs, key_range: KeyRange, t: pa.DataType) -> tuple[tuple[DataFileMeta, ...], ...]:
    """The files of ``runs`` whose key range meets ``key_range`` (runs left empty are dropped)."""
    low, high = key_range
    out = []
    for run in runs:
        kept = []
        for f in run:
            lo, hi = exact_first_key(f, 0, t), exact_first_key(f, 1, t)
            if low is not None and hi is not None and hi < low:
                continue
            if high is not None and lo is not None and lo >= high:
                continue
            kept.append(f)
        if kept:
            out.append(tuple(kept))
    return tuple(out)


def range_filter(key: str, t: pa.DataType, key_range: KeyRange) -> pc.Expression | None:
    """The rows of ``key_range`` as a pyarrow expression (None: every row)."""
    low, high = key_range
    expr: pc.Expression | None = None
    if low is not None:
        expr = pc.field(key) >= pa.scalar(low, t)
    if high is not None:
        upper = pc.field(key) < pa.scalar(high, t)
        expr = upper if expr is None else expr & upper
    return expr


def slices_in_range(
    f: DataFileMeta,
    parts: Sequence[RowGroupSlice],
    key_range: KeyRange | None,
    key_type: pa.DataType,
    inside: set[tuple[str, tuple[int, ...]]],
) -> list[RowGroupSlice]:
    """The slices of ``f`` (in key order) that may hold keys of ``key_range``, by their first keys' statistics
    (exact for integer keys: a slice ends at or before the next one's first key, the last one at the file's
    last key); those wholly within the range are added to ``inside``."""
    if key_range is None:
        inside.update((f.file_name, p.ids) for p in parts)
        return list(parts)
    low, high = key_range
    kept = []
    for i, p in enumerate(parts):
        upper = parts[i + 1].min_key if i + 1 < len(parts) else exact_first_key(f, 1, key_type)
        if high is not None and p.min_key is not None and p.min_key >= high:
            continue
        if low is not None and upper is not None and upper < low:
            continue
        kept.append(p)
        above = low is None or (p.min_key is not None and p.min_key >= low)
        below = high is None or (upper is not None and upper < high)
        if above and below:
            inside.add((f.file_name, p.ids))
    return kept


def chunk_slices(slices: Sequence[RowGroupSlice], budget: int | None) -> list[list[RowGroupSlice]]:
    """Consecutive ``slices`` in chunks of about ``budget`` bytes (None: one chunk)."""
    chunks: list[list[RowGroupSlice]] = []
    for s in slices:
        if chunks and (budget is None or sum(c.nbytes for c in chunks[-1]) + s.nbytes <= budget):
            chunks[-1].append(s)
        else:
            chunks.append([s])
    return chunks


def trim_edges(
    table: pa.Table,
    chunk: Sequence[RowGroupSlice],
    edges: Sequence[bool],
    expr: pc.Expression | None,
    schema: pa.Schema,
) -> pa.Table:
    """The rows of ``table`` (read from ``chunk``, in order) with those of the slices flagged in ``edges``
    filtered by ``expr``; the other slices, wholly inside a key range, are kept as they are."""
    pieces: list[pa.Table] = []
    start = at = 0
    for s, edge in zip(chunk, edges, strict=True):
        if edge:
            pieces.append(table.slice(start, at - start))
            part = table.slice(at, s.rows)
            pieces.append(part if expr is None else part.filter(expr))
            start = at + s.rows
        at += s.rows
    pieces.append(table.slice(start, at - start))
    kept = [p for p in pieces if p.num_rows]
    return kept[0] if len(kept) == 1 else pa.concat_tables(kept) if kept else schema.empty_table()
