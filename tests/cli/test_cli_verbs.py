"""The verbs a Delta or Paimon user reaches for: create, write, delete, count, history, schema, describe's LSM picture.

Each runs through the real entry point (``main``) on real tables and files; one journey runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.cli.errors import EXIT_ERROR, EXIT_USAGE
from mergetable.cli.help import EXAMPLES
from mergetable.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def call(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return call


def ok(run: Run, *args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, err
    return out


def as_json(run: Run, *args: str) -> Any:
    return json.loads(ok(run, "--json", *args))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """One Parquet, one CSV and one JSON Lines file of (id, dt, v) rows."""
    parquet, csv, jsonl = tmp_path / "a.parquet", tmp_path / "b.csv", tmp_path / "c.jsonl"
    pq.write_table(pa.table({"id": [1, 2, 3], "dt": ["x", "x", "y"], "v": [1.5, 2.5, 3.5]}), parquet)
    pacsv.write_csv(pa.table({"id": [3, 4], "dt": ["y", "y"], "v": [30.0, 40.0]}), csv)
    jsonl.write_text('{"id": 5, "dt": "z", "v": 5}\n{"id": 6, "dt": "z", "v": 6.5}\n')
    return {"parquet": str(parquet), "csv": str(csv), "json": str(jsonl)}


def rows_of(uri: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in mt.open_table(uri).read().to_pylist())


def test_every_command_has_examples_in_its_help_and_they_parse(run: Run) -> None:
    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert {"create", "write", "delete", "count", "history", "schema", "describe"} <= commands
    assert set(EXAMPLES) == commands
    for command in commands:
        out = ok(run, command, "--help")
        assert f"examples:\n  mergetable {command}" in out, command
        assert "--json" in out, command
    for command, examples in EXAMPLES.items():
        for example in examples:
            argv = shlex.split(example.replace("\\\n", " "), comments=True)
            assert argv[0] == "mergetable"
            args = build_parser().parse_args(argv[1:])
            assert args.command == command, example


def test_write_creates_the_table_from_the_files_then_appends(tmp_path: Path, run: Run, files: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    keyless = as_json(run, "write", str(tmp_path / "log"), files["parquet"])  # no key: an append table
    assert keyless["created"] and mt.open_table(str(tmp_path / "log")).table_schema.is_append_table
    result = as_json(run, "write", uri, files["parquet"], "--primary-key", "id,dt", "--partition-by", "dt",
                     "--option", "bucket=2")  # fmt: skip
    assert result == {"snapshot": 1, "rows": 3, "files_added": 2, "created": True, "mode": "append"}
    t = mt.open_table(uri)
    assert t.primary_key == ("id", "dt") and t.partition_keys == ("dt",) and t.options["bucket"] == "2"
    assert ok(run, "write", uri, files["csv"]) == "wrote 2 row(s) from 1 file(s) into snapshot 2\n"
    assert as_json(run, "write", uri, files["json"])["rows"] == 2
    assert rows_of(uri) == [(1, "x", 1.5), (2, "x", 2.5), (3, "y", 30.0), (4, "y", 40.0), (5, "z", 5.0), (6, "z", 6.5)]
    code, _, err = run("write", uri, files["csv"], "--primary-key", "id")
    assert code == EXIT_ERROR and "primary-key" in err and "['id', 'dt']" in err
    code, _, err = run("write", uri, str(tmp_path / "nope.csv"))
    assert code == EXIT_USAGE and "nope.csv: no such file" in err
    code, _, err = run("write", uri, str(tmp_path / "rows.txt"))
    assert code == EXIT_USAGE and "--format" in err
    assert len(mt.open_table(uri).snapshots()) == 3  # the refused writes committed nothing


def test_write_modes_overwrite_error_and_ignore(tmp_path: Path, run: Run, files: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    ok(run, "write", uri, files["parquet"], files["json"], "--primary-key", "id,dt", "--partition-by", "dt")
    assert len(rows_of(uri)) == 5
    assert as_json(run, "write", uri, files["csv"], "--mode", "overwrite", "--partition", "dt=y")["rows"] == 2
    assert rows_of(uri) == [(1, "x", 1.5), (2, "x", 2.5), (3, "y", 30.0), (4, "y", 40.0), (5, "z", 5.0), (6, "z", 6.5)]
    code, _, err = run("write", uri, files["csv"], "--partition", "dt=y")
    assert code == EXIT_USAGE and "--mode overwrite" in err
    code, _, err = run("write", uri, files["csv"], "--mode", "error")
    assert code == EXIT_ERROR and "already exists" in err
    assert as_json(run, "write", uri, files["csv"], "--mode", "ignore")["skipped"] is True
    assert len(mt.open_table(uri).snapshots()) == 2
    code, _, err = run("write", uri, files["csv"], "--mode", "append", "--option", "bucket=7")
    assert code == EXIT_ERROR and "option bucket=" in err and "mergetable alter" in err  # as mt.write_table
    assert as_json(run, "write", uri, files["csv"], "--mode", "overwrite")["files_added"] == 1
    assert rows_of(uri) == [(3, "y", 30.0), (4, "y", 40.0)]  # every partition, as mt.write_table(mode="overwrite")
    assert len(mt.open_table(uri).snapshots()) == 3
    other = str(tmp_path / "u")
    ok(run, "write", other, files["parquet"], "--mode", "error", "--primary-key", "id")
    ok(run, "write", other, files["csv"], "--mode", "overwrite")
    assert rows_of(other) == [(3, "y", 30.0), (4, "y", 40.0)]


def test_csv_columns_take_the_table_types(tmp_path: Path, run: Run) -> None:
    uri = str(tmp_path / "t")
    ok(run, "create", uri, "--column", "id INT", "--column", "code STRING", "--column", "price DECIMAL(10, 2)",
       "--primary-key", "id")  # fmt: skip
    csv = tmp_path / "in.csv"
    csv.write_text("id,code,price\n1,007,1.25\n2,010,3.50\n")  # CSV inference would read code as a number
    ok(run, "write", uri, str(csv))
    assert mt.open_table(uri).read().to_pydict()["code"] == ["007", "010"]
    code, _, err = run("write", uri, str(csv), "--format", "json")
    assert code != 0 and err.startswith("mergetable: error: ") and err.count("\n") == 1


def test_create_from_columns_or_a_file(tmp_path: Path, run: Run, files: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    out = as_json(run, "create", uri, "--column", "id BIGINT", "--column", "amount DECIMAL(12, 2)",
                  "--column", "dt STRING", "--primary-key", "id,dt", "--partition-by", "dt",
                  "--option", "bucket=4", "--comment", "orders")  # fmt: skip
    assert [(f["name"], f["type"]) for f in out["fields"]] == [
        ("id", "BIGINT NOT NULL"),
        ("amount", "DECIMAL(12, 2)"),
        ("dt", "STRING NOT NULL"),
    ]
    t = mt.open_table(uri)
    assert t.schema.field("amount").type == pa.decimal128(12, 2) and t.comment == "orders"
    assert t.options["bucket"] == "4" and t.partition_keys == ("dt",)
    code, _, err = run("create", uri, "--column", "id BIGINT", "--primary-key", "id")
    assert code == EXIT_ERROR and "already exists" in err
    again = ["--column", "id BIGINT", "--column", "dt STRING", "--primary-key", "id,dt", "--if-not-exists"]
    assert as_json(run, "create", uri, *again)["fields"] == out["fields"]  # the existing table, unchanged
    like = str(tmp_path / "like")
    ok(run, "create", like, "--like", files["json"], "--primary-key", "id")
    assert mt.open_table(like).schema.names == ["id", "dt", "v"] and mt.open_table(like).snapshots() == []
    code, _, err = run("create", str(tmp_path / "bad"), "--column", "id FOO", "--primary-key", "id")
    assert code == EXIT_ERROR and "column 'id'" in err and "FOO" in err
    code, _, err = run("create", str(tmp_path / "bad"), "--column", "id", "--primary-key", "id")
    assert code == EXIT_USAGE and "--column 'id'" in err
    assert run("create", str(tmp_path / "bad"))[0] == EXIT_USAGE  # neither --column nor --like
    assert not mt.table_exists(str(tmp_path / "bad"))
    events = str(tmp_path / "events")  # no --primary-key: an append table
    ok(run, "create", events, "--like", files["parquet"], "--partition-by", "dt")
    assert mt.open_table(events).primary_key == () and mt.open_table(events).options["bucket"] == "-1"
    ok(run, "write", events, files["parquet"], files["parquet"])
    assert len(rows_of(events)) == 6  # rows kept as written, duplicates included
    assert "6" in ok(run, "count", events)


def test_delete_with_a_filter(tmp_path: Path, run: Run, files: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    ok(run, "write", uri, files["parquet"], files["json"], "--primary-key", "id,dt", "--partition-by", "dt")
    assert as_json(run, "delete", uri, "--filter", "id>=2", "--filter", "v<6", "--dry-run") == {
        "dry_run": True,
        "rows": 3,
    }
    assert len(rows_of(uri)) == 5
    assert as_json(run, "delete", uri, "--filter", "id>=2", "--filter", "v<6") == {
        "dry_run": False,
        "snapshot": 2,
        "rows": 3,
    }
    assert rows_of(uri) == [(1, "x", 1.5), (6, "z", 6.5)]
    assert ok(run, "delete", uri, "--filter", "id=99") == "no row matched\n"
    code, _, err = run("delete", uri)
    assert code == EXIT_USAGE and "--filter --all" in err
    code, _, err = run("delete", uri, "--filter", "nope=1")
    assert code == EXIT_ERROR and "nope" in err
    assert ok(run, "delete", uri, "--all") == "deleted 2 row(s) in snapshot 3\n"
    assert rows_of(uri) == []


def test_count_history_and_schema(tmp_path: Path, run: Run, files: dict[str, str]) -> None:
    uri = str(tmp_path / "t")
    ok(run, "write", uri, files["parquet"], "--primary-key", "id,dt", "--partition-by", "dt")
    ok(run, "write", uri, files["csv"])
    ok(run, "compact", uri, "--full")
    ok(run, "alter", uri, "add-column", "note", "STRING")
    assert ok(run, "count", uri) == "4\n"
    assert as_json(run, "count", uri, "--filter", "dt=y") == {"count": 2}
    assert as_json(run, "count", uri, "--snapshot", "1") == {"count": 3}
    assert run("count", uri, "--snapshot", "9")[0] == EXIT_ERROR
    history = as_json(run, "history", uri)
    assert [(h["version"], h["operation"]) for h in history] == [(3, "COMPACT"), (2, "APPEND"), (1, "APPEND")]
    assert history[0]["timestamp"].endswith("Z") and isinstance(history[0]["properties"], dict)
    assert [h["version"] for h in as_json(run, "history", uri, "--no-compaction", "--limit", "1")] == [2]
    text = ok(run, "history", uri, "--limit", "2").splitlines()
    assert text[0].split()[:3] == ["version", "timestamp", "operation"] and len(text) == 4
    assert [f["name"] for f in as_json(run, "schema", uri)["fields"]] == ["id", "dt", "v", "note"]
    assert [f["name"] for f in as_json(run, "schema", uri, "--snapshot", "1")["fields"]] == ["id", "dt", "v"]
    lines = ok(run, "schema", uri).splitlines()
    assert lines[0].split() == ["column", "type", "key", "partition", "comment"]
    assert lines[3].split() == ["dt", "STRING", "NOT", "NULL", "key", "partition"]


def test_describe_draws_each_buckets_lsm_tree(tmp_path: Path, run: Run) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = mt.create_table(uri, schema, ["id"], options={"bucket": "2", "write-only": "true",
                                                      "num-sorted-run.compaction-trigger": "3"})  # fmt: skip
    t.write(pa.table({"id": range(1000), "v": [os.urandom(32).hex() for _ in range(1000)]}, schema=schema))
    t.compact(full=True)
    for i in range(3):
        t.write(pa.table({"id": [2 * i], "v": ["y"]}, schema=schema))  # id 0, 2, 4 go to buckets by hash
    info = as_json(run, "describe", uri)
    assert info["compaction_trigger"] == 3 and info["buckets"] == 2 and len(info["lsm"]) == 2
    top = t.table_options.max_levels - 1
    for tree in info["lsm"]:
        levels = {level["level"]: level for level in tree["levels"]}
        assert set(levels) <= {0, top} and levels[top]["runs"] == 1 and levels[top]["files"] == 1
        l0 = levels.get(0, {"runs": 0, "files": 0})
        assert l0["runs"] == l0["files"] and tree["sorted_runs"] == 1 + l0["runs"]
        assert tree["compaction_due"] == (tree["sorted_runs"] >= 3)
    assert sum(level["rows"] for tree in info["lsm"] for level in tree["levels"]) == 1003
    assert sum(level["runs"] for tree in info["lsm"] for level in tree["levels"] if level["level"] == 0) == 3
    text = ok(run, "describe", uri)
    picture = text[text.index("LSM tree per bucket") :].splitlines()[1:]
    assert picture[0].startswith("bucket 0: ") and any(line.startswith("bucket 1: ") for line in picture)
    bars: dict[str, list[str]] = {}
    for line in picture:
        if line.startswith("  L"):
            bars.setdefault(line.split()[0], []).append(line.split()[1])
    assert {c for bar in bars[f"L{top}"] + bars["L0"] for c in bar} == {"█"}
    assert min(map(len, bars[f"L{top}"])) > max(map(len, bars["L0"])) >= 1
    assert ("(compaction at 3) <- compaction due" in text) == any(tree["compaction_due"] for tree in info["lsm"])
    one = ok(run, "describe", uri, "--buckets", "1")
    assert "... and 1 more bucket(s)\n(--buckets 0 draws all)" in one and "bucket 1: " not in one


def test_a_new_user_journey_in_a_real_process(tmp_path: Path, files: dict[str, str]) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    uri = str(tmp_path / "orders")

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "mergetable.cli.main", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("create", uri, "--like", files["parquet"], "--primary-key", "id,dt", "--partition-by", "dt")
    cli("write", uri, files["parquet"], files["json"])
    cli("write", uri, files["csv"])
    cli("delete", uri, "--filter", "dt=z")
    assert json.loads(cli("count", uri, "--json")) == {"count": 4}
    assert [h["operation"] for h in json.loads(cli("history", uri, "--json"))] == ["DELETE", "APPEND", "APPEND"]
    text = cli("describe", uri)
    assert "dt=x / bucket 0: 1 sorted run (compaction at 5)" in text and "dt=y / bucket 0: 2 sorted runs" in text
    ascii_env = {**env, "PYTHONIOENCODING": "ascii"}  # an output without block characters: '#' bars
    done = subprocess.run([sys.executable, "-m", "mergetable.cli.main", "describe", uri], capture_output=True,
                          text=True, env=ascii_env, cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    bars = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("  L")]
    assert bars and all(set(bar) == {"#"} for bar in bars)
