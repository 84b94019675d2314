"""``first-row``: the first added record of a key wins (Paimon ``FirstRowMergeFunction``, Fluss ``first_row``).

-U/-D records are rejected with Paimon's error unless ``ignore-delete`` (``first-row.ignore-delete``) or
``table.delete.behavior=ignore`` drops them; ``table.delete.behavior=disable`` rejects them with Fluss's
error. A key with a single record is returned unchanged (a lone retraction never errors). Partial
writes do not apply to this engine: the first record is kept as a whole.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from mergetable.core.errors import MergeError
from mergetable.core.options import DeleteBehavior
from mergetable.core.rowkind import any_retract, is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.merge.engines.base import EngineBase
from mergetable.merge.layout import Layout

FIRST_ROW_DELETE = (
    "By default, First row merge engine can not accept DELETE/UPDATE_BEFORE records.\n"
    "You can config 'ignore-delete' to ignore the DELETE/UPDATE_BEFORE records."
)


class FirstRow(EngineBase):
    """Keeps each key's oldest add."""

    def __init__(self, schema: TableSchema) -> None:
        super().__init__(schema)
        self.ignore_delete = self.opts.ignore_delete or self.delete_behavior == DeleteBehavior.IGNORE

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
        rows = self.drop_deletes(rows, ignore=self.ignore_delete)
        layout = Layout.build(rows, self.keys, (), False, seq_ordered)
        retract = is_retract(layout.kinds)
        if retract.any():
            multi = layout.sizes > 1
            if bool(np.any(retract & multi[layout.gid])):
                raise MergeError(FIRST_ROW_DELETE)
        return layout.take(layout.first_pos)

    def survivors(self, rows: pa.Table, seq_ordered: bool = False) -> np.ndarray | None:
        """The oldest record of each key (None when retractions need checking: :meth:`merge` does that)."""
        if rows.num_rows == 0 or any_retract(rows.column(VALUE_KIND)):
            return None
        layout = Layout.build(rows, self.keys, (), False, seq_ordered)
        return layout.phys(layout.first_pos)


__all__ = ["FIRST_ROW_DELETE", "FirstRow"]
