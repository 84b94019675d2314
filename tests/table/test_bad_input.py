"""Bad input gets a typed error naming the culprit and leaves the table unchanged."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64())])


@pytest.fixture
def table(table_uri: str) -> mt.Table:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "v": [1.0, 2.0]}))
    return t


def unchanged(t: mt.Table) -> None:
    assert [s.id for s in t.snapshots()] == [1]
    assert sorted(t.read().column("id").to_pylist()) == [1, 2]


def data_files(t: mt.Table) -> set[str]:
    return {p for p, _ in t.fileio.walk_files(t.fileio.root) if p.endswith(".parquet")}


def test_null_key(table: mt.Table) -> None:
    before = data_files(table)
    with pytest.raises(mt.SchemaError, match="'id'"):
        table.write(pa.table({"id": [3, None], "v": [1.0, 2.0]}))
    unchanged(table)
    assert data_files(table) == before


def test_missing_extra_and_mistyped_columns(table: mt.Table) -> None:
    with pytest.raises(mt.SchemaError, match="'v'"):
        table.write(pa.table({"id": [3]}))
    with pytest.raises(mt.SchemaError, match="'extra'"):
        table.write(pa.table({"id": [3], "v": [1.0], "extra": [1]}))
    with pytest.raises(mt.SchemaError, match="'v'"):
        table.write(pa.table({"id": [3], "v": ["not a number"]}))
    with pytest.raises(mt.SchemaError):
        table.write(pa.table({"id": [3], "v": [1.0]}), row_kind=["+X"])
    unchanged(table)


def test_unknown_and_malformed_options(table_uri: str) -> None:
    with pytest.raises(mt.OptionsError, match="'colour'"):
        mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"colour": "red"})
    with pytest.raises(mt.OptionsError, match="'bucket'"):
        mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"bucket": "four"})
    with pytest.raises(mt.SchemaError, match="'nope'"):
        mt.create_table(table_uri, SCHEMA, primary_key=["nope"])
    with pytest.raises(mt.SchemaError, match="'v'"):
        mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"sequence.field": "v,v"})
    with pytest.raises(mt.SchemaError, match="bucket-key"):
        mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"bucket-key": "v"})
    assert not mt.table_exists(table_uri)
    with pytest.raises(mt.TableNotFoundError):
        mt.open_table(table_uri)


def test_table_exists(table: mt.Table) -> None:
    with pytest.raises(mt.TableExistsError):
        mt.create_table(table.uri, SCHEMA, primary_key=["id"])


def test_corrupt_snapshot_json(table: mt.Table) -> None:
    path = table.path_factory.snapshot_file(1)
    table.fileio.write_bytes(path, b'{"id": 1, "schemaId": ')
    with pytest.raises(mt.CorruptMetadataError) as info:
        table.read()
    assert "snapshot-1" in str(info.value)


def test_corrupt_manifest(table: mt.Table) -> None:
    snap = table.latest_snapshot()
    assert snap is not None
    path = table.path_factory.manifest_file(snap.delta_manifest_list)
    fresh = mt.open_table(table.uri)
    table.fileio.write_bytes(path, b"[not json")
    from mergetable.commit import manifests

    manifests._cache.clear()
    with pytest.raises(mt.CorruptMetadataError, match="manifest-list"):
        fresh.read()


def test_missing_data_file(table: mt.Table) -> None:
    victim = sorted(data_files(table))[0]
    os.remove(victim)
    with pytest.raises(mt.DataFileError) as info:
        table.read()
    assert os.path.basename(victim) in str(info.value)


def test_bad_filter(table: mt.Table) -> None:
    with pytest.raises(mt.SchemaError, match="'zz'"):
        table.read(filter=[("zz", "=", 1)])
    with pytest.raises(mt.SchemaError):
        table.read(filter=[("id", "~", 1)])


def test_unsupported_modes(table_uri: str) -> None:
    with pytest.raises(mt.OptionsError, match="bucket-key"):  # -1 is the dynamic bucket mode: no bucket key
        mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"bucket": "-1", "bucket-key": "id"})
    with pytest.raises(mt.OptionsError, match="bucket"):  # postpone bucket mode needs a primary key
        mt.create_table(table_uri, SCHEMA, primary_key=[], options={"bucket": "-2"})
    with pytest.raises(mt.OptionsError, match="bucket-key"):  # a keyless (append) table with buckets needs one
        mt.create_table(table_uri, SCHEMA, primary_key=[], options={"bucket": "2"})


def test_failed_commit_leaves_no_change_and_no_files(table: mt.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    from mergetable.core.fileio import FileIO

    before = {p for p, _ in table.fileio.walk_files(table.fileio.root)}

    def disk_full(self: FileIO, path: str, data: bytes) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FileIO, "write_if_absent", disk_full)
    with pytest.raises(OSError, match="No space"):
        table.write(pa.table({"id": [3, 4], "v": [3.0, 4.0]}))
    monkeypatch.undo()
    unchanged(table)
    after = {p for p, _ in table.fileio.walk_files(table.fileio.root)}
    assert after == before


def test_commit_conflict_exhaustion_cleans_up(table_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mergetable.core.fileio import FileIO

    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"commit.max-retries": "2"})
    t.write(pa.table({"id": [1, 2], "v": [1.0, 2.0]}))
    before = {p for p, _ in t.fileio.walk_files(t.fileio.root)}
    monkeypatch.setattr(FileIO, "write_if_absent", lambda self, path, data: False)  # every race is lost
    with pytest.raises(mt.CommitConflictError, match=r"commit\.max-retries"):
        t.write(pa.table({"id": [3], "v": [3.0]}))
    monkeypatch.undo()
    unchanged(t)
    assert {p for p, _ in t.fileio.walk_files(t.fileio.root)} == before
