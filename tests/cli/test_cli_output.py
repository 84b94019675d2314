"""The command line's output contract: errors (one line or JSON, exit statuses), times, --limit, --version,
streamed ``read`` output in every format, and progress bars only where asked for."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.cli.errors import EXIT_ERROR, EXIT_UNEXPECTED, EXIT_USAGE
from mergetable.cli.main import main
from mergetable.read.reader import SplitReader

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.string())])
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``mergetable ARGS`` as a real process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from mergetable.cli.main import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def run(*args: str) -> tuple[int, str, str]:
    """``mergetable ARGS`` through ``main`` in this process (to observe what it reads)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    """Three buckets, five commits of 40 rows (ids 0..199), the latest tagged ``last``."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, ["id"], options={"bucket": "3", "write-only": "true"})
    for i in range(5):
        ids = list(range(i * 40, i * 40 + 40))
        ts = [pa.scalar(1_700_000_000_000_000 + n, pa.timestamp("us", tz="UTC")).as_py() for n in ids]
        t.write(pa.table({"id": ids, "ts": ts, "v": [f"v{n}" for n in ids]}, schema=SCHEMA))
    t.create_tag("last")
    return t


def sorted_rows(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def test_errors_are_one_line_or_one_json_object_with_the_exit_status(table: mt.Table, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    done = cli("describe", missing)
    assert (done.returncode, done.stdout) == (EXIT_ERROR, "")
    assert done.stderr == f"mergetable: error: no mergetable table at {missing}\n"
    done = cli("--json", "describe", missing)
    assert (done.returncode, done.stdout) == (EXIT_ERROR, "")
    error = json.loads(done.stderr)["error"]
    assert error == {"class": "TableNotFoundError", "message": f"no mergetable table at {missing}", "exit_code": 1}
    done = cli("read", table.uri, "--json", "--limit", "-5")
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    error = json.loads(done.stderr)["error"]
    assert error["class"] == "UsageError" and "--limit" in error["message"] and error["exit_code"] == EXIT_USAGE
    done = cli("read", table.uri, "--limit", "many")
    assert done.returncode == EXIT_USAGE and done.stderr.count("\n") == 1 and "'many'" in done.stderr


def test_an_unexpected_failure_is_one_line_with_its_own_status(
    table: mt.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(mt.Table, "files", broken)
    code, out, err = run("describe", table.uri)
    assert (code, out, err) == (EXIT_UNEXPECTED, "", "mergetable: error: RuntimeError: disk on fire\n")
    code, out, err = run("--json", "describe", table.uri)
    assert code == EXIT_UNEXPECTED and out == ""
    assert json.loads(err)["error"] == {
        "class": "RuntimeError",
        "message": "RuntimeError: disk on fire",
        "exit_code": EXIT_UNEXPECTED,
    }


def test_a_closed_pipe_ends_the_read_quietly(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "big"), pa.schema([("id", pa.int64())]), ["id"])
    t.write(pa.table({"id": range(50_000)}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from mergetable.cli.main import main; sys.exit(main())"
    args = [sys.executable, "-c", code, "read", t.uri, "--limit", "0"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().split() == [b"id"]
        proc.stdout.close()  # like `| head -1`
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 0 and err == b""


def test_version_and_help_exit_zero() -> None:
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"mergetable {mt.__version__}"
    assert run("--help")[0] == 0


def test_times_are_iso_8601_utc_with_z(table: mt.Table) -> None:
    snaps = json.loads(run("--json", "snapshots", table.uri)[1])
    assert [s["time"] for s in snaps] and all(ISO_Z.match(s["time"]) for s in snaps)
    first = table.snapshot(1).time_millis
    assert snaps[0]["time"].startswith(
        pa.scalar(first, pa.timestamp("ms", tz="UTC")).as_py().strftime("%Y-%m-%dT%H:%M:%S")
    )
    tags = json.loads(run("--json", "tags", table.uri)[1])
    assert ISO_Z.match(tags[0]["created"])
    described = json.loads(run("--json", "describe", table.uri)[1])
    assert ISO_Z.match(described["latest_snapshot"]["time"])
    rows = json.loads(run("--json", "read", table.uri, "--filter", "id=3")[1])
    assert rows == [{"id": 3, "ts": "2023-11-14T22:13:20.000003Z", "v": "v3"}]
    text = run("snapshots", table.uri)[1]
    assert all(ISO_Z.match(line.split()[2]) for line in text.splitlines()[2:])


def test_read_stops_reading_after_limit_rows(table: mt.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    splits_read: list[int] = []
    original = SplitReader.read_splits

    def counting(self: SplitReader, splits: Any, *args: Any, **kwargs: Any) -> Any:
        for out in original(self, splits, *args, **kwargs):
            splits_read.append(out.num_rows)
            yield out

    monkeypatch.setattr(SplitReader, "read_splits", counting)
    rows = json.loads(run("--json", "read", table.uri, "--limit", "0")[1])
    assert sorted(r["id"] for r in rows) == list(range(200))
    pieces = len(splits_read)
    splits_read.clear()
    rows = json.loads(run("--json", "read", table.uri, "--limit", "1")[1])
    assert len(rows) == 1 and len(splits_read) == 1 < pieces  # only the first piece of merged rows was read
    assert len(json.loads(run("--json", "read", table.uri)[1])) == 20  # the default on stdout


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "table"])
def test_read_writes_every_format_to_a_file(table: mt.Table, tmp_path: Path, fmt: str) -> None:
    target = tmp_path / f"out.{fmt}"
    done = cli("read", table.uri, "--format", fmt, "--output", str(target), "--filter", "id<150", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"rows": 150, "output": str(target), "format": fmt}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    expected = sorted_rows(table.read(filter=[("id", "<", 150)]))
    if fmt == "parquet":
        assert sorted_rows(pq.read_table(target)) == expected
    elif fmt == "csv":
        got = pacsv.read_csv(target, convert_options=pacsv.ConvertOptions(column_types=SCHEMA))
        assert sorted_rows(got) == expected
    elif fmt == "json":
        assert sorted(r["id"] for r in json.loads(target.read_text())) == [r["id"] for r in expected]
    else:
        lines = target.read_text().splitlines()
        assert lines[0].split() == ["id", "ts", "v"] and len(lines) == 2 + 150
        assert sorted(int(line.split()[0]) for line in lines[2:]) == [r["id"] for r in expected]


def test_parquet_export_writes_full_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mergetable.cli.rows as rows

    monkeypatch.setattr(rows, "EXPORT_ROW_GROUP_ROWS", 64)
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = mt.create_table(str(tmp_path / "t"), schema, ["id"], options={"bucket": "3", "read.batch-size": "10"})
    for start in (0, 100):  # two commits: the read merges
        t.write(pa.table({"id": range(start, start + 120), "v": [f"v{n}" for n in range(120)]}, schema=schema))
    assert max(b.num_rows for b in t.scan()) <= 10  # batches far smaller than a row group
    target = tmp_path / "out.parquet"
    code, _, err = run("read", t.uri, "--format", "parquet", "--output", str(target))
    assert code == 0, err
    meta = pq.read_metadata(target)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [64, 64, 64, 28]
    assert sorted_rows(pq.read_table(target)) == sorted_rows(t.read())


def test_read_formats_on_stdout_and_their_mistakes(table: mt.Table, tmp_path: Path) -> None:
    code, out, _ = run("read", table.uri, "--format", "csv", "--limit", "5", "--columns", "id,v")
    assert code == 0 and out.splitlines()[0] == '"id","v"' and len(out.splitlines()) == 6
    code, out, _ = run("read", table.uri, "--filter", "id>1000")
    assert code == 0 and out.splitlines()[-1] == "(no rows)"
    code, out, _ = run("read", table.uri, "--format", "json", "--filter", "id>1000")
    assert code == 0 and json.loads(out) == []
    code, _, err = run("read", table.uri, "--format", "parquet")
    assert code == EXIT_USAGE and "--output" in err
    target = tmp_path / "kept.csv"
    target.write_text("precious")
    code, _, err = run("read", table.uri, "--filter", "nope=1", "--format", "csv", "--output", str(target))
    assert code == EXIT_ERROR and "nope" in err and target.read_text() == "precious"


def test_progress_bars_only_when_asked_or_on_a_terminal(table: mt.Table, tmp_path: Path) -> None:
    done = cli("compact", table.uri, "--full")
    assert done.returncode == 0 and done.stderr == ""  # stderr is not a terminal: no bar
    done = cli("compact", table.uri, "--full", "--no-progress")
    assert done.returncode == 0 and done.stderr == ""
    old = str(2**41)  # a cutoff in the future: every unreferenced file is an orphan
    (Path(table.uri) / "bucket-0" / "data-orphan-0.parquet").write_bytes(b"x")
    done = cli("orphans", table.uri, "--older-than-ms", old, "--force", "--progress", "--json")
    assert done.returncode == 0 and "removing orphans" in done.stderr and "100%" in done.stderr
    assert len(json.loads(done.stdout)["files"]) == 1
    # write-only: the writes leave expiration (which every commit runs otherwise) to the command
    retain_one = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1", "write-only": "true"}
    kv = mt.create_table(str(tmp_path / "kv"), pa.schema([("id", pa.int64())]), ["id"], options=retain_one)
    for i in range(3):
        kv.write(pa.table({"id": [i]}), overwrite=True)  # each replaces the previous file
    done = cli("expire", kv.uri, "--json")
    assert done.returncode == 0 and done.stderr == "" and json.loads(done.stdout)["expired_snapshots"] == [1, 2]
    kv.write(pa.table({"id": [9]}), overwrite=True)
    done = cli("expire", kv.uri, "--progress")
    assert done.returncode == 0 and done.stdout.startswith("expired 1 snapshot(s)")
    assert "expiring" in done.stderr and "100%" in done.stderr
