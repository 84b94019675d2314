"""The row-level methods of :class:`mergetable.Table`: delete, update, merge (deltalake's names) and history.

The examples use ``t``, the table of the ``Table`` example (``{1: "a", 2: "B"}`` after two snapshots).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

from mergetable.commit.result import CommitResult
from mergetable.commit.transaction import WriteTransaction
from mergetable.core.predicates import Filters
from mergetable.dml.append import AppendMergeBuilder, check_merge_on, delete_rows, retract_records, update_rows
from mergetable.dml.apply import DmlTable
from mergetable.dml.history import history
from mergetable.dml.merge import MergeBuilder
from mergetable.dml.ops import delete_keys, delete_where, update_where
from mergetable.interop.notebook import ResultTable


def _dml(table: object) -> DmlTable:
    return cast(DmlTable, table)  # the mixin is only ever part of mergetable.Table, which is a DmlTable


class RowLevelOperations:
    """Mixin of :class:`mergetable.Table` (see ``docs/dml.md``). Each operation is one commit of ``+I``/``+U``/
    ``-D`` records; what it means on each merge engine, and what is refused, is in :mod:`mergetable.dml.rules`.
    A concurrent commit to the buckets an operation changes makes it compute again on the new snapshot
    (:mod:`mergetable.dml.apply`). A failed operation leaves the table unchanged."""

    def delete(self, filter: Filters | None = None) -> CommitResult:
        """Delete the rows matching ``filter`` (a DNF filter as in :meth:`read`; None: every row).

        Returns:
            What it did (:class:`~mergetable.commit.result.CommitResult`: the new snapshot, ``num_deleted_rows``,
            files added); falsy when no row matched.

        Raises:
            OptionsError: The table drops or aggregates deletes; the message names the option to set
                (``aggregation.remove-record-on-delete``, ``partial-update.remove-record-on-delete``, …).
            UnsupportedError: A first-row or versioned table (rows cannot be deleted).
            FilterError, SchemaError: A malformed filter (naming the column), or not a filter at all.

        Example:
            >>> r = t.delete([("v", "=", "a")])
            >>> r.snapshot.properties["operation"], r.num_deleted_rows, r.snapshot_id
            ('DELETE', 1, 3)
            >>> t.read().to_pydict()
            {'id': [2], 'v': ['B']}
        """
        if _dml(self).table_schema.is_append_table:
            return delete_rows(_dml(self), filter)
        return delete_where(_dml(self), filter)

    def delete_keys(self, keys: Any) -> CommitResult:
        """Delete rows by primary key: ``keys`` holds the key columns (anything :meth:`write` accepts).

        Same rules and result as :meth:`delete`; keys that are not in the table are ignored (and counted: the
        ``-D`` records are written without reading the table).

        Example:
            >>> _ = t.delete_keys({"id": [1]})
            >>> t.read().to_pydict()
            {'id': [2], 'v': ['B']}
        """
        return delete_keys(_dml(self), keys)

    def update(
        self,
        filter: Filters | None = None,
        set: Mapping[str, Any] | None = None,
        *,
        new_values: Mapping[str, Any] | None = None,
    ) -> CommitResult:
        """Assign new values to the rows matching ``filter`` (None: every row), as deltalake's ``update``.

        Args:
            filter: A DNF filter as in :meth:`read`.
            set: ``{column: value}`` where a value is a SQL expression string over the row's columns
                (``"upper(note)"``, ``"qty * 2"``, ``"'text'"``; evaluated by duckdb, which must be installed),
                a ``pyarrow.compute`` expression (``pc.field("v")``), or a non-string Python literal.
            new_values: ``{column: literal}``: Python values assigned as they are, strings included
                (deltalake's ``new_values``).

        Values are computed vectorized over the matching rows and cast to the column type. Primary-key and
        partition columns cannot be assigned (delete and insert instead). See ``docs/dml.md``.

        Returns:
            What it did (:class:`~mergetable.commit.result.CommitResult`: the new snapshot,
            ``num_updated_rows``); falsy when no row matched.

        Raises:
            SchemaError: An unknown or key column, a column in both ``set`` and ``new_values``, a SQL expression
                that does not evaluate (the message names the column), a value that does not fit its column.
            MissingExtraError: A SQL expression without duckdb installed.
            UnsupportedError: An aggregation or first-row table (values cannot be assigned).
            MergeError: Assigning NULL on a partial-update table (partial update would skip it).

        Example:
            >>> r = t.update([("id", "=", 2)], {"v": "lower(v) || '!'"})
            >>> r.num_updated_rows, t.read().to_pydict()
            (1, {'id': [1, 2], 'v': ['a', 'b!']})
            >>> _ = t.update([("id", "=", 1)], new_values={"v": "upper(v)"})  # a literal: the text itself
            >>> import pyarrow.compute as pc
            >>> _ = t.update([("id", "=", 2)], {"v": pc.utf8_upper(pc.field("v"))})
            >>> t.read().to_pydict()
            {'id': [1, 2], 'v': ['upper(v)', 'B!']}
        """
        if _dml(self).table_schema.is_append_table:
            return update_rows(_dml(self), filter, set or {}, new_values or {})
        return update_where(_dml(self), filter, set or {}, new_values or {})

    def merge(
        self,
        source: Any,
        on: str | Sequence[str] | None = None,
        *,
        source_alias: str = "source",
        target_alias: str = "target",
    ) -> MergeBuilder:
        """Start a merge of ``source`` (anything :meth:`write` accepts) joined on the ``on`` columns (default:
        the primary key; required on an append table, whose matched rows are changed by position, see
        :mod:`mergetable.dml.append`); add ``when_…`` clauses, then ``execute()``. In conditions and values,
        ``pc.field("source.x")`` / ``pc.field("target.x")`` name each side's columns (see
        :mod:`mergetable.dml.merge`); the clauses resolve as Delta's (first matching clause wins; a target row
        matched by several source rows is an error).

        Example:
            >>> import pyarrow.compute as pc
            >>> src = pa.table({"id": [2, 3], "v": ["x", "c"]})
            >>> result = (t.merge(src)
            ...     .when_matched_update({"v": pc.field("source.v")}, condition=pc.field("target.v") == "B")
            ...     .when_not_matched_insert_all()
            ...     .execute())
            >>> t.read().to_pydict()
            {'id': [1, 2, 3], 'v': ['a', 'x', 'c']}
        """
        if _dml(self).table_schema.is_append_table:
            check_merge_on(on)
            return AppendMergeBuilder(_dml(self), source, on, source_alias, target_alias)
        return MergeBuilder(_dml(self), source, on, source_alias, target_alias)

    def _with_retracts(self, tx: WriteTransaction) -> WriteTransaction:
        """``tx`` applying an append table's ``-D`` rows to the stored records when it commits."""
        if _dml(self).table_schema.is_append_table:
            tx.retract_records = functools.partial(retract_records, _dml(self))
        return tx

    def history(self, limit: int | None = None, include_compaction: bool = True) -> ResultTable:
        """One row per kept snapshot, newest first: ``version``, ``timestamp`` (UTC), ``operation``, commit kind,
        user and identifier, record counts, added and deleted files, watermark, properties.

        ``include_compaction=False`` leaves out the COMPACT snapshots (``limit`` then counts the others). The
        result is a ``pyarrow.Table`` that a notebook shows as an HTML table.

        Example:
            >>> t.history().select(["version", "operation", "delta_record_count"]).to_pylist()[0]
            {'version': 2, 'operation': 'APPEND', 'delta_record_count': 1}
            >>> t.history(limit=1).num_rows
            1
            >>> _ = t.compact(full=True)
            >>> t.history().column("operation").to_pylist(), t.history(include_compaction=False).num_rows
            (['COMPACT', 'APPEND', 'APPEND'], 2)
        """
        return ResultTable(history(_dml(self).fileio, limit, include_compaction))


__all__ = ["RowLevelOperations"]
