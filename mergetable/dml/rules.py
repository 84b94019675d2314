"""What row-level operations (delete, update, merge) mean on each merge engine: one rule book for the Python
:class:`mergetable.Table` and the Spark ``MergeTable`` (see ``docs/dml.md``).

Deletes become ``-D`` records and updates ``+U`` records with the whole new row, so:

* ``deduplicate``: delete, update and merge mean exactly what they mean in Delta.
* ``versioned``: update and merge mean what they mean in Delta as long as the version column is not assigned a
  smaller value (the engine keeps the largest version; ties go to the newer row); deletes are refused (the
  engine ignores or rejects them).
* ``partial-update``: update and merge updates write whole rows, so unchanged columns keep their values and
  assigned ones replace them; a NULL assigned is refused (partial update skips NULLs, so it would be a silent
  no-op). Deletes need ``partial-update.remove-record-on-delete``.
* ``aggregation``: a written row is aggregated into the current one, so an update (or a merge update) would
  not set values: refused. Deletes need ``aggregation.remove-record-on-delete``. Inserts aggregate into the
  row of their key if it exists.
* ``first-row``: the first row of a key is kept forever: update and delete are refused; inserts of a key that
  exists are ignored, as the engine defines.
* ``ignore-delete`` set (or ``table.delete.behavior`` = ``ignore``/``disable``): deletes would be dropped or
  rejected by the writer, so they are refused up front.

Every refusal happens before anything is read or written, so the table is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

from mergetable.core.errors import OptionsError, SchemaError, UnsupportedError
from mergetable.core.options import DeleteBehavior, MergeEngine, TableOptions
from mergetable.core.schema import TableSchema

_REMOVE_ON_DELETE = {
    MergeEngine.PARTIAL_UPDATE: "partial-update.remove-record-on-delete",
    MergeEngine.AGGREGATION: "aggregation.remove-record-on-delete",
}


def check_delete(opts: TableOptions, operation: str) -> None:
    """Refuse a delete that the table would drop or could not apply, naming the option to set.

    >>> from mergetable.core.options import TableOptions
    >>> check_delete(TableOptions.from_map({"merge-engine": "aggregation"}), "delete")
    Traceback (most recent call last):
    ...
    mergetable.core.errors.OptionsError: option 'aggregation.remove-record-on-delete': delete on an ...
    """
    engine = opts.merge_engine
    if opts.ignore_delete:
        raise OptionsError("ignore-delete", f"{operation}: the table drops deletes (ignore-delete=true)")
    if opts.delete_behavior in (DeleteBehavior.IGNORE, DeleteBehavior.DISABLE):
        raise OptionsError("table.delete.behavior", f"{operation}: the table {opts.delete_behavior.value}s deletes")
    if engine is MergeEngine.FIRST_ROW:
        raise UnsupportedError(
            f"{operation}: a first-row table keeps the first row of each key; rows cannot be deleted"
        )
    if engine is MergeEngine.VERSIONED:
        raise UnsupportedError(f"{operation}: a versioned table ignores or rejects deletes; rows cannot be deleted")
    if engine is MergeEngine.PARTIAL_UPDATE and not opts.partial_update_remove_record_on_delete:
        raise OptionsError(
            _REMOVE_ON_DELETE[engine],
            f"{operation} on a partial-update table removes rows only with "
            f"'{_REMOVE_ON_DELETE[engine]}' = 'true' (a table option)",
        )
    if engine is MergeEngine.AGGREGATION and not opts.aggregation_remove_record_on_delete:
        raise OptionsError(
            _REMOVE_ON_DELETE[engine],
            f"{operation} on an aggregation table removes rows only with "
            f"'{_REMOVE_ON_DELETE[engine]}' = 'true' (without it a delete would be aggregated, not applied)",
        )


def check_update(opts: TableOptions, operation: str) -> None:
    """Refuse an update that the merge engine would not apply as an assignment."""
    engine = opts.merge_engine
    if engine is MergeEngine.AGGREGATION:
        raise UnsupportedError(
            f"{operation} on an aggregation table: a written row is aggregated into the current one, so values "
            "cannot be assigned (delete the rows and insert them again instead)"
        )
    if engine is MergeEngine.FIRST_ROW:
        raise UnsupportedError(f"{operation} on a first-row table: the first row of each key is kept; it cannot change")


def check_assigned(schema: TableSchema, columns: Iterable[str], operation: str) -> None:
    """Refuse assigning a primary-key or partition column (a key change is a delete plus an insert); a
    deduplicate cross-partition table's partition columns may change (the key moves, as a write would move it)."""
    movable = schema.is_cross_partition and schema.table_options.merge_engine is MergeEngine.DEDUPLICATE
    for c in columns:
        if c in schema.partition_keys and not movable:
            raise SchemaError(f"{operation}: an update cannot change a partition column (delete and insert instead)", c)
        if c in schema.primary_keys:
            raise SchemaError(
                f"{operation}: an update cannot change a primary-key column (delete and insert instead)", c
            )


def nulls_refused(opts: TableOptions) -> bool:
    """Whether assigning NULL must be refused (partial update skips NULLs)."""
    return opts.merge_engine is MergeEngine.PARTIAL_UPDATE


__all__ = ["check_assigned", "check_delete", "check_update", "nulls_refused"]
