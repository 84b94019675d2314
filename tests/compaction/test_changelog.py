"""Changelog producers, hand-checked: none, input, lookup, full-compaction; incremental reads."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from compaction_support import batch, create

import mergetable as mt
from mergetable.compaction import BucketCompactor
from mergetable.compaction.changelog import diff_changelog
from mergetable.metadata.models import CommitKind
from mergetable.read.lookup import FileCache


def write(t: mt.Table, *rows: tuple[str, int, int | None, str | None]) -> None:
    t.write(*batch(list(rows)))


def last_changes(t: mt.Table) -> list[tuple[str, int, Any, Any]]:
    """The changelog of the newest snapshot."""
    latest = t.latest_snapshot()
    assert latest is not None
    return [(r["_row_kind"], r["k"], r["v"], r["s"]) for r in t.changelog(latest.id - 1, latest.id).to_pylist()]


def test_lookup_emits_insert_update_delete_with_previous_values(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", **{"changelog-producer": "lookup"})
    write(t, ("+I", 1, 10, "a"))
    assert last_changes(t) == [("+I", 1, 10, "a")]
    write(t, ("+I", 1, 11, "a"), ("+I", 2, 20, "b"))
    assert last_changes(t) == [("-U", 1, 10, "a"), ("+U", 1, 11, "a"), ("+I", 2, 20, "b")]
    write(t, ("+I", 1, 11, "a"))  # same value again: still an update without row-deduplicate
    assert last_changes(t) == [("-U", 1, 11, "a"), ("+U", 1, 11, "a")]
    write(t, ("-D", 1, None, None), ("-D", 9, None, None))  # deleting an absent key changes nothing
    assert last_changes(t) == [("-D", 1, 11, "a")]
    kinds = [s.commit_kind for s in t.snapshots()]
    assert kinds == [CommitKind.APPEND, CommitKind.COMPACT] * 4  # each commit's level 0 is compacted at once
    assert all(f.level > 0 for _, _, f in t.files())


def test_lookup_row_deduplicate_and_ignored_fields(table_uri: str) -> None:
    t = create(
        table_uri,
        "deduplicate",
        **{
            "changelog-producer": "lookup",
            "changelog-producer.row-deduplicate": "true",
            "changelog-producer.row-deduplicate-ignore-fields": "s",
        },
    )
    write(t, ("+I", 1, 10, "a"))
    write(t, ("+I", 1, 10, "a"))
    assert last_changes(t) == []
    write(t, ("+I", 1, 10, "changed but ignored"))
    assert last_changes(t) == []
    write(t, ("+I", 1, 12, "b"))
    assert last_changes(t) == [("-U", 1, 10, "changed but ignored"), ("+U", 1, 12, "b")]


def test_lookup_with_aggregation_and_first_row(tmp_path: Any) -> None:
    agg = create(str(tmp_path / "agg"), "aggregation", **{"changelog-producer": "lookup"})
    write(agg, ("+I", 1, 5, "a"))
    write(agg, ("+I", 1, 5, None), ("+I", 1, 1, None))
    assert last_changes(agg) == [("-U", 1, 5, "a"), ("+U", 1, 11, "a")]
    write(agg, ("-U", 1, 11, None))
    assert last_changes(agg) == [("-U", 1, 11, "a"), ("+U", 1, 0, "a")]
    first = create(str(tmp_path / "first"), "first-row", **{"changelog-producer": "lookup"})
    write(first, ("+I", 1, 5, "a"))
    write(first, ("+I", 1, 6, "b"), ("+I", 2, 7, "c"))
    write(first, ("+I", 2, 8, "d"))
    assert [r["_row_kind"] for r in first.changelog(0, 6).to_pylist()] == ["+I", "+I"]
    assert first.read().sort_by("k").column("v").to_pylist() == [5, 7]


def test_lookup_after_a_column_is_added_reads_the_upper_levels_with_it(table_uri: str) -> None:
    """The upper-level files lookup compactions keep decoded (``LOOKUP_CACHE``, shared by the process) are kept
    per schema: once a column is added, the next lookup reads them with it, and its changelog is produced."""
    t = create(table_uri, "deduplicate", **{"changelog-producer": "lookup"})
    write(t, ("+I", 1, 10, "a"), ("+I", 2, 20, "b"))
    write(t, ("+I", 1, 11, "a"))  # the lookup decodes the upper levels with the first schema
    t.alter.add_columns(pa.field("n", pa.int32()))
    t = mt.open_table(table_uri)
    t.write(pa.table({"k": [2], "v": [21], "s": ["b"], "n": pa.array([7], pa.int32())}))
    latest = t.latest_snapshot()
    assert latest is not None and latest.commit_kind is CommitKind.COMPACT
    assert t.changelog(latest.id - 1, latest.id).to_pylist() == [
        {"k": 2, "v": 20, "s": "b", "n": None, "_row_kind": "-U"},
        {"k": 2, "v": 21, "s": "b", "n": 7, "_row_kind": "+U"},
    ]
    assert all(f.level > 0 for _, _, f in t.files())


@pytest.mark.parametrize("cached", [True, False])
def test_lookup_compaction_takes_its_own_file_cache_or_none(tmp_path: Any, cached: bool) -> None:
    t = create(
        str(tmp_path / "t"), "deduplicate", **{"changelog-producer": "lookup", "bucket": "1", "write-only": "true"}
    )
    cache = FileCache(64 * 1024 * 1024) if cached else None
    compactor = BucketCompactor(t.fileio, t.table_schema, t.merge_function, lookup_cache=cache)
    write(t, ("+I", 1, 10, "a"), ("+I", 2, 20, "b"))
    [first_file] = [f for _, _, f in t.files()]
    first = compactor.compact((), 0, [first_file])  # not committed: its files are the second's input
    assert first is not None and [f.level for f in first.after] == [5]
    write(t, ("+I", 1, 11, "a"), ("-D", 2, None, None))
    level0 = [f for _, _, f in t.files() if f.file_name != first_file.file_name]
    second = compactor.compact((), 0, [*first.after, *level0])
    assert second is not None and len(second.changelog) == 1
    rows = pq.read_table(t.path_factory.data_file((), 0, second.changelog[0].file_name)).to_pylist()
    assert [(r["_VALUE_KIND"], r["k"], r["v"]) for r in rows] == [(1, 1, 10), (2, 1, 11), (3, 2, 20)]
    assert cache is None or (len(cache) == 1 and cache.size > 0)  # the upper-level file, decoded once


def test_full_compaction_producer_diffs_the_top_level(table_uri: str) -> None:
    t = create(
        table_uri, "deduplicate", **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"}
    )
    write(t, ("+I", 1, 10, "a"), ("+I", 2, 20, "b"))
    assert [s.commit_kind for s in t.snapshots()] == [CommitKind.APPEND]
    write(t, ("+I", 1, 11, "a"))
    assert last_changes(t) == [("+I", 1, 11, "a"), ("+I", 2, 20, "b")]  # intermediate values never show
    assert t.latest_snapshot().properties == {"mergetable.full-compaction": "true"}  # type: ignore[union-attr]
    write(t, ("-D", 2, None, None))
    write(t, ("+I", 1, 12, "a"), ("+I", 3, 30, "c"))
    assert sorted(last_changes(t)) == [("+I", 3, 30, "c"), ("+U", 1, 12, "a"), ("-D", 2, 20, "b"), ("-U", 1, 11, "a")]
    # the dedicated job produces it too
    write(t, ("+I", 3, 31, "c"))
    t.compact(full=True)
    assert last_changes(t) == [("-U", 3, 30, "c"), ("+U", 3, 31, "c")]


def test_full_compaction_producer_with_a_compaction_interval(table_uri: str) -> None:
    t = create(
        table_uri,
        "deduplicate",
        **{"changelog-producer": "full-compaction", "changelog-producer.compaction-interval": "0 s"},
    )
    write(t, ("+I", 1, 10, "a"))
    assert last_changes(t) == [("+I", 1, 10, "a")]
    slow = create(
        table_uri + "2",
        "deduplicate",
        **{"changelog-producer": "full-compaction", "changelog-producer.compaction-interval": "1 h"},
    )
    write(slow, ("+I", 1, 10, "a"))
    write(slow, ("+I", 1, 11, "a"))
    assert [s.commit_kind for s in slow.snapshots()] == [CommitKind.APPEND] * 2  # the hour has not passed


def test_input_producer_keeps_every_record(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", **{"changelog-producer": "input"})
    write(t, ("+I", 1, 10, "a"), ("-U", 1, 10, "a"), ("+U", 1, 11, "a"))
    assert last_changes(t) == [("+I", 1, 10, "a"), ("-U", 1, 10, "a"), ("+U", 1, 11, "a")]
    assert t.read().column("v").to_pylist() == [11]


def test_none_producer_derives_changes_from_each_commit(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", **{"write-only": "true"})
    write(t, ("+I", 1, 10, "a"), ("+I", 2, 20, "b"))
    write(t, ("+U", 1, 11, "a"), ("+I", 1, 12, "a"), ("-D", 2, None, None), ("-U", 3, 3, None))
    assert last_changes(t) == [("+I", 1, 12, "a"), ("-D", 2, None, None), ("-D", 3, 3, None)]
    assert t.changelog(0, 2).num_rows == 5
    # the incremental read is every commit's records as written (unmerged, as Paimon), without the retracts
    assert t.read(incremental_between=(1, 2)).to_pylist() == [{"k": 1, "v": 12, "s": "a"}]
    assert t.read(incremental_between=(0, 2)).sort_by([("k", "ascending"), ("v", "ascending")]).to_pylist() == [
        {"k": 1, "v": 10, "s": "a"},
        {"k": 1, "v": 12, "s": "a"},
        {"k": 2, "v": 20, "s": "b"},
    ]
    t.compact(full=True)  # COMPACT snapshots add nothing to an incremental read
    assert t.read(incremental_between=(2, 3)).num_rows == 0
    assert t.changelog(2, 3).num_rows == 0


def test_incremental_ranges_take_tags_and_are_checked(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", **{"write-only": "true"})
    write(t, ("+I", 1, 10, "a"))
    t.create_tag("start")
    write(t, ("+I", 2, 20, "b"))
    assert t.read(incremental_between=("start", "2")).column("k").to_pylist() == [2]
    assert t.read(incremental_between=(1, 2), filter=[("k", "=", 1)]).num_rows == 0
    splits = t.plan(incremental_between=(0, 2))
    assert sum(len(s.files) for s in splits) == 2 and {s.snapshot_id for s in splits} == {2}
    assert t.changelog(0, 2, columns=["k"]).column_names == ["k", "_row_kind"]
    with pytest.raises(mt.MergeTableError, match="after its end"):
        t.changelog(2, 1)
    with pytest.raises(mt.MergeTableError, match="beyond the latest"):
        t.read(incremental_between=(0, 9))
    with pytest.raises(mt.MergeTableError, match="cannot be combined"):
        t.read(incremental_between=(0, 1), snapshot_id=1)


def test_changelog_files_sit_next_to_the_data_files(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", **{"changelog-producer": "lookup", "bucket": "1"})
    write(t, ("+I", 1, 10, "a"))
    snap = t.latest_snapshot()
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT and snap.changelog_record_count == 1
    [entry] = t.changelog_entries(snap)
    assert entry.file.file_name.startswith("changelog-")
    path = t.path_factory.data_file((), 0, entry.file.file_name)
    assert path.startswith(t.fileio.join("bucket-0")) and pq.read_table(path).num_rows == 1


def test_diff_changelog_on_composite_keys() -> None:
    schema = pa.schema(
        [
            ("a", pa.string()),
            ("b", pa.int32()),
            ("_SEQUENCE_NUMBER", pa.int64()),
            ("_VALUE_KIND", pa.int8()),
            ("v", pa.list_(pa.int64())),
        ]
    )
    before = pa.table(
        {"a": ["x", "x", "y"], "b": [1, 2, 1], "_SEQUENCE_NUMBER": [1, 2, 3], "_VALUE_KIND": [0, 0, 0],
         "v": [[1], [2], [3]]},
        schema=schema,
    )  # fmt: skip
    after = pa.table(
        {"a": ["x", "x", "y", "z"], "b": [1, 2, 1, 0], "_SEQUENCE_NUMBER": [1, 5, 6, 7], "_VALUE_KIND": [0, 0, 3, 0],
         "v": [[1], [2], [3], None]},
        schema=schema,
    )  # fmt: skip
    out = diff_changelog(before, after, ["a", "b"])
    got = list(zip(out.column("a").to_pylist(), out.column("b").to_pylist(), out.column("_VALUE_KIND").to_pylist()))
    assert got == [("x", 2, 1), ("x", 2, 2), ("y", 1, 3), ("z", 0, 0)]
    assert diff_changelog(before, after, ["a", "b"], dedupe=True).num_rows == 2
