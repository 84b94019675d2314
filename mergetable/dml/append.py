"""``delete`` and ``update`` of an append table (no primary key): copy-on-write rewrite of the touched files.

An append table has no key to retract, so a row-level operation rewrites every live file holding a matching
row: the file is read whole, the matching rows are dropped (delete) or replaced by their updated values in
place (update), and the rest is written as new files; the commit removes the old files and adds the new ones
as one ``OVERWRITE`` snapshot (its ``operation`` property names the operation). Files the filter's partition
and column statistics rule out are not read; files without a matching row are left alone.

The commit checks that every file it removes is still live: a concurrent compaction, overwrite or row-level
operation that removed one of them makes the operation compute again on the new snapshot (a few times, then
:class:`~mergetable.core.errors.CommitConflictError`, the table unchanged). Concurrent appends never
conflict: they add files and change none. A rewritten file's rows take sequence numbers after every earlier
commit's, so a read of the table lists them after the rows committed before the operation.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.operation import OPERATION
from mergetable.commit.result import CommitResult, commit_result
from mergetable.commit.transaction import WriteTransaction
from mergetable.core.errors import CommitConflictError
from mergetable.core.filters import bind_filters, to_expression
from mergetable.core.predicates import Filters
from mergetable.dml.apply import RECOMPUTE_ATTEMPTS, DmlTable
from mergetable.dml.ops import assignments, check_filter, evaluate
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.read.scan import Split
from mergetable.write.append import write_append_files

Rewrite = Callable[[pa.Table, np.ndarray], pa.Table | None]
"""The new rows of a file from its rows and the positions that match the filter (None: the file is unchanged)."""


def delete_rows(table: DmlTable, filter: Filters | None) -> CommitResult:
    """:meth:`mergetable.Table.delete` of an append table (see the module docstring)."""
    filter = check_filter(table, filter, "delete")

    def rewrite(rows: pa.Table, hits: np.ndarray) -> pa.Table:
        keep = np.ones(rows.num_rows, dtype=bool)
        keep[hits] = False
        return rows.filter(pa.array(keep))

    return _rewrite_files(table, "DELETE", filter, rewrite)


def update_rows(
    table: DmlTable, filter: Filters | None, values: Mapping[str, Any], new_values: Mapping[str, Any] | None = None
) -> CommitResult:
    """:meth:`mergetable.Table.update` of an append table: matching rows get the assigned values in place."""
    exprs, sql = assignments(table, values, "update", new_values)
    filter = check_filter(table, filter, "update")
    schema = table.schema
    full = {f.name: exprs.get(f.name, pc.field(f.name)) for f in schema}
    evaluate(schema.empty_table(), full, sql, schema)  # errors before any read

    def rewrite(rows: pa.Table, hits: np.ndarray) -> pa.Table:
        new = evaluate(rows.take(pa.array(hits)), full, sql, schema)
        source = np.arange(rows.num_rows + len(hits))
        source[hits] = rows.num_rows + np.arange(len(hits))  # each matching row replaced by its update, in place
        return pa.concat_tables([rows, new]).take(pa.array(source[: rows.num_rows]))

    return _rewrite_files(table, "UPDATE", filter, rewrite)


def _rewrite_files(table: DmlTable, operation: str, filter: Filters | None, rewrite: Rewrite) -> CommitResult:
    started = time.monotonic_ns()
    conflict: CommitConflictError | None = None
    for _ in range(RECOMPUTE_ATTEMPTS):
        base = table.latest_snapshot()
        if base is None:
            return commit_result(operation, None, [], started)
        with table.writing(properties={OPERATION: operation}) as w:
            changed = _rewrite(table, base, filter, rewrite, w)
            if not changed:
                w.discard()
                return commit_result(operation, None, [], started)
            try:
                snap = w.commit()
            except CommitConflictError as exc:  # a file it rewrote was removed meanwhile: compute again
                conflict = exc
                continue
        result = commit_result(operation, snap, w.committed_messages, started, fileio=table.fileio)
        if operation == "DELETE":
            return dataclasses.replace(result, num_deleted_rows=changed)
        return dataclasses.replace(result, num_updated_rows=changed)
    raise CommitConflictError(f"{operation.lower()}: {conflict} on each of {RECOMPUTE_ATTEMPTS} attempts; try again")


def _rewrite(table: DmlTable, base: Snapshot, filter: Filters | None, rewrite: Rewrite, tx: WriteTransaction) -> int:
    """Hand ``tx`` the messages replacing each file of ``base`` that holds a matching row; the rows matched."""
    schema = table.table_schema
    dnf = bind_filters(filter, table.schema)
    expr = None if dnf is None else to_expression(dnf, table.schema)
    reader = table.split_reader()
    changed = 0
    next_seq: dict[tuple[tuple[str | None, ...], int], int] = {}
    for split in table.plan(filter, snapshot_id=base.id):
        for f in split.files:
            one = Split(split.snapshot_id, split.partition, split.bucket, (((f,),),), split.total_buckets)
            parts = list(reader.read_split(one, prefetch=True))
            rows = pa.concat_tables(parts) if parts else table.schema.empty_table()
            hits = _matching(rows, expr)
            if len(hits) == 0:
                continue
            changed += len(hits)
            new_rows = rewrite(rows, hits)
            bucket_id = (split.partition, split.bucket)
            first = next_seq.get(bucket_id, 0)
            written = (
                []
                if new_rows is None
                else write_append_files(table.fileio, schema, split.partition, split.bucket, new_rows, first)
            )
            next_seq[bucket_id] = first + (0 if new_rows is None else new_rows.num_rows)
            tx.adopt(
                [
                    CommitMessage(
                        partition=split.partition,
                        bucket=split.bucket,
                        total_buckets=split.total_buckets,
                        new_files=tuple(written),
                        deleted_files=(f,),
                    )
                ]
            )
    return changed


def _matching(rows: pa.Table, expr: pc.Expression | None) -> np.ndarray:
    """Positions of the rows of ``rows`` matching ``expr`` (every row when None)."""
    if expr is None:
        return np.arange(rows.num_rows)
    if rows.num_rows == 0:
        return np.arange(0)
    positions = rows.append_column("__position", pa.array(np.arange(rows.num_rows)))
    return np.asarray(positions.filter(expr).column("__position").to_numpy())


__all__ = ["delete_rows", "update_rows"]
