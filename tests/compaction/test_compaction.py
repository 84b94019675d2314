"""Running compactions: rewrite vs upgrade, dropped retracts, rolling, sequence numbers, commits, conflicts."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from compaction_support import SCHEMA, batch, state

import mergetable as mt
from mergetable.compaction.job import CompactionJob, run_plan
from mergetable.metadata.models import CommitKind, CommitMessage, FileKind, FileSource


def make(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "1", "write-only": "true", **options})


def rows(keys: Sequence[int], v: int = 1, s: str = "x" * 20) -> pa.Table:
    return pa.table({"k": list(keys), "v": [v] * len(keys), "s": [f"{s}{k}" for k in keys]}, schema=SCHEMA)


def names(t: mt.Table) -> dict[str, int]:
    return {f.file_name: f.level for _, _, f in t.files()}


def bucket_files_on_disk(t: mt.Table) -> set[str]:
    return {n for n in os.listdir(t.fileio.join("bucket-0")) if n.endswith(".parquet")}


def test_full_compaction_upgrades_large_files_and_rewrites_overlaps(table_uri: str) -> None:
    t = make(table_uri, **{"target-file-size": "1kb"})
    for start in (0, 200, 400):  # three non-overlapping level-0 files, each above 0.7 * 1kb
        t.write(rows(range(start, start + 200)))
    level0 = names(t)
    assert set(level0.values()) == {0} and len(level0) == 3
    snap = t.compact(full=True)
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert names(t) == dict.fromkeys(level0, 5)  # same files, moved to the top level
    delta = t.delta_entries(snap)
    assert sorted((e.kind, e.file.level) for e in delta) == [(FileKind.ADD, 5)] * 3 + [(FileKind.DELETE, 0)] * 3
    assert t.compact(full=True) is None  # one top-level run: nothing to do

    t.write(rows(range(100, 110), v=2))  # overlaps only the first top-level file
    expected = state(t)
    t.compact(full=True)
    after = names(t)
    assert state(t) == expected
    assert set(after.values()) == {5}
    kept = set(level0) & set(after)
    assert len(kept) == 2  # the two files the new one does not overlap are left as they are
    new = [f for _, _, f in t.files() if f.file_name not in level0]
    assert len(new) == 1 and new[0].file_source is FileSource.COMPACT and new[0].row_count == 200


def test_small_files_are_rewritten_together(table_uri: str) -> None:
    t = make(table_uri)  # 128mb target: every file is small
    for start in (0, 10, 20):
        t.write(rows(range(start, start + 10)))
    t.compact(full=True)
    files = t.files()
    assert len(files) == 1 and files[0][2].level == 5 and files[0][2].row_count == 30
    # a lone small file is upgraded, not rewritten
    u = make(table_uri + "2")
    u.write(rows(range(5)))
    before = names(u)
    u.compact(full=True)
    assert names(u) == dict.fromkeys(before, 5)


def test_file_with_retracts_is_rewritten_on_its_way_to_the_top(table_uri: str) -> None:
    t = make(table_uri, **{"target-file-size": "1kb"})
    data, kinds = batch([("+I", k, 1, "y" * 30) for k in range(300)] + [("-D", 1000, None, None)])
    t.write(data, row_kind=kinds)
    [(_, _, level0)] = t.files()
    assert level0.delete_row_count == 1
    t.compact(full=True)
    [(_, _, top)] = t.files()
    assert top.file_name != level0.file_name and top.level == 5
    assert top.delete_row_count == 0 and top.row_count == 300


def test_minor_compaction_keeps_retracts_above_older_data(table_uri: str) -> None:
    t = make(table_uri, **{"num-sorted-run.compaction-trigger": "2", "num-levels": "6"})
    t.write(rows(range(100_000)))  # sorted keys and similar strings encode small: enough rows to be far bigger
    t.compact(full=True)
    data, kinds = batch([("-D", 5, None, None), ("+I", 7, 9, "n")])
    t.write(data, row_kind=kinds)
    t.write(rows([8], v=3))
    expected = state(t)
    snap = t.compact()  # two small level-0 runs absorb each other, the top level is far bigger: level 4
    assert snap is not None
    levels = sorted(f.level for _, _, f in t.files())
    assert levels == [4, 5]
    mid = next(f for _, _, f in t.files() if f.level == 4)
    assert mid.delete_row_count == 1  # the delete must stay: level 5 still holds key 5
    assert state(t) == expected and 5 not in expected
    t.compact(full=True)
    [(_, _, top)] = t.files()
    assert top.delete_row_count == 0 and state(t) == expected


def test_output_rolls_at_target_file_size_and_keeps_level_ranges_disjoint(table_uri: str) -> None:
    t = make(table_uri, **{"target-file-size": "1kb"})
    n = 300_000
    t.write(pa.table({"k": list(range(n)), "v": [1] * n, "s": ["z"] * n}, schema=SCHEMA))
    t.write(pa.table({"k": list(range(0, n, 2)), "v": [2] * (n // 2), "s": ["w"] * (n // 2)}, schema=SCHEMA))
    t.compact(full=True)
    files = sorted((f for _, _, f in t.files()), key=lambda f: f.min_key)
    assert len(files) > 1 and {f.level for f in files} == {5}
    assert all(a.max_key[0] < b.min_key[0] for a, b in itertools.pairwise(files))
    assert sum(f.row_count for f in files) == n
    got = t.read(filter=[("k", "<", 4)]).sort_by("k")
    assert got.column("v").to_pylist() == [2, 1, 2, 1]


def test_sequence_numbers_are_kept_and_new_writes_still_win(table_uri: str) -> None:
    t = make(table_uri)
    t.write(rows([1, 2], v=1))
    t.write(rows([2, 3], v=2))
    seqs = {f.file_name: (f.min_sequence_number, f.max_sequence_number) for _, _, f in t.files()}
    t.compact(full=True)
    [(_, _, top)] = t.files()
    path = t.path_factory.data_file((), 0, top.file_name)
    kv = pq.read_table(path).to_pydict()
    # each commit's file stored one number for its records: 0 for the first, 1 for the second
    assert dict(zip(kv["k"], kv["_SEQUENCE_NUMBER"], strict=True)) == {1: 0, 2: 1, 3: 1}
    assert (top.min_sequence_number, top.max_sequence_number) == (0, max(hi for _, hi in seqs.values()))
    t.write(rows([1], v=9))
    assert state(t)[1][0] == 9


def _compete(t: mt.Table, first_only: bool = True) -> CompactionJob:
    """A job whose executor lets another compaction commit after the plans were made."""
    other = mt.open_table(t.uri)
    calls = []

    def executor(plans: Sequence[object]) -> list[CommitMessage]:
        calls.append(len(plans))
        if not first_only or len(calls) == 1:
            other.compact(full=True)
            if not first_only:  # leave work behind so that every attempt plans something and loses again
                other.write(rows([1000 + len(calls)]))
        out = [run_plan(t.fileio, t.table_schema, t.merge_function, p) for p in plans]  # type: ignore[arg-type]
        return [m for m in out if not m.is_empty]

    return t.compaction_job(executor=executor)


def test_a_compaction_that_loses_a_race_compacts_again_on_the_new_snapshot(table_uri: str) -> None:
    t = make(table_uri)
    for i in range(4):
        t.write(rows(range(i * 5, i * 5 + 10), v=i))
    t.write(rows([100]))
    expected = state(t)
    job = _compete(t)
    job.run(full=True)
    assert state(t) == expected
    kinds = [s.commit_kind for s in t.snapshots()]
    assert kinds[-2:] == [CommitKind.COMPACT, CommitKind.COMPACT] or kinds[-1] is CommitKind.COMPACT
    referenced = {f.file_name for _, _, f in t.files()}
    # nothing the losing attempt wrote is left behind, other than what older snapshots still use
    assert all(t.fileio.exists(t.path_factory.data_file((), 0, n)) for n in referenced)


def test_a_compaction_that_keeps_losing_fails_without_visible_change(table_uri: str) -> None:
    t = make(table_uri)
    for i in range(4):
        t.write(rows(range(i * 5, i * 5 + 10), v=i))
    on_disk = bucket_files_on_disk(t)
    job = _compete(t, first_only=False)
    with pytest.raises(mt.CommitConflictError, match="gave up after 2 attempts"):
        job.run(max_attempts=2, full=True)
    # the only compactions committed are the competitor's two, and only files some snapshot added are left
    assert [s.commit_kind for s in t.snapshots()].count(CommitKind.COMPACT) == 2
    added = {e.file.file_name for snap in t.snapshots() for e in t.delta_entries(snap)}
    assert bucket_files_on_disk(t) <= on_disk | added


def test_partial_writes_are_compacted_only_where_nothing_older_remains(table_uri: str) -> None:
    t = make(table_uri, **{"force-lookup": "true"})
    t.write(rows(range(10), v=1, s="full"))
    t.compact(full=True)
    t.write(pa.table({"k": [1], "v": [7]}), target_columns=["k", "v"])
    expected = state(t)
    assert expected[1] == (7, "full1")
    t.compact()  # would move level 0 alone to level 4; the partial row forces the whole bucket down
    assert state(t) == expected
    assert {f.level for _, _, f in t.files()} == {5}
    t.write(rows([2], v=5))
    assert state(t)[1] == (7, "full1")


def test_compact_selected_partitions(table_uri: str) -> None:
    schema = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
    t = mt.create_table(table_uri, schema, ["k", "p"], ["p"], options={"bucket": "1", "write-only": "true"})
    for i in range(3):
        t.write(pa.table({"k": [i, i], "p": ["a", "b"], "v": [i, i]}, schema=schema))
    t.compact(full=True, partitions=[{"p": "a"}])
    levels = {(p, f.level) for p, _, f in t.files()}
    assert levels == {(("a",), 5), (("b",), 0)}
    with pytest.raises(mt.SchemaError, match="non-partition"):
        t.compact(partitions=[{"k": 1}])
    assert t.compact(partitions=[{"p": "zzz"}]) is None
    snap = t.compact(full=True)
    assert snap is not None and snap.properties == {"mergetable.full-compaction": "true"}
