"""Paths come from the table root plus validated bare names; maintenance only ever touches the table's own files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.commit import manifests as manifest_cache

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def _now_ms() -> int:
    return int(time.time() * 1000)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("option", ["data-file.prefix", "changelog-file.prefix", "partition.default-name"])
@pytest.mark.parametrize("value", ["../../../x-", "a/b-", "..", "a\\b", "x\n", ""])
def test_name_options_reject_separators_and_dot_dot(table_uri: str, option: str, value: str) -> None:
    with pytest.raises(mt.OptionsError) as err:
        mt.create_table(table_uri, SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"], options={option: value})
    assert err.value.option == option
    assert not os.path.exists(table_uri)


def test_prefixes_must_not_make_hidden_files(table_uri: str) -> None:
    for value in (".data-", "_data-"):
        with pytest.raises(mt.OptionsError, match=r"data-file\.prefix"):
            mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"data-file.prefix": value})


def test_a_crafted_manifest_entry_is_corrupt_metadata(tmp_path: Path) -> None:
    outside = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"id": [666]}), outside)
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"])
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}))
    (_, bucket, meta) = t.files()[0]
    manifest_dir = tmp_path / "t" / "manifest"
    crafted = None
    for m in manifest_dir.iterdir():
        text = m.read_text()
        if meta.file_name in text and not m.name.startswith("manifest-list-"):
            m.write_text(text.replace(meta.file_name, "../../outside.parquet"))
            crafted = m
    assert crafted is not None and bucket == 0
    manifest_cache._cache.clear()  # the in-process cache holds the parsed, untampered manifest
    reopened = mt.open_table(str(tmp_path / "t"))
    with pytest.raises(mt.CorruptMetadataError) as err:
        reopened.read()
    assert crafted.name in str(err.value) and "unsafe file name" in str(err.value)
    with pytest.raises(mt.CorruptMetadataError):
        reopened.remove_orphan_files(force=True)
    with pytest.raises(mt.CorruptMetadataError):  # a commit reads the live files: it refuses too
        reopened.write(pa.table({"id": [2], "dt": ["b"], "v": ["y"]}))
    assert outside.exists()


def _make_foreign_files(root: Path) -> set[str]:
    foreign = {
        "README.md": b"# my table",
        ".hidden": b"x",
        "_delta_log/00000000000000000000.json": b"{}",
        "dt=a/bucket-0/users.csv": b"id,name",
        "dt=a/bucket-0/.data-hidden.parquet": b"x",
        "dt=a/_tmp/data-x.parquet": b"x",
        "dt=a/bucket-0/sub/data-deeper.parquet": b"x",
        "bucket-0/data-not-a-partition.parquet": b"x",
        "manifest/notes.txt": b"x",
        "snapshot/.snapshot-9.tmp-by-someone-else": b"x",
        "_spark_staging/job2/notes.txt": b"x",
        "_spark_staging/job2/.0-0-3": b"",
        "_spark_staging/0-0-5": b"",
    }
    for rel, data in foreign.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return set(foreign)


def test_orphan_cleaning_deletes_only_its_own_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"])
    t.write(pa.table({"id": [1, 2], "dt": ["a", "b"], "v": ["x", "y"]}))
    nested = mt.create_table(str(root / "dt=nested"), SCHEMA, primary_key=["id"])  # a table inside a partition dir
    nested.write(pa.table({"id": [7], "dt": ["n"], "v": ["n"]}))
    foreign = _make_foreign_files(root)
    ours = {
        "dt=a/bucket-0/data-orphan-0.parquet",
        "dt=a/bucket-0/changelog-orphan-0.parquet",
        "manifest/manifest-orphan-0",
        "manifest/manifest-list-orphan-0",
        "snapshot/.snapshot-9." + "0" * 32 + ".tmp",
        "_spark_staging/job1/0-0-17",  # markers of task attempts that outlived their job
        "_spark_staging/job1/1-0-18",
    }
    for rel in ours:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"junk")
    before = _files(root)
    later = _now_ms() + 60_000
    listed = t.remove_orphan_files(older_than_ms=later, dry_run=True, force=True)
    assert {os.path.relpath(p, root) for p in listed} == ours
    assert _files(root) == before  # a dry run deletes nothing
    t.remove_orphan_files(older_than_ms=later, force=True)
    assert _files(root) == before - ours
    assert foreign <= _files(root)
    assert not (root / "_spark_staging" / "job1").exists()  # emptied: removed, the rest of the directory kept
    assert mt.open_table(str(root / "dt=nested")).read().column("id").to_pylist() == [7]
    assert sorted(mt.open_table(str(root)).read().column("id").to_pylist()) == [1, 2]


def test_orphan_cleaning_removes_the_staging_directory_it_empties(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"])
    marker = Path(table_uri) / "_spark_staging" / "0123abcd" / "1-0-42"
    marker.parent.mkdir(parents=True)
    marker.write_bytes(b"")
    assert t.remove_orphan_files(older_than_ms=_now_ms() - 60_000, force=True) == []  # young: kept
    assert marker.exists()
    assert t.remove_orphan_files(older_than_ms=_now_ms() + 60_000, force=True) == [str(marker)]
    assert not (Path(table_uri) / "_spark_staging").exists()


def test_a_young_cutoff_needs_force(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"])
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}))
    orphan = t.fileio.join("bucket-0", "data-in-flight-0.parquet")
    t.fileio.write_bytes(orphan, b"a commit in flight")
    with pytest.raises(mt.OptionsError, match="older_than_ms"):
        t.remove_orphan_files(older_than_ms=_now_ms())
    assert t.remove_orphan_files() == []  # default: older than one day
    assert t.fileio.exists(orphan)
    cli = [
        sys.executable,
        "-m",
        "mergetable.cli.main",
        "orphans",
        table_uri,
        "--older-than-ms",
        str(_now_ms() + 60_000),
    ]
    refused = subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "--force" in refused.stderr
    forced = subprocess.run([*cli, "--json", "--force"], capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["files"] == [orphan]
    assert not t.fileio.exists(orphan)


def test_snapshot_times_never_go_backwards(table_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"])
    first = t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}))
    assert first is not None
    monkeypatch.setattr(time, "time", lambda: first.time_millis / 1000 - 3600)  # a writer's clock an hour behind
    with pytest.raises(mt.ClockSkewError, match=r"'commit\.max-clock-skew'"):  # never dragged silently
        t.write(pa.table({"id": [1], "dt": ["a"], "v": ["y"]}))
    assert t.latest_snapshot_id() == first.id
    lenient = mt.Table(t.fileio, t.table_schema.with_options({"commit.max-clock-skew": "2 h"}))
    second = lenient.write(pa.table({"id": [1], "dt": ["a"], "v": ["y"]}))
    monkeypatch.undo()
    assert second is not None and second.time_millis >= first.time_millis
    assert t.read(timestamp_ms=second.time_millis).column("v").to_pylist() == ["y"]


def test_overwrite_outside_its_spec_fails_before_writing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"])
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}))
    before = _files(root)
    with pytest.raises(mt.SchemaError, match="outside the overwrite spec"):
        t.write(pa.table({"id": [2, 3], "dt": ["a", "b"], "v": ["y", "z"]}), overwrite={"dt": "a"})
    assert _files(root) == before


def test_a_storage_error_mid_write_leaves_no_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, primary_key=["id"], options={"bucket": "4"})
    t.write(pa.table({"id": [0], "dt": ["a"], "v": ["x"]}))
    before = _files(root)
    calls = {"n": 0}
    original = pq.ParquetWriter.write_table

    def failing(self: pq.ParquetWriter, table: pa.Table, row_group_size: int | None = None) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        original(self, table, row_group_size=row_group_size)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing)
    with pytest.raises(OSError, match="No space"):
        t.write(pa.table({"id": list(range(100)), "dt": ["a"] * 100, "v": ["y"] * 100}))
    monkeypatch.undo()
    assert calls["n"] == 3
    assert _files(root) == before


def test_partition_values_that_cannot_be_file_names(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"])
    odd = "a/../b\x00\n\x7f"
    t.write(pa.table({"id": [1], "dt": [odd], "v": ["x"]}))
    assert t.read().column("dt").to_pylist() == [odd]  # escaped into one safe directory name
    files = _files(root)
    assert all(part not in (".", "..") for f in files for part in f.split("/"))
    assert len({f.split("/")[0] for f in files if f.startswith("dt=")}) == 1
    before = _files(root)
    with pytest.raises(mt.SchemaError) as err:
        t.write(pa.table({"id": [2, 3], "dt": ["ok", "é" * 200], "v": ["y", "z"]}))
    assert err.value.column == "dt"
    assert _files(root) == before


def test_duplicate_input_columns_are_a_typed_error(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"])
    data = pa.Table.from_arrays(
        [pa.array([1]), pa.array(["a"]), pa.array(["x"]), pa.array(["y"])], ["id", "dt", "v", "v"]
    )
    with pytest.raises(mt.SchemaError) as err:
        t.write(data)
    assert err.value.column == "v"
