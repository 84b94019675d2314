"""Incremental reads follow Paimon's incremental starting scanners: deltas unmerged, OVERWRITE and COMPACT
snapshots skipped, an empty table empty, a range between two tags the diff of the tagged snapshots, and
numeric tag names allowed (a tag of that name wins over a snapshot id)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mergetable as mt


def make(uri: str, **options: str) -> mt.Table:
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    return mt.create_table(uri, schema, ["k"], options={"bucket": "1", **options})


def kv(keys: list[int], values: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.int64())})


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_delta_reads_every_commit_unmerged(table_uri: str) -> None:
    t = make(table_uri, **{"write-only": "true"})
    t.write(kv([1, 2], [10, 20]))
    t.write(kv([1], [11]))
    t.write(kv([1], [12]))
    assert rows(t.changelog(0, 3, mode="delta")) == [(1, 10, "+I"), (1, 11, "+I"), (1, 12, "+I"), (2, 20, "+I")]
    assert rows(t.read(incremental_between=(1, 3))) == [(1, 11), (1, 12)]
    assert rows(t.read(incremental_between=(0, 3))) == [(1, 10), (1, 11), (1, 12), (2, 20)]


def test_delta_skips_overwrite_and_compact_snapshots(table_uri: str) -> None:
    t = make(table_uri, **{"write-only": "true"})
    t.write(kv([1], [10]))
    t.write(kv([2], [20]), overwrite=True)
    t.write(kv([3], [30]))
    t.compact(full=True)
    kinds = [s.commit_kind for s in t.snapshots()]
    assert kinds == ["APPEND", "OVERWRITE", "APPEND", "COMPACT"]
    assert rows(t.read(incremental_between=(0, 4))) == [(1, 10), (3, 30)]
    assert rows(t.changelog(0, 4, mode="delta")) == [(1, 10, "+I"), (3, 30, "+I")]
    assert [s.num_rows for s in [t.read(incremental_between=(1, 2)), t.read(incremental_between=(3, 4))]] == [0, 0]


def test_an_empty_table_has_an_empty_incremental_read(table_uri: str) -> None:
    t = make(table_uri)
    assert t.read(incremental_between=(0, 0)).num_rows == 0
    assert t.read(incremental_between=(0, 1)).num_rows == 0
    assert t.changelog(0, 1).num_rows == 0
    assert t.changelog(0, 1, mode="diff").num_rows == 0


def test_a_range_between_tags_is_their_diff_after_expiration(table_uri: str) -> None:
    t = make(table_uri, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    t.write(kv([1, 2], [10, 20]))
    t.create_tag("a")
    t.write(kv([1], [11]))
    t.delete_keys(kv([2], [0]).select(["k"]))
    t.write(kv([3], [30]))
    t.create_tag("b")
    t.write(kv([4], [40]))
    t.expire_snapshots(retain_last=1, older_than=t.latest_snapshot().time_millis + 1)  # type: ignore[union-attr]
    assert t.snapshots()[0].id > 4  # the snapshots between the tags expired
    assert rows(t.changelog("a", "b")) == [(1, 10, "-U"), (1, 11, "+U"), (2, 20, "-D"), (3, 30, "+I")]
    assert rows(t.changelog("a", "b", mode="delta")) == rows(t.changelog("a", "b", mode="diff"))
    audit = t.audit_log(incremental_between=("a", "b"))
    assert audit.column_names[0] == "rowkind" and audit.num_rows == 4


def test_numeric_tag_names_win_over_snapshot_ids(table_uri: str) -> None:
    t = make(table_uri)
    t.write(kv([1], [10]))
    t.write(kv([2], [20]))
    t.write(kv([3], [30]))
    t.create_tag("2024", snapshot_id=1)
    t.create_tag("3", snapshot_id=2)
    assert t.read(version="3").num_rows == 2  # the tag "3", not snapshot 3
    assert t.read(version="2").num_rows == 2  # no tag "2": snapshot 2
    assert rows(t.changelog("2024", "3")) == [(2, 20, "+I")]
    assert rows(t.read(incremental_between="1,3")) == [(2, 20)]  # tag "3" is snapshot 2
    with pytest.raises(mt.MergeTableError, match="invalid tag name"):
        t.create_tag("../x")


def test_a_plain_read_between_tags_is_their_diff_after_expiration(tmp_path: object) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())])
    t = mt.create_table(f"{tmp_path}/t", schema, ["k"], options={"bucket": "1", "write-only": "true"})
    t.write(pa.table({"k": [1, 2], "v": [10, 20]}))
    t.create_tag("1")  # a numeric tag name: the tag is looked up first
    t.write(pa.table({"k": [1], "v": [11]}))
    t.write(pa.table({"k": [2], "v": [None]}), row_kind="-D")
    t.write(pa.table({"k": [3], "v": [30]}))
    t.create_tag("end")
    t.write(pa.table({"k": [4], "v": [40]}))
    t.expire_snapshots(retain_last=1)
    assert [s.id for s in t.snapshots()] == [5]
    # Paimon's incremental diff read: the end's rows that differ from the start's; deleted keys are not shown
    assert t.read(incremental_between=("1", "end")).sort_by("k").to_pylist() == [{"k": 1, "v": 11}, {"k": 3, "v": 30}]
    assert t.read(columns=["v"], incremental_between=("1", "end"), filter=[("k", "=", 3)]).to_pylist() == [{"v": 30}]
    with pytest.raises(mt.OptionsError, match="between two tags"):
        t.plan(incremental_between=("1", "end"))
