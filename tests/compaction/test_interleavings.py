"""Property: several writers, each open across other commits and compactions, commit in any interleaving.

The state at every snapshot equals a dict oracle that applies each commit's rows in commit order (input
order within a commit), for every merge engine; no COMPACT snapshot changes the visible rows.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from compaction_support import ENGINES, batch, create, scratch_dir, state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.commit.discard import discard_uncommitted
from mergetable.write.writer import TableWriter

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
def steps(draw: st.DrawFn, kinds: tuple[str, ...], keys: int = 8, size: int = 16) -> list[tuple[Any, ...]]:
    row = st.tuples(
        st.sampled_from(kinds),
        st.integers(0, keys),
        st.one_of(st.none(), st.integers(-3, 5)),
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    )
    step = st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2), st.lists(row, min_size=1, max_size=6)),
        st.tuples(st.just("commit"), st.integers(0, 2)),
        st.tuples(st.just("compact"), st.booleans()),
    )
    return draw(st.lists(step, min_size=1, max_size=size))


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


@SETTINGS
@given(data=st.data())
def test_sequence_ties_read_the_same_before_and_after_every_compaction(data: st.DataObject) -> None:
    """``sequence.snapshot-ordering`` numbers every record of a commit alike: several writers' messages in one
    commit tie on every key they share. Readers and compaction break such ties by one order (file age), so
    no compaction changes a read; the winner of a key is one of the values its last commit wrote."""
    row = st.tuples(st.sampled_from(("+I", "+U", "-D")), st.integers(0, 6), st.integers(0, 9), st.just("x"))
    commit = st.lists(st.lists(row, min_size=1, max_size=5), min_size=1, max_size=3)
    program = data.draw(st.lists(st.tuples(commit, st.sampled_from([None, "minor", "full"])), min_size=1, max_size=8))
    root = scratch_dir()
    try:
        t = create(
            f"{root}/t",
            "deduplicate",
            bucket="1",
            **{
                "sequence.snapshot-ordering": "true",
                "write-only": "true",
                "num-sorted-run.compaction-trigger": str(data.draw(st.integers(2, 4), label="trigger")),
            },
        )
        candidates: dict[int, set[Value | None]] = {}
        for writers, compaction in program:
            messages = []
            latest: dict[int, set[Value | None]] = {}
            for rows in writers:
                w = t.new_writer()
                w.write(*batch(rows))
                messages += w.prepare_commit()
                last: dict[int, Value | None] = {}
                for kind, k, v, s in rows:
                    last[k] = None if kind == "-D" else (v, s)
                for k, value in last.items():
                    latest.setdefault(k, set()).add(value)
            t.commit(messages)
            candidates.update(latest)
            got = state(t)
            for k, allowed in candidates.items():
                assert got.get(k) in allowed, f"key {k}: {got.get(k)} not in {allowed}"
            if compaction is not None:
                t.compact(full=compaction == "full")
                assert state(t) == got, f"{compaction} compaction changed the visible rows"
        before = state(t)
        t.compact(full=True)
        assert state(t) == before
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _legacy_writer(t: mt.Table) -> TableWriter:
    """A writer numbering as format version 1 did: from its base snapshot's largest number per bucket."""
    top: dict[tuple[tuple[str | None, ...], int], int] = {}
    for partition, bucket, f in t.files():
        top[(partition, bucket)] = max(top.get((partition, bucket), -1), f.max_sequence_number)
    discard = functools.partial(discard_uncommitted, t.fileio, t.table_schema)
    first = {bucket: top_number + 1 for bucket, top_number in top.items()}
    return TableWriter(t.fileio, t.table_schema, t.merge_function, discard, first_sequence=first)


def _keep_numbers(messages: Any, start: int, snapshot_id: int | None = None) -> tuple[list[Any], int]:
    return list(messages), start


@pytest.mark.parametrize("engine", sorted(ENGINES))
@SETTINGS
@given(data=st.data())
def test_version_1_sequence_ties_never_change_with_compaction(engine: str, data: st.DataObject) -> None:
    """Tables written by format version 1 hold records of one key with equal sequence numbers in any levels
    (writers numbered from their base snapshot). Reads and compaction order them the same way: no
    compaction, minor or full, changes a read."""
    _, kinds = ENGINES[engine]
    program = data.draw(steps(kinds, keys=4, size=30), label="steps")
    options = {
        "num-sorted-run.compaction-trigger": str(data.draw(st.integers(2, 3), label="trigger")),
        "write-only": "true",
        "target-file-size": data.draw(st.sampled_from(["600b", "128mb"]), label="target-file-size"),
    }
    root = scratch_dir()
    try:
        t = create(f"{root}/t", engine, bucket="1", **options)
        writers: dict[int, TableWriter] = {}
        with mock.patch("mergetable.commit.committer.assign_sequence_numbers", _keep_numbers):
            for step in program:
                if step[0] == "write":
                    writer = writers.setdefault(step[1], _legacy_writer(t))
                    writer.write(*batch(step[2]))
                elif step[0] == "commit" and step[1] in writers:
                    t.commit(writers.pop(step[1]).prepare_commit())
                elif step[0] == "compact":
                    before = state(t)
                    t.compact(full=step[1])
                    assert state(t) == before, "a compaction changed the visible rows"
            before = state(t)
            t.compact(full=True)
            assert state(t) == before, "the final full compaction changed the visible rows"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_version_1_ties_across_levels_keep_their_winner_through_every_compaction(table_uri: str) -> None:
    """A level-0 record tying with an upper-level one (a version 1 writer opened before the upper one was
    committed): the level-0 one is newer, before and after it is compacted above the other."""
    t = create(table_uri, "deduplicate", bucket="1", **{"force-lookup": "true", "write-only": "true"})
    with mock.patch("mergetable.commit.committer.assign_sequence_numbers", _keep_numbers):
        t.write(*batch([("+I", k, 0, "base") for k in range(50)]))
        t.compact(full=True)
        tie = max(f.max_sequence_number for _, _, f in t.files()) + 1  # where both writers number from
        late = _legacy_writer(t)  # opened now, commits last
        early = _legacy_writer(t)
        early.write(*batch([("+I", 1, 1, "early"), ("+I", 2, 1, "early")]))
        t.commit(early.prepare_commit())
        t.compact()  # early's file leaves level 0, below the base
        [level] = {f.level for _, _, f in t.files() if f.min_key == (1,)} - {t.table_options.max_levels - 1}
        late.write(*batch([("+I", 1, 2, "late"), ("+I", 3, 2, "late")]))
        t.commit(late.prepare_commit())
    ties = [f for _, _, f in t.files() if f.min_sequence_number == tie]  # both writers numbered from there
    assert {f.level for f in ties} == {0, level}
    expected = {**dict.fromkeys(range(50), (0, "base")), 1: (2, "late"), 2: (1, "early"), 3: (2, "late")}
    assert state(t) == expected
    t.compact()  # the level-0 file goes above the tie, not past it
    assert state(t) == expected
    t.compact(full=True)
    assert state(t) == expected
