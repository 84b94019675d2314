"""``deduplicate``: the newest record of a key wins; a newest -U or -D removes the key.

With ``ignore-delete`` (or ``table.delete.behavior=ignore``) retractions are dropped first.

Partial writes (``_WRITE_MASK``, Fluss target columns): a column takes the value of the newest record
that wrote it (NULL included), so non-target columns keep their merged value. With
``table.delete.behavior=allow`` a delete whose mask leaves out some value columns is Fluss's *partial
delete*: it nulls its target columns, and the key is removed only when every non-key column is then NULL;
when the merge does not see every column of the key, the result stays a -D carrying the mask, which
later merges apply again (a partial delete over NULL-only columns is exactly "remove").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from mergetable.core.options import DeleteBehavior
from mergetable.core.rowkind import RowKind, any_retract, is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.merge.base import WRITE_MASK
from mergetable.merge.engines.base import EngineBase, assemble
from mergetable.merge.layout import Layout, newest_per_key, take_rows


class Deduplicate(EngineBase):
    """Paimon's ``DeduplicateMergeFunction`` (Fluss's default ``LastRow`` merger)."""

    def __init__(self, schema: TableSchema) -> None:
        super().__init__(schema)
        self.ignore_delete = self.opts.ignore_delete
        self.partial_deletes = self.delete_behavior == DeleteBehavior.ALLOW

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
        rows = self.drop_deletes(rows, ignore=self.ignore_delete)
        if WRITE_MASK not in rows.column_names:
            newest = newest_per_key(rows, self.keys, self.seq_fields, seq_ordered)
            if newest is not None:
                return take_rows(rows, newest)
        layout = Layout.build(rows, self.keys, self.seq_fields, self.seq_descending, seq_ordered)
        masks = self.masks(layout)
        if masks is None or bool(self.covers(masks, self.value_bits).all()):
            return layout.take(layout.last_pos)
        return self._merge_masked(layout, masks)

    def survivors(self, rows: pa.Table, seq_ordered: bool = False) -> np.ndarray | None:
        """The newest record of each key, unless some rows carry write masks or retractions are dropped first."""
        if WRITE_MASK in rows.column_names or rows.num_rows == 0:
            return None
        drops = self.delete_behavior in (DeleteBehavior.IGNORE, DeleteBehavior.DISABLE)
        if self.ignore_delete or drops or self.opts.ignore_update_before:  # merge() drops (or refuses) retractions
            if any_retract(rows.column(VALUE_KIND)):
                return None
        newest = newest_per_key(rows, self.keys, self.seq_fields, seq_ordered)
        if newest is not None:
            return newest
        layout = Layout.build(rows, self.keys, self.seq_fields, self.seq_descending, seq_ordered)
        return layout.phys(layout.last_pos)

    def _merge_masked(self, layout: Layout, masks: np.ndarray) -> pa.Table:
        kinds = layout.kinds
        retract = is_retract(kinds)
        covers_all = self.covers(masks, self.value_bits)
        partial = retract & ~covers_all if self.partial_deletes else np.zeros(len(kinds), dtype=bool)
        full_delete = retract & ~partial
        last = layout.last_pos
        reset_at = layout.last_where(full_delete)
        after = np.arange(layout.num_positions, dtype=np.int64) > reset_at[layout.gid]
        values: dict[str, pa.Array] = {}
        any_value = np.zeros(layout.n_groups, dtype=bool)
        for c in self.data_columns(layout.rows):
            wrote = self.written(masks, c)
            pick = layout.last_where(after if wrote is None else after & wrote)
            col = layout.column(c)
            hit = pick >= 0
            source = np.where(hit, pick, 0)
            # a partial delete writes NULL into its target columns
            pick = np.where(hit & ~retract[source], pick, -1)
            values[c] = col.take(pa.array(pick, mask=pick < 0))
            if c not in self.schema.primary_keys:  # partition keys are value columns here, but keys
                any_value |= np.asarray(values[c].is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        out_masks = self.or_masks(layout, masks, after)
        had_reset = reset_at >= 0
        out_masks[had_reset] |= self.value_bits
        last_kind = kinds[last]
        out_kinds = np.where(retract[last], np.where(any_value, RowKind.INSERT, RowKind.DELETE), last_kind)
        # groups whose newest record is a full delete, or with a single record, pass through unchanged
        through = full_delete[last] | (layout.sizes == 1)
        return assemble(layout, values, out_kinds, out_masks, through)


__all__ = ["Deduplicate"]
