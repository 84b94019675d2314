"""``mergeSchema`` / ``write.merge-schema`` on write: evolve the table's schema to take the data's columns.

Runs on the driver while a write is planned, before any task writes: the new columns (and, when asked,
the widened types) are one schema commit (:meth:`mergetable.Table.alter`), after which the write is checked
and made against the new schema. As in Paimon and Delta, the schema change stays if the write then fails.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.types import StructType

from mergetable.core.evolution import merge_changes
from mergetable.spark.write_modes import WriteMode
from mergetable.table import Table


def data_schema(schema: StructType, ignore: Sequence[str]) -> StructType:
    """The data's columns without those the write consumes (a row-kind column)."""
    return StructType([f for f in schema.fields if f.name not in ignore])


def evolve_for_write(table: Table, incoming: pa.Schema, mode: WriteMode) -> None:
    """Commit the schema changes that let ``incoming`` be written to ``table`` (``table`` then uses it)."""
    changes = merge_changes(table.table_schema, incoming, mode.widen_types)
    if changes:
        table.alter.apply(changes)


__all__ = ["data_schema", "evolve_for_write"]
