"""Errors that say the truth about what a directory holds: a newer mergetable's options, an Apache Paimon table,
a Delta Lake table. None of them is "corrupt"."""

from __future__ import annotations

import json
import os
import uuid
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.core.errors import UnknownOptionsWarning

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _add_stored_option(root: Path, key: str, value: str) -> None:
    """What a newer mergetable leaves: an option this version does not know, in the newest schema."""
    path = max((root / "schema").iterdir(), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    doc = json.loads(path.read_text())
    doc["options"][key] = value
    path.write_text(json.dumps(doc))


def test_an_unknown_stored_option_is_read_around_with_a_warning_and_refuses_writes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, ["k"], options={"bucket": "2"})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    _add_stored_option(root, "deletion-vectors.future-mode", "on")
    with pytest.warns(UnknownOptionsWarning, match=r"deletion-vectors\.future-mode"):
        newer = mt.open_table(str(root))
    assert newer.read().sort_by("k").to_pylist() == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]
    before = sorted(p.name for p in root.rglob("*") if p.is_file())
    with pytest.raises(mt.UnsupportedError, match=r"deletion-vectors\.future-mode.*upgrade mergetable"):
        newer.write(pa.table({"k": [3], "v": ["c"]}, schema=SCHEMA))
    with pytest.raises(mt.UnsupportedError, match=r"deletion-vectors\.future-mode"):
        newer.compact(full=True)
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == before
    assert newer.read().num_rows == 2


def test_a_bad_value_of_a_known_option_is_still_corrupt_metadata(tmp_path: Path) -> None:
    root = tmp_path / "t"
    mt.create_table(str(root), SCHEMA, ["k"])
    _add_stored_option(root, "bucket", "many")
    with pytest.raises(mt.CorruptMetadataError, match="bucket"):
        mt.open_table(str(root))


def _avro(schema: dict[str, object]) -> bytes:
    """An Avro object container file without records: Paimon's manifest files are Avro by default."""

    def varint(n: int) -> bytes:
        n = (n << 1) ^ (n >> 63)  # zig-zag
        out = bytearray()
        while n > 0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    def text(b: bytes) -> bytes:
        return varint(len(b)) + b

    meta = {b"avro.schema": json.dumps(schema).encode(), b"avro.codec": b"null"}
    header = b"Obj\x01" + varint(len(meta)) + b"".join(text(k) + text(v) for k, v in meta.items()) + varint(0)
    return header + os.urandom(16)


def _paimon_table(root: Path, version: int) -> None:
    """The files Apache Paimon writes for a primary-key table with one commit (layout and documents of
    paimon-core's ``TableSchema`` and ``Snapshot``, format version ``version``)."""
    for d in ("schema", "snapshot", "manifest", "bucket-0"):
        (root / d).mkdir(parents=True)
    fields = [{"id": 0, "name": "k", "type": "BIGINT NOT NULL"}, {"id": 1, "name": "v", "type": "STRING"}]
    schema = {
        "version": version, "id": 0, "fields": fields, "highestFieldId": 1, "partitionKeys": [],
        "primaryKeys": ["k"], "options": {"bucket": "1"}, "comment": None, "timeMillis": 1_700_000_000_000,
    }  # fmt: skip
    (root / "schema" / "schema-0").write_text(json.dumps(schema))
    lists = [f"manifest-list-{uuid.uuid4()}-{i}" for i in range(2)]
    manifest = f"manifest-{uuid.uuid4()}-0"
    for name in [*lists, manifest]:
        (root / "manifest" / name).write_bytes(_avro({"type": "record", "name": "record", "fields": []}))
    snapshot = {
        "version": version, "id": 1, "schemaId": 0, "baseManifestList": lists[0], "baseManifestListSize": 100,
        "deltaManifestList": lists[1], "deltaManifestListSize": 100, "changelogManifestList": None,
        "commitUser": str(uuid.uuid4()), "commitIdentifier": 2**63 - 1, "commitKind": "APPEND",
        "timeMillis": 1_700_000_000_100, "logOffsets": {}, "totalRecordCount": 1, "deltaRecordCount": 1,
        "changelogRecordCount": 0,
    }  # fmt: skip
    (root / "snapshot" / "snapshot-1").write_text(json.dumps(snapshot))
    (root / "snapshot" / "LATEST").write_text("1")
    (root / "snapshot" / "EARLIEST").write_text("1")
    pq.write_table(pa.table({"k": [1], "v": ["a"]}), root / "bucket-0" / f"data-{uuid.uuid4()}-0.parquet")


@pytest.mark.parametrize("version", [3, 2])
def test_an_apache_paimon_table_is_named_as_one(tmp_path: Path, version: int) -> None:
    """Format version 3 (current Paimon) fails at open, an older one at the first read of its manifests: both
    say it is a Paimon table and what to do, not "upgrade mergetable" or "corrupt"."""
    root = tmp_path / "paimon"
    _paimon_table(root, version)
    with warnings.catch_warnings(), pytest.raises(mt.UnsupportedError) as info:
        warnings.simplefilter("ignore", UnknownOptionsWarning)
        mt.open_table(str(root)).read()
    message = str(info.value)
    assert "is an Apache Paimon table (its manifests are Avro files)" in message and "pypaimon" in message
    assert "upgrade" not in message


def test_a_delta_table_is_named_as_one(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    (root / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"k": [1]}), root / "part-00000.parquet")
    log = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": []}), "partitionColumns": [],
                      "configuration": {}}},
        {"add": {"path": "part-00000.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0,
                 "dataChange": True}},
    ]  # fmt: skip
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in log))
    with pytest.raises(mt.TableNotFoundError, match=r"is a Delta Lake table \(it has _delta_log/\).*deltalake"):
        mt.open_table(str(root))
