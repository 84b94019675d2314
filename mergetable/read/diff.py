"""Per-key diff of two states as changelog rows: ``+I``, ``-D``, ``-U``/``+U``.

Used by the compaction-time changelog producers and by the ``diff`` change-data reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.rowkind import RowKind, is_retract
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND
from mergetable.merge.grouping import group_starts

_SRC = "__mt_src"


def _column_equal(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Element-wise equality with null == null."""
    t = a.type
    if pa.types.is_nested(t) or pa.types.is_null(t):
        return np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], dtype=bool)
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return np.asarray(pc.or_(eq, both_null).to_numpy(zero_copy_only=False), dtype=bool)


def _rows_equal(rows: pa.Table, i: np.ndarray, j: np.ndarray, columns: Sequence[str]) -> np.ndarray:
    out = np.ones(len(i), dtype=bool)
    if len(i) == 0:
        return out
    ia, ja = pa.array(i), pa.array(j)
    for c in columns:
        col = rows.column(c)
        out &= _column_equal(col.take(ia), col.take(ja))
    return out


def diff_changelog(
    before: pa.Table,
    after: pa.Table,
    keys: Sequence[str],
    dedupe: bool = False,
    ignore_fields: Sequence[str] = (),
    identical_is_update: bool = False,
) -> pa.Table:
    """Changelog rows (key-value form, ``_VALUE_KIND`` = the change kind) turning ``before`` into ``after``.

    Both tables hold at most one record per key; a retract record, like a missing one, counts as "no
    visible value". Rows come out in key order, ``-U`` before its ``+U``. A key whose before and after are
    the very same record (same sequence number and values) emits nothing, unless ``identical_is_update``
    (then ``-U``/``+U`` of it, which ``dedupe`` suppresses as for any pair of equal values).
    """
    schema = after.schema
    before = before.select(schema.names).cast(schema) if before.num_rows else schema.empty_table()
    nb, na = before.num_rows, after.num_rows
    if na == 0:
        return schema.empty_table()
    rows = pa.concat_tables([before, after]) if nb else after
    src = np.concatenate([np.zeros(nb, dtype=np.int8), np.ones(na, dtype=np.int8)])
    probe = rows.select(list(keys)).append_column(_SRC, pa.array(src))
    order = np.asarray(
        pc.sort_indices(probe, sort_keys=[*[(k, "ascending") for k in keys], (_SRC, "ascending")]).to_numpy(),
        dtype=np.int64,
    )
    starts = group_starts([pc.take(rows.column(k), pa.array(order)) for k in keys])
    sizes = np.diff(np.append(starts, len(order)))
    first = order[starts]
    second = np.where(sizes > 1, order[np.minimum(starts + 1, len(order) - 1)], -1)
    b_idx = np.where(first < nb, first, -1)
    a_idx = np.where(first < nb, second, first)
    kinds = np.asarray(rows.column(VALUE_KIND).to_numpy())
    b_add = (b_idx >= 0) & ~is_retract(kinds[np.maximum(b_idx, 0)])
    a_add = (a_idx >= 0) & ~is_retract(kinds[np.maximum(a_idx, 0)])
    inserts = np.flatnonzero(a_add & ~b_add)
    deletes = np.flatnonzero(b_add & ~a_add)
    both = np.flatnonzero(a_add & b_add)
    key_cols = set(keys)
    values = [c for c in schema.names if c not in key_cols and c not in (SEQUENCE_NUMBER, VALUE_KIND)]
    if identical_is_update:
        same = np.zeros(len(both), dtype=bool)
    else:
        same = _rows_equal(rows, b_idx[both], a_idx[both], [SEQUENCE_NUMBER, *values])
    if dedupe:
        ignored = set(ignore_fields)
        same |= _rows_equal(rows, b_idx[both], a_idx[both], [c for c in values if c not in ignored])
    updates = both[~same]
    take = np.concatenate([a_idx[inserts], b_idx[deletes], b_idx[updates], a_idx[updates]])
    new_kinds = np.concatenate(
        [
            np.full(len(inserts), RowKind.INSERT, dtype=np.int8),
            np.full(len(deletes), RowKind.DELETE, dtype=np.int8),
            np.full(len(updates), RowKind.UPDATE_BEFORE, dtype=np.int8),
            np.full(len(updates), RowKind.UPDATE_AFTER, dtype=np.int8),
        ]
    )
    position = np.concatenate([inserts * 2, deletes * 2, updates * 2, updates * 2 + 1])
    emit = np.argsort(position, kind="stable")
    out = rows.take(pa.array(take[emit]))
    i = out.schema.get_field_index(VALUE_KIND)
    return out.set_column(i, out.schema.field(i), pa.array(new_kinds[emit], pa.int8()))
