"""Fluss's ``versioned`` engine: the record with the largest version column wins.

``table.merge-engine.versioned.ver-column`` names an INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ column. A
newer record replaces the stored one when ``stored_version <= new_version`` (ties go to the newer
record); a NULL version is the minimum. This is a deduplicate ordered by (version, arrival): the winner
is the newest record among those holding the largest version. Deletes are ignored (the default) or
rejected (``table.delete.behavior=disable``); partial writes do not apply.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mergetable.core.schema import TableSchema
from mergetable.merge.engines.base import EngineBase
from mergetable.merge.layout import Layout


class Versioned(EngineBase):
    """Keeps each key's record with the largest version (Fluss ``VersionedRowMerger``)."""

    def __init__(self, schema: TableSchema) -> None:
        super().__init__(schema)
        column = self.opts.versioned_ver_column
        assert column is not None, "validated at create time"
        self.ver_column = column
        self.order_fields = (column, *[f for f in self.seq_fields if f != column])

    def required_columns(self, wanted: Sequence[str]) -> list[str]:
        return list(dict.fromkeys([*wanted, *self.order_fields]))

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
        rows = self.drop_deletes(rows, ignore=True)
        layout = Layout.build(rows, self.keys, self.order_fields, False, seq_ordered)
        return layout.take(layout.last_pos)


__all__ = ["Versioned"]
