"""The ``mergetable`` command line, run as a real subprocess."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.metadata.models import CommitKind

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "mergetable.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def as_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json"))


@pytest.fixture
def table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        ["id", "dt"],
        ["dt"],
        options={"bucket": "2", "write-only": "true", "num-sorted-run.compaction-trigger": "2"},
    )
    for i in range(6):
        dt = "2024-01-01" if i % 2 else "2024-01-02"
        t.write(pa.table({"id": [i, i + 1], "dt": [dt, dt], "v": [f"a{i}", f"b{i}"]}, schema=SCHEMA))
    return t


def test_compact_commits_one_compact_snapshot(table: mt.Table) -> None:
    before = table.read().sort_by([("dt", "ascending"), ("id", "ascending")])
    result = as_json("compact", table.uri)
    latest = table.latest_snapshot()
    assert latest is not None and latest.commit_kind is CommitKind.COMPACT
    assert result["snapshot"] == latest.id and result["files_deleted"] > 0 and result["full"] is False
    assert table.read().sort_by([("dt", "ascending"), ("id", "ascending")]).equals(before)
    text = ok("compact", table.uri, "--full")
    assert text.startswith("compacted ") and "bucket(s) into snapshot" in text
    assert {f.level for _, _, f in table.files()} == {table.table_options.max_levels - 1}
    assert ok("compact", table.uri, "--full") == "nothing to compact\n"


def test_compact_one_partition_with_a_progress_bar(table: mt.Table) -> None:
    done = cli("compact", table.uri, "--full", "--partition", "dt=2024-01-01", "--progress")
    assert done.returncode == 0, done.stderr
    assert "compacting" in done.stderr and "100%" in done.stderr
    levels = {(p, f.level) for p, _, f in table.files()}
    assert {p for p, level in levels if level == 0} == {("2024-01-02",)}
    assert {p for p, level in levels if level == table.table_options.max_levels - 1} == {("2024-01-01",)}


def test_failures_are_one_clear_line_and_a_non_zero_status(tmp_path: Path, table: mt.Table) -> None:
    done = cli("compact", str(tmp_path / "missing"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"mergetable: error: no mergetable table at {tmp_path / 'missing'}"]
    done = cli("compact", table.uri, "--partition", "nope=1")
    assert done.returncode == 1 and "non-partition columns ['nope']" in done.stderr
    done = cli("compact", table.uri, "--partition", "dt")
    assert done.returncode == 1 and "key=value" in done.stderr
    assert cli("compact").returncode == 2  # usage
    assert cli("read", table.uri, "--snapshot", "99").returncode == 1


def test_inspection_commands(table: mt.Table) -> None:
    info = as_json("describe", table.uri)
    assert info["primary_key"] == ["id", "dt"] and info["partition_keys"] == ["dt"]
    assert info["files_by_level"] == {"0": len(table.files())}
    assert info["latest_snapshot"]["id"] == 6
    snaps = as_json("snapshots", table.uri, "--limit", "2")
    assert [s["id"] for s in snaps] == [5, 6] and snaps[0]["kind"] == "APPEND"
    files = as_json("files", table.uri)
    assert len(files) == len(table.files()) and {f["partition"] for f in files} == {"dt=2024-01-01", "dt=2024-01-02"}
    rows = as_json("read", table.uri, "--filter", "id>=5", "--columns", "id,v", "--limit", "0")
    assert sorted(r["id"] for r in rows) == [5, 5, 6] and set(rows[0]) == {"id", "v"}
    assert len(as_json("read", table.uri, "--limit", "2")) == 2
    text = ok("read", table.uri, "--snapshot", "1")
    assert text.splitlines()[0].split() == ["id", "dt", "v"] and len(text.splitlines()) == 4
    changes = as_json("changelog", table.uri, "1", "2")
    assert sorted((c["id"], c["_row_kind"]) for c in changes) == [(1, "+I"), (2, "+I")]


def test_tags_expire_and_orphans(table: mt.Table) -> None:
    assert as_json("tags", table.uri, "--create", "first", "--snapshot", "1") == {"created": "first", "snapshot": 1}
    assert [t["tag"] for t in as_json("tags", table.uri)] == ["first"]
    ok("tags", table.uri, "--delete", "first")
    assert as_json("tags", table.uri) == []
    expired = as_json("expire", table.uri)
    assert expired == {"expired_snapshots": [], "deleted_files": 0, "dry_run": False}  # 10 are kept by default
    files = sorted(p for p in Path(table.uri).rglob("*") if p.is_file())
    dry = as_json("expire", table.uri, "--retain-last", "2", "--dry-run")
    assert dry["expired_snapshots"] == [1, 2, 3, 4] and dry["dry_run"]
    assert sorted(p for p in Path(table.uri).rglob("*") if p.is_file()) == files  # a dry run changes nothing
    assert as_json("expire", table.uri, "--older-than", "2000-01-01T00:00:00Z")["expired_snapshots"] == []
    assert as_json("expire", table.uri, "--retain-last", "2")["expired_snapshots"] == [1, 2, 3, 4]
    assert [s["id"] for s in as_json("snapshots", table.uri)] == [5, 6]
    assert as_json("orphans", table.uri, "--dry-run")["files"] == []


def test_storage_options_reach_the_file_system(table: mt.Table) -> None:
    assert as_json("--storage-option", "auto_mkdir=true", "snapshots", table.uri)[-1]["id"] == 6
    assert len(as_json("snapshots", table.uri, "--storage-option", "auto_mkdir=false")) == 6
    done = cli("snapshots", table.uri, "--storage-option", "no-equals-sign")
    assert done.returncode == 1 and "key=value" in done.stderr


def test_read_time_travel_and_filters_share_the_core_semantics(table: mt.Table) -> None:
    first = table.snapshot(1)
    table.create_tag("one", snapshot_id=1)
    iso = datetime.datetime.fromtimestamp(first.time_millis / 1000, datetime.UTC).isoformat()
    expected = sorted(r["id"] for r in table.read(snapshot_id=1).to_pylist())
    for travel in (["--timestamp", iso], ["--timestamp", str(first.time_millis)], ["--version", "one"]):
        rows = as_json("read", table.uri, *travel, "--limit", "0")
        assert sorted(r["id"] for r in rows) == expected, travel
    rows = as_json("read", table.uri, "--filter", "id>2.5", "--filter", "id != 4", "--limit", "0")
    assert sorted(r["id"] for r in rows) == sorted(
        r["id"] for r in table.read().to_pylist() if r["id"] >= 3 and r["id"] != 4
    )
    done = cli("read", table.uri, "--filter", "id=five")
    assert done.returncode == 1 and "column 'id'" in done.stderr
    done = cli("read", table.uri, "--timestamp", "soon")
    assert done.returncode == 1 and "timestamp" in done.stderr


def test_rescale_rewrites_partitions_then_the_table(table: mt.Table) -> None:
    before = table.read().sort_by([("dt", "ascending"), ("id", "ascending")])
    result = as_json("rescale", table.uri, "--bucket", "3", "--partition", "dt=2024-01-01")
    assert result["partitions"] == 1 and result["bucket"] == "2" and result["files_added"] > 0
    text = ok("rescale", table.uri, "--bucket", "3")
    assert text.startswith("rescaled 1 partition(s) into 3 bucket(s) in snapshot ") and text.endswith("is 3\n")
    t = mt.open_table(table.uri)
    assert t.options["bucket"] == "3" and t.latest_snapshot().commit_kind is CommitKind.OVERWRITE
    assert t.read().sort_by([("dt", "ascending"), ("id", "ascending")]).equals(before)
    assert ok("rescale", table.uri, "--bucket", "3") == "nothing to rewrite (bucket = 3)\n"
    bad = cli("rescale", table.uri, "--bucket", "0")
    assert bad.returncode == 2 and "--bucket" in bad.stderr and "Traceback" not in bad.stderr
    assert "mergetable rescale orders --bucket 8" in ok("rescale", "--help")
