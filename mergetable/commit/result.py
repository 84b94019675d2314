"""What a write, delete, update or merge did: :class:`CommitResult`, with deltalake's metric names.

``Table.write``, ``delete``, ``delete_keys``, ``update`` and ``merge(...).execute()`` return one. It is
truthy when the operation committed a snapshot (``snapshot``/``snapshot_id``) and falsy when there was
nothing to commit (no rows, nothing matched, an application transaction already committed): where these
methods returned the snapshot or None, ``if result:`` and ``result.snapshot`` read the same.

The snapshot's own fields read through it too (``result.id``, ``result.properties``), as on the
snapshot these methods returned before. Row counts are records written, by kind: a merge-on-read table
never copies rows (``num_copied_rows`` is 0), it writes ``+I``, ``+U`` and ``-D`` records that reads
merge. ``to_dict()`` gives the metrics under the names deltalake's ``write_deltalake``, ``delete``,
``update`` and ``merge().execute()`` use.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mergetable.commit.manifests import ManifestIO
from mergetable.core.fileio import FileIO
from mergetable.core.rowkind import RowKind
from mergetable.metadata.models import CommitMessage, Snapshot

_DELTA_KEYS = {
    "WRITE": ("num_added_files", "num_removed_files", "num_added_rows", "num_partitions"),
    "DELETE": ("num_added_files", "num_removed_files", "num_deleted_rows", "num_copied_rows"),
    "UPDATE": ("num_added_files", "num_removed_files", "num_updated_rows", "num_copied_rows"),
    "MERGE": (
        "num_source_rows",
        "num_target_rows_inserted",
        "num_target_rows_updated",
        "num_target_rows_deleted",
        "num_target_rows_copied",
        "num_output_rows",
        "num_target_files_added",
        "num_target_files_removed",
    ),
}


@dataclass(frozen=True)
class CommitResult:
    """The outcome and metrics of one write or row-level operation (see the module docstring).

    Attributes:
        operation: ``WRITE``, ``DELETE``, ``UPDATE`` or ``MERGE``.
        snapshot: The snapshot the operation committed (None: nothing was committed).
        num_added_files: Data files the commit added.
        num_removed_files: Data files it removed (an overwrite's replaced files, a compaction's inputs).
        num_added_rows: Records written, of every kind.
        num_inserted_rows, num_updated_rows, num_deleted_rows: Records written as ``+I``, ``+U``
            (``-U`` counts with the updates) and ``-D``.
        num_partitions: Partitions written to.
        num_source_rows: Rows of a merge's source (0 for the other operations).
        execution_time_ms: Wall time of the operation.

    Example:
        >>> r = CommitResult("DELETE", None)
        >>> bool(r), r.snapshot_id, r.num_deleted_rows
        (False, None, 0)
    """

    operation: str
    snapshot: Snapshot | None
    num_added_files: int = 0
    num_removed_files: int = 0
    num_added_rows: int = 0
    num_inserted_rows: int = 0
    num_updated_rows: int = 0
    num_deleted_rows: int = 0
    num_partitions: int = 0
    num_source_rows: int = 0
    execution_time_ms: int = 0

    def __bool__(self) -> bool:
        return self.snapshot is not None

    def __getattr__(self, name: str) -> Any:
        """The committed snapshot's fields (``result.id``, ``result.properties``, …), as when the snapshot itself
        was returned; ``AttributeError`` when nothing was committed."""
        if name in Snapshot.model_fields:
            snapshot = self.__dict__.get("snapshot")
            if snapshot is not None:
                return getattr(snapshot, name)
            raise AttributeError(f"{name!r}: nothing was committed (the {self.operation.lower()} made no snapshot)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def snapshot_id(self) -> int | None:
        """The id of the committed snapshot (the table's new version), None when nothing was committed."""
        return None if self.snapshot is None else self.snapshot.id

    @property
    def num_copied_rows(self) -> int:
        """Always 0: merge-on-read writes only the changed rows."""
        return 0

    @property
    def num_target_rows_inserted(self) -> int:
        """A merge's inserted rows (deltalake's name)."""
        return self.num_inserted_rows

    @property
    def num_target_rows_updated(self) -> int:
        """A merge's updated rows (deltalake's name)."""
        return self.num_updated_rows

    @property
    def num_target_rows_deleted(self) -> int:
        """A merge's deleted rows (deltalake's name)."""
        return self.num_deleted_rows

    @property
    def num_target_rows_copied(self) -> int:
        """Always 0 (see :attr:`num_copied_rows`)."""
        return 0

    @property
    def num_output_rows(self) -> int:
        """The records a merge wrote (deltalake's name)."""
        return self.num_added_rows

    @property
    def num_target_files_added(self) -> int:
        """As :attr:`num_added_files` (deltalake's merge name)."""
        return self.num_added_files

    @property
    def num_target_files_removed(self) -> int:
        """As :attr:`num_removed_files` (deltalake's merge name)."""
        return self.num_removed_files

    def to_dict(self) -> dict[str, Any]:
        """The metrics under deltalake's names for this operation, plus ``snapshot_id`` and ``execution_time_ms``.

        Example:
            >>> CommitResult("UPDATE", None, num_updated_rows=2).to_dict()["num_updated_rows"]
            2
        """
        keys = _DELTA_KEYS.get(self.operation, _DELTA_KEYS["WRITE"])
        return {
            "snapshot_id": self.snapshot_id,
            **{k: getattr(self, k) for k in keys},
            "execution_time_ms": self.execution_time_ms,
        }

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"CommitResult({self.operation}, {shown})"


def commit_result(
    operation: str,
    snapshot: Snapshot | None,
    messages: Sequence[CommitMessage],
    started_ns: int,
    fileio: FileIO | None = None,
    kinds: np.ndarray | None = None,
    source_rows: int = 0,
) -> CommitResult:
    """The :class:`CommitResult` of committing ``messages`` as ``snapshot``.

    ``fileio``: read the snapshot's delta to count the files it removed (an overwrite's; without it, only the
    messages' compaction inputs count). ``kinds``: the row kind of every record written (a row-level
    operation's, exact), else the counts come from the files' metadata (a write's).
    """
    elapsed = (time.monotonic_ns() - started_ns) // 1_000_000
    if snapshot is None:
        return CommitResult(operation, None, num_source_rows=source_rows, execution_time_ms=elapsed)
    new = [f for m in messages for f in (*m.new_files, *m.compact_after)]
    removed = sum(len(m.compact_before) for m in messages)
    if fileio is not None:
        metas = ManifestIO(fileio).read_list(snapshot.delta_manifest_list)
        removed = max(removed, sum(m.num_deleted_files for m in metas))
    if kinds is not None:
        counts = np.bincount(np.asarray(kinds, dtype=np.int64), minlength=4)
        inserted, updated = int(counts[RowKind.INSERT]), int(counts[RowKind.UPDATE_AFTER])
        deleted = int(counts[RowKind.DELETE])
        updated += int(counts[RowKind.UPDATE_BEFORE])
        added = len(kinds)
    else:
        added = sum(f.row_count for m in messages for f in m.new_files)
        deleted = sum(f.delete_row_count or 0 for m in messages for f in m.new_files)
        inserted, updated = added - deleted, 0
    return CommitResult(
        operation,
        snapshot,
        num_added_files=len(new),
        num_removed_files=removed,
        num_added_rows=added,
        num_inserted_rows=inserted,
        num_updated_rows=updated,
        num_deleted_rows=deleted,
        num_partitions=len({m.partition for m in messages if m.new_files}),
        num_source_rows=source_rows,
        execution_time_ms=elapsed,
    )


__all__ = ["CommitResult", "commit_result"]
