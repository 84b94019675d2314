"""``Table.delete(filter)``, ``Table.update(filter, set)`` and ``Table.delete_keys(keys)`` as change records.

* delete: the keys of the merged rows matching the filter (read with only the key and ordering columns,
  pruned by the filter) as ``-D`` records;
* update: the whole matching rows with the assignments applied as ``+U`` records;
* delete_keys: the given keys as ``-D`` records.

Each is one commit made by :func:`mergetable.dml.apply.apply_changes`; what they mean on each merge engine
(and which are refused) is :mod:`mergetable.dml.rules`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.result import CommitResult
from mergetable.core.errors import MergeError, SchemaError
from mergetable.core.filters import bind_filters
from mergetable.core.predicates import Filters
from mergetable.core.rowkind import RowKind
from mergetable.dml.apply import Changes, DmlTable, apply_changes
from mergetable.dml.clauses import resolve_columns
from mergetable.dml.evaluate import assignment, cast_columns, literal, project
from mergetable.dml.rules import check_assigned, check_delete, check_update, nulls_refused
from mergetable.dml.sql import check_sql, sql_values
from mergetable.dml.target import read_target_buckets
from mergetable.metadata.models import Snapshot
from mergetable.write.input import to_arrow_table


def check_filter(table: DmlTable, filter: Any, operation: str) -> Filters | None:
    """``filter`` checked against the schema (the same DNF front door as ``read(filter=…)``)."""
    if filter is not None and not isinstance(filter, list | tuple):
        hint = "; to delete rows by key use delete_keys(keys)" if operation == "delete" else ""
        raise SchemaError(
            f"argument 'filter' of {operation} must be a DNF filter like [('id', '>', 1)] or None (every row), "
            f"got {type(filter).__name__}{hint}"
        )
    if filter is not None and len(filter) == 0:
        raise SchemaError(f"argument 'filter' of {operation} is empty; pass None to {operation} every row")
    bind_filters(filter, table.schema)  # FilterError / SchemaError naming the column, before anything is read
    return filter


def kinds(n: int, kind: RowKind) -> np.ndarray:
    return np.full(n, int(kind), dtype=np.int8)


def retracts(table: DmlTable, keys: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """``-D`` records of ``keys`` (the columns it lacks are NULL: a retract needs only the key)."""
    for f in table.schema:
        if f.name not in keys.schema.names:
            keys = keys.append_column(f.name, pa.nulls(keys.num_rows, f.type))
    return keys, kinds(keys.num_rows, RowKind.DELETE)


def delete_where(table: DmlTable, filter: Filters | None) -> CommitResult:
    check_delete(table.table_options, "delete")
    filter = check_filter(table, filter, "delete")
    opts = table.table_options
    needed = [*table.primary_key, *(c for c in opts.sequence_field if c not in table.primary_key)]

    def compute(base: Snapshot | None) -> Changes:
        if base is None:
            return None
        keys, buckets = read_target_buckets(table, base.id, needed, filter)
        return (*retracts(table, keys), buckets)

    return apply_changes(table, "DELETE", compute)


def delete_keys(table: DmlTable, keys: Any) -> CommitResult:
    check_delete(table.table_options, "delete_keys")
    rows = to_arrow_table(keys, "keys")
    missing = [k for k in table.primary_key if k not in rows.schema.names]
    if missing:
        raise SchemaError(f"argument 'keys' must hold the primary key {list(table.primary_key)}", missing[0])
    changes = retracts(table, rows)
    return apply_changes(table, "DELETE", lambda _: changes, blind=True)


def assignments(
    table: DmlTable, values: Any, operation: str, new_values: Any = None
) -> tuple[dict[str, pc.Expression], dict[str, str]]:
    """``set`` and ``new_values`` as ``({column: expression}, {column: SQL text})``: table columns, no key
    column, literals coerced to the column type, strings of ``set`` SQL expressions (:mod:`mergetable.dml.sql`)."""
    if not values and not new_values:
        raise SchemaError(
            f"argument 'set' of {operation} needs {{column: SQL expression, pyarrow Expression or value}} "
            "(or new_values={column: value})"
        )
    resolved = resolve_columns(values or {}, table.schema.names, f"argument 'set' of {operation}")
    literals = resolve_columns(new_values or {}, table.schema.names, f"argument 'new_values' of {operation}")
    both = [c for c in literals if c in resolved]
    if both:
        raise SchemaError(f"{operation}: assigned in both 'set' and 'new_values'", both[0])
    check_assigned(table.table_schema, {**resolved, **literals}, operation)
    sql = {c: check_sql(v, c) for c, v in resolved.items() if isinstance(v, str)}
    exprs = {c: assignment(v, table.schema.field(c).type, c) for c, v in resolved.items() if c not in sql}
    exprs.update({c: literal(v, table.schema.field(c).type, c) for c, v in literals.items()})
    return exprs, sql


def evaluate(rows: pa.Table, full: dict[str, pc.Expression], sql: dict[str, str], schema: pa.Schema) -> pa.Table:
    """The updated rows: ``full`` (every column) evaluated over ``rows``, the SQL columns replaced by theirs."""
    new = project(rows, full, "update")
    for c, values in sql_values(rows, sql, "update").items():
        new = new.set_column(new.schema.get_field_index(c), c, values)
    return cast_columns(new, schema, "update")


def check_nulls(table: DmlTable, new: pa.Table, old: pa.Table, assigned: Sequence[str], operation: str) -> None:
    """On a partial-update table, refuse assigning NULL over a value (the engine would skip it)."""
    if not nulls_refused(table.table_options):
        return
    for c in assigned:
        bad = pc.and_(pc.is_null(new.column(c)), pc.is_valid(old.column(c)))
        if pc.any(bad).as_py():
            key = {k: old.column(k)[pc.index(bad, True).as_py()].as_py() for k in table.primary_key}
            raise MergeError(
                f"{operation}: assigning NULL to column '{c}' on a partial-update table would be skipped (partial "
                f"update ignores NULLs); first such row has key {key}"
            )


def update_where(
    table: DmlTable, filter: Filters | None, values: Mapping[str, Any], new_values: Mapping[str, Any] | None = None
) -> CommitResult:
    check_update(table.table_options, "update")
    exprs, sql = assignments(table, values, "update", new_values)
    filter = check_filter(table, filter, "update")
    schema = table.schema
    full = {f.name: exprs.get(f.name, pc.field(f.name)) for f in schema}
    evaluate(schema.empty_table(), full, sql, schema)  # errors before any read

    def compute(base: Snapshot | None) -> Changes:
        if base is None:
            return None
        rows, buckets = read_target_buckets(table, base.id, None, filter)
        new = evaluate(rows, full, sql, schema)
        check_nulls(table, new, rows, [*exprs, *sql], "update")
        return new, kinds(new.num_rows, RowKind.UPDATE_AFTER), buckets

    return apply_changes(table, "UPDATE", compute)


__all__ = [
    "assignments",
    "check_filter",
    "check_nulls",
    "delete_keys",
    "delete_where",
    "evaluate",
    "kinds",
    "update_where",
]
