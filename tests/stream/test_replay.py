"""Replaying a stream into a fresh table rebuilds the source table at every snapshot, for each producer and
merge engine (property test against the source table as the oracle)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compaction"))
from compaction_support import ENGINES, batch, create, scratch_dir, state

# (engine, producer): none/input replay into a table of the same engine (their changes are the engine's
# input), lookup/full-compaction into a deduplicate table (their changes are whole rows with before-images)
CASES = [
    ("deduplicate", "none"),
    ("deduplicate", "input"),
    ("deduplicate", "lookup"),
    ("deduplicate", "full-compaction"),
    ("partial-update", "none"),
    ("partial-update", "input"),
    ("partial-update", "lookup"),
    ("aggregation", "none"),
    ("aggregation", "input"),
    ("aggregation", "lookup"),
    ("first-row", "none"),
    ("first-row", "lookup"),
]


def _commits(kinds: tuple[str, ...]) -> st.SearchStrategy[list[list[tuple[str, int, int | None, str | None]]]]:
    row = st.tuples(
        st.sampled_from(kinds), st.integers(0, 6), st.one_of(st.none(), st.integers(-5, 50)),
        st.sampled_from([None, "a", "b"]),
    )  # fmt: skip
    return st.lists(st.lists(row, min_size=1, max_size=4), min_size=1, max_size=4)


def _complete(t: mt.Table, producer: str, snapshot_id: int) -> bool:
    """Whether every change up to ``snapshot_id`` is already in the stream (a producer may still owe some)."""
    if producer == "lookup":
        return all(f.level > 0 for _, _, f in t.files(snapshot_id))
    if producer == "full-compaction":
        top = t.table_options.max_levels - 1
        return all(f.level == top for _, _, f in t.files(snapshot_id))
    return True


@pytest.mark.parametrize(("engine", "producer"), CASES)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_replayed_changes_rebuild_the_table(engine: str, producer: str, data: Any) -> None:
    # aggregation inputs stay inserts: the none producer turns a lone retract into -D (no before-image)
    kinds = ("+I",) if engine == "aggregation" else ENGINES[engine][1]
    commits = data.draw(_commits(kinds))
    root = scratch_dir()
    try:
        extra = {"full-compaction.delta-commits": "1"} if producer == "full-compaction" else {}
        source = create(f"{root}/src", engine, **{"changelog-producer": producer, **extra})
        target = create(f"{root}/dst", engine if producer in ("none", "input") else "deduplicate")
        for i, rows in enumerate(commits):
            source.write(*batch(rows))
            if i % 2 and producer in ("none", "input"):
                source.compact(full=True)  # COMPACT snapshots add nothing to these streams
        checked = 0
        stream = source.follow({"scan.snapshot-id": "1", "max-snapshots-per-trigger": "1"}, stop_when_idle=True)
        for change in stream:
            if change.data.num_rows:
                kinds_col = change.data.column("_row_kind").to_pylist()
                target.write(change.data.drop_columns(["_row_kind"]), row_kind=kinds_col)
            sid = change.start.next_snapshot
            if _complete(source, producer, sid):
                assert state(target) == state(source, sid), f"after snapshot {sid}"
                checked += 1
        assert checked >= 1
        assert state(target) == state(source)  # the newest snapshot is always complete here
    finally:
        shutil.rmtree(root, ignore_errors=True)
