"""``deduplicate``: the newest record of a key wins; a newest -U or -D removes the key."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from mergetable.core.merge.grouping import KeyGroups
from mergetable.core.rowkind import is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema


class Deduplicate:
    def __init__(self, schema: TableSchema) -> None:
        opts = schema.table_options
        self.keys = schema.trimmed_primary_keys
        self.seq_fields = opts.sequence_field
        self.seq_descending = opts.sequence_field_sort_order.value == "descending"
        self.ignore_delete = opts.ignore_delete

    def required_columns(self, wanted: Sequence[str]) -> list[str]:
        return list(dict.fromkeys([*wanted, *self.seq_fields]))

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
        if self.ignore_delete:
            kinds = np.asarray(rows.column(VALUE_KIND).to_numpy())
            retract = is_retract(kinds)
            if retract.any():
                rows = rows.filter(pa.array(~retract))
        groups = KeyGroups.build(rows, self.keys, self.seq_fields, self.seq_descending, seq_ordered)
        return rows.take(pa.array(groups.last_rows()))
