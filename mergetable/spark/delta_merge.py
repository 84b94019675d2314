"""``MergeTable.merge(source, condition)``: Delta's MERGE as one commit of ``+I``/``+U``/``-D`` records.

The target (the latest snapshot) and the source are joined full-outer on the condition, computed in Spark.
The clauses, their order, the single-match rule and each merge engine's rules are those of
:mod:`mergetable.dml.clauses` and :mod:`mergetable.dml.rules`, shared with :meth:`mergetable.Table.merge`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mergetable.core.errors import SchemaError
from mergetable.dml.clauses import (
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    Action,
    Clause,
    Kind,
    ambiguous_match,
    check_clauses,
    make_clause,
    needs_single_match,
    resolve_columns,
)
from mergetable.table import Table


class MergeTarget(Protocol):
    """What a merge needs of its target (a :class:`mergetable.spark.MergeTable`)."""

    table: Table

    def target_df(self) -> DataFrame: ...

    def commit_changes(self, changes: DataFrame, operation: str) -> None: ...


ROW_KIND = "_mergetable_row_kind"
NULL_ASSIGNED = "_mergetable_null_assigned"
_T, _S, _ACTION = "_mergetable_target", "_mergetable_source", "_mergetable_action"


def as_column(condition: str | Column | None) -> Column | None:
    """A condition given as a SQL string or a Column (None: always)."""
    if condition is None or isinstance(condition, Column):
        return condition
    if isinstance(condition, str):
        return F.expr(condition)
    raise SchemaError(f"a condition must be a SQL string or a Column, got {type(condition).__name__}")


def assignments(values: Mapping[str, str | Column] | None, columns: list[str], what: str) -> dict[str, Column]:
    """``{column: SQL expression or Column}`` with every column a table column (matched case-insensitively)."""
    resolved = resolve_columns(values or {}, columns, what)
    return {c: v if isinstance(v, Column) else F.expr(str(v)) for c, v in resolved.items()}


def _any_null_assigned(values: Mapping[str, Column], target: DataFrame, columns: list[str]) -> Column:
    """True where an assignment sets NULL over a non-NULL value (partial update would skip it)."""
    out: Column = F.lit(False)
    for c in columns:
        if c in values:
            out = out | (values[c].isNull() & target[c].isNotNull())
    return out


class MergeBuilder:
    """Delta's ``DeltaMergeBuilder``: add clauses, then :meth:`execute`."""

    def __init__(self, table: MergeTarget, source: DataFrame, condition: str | Column) -> None:
        self._table = table
        self._source = source
        self._condition = as_column(condition)
        self._clauses: list[Clause[Column]] = []

    def _add(self, kind: Kind, action: Action, condition: Any, values: Mapping[str, Any] | None) -> MergeBuilder:
        cols = list(self._table.table.schema.names)
        vals = assignments(values, cols, f"{kind} {action}") if values is not None else None
        self._clauses.append(make_clause(self._table.table.table_schema, kind, action, as_column(condition), vals))
        return self

    def whenMatchedUpdate(
        self, condition: str | Column | None = None, set: Mapping[str, Any] | None = None
    ) -> MergeBuilder:
        if not set:
            raise SchemaError("whenMatchedUpdate needs set={column: expression}")
        return self._add(MATCHED, "update", condition, set)

    def whenMatchedUpdateAll(self, condition: str | Column | None = None) -> MergeBuilder:
        return self._add(MATCHED, "update", condition, None)

    def whenMatchedDelete(self, condition: str | Column | None = None) -> MergeBuilder:
        return self._add(MATCHED, "delete", condition, None)

    def whenNotMatchedInsert(
        self, condition: str | Column | None = None, values: Mapping[str, Any] | None = None
    ) -> MergeBuilder:
        if not values:
            raise SchemaError("whenNotMatchedInsert needs values={column: expression}")
        return self._add(NOT_MATCHED, "insert", condition, values)

    def whenNotMatchedInsertAll(self, condition: str | Column | None = None) -> MergeBuilder:
        return self._add(NOT_MATCHED, "insert", condition, None)

    def whenNotMatchedBySourceUpdate(
        self, condition: str | Column | None = None, set: Mapping[str, Any] | None = None
    ) -> MergeBuilder:
        if not set:
            raise SchemaError("whenNotMatchedBySourceUpdate needs set={column: expression}")
        return self._add(NOT_MATCHED_BY_SOURCE, "update", condition, set)

    def whenNotMatchedBySourceDelete(self, condition: str | Column | None = None) -> MergeBuilder:
        return self._add(NOT_MATCHED_BY_SOURCE, "delete", condition, None)

    # -- execution ----------------------------------------------------------------------------------
    def changes(self) -> DataFrame:
        """The ``+I``/``+U``/``-D`` rows the merge writes (with the row-kind column), without writing them."""
        check_clauses(self._clauses)
        table = self._table.table
        columns = list(table.schema.names)
        target = self._table.target_df().withColumn(_T, F.lit(True))
        source = self._source.withColumn(_S, F.lit(True))
        joined = target.join(source, on=self._condition, how="full_outer")
        kind_of = {
            MATCHED: F.col(_T).isNotNull() & F.col(_S).isNotNull(),
            NOT_MATCHED: F.col(_T).isNull(),
            NOT_MATCHED_BY_SOURCE: F.col(_S).isNull(),
        }
        if needs_single_match(self._clauses):
            self._check_single_match(joined.filter(kind_of[MATCHED]), target, columns)
        action: Column = F.lit(None)
        chain: Any = None
        for i, clause in enumerate(self._clauses):
            cond = kind_of[clause.kind] & (clause.condition if clause.condition is not None else F.lit(True))
            chain = F.when(cond, F.lit(i)) if chain is None else chain.when(cond, F.lit(i))
        if chain is not None:
            action = chain
        marked = joined.withColumn(_ACTION, action)
        parts = []
        for i, clause in enumerate(self._clauses):
            rows = marked.filter(F.col(_ACTION) == i)
            parts.append(rows.select(*self._projection(clause, columns, target, source)))
        if not parts:
            empty = [*(target[c] for c in columns), F.lit("+I").alias(ROW_KIND), F.lit(False).alias(NULL_ASSIGNED)]
            return target.limit(0).select(*empty)
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
        return out

    def _projection(
        self, clause: Clause[Column], columns: list[str], target: DataFrame, source: DataFrame
    ) -> list[Column]:
        kind = clause.row_kind
        null_assigned: Column = F.lit(False)
        if clause.action == "delete":
            values = {c: target[c] for c in columns}
        elif clause.values is None:  # UpdateAll / InsertAll: the source's columns by name
            lower = {c.lower(): c for c in source.columns}
            absent = [c for c in columns if c.lower() not in lower]
            if absent:
                raise SchemaError(f"{clause.kind} {clause.action} all: the source has no column {absent}", absent[0])
            values = {c: source[lower[c.lower()]] for c in columns}
            if clause.action == "update":
                null_assigned = _any_null_assigned(values, target, columns)
        elif clause.action == "insert":
            values = {c: clause.values.get(c, F.lit(None)) for c in columns}
        else:
            values = {c: clause.values.get(c, target[c]) for c in columns}
            null_assigned = _any_null_assigned({c: clause.values[c] for c in clause.values}, target, columns)
        return [*(values[c].alias(c) for c in columns), F.lit(kind).alias(ROW_KIND), null_assigned.alias(NULL_ASSIGNED)]

    def _check_single_match(self, matched: DataFrame, target: DataFrame, columns: list[str]) -> None:
        keys = [target[k] for k in self._table.table.primary_key]
        dup = matched.groupBy(*keys).count().filter(F.col("count") > 1).limit(1).collect()
        if dup:
            raise ambiguous_match({k: dup[0][i] for i, k in enumerate(self._table.table.primary_key)})

    def execute(self) -> None:
        """Run the merge: one commit (nothing is written when no clause applies to any row)."""
        self._table.commit_changes(self.changes(), "merge")


__all__ = ["NULL_ASSIGNED", "ROW_KIND", "MergeBuilder", "MergeTarget", "as_column", "assignments"]
