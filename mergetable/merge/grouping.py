"""Vectorized sort and key grouping over Arrow, shared by every merge engine.

Rows are ordered by (key columns, ``sequence.field`` columns, ``_SEQUENCE_NUMBER``): a merge engine sees
each key's records oldest → newest, exactly like Paimon's sort-merge readers, but computed with one
stable sort instead of a per-row heap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.floats import order_keys
from mergetable.core.schema import SEQUENCE_NUMBER


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False) if isinstance(col, pa.Array) else col.to_numpy())


def _is_int_like(t: pa.DataType) -> bool:
    """Types whose key order is an integer order (floats through :func:`order_keys`)."""
    return pa.types.is_integer(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t) or pa.types.is_floating(t)


def _int_view(col: pa.ChunkedArray) -> np.ndarray:
    t = col.type
    if pa.types.is_boolean(t):
        return _np(col).astype(np.int8)
    if pa.types.is_floating(t):  # -0.0 < 0.0, NaN greatest and equal to NaN, as Java's Double.compare
        return order_keys(_np(col).astype(np.float64))
    if pa.types.is_temporal(t):
        storage = pa.int32() if t.bit_width == 32 else pa.int64()
        col = pa.chunked_array([c.view(storage) for c in col.chunks], storage)
    return _np(col)


def sort_permutation(
    rows: pa.Table,
    keys: Sequence[str],
    seq_fields: Sequence[str] = (),
    seq_descending: bool = False,
    seq_ordered: bool = False,
) -> np.ndarray:
    """Permutation ordering ``rows`` by (keys, seq fields, ``_SEQUENCE_NUMBER``).

    ``seq_ordered`` promises that rows of one key already appear in ascending ``_SEQUENCE_NUMBER``
    order, so a stable sort on the key alone suffices (the common case when runs are concatenated
    oldest first).

    Example:
        >>> rows = pa.table({"id": [2, 1, 2, 1], "_SEQUENCE_NUMBER": [5, 4, 3, 6]})
        >>> sort_permutation(rows, ["id"]).tolist()
        [1, 3, 2, 0]
    """
    n = rows.num_rows
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    if not seq_fields and len(keys) == 1 and _is_int_like(rows.schema.field(keys[0]).type):
        key = _int_view(rows.column(keys[0]))
        if seq_ordered:
            return np.argsort(key, kind="stable").astype(np.int64, copy=False)
        seq = _np(rows.column(SEQUENCE_NUMBER))
        return np.lexsort((seq, key)).astype(np.int64, copy=False)
    floats = [k for k in keys if pa.types.is_floating(rows.schema.field(k).type)]
    for k in floats:  # sort float keys by their total-order integers
        i = rows.schema.get_field_index(k)
        rows = rows.set_column(i, k, pa.array(_int_view(rows.column(k))))
    # Null sequence-field values sort first (oldest) in both directions, as in Paimon.
    order: list[tuple[str, str, str]] = [(k, "ascending", "at_start") for k in keys]
    order += [(f, "descending" if seq_descending else "ascending", "at_start") for f in seq_fields]
    if not (seq_ordered and not seq_fields):
        order.append((SEQUENCE_NUMBER, "ascending", "at_start"))
    idx = pc.sort_indices(rows, sort_keys=order)
    return _np(idx).astype(np.int64, copy=False)


def group_starts(sorted_keys: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """Start offsets of the runs of equal keys in key-sorted (non-null) key columns.

    Example:
        >>> group_starts([pa.array([1, 1, 2, 5, 5, 5])]).tolist()
        [0, 2, 3]
        >>> group_starts([pa.array(["a", "a", "b"]), pa.array([1, 2, 2])]).tolist()
        [0, 1, 2]
    """
    n = len(sorted_keys[0]) if sorted_keys else 0
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for col in sorted_keys:
        if _is_int_like(col.type):
            v = _int_view(col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col]))
            change[1:] |= v[1:] != v[:-1]
        else:
            ne = pc.not_equal(col[1:], col[:-1])
            change[1:] |= _np(pc.fill_null(ne, True)).astype(bool)
    return np.flatnonzero(change).astype(np.int64)
