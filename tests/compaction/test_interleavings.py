"""Property: several writers, each open across other commits and compactions, commit in any interleaving.

The state at every snapshot equals a dict oracle that applies each commit's rows in commit order (input
order within a commit), for every merge engine; no COMPACT snapshot changes the visible rows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import pytest
from compaction_support import batch, create, scratch_dir, state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt

Row = tuple[str, int, int | None, str | None]
Value = tuple[Any, ...]
Apply = Callable[[dict[int, Value], Row], None]


def _dedupe(view: dict[int, Value], row: Row) -> None:
    kind, k, v, s = row
    if kind == "-D":
        view.pop(k, None)
    else:
        view[k] = (v, s)


def _partial_update(view: dict[int, Value], row: Row) -> None:
    _, k, v, s = row
    old = view.get(k, (None, None))
    view[k] = (v if v is not None else old[0], s if s is not None else old[1])


def _sum_last_non_null(view: dict[int, Value], row: Row) -> None:
    _, k, v, s = row
    old = view.get(k, (None, None))
    total = old[0] if v is None else v if old[0] is None else old[0] + v
    view[k] = (total, s if s is not None else old[1])


def _first_row(view: dict[int, Value], row: Row) -> None:
    _, k, v, s = row
    view.setdefault(k, (v, s))


def _sequence_field(view: dict[int, Value], row: Row) -> None:
    """``sequence.field`` = v (nulls oldest): the largest v wins, the later commit on ties."""
    _, k, v, s = row
    old = view.get(k)
    if old is None or (v is not None and (old[0] is None or v >= old[0])) or (v is None and old[0] is None):
        view[k] = (v, s)


# name → (oracle, row kinds, engine configuration of compaction_support.ENGINES, extra options)
ORACLES: dict[str, tuple[Apply, tuple[str, ...], str, dict[str, str]]] = {
    "deduplicate": (_dedupe, ("+I", "+U", "-D"), "deduplicate", {}),
    "partial-update": (_partial_update, ("+I", "+U"), "partial-update", {}),
    "aggregation": (_sum_last_non_null, ("+I",), "aggregation", {}),
    "first-row": (_first_row, ("+I",), "first-row", {}),
    "deduplicate-sequence-field": (_sequence_field, ("+I", "+U"), "deduplicate-sequence-field", {}),
    "deduplicate-snapshot-ordering": (
        _dedupe,
        ("+I", "+U", "-D"),
        "deduplicate",
        {"sequence.snapshot-ordering": "true", "write-only": "true"},
    ),
}
SETTINGS = settings(
    max_examples=int(os.environ.get("MT_PROPERTY_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def steps(draw: st.DrawFn, kinds: tuple[str, ...]) -> list[tuple[Any, ...]]:
    row = st.tuples(
        st.sampled_from(kinds),
        st.integers(0, 8),
        st.one_of(st.none(), st.integers(-3, 5)),
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    )
    step = st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2), st.lists(row, min_size=1, max_size=6)),
        st.tuples(st.just("commit"), st.integers(0, 2)),
        st.tuples(st.just("compact"), st.booleans()),
    )
    return draw(st.lists(step, min_size=1, max_size=16))


@pytest.mark.parametrize("engine", sorted(ORACLES))
@SETTINGS
@given(data=st.data())
def test_every_snapshot_is_the_commit_order_replay(engine: str, data: st.DataObject) -> None:
    apply, kinds, config, extra = ORACLES[engine]
    program = data.draw(steps(kinds), label="steps")
    options = {
        "num-sorted-run.compaction-trigger": str(data.draw(st.integers(2, 4), label="trigger")),
        "write-only": data.draw(st.sampled_from(["true", "false"]), label="write-only"),
        "target-file-size": data.draw(st.sampled_from(["900b", "128mb"]), label="target-file-size"),
    }
    root = scratch_dir()
    try:
        t = create(f"{root}/t", config, **{**options, **extra})
        writers: dict[int, Any] = {}
        pending: dict[int, list[Row]] = {}
        oracle: dict[int, Value] = {}
        expected: dict[int, dict[int, Value]] = {}
        for step in [*program, *(("commit", w) for w in range(3))]:
            if step[0] == "write":
                _, w, rows = step
                writer = writers.setdefault(w, t.new_writer())
                writer.write(*batch(rows))
                pending.setdefault(w, []).extend(rows)
            elif step[0] == "commit":
                w = step[1]
                if w not in writers:
                    continue
                latest = t.latest_snapshot()
                t.commit(writers[w].prepare_commit())
                for row in pending.pop(w, []):
                    apply(oracle, row)
                _record(t, latest, oracle, expected)
            else:
                latest = t.latest_snapshot()
                before = state(t)
                t.compact(full=step[1])
                assert state(t) == before, "a compaction changed the visible rows"
                _record(t, latest, oracle, expected)
        for sid, want in expected.items():
            assert state(t, sid) == want, f"snapshot {sid}"
        assert state(t) == oracle
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _record(
    t: mt.Table, before: mt.Snapshot | None, oracle: dict[int, Value], out: dict[int, dict[int, Value]]
) -> None:
    """The oracle state of every snapshot created since ``before`` (a commit and its inline compaction)."""
    latest = t.latest_snapshot()
    for sid in range((before.id if before else 0) + 1, (latest.id if latest else 0) + 1):
        out[sid] = dict(oracle)
