"""Behaviour of the table API: upserts, deletes, row kinds, sequence fields, overwrite, time travel, tags."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.commit.manifests import ManifestIO

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64()), ("s", pa.string())])


def make(uri: str, **opts: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["id"], options={"bucket": "4", **opts})


def data(ids: list[int], v: float = 1.0, dt: str = "a") -> pa.Table:
    return pa.table(
        {"id": ids, "dt": [dt] * len(ids), "v": [v + i for i in ids], "s": [f"s{i}" for i in ids]}, schema=SCHEMA
    )


def as_dict(t: pa.Table) -> dict[int, dict[str, object]]:
    return {r["id"]: r for r in t.to_pylist()}


def test_upsert_last_write_wins_and_delete(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data([1, 2, 3], 1.0))
    t.write(data([2, 3, 4], 10.0))
    t.delete_keys(pa.table({"id": [3]}))
    got = as_dict(t.read())
    assert sorted(got) == [1, 2, 4]
    assert got[2]["v"] == 12.0 and got[1]["v"] == 2.0
    assert [s.id for s in t.snapshots()] == [1, 2, 3]


def test_within_one_write_input_order_wins(table_uri: str) -> None:
    t = make(table_uri)
    batch = pa.table({"id": [1, 1, 1], "dt": ["a"] * 3, "v": [1.0, 2.0, 3.0], "s": ["x", "y", "z"]}, schema=SCHEMA)
    t.write(batch)
    assert t.read().column("v").to_pylist() == [3.0]


def test_row_kinds_per_row(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data([1, 2]))
    t.write(data([1, 2, 3]), row_kind=["-U", "+U", "-D"])
    # -U as the newest record of key 1 removes it; +U upserts 2; -D of a missing key is a no-op.
    assert sorted(as_dict(t.read())) == [2]


def test_ignore_delete(table_uri: str) -> None:
    t = make(table_uri, **{"ignore-delete": "true"})
    t.write(data([1, 2]))
    t.write(data([1]), row_kind="-D")  # written retracts are dropped; delete_keys refuses (tests/dml)
    assert sorted(as_dict(t.read())) == [1, 2]


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_sequence_field_orders_versions(table_uri: str, order: str) -> None:
    t = make(table_uri, **{"sequence.field": "v", "sequence.field.sort-order": order})
    t.write(pa.table({"id": [1, 1], "dt": ["a", "a"], "v": [5.0, 3.0], "s": ["hi", "lo"]}, schema=SCHEMA))
    t.write(pa.table({"id": [1], "dt": ["a"], "v": [4.0], "s": ["mid"]}, schema=SCHEMA))
    t.write(pa.table({"id": [1], "dt": ["a"], "v": [None], "s": ["null"]}, schema=SCHEMA))
    expected = "hi" if order == "ascending" else "lo"
    assert t.read().column("s").to_pylist() == [expected]


def test_rowkind_field_column(table_uri: str) -> None:
    schema = SCHEMA.append(pa.field("op", pa.string()))
    t = mt.create_table(table_uri, schema, primary_key=["id"], options={"rowkind.field": "op"})
    t.write(pa.table({"id": [1, 2], "dt": ["a", "a"], "v": [1.0, 2.0], "s": ["x", "y"], "op": ["+I", "+I"]}))
    t.write(pa.table({"id": [1], "dt": ["a"], "v": [1.0], "s": ["x"], "op": ["-D"]}))
    assert t.read().column("id").to_pylist() == [2]


def test_time_travel_by_id_timestamp_and_tag(table_uri: str) -> None:
    t = make(table_uri)
    s1 = t.write(data([1]))
    time.sleep(0.01)
    s2 = t.write(data([2]))
    assert s1 is not None and s2 is not None
    assert t.read(snapshot_id=1).column("id").to_pylist() == [1]
    assert t.read(timestamp_ms=s1.time_millis).column("id").to_pylist() == [1]
    assert sorted(t.read(timestamp_ms=s2.time_millis + 1000).column("id").to_pylist()) == [1, 2]
    with pytest.raises(mt.SnapshotNotFoundError):
        t.read(timestamp_ms=s1.time_millis - 10_000)
    with pytest.raises(mt.SnapshotNotFoundError):
        t.read(snapshot_id=99)
    t.create_tag("first", snapshot_id=1)
    assert t.read(tag="first").column("id").to_pylist() == [1]
    assert list(t.tags()) == ["first"]
    with pytest.raises(mt.MergeTableError):
        t.create_tag("first")
    t.delete_tag("first")
    with pytest.raises(mt.SnapshotNotFoundError):
        t.read(tag="first")


def test_partitions_and_dynamic_overwrite(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"], options={"bucket": "2"})
    t.write(pa.concat_tables([data([1, 2], dt="a"), data([3], dt="b")]))
    t.write(data([9], dt="a"), overwrite=True)
    assert sorted(t.read().column("id").to_pylist()) == [3, 9]
    assert t.latest_snapshot().commit_kind.value == "OVERWRITE"  # type: ignore[union-attr]
    t.write(data([5], dt="b"), overwrite={"dt": "b"})
    assert sorted(t.read().column("id").to_pylist()) == [5, 9]
    # the same key in two partitions is two rows
    t.write(data([5], dt="a"))
    assert sorted(t.read().column("id").to_pylist()) == [5, 5, 9]
    assert t.read(filter=[("dt", "=", "b")]).column("id").to_pylist() == [5]
    with pytest.raises(mt.SchemaError):
        t.write(data([1], dt="a"), overwrite={"dt": "b"})


def test_whole_table_overwrite_when_dynamic_off(table_uri: str) -> None:
    t = mt.create_table(
        table_uri,
        SCHEMA,
        primary_key=["id", "dt"],
        partition_keys=["dt"],
        options={"dynamic-partition-overwrite": "false"},
    )
    t.write(pa.concat_tables([data([1], dt="a"), data([2], dt="b")]))
    t.write(data([3], dt="a"), overwrite=True)
    assert t.read().column("id").to_pylist() == [3]


def test_filters_never_resurrect_old_versions(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data([1, 2, 3], 100.0))  # v = 101, 102, 103
    t.write(data([1], 0.0))  # v = 1 for key 1
    # an old version of key 1 matches v > 50, but the current one does not
    assert sorted(t.read(filter=[("v", ">", 50.0)]).column("id").to_pylist()) == [2, 3]
    assert t.read(filter=[("id", "=", 1)]).column("v").to_pylist() == [1.0]
    assert sorted(t.read(filter=[[("id", "=", 1)], [("id", "in", [3, 7])]]).column("id").to_pylist()) == [1, 3]
    assert t.read(filter=[("id", ">", 2), ("s", "!=", "s3")]).num_rows == 0


def test_projection_and_scan_batches(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data(list(range(1000))))
    t.write(data(list(range(500, 1500)), 7.0))
    proj = t.read(columns=["v"], filter=[("id", "<", 10)])
    assert proj.schema.names == ["v"] and proj.num_rows == 10
    reader = t.scan(columns=["id", "s"])
    total = sum(b.num_rows for b in reader)
    assert total == 1500
    with pytest.raises(mt.SchemaError):
        t.read(columns=["nope"])


def test_write_buffer_bounds_memory_with_several_level0_files(table_uri: str) -> None:
    opts = {"bucket": "1", "write-buffer-size": "64kb", "target-file-size": "32kb", "write-only": "true"}
    t = make(table_uri, **opts, **{"write-buffer-spillable": "false"})  # each spill stays a run of its own
    t.write(data(list(range(20_000))))
    files = t.files()
    assert len(files) > 3
    assert all(f.level == 0 for _, _, f in files)
    assert t.read().num_rows == 20_000


def test_memory_filesystem(memory_uri: str) -> None:
    t = make(memory_uri)
    t.write(data([1, 2]))
    t.write(data([2], 5.0))
    assert as_dict(mt.open_table(memory_uri).read())[2]["v"] == 7.0


def test_manifests_are_merged_so_planning_stays_flat(table_uri: str) -> None:
    t = make(table_uri, **{"manifest.merge-min-count": "5", "write-only": "true"})
    for i in range(20):
        t.write(data([i]))
    snap = t.latest_snapshot()
    assert snap is not None
    metas = ManifestIO(t.fileio).data_manifests(snap)
    assert len(metas) <= 6
    assert sorted(t.read().column("id").to_pylist()) == list(range(20))
    assert snap.total_record_count == 20


def test_empty_write_makes_no_snapshot(table_uri: str) -> None:
    t = make(table_uri)
    assert t.write(data([])).snapshot is None
    assert t.snapshots() == []
    assert t.read().num_rows == 0


def test_expiration_keeps_tagged_files(table_uri: str) -> None:
    t = make(
        table_uri,
        **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2", "bucket": "1", "write-only": "true"},
    )
    for i in range(5):
        t.write(data([1], float(i)))
    t.create_tag("keep", snapshot_id=2)
    result = t.expire_snapshots()
    assert result.expired_snapshots == [1, 2, 3]
    assert [s.id for s in t.snapshots()] == [4, 5]
    assert t.read(tag="keep").column("v").to_pylist() == [2.0]
    assert t.read().column("v").to_pylist() == [5.0]
    with pytest.raises(mt.SnapshotNotFoundError):
        t.read(snapshot_id=1)


def test_orphan_files_removed(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data([1, 2]))
    orphan = t.fileio.join("bucket-0", "data-orphan-0.parquet")
    t.fileio.write_bytes(orphan, b"junk")
    assert t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 1000, dry_run=True, force=True) == [orphan]
    assert t.fileio.exists(orphan)
    t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 1000, force=True)
    assert not t.fileio.exists(orphan)
    assert t.read().num_rows == 2


def test_point_lookup_reads_one_bucket(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data(list(range(1000))))
    splits = t.plan(filter=[("id", "=", 42)])
    assert len(splits) == 1
    assert pc.sum(t.read(filter=[("id", "=", 42)]).column("v")).as_py() == 43.0


def test_partial_write_keeps_other_columns(table_uri: str) -> None:
    t = make(table_uri)
    t.write(data([1, 2]))
    t.write(pa.table({"id": [1], "s": ["patched"]}), target_columns=["id", "s"])
    got = as_dict(t.read())
    assert got[1]["s"] == "patched" and got[1]["v"] == 2.0 and got[1]["dt"] == "a"
    assert got[2]["s"] == "s2"
    with pytest.raises(mt.SchemaError, match="primary key"):
        t.write(pa.table({"s": ["x"]}), target_columns=["s"])


@pytest.mark.parametrize("engine", ["first-row", "versioned"])
def test_partial_write_rejected_by_first_row_and_versioned(table_uri: str, engine: str) -> None:
    opts = {"merge-engine": engine}
    if engine == "versioned":
        opts["table.merge-engine.versioned.ver-column"] = "id"
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"], options=opts)
    with pytest.raises(mt.UnsupportedError, match="partial update"):
        t.write(pa.table({"id": [1], "s": ["x"]}), target_columns=["id", "s"])


def test_partial_write_needs_nullable_columns(table_uri: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("a", pa.int64(), False), ("b", pa.string())])
    t = mt.create_table(table_uri, schema, primary_key=["id"])
    with pytest.raises(mt.SchemaError, match="column a is NOT NULL"):
        t.write(pa.table({"id": [1], "b": ["x"]}), target_columns=["id", "b"])


def test_write_mask_covers_wide_tables(table_uri: str) -> None:
    fields = [pa.field("id", pa.int64())] + [pa.field(f"c{i}", pa.int32()) for i in range(140)]
    t = mt.create_table(table_uri, pa.schema(fields), primary_key=["id"], options={"write-only": "true"})
    t.write(pa.table({"id": [1, 2], **{f"c{i}": [i, -i] for i in range(140)}}, schema=pa.schema(fields)))
    t.write(pa.table({"id": [1], "c5": [500], "c130": [1300]}), target_columns=["id", "c5", "c130"])
    t.write(pa.table({"id": [1], "c70": [700]}), target_columns=["id", "c70"])
    rows = {r["id"]: r for r in t.read().to_pylist()}
    assert (rows[1]["c5"], rows[1]["c70"], rows[1]["c130"]) == (500, 700, 1300)
    assert (rows[1]["c4"], rows[1]["c69"], rows[1]["c139"]) == (4, 69, 139)
    assert rows[2]["c70"] == -70
    t.compact(full=True)
    assert {r["id"]: r for r in t.read().to_pylist()} == rows


def test_with_options_recomputes_typed_options(table_uri: str) -> None:
    t = make(table_uri, **{"write-only": "true"})
    assert t.table_schema.table_options.write_only
    changed = t.table_schema.with_options({**t.options, "write-only": "false"})
    assert changed.table_options.write_only is False
    with pytest.raises(mt.OptionsError):
        t.table_schema.with_options({"bucket": "zero"})


def test_abort_keeps_upgraded_files(table_uri: str) -> None:
    t = make(table_uri, **{"bucket": "1", "write-only": "true"})
    t.write(data([1, 2]))
    (partition, bucket, f), *_ = t.files()
    message = mt.CommitMessage(
        partition=partition, bucket=bucket, total_buckets=1, compact_before=(f,), compact_after=(f.upgrade(5),)
    )
    t.abort([message, None])
    assert t.read().num_rows == 2


def test_delete_by_key_on_a_table_with_not_null_values(table_uri: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("qty", pa.int64(), False), ("note", pa.string())])
    t = mt.create_table(table_uri, schema, primary_key=["id"])
    t.write(pa.table({"id": [1, 2], "qty": [5, 6], "note": ["a", "b"]}, schema=schema))
    t.delete_keys(pa.table({"id": [1]}))
    assert t.read().column("id").to_pylist() == [2]
    with pytest.raises(mt.SchemaError, match="'qty'"):  # an insert still needs its NOT NULL values
        t.write(pa.table({"id": [3], "qty": pa.array([None], pa.int64()), "note": ["c"]}))


def test_partition_values_holding_separator_or_sentinel_characters_stay_apart(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.string())])
    t = mt.create_table(str(tmp_path / "t"), schema, ["id", "a", "b"], partition_keys=["a", "b"])
    rows = pa.table(
        {
            "id": [1, 2, 3, 4, 5],
            "a": ["x\x01y", "x", "q", "\x00null\x00", "x"],
            "b": ["z", "y\x01z", "q", "w", "y\x01z"],
        }
    )
    t.write(rows)
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == rows.to_pylist()
    assert len({(p, b) for p, b, _ in t.files()}) == 4
