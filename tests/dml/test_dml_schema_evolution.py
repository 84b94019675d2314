"""Delete, update and merge on a table whose schema evolved since its files were written: the rows are seen
in the current schema (added columns NULL, renamed ones by their new name, widened types, dropped columns
gone even when a column of the same name is added again), before and without any compaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.int32()), ("s", pa.string())])
Expr = Callable[[pc.Expression], pc.Expression]


@dataclass(frozen=True)
class Step:
    """A schema change (the latest snapshot is older than it), then: the column ``c`` the operations use, a
    condition on it that holds for id 1 (and maybe 2), an assignment of it and what that assigns to id 1, and
    a delete filter on it (with the ids it deletes)."""

    alter: Callable[[mt.Table], None]
    c: str
    holds: Expr
    new: Expr
    new_value: Any
    delete_filter: list[tuple[str, str, Any]]
    deleted: set[int]


def _add(t: mt.Table) -> None:
    t.alter.add_columns(pa.field("n", pa.int64()))


def _readd(t: mt.Table) -> None:
    t.alter.drop_columns(["s"])
    t.alter.add_columns(pa.field("s", pa.string()))  # a new column: the dropped one's values must not come back


STEPS = {
    "add": Step(_add, "n", lambda f: pc.coalesce(f, -1) == -1, lambda f: pc.coalesce(f, 0) + 10, 10,
                [("n", "=", 7)], set()),
    "rename": Step(lambda t: t.alter.rename_column("x", "y"), "y", lambda f: f > 1000, lambda f: f - 1,
                   1_999_999_999, [("y", ">", 1000)], {1}),
    "widen": Step(lambda t: t.alter.change_column_type("x", pa.int64()), "x", lambda f: f > 1000,
                  lambda f: f + f, 4_000_000_000, [("x", ">", 1000)], {1}),
    "drop and add again": Step(_readd, "s", lambda f: f.is_null(), lambda f: pc.coalesce(f, "z"), "z",
                               [("s", "=", "a")], set()),
}  # fmt: skip


def _evolved(uri: str, step: Step) -> tuple[mt.Table, dict[int, dict[str, Any]]]:
    t = mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "1"})
    t.write({"id": [1, 2], "x": pa.array([2_000_000_000, 5], pa.int32()), "s": ["a", "b"]})
    step.alter(t)
    before = {r["id"]: r for r in t.read().to_pylist()}
    assert before[1][step.c] != step.new_value
    return t, before


def _after(before: dict[int, dict[str, Any]], step: Step, changed: dict[int, Any]) -> list[dict[str, Any]]:
    rows = {i: dict(r) for i, r in before.items()}
    for i, value in changed.items():
        if value is None:
            del rows[i]
        else:
            rows[i][step.c] = value
    return [rows[i] for i in sorted(rows)]


def _read(t: mt.Table) -> list[dict[str, Any]]:
    return mt.open_table(t.fileio.root).read().sort_by("id").to_pylist()  # as another process sees it


@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_update(table_uri: str, step: Step) -> None:
    t, before = _evolved(table_uri, step)
    t.update([("id", "=", 1)], {step.c: step.new(pc.field(step.c))})
    assert _read(t) == _after(before, step, {1: step.new_value})


@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_delete_by_an_evolved_column(table_uri: str, step: Step) -> None:
    t, before = _evolved(table_uri, step)
    t.delete(step.delete_filter)
    assert _read(t) == _after(before, step, dict.fromkeys(step.deleted))


@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_merge_matched_update_and_delete(table_uri: str, step: Step) -> None:
    t, before = _evolved(table_uri, step)
    target = pc.field(f"target.{step.c}")
    holds = step.holds(target) & (pc.field("target.id") == 1)
    t.merge({"id": [1, 2]}).when_matched_update({step.c: step.new(target)}, condition=holds).execute()
    assert _read(t) == _after(before, step, {1: step.new_value})
    t.merge({"id": [1, 2]}).when_matched_delete(condition=pc.field("target.id") == 1).execute()
    assert _read(t) == _after(before, step, {1: None})


@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_merge_delete_on_an_evolved_column(table_uri: str, step: Step) -> None:
    t, before = _evolved(table_uri, step)
    holds = step.holds(pc.field(f"target.{step.c}")) & (pc.field("target.id") == 1)
    t.merge({"id": [1, 2]}).when_matched_delete(condition=holds).execute()
    assert _read(t) == _after(before, step, {1: None})


@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_merge_update_all_and_not_matched_by_source(table_uri: str, step: Step) -> None:
    t, before = _evolved(table_uri, step)
    source = pa.table({"id": [2], **{c: [before[2][c]] for c in t.schema.names if c != "id"}})
    target = pc.field(f"target.{step.c}")
    (
        t.merge(source)
        .when_matched_update_all()
        .when_not_matched_by_source_update({step.c: step.new(target)}, condition=step.holds(target))  # id 1 only
        .execute()
    )
    assert _read(t) == _after(before, step, {1: step.new_value})


@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_merge_insert_beside_evolved_rows(table_uri: str, step: Step) -> None:
    t, before = _evolved(table_uri, step)
    source = pa.table({"id": [2, 3], step.c: pa.array([None, before[1][step.c]], t.schema.field(step.c).type)})
    t.merge(source).when_not_matched_insert(
        {"id": pc.field("source.id"), step.c: pc.field("source." + step.c)}
    ).execute()
    expected = [*_after(before, step, {}), dict.fromkeys(t.schema.names) | {"id": 3, step.c: before[1][step.c]}]
    assert _read(t) == expected
