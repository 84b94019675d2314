"""``mergetable alter``: each change from the command line, JSON output, refused changes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.cli.main import main


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> object:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _ok(cli: object, *args: str) -> str:
    code, out, err = cli(*args)  # type: ignore[operator]
    assert code == 0, err
    return str(out)


def test_alter_commands_change_the_schema_and_options(tmp_path: Path, cli: object) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int32()), ("s", pa.string())]), ["id"])
    t.write(pa.table({"id": [1], "v": pa.array([1], pa.int32()), "s": ["a"]}))
    out = json.loads(_ok(cli, "alter", uri, "add-column", "price", "DECIMAL(10, 2)", "--after", "id", "--json"))
    assert out["schema_id"] == 1 and [f["name"] for f in out["fields"]] == ["id", "price", "v", "s"]
    assert "schema 2" in _ok(cli, "alter", uri, "rename-column", "s", "text")
    assert json.loads(_ok(cli, "--json", "alter", uri, "change-type", "v", "bigint"))["fields"][2]["type"] == "BIGINT"
    _ok(cli, "alter", uri, "drop-column", "price")
    _ok(cli, "alter", uri, "set-option", "fields.v.stats-mode=none", "snapshot.num-retained.min=2")
    _ok(cli, "alter", uri, "unset-option", "snapshot.num-retained.min")
    t = mt.open_table(uri)
    assert t.table_schema.id == 6 and t.options["fields.v.stats-mode"] == "none"
    assert t.read().to_pylist() == [{"id": 1, "v": 1, "text": "a"}]


def test_refused_alter_names_the_culprit_and_exits_1(tmp_path: Path, cli: object) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]), ["id"])
    t.write(pa.table({"id": [1], "v": [1]}))
    for args, culprit in (
        (("set-option", "bucket=4"), "option 'bucket'"),
        (("change-type", "v", "INT"), "column 'v'"),
        (("drop-column", "id"), "column 'id'"),
        (("add-column", "w", "NOSUCHTYPE"), "column 'w'"),
    ):
        code, _, err = cli("alter", uri, *args)  # type: ignore[operator]
        assert code == 1 and culprit in err
    assert mt.open_table(uri).table_schema.id == 0
