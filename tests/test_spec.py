"""spec/ stays true: generated JSON Schemas match the code, the prose names every field, the hash is pinned."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa

import mergetable as mt
from mergetable.metadata.models import Snapshot
from mergetable.metadata.spec import PERSISTED, field_names, json_schemas, render

SPEC = Path(__file__).resolve().parent.parent / "spec"


def test_json_schemas_match_the_models() -> None:
    for name, schema in json_schemas().items():
        path = SPEC / "schemas" / name
        assert path.exists(), f"{path} is missing: run `make spec`"
        assert path.read_text() == render(schema), f"{path} is stale: run `make spec`"


def _section(text: str, model: str) -> str:
    m = re.search(rf"^### {model}\n(.*?)(?=^### |\Z)", text, re.S | re.M)
    assert m, f"spec/format.md has no section for {model}"
    return m.group(1)


def test_prose_documents_every_field() -> None:
    text = (SPEC / "format.md").read_text()
    for model in PERSISTED:
        if model.__name__ == "Tag":
            names = [n for n in field_names(model) if n not in field_names(Snapshot)]
        else:
            names = field_names(model)
        section = _section(text, model.__name__)
        documented = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
        assert set(names) == documented, f"{model.__name__}: code {sorted(names)} vs spec {sorted(documented)}"


def test_a_real_table_matches_the_schemas(tmp_path: Path) -> None:
    jsonschema = __import__("jsonschema")
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"])
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    t.create_tag("v1")
    schemas = json_schemas()
    snap = json.loads(t.fileio.read_text(t.path_factory.snapshot_file(1)))
    jsonschema.validate(snap, schemas["Snapshot.json"])
    jsonschema.validate(json.loads(t.fileio.read_text(t.path_factory.schema_file(0))), schemas["TableSchema.json"])
    jsonschema.validate(json.loads(t.fileio.read_text(t.path_factory.tag_file("v1"))), schemas["Tag.json"])
    for name in (snap["baseManifestList"], snap["deltaManifestList"]):
        lst = json.loads(t.fileio.read_text(t.path_factory.manifest_file(name)))
        jsonschema.validate(lst, schemas["ManifestList.json"])
        for m in lst["manifests"]:
            doc = json.loads(t.fileio.read_text(t.path_factory.manifest_file(m["fileName"])))
            jsonschema.validate(doc, schemas["ManifestFile.json"])
