"""Reading a data file written under an older (or newer) schema into the reading schema, by field id.

Every data and changelog file records the schema id it was written with (``DataFileMeta.schemaId``).
Columns are matched by field id, never by name: a renamed column keeps its data, a column added after the
file was written reads as nulls, a widened column is cast, a dropped column is not read. The projection
is one select + cast per file (vectorized), and files of the reading schema pass through untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from mergetable.core.evolution import read_cast
from mergetable.core.schema import TableSchema


@dataclass(frozen=True)
class FileProjection:
    """How the columns of schema ``read`` are found in a file written with schema ``written``."""

    written: TableSchema
    read: TableSchema

    @cached_property
    def source(self) -> dict[str, str | None]:
        """Reading column name → the file's column name (None: the file predates the column)."""
        by_id = {f.id: f.name for f in self.written.fields}
        return {f.name: by_id.get(f.id) for f in self.read.fields}

    @cached_property
    def identity(self) -> bool:
        """Whether the file's columns are the reading schema's (same names, same stored types)."""
        old, new = self.written.file_schema, self.read.file_schema
        return all(src == name and old.field(name).type == new.field(name).type for name, src in self.source.items())

    def file_columns(self, columns: Sequence[str]) -> list[str]:
        """The file's names of ``columns`` (reading names; system columns as is), those the file has."""
        out = []
        for c in columns:
            src = self.source.get(c, c)
            if src is not None:
                out.append(src)
        return out

    def written_names(self, columns: Sequence[str] | None) -> list[str] | None:
        """Reading names of the file's ``columns`` (e.g. its ``writeCols``); None stays None."""
        if columns is None:
            return None
        have = set(columns)
        return [name for name, src in self.source.items() if src is not None and src in have]

    def project(self, table: pa.Table, target: pa.Schema) -> pa.Table:
        """``table`` (read from the file with :meth:`file_columns`) as ``target``'s columns and types."""
        arrays = []
        for field in target:
            src = self.source.get(field.name, field.name)
            if src is None:
                arrays.append(pa.nulls(table.num_rows, field.type))
                continue
            column = table.column(src)
            arrays.append(column if column.type == field.type else read_cast(column, field.type))
        return pa.Table.from_arrays(arrays, schema=target)
