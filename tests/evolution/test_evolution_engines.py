"""Every merge engine merges correctly across schema changes (a dict oracle), and alters race with writers."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt

ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    "first-row": {"merge-engine": "first-row"},
}


def _fold(engine: str, old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """One key's oracle row after ``new`` (columns by field id: 'v' is the value column's field id 1)."""
    if old is None:
        return dict(new)
    if engine == "deduplicate":
        return dict(new)
    if engine == "first-row":
        return old
    out = dict(old)
    for c, value in new.items():
        if c == "v" and engine == "aggregation":
            out[c] = value if old.get(c) is None else (old[c] if value is None else old[c] + value)
        elif value is not None:
            out[c] = value
        elif engine == "aggregation":
            out.setdefault(c, None)
    return out


# op: ("write", keys, value) | ("add",) | ("rename",) | ("widen",) | ("compact",)
OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"), st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True), st.integers(-9, 9)
        ),
        st.tuples(st.sampled_from(["add", "rename", "widen", "compact", "drop"])),
    ),
    min_size=2,
    max_size=9,
)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_engines_merge_across_schema_changes_like_a_dict_oracle(
    tmp_path_factory: pytest.TempPathFactory, engine: str, ops: list[tuple[Any, ...]]
) -> None:
    uri = str(tmp_path_factory.mktemp("ev") / "t")
    t = mt.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int32())]), ["id"], options=ENGINES[engine])
    # the oracle names columns by field id: "v" is the value column (renamed to w, widened), x<n> added ones
    oracle: dict[int, dict[str, Any]] = {}
    names = {"v": "v"}  # oracle name -> current table name
    added: list[str] = []
    dropped = False
    for n, op in enumerate(ops):
        if op[0] == "write":
            _, keys, value = op
            extra = dict.fromkeys(added, value * 10 if n % 2 else None)
            data: dict[str, list[Any]] = {"id": keys, names["v"]: [value] * len(keys)}
            data.update({names[a]: [extra[a]] * len(keys) for a in added})
            types = {c: t.schema.field(c).type for c in data}
            t.write(pa.table({c: pa.array(vs, types[c]) for c, vs in data.items()}))
            for k in keys:
                oracle[k] = _fold(engine, oracle.get(k), {"v": value, **extra})
        elif op[0] == "add":
            name = f"x{n}"
            t.alter.add_columns(pa.field(name, pa.int64()))
            added.append(name)
            names[name] = name
            for row in oracle.values():
                row[name] = None
        elif op[0] == "rename":
            new = "w" if names["v"] == "v" else "v"
            t.alter.rename_column(names["v"], new)
            names["v"] = new
        elif op[0] == "widen":
            if t.schema.field(names["v"]).type == pa.int32():
                t.alter.change_column_type(names["v"], pa.int64())
        elif op[0] == "drop" and added and not dropped:
            gone = added.pop(0)
            t.alter.drop_columns(names.pop(gone))
            dropped = True
            for row in oracle.values():
                row.pop(gone, None)
        else:
            t.compact(full=True)
        expected = sorted(
            ({"id": k, **{names[c]: v for c, v in row.items()}} for k, row in oracle.items()), key=lambda r: r["id"]
        )
        got = mt.open_table(uri).read().to_pylist()
        assert [{c: r.get(c) for c in t.schema.names} for r in got] == [
            {c: r.get(c) for c in t.schema.names} for r in expected
        ]


def _writer(uri: str, w: int, commits: int) -> None:
    t = mt.open_table(uri)
    for n in range(commits):
        writer = t.new_writer()  # prepared under the schema this process opened with, committed after alters
        row = {"id": [w * 100 + n], "v": [f"{w}-{n}"]}
        writer.write(pa.table({f.name: row.get(f.name, pa.nulls(1, f.type)) for f in t.schema}, schema=t.schema))
        t.commit(writer.prepare_commit())


def _alterer(uri: str, k: int, count: int) -> None:
    t = mt.open_table(uri)
    for i in range(count):
        t.alter.add_columns(pa.field(f"a{k}_{i}", pa.int64()))


@pytest.mark.slow
def test_alters_race_safely_with_writer_processes(table_uri: str) -> None:
    mt.create_table(
        table_uri,
        pa.schema([("id", pa.int64()), ("v", pa.string())]),
        ["id"],
        options={
            "commit.max-retries": "200",
            "commit.max-retry-wait": "100ms",
            "num-sorted-run.compaction-trigger": "3",
        },
    )
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(table_uri, w, 5)) for w in range(3)]
    procs += [ctx.Process(target=_alterer, args=(table_uri, k, 4)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    t = mt.open_table(table_uri)
    assert t.table_schema.id == 8  # two alterers x four columns: every change landed once, ids contiguous
    added = {f"a{k}_{i}" for k in range(2) for i in range(4)}
    assert set(t.schema.names) == {"id", "v"} | added
    assert [f.id for f in t.table_schema.fields][2:] == list(range(2, 10))  # one new field id per column
    rows = t.read().to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(w * 100 + n for w in range(3) for n in range(5))
    assert all(r["v"] == f"{r['id'] // 100}-{r['id'] % 100}" for r in rows)
