"""Append tables (no primary key): creation rules, plain files, commit-order reads, compaction, row-level
operations, overwrite, streams and the table API's upkeep, on real Parquet."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.compaction.job import BucketPlan
from mergetable.metadata.models import CommitMessage, DataFileMeta

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("dt", pa.string())])


def rows(ids: Sequence[int], dt: str = "a") -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], "dt": [dt] * len(ids)}, schema=SCHEMA
    )


def data_files(uri: str) -> list[Path]:
    return sorted(Path(uri).rglob("data-*.parquet"))


def metas(t: mt.Table) -> list[DataFileMeta]:
    return [f for _, _, f in t.files()]


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "events")


# -- creating --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [None, [], ()])
def test_a_table_without_a_primary_key_is_an_append_table(uri: str, key: Sequence[str] | None) -> None:
    t = mt.create_table(uri, SCHEMA, key)
    assert t.primary_key == ()
    assert t.table_schema.is_append_table
    assert t.options["bucket"] == "-1"  # Paimon's bucket-unaware mode
    assert t.options["target-file-size"] == str(256 << 20)
    again = mt.open_table(uri)
    assert again.table_schema.is_append_table and again.options["bucket"] == "-1"


def test_primary_key_may_be_left_out(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, partition_keys=["dt"], options={"target-file-size": "1 mb"})
    assert t.partition_keys == ("dt",)
    assert t.options["target-file-size"] == str(1 << 20)


def test_write_mode_append_only_is_accepted_and_checked(uri: str, tmp_path: Path) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-mode": "append-only"})
    assert t.table_schema.is_append_table
    with pytest.raises(mt.OptionsError, match="write-mode"):
        mt.create_table(str(tmp_path / "k"), SCHEMA, ["id"], options={"write-mode": "append-only"})
    with pytest.raises(mt.OptionsError, match="write-mode"):
        mt.create_table(str(tmp_path / "c"), SCHEMA, options={"write-mode": "change-log"})


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"bucket": "4"}, "bucket-key"),
        ({"bucket-key": "id"}, "bucket-key"),
        ({"bucket": "4", "bucket-key": "nope"}, "bucket-key"),
        ({"bucket": "4", "bucket-key": "dt"}, "bucket-key"),
        ({"merge-engine": "partial-update"}, "merge-engine"),
        ({"changelog-producer": "input"}, "changelog-producer"),
        ({"sequence.field": "id"}, "sequence.field"),
        ({"bucket": "-2"}, "bucket"),
    ],
)
def test_append_options_are_checked(uri: str, options: dict[str, str], culprit: str) -> None:
    with pytest.raises(mt.OptionsError) as info:
        mt.create_table(uri, SCHEMA, partition_keys=["dt"], options=options)
    assert info.value.option == culprit
    assert not mt.table_exists(uri)


def test_bucket_minus_one_is_dynamic_on_a_key_table_and_refuses_a_bucket_key(uri: str) -> None:
    with pytest.raises(mt.OptionsError, match="bucket") as info:
        mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "-1", "bucket-key": "id"})
    assert info.value.option == "bucket-key"
    assert mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "-1"}).table_schema.is_dynamic_bucket


# -- writing -----------------------------------------------------------------------------------------------
def test_files_hold_the_rows_as_given_without_system_columns(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)
    snap = t.write(rows([3, 1, 2, 1])).snapshot
    assert snap is not None and snap.commit_kind.name == "APPEND"
    [path] = data_files(uri)
    assert path.parent.name == "bucket-0"
    stored = pq.read_table(path)
    assert stored.schema.names == ["id", "name", "dt"]  # no _SEQUENCE_NUMBER, no _VALUE_KIND
    assert stored.column("id").to_pylist() == [3, 1, 2, 1]  # not sorted, duplicates kept
    [f] = metas(t)
    assert (f.min_key, f.max_key, f.level) == ((), (), 0)
    assert f.value_stats_cols == ("id", "name", "dt")


def test_files_roll_at_target_file_size(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"target-file-size": "64 kb", "write-only": "true"})
    big = rows(range(300_000))
    t.write(big)
    assert len(data_files(uri)) > 1
    assert t.read().equals(big)
    seq = sorted((f.min_sequence_number, f.max_sequence_number) for f in metas(t))
    assert seq[0][0] == 0 and seq[-1][1] == big.num_rows - 1
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(seq))  # consecutive, in row order


def test_fixed_buckets_hash_by_bucket_key_and_prune(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"bucket": "4", "bucket-key": "id"})
    t.write(rows(range(100)))
    buckets = {s.bucket for s in t.plan()}
    assert len(buckets) == 4
    one = t.plan(filter=[("id", "=", 42)])
    assert len({s.bucket for s in one}) == 1
    assert t.read(filter=[("id", "=", 42)]).column("id").to_pylist() == [42]
    assert sorted(t.read().column("id").to_pylist()) == list(range(100))


def test_bucket_pruning_needs_equality_or_in_on_the_whole_bucket_key(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"bucket": "4", "bucket-key": "id,name", "write-only": "true"})
    t.write(rows(range(100)))
    t.write(rows(range(100, 200)))
    everything = {s.bucket for s in t.plan()}
    assert len(everything) == 4

    def buckets(dnf: list[tuple[str, str, object]]) -> set[int]:
        return {s.bucket for s in t.plan(filter=dnf)}

    assert len(buckets([("id", "=", 42), ("name", "=", "n42")])) == 1
    pair = [("id", "in", [7, 150]), ("name", "in", ["n7", "n150"])]  # IN on both: the combinations' buckets
    assert 1 <= len(buckets(pair)) <= 4
    assert sorted(t.read(filter=pair).column("id").to_pylist()) == [7, 150]
    one_in = [("id", "in", [7]), ("name", "=", "n7")]
    assert buckets(one_in) == buckets([("id", "=", 7), ("name", "=", "n7")])
    assert buckets([("id", "=", 42)]) == everything  # part of the bucket key: no pruning
    assert buckets([("id", ">=", 42), ("name", "=", "n42")]) == everything  # a range: no pruning
    assert t.read(filter=[("id", "=", 42)]).column("name").to_pylist() == ["n42"]
    single = mt.create_table(uri + "-single", SCHEMA, options={"bucket": "8", "bucket-key": "id"})
    single.write(rows(range(200)))
    picked = {s.bucket for s in single.plan(filter=[("id", "in", [3, 77])])}
    assert 1 <= len(picked) <= 2 < len({s.bucket for s in single.plan()})
    assert sorted(single.read(filter=[("id", "in", [3, 77])]).column("id").to_pylist()) == [3, 77]


def test_only_inserts_and_deletes_are_accepted(uri: str, tmp_path: Path) -> None:
    t = mt.create_table(uri, SCHEMA)
    for kind in ("+U", "-U"):
        with pytest.raises(mt.UnsupportedError, match=r"-U/\+U rows need a primary key"):
            t.write(rows([1]), row_kind=kind)
    assert not t.write(rows([1]), row_kind="-D")  # a -D that finds no record is ignored
    with pytest.raises(mt.UnsupportedError, match="target_columns"):
        t.write(pa.table({"id": [1]}), target_columns=["id"])
    assert t.latest_snapshot() is None and not data_files(uri)
    ignoring = mt.create_table(str(tmp_path / "i"), SCHEMA, options={"ignore-delete": "true"})
    ignoring.write(rows([1, 2]), row_kind=pa.array([0, 3], pa.int8()))
    assert ignoring.read().column("id").to_pylist() == [1]


# -- reading -----------------------------------------------------------------------------------------------
def test_reads_keep_commit_order_and_push_filters_into_files(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    for start in (50, 0, 20):
        t.write(rows(range(start, start + 10)))
    ids = t.read().column("id").to_pylist()
    assert ids == [*range(50, 60), *range(10), *range(20, 30)]
    assert t.scan().read_all().column("id").to_pylist() == ids
    assert t.count() == 30
    assert t.count(filter=[("id", ">=", 55)]) == 5
    assert len([f for s in t.plan(filter=[("id", "<", 5)]) for f in s.files]) == 1  # statistics prune files
    picked = t.read(columns=["name"], filter=[("id", "in", [1, 51])])
    assert picked.schema.names == ["name"] and picked.column("name").to_pylist() == ["n51", "n1"]
    assert t.read(filter=[("name", "=", "n25")]).column("id").to_pylist() == [25]


def test_time_travel_tags_rollback_and_history(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)
    for i in range(3):
        t.write(rows([i]))
    t.create_tag("two", 2)
    assert t.read(snapshot_id=1).column("id").to_pylist() == [0]
    assert t.read(tag="two").column("id").to_pylist() == [0, 1]
    t.restore(3)
    assert t.read().column("id").to_pylist() == [0, 1, 2]
    t.rollback_to(2)
    assert t.read().column("id").to_pylist() == [0, 1]
    t.write(rows([7]))
    assert t.read().column("id").to_pylist() == [0, 1, 7]
    assert t.history().column("operation").to_pylist()[0] == "APPEND"
    assert t.system_table("files").num_rows == 3
    assert t.system_table("snapshots").num_rows >= 4


def test_expiration_and_orphan_cleaning_keep_live_files(uri: str) -> None:
    t = mt.create_table(
        uri, SCHEMA, options={"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms", "write-only": "true"}
    )
    for i in range(4):
        t.write(rows([i]))
    t.write(rows([9]), overwrite=True)
    result = t.expire_snapshots()
    assert result.deleted_files  # the overwritten files went with their snapshots
    assert len(data_files(uri)) == 1
    stray = Path(uri) / "bucket-0" / "data-stray.parquet"
    pq.write_table(rows([5]), stray)
    removed = t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000, force=True)  # a cutoff ahead
    assert removed == [str(stray)] and not stray.exists()
    assert t.read().column("id").to_pylist() == [9]


def test_schema_evolution_reads_old_files_by_field_id(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)
    t.write(rows([1]))
    t.alter.add_columns([pa.field("score", pa.float64())])
    t.alter.rename_column("name", "label")
    t = mt.open_table(uri)
    t.write(pa.table({"id": [2], "label": ["two"], "dt": ["a"], "score": [0.5]}))
    assert t.read().to_pydict() == {"id": [1, 2], "label": ["n1", "two"], "dt": ["a", "a"], "score": [None, 0.5]}
    assert t.read(filter=[("label", "=", "n1")]).column("id").to_pylist() == [1]


def test_polars_and_duckdb_scan_an_append_table(uri: str) -> None:
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    from mergetable.interop import PolarsSource, TableDataset

    t = mt.create_table(uri, SCHEMA)
    t.write(rows([1, 2, 2]))
    assert t.to_polars().filter(pl.col("id") == 2).height == 2
    assert t.to_duckdb().fetchall() == [(1, "n1", "a"), (2, "n2", "a"), (2, "n2", "a")]
    for start in (100, 200, 300):  # files with disjoint id ranges, so that statistics prune
        t.write(rows(range(start, start + 10)))
    total = len(t.files())
    assert total == 4
    lazy = PolarsSource(t)
    got = lazy.lazy().filter(pl.col("id").is_between(203, 205)).select("id").collect()
    assert got["id"].to_list() == [203, 204, 205]
    assert lazy.pushed == [[[("id", ">=", 203), ("id", "<=", 205)]]] and lazy.stats.files_read == 1
    dataset = TableDataset(t)
    con = duckdb.connect()
    try:
        assert con.from_arrow(dataset).filter("id >= 300").aggregate("count(*)").fetchall() == [(10,)]
    finally:
        con.close()
    assert dataset.stats.files_read == 1
    t.write(pa.table({"id": [400, None], "name": ["x", None], "dt": ["a", "a"]}, schema=SCHEMA))
    nulls = TableDataset(t)  # a file with nulls is kept for an IS NULL filter, its range notwithstanding
    con = duckdb.connect()
    try:
        assert con.from_arrow(nulls).filter("id is null or name is null").project("dt").fetchall() == [("a",)]
    finally:
        con.close()
    assert nulls.stats.files_read == 1


def test_count_comes_from_file_metadata(uri: str, tmp_path: Path) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true", "deletion-vectors.enabled": "true"})
    for start in (0, 10, 20):
        t.write(rows(range(start, start + 10)))
    t.delete([("id", "in", [3, 4, 15])])  # deletion vectors: counted by their cardinality
    assert t.count() == 27
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in data_files(uri):  # no data file can be read now: the count is the manifests' and vectors'
        path.rename(moved / path.name)
    assert t.count() == 27
    with pytest.raises(mt.DataFileError, match="data-"):  # a read names the missing file
        t.read()


# -- compaction --------------------------------------------------------------------------------------------
def test_inline_compaction_rewrites_small_files_in_commit_order(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)  # compaction.min.file-num = 5
    for i in range(4):
        t.write(rows([10 - i, i]))
    assert len(metas(t)) == 4
    t.write(rows([99]))
    files = metas(t)
    assert len(files) == 1 and files[0].file_source.name == "COMPACT"
    assert t.read().column("id").to_pylist() == [10, 0, 9, 1, 8, 2, 7, 3, 99]
    assert [s.commit_kind.name for s in t.snapshots()][-2:] == ["APPEND", "COMPACT"]


def test_min_file_num_and_full_compaction(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"compaction.min.file-num": "3"})
    t.write(rows([1]))
    t.write(rows([2]))
    assert len(metas(t)) == 2 and t.compact() is None
    t.write(rows([3]))
    assert len(metas(t)) == 1
    t.write(rows([4]))
    snap = t.compact(full=True, progress=False)
    assert snap is not None and len(metas(t)) == 1
    assert t.read().column("id").to_pylist() == [1, 2, 3, 4]


def test_compaction_output_rolls_at_target_file_size(uri: str) -> None:
    rng = np.random.default_rng(1)
    schema = pa.schema([("id", pa.int64()), ("pad", pa.float64())])
    t = mt.create_table(uri, schema, options={"target-file-size": "64 kb", "write-only": "true"})
    for i in range(12):  # random payload: about 25 kb a file, whatever the compression
        t.write(pa.table({"id": np.arange(i * 3000, (i + 1) * 3000), "pad": rng.random(3000)}, schema=schema))
    small = metas(t)
    assert len(small) == 12 and all(f.file_size < 0.7 * (64 << 10) for f in small)
    total = sum(f.file_size for f in small)
    t.compact(full=True, progress=False)
    out = metas(t)
    assert 2 <= len(out) < len(small) and all(f.file_source.name == "COMPACT" for f in out)
    assert all(f.file_size <= 2 * (64 << 10) for f in out) and len(out) <= total // (32 << 10) + 1
    assert t.read().column("id").to_pylist() == list(range(36_000))  # commit order kept across the new files


def test_a_large_file_splits_runs_and_is_left_alone(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"target-file-size": "50 kb", "write-only": "true"})
    t.write(rows(range(3)))
    t.write(rows(range(100, 60_100)))  # one large file (above 0.7 * target)
    for i in range(5):
        t.write(rows([200 + i]))
    large = max(metas(t), key=lambda f: f.file_size)
    assert large.file_size >= 0.7 * 50 * 1024
    before = t.read().column("id").to_pylist()
    t.compact(progress=False)
    names = {f.file_name for f in metas(t)}
    assert large.file_name in names and len(names) == 3  # the small file before it, it, one compacted run
    assert t.read().column("id").to_pylist() == before


def test_a_concurrent_append_never_conflicts_with_compaction(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    for i in range(5):
        t.write(rows([i]))
    job = t.compaction_job()
    run_here = job.executor

    def append_meanwhile(plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        t.write(rows([100]))  # lands between the compaction's plan and its commit
        return run_here(plans)

    job.executor = append_meanwhile
    snap = job.run()
    assert snap is not None and snap.commit_kind.name == "COMPACT"
    assert snap.id == 7  # one attempt: the append (6) did not conflict
    assert t.read().column("id").to_pylist() == [0, 1, 2, 3, 4, 100]
    assert len(metas(t)) == 2


# -- row-level operations and overwrite ----------------------------------------------------------------------
def test_delete_and_update_rewrite_only_touched_files(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, partition_keys=["dt"], options={"write-only": "true"})
    t.write(rows([1, 2, 3], "a"))
    t.write(rows([4, 5, 2], "b"))
    untouched = {f.file_name for f in metas(t)}
    r = t.delete([("id", "=", 2), ("dt", "=", "a")])
    assert r.num_deleted_rows == 1 and r.num_removed_files == 1 and r.snapshot is not None
    assert r.snapshot.commit_kind.name == "OVERWRITE" and r.snapshot.properties["operation"] == "DELETE"
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3, 4, 5]
    assert len(untouched & {f.file_name for f in metas(t)}) == 1  # partition b's file is left alone
    u = t.update([("id", "=", 2)], new_values={"name": "two"})
    assert u.num_updated_rows == 1
    assert t.read(filter=[("dt", "=", "b")]).to_pydict() == {
        "id": [4, 5, 2],
        "name": ["n4", "n5", "two"],
        "dt": ["b", "b", "b"],
    }
    assert not t.delete([("id", "=", 77)])  # nothing matched: no commit
    with pytest.raises(mt.SchemaError, match="'on' is required"):
        t.merge(rows([1]))
    t.delete(None)
    assert t.read().num_rows == 0 and t.count() == 0


def test_overwrite_whole_static_and_dynamic(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, partition_keys=["dt"])
    t.write(pa.concat_tables([rows([1], "a"), rows([2], "b"), rows([3], "c")]))
    t.write(rows([10], "a"), overwrite=True)  # dynamic (default): the partitions in the data
    assert sorted(t.read().column("id").to_pylist()) == [2, 3, 10]
    t.write(rows([20], "b"), overwrite={"dt": "b"})
    assert sorted(t.read().column("id").to_pylist()) == [3, 10, 20]
    static = mt.open_table(uri)
    static.alter.set_options({"dynamic-partition-overwrite": "false"})
    static = mt.open_table(uri)
    static.write(rows([30], "c"), overwrite=True)  # static: the whole table
    assert static.read().column("id").to_pylist() == [30]


def test_delete_recomputes_when_a_compaction_removed_its_files(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    for i in range(5):
        t.write(rows([i, 100 + i]))
    done = threading.Event()
    original = t.plan

    def plan_then_compact(*args: object, **kwargs: object) -> list[mt.Split]:  # type: ignore[name-defined]
        splits = original(*args, **kwargs)  # type: ignore[arg-type]
        if not done.is_set():
            done.set()
            t.compact(full=True, progress=False)  # removes every file the delete planned on
        return splits

    t.plan = plan_then_compact  # type: ignore[method-assign]
    r = t.delete([("id", ">=", 100)])
    assert r.num_deleted_rows == 5
    assert t.read().column("id").to_pylist() == [0, 1, 2, 3, 4]


# -- streams -----------------------------------------------------------------------------------------------
def test_changelog_and_follow_deliver_appended_rows_in_commit_order(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA)
    t.write(rows([5, 1]))
    t.write(rows([3]))
    out = t.changelog(0, 2)
    assert out.column("id").to_pylist() == [5, 1, 3]
    assert set(out.column("_row_kind").to_pylist()) == {"+I"}
    seen = [b.data.column("id").to_pylist() for b in t.follow(consumer_id="c", stop_when_idle=True)]
    assert [i for b in seen for i in b] == [5, 1, 3]
    t.write(rows([8]))
    t.write(rows([0]), overwrite=True)  # overwrites are not streamed (Paimon's default)
    more = [b.data.to_pylist() for b in t.follow(consumer_id="c", stop_when_idle=True)]
    assert [r["id"] for b in more for r in b] == [8]
    with pytest.raises(mt.UnsupportedError, match="append table"):
        t.changelog(1, 3, mode="diff")


def test_streams_keep_each_buckets_rows_in_commit_order(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"bucket": "3", "bucket-key": "id", "write-only": "true"})
    commits = [[9, 4, 7, 1, 3], [8, 2, 6, 5, 0], [14, 11, 13, 10, 12]]
    for ids in commits:
        t.write(rows(ids))
    bucket_of = {i: next(s.bucket for s in t.plan(filter=[("id", "=", i)])) for ids in commits for i in ids}
    assert len(set(bucket_of.values())) == 3
    expected = {b: [i for ids in commits for i in ids if bucket_of[i] == b] for b in range(3)}

    def per_bucket(ids: list[int]) -> dict[int, list[int]]:
        return {b: [i for i in ids if bucket_of[i] == b] for b in range(3)}

    followed = [i for batch in t.follow(stop_when_idle=True) for i in batch.data.column("id").to_pylist()]
    assert per_bucket(followed) == expected
    assert per_bucket(t.changelog(0, 3).column("id").to_pylist()) == expected


# -- the command line --------------------------------------------------------------------------------------
def test_the_cli_counts_compacts_and_describes_an_append_table(uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    from mergetable.cli.main import main

    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    for i in range(3):
        t.write(rows([i, i]))
    assert main(["--json", "count", uri]) == 0
    assert "6" in capsys.readouterr().out
    assert main(["compact", uri, "--full"]) == 0
    capsys.readouterr()
    assert len(metas(mt.open_table(uri))) == 1
    assert mt.open_table(uri).read().column("id").to_pylist() == [0, 0, 1, 1, 2, 2]
    for command in (["history", uri], ["describe", uri], ["schema", uri]):
        assert main(command) == 0, command
    assert "id" in capsys.readouterr().out
    assert main(["tags", uri, "--create", "v1"]) == 0
    assert main(["delete", uri, "--filter", "id=1"]) == 0
    assert mt.open_table(uri).read().column("id").to_pylist() == [0, 0, 2, 2]
    capsys.readouterr()
    assert main(["--json", "read", uri, "--filter", "id>=2", "--columns", "id"]) == 0
    assert capsys.readouterr().out.count('"id": 2') == 2
    assert main(["alter", uri, "add-column", "note", "STRING"]) == 0
    assert mt.open_table(uri).schema.names == ["id", "name", "dt", "note"]
    assert main(["rollback", uri, "--tag", "v1"]) == 0
    assert mt.open_table(uri).read().column("id").to_pylist() == [0, 0, 1, 1, 2, 2]
    for command in (["changelog", uri, "0", "1"], ["files", uri], ["snapshots", uri], ["expire", uri]):
        assert main(command) == 0, command
    assert main(["orphans", uri, "--dry-run"]) == 0


def test_every_file_is_raw_convertible_and_described_as_an_append_table(uri: str) -> None:
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    for i in range(3):
        t.write(rows([i, i]))
    assert t.plan(sections="merged") == []  # Spark reads every file with its own Parquet reader
    assert sum(len(s.files) for s in t.plan(sections="raw")) == 3
    assert "append table (no primary key)" in str(t.describe())


def test_concurrent_appends_and_a_delete_all_land(uri: str) -> None:
    mt.create_table(uri, SCHEMA, options={"write-only": "true", "commit.max-retries": "50"}).write(rows([9999]))
    errors: list[BaseException] = []

    def append(worker: int) -> None:
        t = mt.open_table(uri)
        try:
            for i in range(5):
                t.write(rows([worker * 100 + i]))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    deleted = mt.open_table(uri).delete([("id", "=", 9999)])  # rewrites a file no append touches: no conflict
    for th in threads:
        th.join()
    assert not errors and deleted.num_deleted_rows == 1
    t = mt.open_table(uri)
    got = t.read().column("id").to_pylist()
    assert sorted(got) == sorted(w * 100 + i for w in range(4) for i in range(5))
    for w in range(4):  # each writer's rows in the order it committed them
        assert [i for i in got if i // 100 == w] == [w * 100 + i for i in range(5)]
    assert sorted(s.commit_kind.name for s in t.snapshots()).count("OVERWRITE") == 1
