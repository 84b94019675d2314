"""System tables from Python: Paimon's column names and types, values that agree with the table, time travel."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.core.errors import SnapshotNotFoundError, UnsupportedError
from mergetable.core.read_options import iso_utc
from mergetable.read.system_tables import SCHEMAS, SYSTEM_TABLES

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])
TS = pa.timestamp("ms")

# Paimon's columns (SnapshotsTable, SchemasTable, ... TABLE_TYPE), in order
PAIMON_COLUMNS = {
    "snapshots": "snapshot_id schema_id commit_user commit_identifier commit_kind commit_time base_manifest_list "
    "delta_manifest_list changelog_manifest_list total_record_count delta_record_count changelog_record_count "
    "watermark next_row_id operation writer_version",
    "schemas": "schema_id fields partition_keys primary_keys options comment update_time",
    "options": "key value",
    "files": "partition bucket file_path file_format schema_id level record_count file_size_in_bytes min_key max_key "
    "null_value_counts min_value_stats max_value_stats min_sequence_number max_sequence_number creation_time "
    "deleteRowCount file_source first_row_id write_cols",
    "manifests": "file_name file_size num_added_files num_deleted_files schema_id min_partition_stats "
    "max_partition_stats min_row_id max_row_id",
    "tags": "tag_name snapshot_id schema_id commit_time record_count create_time time_retained",
    "consumers": "consumer_id next_snapshot_id",
    "partitions": "partition record_count file_size_in_bytes file_count last_update_time created_at created_by "
    "updated_by options total_buckets done deleted_record_count",
    "buckets": "partition bucket record_count file_size_in_bytes file_count last_update_time",
    "table_indexes": "partition bucket index_type file_name file_size row_count dv_ranges row_range_start "
    "row_range_end index_field_id index_field_name",
}


@pytest.fixture
def table(table_uri: str) -> mt.Table:
    t = mt.create_table(table_uri, SCHEMA, ["id", "dt"], ["dt"], {"bucket": "2"}, comment="orders")
    t.write(pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": [1.0, None, 3.0]}, schema=SCHEMA))
    t.write(pa.table({"id": [1, 4], "dt": ["a", "b"], "v": [10.0, 4.0]}, schema=SCHEMA))
    t.create_tag("first", snapshot_id=1)
    return t


def test_every_system_table_has_paimons_columns(table: mt.Table) -> None:
    assert set(SYSTEM_TABLES) == set(PAIMON_COLUMNS)
    for name, columns in PAIMON_COLUMNS.items():
        result = table.system_table(name)
        assert result.schema.names == columns.split(), name
        assert result.schema == SCHEMAS[name], name


def test_paimon_types(table: mt.Table) -> None:
    files = table.system_table("files").schema
    assert files.field("bucket").type == pa.int32() and files.field("level").type == pa.int32()
    assert files.field("record_count").type == pa.int64() and files.field("creation_time").type == TS
    assert files.field("write_cols").type == pa.list_(pa.string())
    assert not files.field("file_path").nullable and files.field("partition").nullable
    snaps = table.system_table("snapshots").schema
    assert snaps.field("commit_time").type == TS and snaps.field("snapshot_id").type == pa.int64()
    assert table.system_table("partitions").schema.field("done").type == pa.bool_()


def test_values_agree_with_the_table(table: mt.Table) -> None:
    snaps = table.system_table("snapshots").to_pylist()
    assert [s["snapshot_id"] for s in snaps] == [s.id for s in table.snapshots()]
    assert [s["total_record_count"] for s in snaps] == [s.total_record_count for s in table.snapshots()]
    assert snaps[0]["commit_kind"] == "APPEND"
    schemas = table.system_table("schemas").to_pylist()
    assert len(schemas) == 1 and schemas[0]["comment"] == "orders"
    assert json.loads(schemas[0]["primary_keys"]) == ["id", "dt"]
    assert json.loads(schemas[0]["partition_keys"]) == ["dt"]
    assert [f["name"] for f in json.loads(schemas[0]["fields"])] == ["id", "dt", "v"]
    options = dict(zip(*table.system_table("options").to_pydict().values()))
    assert options == table.options

    files = table.system_table("files")
    live = table.files()
    assert files.num_rows == len(live)
    assert sorted(p.rsplit("/", 1)[-1] for p in files.column("file_path").to_pylist()) == sorted(
        f.file_name for _, _, f in live
    )
    assert all(os.path.exists(p) for p in files.column("file_path").to_pylist())
    assert sum(files.column("record_count").to_pylist()) == sum(f.row_count for _, _, f in live)
    assert set(files.column("partition").to_pylist()) == {"{a}", "{b}"}
    row = next(r for r in files.to_pylist() if r["partition"] == "{a}" and r["record_count"] == 2)
    assert row["null_value_counts"] == "{id=0, dt=0, v=1}"
    assert row["min_value_stats"] == "{id=1, dt=a, v=1.0}" and row["min_key"] == "[1]"
    assert row["file_format"] == "parquet" and row["file_source"] == "APPEND"

    parts = table.system_table("partitions").to_pylist()
    assert [p["partition"] for p in parts] == ["dt=a", "dt=b"]
    assert sum(p["file_count"] for p in parts) == len(live)
    assert all(p["total_buckets"] == 2 for p in parts)
    buckets = table.system_table("buckets").to_pylist()
    assert sum(b["record_count"] for b in buckets) == files.column("record_count").to_numpy().sum()
    assert [(b["partition"], b["bucket"]) for b in buckets] == sorted((b["partition"], b["bucket"]) for b in buckets)

    manifests = table.system_table("manifests").to_pylist()
    assert sum(m["num_added_files"] for m in manifests) - sum(m["num_deleted_files"] for m in manifests) == len(live)
    tags = table.system_table("$tags").to_pylist()
    assert [(t["tag_name"], t["snapshot_id"], t["record_count"]) for t in tags] == [("first", 1, 3)]
    assert tags[0]["time_retained"] is None and tags[0]["create_time"] is not None
    assert table.system_table("consumers").num_rows == 0


def test_consumers_table_reads_consumer_progress(table: mt.Table) -> None:
    table.fileio.write_bytes(table.fileio.join("consumer", "consumer-app"), b'{"nextSnapshot": 2}')
    assert table.system_table("consumers").to_pylist() == [{"consumer_id": "app", "next_snapshot_id": 2}]


def test_time_travel_where_paimon_allows_it(table: mt.Table) -> None:
    assert table.system_table("files", snapshot_id=1).num_rows == len(table.files(snapshot_id=1))
    assert table.system_table("files", tag="first").num_rows == len(table.files(snapshot_id=1))
    at_1 = table.system_table("partitions", snapshot_id=1).to_pylist()
    assert sum(p["record_count"] for p in at_1) == 3
    assert table.system_table("buckets", snapshot_id=1).num_rows <= table.system_table("buckets").num_rows
    assert len(table.system_table("manifests", snapshot_id=1)) >= 1
    ts = table.snapshot(1).time_millis
    assert table.system_table("files", timestamp_ms=ts).num_rows == len(table.files(snapshot_id=1))
    iso = iso_utc(ts)  # every spelling Table.read takes: ISO timestamps, versions (a tag, else a snapshot id)
    assert table.system_table("files", timestamp_ms=iso).num_rows == len(table.files(snapshot_id=1))
    assert table.system_table("files", version="first").num_rows == len(table.files(snapshot_id=1))
    assert table.system_table("files", version=1).num_rows == len(table.files(snapshot_id=1))
    with pytest.raises(mt.OptionsError, match="at most one"):
        table.system_table("files", snapshot_id=1, tag="first")
    with pytest.raises(UnsupportedError, match="'snapshots' has no time travel"):
        table.system_table("snapshots", snapshot_id=1)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 9"):
        table.system_table("files", snapshot_id=9)
    with pytest.raises(UnsupportedError, match=r"unknown system table 'nope'.*snapshots"):
        table.system_table("nope")


def test_an_empty_table_has_empty_system_tables(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id", "dt"], ["dt"])
    for name in SYSTEM_TABLES:
        result = t.system_table(name)
        assert result.schema == SCHEMAS[name]
        assert result.num_rows == {"schemas": 1, "options": len(t.options)}.get(name, 0)


BUCKET_MODES = {
    "fixed": (["id"], {"bucket": "2"}, {"DELETION_VECTORS"}),
    "dynamic": (["id"], {"bucket": "-1", "dynamic-bucket.target-row-num": "5"}, {"HASH", "DELETION_VECTORS"}),
    "postpone": (["id"], {"bucket": "-2", "write-only": "true"}, set()),
    "append": (None, {}, {"DELETION_VECTORS"}),
    "append-fixed": (None, {"bucket": "2", "bucket-key": "id"}, {"DELETION_VECTORS"}),
}


@pytest.mark.parametrize("mode", list(BUCKET_MODES))
def test_buckets_and_table_indexes_in_every_bucket_mode(tmp_path: os.PathLike[str], mode: str) -> None:
    key, options, index_types = BUCKET_MODES[mode]
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64())])
    if mode != "postpone":  # deletion vectors: not with postpone buckets
        options = {**options, "deletion-vectors.enabled": "true"}
    t = mt.create_table(str(tmp_path), schema, key, options=options)
    t.write(pa.table({"id": range(12), "v": range(12)}, schema=schema))
    if mode == "postpone":
        w = t.new_writer()  # staged under bucket -2
        w.write(pa.table({"id": [20, 21], "v": [1, 2]}, schema=schema))
        t.commit(w.prepare_commit())
    else:
        t.delete([("id", "in", [1, 2, 7])])

    def agrees() -> None:
        per_bucket: dict[int, list[int]] = {}
        for _, bucket, f in t.files():
            per_bucket.setdefault(bucket, []).append(f.row_count)
        rows = t.system_table("buckets").to_pylist()
        assert {r["bucket"]: (r["record_count"], r["file_count"]) for r in rows} == {
            b: (sum(counts), len(counts)) for b, counts in per_bucket.items()
        }
        assert {r["partition"] for r in rows} == {"{}"}
        live = {f.file_name for _, _, f in t.files()}
        indexes = t.system_table("table_indexes").to_pylist()
        assert {r["index_type"] for r in indexes} == index_types
        for r in indexes:
            assert os.path.exists(os.path.join(str(tmp_path), "index", r["file_name"])), r
            if r["index_type"] == "HASH":  # one per data bucket, listing at least its live keys
                assert r["bucket"] in per_bucket and r["row_count"] >= 1
            else:
                assert r["row_count"] == len(r["dv_ranges"]) and {d["f0"] for d in r["dv_ranges"]} <= live
        if "HASH" in index_types:
            assert {r["bucket"] for r in indexes if r["index_type"] == "HASH"} == set(per_bucket)
            assert 9 <= sum(r["row_count"] for r in indexes if r["index_type"] == "HASH") <= 12
        if "DELETION_VECTORS" in index_types:
            assert sum(d["_CARDINALITY"] for r in indexes for d in r["dv_ranges"]) == 3
            assert t.count() == 9 and sorted(t.read().column("id").to_pylist()) == [0, *range(3, 7), *range(8, 12)]

    agrees()
    if mode == "postpone":
        assert -2 in {r["bucket"] for r in t.system_table("buckets").to_pylist()}
        t.compact()  # the staged rows get a bucket
        assert -2 not in {r["bucket"] for r in t.system_table("buckets").to_pylist()}
        assert t.count() == 14
        agrees()
