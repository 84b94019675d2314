"""The row-level methods of :class:`mergetable.Table`: delete, update, merge (deltalake's names) and history.

The examples use ``t``, the table of the ``Table`` example (``{1: "a", 2: "B"}`` after two snapshots).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import pyarrow as pa

from mergetable.core.predicates import Filters
from mergetable.dml.apply import DmlTable
from mergetable.dml.history import history
from mergetable.dml.merge import MergeBuilder
from mergetable.dml.ops import delete_keys, delete_where, update_where
from mergetable.metadata.models import Snapshot


def _dml(table: object) -> DmlTable:
    return cast(DmlTable, table)  # the mixin is only ever part of mergetable.Table, which is a DmlTable


class RowLevelOperations:
    """Mixin of :class:`mergetable.Table` (see ``docs/dml.md``). Each operation is one commit of ``+I``/``+U``/
    ``-D`` records; what it means on each merge engine, and what is refused, is in :mod:`mergetable.dml.rules`.
    A concurrent commit to the buckets an operation changes makes it compute again on the new snapshot
    (:mod:`mergetable.dml.apply`). A failed operation leaves the table unchanged."""

    def delete(self, filter: Filters | None = None) -> Snapshot | None:
        """Delete the rows matching ``filter`` (a DNF filter as in :meth:`read`; None: every row).

        Returns:
            The new snapshot, None when no row matched.

        Raises:
            OptionsError: The table drops or aggregates deletes; the message names the option to set
                (``aggregation.remove-record-on-delete``, ``partial-update.remove-record-on-delete``, …).
            UnsupportedError: A first-row or versioned table (rows cannot be deleted).
            FilterError, SchemaError: A malformed filter (naming the column), or not a filter at all.

        Example:
            >>> t.delete([("v", "=", "a")]).properties["operation"]
            'DELETE'
            >>> t.read().to_pydict()
            {'id': [2], 'v': ['B']}
        """
        return delete_where(_dml(self), filter)

    def delete_keys(self, keys: Any) -> Snapshot | None:
        """Delete rows by primary key: ``keys`` holds the key columns (anything :meth:`write` accepts).

        Same rules as :meth:`delete`; keys that are not in the table are ignored.

        Example:
            >>> _ = t.delete_keys({"id": [1]})
            >>> t.read().to_pydict()
            {'id': [2], 'v': ['B']}
        """
        return delete_keys(_dml(self), keys)

    def update(self, filter: Filters | None = None, set: Mapping[str, Any] | None = None) -> Snapshot | None:
        """Assign ``set`` to the rows matching ``filter`` (None: every row).

        ``set`` maps a column to a Python literal or a ``pyarrow.compute`` expression over the row's columns
        (``pc.field("v")``), evaluated vectorized; results are cast to the column type. Primary-key and
        partition columns cannot be assigned (delete and insert instead).

        Raises:
            SchemaError: An unknown or key column in ``set``, a value that does not fit its column.
            UnsupportedError: An aggregation or first-row table (values cannot be assigned).
            MergeError: Assigning NULL on a partial-update table (partial update would skip it).

        Example:
            >>> import pyarrow.compute as pc
            >>> _ = t.update([("id", "=", 2)], {"v": pc.utf8_lower(pc.field("v"))})
            >>> t.read().to_pydict()
            {'id': [1, 2], 'v': ['a', 'b']}
        """
        return update_where(_dml(self), filter, set or {})

    def merge(
        self,
        source: Any,
        on: str | Sequence[str] | None = None,
        *,
        source_alias: str = "source",
        target_alias: str = "target",
    ) -> MergeBuilder:
        """Start a merge of ``source`` (anything :meth:`write` accepts) joined on the ``on`` columns (default:
        the primary key); add ``when_…`` clauses, then ``execute()``. In conditions and values,
        ``pc.field("source.x")`` / ``pc.field("target.x")`` name each side's columns (see
        :mod:`mergetable.dml.merge`); the clauses resolve as Delta's (first matching clause wins; a target row
        matched by several source rows is an error).

        Example:
            >>> import pyarrow.compute as pc
            >>> src = pa.table({"id": [2, 3], "v": ["x", "c"]})
            >>> snap = (t.merge(src)
            ...     .when_matched_update({"v": pc.field("source.v")}, condition=pc.field("target.v") == "B")
            ...     .when_not_matched_insert_all()
            ...     .execute())
            >>> t.read().to_pydict()
            {'id': [1, 2, 3], 'v': ['a', 'x', 'c']}
        """
        return MergeBuilder(_dml(self), source, on, source_alias, target_alias)

    def history(self, limit: int | None = None) -> pa.Table:
        """One row per kept snapshot, newest first: ``version``, ``timestamp`` (UTC), ``operation``, commit kind,
        user and identifier, record counts, added and deleted files, watermark, properties.

        Example:
            >>> t.history().select(["version", "operation", "delta_record_count"]).to_pylist()[0]
            {'version': 2, 'operation': 'APPEND', 'delta_record_count': 1}
            >>> t.history(limit=1).num_rows
            1
        """
        return history(_dml(self).fileio, limit)


__all__ = ["RowLevelOperations"]
