"""Dynamic bucket mode (``bucket`` = -1, the default of new primary-key tables): options, placement, the HASH
index files and their upkeep, reads that do not prune by a key's hash, concurrent writers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.core.dynamic_buckets import HASH_INDEX, key_hashes, read_hash_file
from mergetable.core.hashing import bucket_of

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
PSCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def rows(ids: Any, v: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def small(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["id"], options={"dynamic-bucket.target-row-num": "10", **options})


def hash_index(t: mt.Table, snapshot_id: int | None = None) -> dict[tuple[tuple[str | None, ...], int], np.ndarray]:
    """(partition, bucket) → the hashes of its HASH index file, read as raw bytes."""
    snap = t.latest_snapshot() if snapshot_id is None else t.snapshot(snapshot_id)
    from mergetable.commit.index_manifest import IndexManifestIO

    out = {}
    for e in IndexManifestIO(t.fileio).entries(snap):
        if e.index_file.index_type == HASH_INDEX:
            path = t.path_factory.index_file(e.index_file.file_name)
            hashes = read_hash_file(t.fileio.read_bytes(path))
            assert e.index_file.row_count == len(hashes) == len(set(hashes.tolist()))
            assert (e.partition, e.bucket) not in out, "one HASH file per bucket"
            out[(e.partition, e.bucket)] = hashes
    return out


def keys_by_bucket(t: mt.Table, key: str = "id") -> dict[tuple[tuple[str | None, ...], int], set[Any]]:
    """(partition, bucket) → the keys its live data files hold (any row kind)."""
    out: dict[tuple[tuple[str | None, ...], int], set[Any]] = {}
    for e in t._manifests.live_entries(t.latest_snapshot()):
        path = t.path_factory.data_file(e.partition, e.bucket, e.file.file_name)
        ids = pq.read_table(path, columns=[key]).column(key).to_pylist()
        out.setdefault((e.partition, e.bucket), set()).update(ids)
    return out


def assert_one_bucket_per_key(t: mt.Table) -> None:
    where: dict[Any, tuple[Any, int]] = {}
    for (partition, bucket), ids in keys_by_bucket(t).items():
        for k in ids:
            assert where.setdefault((partition, k), (partition, bucket)) == (partition, bucket), k


# -- options ----------------------------------------------------------------------------------------------
def test_a_new_key_table_is_dynamic_and_keeps_an_explicit_bucket(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "a"), SCHEMA, ["id"])
    assert t.options["bucket"] == "-1" and t.table_schema.is_dynamic_bucket
    assert mt.open_table(str(tmp_path / "a")).options["bucket"] == "-1"
    fixed = mt.create_table(str(tmp_path / "b"), SCHEMA, ["id"], options={"bucket": "3"})
    assert fixed.options["bucket"] == "3" and not fixed.table_schema.is_dynamic_bucket
    assert mt.create_table(str(tmp_path / "c"), SCHEMA).options["bucket"] == "-1"  # append: unaware, as before


def test_a_table_whose_schema_lacks_bucket_reads_as_one_fixed_bucket(tmp_path: Path) -> None:
    """Tables created before dynamic buckets stored ``bucket`` = 1; a schema without the key at all (written
    by hand or by an older layout) still means one fixed bucket, never the dynamic mode."""
    uri = str(tmp_path / "t")
    mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "1"})
    path = tmp_path / "t" / "schema" / "schema-0"
    stored = json.loads(path.read_text())
    del stored["options"]["bucket"]
    path.write_text(json.dumps(stored))
    t = mt.open_table(uri)
    assert t.table_schema.table_options.bucket == 1 and not t.table_schema.is_dynamic_bucket
    t.write(rows(range(50)))
    assert {s.bucket for s in t.plan()} == {0} and hash_index(t) == {}
    assert t.count() == 50


def test_the_table_written_by_an_earlier_version_stays_fixed() -> None:
    t = mt.open_table(str(Path(__file__).parent / "data" / "v1-table"))
    assert t.options["bucket"] == "1" and not t.table_schema.is_dynamic_bucket


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"dynamic-bucket.target-row-num": "0"}, "dynamic-bucket.target-row-num"),
        ({"dynamic-bucket.max-buckets": "0"}, "dynamic-bucket.max-buckets"),
        ({"dynamic-bucket.max-buckets": "40000"}, "dynamic-bucket.max-buckets"),
        ({"dynamic-bucket.initial-buckets": "0"}, "dynamic-bucket.initial-buckets"),
        ({"dynamic-bucket.initial-buckets": "4", "dynamic-bucket.max-buckets": "2"}, "dynamic-bucket.initial-buckets"),
        ({"dynamic-bucket.target-row-num": "many"}, "dynamic-bucket.target-row-num"),
        ({"bucket-key": "id"}, "bucket-key"),
    ],
)
def test_bad_dynamic_bucket_options_name_the_option(tmp_path: Path, options: dict[str, str], culprit: str) -> None:
    with pytest.raises(mt.OptionsError) as info:
        mt.create_table(str(tmp_path / "t"), SCHEMA, ["id"], options=options)
    assert info.value.option == culprit


# -- placement ----------------------------------------------------------------------------------------------
def test_new_keys_fill_buckets_to_the_target_and_keys_keep_their_bucket(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"))
    t.write(rows(range(35), "a"))
    counts = sorted(len(ids) for ids in keys_by_bucket(t).values())
    assert counts == [5, 10, 10, 10]
    before = {k: b for (_, b), ids in keys_by_bucket(t).items() for k in ids}
    t.write(rows(range(30, 48), "b"))  # 5 existing keys, 13 new ones
    t.write(rows([1, 2, 40]), row_kind="-D")
    after: dict[int, int] = {}
    for (_, b), ids in keys_by_bucket(t).items():
        for k in ids:
            assert after.setdefault(k, b) == b
    assert all(after[k] == b for k, b in before.items())
    index = hash_index(t)
    assert sorted(len(h) for h in index.values()) == [8, 10, 10, 10, 10]  # deleted keys stay listed
    for (_, b), ids in keys_by_bucket(t).items():
        assert set(index[((), b)].tolist()) == set(key_hashes([pa.array(sorted(ids), pa.int64())]).tolist())
    assert t.read().sort_by("id").column("id").to_pylist() == [k for k in range(48) if k not in (1, 2, 40)]
    assert t.count() == 45
    assert all(e.total_buckets == -1 for e in t._manifests.live_entries(t.latest_snapshot()))


def test_rows_of_one_new_key_in_one_write_share_a_bucket_and_merge(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"), **{"dynamic-bucket.target-row-num": "2"})
    t.write(pa.table({"id": [5, 6, 5, 7, 5, 8], "v": ["a", "b", "c", "d", "e", "f"]}, schema=SCHEMA))
    assert_one_bucket_per_key(t)
    assert dict(zip(*t.read().sort_by("id").to_pydict().values(), strict=True)) == {5: "e", 6: "b", 7: "d", 8: "f"}


def test_max_buckets_spreads_new_keys_over_the_existing_buckets(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"), **{"dynamic-bucket.max-buckets": "3"})
    t.write(rows(range(100)))
    buckets = keys_by_bucket(t)
    assert {b for _, b in buckets} == {0, 1, 2}
    assert sum(len(v) for v in buckets.values()) == 100
    assert_one_bucket_per_key(t)


def test_initial_buckets_fill_several_buckets_at_once(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"), **{"dynamic-bucket.initial-buckets": "4"})
    t.write(rows(range(12)))
    assert len(keys_by_bucket(t)) >= 3  # the 12 keys go to 4 assigners' own buckets, not 10 + 2
    t.write(rows(range(200)))
    counts = [len(v) for v in keys_by_bucket(t).values()]
    assert max(counts) <= 10 and sum(counts) == 200
    assert_one_bucket_per_key(t)


def test_partitions_have_their_own_buckets(tmp_path: Path) -> None:
    t = mt.create_table(
        str(tmp_path / "t"), PSCHEMA, ["dt", "id"], ["dt"], options={"dynamic-bucket.target-row-num": "5"}
    )
    data = pa.table({"dt": ["a"] * 12 + ["b"] * 3, "id": [*range(12), 0, 1, 2], "v": ["x"] * 15}, schema=PSCHEMA)
    t.write(data)
    index = hash_index(t)
    assert sorted(index) == [(("a",), 0), (("a",), 1), (("a",), 2), (("b",), 0)]
    assert t.count() == 15
    t.write(data.slice(0, 4))
    assert t.count() == 15 and sorted(hash_index(t)) == sorted(index)


def test_key_filters_do_not_prune_buckets_by_the_hash(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"))
    t.write(rows(range(40)))
    for k in range(40):
        [b] = bucket_of([pa.array([k], pa.int64())], 4)
        assert t.read(filter=[("id", "==", k)]).column("id").to_pylist() == [k], b
    assert t.count(filter=[("id", "in", [3, 17, 33])]) == 3


# -- upkeep of the index files --------------------------------------------------------------------------
def test_compaction_keeps_the_hash_index_and_overwrite_replaces_it(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"), **{"deletion-vectors.enabled": "true"})
    for i in range(3):
        t.write(rows(range(i * 5, i * 5 + 25), str(i)))
    index = hash_index(t)
    t.compact(full=True)
    assert {k: v.tolist() for k, v in hash_index(t).items()} == {k: v.tolist() for k, v in index.items()}
    t.write(rows([1, 2, 3], "z"))
    assert t.read(filter=[("id", "<", 4)]).sort_by("id").column("v").to_pylist() == ["0", "z", "z", "z"]
    t.write(rows([100, 101]), overwrite=True)
    assert t.read().column("id").to_pylist() in ([100, 101], [101, 100])
    assert_one_bucket_per_key(t)
    assert {k: sorted(v.tolist()) for k, v in hash_index(t).items()} == {
        ((), 0): sorted(key_hashes([pa.array([100, 101], pa.int64())]).tolist())
    }  # the overwritten partition's index is the one of the new rows


def test_overwrite_replaces_the_index_of_a_partition_without_data_files(tmp_path: Path) -> None:
    # with deletion vectors a delete of a key never written leaves no data file, but its hash is placed
    t = small(str(tmp_path / "t"), **{"deletion-vectors.enabled": "true", "dynamic-bucket.target-row-num": "2"})
    t.write(rows([3]), row_kind="-D")
    assert not t.files() and list(hash_index(t)) == [((), 0)]
    t.write(rows([0, 2, 3]), overwrite=True)  # key 3 lands in bucket 1 now: bucket 0's old index is gone
    assert sorted(t.read().column("id").to_pylist()) == [0, 2, 3]
    assert_one_bucket_per_key(t)
    index = hash_index(t)
    assert len(index) == 2
    placed = np.concatenate(list(index.values()))
    assert sorted(placed.tolist()) == sorted(key_hashes([pa.array([0, 2, 3], pa.int64())]).tolist())


def test_rollback_restores_the_hash_index(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"))
    t.write(rows(range(15)))
    first = {k: v.tolist() for k, v in hash_index(t).items()}
    t.write(rows(range(10, 30)))
    t.rollback_to(1)
    assert {k: v.tolist() for k, v in hash_index(t).items()} == first
    t.write(rows(range(10, 30)))
    assert_one_bucket_per_key(t)
    assert t.count() == 30


def test_expiration_and_orphan_cleaning_cover_hash_files(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"))
    for i in range(4):
        t.write(rows(range(i * 8, i * 8 + 12)))
    index_dir = tmp_path / "t" / "index"
    assert len(list(index_dir.iterdir())) > len(hash_index(t))  # replaced files of older snapshots
    (index_dir / "index-stray-0").write_bytes(b"\x00\x00\x00\x01")
    t.expire_snapshots(retain_last=1)
    live = {e["file_name"] for e in t.system_table("table_indexes").to_pylist()}
    assert {p.name for p in index_dir.iterdir()} == live | {"index-stray-0"}
    t.remove_orphan_files(older_than_ms=2**62, force=True)
    assert {p.name for p in index_dir.iterdir()} == live
    assert t.count() == 36


# -- concurrent writers -------------------------------------------------------------------------------------
def _pair_for(t: mt.Table, k: int) -> int:
    """A key whose hash sorts before ``k``'s (so a write of both places it first)."""
    hk = key_hashes([pa.array([k], pa.int64())])[0]
    return next(j for j in range(1000, 2000) if key_hashes([pa.array([j], pa.int64())])[0] < hk)


