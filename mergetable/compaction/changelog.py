"""Compaction-time changelog producers: ``lookup`` and ``full-compaction``, vectorized over Arrow.

Both compare, per key, a value *before* with the value *after* and emit Paimon's changelog rows:

* ``+I after``           when there was no visible value before and there is one after;
* ``-D before``          when there was one before and none after (the merged result is a retract);
* ``-U before, +U after`` when both exist and differ. With ``changelog-producer.row-deduplicate`` the pair
  is skipped when the values (minus ``…row-deduplicate-ignore-fields``) are equal.

Only keys that took part in a merge are compared (lookup: keys with level-0 records; full-compaction:
keys with records below the top level). When such a key's stored record survives the merge unchanged —
e.g. every new record carried an older ``sequence.field`` value — Paimon still emits ``-U``/``+U`` of it
(unless row-deduplicate); ``first-row`` (and Fluss's ``versioned``) emit nothing then, which is what makes
a ``first-row`` changelog insert-only.

* lookup: before = the merge of the key's records in levels above 0, after = the merge of all its records
  (levels above 0 plus the level-0 files the compaction consumes). Emitted by compactions that include
  level-0 files and write to a level above 0.
* full-compaction: before = the key's record in the top level, after = the merge of all its records.
  Emitted by compactions that write the top level (full compactions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.read.diff import diff_changelog

_ROW = "__mt_row"


def key_set(tables: Sequence[pa.Table], keys: Sequence[str]) -> pa.Table:
    """The distinct keys of some key-value tables, as a table of the key columns."""
    parts = [t.select(list(keys)) for t in tables if t.num_rows]
    if not parts:
        return tables[0].select(list(keys)).slice(0, 0) if tables else pa.table({})
    combined = pa.concat_tables(parts)
    if len(keys) == 1:
        k = keys[0]
        return pa.table({k: pc.unique(combined.column(k).combine_chunks())})
    return combined.group_by(list(keys)).aggregate([])


def only_keys(table: pa.Table, keys: pa.Table) -> pa.Table:
    """The rows of ``table`` whose key is one of the rows of ``keys``."""
    if table.num_rows == 0:
        return table
    names = keys.column_names
    if len(names) == 1:
        mask = pc.is_in(table.column(names[0]), value_set=keys.column(0).combine_chunks())
        return table.filter(mask)
    probe = table.select(names).append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    hits = probe.join(keys, names, join_type="left semi").column(_ROW)
    return table.take(pa.array(np.sort(np.asarray(hits.to_numpy(), dtype=np.int64))))


__all__ = ["diff_changelog", "key_set", "only_keys"]
