"""Deletion-vector tables: options, merge-on-write reads, compaction, maintenance and the index files' lifecycle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyroaring import BitMap64

import mergetable as mt
from mergetable.core.errors import ImmutableOptionError, OptionsError

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
DV = {"deletion-vectors.enabled": "true", "num-sorted-run.compaction-trigger": "10"}


def _table(path: Path, **options: str) -> mt.Table:
    return mt.create_table(str(path / "t"), SCHEMA, ["k"], options={**DV, **options})


def _rows(keys: list[int], v: int, s: str = "x") -> pa.Table:
    return pa.table({"k": keys, "v": [v] * len(keys), "s": [s] * len(keys)}, schema=SCHEMA)


def _state(t: mt.Table, **read: Any) -> dict[int, tuple[Any, Any]]:
    return {r["k"]: (r["v"], r["s"]) for r in t.read(**read).to_pylist()}


def _load(t: mt.Table) -> None:
    """A top-level run of 0..99, a run of 100..299 above it, then updates that the vectors mark."""
    t.write(_rows(list(range(100)), 0))
    t.write(_rows(list(range(100, 300)), 1))
    t.write(_rows([5, 50, 150], 2, "u"))


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"merge-engine": "first-row"}, "first-row"),
        ({"changelog-producer": "full-compaction"}, "full-compaction"),
    ],
)
def test_refused_combinations_name_the_option(tmp_path: Path, options: dict[str, str], reason: str) -> None:
    with pytest.raises(OptionsError, match=f"deletion-vectors.enabled.*{reason}"):
        _table(tmp_path, **options)


@pytest.mark.parametrize(
    "options",
    [
        {"merge-engine": "partial-update"},
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
        {"changelog-producer": "lookup"},
        {"changelog-producer": "input"},
    ],
)
def test_allowed_combinations(tmp_path: Path, options: dict[str, str]) -> None:
    assert _table(tmp_path, **options).table_options.deletion_vectors_enabled


def test_the_option_is_fixed_at_creation(tmp_path: Path) -> None:
    t = _table(tmp_path)
    with pytest.raises(ImmutableOptionError, match=r"deletion-vectors\.enabled"):
        t.alter.set_options({"deletion-vectors.enabled": "false"})
    plain = mt.create_table(str(tmp_path / "p"), SCHEMA, ["k"])
    with pytest.raises(ImmutableOptionError, match=r"deletion-vectors\.enabled"):
        plain.alter.set_options({"deletion-vectors.enabled": "true"})


def test_reads_drop_marked_rows_without_merging(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _load(t)
    expected = dict.fromkeys(range(100), (0, "x")) | dict.fromkeys(range(100, 300), (1, "x"))
    expected |= {5: (2, "u"), 50: (2, "u"), 150: (2, "u")}
    assert _state(t) == expected
    vectors = t.deletion_vectors()
    assert sum(len(v) for v in vectors.values()) == 3
    splits = t.plan()
    assert all(len(sec) == 1 and len(sec[0]) == 1 for s in splits for sec in s.sections)  # a file per unit
    assert all(f.level > 0 for s in splits for f in s.files)
    assert t.count() == 300
    assert t.count(filter=[("v", "=", 2)]) == 3
    assert _state(t, filter=[("v", "=", 0)]) == {k: (0, "x") for k in range(100) if k not in (5, 50)}
    assert _state(t, filter=[("s", "=", "u")]) == {5: (2, "u"), 50: (2, "u"), 150: (2, "u")}
    assert sorted(t.read(columns=["k"], filter=[("k", ">=", 149), ("k", "<", 152)]).column("k").to_pylist()) == [
        149,
        150,
        151,
    ]
    batches = list(t.scan())
    assert sum(b.num_rows for b in batches) == 300
    # older snapshots keep their own vectors
    assert _state(t, snapshot_id=t.latest_snapshot_id() - 2)[5] == (0, "x")


def test_level_0_is_invisible_until_compacted(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"write-only": "true"})
    t.write(_rows([1, 2], 0))
    assert _state(t) == {}
    assert t.count() == 0
    t.compact()
    assert _state(t) == {1: (0, "x"), 2: (0, "x")}
    t.write(_rows([2, 3], 1))
    assert _state(t) == {1: (0, "x"), 2: (0, "x")}
    t.alter.set_options({"deletion-vectors.merge-on-read": "true"})
    t = mt.open_table(t.uri)
    assert _state(t) == {1: (0, "x"), 2: (1, "x"), 3: (1, "x")}
    t.compact()
    assert _state(t) == {1: (0, "x"), 2: (1, "x"), 3: (1, "x")}
    assert t.deletion_vectors() == {} or sum(len(v) for v in t.deletion_vectors().values()) == 1


def test_merge_on_read_applies_vectors_while_merging(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"})
    _load(t)  # key 5 is marked in the top file and summed into the level-4 file
    t.alter.set_options({"write-only": "true", "deletion-vectors.merge-on-read": "true"})
    t = mt.open_table(t.uri)
    t.write(_rows([5, 7], 10))
    state = _state(t)
    assert state[5][0] == 12 and state[7][0] == 10 and state[150][0] == 3


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}, 1 + 2 + 4),
        ({"merge-engine": "partial-update"}, 4),
        ({"sequence.field": "v"}, 4),
    ],
)
def test_older_rows_are_merged_into_the_new_ones(tmp_path: Path, options: dict[str, str], expected: int) -> None:
    t = _table(tmp_path, **options)
    t.write(_rows(list(range(50)), 1))
    t.write(_rows(list(range(50, 200)), 0))
    t.write(pa.table({"k": [3], "v": [2], "s": [None]}, schema=SCHEMA))
    t.write(pa.table({"k": [3], "v": [4], "s": [None]}, schema=SCHEMA))
    row = _state(t)[3]
    assert row[0] == expected
    if options.get("merge-engine") == "partial-update":
        assert row[1] == "x"  # the null did not replace the older value


def test_sequence_field_keeps_the_newer_stored_row(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"sequence.field": "v"})
    t.write(_rows(list(range(50)), 9))
    t.write(_rows(list(range(50, 200)), 0))
    t.write(_rows([3], 1, "late"))
    assert _state(t)[3] == (9, "x")
    assert t.count() == 200


def test_deletes(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _load(t)
    t.write(_rows([5, 6, 250], 0), row_kind="-D")
    state = _state(t)
    assert 5 not in state and 6 not in state and 250 not in state and len(state) == 297
    assert t.count() == 297
    assert all(f.delete_row_count == 0 for _, _, f in t.files() if f.level > 0)


def test_lookup_changelog(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"changelog-producer": "lookup"})
    _load(t)
    t.write(_rows([5], 7))
    last = t.latest_snapshot_id()
    changes = t.changelog(last - 2, last).to_pylist()
    kinds = sorted((r["_row_kind"], r["k"], r["v"]) for r in changes)
    assert kinds == [("+U", 5, 7), ("-U", 5, 2)]


def test_full_compaction_and_delete_ratio_rewrite_marked_files(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"compaction.delete-ratio-threshold": "0.5"})
    _load(t)
    before = _state(t)
    t.write(_rows(list(range(60)), 3))  # marks 60 of the top file's 100 rows
    top = next(f for _, _, f in t.files() if f.level == t.table_options.max_levels - 1)
    t.compact()  # nothing else to do: the file with most rows over the threshold is rewritten first
    assert top.file_name not in {f.file_name for _, _, f in t.files()}
    while t.compact() is not None:  # then the others, one level at a time
        pass
    assert all(
        len(v) <= 0.5 * next(f.row_count for _, _, f in t.files() if p.endswith(f.file_name))
        for p, v in t.deletion_vectors().items()
    )
    before |= dict.fromkeys(range(60), (3, "x"))
    assert _state(t) == before
    t.compact(full=True)
    assert t.deletion_vectors() == {}
    assert _state(t) == before
    assert {f.level for _, _, f in t.files()} == {t.table_options.max_levels - 1}


def test_bitmap64(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"deletion-vectors.bitmap64": "true"})
    _load(t)
    vectors = t.deletion_vectors()
    assert all(isinstance(v, BitMap64) for v in vectors.values())
    assert sum(len(v) for v in vectors.values()) == 3
    assert len(_state(t)) == 300


def test_expire_keeps_live_index_files_and_deletes_the_others(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    _load(t)
    t.write(_rows([6, 60], 4))
    t.write(_rows([7, 70], 5))
    index_dir = tmp_path / "t" / "index"
    live = {e["file_name"] for e in t.system_table("table_indexes").to_pylist()}
    assert set(os.listdir(index_dir)) == live  # expiration at commit deleted the replaced ones
    state = _state(t)
    assert state[6] == (4, "x") and state[70] == (5, "x")


def test_orphan_cleaning_keeps_live_index_files(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _load(t)
    index_dir = tmp_path / "t" / "index"
    stray = index_dir / "index-00000000-0000-0000-0000-000000000000-0"
    stray.write_bytes(b"\x01")
    live = {e["file_name"] for e in t.system_table("table_indexes").to_pylist()}
    t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000, force=True)
    assert set(os.listdir(index_dir)) == {n for n in os.listdir(index_dir) if n in live or n != stray.name}
    assert not stray.exists()
    assert live <= set(os.listdir(index_dir))
    assert len(_state(t)) == 300


def test_rollback_and_restore_bring_the_vectors_back(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _load(t)
    sid = t.latest_snapshot_id()
    state = _state(t)
    vectors = t.deletion_vectors()
    t.write(_rows([1, 2, 3], 9))
    t.restore(snapshot_id=sid)
    assert _state(t) == state and t.deletion_vectors() == vectors
    t.write(_rows([1, 2, 3], 9))
    t.rollback_to(sid)
    assert _state(t) == state and t.deletion_vectors() == vectors


def test_polars_duckdb_scans_and_diffs_see_the_vectors(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _load(t)
    pl = pytest.importorskip("polars")
    lazy = t.to_polars(lazy=True)
    assert lazy.filter(pl.col("k") < 60).collect().height == 60  # pruned by an expression, vectors kept
    assert sorted(lazy.filter(pl.col("v") == 0).collect()["k"].to_list()) == [k for k in range(100) if k not in (5, 50)]
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    rel = t.to_duckdb(con)
    assert rel.filter("k < 60").aggregate("count(*)").fetchall() == [(60,)]
    scanned = t.scan(filter=[("k", "<", 60)]).read_all()
    assert scanned.num_rows == 60 and scanned.column("v").to_pylist().count(2) == 2
    # the diff of two snapshots whose files are the same but whose vectors differ
    before = t.latest_snapshot_id()
    t.write(_rows([7], 5))
    diff = t.changelog(before, t.latest_snapshot_id(), mode="diff").to_pylist()
    assert sorted((r["_row_kind"], r["k"], r["v"]) for r in diff) == [("+U", 7, 5), ("-U", 7, 0)]


def test_row_level_operations_and_the_cli(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _load(t)
    t.delete_keys(pa.table({"k": pa.array([1, 2, 150], pa.int64())}))
    state = _state(t)
    assert 1 not in state and 2 not in state and 150 not in state and len(state) == 297
    out = subprocess.run(
        [sys.executable, "-m", "mergetable.cli.main", "read", t.uri, "--filter", "k<10", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(out.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert sorted(r["k"] for r in rows) == [0, 3, 4, 5, 6, 7, 8, 9]
    assert next(r for r in rows if r["k"] == 5)["v"] == 2
