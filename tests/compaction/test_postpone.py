"""Postpone bucket mode (``bucket`` = -2): staged rows invisible until a compaction moves them into buckets."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from compaction_support import scratch_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.commit.manifests import ManifestIO
from mergetable.core.errors import CommitConflictError, OptionsError
from mergetable.metadata.models import CommitKind

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
ORDER = [("dt", "ascending"), ("id", "ascending")]


def _table(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["id", "dt"], ["dt"], options={"bucket": "-2", **options})


def _rows(ids: list[int], dt: str, v: int) -> pa.Table:
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _staged(t: mt.Table, data: pa.Table, kinds: Any = None) -> None:
    """A write that is not a batch write (a bare writer, as a stream's): its rows are postponed."""
    w = t.new_writer()
    w.write(data, kinds)
    t.commit(w.prepare_commit())


def _totals(t: mt.Table) -> dict[tuple[str | None, ...], set[tuple[int, int]]]:
    out: dict[tuple[str | None, ...], set[tuple[int, int]]] = {}
    for e in ManifestIO(t.fileio).live_entries(t.latest_snapshot()):
        out.setdefault(e.partition, set()).add((e.bucket, e.total_buckets))
    return out


def test_options_and_their_defaults(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    opts = t.table_options
    assert opts.bucket == -2 and opts.postpone_default_bucket_num == 1 and opts.postpone_batch_write_fixed_bucket
    assert opts.postpone_target_row_num_per_bucket is None
    with pytest.raises(OptionsError, match="bucket"):
        mt.create_table(str(tmp_path / "e"), SCHEMA, options={"bucket": "-2"})  # an append table
    for bad in ({"changelog-producer": "lookup"}, {"deletion-vectors.enabled": "true"}):
        with pytest.raises(OptionsError, match=next(iter(bad))):
            _table(str(tmp_path / "bad"), **bad)
    with pytest.raises(OptionsError, match=r"postpone\.default-bucket-num"):
        _table(str(tmp_path / "bad2"), **{"postpone.default-bucket-num": "0"})
    for bad_target in ("0", "-1"):  # Paimon's rule: greater than 0
        with pytest.raises(OptionsError, match=r"postpone\.target-row-num-per-bucket") as info:
            _table(str(tmp_path / "bad4"), **{"postpone.target-row-num-per-bucket": bad_target})
        assert info.value.option == "postpone.target-row-num-per-bucket"
        with pytest.raises(OptionsError, match=r"postpone\.target-row-num-per-bucket"):
            t.alter.set_options({"postpone.target-row-num-per-bucket": bad_target})
    with pytest.raises(OptionsError, match="bucket"):
        _table(str(tmp_path / "bad3"), bucket="-3")


def test_staged_rows_are_invisible_until_a_compaction_moves_them(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"), **{"write-only": "true", "postpone.default-bucket-num": "3"})
    _staged(t, _rows([1, 2, 3, 4], "a", 1))
    _staged(t, _rows([2, 5], "a", 2))
    _staged(t, _rows([1], "b", 3))
    assert t.read().num_rows == 0 and t.count() == 0
    files = t.system_table("files")
    assert set(files.column("bucket").to_pylist()) == {-2}
    assert all("/bucket-postpone/" in p for p in files.column("file_path").to_pylist())
    assert set(t.system_table("buckets").column("bucket").to_pylist()) == {-2}
    assert _totals(t) == {("a",): {(-2, -2)}, ("b",): {(-2, -2)}}

    snap = t.compact()

    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert t.read().sort_by(ORDER).to_pylist() == [
        {"id": 1, "dt": "a", "v": 1},
        {"id": 2, "dt": "a", "v": 2},  # the later commit wins, as it would have in a fixed-bucket table
        {"id": 3, "dt": "a", "v": 1},
        {"id": 4, "dt": "a", "v": 1},
        {"id": 5, "dt": "a", "v": 2},
        {"id": 1, "dt": "b", "v": 3},
    ]
    assert {t for p in _totals(t).values() for _, t in p} == {3}  # postpone.default-bucket-num the first time
    assert -2 not in t.system_table("files").column("bucket").to_pylist()
    assert not any("bucket-postpone" in p for p in t.system_table("files").column("file_path").to_pylist())


def test_commit_order_holds_across_staged_and_batch_writes(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"), **{"write-only": "true", "postpone.target-row-num-per-bucket": "2"})
    _staged(t, _rows([1, 2, 3, 4, 5], "a", 1))
    t.compact()  # 5 staged rows, 2 per bucket: the partition gets 3 buckets
    assert {tb for _, tb in _totals(t)[("a",)]} == {3}
    _staged(t, _rows([1, 2], "a", 2))  # staged first ...
    t.write(_rows([2, 3], "a", 3))  # ... then a batch write: straight into the partition's 3 buckets
    t.write(_rows([7], "b", 4))  # a new partition: postpone.default-bucket-num (1)
    assert {tb for b, tb in _totals(t)[("a",)] if b >= 0} == {3} and _totals(t)[("b",)] == {(0, 1)}
    assert {r["id"]: r["v"] for r in t.read(filter=[("dt", "=", "a")]).to_pylist()} == {1: 1, 2: 3, 3: 3, 4: 1, 5: 1}
    t.compact(full=True)
    assert {r["id"]: r["v"] for r in t.read(filter=[("dt", "=", "a")]).to_pylist()} == {1: 2, 2: 3, 3: 3, 4: 1, 5: 1}
    _staged(t, _rows([3], "a", 0), ["-D"])
    t.compact()
    assert sorted(r["id"] for r in t.read(filter=[("dt", "=", "a")]).to_pylist()) == [1, 2, 4, 5]


def test_without_the_batch_flag_every_write_is_postponed(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"), **{"postpone.batch-write-fixed-bucket": "false", "write-only": "true"})
    t.write(_rows([1, 2], "a", 1))
    assert t.read().num_rows == 0 and set(t.system_table("files").column("bucket").to_pylist()) == {-2}
    t.compact()
    assert t.read().num_rows == 2


def test_the_compaction_after_a_write_moves_staged_rows(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    _staged(t, _rows([1, 2], "a", 1))
    assert t.read().num_rows == 2 and -2 not in t.system_table("files").column("bucket").to_pylist()


def test_a_stream_sees_staged_rows_when_they_are_moved(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"), **{"write-only": "true"})
    t.write(_rows([1], "a", 1))
    follower = t.follow(stop_when_idle=True)
    assert [r["id"] for b in follower for r in b.data.to_pylist()] == [1]
    start = t.latest_snapshot_id()
    _staged(t, pa.concat_tables([_rows([2], "a", 2), _rows([1], "a", 0)]), ["+I", "-D"])
    assert sum(b.data.num_rows for b in t.follow({"scan.snapshot-id": str(start + 1)}, stop_when_idle=True)) == 0
    t.compact()
    rows = [r for b in t.follow({"scan.snapshot-id": str(start + 1)}, stop_when_idle=True) for r in b.data.to_pylist()]
    assert sorted((r["id"], r["_row_kind"]) for r in rows) == [(1, "-D"), (2, "+I")]
    assert t.read().to_pylist() == [{"id": 2, "dt": "a", "v": 2}]


def test_a_concurrent_move_conflicts_and_changes_nothing(tmp_path: Path) -> None:
    from mergetable.compaction.postpone import move_postponed

    t = _table(str(tmp_path / "t"), **{"write-only": "true"})
    _staged(t, _rows([1, 2], "a", 1))
    other = mt.open_table(t.uri)
    raced: list[Any] = []

    def select(bucket: Any) -> bool:  # called while this move plans: another one commits meanwhile
        if not raced:
            raced.append(move_postponed(other.fileio, other.table_schema, other.merge_function))
        return True

    names = {p.name for p in (tmp_path / "t").rglob("*.parquet")}
    with pytest.raises(CommitConflictError):
        move_postponed(t.fileio, t.table_schema, t.merge_function, select)
    assert raced[0] is not None and t.latest_snapshot_id() == raced[0].id
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2]
    live = {f.file_name for _, _, f in t.files()}
    assert {p.name for p in (tmp_path / "t").rglob("*.parquet")} == names | live  # the loser's files are gone


def test_dml_time_travel_and_rollback_on_a_postpone_table(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"), **{"write-only": "true", "postpone.default-bucket-num": "2"})
    t.write(_rows([1, 2, 3, 4], "a", 1))  # a batch write: fixed buckets, visible

    def state(**travel: Any) -> dict[int, int]:
        return {r["id"]: r["v"] for r in t.read(**travel).to_pylist()}

    assert t.delete([("id", "=", 2)]).num_deleted_rows == 1
    assert t.update([("id", "=", 3)], new_values={"v": 30}).num_updated_rows == 1
    src = _rows([4, 5], "a", 0).set_column(2, "v", pa.array([40, 50], pa.int64()))
    merged = t.merge(src, on=["id", "dt"]).when_matched_update_all().when_not_matched_insert_all().execute()
    assert (merged.num_target_rows_updated, merged.num_target_rows_inserted) == (1, 1)
    assert state() == {1: 1, 3: 30, 4: 40, 5: 50}
    assert {b for _, b, _ in t.files()} == {0, 1}  # DML are batch writes: nothing staged
    before_staging = t.latest_snapshot_id()
    _staged(t, _rows([1, 6], "a", 100))  # staged: invisible to the delete below
    assert t.delete([("id", "=", 1)]).num_deleted_rows == 1  # the visible id 1, a commit after the staged one
    t.compact()
    assert state() == {3: 30, 4: 40, 5: 50, 6: 100}  # the staged +I of id 1 is older than the -D: gone
    assert state(snapshot_id=1) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert state(snapshot_id=before_staging) == {1: 1, 3: 30, 4: 40, 5: 50}
    t.rollback_to(before_staging)
    assert state() == {1: 1, 3: 30, 4: 40, 5: 50} and -2 not in {b for _, b, _ in t.files()}


row = st.tuples(st.integers(0, 10), st.sampled_from(["a", "b"]), st.integers(0, 9), st.booleans())
step = st.one_of(
    st.tuples(st.sampled_from(["batch", "staged"]), st.lists(row, min_size=1, max_size=8)),
    st.tuples(st.just("compact"), st.booleans()),
)


@settings(
    max_examples=int(os.environ.get("MT_PROPERTY_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=8), default=st.integers(1, 3))
def test_postponed_rows_match_the_oracle_once_compacted(steps: list[Any], default: int) -> None:
    root = scratch_dir()
    try:
        t = _table(f"{root}/t", **{"write-only": "true", "postpone.default-bucket-num": str(default)})
        commits: list[tuple[dict[tuple[int, str], int | None], bool]] = []  # (writes, visible yet)

        def visible() -> dict[tuple[int, str], int]:
            state: dict[tuple[int, str], int] = {}
            for writes, shown in commits:
                if shown:
                    for key, v in writes.items():
                        if v is None:
                            state.pop(key, None)
                        else:
                            state[key] = v
            return state

        for s in steps:
            if s[0] == "compact":
                t.compact(full=s[1])
                commits = [(w, True) for w, _ in commits]
            else:
                last = {(k, dt): (None if d else v) for k, dt, v, d in s[1]}
                data = pa.table(
                    {"id": [k for k, _ in last], "dt": [dt for _, dt in last], "v": [v or 0 for v in last.values()]},
                    schema=SCHEMA,
                )
                kinds = ["-D" if v is None else "+I" for v in last.values()]
                if s[0] == "batch":
                    t.write(data, row_kind=kinds)
                else:
                    _staged(t, data, kinds)
                commits.append((last, s[0] == "batch"))
            assert {(r["id"], r["dt"]): r["v"] for r in t.read().to_pylist()} == visible(), s
        t.compact()
        commits = [(w, True) for w, _ in commits]
        assert {(r["id"], r["dt"]): r["v"] for r in t.read().to_pylist()} == visible()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_cli_compaction_moves_staged_rows_and_orphans_are_found_there(tmp_path: Path) -> None:
    import subprocess
    import sys

    t = _table(str(tmp_path / "t"), **{"write-only": "true"})
    _staged(t, _rows([1, 2], "a", 1))
    stray = tmp_path / "t" / "dt=a" / "bucket-postpone" / "data-stray-0.parquet"
    stray.write_bytes(b"not referenced")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "mergetable.cli.main", "--json", "compact", t.uri],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert t.read().num_rows == 2
    removed = t.remove_orphan_files(older_than_ms=int(stray.stat().st_mtime * 1000) + 1000, force=True)
    assert any(p.endswith("bucket-postpone/data-stray-0.parquet") for p in removed) and not stray.exists()
