"""Reading the rows a row-level operation changes: a snapshot's data in the table's *current* schema.

``Table.read(snapshot_id=…)`` is time travel: it shows a snapshot through the schema it was written with,
as Paimon does. A delete, update or merge reads the snapshot it is based on for a different purpose: to
write records under the current schema. Its conditions and assignments name the current columns (an
added column, a renamed one, a widened type), so the rows are read as a read of the latest snapshot
reads them: each file projected by field id onto the current schema (added columns NULL, renamed ones
under their new name, values cast to the new type, dropped columns gone).

A merge needs only the target rows whose join keys occur in its source: :func:`read_matching` streams the
snapshot a bounded window at a time and keeps those rows only (found by the keys' 64-bit hashes, so a few
extra rows may come along: the join that follows is exact), so the memory of a merge into a large table is
that of the rows it matches, not of the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.hashing import hash_keys
from mergetable.core.predicates import Filters
from mergetable.dml.apply import DmlTable
from mergetable.read.parallel import in_process_key_ranges


def read_target(table: DmlTable, snapshot_id: int, columns: Sequence[str] | None, filter: Filters | None) -> pa.Table:
    """The merged rows of snapshot ``snapshot_id`` matching ``filter``, in the table's current schema."""
    reader = table.split_reader(columns, filter)
    splits = table.plan(filter, key_ranges=in_process_key_ranges(), snapshot_id=snapshot_id)
    parts = list(reader.read_splits(splits, ahead=None))
    if not parts:
        return reader.out_schema.empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def bucket_windows(
    table: DmlTable,
    snapshot_id: int,
    columns: Sequence[str] | None,
    filter: Filters | None,
    ahead: int | None,
    exact: bool = True,
) -> Iterator[tuple[pa.Table, int]]:
    """The merged rows of snapshot ``snapshot_id`` matching ``filter`` (``exact=False``: of the files it does not
    prune), as :meth:`SplitReader.read_splits` gives them (``ahead``: its read-ahead, None: as far as they go), each
    window with the bucket it was read from."""
    reader = table.split_reader(columns, filter if exact else None)
    splits = table.plan(filter, key_ranges=in_process_key_ranges(), snapshot_id=snapshot_id)
    return ((rows, split.bucket) for split, rows in reader.split_windows(splits, ahead=ahead))


def read_target_buckets(
    table: DmlTable, snapshot_id: int, columns: Sequence[str] | None, filter: Filters | None
) -> tuple[pa.Table, np.ndarray | None]:
    """:func:`read_target`'s rows and, on a dynamic-bucket table, the bucket each was read from (int32, else
    None): the writer puts a row whose key it knows the bucket of there without a HASH index lookup."""
    if not dynamic_buckets(table):
        return read_target(table, snapshot_id, columns, filter), None
    parts = list(bucket_windows(table, snapshot_id, columns, filter, None))
    if not parts:
        return table.split_reader(columns, filter).out_schema.empty_table(), np.empty(0, np.int32)
    rows = parts[0][0] if len(parts) == 1 else pa.concat_tables([p for p, _ in parts])
    return rows, np.concatenate([np.full(p.num_rows, b, dtype=np.int32) for p, b in parts])


def dynamic_buckets(table: DmlTable) -> bool:
    """Whether the table places keys by its HASH index (dynamic bucket mode, not cross-partition)."""
    return table.table_options.bucket == -1 and not table.table_schema.is_cross_partition


def join_key(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A floating-point key with one zero and one NaN, so that they match as in Spark (-0.0 = 0.0, NaN = NaN).

    >>> join_key(pa.array([-0.0, float("nan")])).to_pylist()[0]
    0.0
    """
    if not pa.types.is_floating(column.type):
        return column
    nan = pa.scalar(float("nan"), column.type)
    return pc.if_else(pc.is_nan(column), nan, pc.add(column, pa.scalar(0.0, column.type)))  # -0.0 + 0.0 is 0.0


def key_hashes(columns: Sequence[pa.ChunkedArray | pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """The uint64 hash of each row's join key (equal keys, as the merge join compares them, hash alike) and
    whether the row has a key at all (a NULL in any column never matches; its hash is 0).

    Raises:
        SchemaError: a column of a type that has no key hash (the caller joins without hashes then).

    >>> h, valid = key_hashes([pa.array([1, None, 1])])
    >>> bool(h[0] == h[2]), valid.tolist()
    (True, [True, False, True])
    """
    n = len(columns[0])
    valid = np.ones(n, dtype=bool)
    for c in columns:
        if c.null_count:
            valid &= np.asarray(pc.is_valid(c).to_numpy(zero_copy_only=False), dtype=bool)
    if valid.all():
        return hash_keys(columns), valid
    hashes = np.zeros(n, dtype=np.uint64)
    keep = pa.array(valid)
    hashes[valid] = hash_keys([c.filter(keep) for c in columns])
    return hashes, valid


def find_hashes(ordered: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``hashes``: whether it is in ``ordered`` (sorted uint64) and its position there (valid where
    found). The probes are sorted first: a sorted probe walks ``ordered`` once instead of at random.

    >>> found, at = find_hashes(np.array([2, 5, 9], np.uint64), np.array([9, 3, 2], np.uint64))
    >>> found.tolist(), at[found].tolist()
    ([True, False, True], [2, 0])
    """
    at = np.zeros(len(hashes), dtype=np.int64)
    if not len(ordered) or not len(hashes):
        return np.zeros(len(hashes), dtype=bool), at
    probe = np.argsort(hashes)
    at[probe] = np.minimum(np.searchsorted(ordered, hashes[probe]), len(ordered) - 1)
    return ordered[at] == hashes, at


def read_matching(
    table: DmlTable, snapshot_id: int, on: Sequence[str], wanted: np.ndarray, filter: Filters | None
) -> pa.Table:
    """The merged rows of snapshot ``snapshot_id`` (matching ``filter``, which prunes files) whose ``on`` key
    hashes are among ``wanted`` (sorted, distinct), read a bounded window at a time."""
    reader = table.split_reader(None, filter)
    splits = table.plan(filter, key_ranges=in_process_key_ranges(), snapshot_id=snapshot_id)
    kept: list[pa.Table] = []
    for window in reader.read_splits(splits, ahead=1):
        if not len(wanted) or not window.num_rows:
            continue
        hashes, valid = key_hashes([window.column(c) for c in on])
        hit = find_hashes(wanted, hashes)[0] & valid
        if hit.all():
            kept.append(window)
        elif hit.any():
            kept.append(window.filter(pa.array(hit)))
    if not kept:
        return reader.out_schema.empty_table()
    return kept[0] if len(kept) == 1 else pa.concat_tables(kept)


__all__ = [
    "bucket_windows",
    "dynamic_buckets",
    "find_hashes",
    "join_key",
    "key_hashes",
    "read_matching",
    "read_target",
    "read_target_buckets",
]
