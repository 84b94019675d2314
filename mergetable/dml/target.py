"""Reading the rows a row-level operation changes: a snapshot's data in the table's *current* schema.

``Table.read(snapshot_id=…)`` is time travel: it shows a snapshot through the schema it was written with,
as Paimon does. A delete, update or merge reads the snapshot it is based on for a different purpose: to
write records under the current schema. Its conditions and assignments name the current columns (an
added column, a renamed one, a widened type), so the rows are read as a read of the latest snapshot
reads them: each file projected by field id onto the current schema (added columns NULL, renamed ones
under their new name, values cast to the new type, dropped columns gone).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mergetable.core.predicates import Filters
from mergetable.dml.apply import DmlTable
from mergetable.read.parallel import in_process_key_ranges


def read_target(table: DmlTable, snapshot_id: int, columns: Sequence[str] | None, filter: Filters | None) -> pa.Table:
    """The merged rows of snapshot ``snapshot_id`` matching ``filter``, in the table's current schema."""
    reader = table.split_reader(columns, filter)
    splits = table.plan(filter, key_ranges=in_process_key_ranges(), snapshot_id=snapshot_id)
    parts = list(reader.read_splits(splits, ahead=None))
    if not parts:
        return reader.out_schema.empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


__all__ = ["read_target"]
