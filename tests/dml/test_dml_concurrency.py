"""A row-level operation computed from snapshot S never clobbers a concurrent commit to the rows it changes: a
data commit landing on the same buckets between its read and its commit makes it compute again (like
deltalake's retry), and repeated conflicts fail with ``CommitConflictError``, the operation not applied.

The concurrent commit is made by a second ``Table`` object (its own commit, through the real protocol) at
the moment the operation has read its snapshot, the one interleaving that exposes a lost update."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.core.errors import CommitConflictError
from mergetable.core.hashing import bucket_of
from mergetable.read.scan import Split

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


class RacedTable(mt.Table):
    """A table where another writer commits right after each of the first ``races`` reads (an operation's
    read plans the files of the snapshot it computes from, then reads them)."""

    races = 0
    reads = 0
    concurrent: Any = None

    def plan(self, *args: Any, **kwargs: Any) -> list[Split]:
        out = super().plan(*args, **kwargs)
        type(self).reads += 1
        if type(self).races > 0:
            type(self).races -= 1
            type(self).concurrent()
        return out


def _raced(uri: str, races: int, concurrent: Any) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "1"})
    t.write(pa.table({"id": [1, 2], "v": [1, 2]}))
    RacedTable.races, RacedTable.reads, RacedTable.concurrent = races, 0, concurrent
    return RacedTable(t.fileio, t.table_schema)


def test_an_update_recomputes_over_a_concurrent_write(table_uri: str) -> None:
    other = mt.open_table
    t = _raced(table_uri, 1, lambda: other(table_uri).write(pa.table({"id": [1], "v": [100]})))
    t.update([("v", "<", 5)], {"v": pc.field("v") + 10})
    assert RacedTable.reads == 2  # computed again on the snapshot with the concurrent write
    assert t.read().to_pydict() == {"id": [1, 2], "v": [100, 12]}  # 100 kept, not overwritten by 11


def test_a_delete_sees_a_row_written_meanwhile(table_uri: str) -> None:
    t = _raced(table_uri, 1, lambda: mt.open_table(table_uri).write(pa.table({"id": [3], "v": [3]})))
    t.delete([("v", ">=", 2)])
    assert t.read().to_pydict() == {"id": [1], "v": [1]}  # id 3, written meanwhile, is deleted too


def test_an_insert_only_merge_recomputes_over_a_concurrent_write_of_its_key(table_uri: str) -> None:
    t = _raced(table_uri, 1, lambda: mt.open_table(table_uri).write(pa.table({"id": [3], "v": [3]})))
    t.merge({"id": [3, 4], "v": [30, 40]}).when_not_matched_insert_all().execute()  # the upsert path, streamed
    assert RacedTable.reads == 2
    assert t.read().to_pydict() == {"id": [1, 2, 3, 4], "v": [1, 2, 3, 40]}  # id 3 is matched now: not inserted


def test_repeated_conflicts_fail_and_change_nothing(table_uri: str) -> None:
    counter = iter(range(1000, 2000))
    t = _raced(table_uri, 10, lambda: mt.open_table(table_uri).write(pa.table({"id": [1], "v": [next(counter)]})))
    with pytest.raises(CommitConflictError, match="bucket 0"):
        t.merge({"id": [1, 9], "v": [0, 9]}).when_matched_update_all().when_not_matched_insert_all().execute()
    rows = t.read().to_pydict()
    assert 9 not in rows["id"] and rows["v"][0] >= 1000  # the merge applied nothing
    assert all(s.properties is None or "operation" not in s.properties for s in t.snapshots())


def test_a_concurrent_compaction_is_no_conflict(table_uri: str) -> None:
    t = _raced(table_uri, 1, lambda: mt.open_table(table_uri).compact(full=True))
    t.update(set={"v": 0})
    assert RacedTable.reads == 1 and t.read().to_pydict() == {"id": [1, 2], "v": [0, 0]}


def test_a_write_to_another_bucket_is_no_conflict_write_serializable(table_uri: str) -> None:
    """Delta's WriteSerializable: the delete commits after a concurrent write to a bucket it does not write,
    without computing again, and the result is that of the delete *then* the write (serial order differs from
    commit order): the row written meanwhile matches the filter and is kept."""
    t = mt.create_table(table_uri, SCHEMA, ["id"], options={"bucket": "2"})
    buckets = bucket_of([pa.array(range(64), pa.int64())], 2, ("id",))
    mine = [i for i in range(64) if buckets[i] == 0][:2]
    other = next(i for i in range(64) if buckets[i] == 1)
    t.write({"id": mine, "v": [1, 5]})
    concurrent = lambda: mt.open_table(table_uri).write({"id": [other], "v": [7]})  # noqa: E731
    RacedTable.races, RacedTable.reads, RacedTable.concurrent = 1, 0, concurrent
    RacedTable(t.fileio, t.table_schema).delete([("v", ">=", 2)])
    assert RacedTable.reads == 1  # committed on its first computation
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == sorted(
        [{"id": mine[0], "v": 1}, {"id": other, "v": 7}], key=lambda r: r["id"]
    )
    assert [s.properties.get("operation") if s.properties else None for s in t.snapshots()] == [None, None, "DELETE"]
