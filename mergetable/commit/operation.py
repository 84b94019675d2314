"""What made a snapshot, as ``Table.history()``, Spark's ``MergeTable.history()`` and ``$snapshots`` report it.

Row-level operations record their name in the snapshot property ``operation`` (``DELETE``, ``UPDATE``,
``MERGE``); a restore records ``restored-from`` (``RESTORE``), a rollback also ``rolled-back-to`` (``ROLLBACK``);
any other snapshot is named by its commit kind (``APPEND``, ``OVERWRITE``, ``COMPACT``).
"""

from __future__ import annotations

from mergetable.commit.restore import RESTORED_FROM, ROLLED_BACK_TO
from mergetable.metadata.models import CommitKind, Snapshot

OPERATION = "operation"
"""The snapshot property naming the row-level operation that made it."""


def operation_of(snapshot: Snapshot) -> str:
    """What made ``snapshot`` (see the module docstring)."""
    props = snapshot.properties or {}
    if snapshot.commit_kind is not CommitKind.COMPACT and OPERATION in props:
        return props[OPERATION]
    if ROLLED_BACK_TO in props:
        return "ROLLBACK"
    if RESTORED_FROM in props:
        return "RESTORE"
    return snapshot.commit_kind.value


__all__ = ["OPERATION", "operation_of"]
