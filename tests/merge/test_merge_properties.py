"""Property tests (hypothesis).

* Commit invariance: wherever Paimon's fold is associative, the visible result is the same whether the
  records arrive in one commit or spread over many (each commit pre-merged by the write buffer, then
  merged — or compacted step by step — with the older ones).
* The vectorized engines agree with a record-by-record reference fold.
* Layouts: records in write order (direct counting layout) and shuffled (sorted layout) agree.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from merge_support import KINDS, commits, engine, kv, make_schema, merge, visible

from mergetable.core.rowkind import RowKind
from mergetable.core.schema import SEQUENCE_NUMBER
from mergetable.merge.engines.partial_update_scalar import Record, fold_key

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
small = st.one_of(st.none(), st.integers(-5, 5))


def split(rows: list[Any], cuts: list[int]) -> list[list[Any]]:
    """``rows`` cut into consecutive commits at the given (sorted, unique) positions."""
    bounds = [0, *sorted({c % (len(rows) + 1) for c in cuts}), len(rows)]
    return [rows[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def chunk(values: list[Any] | None, batches: list[list[Any]]) -> list[Any] | None:
    if values is None:
        return None
    out, i = [], 0
    for b in batches:
        out.append(values[i : i + len(b)])
        i += len(b)
    return out


def compacted(
    fn: Any, schema: Any, batches: list[list[Any]], kinds: list[Any] | None, masks: list[Any] | None
) -> pa.Table:
    """Commit by commit, each new commit merged into the previous result (incremental compaction)."""
    seq = 0
    acc: pa.Table | None = None
    for i, batch in enumerate(batches):
        rows = kv(schema, batch, None if kinds is None else kinds[i], seq, None if masks is None else masks[i])
        seq += len(batch)
        pre = fn.merge(rows, seq_ordered=True)
        acc = pre if acc is None else fn.merge(pa.concat_tables([acc, pre]), seq_ordered=True)
    assert acc is not None
    return acc


def assert_invariant(
    schema: Any, rows: list[Any], cuts: list[int], kinds: list[str] | None = None, masks: list[Any] | None = None
) -> None:
    fn = engine(schema)
    once = visible(schema, merge(fn, kv(schema, rows, kinds, masks=masks)))
    batches = split(rows, cuts)
    k, m = chunk(kinds, batches), chunk(masks, batches)
    assert visible(schema, commits(fn, schema, batches, k, m)) == once
    assert visible(schema, compacted(fn, schema, batches, k, m)) == once


rows3 = st.lists(st.tuples(st.integers(0, 3), small, small), min_size=1, max_size=12)
cuts = st.lists(st.integers(0, 20), max_size=4)
INT3 = [("k", pa.int64()), ("a", pa.int64()), ("b", pa.int64())]


# -- commit invariance -------------------------------------------------------------------------------------
@SETTINGS
@given(rows3, cuts, st.lists(st.sampled_from(["+I", "+U", "-U", "-D"]), min_size=12, max_size=12))
def test_deduplicate_invariant(rows: list[Any], c: list[int], kinds: list[str]) -> None:
    assert_invariant(make_schema(INT3), rows, c, kinds[: len(rows)])


@SETTINGS
@given(
    rows3,
    cuts,
    st.lists(st.sampled_from(["+I", "-D"]), min_size=12, max_size=12),
    st.lists(st.sampled_from([None, ("k", "a"), ("k", "b"), ("k",)]), min_size=12, max_size=12),
)
def test_deduplicate_with_partial_writes_and_deletes_invariant(
    rows: list[Any], c: list[int], kinds: list[str], masks: list[Any]
) -> None:
    schema = make_schema(INT3, options={"table.delete.behavior": "allow"})
    assert_invariant(schema, rows, c, kinds[: len(rows)], masks[: len(rows)])


@SETTINGS
@given(rows3, cuts)
def test_first_row_and_versioned_invariant(rows: list[Any], c: list[int]) -> None:
    assert_invariant(make_schema(INT3, options={"merge-engine": "first-row"}), rows, c)
    versioned = {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "a"}
    assert_invariant(make_schema(INT3, options=versioned), rows, c)


@SETTINGS
@given(rows3, cuts, st.lists(st.sampled_from([None, ("k", "a"), ("k", "b")]), min_size=12, max_size=12))
def test_partial_update_invariant(rows: list[Any], c: list[int], masks: list[Any]) -> None:
    schema = make_schema(INT3, options={"merge-engine": "partial-update"})
    assert_invariant(schema, rows, c)
    assert_invariant(schema, rows, c, masks=masks[: len(rows)])


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), small, small, small, small), min_size=1, max_size=12), cuts)
def test_partial_update_sequence_groups_invariant(rows: list[Any], c: list[int]) -> None:
    fields = [("k", pa.int64()), ("g", pa.int64()), ("a", pa.int64()), ("s", pa.int64()), ("b", pa.int64())]
    schema = make_schema(
        fields,
        options={
            "merge-engine": "partial-update",
            "fields.g.sequence-group": "a,s",
            "fields.s.aggregate-function": "sum",
        },
    )
    assert_invariant(schema, rows, c)


AGG_CASES = [
    ("sum", pa.int64()),
    ("max", pa.int64()),
    ("min", pa.int64()),
    ("last_value", pa.int64()),
    ("last_non_null_value", pa.int64()),
    ("first_value", pa.int64()),
    ("first_non_null_value", pa.int64()),
    ("bool_and", pa.bool_()),
    ("bool_or", pa.bool_()),
    ("product", pa.int64()),
    ("listagg", pa.string()),
    ("collect", pa.list_(pa.int64())),
    ("merge_map", pa.map_(pa.int64(), pa.int64())),
    ("rbm32", pa.binary()),
]


def value_for(t: pa.DataType, x: int | None) -> Any:
    from mergetable.functions import to_bitmap

    if x is None:
        return None
    if pa.types.is_boolean(t):
        return x % 2 == 0
    if pa.types.is_string(t):
        return ["a", "b", " ", "c,d", ""][x % 5]
    if pa.types.is_list(t):
        return [x, x % 3]
    if pa.types.is_map(t):
        return [(x % 3, x)]
    if pa.types.is_binary(t):
        return to_bitmap(abs(x), 7)
    return x % 4 if x > 0 else x


@SETTINGS
@given(st.sampled_from(AGG_CASES), st.lists(st.tuples(st.integers(0, 3), small), min_size=1, max_size=12), cuts)
def test_aggregation_without_retraction_invariant(case: tuple[str, pa.DataType], data: list[Any], c: list[int]) -> None:
    function, t = case
    schema = make_schema(
        [("k", pa.int64()), ("v", t)], options={"merge-engine": "aggregation", "fields.v.aggregate-function": function}
    )
    assert_invariant(schema, [(k, value_for(t, x)) for k, x in data], c)


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 3), small), min_size=1, max_size=12),
    cuts,
    st.lists(st.sampled_from(["+I", "+U", "-U", "-D"]), min_size=12, max_size=12),
)
def test_sum_with_retraction_invariant(data: list[Any], c: list[int], kinds: list[str]) -> None:
    schema = make_schema(
        [("k", pa.int64()), ("v", pa.int64())],
        options={"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    )
    assert_invariant(schema, data, c, kinds[: len(data)])


# -- vectorized engines against record-by-record folds ---------------------------------------------------------
def reference_aggregation(
    schema: Any, fn: Any, rows: list[Any], kinds: list[str], remove_on_delete: bool
) -> list[dict[str, Any]]:
    """Paimon's AggregateMergeFunction + ReducerMergeFunctionWrapper, record by record."""
    by_key: dict[int, list[tuple[Any, str]]] = {}
    for r, k in zip(rows, kinds, strict=True):
        by_key.setdefault(r[0], []).append((r[1], k))
    out = []
    agg = fn.functions["v"]
    for key in sorted(by_key):
        records = by_key[key]
        if len(records) == 1:
            value, kind = records[0]
            if KINDS[kind] in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                out.append({"k": key, "v": value})
            continue
        state, acc, deleted = agg.new_state(), None, False
        for value, kind in records:
            deleted = remove_on_delete and kind == "-D"
            if deleted:
                acc = value
            elif kind in ("-U", "-D"):
                acc = agg.retract(acc, value, state)
            else:
                acc = agg.agg(acc, value, state)
        if not deleted:
            out.append({"k": key, "v": acc})
    return out


