"""What Delta's row-level operations mean on each merge engine (see docs/spark.md, "MergeTable").

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
* ``ignore-delete`` set: deletes would be dropped, so they are refused.
"""

from __future__ import annotations

from mergetable.core.errors import OptionsError, UnsupportedError
from mergetable.core.options import MergeEngine, TableOptions

_REMOVE_ON_DELETE = {
    MergeEngine.PARTIAL_UPDATE: "partial-update.remove-record-on-delete",
    MergeEngine.AGGREGATION: "aggregation.remove-record-on-delete",
}


def check_delete(opts: TableOptions, operation: str) -> None:
    """Refuse a delete that the table would drop or could not apply, naming the option to set."""
    engine = opts.merge_engine
    if opts.ignore_delete:
        raise OptionsError("ignore-delete", f"{operation}: the table drops deletes (ignore-delete=true)")
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


def nulls_refused(opts: TableOptions) -> bool:
    """Whether assigning NULL must be refused (partial update skips NULLs)."""
    return opts.merge_engine is MergeEngine.PARTIAL_UPDATE


__all__ = ["check_delete", "check_update", "nulls_refused"]
