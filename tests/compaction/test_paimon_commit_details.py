"""Paimon details of commits and tags: ``commit.force-compact``, first-row tables compacting level 0 at each
commit, ``changelog-producer=lookup`` refusing ``full-compaction.delta-commits``, ``$snapshots``
``changelog_record_count`` 0 without changelog, and a tag created on an expired snapshot another tag holds."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def make(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["k"], options={"bucket": "1", **options})


def kv(keys: list[int], value: int) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([value] * len(keys), pa.int64())})


def levels(t: mt.Table) -> list[int]:
    return sorted(f.level for _, _, f in t.files())


def test_commit_force_compact_compacts_level0_at_each_commit(tmp_path: object) -> None:
    plain = make(f"{tmp_path}/plain")
    forced = make(f"{tmp_path}/forced", **{"commit.force-compact": "true"})
    for t in (plain, forced):
        t.write(kv([1, 2], 1))
        t.write(kv([2, 3], 2))
    assert levels(plain) == [0, 0]  # below the compaction trigger
    assert 0 not in levels(forced) and forced.read().sort_by("k").column("v").to_pylist() == [1, 2, 2]
    assert forced.options["commit.force-compact"] == "true"


def test_first_row_tables_compact_level0_after_each_commit(table_uri: str) -> None:
    t = make(table_uri, **{"merge-engine": "first-row"})
    t.write(kv([1, 2], 1))
    assert 0 not in levels(t)
    t.write(kv([2, 3], 2))
    assert 0 not in levels(t)
    assert t.read().sort_by("k").column("v").to_pylist() == [1, 1, 2]


def test_lookup_producer_refuses_full_compaction_delta_commits(tmp_path: object) -> None:
    both = {"changelog-producer": "lookup", "full-compaction.delta-commits": "2"}
    with pytest.raises(mt.OptionsError, match=r"full-compaction\.delta-commits.*lookup"):
        make(f"{tmp_path}/a", **both)
    t = make(f"{tmp_path}/b", **{"changelog-producer": "lookup"})
    with pytest.raises(mt.OptionsError, match=r"full-compaction\.delta-commits.*lookup"):
        t.alter.set_options({"full-compaction.delta-commits": "2"})
    make(f"{tmp_path}/c", **{**both, "changelog-producer": "full-compaction"})


def test_snapshots_changelog_record_count_is_zero_without_changelog(table_uri: str) -> None:
    t = make(table_uri)
    t.write(kv([1], 1))
    assert t.system_table("snapshots").column("changelog_record_count").to_pylist() == [0]


def test_a_tag_on_an_expired_snapshot_another_tag_holds(table_uri: str) -> None:
    t = make(table_uri, **{"snapshot.num-retained.min": "1", "write-only": "true"})
    t.write(kv([1], 1))
    t.create_tag("first", snapshot_id=1)
    t.write(kv([2], 2))
    t.expire_snapshots(retain_last=1, older_than=t.latest_snapshot().time_millis + 1)  # type: ignore[union-attr]
    with pytest.raises(mt.SnapshotNotFoundError):
        t.snapshot(1)
    assert t.create_tag("again", snapshot_id=1).id == 1
    t.delete_tag("first")
    t.expire_snapshots(retain_last=1, older_than=t.latest_snapshot().time_millis + 1)  # type: ignore[union-attr]
    assert t.read(tag="again").to_pylist() == [{"k": 1, "v": 1}]
    t.write(kv([3], 3))
    t.expire_snapshots(retain_last=1, older_than=t.latest_snapshot().time_millis + 1)  # type: ignore[union-attr]
    with pytest.raises(mt.SnapshotNotFoundError):
        t.create_tag("gone", snapshot_id=2)