RETRACTABLE = [
    ("sum", pa.int64()),
    ("last_value", pa.int64()),
    ("last_non_null_value", pa.int64()),
    ("collect", pa.list_(pa.int64())),
    ("merge_map", pa.map_(pa.int64(), pa.int64())),
    ("product", pa.int64()),
]


@SETTINGS
@given(
    st.sampled_from(RETRACTABLE + [(n, t) for n, t in AGG_CASES if n not in {"product"}]),
    st.lists(st.tuples(st.integers(0, 3), small), min_size=1, max_size=14),
    st.lists(st.sampled_from(["+I", "+U", "-U", "-D"]), min_size=14, max_size=14),
    st.booleans(),
)
def test_aggregation_matches_reference_fold(
    case: tuple[str, pa.DataType], data: list[Any], kinds: list[str], remove: bool
) -> None:
    function, t = case
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": function}
    if remove:
        options["aggregation.remove-record-on-delete"] = "true"
    schema = make_schema([("k", pa.int64()), ("v", t)], options=options)
    fn = engine(schema)
    rows = [(k, value_for(t, x)) for k, x in data]
    kinds = kinds[: len(rows)]
    if function == "product":
        rows = [(k, None if v == 0 else v) for k, v in rows]  # avoid division by zero
    try:
        expected = reference_aggregation(schema, fn, rows, kinds, remove)
    except Exception as exc:  # the engine must fail the same way
        import pytest

        with pytest.raises(type(exc)):
            merge(fn, kv(schema, rows, kinds))
        return
    assert visible(schema, merge(fn, kv(schema, rows, kinds))) == expected


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 2), small, small, small, small, small), min_size=1, max_size=12),
    st.lists(st.sampled_from(["+I", "+U", "-U", "-D"]), min_size=12, max_size=12),
    st.lists(st.sampled_from([None, ("k", "g", "a"), ("k", "b", "c"), ("k", "h", "c")]), min_size=12, max_size=12),
    st.sampled_from(["none", "ignore-delete", "remove-on-group"]),
    st.sampled_from(["sum", "first_value", "last_value", "max", None]),
)
def test_partial_update_matches_reference_fold(
    rows: list[Any], kinds: list[str], masks: list[Any], mode: str, function: str | None
) -> None:
    fields = [(c, pa.int64()) for c in ["k", "g", "a", "h", "b", "c"]]
    options = {"merge-engine": "partial-update", "fields.g.sequence-group": "a", "fields.h.sequence-group": "b"}
    if function is not None:
        options["fields.b.aggregate-function"] = function
        options["fields.b.ignore-retract"] = "true" if function in ("first_value", "max") else "false"
    if mode == "ignore-delete":
        options["ignore-delete"] = "true"
    elif mode == "remove-on-group":
        options["partial-update.remove-record-on-sequence-group"] = "g"
    schema = make_schema(fields, options=options)
    fn = engine(schema)
    kinds, masks = kinds[: len(rows)], masks[: len(rows)]
    result = fn.merge(kv(schema, rows, kinds, masks=masks))
    got = {r["k"]: r for r in result.to_pylist()}
    names = list(schema.column_names)
    by_key: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_key.setdefault(r[0], []).append(i)
    columns = [c for c in names if c != "k"]
    for key, idx in by_key.items():
        if len(idx) == 1:
            continue
        records = [
            Record(
                int(KINDS[kinds[i]]),
                dict(zip(names, rows[i], strict=True)),
                None if masks[i] is None else frozenset(masks[i]),
            )
            for i in idx
        ]
        values, kind = fold_key(fn.cfg, columns, fn.nullable, records)
        assert {c: got[key][c] for c in columns} == values
        assert got[key]["_VALUE_KIND"] == kind


# -- layouts ------------------------------------------------------------------------------------------------------
@SETTINGS
@given(
    st.sampled_from(["deduplicate", "partial-update", "aggregation", "first-row"]),
    rows3,
    st.randoms(use_true_random=False),
)
def test_write_order_and_shuffled_runs_agree(engine_name: str, rows: list[Any], rnd: Any) -> None:
    options = {"merge-engine": engine_name}
    if engine_name == "aggregation":
        options["fields.a.aggregate-function"] = "sum"
    schema = make_schema(INT3, options=options)
    fn = engine(schema)
    table = kv(schema, rows)
    order = list(range(len(rows)))
    rnd.shuffle(order)
    shuffled = table.take(pa.array(order))
    a, b = fn.merge(table, seq_ordered=True), fn.merge(shuffled)
    assert a.to_pylist() == b.to_pylist()
    assert np.all(np.diff(a.column("k").to_numpy()) > 0)
    assert set(a.column(SEQUENCE_NUMBER).to_pylist()) <= set(range(len(rows)))
