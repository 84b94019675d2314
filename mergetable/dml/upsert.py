"""The merge that only upserts: ``when_matched_update_all()`` and/or ``when_not_matched_insert_all()``, without
conditions, joined on the primary key. The most frequent merge is computed without a join:

* each source row is written as it is (cast to the table's types), as ``+U`` when its key is in the target
  and ``+I`` when not (with one of the two clauses only, the other rows are left out);
* whether a key is in the target needs the target's **key columns only**: they are streamed a bounded window
  at a time (files pruned by the source's key values or range) and looked up among the source keys by 64-bit
  hash, each hit confirmed by comparing the key values themselves, so the answer is exact;
* the rows are written a part at a time, so memory holds the source, its hashes and one window.

Where the answer would need more (a NULL or a floating-point key, two source rows of one key, a
partial-update table, which refuses NULLs assigned over values), :func:`upsert_changes` returns None and the
general merge (:mod:`mergetable.dml.merge`) runs instead, with the same result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import SchemaError
from mergetable.core.predicates import Filters
from mergetable.core.rowkind import RowKind
from mergetable.dml.apply import ChangeStream, DmlTable
from mergetable.dml.clauses import MATCHED, NOT_MATCHED, Clause
from mergetable.dml.evaluate import cast_columns
from mergetable.dml.rules import nulls_refused
from mergetable.dml.target import bucket_windows, dynamic_buckets, find_hashes, key_hashes

PART_ROWS = 1 << 19
"""Source rows written at a time."""


def upserts_only(table: DmlTable, on: Sequence[str], clauses: Sequence[Clause[Any]]) -> bool:
    """Whether the merge is an upsert this module computes: on the primary key (not floating point), at most a
    matched update-all and a not-matched insert-all, unconditional, and NULLs may be assigned."""
    schema = table.schema
    if set(on) != set(table.primary_key) or nulls_refused(table.table_options):
        return False
    if any(pa.types.is_floating(schema.field(c).type) for c in on):
        return False
    forms = [(c.kind, c.action) for c in clauses if c.condition is None and c.values is None]
    allowed = {(MATCHED, "update"), (NOT_MATCHED, "insert")}
    return len(forms) == len(clauses) and len(set(forms)) == len(forms) and set(forms) <= allowed


def upsert_changes(
    table: DmlTable,
    snapshot_id: int,
    source: pa.Table,
    keys: list[pa.ChunkedArray],
    on: Sequence[str],
    clauses: Sequence[Clause[Any]],
    prune: Filters | None,
) -> ChangeStream | None:
    """The changes of an upsert (``keys``: the source's ``on`` columns cast to the table's types; ``prune``
    prunes the target's files); None when the source has a NULL or a repeated key (the general merge then)."""
    if any(k.null_count for k in keys):
        return None
    try:
        hashes, _ = key_hashes(keys)
    except SchemaError:
        return None
    order = np.argsort(hashes)
    ordered = hashes[order]
    del hashes
    if ordered.size > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        return None  # a key twice (or a hash collision): the general merge knows which row wins, or refuses
    matched, buckets = _matched(table, snapshot_id, keys, on, order, ordered, prune)
    update = any(c.kind == MATCHED for c in clauses)
    insert = any(c.kind == NOT_MATCHED for c in clauses)
    return _parts(table, source, matched, buckets if dynamic_buckets(table) else None, update, insert)


def _matched(
    table: DmlTable,
    snapshot_id: int,
    keys: list[pa.ChunkedArray],
    on: Sequence[str],
    order: np.ndarray,
    ordered: np.ndarray,
    prune: Filters | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Whether each source row's key is in the target, and the bucket it is in there (int32; -1: not in the target),
    reading the target's key columns a window at a time."""
    matched = np.zeros(len(order), dtype=bool)
    buckets = np.full(len(order), -1, dtype=np.int32)
    if not len(order):
        return matched, buckets
    # ``prune`` prunes files; the rows are looked up exactly below
    for window, bucket in bucket_windows(table, snapshot_id, list(on), prune, 1, exact=False):
        if not window.num_rows:
            continue
        columns = [window.column(c) for c in on]
        hashes, valid = key_hashes(columns)
        found, at = find_hashes(ordered, hashes)
        hit = found & valid
        if not hit.any():
            continue
        rows = order[at[hit]]
        taken = pa.array(rows)
        mask = pa.array(hit)
        same = np.ones(len(rows), dtype=bool)
        for column, key in zip(columns, keys):
            equal = pc.equal(column.filter(mask), key.take(taken))
            same &= np.asarray(pc.fill_null(equal, False).to_numpy(zero_copy_only=False), dtype=bool)
        matched[rows[same]] = True
        buckets[rows[same]] = bucket
    return matched, buckets


def _parts(
    table: DmlTable, source: pa.Table, matched: np.ndarray, buckets: np.ndarray | None, update: bool, insert: bool
) -> ChangeStream:
    """The source a part at a time: ``+U`` where its key is in the target, else ``+I``; each part with its rows'
    buckets in the target (``buckets``, -1: not there; for a dynamic-bucket table's writer) where given."""
    schema = table.schema
    what = "merge (matched: update)" if update else "merge (not matched: insert)"
    for start in range(0, source.num_rows, PART_ROWS):
        rows = source.slice(start, PART_ROWS)
        hit = matched[start : start + PART_ROWS]
        placed = None if buckets is None else buckets[start : start + PART_ROWS]
        kinds = np.where(hit, np.int8(RowKind.UPDATE_AFTER), np.int8(RowKind.INSERT)).astype(np.int8)
        if not (update and insert):
            keep = hit if update else ~hit
            rows, kinds = rows.filter(pa.array(keep)), kinds[keep]
            placed = None if placed is None else placed[keep]
        if rows.num_rows:
            yield cast_columns(rows, schema, what), kinds, placed


__all__ = ["PART_ROWS", "upsert_changes", "upserts_only"]
