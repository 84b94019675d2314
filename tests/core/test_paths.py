"""The path factory names every file of a table, and a real table holds no file it did not name."""

from __future__ import annotations

import pyarrow as pa

import mergetable as mt
from mergetable.core.paths import PathFactory, is_temp_name, temp_path


def test_data_files_live_in_partition_and_bucket_directories() -> None:
    pf = PathFactory("/root/t", ["dt", "region"], "__NULL__")
    assert pf.data_file(("2024-01-01", None), 3, "data-x.parquet") == (
        "/root/t/dt=2024-01-01/region=__NULL__/bucket-3/data-x.parquet"
    )
    assert pf.bucket_dir(("a/b", "c"), 0) == "/root/t/dt=a%2Fb/region=c/bucket-0"
    assert PathFactory("/root/t").bucket_dir((), 2) == "/root/t/bucket-2"


def test_metadata_names_round_trip() -> None:
    pf = PathFactory("s3-bucket/w/t")
    assert pf.snapshot_file(7) == "s3-bucket/w/t/snapshot/snapshot-7"
    assert pf.snapshot_id(pf.snapshot_file(7).rsplit("/", 1)[-1]) == 7
    assert pf.schema_id(pf.schema_file(3).rsplit("/", 1)[-1]) == 3
    assert pf.tag_name(pf.tag_file("v1.0").rsplit("/", 1)[-1]) == "v1.0"
    assert pf.snapshot_id("LATEST") is None and pf.schema_id("schema-x") is None and pf.tag_name("x") is None
    assert pf.latest_hint == "s3-bucket/w/t/snapshot/LATEST"
    assert pf.consumer_file("c1") == "s3-bucket/w/t/consumer/consumer-c1"
    assert pf.new_manifest_name().startswith("manifest-") and not pf.new_manifest_name().startswith("manifest-list-")
    assert pf.new_manifest_list_name().startswith("manifest-list-")
    assert pf.new_data_file_name("changelog-").endswith("-0.parquet")


def test_temp_files_are_hidden_unique_siblings() -> None:
    a, b = temp_path("/t/snapshot/LATEST"), temp_path("/t/snapshot/LATEST")
    assert a != b and a.startswith("/t/snapshot/.LATEST.") and is_temp_name(a.rsplit("/", 1)[-1])


def test_every_file_of_a_table_is_named_by_its_factory(tmp_path: object) -> None:
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64())])
    t = mt.create_table(str(tmp_path), schema, ["dt", "id"], ["dt"], {"bucket": "2", "changelog-producer": "input"})
    t.write(pa.table({"dt": ["a", "a/b", "b"], "id": [1, 2, 3], "v": [1, 2, 3]}))
    t.write(pa.table({"dt": ["a"], "id": [1], "v": [9]}))
    t.create_tag("v1")
    pf = t.path_factory
    expected = {pf.schema_file(0), pf.latest_hint, pf.tag_file("v1")}
    for snap in t.snapshots():
        expected.add(pf.snapshot_file(snap.id))
        for lst in (snap.base_manifest_list, snap.delta_manifest_list, snap.changelog_manifest_list):
            if lst is not None:
                expected.add(pf.manifest_file(lst))
        for e in (*t.delta_entries(snap), *t.changelog_entries(snap)):
            expected.add(pf.data_file(e.partition, e.bucket, e.file.file_name))
    on_disk = {p for p, _ in t.fileio.walk_files(t.fileio.root)}
    in_manifest_dir = {p for p in on_disk if p.startswith(pf.manifest_dir + "/")}
    assert on_disk - in_manifest_dir == {p for p in expected if not p.startswith(pf.manifest_dir + "/")}
    assert {p for p in expected if p.startswith(pf.manifest_dir + "/")} <= in_manifest_dir
    assert pf.bucket_dir(("a/b",), 0).endswith("/dt=a%2Fb/bucket-0")
