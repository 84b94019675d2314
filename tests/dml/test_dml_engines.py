"""What delete, update and merge mean on each merge engine, and every refusal: a typed error naming the
option, column or argument, with the table unchanged (no new snapshot, same rows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.core.errors import FilterError, MergeError, OptionsError, SchemaError, UnsupportedError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64())])


def _table(uri: str, n: int = 4, **options: str) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "2", **options})
    t.write(pa.table({"id": list(range(n)), "name": [f"n{i}" for i in range(n)], "v": [float(i) for i in range(n)]}))
    return t


def _rows(t: mt.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.read().to_pylist())


def _refused(t: mt.Table, error: type[Exception], match: str, call: Callable[[], Any]) -> None:
    before, version = _rows(t), t.version
    with pytest.raises(error, match=match):
        call()
    assert _rows(t) == before and t.version == version


def test_deduplicate_delete_update_merge(table_uri: str) -> None:
    t = _table(table_uri, n=6)
    snap = t.delete([("v", "<", 2)])
    assert snap is not None and snap.properties == {"operation": "DELETE"}
    assert [r[0] for r in _rows(t)] == [2, 3, 4, 5]
    assert t.delete([("id", "=", 99)]).snapshot is None  # nothing matched: no commit
    t.update([("id", "in", [2, 3])], {"v": pc.field("v") * 10, "name": "'big'"})
    assert _rows(t) == [(2, "big", 20.0), (3, "big", 30.0), (4, "n4", 4.0), (5, "n5", 5.0)]
    t.update(set={"v": 0})  # every row; an int literal cast to the double column
    assert {r[2] for r in _rows(t)} == {0.0}
    t.delete()
    assert t.read().num_rows == 0 and t.count() == 0


def test_update_set_is_keyword_or_second_positional(table_uri: str) -> None:
    t = _table(table_uri)
    t.update([("id", "=", 1)], new_values={"name": "x"})
    t.update(filter=[("id", "=", 2)], set={"name": "'y'"})
    assert [r[1] for r in _rows(t)] == ["n0", "x", "y", "n3"]


def test_merge_clause_order_and_plain_names(table_uri: str) -> None:
    t = _table(table_uri, n=4)
    src = pa.table({"id": [1, 2, 7], "w": [10.0, -1.0, 7.0], "name": ["a", "b", "c"]})
    (
        t.merge(src, on="id", source_alias="s", target_alias="t")
        .when_matched_delete(pc.field("w") < 0)  # plain 'w': only the source has it
        .when_matched_update({"v": pc.field("w") + pc.field("t.v")})
        .when_matched_update({"v": -1.0})  # never reached: the first matching clause wins
        .when_not_matched_insert({"id": pc.field("s.id"), "v": pc.field("w")})
        .when_not_matched_by_source_delete(pc.field("t.id") == 0)
        .execute()
    )
    assert _rows(t) == [(1, "n1", 11.0), (3, "n3", 3.0), (7, None, 7.0)]


def test_merge_into_an_empty_table_and_no_clause(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id"])
    with pytest.raises(MergeError, match="no clause was added"):  # as in Delta: a merge needs a clause
        t.merge({"id": [1], "name": ["a"], "v": [1.0]}).execute()
    assert t.version is None
    t.merge([{"id": 1, "name": "a", "v": 1.0}]).when_not_matched_insert_all().execute()
    assert _rows(t) == [(1, "a", 1.0)]


def test_merge_several_source_rows_for_one_target_row(table_uri: str) -> None:
    t = _table(table_uri)
    dup = pa.table({"id": [1, 1], "name": ["a", "b"], "v": [1.0, 2.0]})
    _refused(t, MergeError, r'several source rows.*"id": 1', lambda: t.merge(dup).when_matched_update_all().execute())
    t.merge(dup).when_matched_delete().execute()  # an unconditional delete may match a row twice, as in Delta
    assert [r[0] for r in _rows(t)] == [0, 2, 3]


def test_partial_update_engine(table_uri: str) -> None:
    t = _table(table_uri, **{"merge-engine": "partial-update"})
    _refused(t, OptionsError, r"partial-update\.remove-record-on-delete", lambda: t.delete([("id", "=", 1)]))
    _refused(t, OptionsError, r"partial-update\.remove-record-on-delete", lambda: t.delete_keys({"id": [1]}))
    t.update([("id", "<", 2)], {"v": pc.field("v") + 1})
    assert [r[2] for r in _rows(t)] == [1.0, 2.0, 2.0, 3.0]
    _refused(t, MergeError, "NULL.*'name'", lambda: t.update([("id", "=", 3)], {"name": None}))
    src = pa.table({"id": [3], "name": pa.array([None], pa.string()), "v": [5.0]})
    _refused(t, MergeError, "NULL", lambda: t.merge(src).when_matched_update_all().execute())
    t2 = _table(table_uri + "2", **{"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"})
    t2.delete([("id", ">=", 2)])
    assert [r[0] for r in _rows(t2)] == [0, 1]


def test_aggregation_engine(table_uri: str) -> None:
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    t = _table(table_uri, **opts)
    for call in (lambda: t.delete([("id", "=", 1)]), lambda: t.delete_keys({"id": [1]}), lambda: t.delete()):
        _refused(t, OptionsError, r"aggregation\.remove-record-on-delete", call)
    _refused(t, UnsupportedError, "aggregat", lambda: t.update([("id", "=", 1)], {"v": 0.0}))
    _refused(
        t, OptionsError, r"aggregation\.remove-record-on-delete", lambda: t.merge({"id": [1]}).when_matched_delete()
    )
    src = pa.table({"id": [3, 20], "name": ["x", "y"], "v": [5.0, 1.0]})
    t.merge(src).when_not_matched_insert_all().execute()
    assert _rows(t) == [(0, "n0", 0.0), (1, "n1", 1.0), (2, "n2", 2.0), (3, "n3", 3.0), (20, "y", 1.0)]
    t2 = _table(table_uri + "2", **opts, **{"aggregation.remove-record-on-delete": "true"})
    t2.delete([("id", "<", 2)])
    assert [r[0] for r in _rows(t2)] == [2, 3]


def test_first_row_and_versioned_engines(table_uri: str) -> None:
    t = _table(table_uri, n=3, **{"merge-engine": "first-row"})
    _refused(t, UnsupportedError, "first-row", lambda: t.delete([("id", "=", 1)]))
    _refused(t, UnsupportedError, "first-row", lambda: t.update([("id", "=", 1)], {"v": 0.0}))
    t.merge(pa.table({"id": [1, 5], "name": ["x", "y"], "v": [9.0, 1.0]})).when_not_matched_insert_all().execute()
    assert _rows(t) == [(0, "n0", 0.0), (1, "n1", 1.0), (2, "n2", 2.0), (5, "y", 1.0)]
    v = _table(table_uri + "v", n=3, **{"merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "id"})
    _refused(v, UnsupportedError, "versioned", lambda: v.delete([("id", "=", 1)]))
    v.update([("id", "=", 1)], new_values={"name": "x"})  # the same version: the newer row wins
    assert [r[1] for r in _rows(v)] == ["n0", "x", "n2"]


def test_ignore_delete_and_delete_behavior(table_uri: str) -> None:
    t = _table(table_uri, **{"ignore-delete": "true"})
    _refused(t, OptionsError, "'ignore-delete'", lambda: t.delete())
    _refused(t, OptionsError, "'ignore-delete'", lambda: t.delete_keys({"id": [1]}))
    d = _table(table_uri + "d", **{"table.delete.behavior": "disable"})
    _refused(d, OptionsError, "'table.delete.behavior'", lambda: d.delete([("id", "=", 1)]))


def test_bad_arguments_are_typed_errors_naming_the_culprit(table_uri: str) -> None:
    t = _table(table_uri)
    cases: list[tuple[type[Exception], str, Callable[[], Any]]] = [
        (SchemaError, "argument 'filter'.*delete_keys", lambda: t.delete(pa.table({"id": [1]}))),
        (SchemaError, "column 'nope'", lambda: t.delete([("nope", "=", 1)])),
        (SchemaError, "argument 'filter'.*empty", lambda: t.delete([])),
        (SchemaError, "argument 'filter'.*empty", lambda: t.update([], {"v": 1.0})),
        (SchemaError, "argument 'filter'", lambda: t.update("id = 1", {"v": 1.0})),  # type: ignore[arg-type]
        (FilterError, "column 'id'", lambda: t.delete([("id", "=", "abc")])),
        (SchemaError, "column 'id'.*argument 'keys'", lambda: t.delete_keys({"v": [1.0]})),
        (SchemaError, "argument 'set'", lambda: t.update([("id", "=", 1)])),
        (SchemaError, "column 'nope'", lambda: t.update(set={"nope": 1})),
        (SchemaError, "column 'id'.*primary-key", lambda: t.update(set={"id": 5})),
        (SchemaError, "column 'v'", lambda: t.update(set={"v": "not a number"})),
        (SchemaError, "column 'v'.*cannot evaluate", lambda: t.update(set={"v": pc.field("missing") + 1})),
        (SchemaError, "column 'name'", lambda: t.update(set={"name": pc.field("v") + pc.field("name")})),
        (SchemaError, "column 'nope'.*argument 'on'", lambda: t.merge({"id": [1]}, on="nope")),
        (SchemaError, "column 'v'.*argument 'on'", lambda: t.merge({"id": [1]}, on=["id", "v"])),
        (SchemaError, "argument 'source_alias'", lambda: t.merge({"id": [1]}, source_alias="")),
        (SchemaError, "must differ", lambda: t.merge({"id": [1]}, source_alias="x", target_alias="x")),
        (SchemaError, "argument 'source'", lambda: t.merge(42)),
        (SchemaError, "argument 'condition'", lambda: t.merge({"id": [1]}).when_matched_delete("id = 1")),  # type: ignore[arg-type]
        (SchemaError, "primary key", lambda: t.merge({"id": [1]}).when_not_matched_insert({"v": 1.0})),
        (SchemaError, "column 'id'.*primary-key", lambda: t.merge({"id": [1]}).when_matched_update({"id": 2})),
        (SchemaError, "column 'name'", lambda: t.merge({"id": [1]}).when_matched_update_all()),
        (SchemaError, "argument 'set'", lambda: t.merge({"id": [1]}).when_matched_update({})),
        (
            SchemaError,
            "not boolean",
            lambda: t.merge({"id": [1], "v": [1.0]}).when_matched_delete(pc.field("source.v")).execute(),
        ),
        (
            SchemaError,
            "cannot evaluate",
            lambda: t.merge({"id": [1], "v": [1.0]}).when_matched_delete(pc.field("v") > 0).execute(),  # ambiguous
        ),
        (OptionsError, "'limit'", lambda: t.history(limit=-1)),
    ]
    for error, match, call in cases:
        _refused(t, error, match, call)
