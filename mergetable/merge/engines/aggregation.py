"""``aggregation``: every value column is folded with its aggregate function (Paimon
``AggregateMergeFunction``; Fluss ``AggregateRowMerger`` options accepted).

Function per column: a ``sequence.field`` column uses ``last_value``; a key column (partition keys are
value columns here) returns its input; otherwise ``fields.<f>.aggregate-function``, else
``fields.default-aggregate-function``, else ``last_non_null_value``. The row starts all-NULL and the
result is ``+I``.

Deletes:

* Paimon (no ``table.delete.behavior``): -U/-D retract per function (``fields.<f>.ignore-retract``
  drops them for that column; an unsupported retraction is an error naming the function and option).
  ``aggregation.remove-record-on-delete``: a -D re-initialises the row from the -D record (later adds
  aggregate on top of it) and a trailing -D makes the result ``-D``.
* Fluss ``table.delete.behavior``: ``ignore`` drops deletes, ``disable`` rejects them, ``allow`` removes
  the record — every column's fold restarts (fresh function state, like Fluss storing the next insert
  raw) after the newest delete; a delete whose ``_WRITE_MASK`` covers only some columns clears only those
  columns and removes the row only when every non-key column is then NULL.

Partial writes: a column's fold only sees the records whose ``_WRITE_MASK`` includes it; the result's
mask is the OR of the key's masks. As in Paimon, each merge starts from an all-NULL row, so a delete
followed by adds inside one write-buffer flush is not carried to older records (see the report on
per-commit pre-merge effects).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from mergetable.core.errors import MergeError, OptionsError
from mergetable.core.options import DeleteBehavior, TableOptions
from mergetable.core.rowkind import RowKind, is_retract
from mergetable.core.schema import TableSchema
from mergetable.merge.aggregates.base import ADD, RESET, RETRACT, AggFunction, FieldOptions, FoldInput, create_function
from mergetable.merge.engines.base import EngineBase, assemble
from mergetable.merge.layout import Layout
from mergetable.merge.validation import field_function


def aggregation_function(schema: TableSchema, column: str) -> tuple[str, str]:
    """Paimon's ``getAggFuncName`` for the aggregation engine: (function name, option that chose it)."""
    opts = schema.table_options
    if column in opts.sequence_field:
        return "last_value", "sequence.field"
    if column in schema.primary_keys:
        return "primary-key", f"fields.{column}.aggregate-function"
    name, option = field_function(opts, column)
    return (name or "last_non_null_value"), option


def check_not_null_reset(
    layout: Layout, schema: TableSchema, nullable: dict[str, bool], columns: Sequence[str], rows_mask: np.ndarray
) -> None:
    """Paimon's ``initRow``: a record that re-initialises the row must not hold NULL in a NOT NULL column."""
    if not rows_mask.any():
        return
    for c in columns:
        if nullable.get(c, True):
            continue
        col = layout.column(c)
        if col.null_count and bool(np.any(rows_mask & ~np.asarray(col.is_valid().to_numpy(zero_copy_only=False)))):
            raise MergeError(f"Field {schema.column_names.index(c)} can not be null (column '{c}')")


