"""Committing a row-level operation: one commit of ``+I``/``+U``/``-D`` records, safe against concurrent commits.

An operation is a function of the snapshot it reads (``compute``) giving the change rows and their kinds.
They are written and committed as **one** snapshot by a write transaction
(:class:`~mergetable.commit.transaction.WriteTransaction`; the snapshot's ``operation`` property names the
operation, e.g. ``DELETE``). The transaction's precondition checks, in every attempt of the commit protocol,
that no data commit landed after the snapshot read on any bucket the operation writes to: such a commit
may have changed the rows the operation read, and applying records computed from stale rows would silently
undo it. Like deltalake, the operation is then computed again on the new snapshot, a few times, before it
fails with :class:`~mergetable.core.errors.CommitConflictError` (the table unchanged). Compactions never
conflict (they do not change what the rows are).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, Unpack

import numpy as np
import pyarrow as pa

from mergetable.commit.operation import OPERATION
from mergetable.commit.result import CommitResult, commit_result
from mergetable.commit.transaction import CommitArgs, WritePrecondition, WriteTransaction
from mergetable.core.errors import CommitConflictError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.options import TableOptions
from mergetable.core.predicates import Filters
from mergetable.core.progress import wanted
from mergetable.core.read_options import ReadArgs
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind, CommitMessage, ManifestEntry, Snapshot
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Sections, Split
from mergetable.write.input import with_progress

RECOMPUTE_ATTEMPTS = 3

Changes = tuple[pa.Table, np.ndarray] | tuple[pa.Table, np.ndarray, np.ndarray | None] | None
"""Rows with the table's columns and one :class:`~mergetable.core.rowkind.RowKind` (int8) per row (None: no change);
optionally the bucket each row's key is in already (-1: not known), for the writer of a dynamic-bucket table."""
ChangeStream = Iterator[Changes]
"""Changes computed a part at a time (a merge of a large source: the parts hold disjoint keys), each written
as it comes, so that the operation never holds all of them; still one commit."""


class DmlTable(Protocol):
    """What the row-level operations need of a :class:`mergetable.Table`."""

    fileio: FileIO
    table_schema: TableSchema

    @property
    def schema(self) -> pa.Schema: ...
    @property
    def primary_key(self) -> tuple[str, ...]: ...
    @property
    def table_options(self) -> TableOptions: ...
    def latest_snapshot(self) -> Snapshot | None: ...
    def snapshot(self, snapshot_id: int) -> Snapshot: ...
    def snapshots(self) -> list[Snapshot]: ...
    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]: ...
    def plan(
        self,
        filter: Filters | None = None,
        target_split_size: int = ...,
        sections: Sections = "all",
        key_ranges: bool = True,
        **args: Unpack[ReadArgs],
    ) -> list[Split]: ...
    def split_reader(self, columns: Sequence[str] | None = None, filter: Filters | None = None) -> SplitReader: ...
    def writing(self, overwrite: bool | dict[str, Any] = False, **args: Unpack[CommitArgs]) -> WriteTransaction: ...


class _ConcurrentChange(CommitConflictError):
    pass


def apply_changes(
    table: DmlTable,
    operation: str,
    compute: Callable[[Snapshot | None], Changes | ChangeStream],
    blind: bool = False,
    source_rows: int = 0,
    progress: bool | None = False,
) -> CommitResult:
    """Compute the changes on the latest snapshot and commit them as one snapshot (see the module docstring).

    ``compute`` gives the changes at once or as a stream of parts. ``blind``: the changes do not depend on
    what the table holds (deleting given keys): no conflict check. ``source_rows``: a merge's source rows, for
    the metrics. ``progress``: a bar over the records written (None: when run interactively).

    Returns what the operation did (its snapshot: None when there was nothing to change).
    """
    started = time.monotonic_ns()
    conflict: _ConcurrentChange | None = None
    for _ in range(RECOMPUTE_ATTEMPTS):
        base = table.latest_snapshot()
        computed = compute(base)
        parts = iter([computed]) if computed is None or isinstance(computed, tuple) else computed
        nonempty = (p for p in parts if p is not None and p[0].num_rows)
        first = next(nonempty, None)
        if first is None:
            return commit_result(operation, None, [], started, source_rows=source_rows)
        guard = None if blind else _unchanged_since(table, base)
        written: list[np.ndarray] = []  # the row kinds of every part, for the metrics (one byte a row)
        try:
            with table.writing(properties={OPERATION: operation}, precondition=guard) as w:
                for part in itertools.chain([first], nonempty):
                    rows, kinds = part[0], part[1]
                    data = with_progress(rows, operation.lower(), wanted(progress))
                    buckets = part[2] if len(part) > 2 else None
                    w.writer.write(data, row_kind=pa.array(kinds, pa.int8()), buckets=buckets)
                    written.append(np.asarray(kinds, dtype=np.int8))
                snap = w.commit()
            kinds_all = np.concatenate(written)
            return commit_result(
                operation, snap, w.committed_messages, started, kinds=kinds_all, source_rows=source_rows
            )
        except _ConcurrentChange as exc:
            conflict = exc
    raise CommitConflictError(f"{operation.lower()}: {conflict} on each of {RECOMPUTE_ATTEMPTS} attempts; try again")


def _unchanged_since(table: DmlTable, base: Snapshot | None) -> WritePrecondition:
    """A commit precondition: no data commit after ``base`` wrote to a bucket the messages write to."""
    base_id = base.id if base is not None else 0

    def check(messages: Sequence[CommitMessage], latest: Snapshot | None) -> None:
        touched = {(m.partition, m.bucket) for m in messages}
        latest_id = latest.id if latest is not None else 0
        if latest_id < base_id:
            raise _ConcurrentChange(f"the table was rolled back from snapshot {base_id} to {latest_id} meanwhile")
        for sid in range(base_id + 1, latest_id + 1):
            try:
                snap = table.snapshot(sid)
            except SnapshotNotFoundError:
                raise _ConcurrentChange(f"snapshot {sid}, committed meanwhile, is gone") from None
            if snap.commit_kind is CommitKind.COMPACT:
                continue
            hit = next((e for e in table.delta_entries(snap) if (e.partition, e.bucket) in touched), None)
            if hit is not None:
                raise _ConcurrentChange(
                    f"snapshot {sid} (a concurrent {snap.commit_kind.value} commit) changed bucket {hit.bucket} "
                    f"of partition {list(hit.partition)} after snapshot {base_id} was read"
                )

    return check


__all__ = ["ChangeStream", "Changes", "DmlTable", "apply_changes"]
