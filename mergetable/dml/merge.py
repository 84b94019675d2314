"""``Table.merge(source, on)``: deltalake's merge builder, with the clause semantics of :mod:`mergetable.dml.clauses`.

The target is the latest snapshot, the source anything :meth:`mergetable.Table.write` accepts. They are
joined full-outer on equal values of the ``on`` columns (default: the primary key; NULL never matches) by
Acero on the key columns only; the rows are then gathered by index. In the joined rows, conditions and
assigned values are ``pyarrow.compute`` expressions in which ``pc.field("source.x")`` and
``pc.field("target.x")`` (by the aliases) name each side's column ``x``; a column present on one side only
may also be named plainly (``pc.field("x")``). Conditions that are NULL do not hold; their floating-point
comparisons order NaN as Spark does (:mod:`mergetable.dml.nan_order`).

* ``when_matched_update(set)``: assigned columns take their values, the others keep the target's;
  ``when_matched_update_all()``: every non-key column from the source column of the same name (the key stays
  the target's: keys are never updated).
* ``when_not_matched_insert(values)``: unassigned columns are NULL; ``..._insert_all()``: the source row.
* ``when_matched_delete()``, ``when_not_matched_by_source_delete()``, ``when_not_matched_by_source_update``.

Without ``when_not_matched_by_source_*`` clauses only the target rows whose ``on`` values occur in the
source are kept: the snapshot is streamed a window at a time and filtered by the hashes of the source's
``on`` values (:func:`mergetable.dml.target.read_matching`; a small source also prunes files by an ``in``
filter). A source larger than :data:`SOURCE_PART_ROWS` joined on the primary key is then merged in parts of
disjoint keys, each written as it is computed (one commit still).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.result import CommitResult
from mergetable.core.dynamic_buckets import distinct_hashes
from mergetable.core.errors import SchemaError
from mergetable.core.predicates import Predicate
from mergetable.core.rowkind import RowKind
from mergetable.core.schema import check_column
from mergetable.dml.apply import Changes, ChangeStream, DmlTable, apply_changes
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
)
from mergetable.dml.evaluate import assignment, cast_columns, check_condition, masks, project
from mergetable.dml.nan_order import spark_nan_order
from mergetable.dml.ops import check_nulls
from mergetable.dml.rules import nulls_refused
from mergetable.dml.sql import check_sql, sql_values
from mergetable.dml.target import join_key, key_hashes, read_matching, read_target
from mergetable.dml.upsert import upsert_changes, upserts_only
from mergetable.metadata.models import Snapshot
from mergetable.write.input import to_arrow_table

_MAX_PRUNE_VALUES = 1_000  # an in-list is bound value by value: worth it for small sources only
SOURCE_PART_ROWS = 1 << 19
"""Source rows merged at a time: a larger source joined on the primary key is merged in parts of disjoint keys
(split by key hash), each written before the next is computed, so memory does not grow with the source."""
_ROW_KIND = {"update": RowKind.UPDATE_AFTER, "delete": RowKind.DELETE, "insert": RowKind.INSERT}


class MergeBuilder:
    """Clauses of a merge into a table; :meth:`execute` commits it. Made by :meth:`mergetable.Table.merge`."""

    def __init__(
        self, table: DmlTable, source: Any, on: str | Sequence[str] | None, source_alias: str, target_alias: str
    ) -> None:
        for name, alias in (("source_alias", source_alias), ("target_alias", target_alias)):
            if not isinstance(alias, str) or not alias or "." in alias:
                raise SchemaError(f"argument '{name}' must be a non-empty name without '.', got {alias!r}")
        if source_alias == target_alias:
            raise SchemaError(f"arguments 'source_alias' and 'target_alias' must differ (both '{source_alias}')")
        self._table = table
        self._source = to_arrow_table(source, "source")
        self._s, self._t = source_alias, target_alias
        self._on = self._on_columns(on)
        self._clauses: list[Clause[pc.Expression | str]] = []

    def _on_columns(self, on: str | Sequence[str] | None) -> list[str]:
        columns = self._table.schema.names
        names = list(self._table.primary_key) if on is None else [on] if isinstance(on, str) else list(on)
        if not names or not all(isinstance(c, str) for c in names):
            raise SchemaError(f"argument 'on' must be a column name or a list of them, got {on!r}")
        for c in names:
            check_column(c, columns, "argument 'on'")
            if c not in self._source.schema.names:
                raise SchemaError(
                    f"argument 'on' names a column the source does not have ({self._source.schema.names})", c
                )
        return names

    # -- clauses --------------------------------------------------------------------------------------------
    def _add(self, kind: Kind, action: Action, condition: Any, values: Mapping[str, Any] | None) -> MergeBuilder:
        cond = check_condition(condition, "condition")
        clause = make_clause(self._table.table_schema, kind, action, cond, values)  # the engine's rules first
        schema = self._table.schema
        if clause.values is not None:
            exprs = {
                c: check_sql(v, c) if isinstance(v, str) else assignment(v, schema.field(c).type, c)
                for c, v in clause.values.items()
            }  # a string is SQL over the joined row (mergetable.dml.sql), evaluated in _output
            clause = dataclasses.replace(clause, values=exprs)
        elif action != "delete":
            pk = self._table.primary_key if action == "update" else ()
            missing = [c for c in schema.names if c not in self._source.schema.names and c not in pk]
            if missing:
                raise SchemaError(f"'{kind}' {action} all: the source has no column '{missing[0]}'", missing[0])
        self._clauses.append(clause)
        return self

    def when_matched_update(self, set: Mapping[str, Any], condition: pc.Expression | None = None) -> MergeBuilder:
        """Update matched target rows: ``set`` maps columns to literals or expressions over the joined row.

        Example:
            >>> import pyarrow.compute as pc
            >>> _ = t.merge({"id": [2], "v": ["x"]}).when_matched_update({"v": pc.field("source.v")}).execute()
            >>> t.read().sort_by("id").to_pydict()
            {'id': [1, 2], 'v': ['a', 'x']}
        """
        return self._add(MATCHED, "update", condition, _required(set, "set"))

    def when_matched_update_all(self, condition: pc.Expression | None = None) -> MergeBuilder:
        """Update matched target rows with every column of their source row.

        Example:
            >>> _ = t.merge({"id": [2, 5], "v": ["x", "y"]}).when_matched_update_all().execute()
            >>> t.read().sort_by("id").to_pydict()
            {'id': [1, 2], 'v': ['a', 'x']}
        """
        return self._add(MATCHED, "update", condition, None)

    def when_matched_delete(self, condition: pc.Expression | None = None) -> MergeBuilder:
        """Delete matched target rows.

        Example:
            >>> _ = t.merge({"id": [1]}).when_matched_delete().execute()
            >>> t.read().to_pydict()
            {'id': [2], 'v': ['B']}
        """
        return self._add(MATCHED, "delete", condition, None)

    def when_not_matched_insert(
        self, values: Mapping[str, Any], condition: pc.Expression | None = None
    ) -> MergeBuilder:
        """Insert a row for each source row matching no target row (``values`` must give the primary key).

        Example:
            >>> import pyarrow.compute as pc
            >>> values = {"id": pc.field("source.id"), "v": "'new'"}  # a string is SQL: here the literal 'new'
            >>> _ = t.merge({"id": [2, 3]}).when_not_matched_insert(values).execute()
            >>> t.read().sort_by("id").to_pydict()
            {'id': [1, 2, 3], 'v': ['a', 'B', 'new']}
        """
        return self._add(NOT_MATCHED, "insert", condition, _required(values, "values"))

    def when_not_matched_insert_all(self, condition: pc.Expression | None = None) -> MergeBuilder:
        """Insert each source row matching no target row as it is.

        Example:
            >>> _ = t.merge({"id": [1, 3], "v": ["no", "c"]}).when_not_matched_insert_all().execute()
            >>> t.read().sort_by("id").to_pydict()
            {'id': [1, 2, 3], 'v': ['a', 'B', 'c']}
        """
        return self._add(NOT_MATCHED, "insert", condition, None)

    def when_not_matched_by_source_update(
        self, set: Mapping[str, Any], condition: pc.Expression | None = None
    ) -> MergeBuilder:
        """Update the target rows that no source row matched (expressions over the target's columns).

        Example:
            >>> _ = t.merge({"id": [1]}).when_not_matched_by_source_update({"v": "'gone'"}).execute()
            >>> t.read().sort_by("id").to_pydict()
            {'id': [1, 2], 'v': ['a', 'gone']}
        """
        return self._add(NOT_MATCHED_BY_SOURCE, "update", condition, _required(set, "set"))

    def when_not_matched_by_source_delete(self, condition: pc.Expression | None = None) -> MergeBuilder:
        """Delete the target rows that no source row matched.

        Example:
            >>> _ = t.merge({"id": [1]}).when_not_matched_by_source_delete().execute()
            >>> t.read().to_pydict()
            {'id': [1], 'v': ['a']}
        """
        return self._add(NOT_MATCHED_BY_SOURCE, "delete", condition, None)

    # -- execution ------------------------------------------------------------------------------------------
    def execute(self, progress: bool | None = None) -> CommitResult:
        """Run the merge as one commit; what it did (:class:`~mergetable.commit.result.CommitResult`: the new
        snapshot, rows inserted, updated and deleted); falsy when no clause applied to any row. ``progress``: a
        bar over the records written (default: when run interactively).

        Example:
            >>> m = t.merge({"id": [2, 9], "v": ["x", "z"]})
            >>> r = m.when_matched_update_all().when_not_matched_insert_all().execute()
            >>> r.snapshot.properties, r.num_source_rows, r.num_target_rows_inserted, r.num_target_rows_updated
            ({'operation': 'MERGE'}, 2, 1, 1)
            >>> bool(t.merge({"id": [9], "v": ["z"]}).when_not_matched_insert_all().execute())
            False
        """
        check_clauses(self._clauses)
        empty = self._table.schema.empty_table()
        self._compute(None, empty, self._source.slice(0, 0))  # every expression evaluated on no rows: errors first
        rows = self._source.num_rows
        return apply_changes(self._table, "MERGE", self._changes, source_rows=rows, progress=progress)

    @property
    def source(self) -> pa.Table:
        """The source rows."""
        return self._source

    @property
    def on(self) -> list[str]:
        """The columns the source and the target are joined on."""
        return self._on

    @property
    def clauses(self) -> list[Clause[pc.Expression | str]]:
        """The clauses added so far, in order."""
        return self._clauses

    def _changes(self, base: Snapshot | None) -> Changes | ChangeStream:
        table, source = self._table, self._source
        if base is None:
            return self._compute(base, table.schema.empty_table(), source)
        if any(c.kind == NOT_MATCHED_BY_SOURCE for c in self._clauses):  # every target row takes part
            return self._compute(base, read_target(table, base.id, None, None), source)
        keys = self._source_keys(source)
        prune = _prune(self._on, keys)
        if upserts_only(table, self._on, self._clauses):
            upserts = upsert_changes(table, base.id, source, keys, self._on, self._clauses, prune)
            if upserts is not None:
                return upserts
        try:
            hashes, valid = key_hashes(keys)
        except SchemaError:  # a key type without a hash: read the target rows the filter leaves
            return self._compute(base, read_target(table, base.id, None, prune), source)
        wanted = distinct_hashes(hashes[valid])
        parts = -(-source.num_rows // SOURCE_PART_ROWS) if set(self._on) == set(table.primary_key) else 1
        s_part = (hashes % np.uint64(parts)).astype(np.int32)
        del hashes, valid
        target = read_matching(table, base.id, self._on, wanted, prune)
        del wanted
        if parts <= 1:
            return self._compute(base, target, source)
        return self._in_parts(base, target, s_part, parts)

    def _in_parts(self, base: Snapshot, target: pa.Table, s_part: np.ndarray, parts: int) -> ChangeStream:
        """The changes of a large source a part at a time: source and target rows split by the hash of their
        primary key (``s_part``: the source rows' part), so that the parts hold disjoint keys and every row of
        a key is in one part."""
        source = self._source
        t_hashes, _ = key_hashes([target.column(c) for c in self._on])
        t_part = (t_hashes % np.uint64(parts)).astype(np.int32)
        del t_hashes
        for p in range(parts):
            yield self._compute(base, target.filter(pa.array(t_part == p)), source.filter(pa.array(s_part == p)))

    def _source_keys(self, source: pa.Table) -> list[pa.ChunkedArray]:
        schema = self._table.schema
        try:
            return [source.column(c).cast(schema.field(c).type) for c in self._on]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"argument 'on': the source column cannot be compared with the table's: {exc}") from None

    def _compute(self, base: Snapshot | None, target: pa.Table, source: pa.Table) -> Changes:
        resolved = self.resolve(base, target, source)[0]
        if not resolved:
            return None
        parts = [rows for _, _, rows in resolved]
        kinds = [clause.kind for clause, _, _ in resolved]
        positions = [position for _, position, _ in resolved]
        row_kinds = [np.full(p.size, int(_ROW_KIND[c.action]), dtype=np.int8) for c, p, _ in resolved]
        if len(parts) == 1 or (set(self._on) == set(self._table.primary_key) and len(set(kinds)) == len(kinds)):
            # joined on the primary key, rows of different kinds hold different keys (a key is matched, not
            # matched or only in the target): with one clause per kind, the parts' order does not matter
            return pa.concat_tables(parts), np.concatenate(row_kinds)
        order = np.argsort(np.concatenate(positions), kind="stable")  # the joined (source) order, across clauses
        return pa.concat_tables(parts).take(pa.array(order)), np.concatenate(row_kinds)[order]

    def resolve(
        self, base: Snapshot | None, target: pa.Table, source: pa.Table
    ) -> tuple[list[tuple[Clause[pc.Expression | str], np.ndarray, pa.Table]], np.ndarray]:
        """The clauses that apply, each with the joined rows it applies to (positions in the joined order) and
        its output rows; and the target row of each joined row (-1: none). With ``base`` None every clause is
        evaluated on no rows (its errors raised)."""
        keys = [f"_k{i}" for i in range(len(self._on))]
        right = self._source_keys(source)
        left = [join_key(target.column(c)) for c in self._on]
        left_t = pa.table([*left, pa.array(np.arange(target.num_rows))], [*keys, "_ti"])
        right_t = pa.table([*(join_key(c) for c in right), pa.array(np.arange(source.num_rows))], [*keys, "_si"])
        # without a "not matched by source" clause, the target rows no source row matches take no part
        by_source = any(c.kind == NOT_MATCHED_BY_SOURCE for c in self._clauses)
        pairs = left_t.join(right_t, keys, join_type="full outer" if by_source else "right outer")
        # in source order (target-only rows last), so rows of one key are written in the order write() takes them
        pairs = pairs.sort_by([("_si", "ascending"), ("_ti", "ascending")])
        ti, si = pairs.column("_ti").combine_chunks(), pairs.column("_si").combine_chunks()
        has_t = np.asarray(ti.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        has_s = np.asarray(si.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        of_kind = {MATCHED: has_t & has_s, NOT_MATCHED: has_s & ~has_t, NOT_MATCHED_BY_SOURCE: has_t & ~has_s}
        if needs_single_match(self._clauses):
            self._check_single_match(target, np.asarray(ti.to_numpy(zero_copy_only=False))[of_kind[MATCHED]])
        conds = {f"c{i}": c.condition for i, c in enumerate(self._clauses) if c.condition is not None}
        joined = self._joined(target, source, ti, si) if conds else None  # else joined per clause, its rows only
        holds: dict[str, np.ndarray] = {}
        if joined is not None:
            holds = masks(joined, {n: spark_nan_order(c, joined.schema) for n, c in conds.items()}, "merge condition")
        action = np.full(len(ti), -1, dtype=np.int64)
        for i, clause in enumerate(self._clauses):
            mask = of_kind[clause.kind] & (action < 0)
            if f"c{i}" in holds:
                mask &= holds[f"c{i}"]
            action[mask] = i
        resolved = []
        for i, clause in enumerate(self._clauses):
            position = np.nonzero(action == i)[0]
            if position.size or base is None:
                at = pa.array(position)
                rows = joined.take(at) if joined is not None else self._joined(target, source, ti.take(at), si.take(at))
                resolved.append((clause, position, self._output(clause, rows)))
        return resolved, np.asarray(pc.fill_null(ti, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

    def _joined(self, target: pa.Table, source: pa.Table, ti: pa.Array, si: pa.Array) -> pa.Table:
        cols: dict[str, pa.ChunkedArray | pa.Array] = {}
        t_names, s_names = target.schema.names, source.schema.names
        for c in t_names:
            cols[f"{self._t}.{c}"] = target.column(c).take(ti)
        for c in s_names:
            cols[f"{self._s}.{c}"] = source.column(c).take(si)
        for c in set(t_names) ^ set(s_names):  # plain names where they are unambiguous
            cols.setdefault(c, cols[f"{self._t}.{c}" if c in t_names else f"{self._s}.{c}"])
        return pa.table(cols)

    def _check_single_match(self, target: pa.Table, matched_ti: np.ndarray) -> None:
        if matched_ti.size == 0:
            return
        counts = np.bincount(matched_ti.astype(np.int64))
        if counts.max() > 1:
            row = int(np.argmax(counts > 1))
            raise ambiguous_match({k: target.column(k)[row].as_py() for k in self._table.primary_key or self._on})

    def _output(self, clause: Clause[pc.Expression | str], rows: pa.Table) -> pa.Table:
        schema, pk = self._table.schema, self._table.primary_key
        target = {c: pc.field(f"{self._t}.{c}") for c in schema.names}
        if clause.action == "delete":
            exprs = target
        elif clause.values is None:  # update all / insert all: the source's columns by name
            src = {c: pc.field(f"{self._s}.{c}") for c in schema.names}
            exprs = {c: target[c] if clause.action == "update" and c in pk else src[c] for c in schema.names}
        elif clause.action == "insert":
            exprs = {c: clause.values.get(c, pc.scalar(pa.scalar(None, f.type))) for c, f in zip(schema.names, schema)}
        else:
            exprs = {c: clause.values.get(c, target[c]) for c in schema.names}
        what = f"merge ({clause.kind}: {clause.action})"
        sql: dict[str, str] = {c: e for c, e in exprs.items() if isinstance(e, str)}
        out = project(rows, {c: target[c] if c in sql else e for c, e in exprs.items()}, what)
        for c, values in self._sql(rows, sql, what).items():
            out = out.set_column(out.schema.get_field_index(c), c, values)
        out = cast_columns(out, schema, what)
        if clause.action == "update" and nulls_refused(self._table.table_options):
            old = cast_columns(project(rows, target, what), schema, what)
            assigned = [c for c in schema.names if c not in pk] if clause.values is None else list(clause.values)
            check_nulls(self._table, out, old, assigned, what)
        return out

    def _sql(self, rows: pa.Table, sql: Mapping[str, str], what: str) -> dict[str, pa.ChunkedArray]:
        """The SQL values over the joined rows, each side's columns under its alias (``source.x``, ``target.x``)."""
        if not sql:
            return {}
        sides = {}
        for alias, names in ((self._t, self._table.schema.names), (self._s, self._source.schema.names)):
            sides[alias] = pa.table({c: rows.column(f"{alias}.{c}") for c in names})
        return sql_values(sides, sql, what, literal_hint=False)


def _prune(on: Sequence[str], keys: Sequence[pa.ChunkedArray]) -> list[Predicate] | None:
    """A filter no matching target row fails: each ``on`` column in the source's values when it has few
    (partitions, buckets and key ranges are pruned by them), else between their min and max when ordered."""
    out: list[Predicate] = []
    for c, column in zip(on, keys):
        t = column.type
        few = len(pc.unique(column.slice(0, 4 * _MAX_PRUNE_VALUES))) <= _MAX_PRUNE_VALUES  # the head first: cheap
        values = pc.unique(column).drop_null() if few else None
        if values is not None and len(values) <= _MAX_PRUNE_VALUES:
            out.append((c, "in", values.to_pylist()))
        elif pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_string(t):
            bounds = pc.min_max(column)
            if bounds["min"].is_valid:
                out += [(c, ">=", bounds["min"].as_py()), (c, "<=", bounds["max"].as_py())]
    return out or None


def _required(values: Any, argument: str) -> Mapping[str, Any]:
    if not values:
        raise SchemaError(f"argument '{argument}' needs {{column: value or pyarrow Expression}}")
    return values


__all__ = ["MergeBuilder"]