class Aggregation(EngineBase):
    """Per-column aggregate functions, vectorized over every key of the merge."""

    def __init__(self, schema: TableSchema) -> None:
        super().__init__(schema)
        opts = self.opts
        self.remove_on_delete = opts.aggregation_remove_record_on_delete
        self.fluss_deletes = self.delete_behavior == DeleteBehavior.ALLOW
        self.functions: dict[str, AggFunction] = {}
        self.ignore_retract: dict[str, bool] = {}
        types = {f.name: f.type for f in schema.arrow_schema}
        for c in self.value_columns:
            name, option = aggregation_function(schema, c)
            self.functions[c] = create_function(name, c, types[c], opts, option)
            self.ignore_retract[c] = FieldOptions(c, opts).flag("ignore-retract")

    def check_kinds(self, kinds: np.ndarray) -> None:
        """A retraction (``-U``, and ``-D`` unless ``aggregation.remove-record-on-delete``) is refused while a NOT NULL
        value column's fold could end NULL: every function but ``sum`` can (``last_value`` and
        ``last_non_null_value`` retract to NULL, the collection functions and ``product`` keep a NULL
        accumulator, ``ignore-retract`` leaves a key with only retractions nothing to fold), and Paimon would then
        return NULL in a NOT NULL column; a reader could not return that row. Fluss delete behaviours are left to
        their own rules.

        >>> import pyarrow as pa
        >>> from mergetable.core.schema import TableSchema
        >>> schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("op", pa.string(), False)])
        >>> options = {"merge-engine": "aggregation", "rowkind.field": "op"}
        >>> engine = Aggregation(TableSchema.create(schema, ["k"], [], options))
        >>> engine.check_kinds(np.array([RowKind.INSERT, RowKind.UPDATE_AFTER], np.int8))
        >>> engine.check_kinds(np.array([RowKind.UPDATE_BEFORE], np.int8))
        Traceback (most recent call last):
        ...
        mergetable.core.errors.MergeError: column 'op' is NOT NULL and its aggregate function last_non_null_value ...
        """
        if self.delete_behavior is not None or not self._not_null_at_risk:
            return
        retract = kinds == RowKind.UPDATE_BEFORE if self.remove_on_delete else is_retract(kinds)
        if not bool(np.any(retract)):
            return
        column = self._not_null_at_risk[0]
        raise MergeError(
            f"column '{column}' is NOT NULL and its aggregate function {self.functions[column].name} can leave it "
            f"NULL after a retraction (a -U{'' if self.remove_on_delete else ' or -D'} record): the write is "
            "refused. Make the column nullable, or write no retractions to this table"
        )

    @property
    def _not_null_at_risk(self) -> list[str]:
        """The NOT NULL value columns whose fold can end NULL once a retraction reaches it."""
        return [
            c
            for c in self.value_columns
            if not self.nullable.get(c, True)
            and c not in self.schema.primary_keys
            and (self.functions[c].name != "sum" or self.ignore_retract[c])
        ]

    @staticmethod
    def validate(schema: TableSchema) -> None:
        """Create-time checks specific to the aggregation engine."""
        opts: TableOptions = schema.table_options
        if opts.aggregation_remove_record_on_delete:
            for c in schema.column_names:
                if FieldOptions(c, opts).flag("ignore-retract"):
                    raise OptionsError(
                        "aggregation.remove-record-on-delete",
                        f"aggregation.remove-record-on-delete and fields.{c}.ignore-retract have conflicting "
                        "behavior so should not be enabled at the same time.",
                    )

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
        rows = self.drop_deletes(rows, ignore=self.opts.ignore_delete)
        layout = Layout.build(rows, self.keys, self.seq_fields, self.seq_descending, seq_ordered)
        if layout.n_groups == 0:
            return rows
        multi = layout.sizes > 1
        if not multi.any():  # every key has one record: each passes through unchanged, in key order
            return layout.take(layout.last_pos)
        active = None if bool(multi.all()) else multi
        kinds = layout.kinds
        retract = is_retract(kinds)
        masks = self.masks(layout)
        events: np.ndarray | None = None
        fluss_deletes = self.fluss_deletes and bool(np.any(retract & multi[layout.gid]))
        if bool(np.any(retract & multi[layout.gid])) and not self.fluss_deletes:
            if self.remove_on_delete:
                deletes = kinds == RowKind.DELETE
                events = np.where(deletes, RESET, np.where(retract, RETRACT, ADD)).astype(np.int8)
                check_not_null_reset(
                    layout, self.schema, self.nullable, self.data_columns(rows), deletes & multi[layout.gid]
                )
            else:
                events = np.where(retract, RETRACT, ADD).astype(np.int8)
        values: dict[str, pa.Array] = {}
        for c in self.data_columns(rows):
            col = layout.column(c)
            part = self.written(masks, c)
            if fluss_deletes:
                # A Fluss delete clears the column: its fold restarts after the newest delete that targets it.
                cleared = layout.last_where(retract if part is None else retract & part)
                after = np.arange(layout.num_positions, dtype=np.int64) > cleared[layout.gid]
                part = ~retract & after if part is None else ~retract & after & part
            elif events is not None and self.ignore_retract[c]:
                keep = events != RETRACT
                part = keep if part is None else part & keep
            fi = self._fold_input(layout, c, col, events, part, active)
            values[c] = self.functions[c].run(fi)
        out_kinds = np.full(layout.n_groups, RowKind.INSERT, dtype=np.int8)
        last_kind = kinds[layout.last_pos]
        if events is not None and self.remove_on_delete:
            out_kinds[last_kind == RowKind.DELETE] = RowKind.DELETE
        if fluss_deletes:
            out_kinds[self._removed(layout, masks, values, retract)] = RowKind.DELETE
        out_masks = None if masks is None else self.or_masks(layout, masks)
        return assemble(layout, values, out_kinds, out_masks, None if active is None else ~multi)

    @staticmethod
    def _fold_input(
        layout: Layout,
        column: str,
        col: pa.Array,
        events: np.ndarray | None,
        part: np.ndarray | None,
        active: np.ndarray | None,
    ) -> FoldInput:
        if part is None or bool(part.all()):
            return FoldInput(column, layout.n_groups, layout.gid, col, events, active, layout.contiguous)
        return FoldInput(
            column,
            layout.n_groups,
            layout.gid[part],
            col.filter(pa.array(part)),
            None if events is None else events[part],
            active,
            layout.contiguous,
        )

    def _removed(
        self, layout: Layout, masks: np.ndarray | None, values: dict[str, pa.Array], retract: np.ndarray
    ) -> np.ndarray:
        """Groups whose newest record is a Fluss delete that removes the row."""
        last = layout.last_pos
        ends_with_delete = retract[last]
        if masks is None:
            return ends_with_delete
        full = self.covers(masks[last], self.value_bits)
        all_null = np.ones(layout.n_groups, dtype=bool)
        for c, arr in values.items():
            if c in self.schema.primary_keys:
                continue
            all_null &= ~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return ends_with_delete & (full | all_null)


__all__ = ["Aggregation", "aggregation_function", "check_not_null_reset"]
