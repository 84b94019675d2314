"""Random deletes, updates and merges interleaved with writes and compactions, against a dict oracle
(deduplicate engine, partitioned, several buckets)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.string())])
Key = tuple[int, str]
Oracle = dict[Key, tuple[int | None, str | None]]

rows = st.lists(
    st.tuples(st.integers(0, 25), st.sampled_from(["x", "y"]), st.one_of(st.none(), st.integers(-50, 50))),
    min_size=1,
    max_size=12,
)
predicate = st.one_of(
    st.none(),
    st.tuples(st.just("v"), st.sampled_from(["<", ">=", "="]), st.integers(-50, 50)),
    st.tuples(st.just("k"), st.just("in"), st.lists(st.integers(0, 25), max_size=6)),
    st.tuples(st.just("p"), st.just("="), st.sampled_from(["x", "y"])),
)
op = st.one_of(
    st.tuples(st.just("write"), rows),
    st.tuples(st.just("delete"), predicate),
    st.tuples(st.just("update"), predicate, st.integers(-5, 5)),
    st.tuples(st.just("merge"), rows, st.integers(-50, 50), st.booleans()),
    st.tuples(st.just("compact"), st.booleans()),
)


def _holds(pred: tuple[str, str, Any] | None, key: Key, value: tuple[int | None, str | None]) -> bool:
    if pred is None:
        return True
    column, operator, literal = pred
    x = {"k": key[0], "p": key[1], "v": value[0]}[column]
    if x is None:
        return False
    if operator == "in":
        return x in literal
    return bool({"<": x < literal, ">=": x >= literal, "=": x == literal}[operator])


def _table(data: list[tuple[int, str, int | None]]) -> pa.Table:
    last = {(k, p): v for k, p, v in data}  # one row per key in the source (several would be ambiguous)
    return pa.table(
        {
            "k": [k for k, _ in last],
            "p": [p for _, p in last],
            "v": list(last.values()),
            "s": [f"src{v}" for v in last.values()],
        },
        schema=SCHEMA,
    )


def _apply(t: mt.Table, oracle: Oracle, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "write":
        src = _table(step[1])
        t.write(src)
        for r in src.to_pylist():
            oracle[(r["k"], r["p"])] = (r["v"], r["s"])
    elif kind == "delete":
        pred = step[1]
        t.delete(None if pred is None else [pred])
        for key in [k for k, val in oracle.items() if _holds(pred, k, val)]:
            del oracle[key]
    elif kind == "update":
        pred, delta = step[1], step[2]
        t.update(None if pred is None else [pred], {"v": pc.field("v") + delta}, new_values={"s": "updated"})
        for key, val in list(oracle.items()):
            if _holds(pred, key, val):
                oracle[key] = (None if val[0] is None else val[0] + delta, "updated")
    elif kind == "merge":
        src, cutoff, by_source = _table(step[1]), step[2], step[3]
        m = (
            t.merge(src)
            .when_matched_delete(pc.field("source.v") < cutoff)
            .when_matched_update({"v": pc.field("source.v"), "s": "'merged'"})
            .when_not_matched_insert_all(pc.field("source.v").is_valid())
        )
        if by_source:
            m = m.when_not_matched_by_source_update({"s": "'unmatched'"}, pc.field("target.v") > cutoff)
        m.execute()
        source = {(r["k"], r["p"]): (r["v"], r["s"]) for r in src.to_pylist()}
        existing = set(oracle)
        for key, val in list(oracle.items()):
            if key in source:
                sv = source[key][0]
                if sv is not None and sv < cutoff:
                    del oracle[key]
                else:
                    oracle[key] = (sv, "merged")
            elif by_source and val[0] is not None and val[0] > cutoff:
                oracle[key] = (val[0], "unmatched")
        for key, val in source.items():
            if key not in existing and val[0] is not None:
                oracle[key] = val
    elif kind == "upsert":
        src = _table(step[1])
        t.merge(src).when_matched_update_all().when_not_matched_insert_all().execute()
        for r in src.to_pylist():
            oracle[(r["k"], r["p"])] = (r["v"], r["s"])
    else:
        t.compact(full=step[1])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(op, min_size=1, max_size=8), buckets=st.integers(1, 3))
def test_delete_update_merge_match_the_oracle(steps: list[tuple[Any, ...]], buckets: int) -> None:
    root = tempfile.mkdtemp()
    try:
        t = mt.create_table(f"{root}/t", SCHEMA, ["k", "p"], ["p"], options={"bucket": str(buckets)})
        oracle: Oracle = {}
        for step in steps:
            _apply(t, oracle, step)
            got = {(r["k"], r["p"]): (r["v"], r["s"]) for r in t.read().to_pylist()}
            assert got == oracle, step
            assert t.count() == len(oracle)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _buckets_of_keys(t: mt.Table) -> dict[Key, set[int]]:
    """The buckets each live key's records are in (split by split)."""
    reader = t.split_reader(["k", "p"])
    out: dict[Key, set[int]] = {}
    for split in t.plan():
        for rows in reader.read_split(split):
            for r in rows.to_pylist():
                out.setdefault((r["k"], r["p"]), set()).add(split.bucket)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.one_of(op, st.tuples(st.just("upsert"), rows)), min_size=1, max_size=8))
def test_row_level_operations_on_dynamic_buckets_match_the_oracle(steps: list[tuple[Any, ...]]) -> None:
    """Dynamic buckets of 4 keys: updated, deleted and upserted keys stay in the bucket their HASH index names
    (the operations place the rows they read without looking it up)."""
    root = tempfile.mkdtemp()
    try:
        t = mt.create_table(f"{root}/t", SCHEMA, ["k", "p"], ["p"], options={"dynamic-bucket.target-row-num": "4"})
        oracle: Oracle = {}
        for step in steps:
            _apply(t, oracle, step)
            got = {(r["k"], r["p"]): (r["v"], r["s"]) for r in t.read().to_pylist()}
            assert got == oracle, step
            placed = _buckets_of_keys(t)
            assert set(placed) == set(oracle) and all(len(b) == 1 for b in placed.values()), step
    finally:
        shutil.rmtree(root, ignore_errors=True)
