"""Shared machinery of the merge engines: delete handling, partial-write masks and output assembly.

**Partial writes.** Rows may carry an int64 column ``_WRITE_MASK`` (:data:`WRITE_MASK`): bit ``i`` set
means the row carries a real value for ``schema.column_names[i]``; without the column every row wrote
every column. A column's fold only sees the rows that wrote it; the merged row's mask is the OR of the
key's masks. A delete whose mask does not cover every value column is a *partial delete* (Fluss, with
``table.delete.behavior=allow``): it nulls its target columns and removes the row only when every other
non-key column is NULL.

**Deletes.** ``ignore-delete`` (and ``table.delete.behavior=ignore``) drop -U/-D records,
``ignore-update-before`` drops -U records, ``table.delete.behavior=disable`` rejects any delete with
Fluss's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import MergeError
from mergetable.core.options import DeleteBehavior
from mergetable.core.rowkind import RowKind, any_retract, is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.merge.arrays import scatter
from mergetable.merge.base import WRITE_MASK, mask_bit, write_mask, write_mask_columns
from mergetable.merge.layout import Layout

DELETE_DISABLED = "Delete operations are disabled for this table. The table.delete.behavior is set to 'disable'."


class EngineBase:
    """Options and helpers common to every engine."""

    def __init__(self, schema: TableSchema) -> None:
        opts = schema.table_options
        self.schema = schema
        self.opts = opts
        self.keys = schema.trimmed_primary_keys
        self.seq_fields: tuple[str, ...] = opts.sequence_field
        self.seq_descending = opts.sequence_field_sort_order.value == "descending"
        self.value_columns = [c for c in schema.column_names if c not in self.keys]
        self.mask_columns = write_mask_columns(schema)
        self.bits = {c: mask_bit(schema, c) for c in schema.column_names}
        self.value_bits = np.array(write_mask(schema, self.value_columns), dtype=np.int64)
        self.delete_behavior = opts.delete_behavior
        self.nullable = {f.name: f.nullable for f in schema.arrow_schema}

    # -- columns ----------------------------------------------------------------------------------
    def required_columns(self, wanted: Sequence[str]) -> list[str]:
        """``wanted`` plus the sequence fields (and every value column when partial deletes apply)."""
        if self.delete_behavior == DeleteBehavior.ALLOW:
            return list(dict.fromkeys([*wanted, *self.value_columns]))
        return list(dict.fromkeys([*wanted, *self.seq_fields]))

    def data_columns(self, rows: pa.Table) -> list[str]:
        """Value columns present in ``rows``."""
        names = set(rows.column_names)
        return [c for c in self.value_columns if c in names]

    def survivors(self, rows: pa.Table, seq_ordered: bool = False) -> np.ndarray | None:
        """See :meth:`MergeFunction.survivors`: None, the merge computes its rows."""
        return None

    def check_kinds(self, kinds: np.ndarray) -> None:
        """See :meth:`MergeFunction.check_kinds`: every row kind is accepted."""

    # -- deletes ------------------------------------------------------------------------------------
    def drop_deletes(self, rows: pa.Table, *, ignore: bool) -> pa.Table:
        """Apply ``table.delete.behavior`` / ``ignore-update-before`` and, if ``ignore``, drop retractions."""
        if rows.num_rows == 0 or not any_retract(rows.column(VALUE_KIND)):
            return rows
        kinds = np.asarray(rows.column(VALUE_KIND).to_numpy())
        retract = is_retract(kinds)
        if self.delete_behavior == DeleteBehavior.DISABLE:
            raise MergeError(DELETE_DISABLED)
        if ignore or self.delete_behavior == DeleteBehavior.IGNORE:
            return rows.filter(pa.array(~retract))
        if self.opts.ignore_update_before:
            before = kinds == RowKind.UPDATE_BEFORE
            if before.any():
                return rows.filter(pa.array(~before))
        return rows

    # -- write masks --------------------------------------------------------------------------------
    def masks(self, layout: Layout) -> np.ndarray | None:
        """The mask words of every position (shape positions × words), or ``None`` when rows carry no mask."""
        if WRITE_MASK not in layout.rows.column_names:
            return None
        words = [layout.numpy(c).astype(np.int64, copy=False) for c in self.mask_columns]
        return np.stack(words, axis=1)

    def covers(self, masks: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """Per row of ``masks``: whether every bit of ``bits`` is set."""
        return np.all((masks & bits) == bits, axis=-1)

    @overload
    def written(self, masks: np.ndarray, column: str) -> np.ndarray: ...

    @overload
    def written(self, masks: None, column: str) -> None: ...

    @overload
    def written(self, masks: np.ndarray | None, column: str) -> np.ndarray | None: ...

    def written(self, masks: np.ndarray | None, column: str) -> np.ndarray | None:
        """Positions that wrote ``column`` (``None`` = all)."""
        if masks is None:
            return None
        word, bit = self.bits[column]
        return (masks[:, word] & np.int64(1 << bit)) != 0

    @staticmethod
    def or_masks(layout: Layout, masks: np.ndarray, select: np.ndarray | None = None) -> np.ndarray:
        """Bitwise OR of the masks of each group's (selected) positions."""
        out = np.zeros((layout.n_groups, masks.shape[1]), dtype=np.int64)
        if select is None:
            np.bitwise_or.at(out, layout.gid, masks)
        else:
            np.bitwise_or.at(out, layout.gid[select], masks[select])
        return out


def null_where(values: pa.Array, mask: np.ndarray) -> pa.Array:
    """``values`` with NULL where ``mask`` is set."""
    if not mask.any():
        return values
    return pc.if_else(pa.array(mask), pa.nulls(len(values), values.type), values)


def assemble(
    layout: Layout,
    values: dict[str, pa.Array],
    kinds: np.ndarray | None,
    masks: np.ndarray | None = None,
    passthrough: np.ndarray | None = None,
) -> pa.Table:
    """One row per group, in key order, with the columns of ``layout.rows``.

    ``values`` holds the computed columns (one entry per group); other columns (keys,
    ``_SEQUENCE_NUMBER`` …) come from each group's newest record. ``kinds``/``masks`` replace
    ``_VALUE_KIND``/``_WRITE_MASK`` when given. Groups flagged in ``passthrough`` are returned as their
    newest record, unchanged.
    """
    rows = layout.rows
    last = layout.phys(layout.last_pos)
    last_idx = pa.array(last)
    through = None if passthrough is None or not passthrough.any() else np.flatnonzero(passthrough)
    arrays = []
    for name in rows.column_names:
        original = rows.column(name)
        if name in values:
            col = values[name].cast(original.type)
        elif name == VALUE_KIND and kinds is not None:
            col = pa.array(kinds.astype(np.int8), pa.int8())
        elif masks is not None and (name == WRITE_MASK or name.startswith(WRITE_MASK + "_")):
            word = 0 if name == WRITE_MASK else int(name.rsplit("_", 1)[1])
            col = pa.array(masks[:, word].astype(np.int64), pa.int64())
        else:
            arrays.append(original.take(last_idx))
            continue
        if through is not None:
            col = scatter(col, through, original.take(pa.array(last[through])).combine_chunks())
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=rows.schema)


__all__ = ["DELETE_DISABLED", "EngineBase", "assemble", "null_where"]
