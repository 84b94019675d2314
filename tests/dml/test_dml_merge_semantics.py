"""Merge semantics shared with Delta and Spark: NaN in conditions and join keys, duplicate source keys among
inserted rows (resolved as ``write()`` resolves them), a merge without a clause."""

from __future__ import annotations

import math
import operator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.core.errors import MergeError
from mergetable.dml.evaluate import project
from mergetable.dml.nan_order import spark_nan_order

NAN, INF = float("nan"), float("inf")
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64())])


def _table(uri: str, rows: dict[str, list[Any]], **options: str) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"], options=options or None)
    t.write(pa.table(rows, schema=SCHEMA))
    return t


def _names(t: mt.Table) -> dict[int, str]:
    rows = t.read().to_pydict()
    return dict(zip(rows["id"], rows["name"], strict=True))


def test_conditions_order_nan_as_spark(table_uri: str) -> None:
    t = _table(table_uri, {"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"], "v": [NAN, 1.0, INF, None]})
    source = pa.table({"id": [1, 2, 3, 4], "w": [NAN, NAN, NAN, NAN]})
    (
        t.merge(source)
        .when_matched_update({"name": "'equal'"}, condition=pc.field("target.v") == pc.field("source.w"))
        .when_matched_update({"name": "'greater'"}, condition=pc.field("source.w") > pc.field("target.v"))
        .execute()
    )
    assert _names(t) == {1: "equal", 2: "greater", 3: "greater", 4: "d"}  # NaN = NaN, NaN > inf; NULL holds not
    t.merge({"id": [9]}).when_not_matched_by_source_update(
        {"name": "'below'"}, condition=(pc.field("v") < NAN) & (pc.field("v") != NAN) & (pc.field("v") <= NAN)
    ).execute()
    assert _names(t) == {1: "equal", 2: "below", 3: "below", 4: "d"}
    t.merge({"id": [9]}).when_not_matched_by_source_delete(condition=pc.field("v") >= NAN).execute()
    assert _names(t) == {2: "below", 3: "below", 4: "d"}


def test_float_join_keys_match_as_in_spark(table_uri: str) -> None:
    t = _table(table_uri, {"id": [1, 2, 3], "name": ["a", "b", "c"], "v": [NAN, 0.0, None]})
    source = pa.table({"v": [-0.0, NAN, None], "name": ["zero", "nan", "null"]})
    t.merge(source, on="v").when_matched_update({"name": pc.field("source.name")}).execute()
    assert _names(t) == {1: "nan", 2: "zero", 3: "c"}  # -0.0 = 0.0 and NaN = NaN; NULL never matches


def test_duplicate_inserted_keys_resolve_in_source_order_as_write_does(table_uri: str) -> None:
    t = _table(table_uri, {"id": [1], "name": ["a"], "v": [1.0]})
    source = pa.table({"id": [5, 5, 6, 6], "name": ["first", "second", "x", "y"], "v": [1.0, -1.0, -1.0, 1.0]})
    (
        t.merge(source)
        .when_not_matched_insert_all(condition=pc.field("source.v") < 0)
        .when_not_matched_insert_all()
        .execute()
    )
    reference = _table(table_uri + "-write", {"id": [1], "name": ["a"], "v": [1.0]})
    reference.write(source)
    assert t.read().to_pylist() == reference.read().to_pylist()
    assert _names(t) == {1: "a", 5: "second", 6: "y"}  # the later source row of a key wins, as in write()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"merge-engine": "first-row"}, {5: 1.0}),
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}, {5: 3.0}),
        ({"merge-engine": "partial-update"}, {5: 2.0}),
    ],
)
def test_duplicate_inserted_keys_follow_the_merge_engine(
    table_uri: str, options: dict[str, str], expected: dict[int, float]
) -> None:
    t = _table(table_uri, {"id": [1], "name": ["a"], "v": [1.0]}, **options)
    t.merge(pa.table({"id": [5, 5], "name": ["p", None], "v": [1.0, 2.0]})).when_not_matched_insert_all().execute()
    rows = t.read(filter=[("id", "=", 5)]).to_pydict()
    assert dict(zip(rows["id"], rows["v"], strict=True)) == expected
    assert rows["name"] == ["p"]


def test_a_merge_without_clause_is_an_error(table_uri: str) -> None:
    t = _table(table_uri, {"id": [1], "name": ["a"], "v": [1.0]})
    with pytest.raises(MergeError, match="no clause was added"):
        t.merge({"id": [1, 2], "name": ["x", "y"], "v": [0.0, 0.0]}).execute()
    assert t.version == 1


def test_every_comparison_of_special_values_follows_spark() -> None:
    values = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, None]
    a = [x for x in values for _ in values]
    b = [y for _ in values for y in values]
    t = pa.table(
        {"a": pa.array(a, pa.float64()), "b": pa.array(b, pa.float32()), "i": [1] * len(a), "s": ["x"] * len(a)}
    )

    def order(x: float) -> tuple[int, float]:
        return (1, 0.0) if math.isnan(x) else (0, x)

    ops = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]
    for op in ops:
        for left, right, pairs in [
            (pc.field("a"), pc.field("b"), zip(a, b, strict=True)),
            (pc.field("a"), pc.scalar(NAN), ((x, NAN) for x in a)),
            (pc.scalar(INF), pc.field("a"), ((INF, x) for x in a)),
        ]:
            got = project(t, {"r": spark_nan_order(op(left, right), t.schema)}, "test").column("r").to_pylist()
            want = [None if x is None or y is None else op(order(x), order(y)) for x, y in pairs]
            assert got == want, (op, str(left), str(right))
    clean = t.filter(~pc.is_nan(pc.field("a")) & ~pc.is_nan(pc.field("b")))
    for e in [
        pc.field("s").isin(["x", "y"]) & (pc.field("i") > 0.5),
        pc.if_else(pc.field("a") > 0, pc.field("i") * 2, pc.field("i")) == 2,
        pc.round(pc.field("a"), 2) >= pc.field("b"),
        pc.match_substring(pc.utf8_upper(pc.field("s")), "X") | pc.field("a").is_null(),
        pc.field("a").cast(pa.int64(), safe=False) != 0,
    ]:  # without NaN, the same results as pyarrow's own
        rewritten = spark_nan_order(e, t.schema)
        assert project(clean, {"r": rewritten}, "test").equals(project(clean, {"r": e}, "test")), str(e)
