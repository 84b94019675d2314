"""``delete``, ``update`` and ``merge`` of an append table (no primary key), and its keyless changelog's ``-D`` rows.

An append table has no key to retract, so each operation finds the stored rows it changes by position in
the live files of the snapshot it reads (:mod:`mergetable.dml.positions`) and commits them as one
``OVERWRITE`` snapshot (its ``operation`` property names the operation): by default every touched file is
rewritten (copy-on-write: matching rows dropped, or replaced by their updated values in place), with
``deletion-vectors.enabled`` the rows are marked in the files' deletion vectors instead and updated rows
appended. Files the filter's partition and column statistics rule out are not read; files without a
matching row are left alone.

* ``delete(filter)`` removes the matching rows; ``update(filter, set)`` assigns values to them.
* ``merge(source, on=...)`` joins the source on the ``on`` columns (required: there is no key) with the
  clauses of :mod:`mergetable.dml.merge`: matched and not-matched-by-source target rows are updated or
  deleted by position, not-matched source rows appended.
* A write's ``-D`` rows (:func:`retract_records`) each remove one stored record equal to it in every column
  (:mod:`mergetable.core.records`): first the ``+I`` rows of the same commit, then the table's rows in commit
  order; a ``-D`` that finds no record left is ignored (as Paimon's keyless changelog drops a retraction of
  a record it does not hold).

The commit checks that every file it removes or marks is still live and that no concurrent commit changed
the vectors of a bucket it writes vectors for: such a conflict makes the operation compute again on the new
snapshot (a few times, then :class:`~mergetable.core.errors.CommitConflictError`, the table unchanged).
Concurrent appends never conflict: they add files and change none.
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
from mergetable.core.dynamic_buckets import distinct_hashes
from mergetable.core.errors import CommitConflictError, SchemaError
from mergetable.core.filters import bind_filters, to_expression
from mergetable.core.predicates import Filters
from mergetable.core.records import match_plan
from mergetable.dml.apply import RECOMPUTE_ATTEMPTS, DmlTable
from mergetable.dml.clauses import NOT_MATCHED_BY_SOURCE, check_clauses
from mergetable.dml.merge import MergeBuilder, _prune
from mergetable.dml.ops import assignments, check_filter, evaluate
from mergetable.dml.positions import Edit, LiveFile, live_files, stage_edits
from mergetable.metadata.models import Snapshot
from mergetable.write.input import split_by_bucket

Counts = tuple[int, int, int]
"""Rows (inserted, updated, deleted) by an operation."""
Stage = Callable[[Snapshot | None, WriteTransaction], Counts | None]
"""Hands a transaction the changes of an operation on a snapshot; None: nothing to change."""


def run_edits(table: DmlTable, operation: str, stage: Stage, source_rows: int = 0) -> CommitResult:
    """Stage the operation on the latest snapshot and commit it, computing again after a conflict."""
    started = time.monotonic_ns()
    conflict: CommitConflictError | None = None
    for _ in range(RECOMPUTE_ATTEMPTS):
        base = table.latest_snapshot()
        with table.writing(properties={OPERATION: operation}) as w:
            counts = stage(base, w)
            if counts is None or not any(counts):
                w.discard()
                return commit_result(operation, None, [], started, source_rows=source_rows)
            try:
                snap = w.commit()
            except CommitConflictError as exc:  # a file it changed was changed meanwhile: compute again
                conflict = exc
                continue
        result = commit_result(operation, snap, w.committed_messages, started, fileio=table.fileio)
        inserted, updated, deleted = counts
        return dataclasses.replace(
            result,
            num_inserted_rows=inserted,
            num_updated_rows=updated,
            num_deleted_rows=deleted,
            num_added_rows=inserted + updated,
            num_source_rows=source_rows,
        )
    raise CommitConflictError(f"{operation.lower()}: {conflict} on each of {RECOMPUTE_ATTEMPTS} attempts; try again")


def delete_rows(table: DmlTable, filter: Filters | None) -> CommitResult:
    """:meth:`mergetable.Table.delete` of an append table (see the module docstring)."""
    filter = check_filter(table, filter, "delete")

    def stage(base: Snapshot | None, tx: WriteTransaction) -> Counts | None:
        if base is None:
            return None
        edits = [Edit(f, _matching(table, f, filter)) for f in live_files(table, base, filter)]
        stage_edits(table, base, edits, tx)
        return 0, 0, sum(len(e.removed) for e in edits)

    return run_edits(table, "DELETE", stage)


def update_rows(
    table: DmlTable, filter: Filters | None, values: Mapping[str, Any], new_values: Mapping[str, Any] | None = None
) -> CommitResult:
    """:meth:`mergetable.Table.update` of an append table: matching rows get the assigned values in place."""
    exprs, sql = assignments(table, values, "update", new_values)
    filter = check_filter(table, filter, "update")
    schema = table.schema
    full = {f.name: exprs.get(f.name, pc.field(f.name)) for f in schema}
    evaluate(schema.empty_table(), full, sql, schema)  # errors before any read

    def stage(base: Snapshot | None, tx: WriteTransaction) -> Counts | None:
        if base is None:
            return None
        edits = []
        for f in live_files(table, base, filter):
            hits = _matching(table, f, filter)
            if len(hits):
                new = evaluate(f.rows.take(pa.array(hits)), full, sql, schema)
                edits.append(Edit(f, np.arange(0), hits, new))
        stage_edits(table, base, edits, tx)
        return 0, sum(len(e.removed) + len(e.replaced if e.replaced is not None else ()) for e in edits), 0

    return run_edits(table, "UPDATE", stage)


def _matching(table: DmlTable, live: LiveFile, filter: Filters | None) -> np.ndarray:
    """Indexes of the rows of ``live`` matching ``filter`` (every row when None)."""
    rows = live.rows
    dnf = bind_filters(filter, table.schema)
    if dnf is None:
        return np.arange(rows.num_rows)
    if rows.num_rows == 0:
        return np.arange(0)
    positions = rows.append_column("__position", pa.array(np.arange(rows.num_rows)))
    return np.asarray(positions.filter(to_expression(dnf, table.schema)).column("__position").to_numpy())


class AppendMergeBuilder(MergeBuilder):
    """:class:`~mergetable.dml.merge.MergeBuilder` of an append table: target rows changed by position."""

    def execute(self, progress: bool | None = None) -> CommitResult:
        """Run the merge as one commit (see :meth:`MergeBuilder.execute`; ``progress`` is not shown here).

        Example:
            >>> import tempfile, pyarrow as pa, mergetable as mt
            >>> events = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("v", pa.string())]))
            >>> _ = events.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
            >>> r = (events.merge({"id": [2, 3], "v": ["x", "c"]}, on="id")
            ...     .when_matched_update_all().when_not_matched_insert_all().execute())
            >>> r.num_target_rows_updated, r.num_target_rows_inserted, sorted(events.read().to_pylist(), key=str)
            (1, 1, [{'id': 1, 'v': 'a'}, {'id': 2, 'v': 'x'}, {'id': 3, 'v': 'c'}])
        """
        check_clauses(self.clauses)
        self.resolve(None, self._table.schema.empty_table(), self.source.slice(0, 0))  # errors first
        return run_edits(self._table, "MERGE", self._stage, self.source.num_rows)

    def _stage(self, base: Snapshot | None, tx: WriteTransaction) -> Counts | None:
        table = self._table
        files: list[LiveFile] = []
        if base is not None:
            by_source = any(c.kind == NOT_MATCHED_BY_SOURCE for c in self.clauses)
            keys = [self.source.column(c).cast(table.schema.field(c).type) for c in self.on]
            files = list(live_files(table, base, None if by_source else _prune(self.on, keys)))
        sizes = np.array([f.rows.num_rows for f in files], dtype=np.int64)
        target = pa.concat_tables([f.rows for f in files]) if files else table.schema.empty_table()
        resolved, ti = self.resolve(base, target, self.source)
        removed: list[np.ndarray] = []
        replaced: list[tuple[np.ndarray, pa.Table]] = []
        counts = [0, 0, 0]
        for clause, position, rows in resolved:
            if clause.action == "insert":
                if rows.num_rows:
                    tx.write(rows)
                counts[0] += rows.num_rows
            elif clause.action == "delete":
                gone = distinct_hashes(np.asarray(ti[position]))
                removed.append(gone)
                counts[2] += len(gone)
            else:
                replaced.append((ti[position], rows))
                counts[1] += rows.num_rows
        if base is not None and (removed or replaced):
            starts = np.concatenate([[0], np.cumsum(sizes)])
            stage_edits(table, base, _per_file(files, starts, removed, replaced), tx)
        return counts[0], counts[1], counts[2]


def _per_file(
    files: list[LiveFile], starts: np.ndarray, removed: list[np.ndarray], replaced: list[tuple[np.ndarray, pa.Table]]
) -> list[Edit]:
    """The edits of each file from target-wide row indexes (``starts``: where each file's rows begin)."""
    gone = np.concatenate(removed) if removed else np.arange(0)
    new_at = np.concatenate([at for at, _ in replaced]) if replaced else np.arange(0)
    new_rows = pa.concat_tables([rows for _, rows in replaced]) if replaced else None
    edits = []
    for i, f in enumerate(files):
        lo, hi = starts[i], starts[i + 1]
        mine = gone[(gone >= lo) & (gone < hi)] - lo
        inside = (new_at >= lo) & (new_at < hi)
        if not len(mine) and not inside.any():
            continue
        rows = None if new_rows is None else new_rows.filter(pa.array(inside))
        edits.append(Edit(f, mine, new_at[inside] - lo, rows))
    return edits


def retract_records(table: DmlTable, tx: WriteTransaction, retracts: pa.Table) -> int:
    """Remove one stored record of the latest snapshot per row of ``retracts`` (a write's ``-D`` rows left once
    they cancelled the write's own ``+I`` rows), staged in ``tx``; the number of rows that found a record."""
    base = table.latest_snapshot()
    if base is None or not retracts.num_rows:
        return 0
    buckets = {(p, b) for p, b, _ in split_by_bucket(retracts, table.table_schema)}
    files = list(live_files(table, base, None, buckets))
    if not files:
        return 0
    hits, _ = match_plan(pa.concat_tables([f.rows for f in files]), retracts)
    sizes = np.array([f.rows.num_rows for f in files], dtype=np.int64)
    stage_edits(table, base, _per_file(files, np.concatenate([[0], np.cumsum(sizes)]), [hits], []), tx)
    return len(hits)


def check_merge_on(on: object) -> None:
    """An append table has no key to join on by default: ``on`` must name the columns."""
    if on is None or (not isinstance(on, str) and not list(on)):  # type: ignore[call-overload]
        raise SchemaError("argument 'on' is required to merge into an append table (it has no primary key)")


__all__ = ["AppendMergeBuilder", "check_merge_on", "delete_rows", "retract_records", "run_edits", "update_rows"]
