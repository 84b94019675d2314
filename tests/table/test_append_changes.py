"""Append tables changed row by row: the keyless changelog's ``-D`` rows, ``merge``, and deletion vectors
(``delete``/``update``/``merge`` marking rows, reads and scans applying the marks, compaction dropping them,
concurrent commits conflicting and computing again), on real Parquet."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.compaction.job import BucketPlan
from mergetable.core.records import match_plan
from mergetable.dml.positions import Edit, live_files, stage_edits
from mergetable.metadata.models import CommitMessage

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
DV = {"deletion-vectors.enabled": "true"}


def table(ids: Sequence[int | None], names: Sequence[str | None] | None = None) -> pa.Table:
    names = names if names is not None else [f"n{i}" for i in ids]
    return pa.table({"id": list(ids), "name": list(names), "score": [1.0] * len(ids)}, schema=SCHEMA)


def content(t: mt.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r.values()) for r in t.read().to_pylist())


def data_files(uri: str) -> set[str]:
    return {p.name for p in Path(uri).rglob("data-*.parquet")}


@pytest.fixture(params=[{}, DV], ids=["copy-on-write", "deletion-vectors"])
def options(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(request.param)


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "events")


# -- the keyless changelog -------------------------------------------------------------------------------------
def test_a_minus_d_row_removes_one_equal_record(uri: str, options: dict[str, str]) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **options})
    t.write(table([1, 2, 2, 2, None], ["a", "b", "b", "b", None]))
    t.write(table([3], ["c"]))
    r = t.write(table([2, 2, None, 3, 9], ["b", "b", None, "x", "z"]), row_kind="-D")
    assert r.snapshot is not None and r.snapshot.commit_kind.name == "OVERWRITE"
    # two of the three (2, "b") copies, the all-NULL-but-score record; (3, "x") and (9, "z") match nothing
    assert content(t) == Counter({(1, "a", 1.0): 1, (2, "b", 1.0): 1, (3, "c", 1.0): 1})
    assert t.count() == 3


def test_inserts_and_deletes_of_one_write_cancel_first(uri: str, options: dict[str, str]) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **options})
    t.write(table([1], ["a"]))
    before = data_files(uri)
    kinds = ["+I", "+I", "-D", "-D"]
    r = t.write(table([5, 6, 5, 5], ["e", "f", "e", "e"]), row_kind=kinds)  # the 2nd -D of (5, e) finds none
    assert content(t) == Counter({(1, "a", 1.0): 1, (6, "f", 1.0): 1})
    assert r.snapshot is not None and r.snapshot.commit_kind.name == "APPEND"  # nothing stored was touched
    assert before <= data_files(uri)


def test_a_minus_d_row_cancels_an_insert_the_writer_already_spilled(uri: str, options: dict[str, str]) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-buffer-size": "1 kb", "write-only": "true", **options})
    t.write(table([7], ["stored"]))
    with t.writing() as w:
        for start in range(0, 300, 100):  # each batch spills past the 1 KB buffer into files of this write
            w.write(table(list(range(start, start + 100))))
        w.write(table([5, 150, 150, 7, 7], ["n5", "n150", "n150", "stored", "stored"]), row_kind="-D")
    got = sorted(t.read().column("id").to_pylist())
    assert got == [i for i in range(300) if i not in (5, 150)]  # (7, stored) found one copy; the 2nd is ignored
    assert len(data_files(uri)) >= len(t.files())


def test_floats_match_as_spark_compares_them_and_structs_as_a_whole(uri: str) -> None:
    schema = pa.schema([("x", pa.float64()), ("s", pa.struct([("a", pa.int32()), ("b", pa.string())]))])
    t = mt.create_table(uri, schema)
    stored = pa.table({"x": [0.0, float("nan"), 1.5], "s": [{"a": 1, "b": None}, None, {"a": 2, "b": "q"}]}, schema)
    t.write(stored)
    gone = pa.table({"x": [-0.0, float("nan"), 1.5], "s": [{"a": 1, "b": None}, None, {"a": 2, "b": "r"}]}, schema)
    t.write(gone, row_kind="-D")
    assert t.read().to_pylist() == [{"x": 1.5, "s": {"a": 2, "b": "q"}}]


def test_update_kinds_are_refused_and_lists_cannot_be_matched(uri: str, tmp_path: Path) -> None:
    t = mt.create_table(uri, SCHEMA)
    with pytest.raises(mt.UnsupportedError, match=r"-U/\+U rows need a primary key"):
        t.write(table([1, 1]), row_kind=["-U", "+U"])
    listed = mt.create_table(str(tmp_path / "l"), pa.schema([("tags", pa.list_(pa.string()))]))
    listed.write(pa.table({"tags": [["a"]]}))
    with pytest.raises(mt.UnsupportedError, match="column 'tags'"):
        listed.write(pa.table({"tags": [["a"]]}), row_kind="-D")
    assert listed.read().num_rows == 1


def test_a_bare_writer_and_an_overwrite_refuse_minus_d_rows(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)
    t.write(table([1]))
    w = t.new_writer()
    w.write(table([1]), row_kind="-D")
    with pytest.raises(mt.UnsupportedError, match=r"Table.write"):
        w.prepare_commit()
    with pytest.raises(mt.UnsupportedError, match="overwrite"):
        t.write(table([1]), row_kind="-D", overwrite=True)
    assert t.read().num_rows == 1


def test_minus_d_rows_go_to_their_bucket(uri: str, options: dict[str, str]) -> None:
    t = mt.create_table(uri, SCHEMA, options={"bucket": "3", "bucket-key": "id", **options})
    t.write(table(list(range(30))))
    t.write(table([4, 17, 17]), row_kind="-D")
    assert sorted(t.read().column("id").to_pylist()) == [i for i in range(30) if i not in (4, 17)]


def test_matching_is_a_multiset_difference() -> None:
    stored = pa.table({"a": [1, 1, 2, None, 1]})
    hits, missing = match_plan(stored, pa.table({"a": [1, 1, None, 7]}))
    assert hits.tolist() == [0, 1, 3] and missing == 1


# -- merge -------------------------------------------------------------------------------------------------
def test_merge_against_a_list_oracle(uri: str, options: dict[str, str]) -> None:
    t = mt.create_table(uri, SCHEMA, options=options)
    t.write(table([1, 2, 2, 3, 4], ["a", "b", "b2", "c", "d"]))
    t.write(table([5], ["e"]))
    source = pa.table({"id": [2, 3, 6, 7], "name": ["B", "drop", "F", None]})
    r = (
        t.merge(source, on="id")
        .when_matched_delete(condition=pc.field("source.name") == "drop")
        .when_matched_update({"name": "upper(target.name) || '!'"})  # a SQL string over the joined row
        .when_not_matched_insert({"id": pc.field("source.id"), "name": pc.field("source.name")})
        .when_not_matched_by_source_delete(condition=pc.field("target.id") == 5)
        .execute()
    )
    oracle = [(1, "a"), (2, "B2!"), (2, "B!"), (4, "d"), (6, "F"), (7, None)]
    got = Counter((row["id"], row["name"]) for row in t.read().to_pylist())
    assert got == Counter(oracle)
    assert (r.num_target_rows_updated, r.num_target_rows_inserted, r.num_target_rows_deleted) == (2, 2, 2)
    assert r.snapshot is not None and r.snapshot.properties["operation"] == "MERGE"
    assert t.count() == len(oracle)


def test_merge_into_an_empty_append_table_inserts(uri: str, options: dict[str, str]) -> None:
    t = mt.create_table(uri, SCHEMA, options=options)
    t.merge(table([1, 2]), on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert sorted(t.read().column("id").to_pylist()) == [1, 2]


def test_merge_refuses_a_target_row_matched_twice(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)
    t.write(table([1]))
    with pytest.raises(mt.MergeError, match="several source rows"):
        t.merge(table([1, 1]), on="id").when_matched_update_all().execute()
    with pytest.raises(mt.SchemaError, match="'on' is required"):
        t.merge(table([1]))
    assert t.read().to_pylist() == [{"id": 1, "name": "n1", "score": 1.0}]


# -- deletion vectors --------------------------------------------------------------------------------------
def test_deletes_mark_rows_and_every_read_applies_the_marks(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **DV})
    t.write(table(list(range(10))))
    files = data_files(uri)
    r = t.delete([("id", "<", 3)])
    assert r.num_deleted_rows == 3 and data_files(uri) == files  # no file written again
    [vector] = t.deletion_vectors().values()
    assert list(vector) == [0, 1, 2]
    t.update([("id", "=", 5)], new_values={"name": "five"})
    assert list(next(iter(t.deletion_vectors().values()))) == [0, 1, 2, 5]
    expected = [*range(3, 10)]
    assert sorted(t.read().column("id").to_pylist()) == expected
    assert t.count() == 7 and t.count([("id", ">=", 5)]) == 5
    assert sorted(t.to_polars()["id"].to_list()) == expected
    assert sorted(t.to_polars(lazy=True).filter(pl_col("id") > 6).collect()["id"].to_list()) == [7, 8, 9]
    rel = t.to_duckdb()
    assert sorted(x for (x,) in rel.filter("id >= 5").project("id").fetchall()) == [5, 6, 7, 8, 9]
    assert t.read(filter=[("id", "=", 5)]).column("name").to_pylist() == ["five"]
    assert t.read(snapshot_id=1).num_rows == 10  # time travel: the vectors of snapshot 1 (none)
    indexes = t.system_table("table_indexes")
    assert indexes.num_rows == 1


def pl_col(name: str) -> Any:
    import polars as pl

    return pl.col(name)


def test_a_file_whose_every_row_is_marked_is_removed(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **DV})
    t.write(table([1, 2]))
    t.write(table([3]))
    t.delete([("id", "<=", 2)])
    assert len(data_files(uri)) == 2 and len(t.files()) == 1 and not t.deletion_vectors()
    assert t.read().column("id").to_pylist() == [3]


def test_compaction_rewrites_files_with_many_marked_rows(uri: str) -> None:
    opts = {"write-only": "true", "compaction.delete-ratio-threshold": "0.5", **DV}
    t = mt.create_table(uri, SCHEMA, options=opts)
    t.write(table(list(range(10))))
    t.write(table(list(range(10, 20))))
    t.delete([("id", "in", [0, 1, 2, 10, 11, 12, 13, 14, 15])])  # 30% of one file, 60% of the other
    assert t.compact(progress=False) is not None
    names = {f.file_name for _, _, f in t.files()}
    marked = {Path(p).name for p in t.deletion_vectors()}
    assert len(names) == 2 and len(marked) == 1 and marked <= names  # the 60% file rewritten, its vector gone
    assert sorted(t.read().column("id").to_pylist()) == [*range(3, 10), *range(16, 20)]
    t.compact(full=True, progress=False)
    assert not t.deletion_vectors() and len(t.files()) == 1
    assert sorted(t.read().column("id").to_pylist()) == [*range(3, 10), *range(16, 20)]


def test_a_delete_computes_again_after_a_compaction_removed_its_files(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **DV})
    t.write(table([1, 2]))
    t.write(table([3, 4]))
    base = t.latest_snapshot()
    assert base is not None
    with t.writing() as w:
        edits = [Edit(f, pc.indices_nonzero(pc.equal(f.rows["id"], 2)).to_numpy()) for f in live_files(t, base)]
        stage_edits(t, base, edits, w)
        t.compact(full=True, progress=False)  # rewrites the file the vector marks
        with pytest.raises(mt.CommitConflictError, match="no longer live"):
            w.commit()
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3, 4]
    assert t.delete([("id", "=", 2)]).num_deleted_rows == 1  # on the new snapshot
    assert sorted(t.read().column("id").to_pylist()) == [1, 3, 4]


def test_a_compaction_recompacts_after_a_concurrent_delete_marked_its_inputs(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **DV})
    for i in range(5):
        t.write(table([i]))
    job = t.compaction_job()
    run_here = job.executor
    calls = []

    def delete_meanwhile(plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        messages = run_here(plans)
        if not calls:
            t.delete([("id", "=", 3)])  # marks a row of a file this compaction just rewrote
        calls.append(len(plans))
        return messages

    job.executor = delete_meanwhile
    snap = job.run(full=True)
    assert snap is not None and len(calls) == 2  # the first result was dropped and the bucket compacted again
    assert sorted(t.read().column("id").to_pylist()) == [0, 1, 2, 4]
    assert not t.deletion_vectors() and len(t.files()) == 1


def test_two_deletes_of_one_bucket_do_not_lose_marks(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **DV})
    t.write(table([1, 2, 3]))
    base = t.latest_snapshot()
    assert base is not None
    with t.writing() as w:
        stage_edits(t, base, [Edit(f, pc.indices_nonzero(pc.equal(f.rows["id"], 1)).to_numpy()) for f in
                              live_files(t, base)], w)  # fmt: skip
        t.delete([("id", "=", 3)])  # writes the bucket's first index file meanwhile
        with pytest.raises(mt.CommitConflictError, match="concurrent"):
            w.commit()
    assert sorted(t.read().column("id").to_pylist()) == [1, 2]


def test_restore_and_rollback_bring_back_the_marked_rows(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", **DV})
    t.write(table([1, 2, 3]))
    t.delete([("id", "=", 2)])
    t.write(table([4]))
    t.delete([("id", "=", 4)])  # the second file loses its only row: dropped
    assert sorted(t.read().column("id").to_pylist()) == [1, 3]
    restored = t.restore(1)
    assert restored is not None and sorted(t.read().column("id").to_pylist()) == [1, 2, 3]
    assert not t.deletion_vectors()
    t.restore(2)
    assert sorted(t.read().column("id").to_pylist()) == [1, 3] and t.count() == 2
    t.rollback_to(1)
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3] and t.count() == 3


def test_expiration_and_orphan_cleaning_cover_the_index_files(uri: str) -> None:
    opts = {"write-only": "true", "snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms", **DV}
    t = mt.create_table(uri, SCHEMA, options=opts)
    t.write(table(list(range(10))))
    index_dir = Path(uri) / "index"
    for i in range(3):  # each delete replaces the bucket's index file
        t.delete([("id", "=", i)])
    assert len(list(index_dir.iterdir())) >= 1
    t.expire_snapshots()
    live = {e["file_name"] for e in t.system_table("table_indexes").to_pylist()}
    assert len(live) == 1 and {p.name for p in index_dir.iterdir()} == live  # the replaced ones went
    stray = index_dir / "index-00000000-0000-0000-0000-000000000000-0"
    stray.write_bytes(b"\x01")
    removed = t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000, force=True)
    assert removed == [str(stray)] and {p.name for p in index_dir.iterdir()} == live
    assert sorted(t.read().column("id").to_pylist()) == list(range(3, 10)) and t.count() == 7
