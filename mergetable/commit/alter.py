"""``Table.alter``: schema evolution and option changes in deltalake's style, each one atomic schema commit.

Every method applies Paimon's rules (:mod:`mergetable.core.evolution`) to the newest schema and publishes
the next ``schema/schema-<id>`` with create-if-absent (:meth:`SchemaManager.commit_changes`). A refused
change raises naming the column or option and writes nothing. The examples use ``t``, the table of the
``Table`` example (columns ``id`` and ``v``, two snapshots).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import pyarrow as pa

from mergetable.commit.schemas import SchemaManager
from mergetable.core.arguments import arrow_fields
from mergetable.core.errors import SchemaChangeError
from mergetable.core.evolution import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnComment,
    UpdateColumnNullability,
    UpdateColumnType,
    UpdateComment,
)
from mergetable.core.fileio import FileIO
from mergetable.core.schema import TableSchema


class TableAlter:
    """Schema and option changes of one table; ``on_commit`` receives each new schema."""

    def __init__(self, fileio: FileIO, on_commit: Callable[[TableSchema], None]) -> None:
        self._schemas = SchemaManager(fileio)
        self._on_commit = on_commit

    def apply(self, changes: Sequence[SchemaChange]) -> TableSchema:
        """Apply several changes (:mod:`mergetable.core.evolution`) as one schema commit; returns the new schema.

        Example:
            >>> from mergetable.core.evolution import AddColumn, RenameColumn
            >>> t.alter.apply([AddColumn("n", pa.int32()), RenameColumn("v", "name")]).column_names
            ('id', 'name', 'n')
        """
        schema = self._schemas.commit_changes(changes)
        self._on_commit(schema)
        return schema

    def add_columns(
        self,
        fields: pa.Field | Iterable[pa.Field | tuple[str, pa.DataType]] | pa.Schema | tuple[str, pa.DataType],
        first: bool = False,
        after: str | None = None,
    ) -> TableSchema:
        """Add nullable columns, at the end by default, or ``first`` / ``after`` a column (in the given order).

        ``fields``: Arrow fields (or a schema), or ``(name, type)`` pairs.

        Rows written before read the new columns as null.

        Raises:
            SchemaChangeError: A name exists already, a field is NOT NULL, or ``after`` is unknown.

        Example:
            >>> new = [pa.field("qty", pa.int32()), pa.field("note", pa.string())]
            >>> t.alter.add_columns(new, after="id").column_names
            ('id', 'qty', 'note', 'v')
            >>> t.read().column("qty").to_pylist()
            [None, None]
        """
        items = arrow_fields(fields)
        changes: list[SchemaChange] = []
        anchor = after
        for i, f in enumerate(items):
            if not f.nullable:
                raise SchemaChangeError("an added column must be nullable (rows written before have no value)", f.name)
            comment = (f.metadata or {}).get(b"comment")
            changes.append(
                AddColumn(
                    f.name,
                    f.type,
                    comment.decode() if comment else None,
                    first=first and i == 0,
                    after=anchor if not (first and i == 0) else None,
                )
            )
            if first or anchor is not None:
                anchor = f.name
        return self.apply(changes)

    def drop_columns(self, names: str | Iterable[str]) -> TableSchema:
        """Drop columns (never a primary-key or partition column); their data is no longer read.

        Example:
            >>> t.alter.drop_columns("v").column_names
            ('id',)
        """
        return self.apply([DropColumn(n) for n in _names(names)])

    def rename_column(self, name: str, new_name: str) -> TableSchema:
        """Rename a column (not a partition column); its data and the options naming it follow.

        Example:
            >>> t.alter.rename_column("v", "value").column_names
            ('id', 'value')
            >>> t.read().to_pydict()
            {'id': [1, 2], 'value': ['a', 'B']}
        """
        return self.apply([RenameColumn(name, new_name)])

    def change_column_type(self, name: str, type: pa.DataType) -> TableSchema:
        """Widen a column's type (int8 → int16 → int32 → int64, float32 → float64, decimal precision up).

        Example:
            >>> _ = t.alter.add_columns(pa.field("n", pa.int32()))
            >>> t.alter.change_column_type("n", pa.int64()).arrow_type("n")
            DataType(int64)
        """
        return self.apply([UpdateColumnType(name, type)])

    def set_column_nullable(self, name: str) -> TableSchema:
        """Make a NOT NULL value column nullable (a primary-key column cannot be).

        Example:
            >>> t.alter.set_column_nullable("v").arrow_schema.field("v").nullable
            True
        """
        return self.apply([UpdateColumnNullability(name, True)])

    def set_column_comment(self, name: str, comment: str | None) -> TableSchema:
        """Set (or with None remove) a column's comment.

        Example:
            >>> t.alter.set_column_comment("v", "the value").fields[1].description
            'the value'
        """
        return self.apply([UpdateColumnComment(name, comment)])

    def set_table_comment(self, comment: str | None) -> TableSchema:
        """Set (or with None remove) the table comment.

        Example:
            >>> t.alter.set_table_comment("orders").comment
            'orders'
        """
        return self.apply([UpdateComment(comment)])

    def set_options(self, options: Mapping[str, str]) -> TableSchema:
        """Set table options; unknown keys and options that cannot change once the table has data are refused.

        Raises:
            OptionsError: An unknown key or a bad value (names the option).
            ImmutableOptionError: ``bucket``, ``merge-engine``, ``sequence.field``, ... (says why).

        Example:
            >>> t.alter.set_options({"snapshot.num-retained.min": "3"}).options["snapshot.num-retained.min"]
            '3'
        """
        return self.apply([SetOption(k, v if isinstance(v, str) else str(v)) for k, v in options.items()])

    def unset_options(self, keys: str | Iterable[str]) -> TableSchema:
        """Remove options: each goes back to its default.

        Example:
            >>> _ = t.alter.set_options({"snapshot.num-retained.min": "3"})
            >>> t.alter.unset_options(["snapshot.num-retained.min"]).options["snapshot.num-retained.min"]
            '10'
        """
        return self.apply([RemoveOption(k) for k in _names(keys)])


def _names(names: str | Iterable[str]) -> list[str]:
    return [names] if isinstance(names, str) else list(names)