def test_two_writers_placing_one_new_key_in_two_buckets_cannot_both_land(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"), **{"dynamic-bucket.target-row-num": "1"})
    a, b = t.new_writer(), t.new_writer()
    a.write(rows([7], "a"))  # bucket 0
    b.write(rows([_pair_for(t, 7), 7], "b"))  # the other key takes bucket 0, key 7 bucket 1
    t.commit(a.prepare_commit())
    messages = b.prepare_commit()
    with pytest.raises(mt.BucketAssignmentConflictError, match="write the rows again") as info:
        t.commit(messages)
    assert isinstance(info.value, mt.CommitConflictError)
    assert t.read().to_pydict() == {"id": [7], "v": ["a"]}
    assert_one_bucket_per_key(t)
    assert not any(
        (tmp_path / "t" / "index" / f.file_name).exists() for m in messages for f in m.new_index_files
    )  # the refused commit's files are gone


def test_concurrent_writers_of_other_keys_share_a_bucket(tmp_path: Path) -> None:
    t = small(str(tmp_path / "t"))
    t.write(rows([1]))
    a, b = t.new_writer(), t.new_writer()
    a.write(rows([2, 3], "a"))
    b.write(rows([4, 1], "b"))
    t.commit(a.prepare_commit())
    t.commit(b.prepare_commit())  # both added to bucket 0: the commit unites the two files
    index = hash_index(t)
    assert list(index) == [((), 0)] and len(index[((), 0)]) == 4
    assert t.read().sort_by("id").to_pydict() == {"id": [1, 2, 3, 4], "v": ["b", "a", "a", "b"]}
    assert len(list((tmp_path / "t" / "index").iterdir())) <= 4  # superseded files removed


# -- the rest of the table on several dynamic buckets --------------------------------------------------------
@pytest.mark.parametrize("producer", ["none", "input", "lookup", "full-compaction"])
def test_dml_changelog_time_travel_and_system_tables_on_dynamic_buckets(tmp_path: Path, producer: str) -> None:
    from mergetable.cli.main import main as cli

    uri = str(tmp_path / "t")
    t = small(uri, **{"changelog-producer": producer, "num-sorted-run.compaction-trigger": "2"})
    t.write(rows(range(30), "a"))
    t.write(rows(range(20, 45), "b"))
    assert len(keys_by_bucket(t)) == 5
    t.delete([("id", "<", 5)])
    t.update([("id", ">=", 40)], new_values={"v": "u"})
    src = pa.table({"id": [10, 50, 51], "v": ["m", "n", "n"]}, schema=SCHEMA)
    t.merge(src).when_matched_update_all().when_not_matched_insert_all().execute()
    expected = {k: ("a" if k < 20 else "b") for k in range(5, 45)} | dict.fromkeys(range(40, 45), "u")
    expected |= {10: "m", 50: "n", 51: "n"}
    got = t.read()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == expected
    assert t.count() == len(expected)
    assert cli(["compact", uri, "--full"]) == 0
    t = mt.open_table(uri)
    assert t.read().sort_by("id").equals(got.sort_by("id"))
    assert sum(r["record_count"] for r in t.system_table("buckets").to_pylist()) == len(expected)
    assert t.read(snapshot_id=1).num_rows == 30
    kinds = {r["index_type"] for r in t.system_table("table_indexes").to_pylist()}
    assert kinds == {"HASH"}
    assert len(hash_index(t)) == len({b for _, b in keys_by_bucket(t)})
    assert_one_bucket_per_key(t)
    diff = t.changelog(1, t.latest_snapshot_id(), mode="diff")  # the changes between two snapshots, any bucket
    state = dict.fromkeys(range(30), "a")
    for r in diff.to_pylist():
        if r["_row_kind"] in ("+I", "+U"):
            state[r["id"]] = r["v"]
        else:
            state.pop(r["id"], None)
    assert state == expected


def test_a_writer_holds_the_index_once_and_the_next_write_reads_no_hash_file(tmp_path: Path) -> None:
    """The index a write leaves is kept merged (sorted int64 entries, each a hash above its bucket), the files' hashes
    are not cached beside it, and the next write on the same files takes it without reading them."""
    from mergetable.commit.index_manifest import IndexManifestIO
    from mergetable.core import dynamic_buckets
    from mergetable.write import bucket_assign

    t = small(str(tmp_path / "t"))
    t.write(rows(range(25)))
    t.write(rows(range(20, 40), "y"))  # 5 updates, 15 new keys
    uri = t.fileio.uri
    assert not [k for k in dynamic_buckets._CACHE if k[0] == uri]
    names = frozenset(e.index_file.file_name for e in IndexManifestIO(t.fileio).entries(t.latest_snapshot()))
    entries = bucket_assign._MERGED[(uri, names)]
    assert entries.dtype == np.int64 and len(entries) == 40 and sorted(entries.tolist()) == entries.tolist()
    known, buckets = entries >> 16, entries & 0xFFFF
    index = hash_index(t)
    assert sorted(known.tolist()) == known.tolist() == sorted(np.concatenate(list(index.values())).tolist())
    for (_, b), hashes in index.items():
        assert known[buckets == b].tolist() == hashes.tolist()
    files = {p: p.read_bytes() for p in (tmp_path / "t" / "index").glob("index-*")}
    assert len(names) == 4 and names <= {p.name for p in files}
    for path in files:  # a file read now would be refused as corrupt (not a multiple of 4 bytes)
        path.write_bytes(b"x")
    try:
        t.write(rows(range(35, 45), "z"))
    finally:
        for path, data in files.items():
            path.write_bytes(data)
    got = t.read().sort_by("id").to_pydict()
    assert got["id"] == list(range(45)) and got["v"] == ["x"] * 20 + ["y"] * 15 + ["z"] * 10
    assert sum(len(h) for h in hash_index(t).values()) == 45
