"""Whole-record matching for an append table's ``-D`` rows: which stored rows equal which removed records.

A keyless changelog removes records by value: a ``-D`` row removes **one** stored row equal to it in every
column (NULL equal to NULL, ``-0.0`` to ``0.0``, NaN to NaN), so equal records count as a multiset: three
``-D`` rows of a record stored twice remove both copies, and the third is ignored. Matching is vectorised:
each column is dictionary-encoded (NULL getting a code of its own), the per-column codes are folded into
one record code per row, and the first ``d`` stored rows of a record (in the order given) are the ones ``d``
``-D`` rows remove.

Example:
    >>> import pyarrow as pa
    >>> stored = pa.table({"a": [1, 2, 1, None], "b": ["x", "y", "x", None]})
    >>> removed = pa.table({"a": [1, None, 3], "b": ["x", None, "z"]})
    >>> matches(stored, removed).tolist(), unmatched(stored, removed)
    ([0, 3], 1)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import UnsupportedError


def _normalized(column: pa.Array) -> pa.Array:
    """A floating-point column with one zero and one NaN (-0.0 equals 0.0, NaN equals NaN)."""
    if not pa.types.is_floating(column.type):
        return column
    nan = pa.scalar(float("nan"), column.type)
    return pc.if_else(pc.is_nan(column), nan, pc.add(column, pa.scalar(0.0, column.type)))


def _columns(column: pa.ChunkedArray, name: str) -> list[pa.ChunkedArray]:
    """``column`` as columns that dictionary-encode (a struct as its validity and fields)."""
    t = column.type
    if pa.types.is_struct(t):
        flat = column.combine_chunks()
        out = [pa.chunked_array([pc.is_valid(flat)])]
        for i in range(t.num_fields):
            child = pc.struct_field(flat, [i])
            out += _columns(pa.chunked_array([child]), name)
        return out
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise UnsupportedError(
            f"a -D row of an append table is matched on every column; column '{name}' ({t}) cannot be compared "
            "as a whole: delete with Table.delete(filter) instead"
        )
    return [pa.chunked_array([_normalized(column.combine_chunks())])]


def record_codes(tables: Sequence[pa.Table]) -> list[np.ndarray]:
    """One int64 code per row of each of ``tables`` (same columns): equal records, and only they, share a code."""
    names = tables[0].column_names
    sizes = [t.num_rows for t in tables]
    total = sum(sizes)
    codes = np.zeros(total, dtype=np.int64)
    for name in names:
        joined = pa.chunked_array([c for t in tables for c in t.column(name).chunks], tables[0].schema.field(name).type)
        for part in _columns(joined, name):
            encoded = pc.dictionary_encode(part, null_encoding="encode").combine_chunks()
            values = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            width = max(1, len(encoded.dictionary))
            codes = np.unique(codes * width + values, return_inverse=True)[1].astype(np.int64).reshape(-1)
    return np.split(codes, np.cumsum(sizes)[:-1])


def _candidates(stored: pa.Table, removed: pa.Table) -> np.ndarray:
    """Positions of the stored rows whose every column value occurs in ``removed`` (a hash semi-join per column:
    the exact record match then runs on these only)."""
    keep = np.ones(stored.num_rows, dtype=bool)
    for name in removed.column_names:
        for s, r in zip(_columns(stored.column(name), name), _columns(removed.column(name), name), strict=True):
            found = pc.is_in(s, value_set=r.combine_chunks(), skip_nulls=False)
            keep &= np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)
    return np.nonzero(keep)[0]


def _plan(stored: pa.Table, removed: pa.Table) -> tuple[np.ndarray, int]:
    """The stored rows the removed records take (positions, ascending) and how many removed records found none."""
    if not removed.num_rows or not stored.num_rows:
        return np.arange(0), removed.num_rows
    at = _candidates(stored, removed)
    if not len(at):
        return at, removed.num_rows
    hits, missing = _exact(stored.select(removed.column_names).take(pa.array(at)), removed)
    return at[hits], missing


def _exact(stored: pa.Table, removed: pa.Table) -> tuple[np.ndarray, int]:
    s, r = record_codes([stored, removed])
    wanted = np.bincount(r, minlength=int(max(s.max(), r.max())) + 1)
    order = np.argsort(s, kind="stable")
    ordered = s[order]
    starts = np.searchsorted(ordered, ordered, side="left")
    rank = np.empty(len(s), dtype=np.int64)
    rank[order] = np.arange(len(s)) - starts  # the how-many-th stored copy of its record each row is
    hit = rank < wanted[s]
    found = int(np.minimum(np.bincount(s, minlength=len(wanted)), wanted).sum())
    return np.nonzero(hit)[0], removed.num_rows - found


def matches(stored: pa.Table, removed: pa.Table) -> np.ndarray:
    """The positions in ``stored`` of the rows that ``removed`` (one record per row) removes, ascending: for a
    record removed ``d`` times, its first ``d`` copies in ``stored``."""
    return _plan(stored, removed)[0]


def unmatched(stored: pa.Table, removed: pa.Table) -> int:
    """How many rows of ``removed`` find no stored copy left to remove."""
    return _plan(stored, removed)[1]


def match_plan(stored: pa.Table, removed: pa.Table) -> tuple[np.ndarray, int]:
    """:func:`matches` and :func:`unmatched` at once."""
    return _plan(stored, removed)


def remaining(stored: pa.Table, removed: pa.Table) -> pa.Table:
    """The rows of ``removed`` left once each stored copy has taken one (a multiset difference, in order)."""
    if not removed.num_rows or not stored.num_rows:
        return removed
    taken = matches(removed, stored)  # the removed rows that a stored copy cancels
    keep = np.ones(removed.num_rows, dtype=bool)
    keep[taken] = False
    return removed.filter(pa.array(keep))


__all__ = ["match_plan", "matches", "record_codes", "remaining", "unmatched"]
