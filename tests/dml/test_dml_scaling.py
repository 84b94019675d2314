"""Row-level operations touch only what can match, and a large merge runs in parts: files of partitions or key
ranges that cannot match are neither read (they are removed from disk before the operation) nor rewritten,
and the upsert path and the merge in parts give the oracle's rows."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.core.errors import MergeError
from mergetable.dml import merge as merge_module
from mergetable.dml import upsert as upsert_module

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.string())])


def _rows(ids: list[int], p: str | list[str], v: int | list[int], s: str = "x") -> pa.Table:
    n = len(ids)
    ps = p if isinstance(p, list) else [p] * n
    vs = v if isinstance(v, list) else [v] * n
    return pa.table({"id": ids, "p": ps, "v": vs, "s": [s] * n}, schema=SCHEMA)


def _files_of(t: mt.Table, partition: tuple[str, ...] | None = None) -> list[str]:
    return [
        t.path_factory.data_file(p, b, f.file_name)
        for p, b, f in t.files()
        if partition is None or tuple(p) == partition
    ]


def _added_partitions(t: mt.Table) -> set[tuple[str, ...]]:
    snap = t.latest_snapshot()
    assert snap is not None
    return {tuple(e.partition) for e in t.delta_entries(snap)}


def _state(t: mt.Table) -> dict[tuple[int, str], tuple[int, str]]:
    rows = t.read().to_pylist()
    return {(r["id"], r["p"]): (r["v"], r["s"]) for r in rows}


def test_update_reads_and_rewrites_only_the_partitions_its_filter_names(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id", "p"], partition_keys=["p"])
    t.write(pa.concat_tables([_rows(list(range(50)), "a", 1), _rows(list(range(50)), "b", 1)]))
    for path in _files_of(t, ("b",)):  # a read of partition b would fail now
        os.remove(path)
    t.update([("p", "=", "a"), ("id", "<", 10)], {"v": pc.multiply(pc.field("v"), 5)})
    assert _added_partitions(t) == {("a",)}
    got = t.read(filter=[("p", "=", "a")]).to_pydict()
    assert sorted(zip(got["id"], got["v"])) == [(i, 5 if i < 10 else 1) for i in range(50)]


def test_upsert_merge_reads_and_rewrites_only_the_partitions_of_its_source(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id", "p"], partition_keys=["p"])
    t.write(pa.concat_tables([_rows(list(range(3000)), "a", 1), _rows(list(range(3000)), "b", 1)]))
    for path in _files_of(t, ("b",)):
        os.remove(path)
    source = _rows(list(range(2000, 4000)), "a", 7, "new")  # more keys than an in-list would take
    t.merge(source).when_matched_update_all().when_not_matched_insert_all().execute()
    assert _added_partitions(t) == {("a",)}
    got = t.read(filter=[("p", "=", "a")]).to_pydict()
    assert sorted(zip(got["id"], got["v"])) == [(i, 1 if i < 2000 else 7) for i in range(4000)]


def test_upsert_merge_skips_files_outside_the_key_range_of_its_source(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id"], options={"write-only": "true"})
    t.write(_rows(list(range(2000)), "a", 1))
    (low,) = _files_of(t)
    t.write(_rows(list(range(5000, 7000)), "a", 2))
    os.remove(low)  # keys 0..1999: outside the source's range
    source = _rows(list(range(6000, 8000)), "a", 9)
    t.merge(source).when_matched_update_all().when_not_matched_insert_all().execute()
    got = t.read(filter=[("id", ">=", 5000)]).to_pydict()
    assert sorted(zip(got["id"], got["v"])) == [(i, 2 if i < 6000 else 9) for i in range(5000, 8000)]


def _oracle_upsert(state: dict[tuple[int, str], tuple[int, str]], source: pa.Table, update: bool, insert: bool) -> None:
    for r in source.to_pylist():
        key = (r["id"], r["p"])
        if (key in state and update) or (key not in state and insert):
            state[key] = (r["v"], r["s"])


@pytest.mark.parametrize("clauses", ["both", "update", "insert"])
def test_upserts_in_parts_match_the_oracle(table_uri: str, monkeypatch: pytest.MonkeyPatch, clauses: str) -> None:
    monkeypatch.setattr(upsert_module, "PART_ROWS", 7)
    update, insert = clauses in ("both", "update"), clauses in ("both", "insert")
    t = mt.create_table(table_uri, SCHEMA, ["id", "p"], partition_keys=["p"], options={"bucket": "3"})
    rng = np.random.default_rng(5)
    first = _rows(list(range(40)), [("a", "b")[i % 2] for i in range(40)], list(range(40)))
    t.write(first)
    state = _state(t)
    for round_ in range(4):
        ids = rng.choice(80, 30, replace=False).tolist()
        source = _rows(ids, [("a", "b")[i % 2] for i in ids], rng.integers(0, 100, 30).tolist(), f"r{round_}")
        m = t.merge(source)
        m = m.when_matched_update_all() if update else m
        m = m.when_not_matched_insert_all() if insert else m
        m.execute()
        _oracle_upsert(state, source, update, insert)
        assert _state(t) == state


def test_upsert_with_a_repeated_source_key_resolves_as_the_general_merge(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id", "p"])
    t.write(_rows([1, 2], "a", 0))
    t.merge(_rows([3, 3], "a", [1, 2])).when_matched_update_all().when_not_matched_insert_all().execute()
    assert _state(t)[(3, "a")] == (2, "x")  # the later source row wins, as in write()
    with pytest.raises(MergeError, match="several source rows"):
        t.merge(_rows([1, 1], "a", [1, 2])).when_matched_update_all().when_not_matched_insert_all().execute()
    assert _state(t) == {(1, "a"): (0, "x"), (2, "a"): (0, "x"), (3, "a"): (2, "x")}


def test_a_general_merge_in_parts_matches_one_in_a_single_part(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    base = _rows(list(range(60)), [("a", "b")[i % 3 == 0] for i in range(60)], rng.integers(0, 50, 60).tolist())
    ids = rng.choice(120, 70, replace=False).tolist()
    source = _rows(ids, [("a", "b")[i % 3 == 0] for i in ids], rng.integers(0, 50, 70).tolist(), "src")
    results = []
    for part_rows in (1 << 19, 4):
        monkeypatch.setattr(merge_module, "SOURCE_PART_ROWS", part_rows)
        t = mt.create_table(str(tmp_path / f"t{part_rows}"), SCHEMA, ["id", "p"], options={"bucket": "2"})
        t.write(base)
        (
            t.merge(source)
            .when_matched_delete(condition=pc.field("source.v") < 10)
            .when_matched_update({"v": pc.field("source.v") + pc.field("target.v")})
            .when_not_matched_insert_all(condition=pc.field("source.v") >= 5)
            .execute()
        )
        results.append(_state(t))
    assert results[0] == results[1]
    assert len(results[0]) > 60
