"""Property tests: reads are identical before and after every compaction, for every merge engine, and the
changelog of every producer replays into the table's state."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest
from compaction_support import (
    ENGINES,
    apply_full_row_changelog,
    batch,
    changelog_snapshots,
    create,
    scratch_dir,
    state,
    top_level_state,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mergetable.compaction.job import FULL_COMPACTION_PROPERTY
from mergetable.metadata.models import CommitKind

# Engines where a retract that a compaction to the top level drops (it was the key's only, or its newest,
# record) still matters to later records: aggregation retracts fields, remove-record-on-delete
# re-initialises the row from the -D record, and with a sequence field an older-sequenced record can
# arrive later. As in Paimon, such a table's later state depends on when compactions ran, so a replica fed
# the same records only matches when the source never compacted.
RETRACTS_SHAPE_LATER_MERGES = {"aggregation", "partial-update-remove-on-delete", "deduplicate-sequence-field"}
SETTINGS = settings(
    max_examples=int(os.environ.get("MT_PROPERTY_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def workloads(draw: st.DrawFn, kinds: tuple[str, ...]) -> list[tuple[list[Any], str | None]]:
    """Commits of rows (kind, k, v, s), each followed by nothing, a minor or a full compaction."""
    row = st.tuples(
        st.sampled_from(kinds),
        st.integers(0, 12),
        st.one_of(st.none(), st.integers(-3, 5)),
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    )
    commits = draw(st.lists(st.lists(row, min_size=1, max_size=10), min_size=1, max_size=7))
    after = draw(st.lists(st.sampled_from([None, None, "minor", "full"]), min_size=len(commits), max_size=len(commits)))
    return list(zip(commits, after, strict=True))


def _options(data: st.DataObject) -> dict[str, str]:
    return {
        "num-sorted-run.compaction-trigger": str(data.draw(st.integers(2, 4), label="trigger")),
        "compaction.size-ratio": str(data.draw(st.sampled_from([0, 1, 20]), label="size-ratio")),
        "target-file-size": data.draw(st.sampled_from(["900b", "4kb", "128mb"]), label="target-file-size"),
        "write-only": data.draw(st.sampled_from(["true", "false"]), label="write-only"),
    }


@pytest.mark.parametrize("engine", sorted(ENGINES))
@SETTINGS
@given(data=st.data())
def test_reads_equal_before_and_after_every_compaction(engine: str, data: st.DataObject) -> None:
    _, kinds = ENGINES[engine]
    workload = data.draw(workloads(kinds), label="workload")
    root = scratch_dir()
    try:
        t = create(f"{root}/t", engine, **_options(data))
        for rows, compaction in workload:
            t.write(*batch(rows))
            if compaction is None:
                continue
            before = t.read().sort_by("k")
            t.compact(full=compaction == "full")
            assert t.read().sort_by("k").equals(before), f"{compaction} compaction changed the table"
        before = t.read().sort_by("k")
        t.compact(full=True)
        assert t.read().sort_by("k").equals(before)
        assert {f.level for _, _, f in t.files()} <= {t.table_options.max_levels - 1}
    finally:
        shutil.rmtree(root, ignore_errors=True)


DV_ENGINES = sorted(e for e in ENGINES if not e.startswith("first-row"))  # Paimon refuses first-row with vectors


@pytest.mark.parametrize("engine", DV_ENGINES)
@SETTINGS
@given(data=st.data())
def test_deletion_vector_tables_read_as_merge_on_read_tables(engine: str, data: st.DataObject) -> None:
    """The same commits into a deletion-vector table and a plain one read the same after every commit and every
    compaction (where the engine's result does not depend on when compactions drop retracts)."""
    _, kinds = ENGINES[engine]
    workload = data.draw(workloads(kinds), label="workload")
    opts = _options(data)
    if opts["write-only"] == "true":  # level 0 is then visible through merge-on-read only
        opts["deletion-vectors.merge-on-read"] = "true"
    root = scratch_dir()
    try:
        t = create(f"{root}/t", engine, **opts, **{"deletion-vectors.enabled": "true"})
        plain = create(f"{root}/plain", engine, **{**opts, "write-only": "true"})
        twin = engine not in RETRACTS_SHAPE_LATER_MERGES
        for rows, compaction in workload:
            t.write(*batch(rows))
            plain.write(*batch(rows))
            before = t.read().sort_by("k")
            if twin:
                assert before.equals(plain.read().sort_by("k")), "deletion vectors read otherwise than merge-on-read"
            if compaction is not None:
                t.compact(full=compaction == "full")
                assert t.read().sort_by("k").equals(before), f"{compaction} compaction changed the table"
        before = t.read().sort_by("k")
        t.compact(full=True)
        assert t.read().sort_by("k").equals(before)
        assert t.deletion_vectors() == {}
        assert t.count() == before.num_rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
@SETTINGS
@given(data=st.data())
def test_full_row_changelog_replays_into_the_state(producer: str, engine: str, data: st.DataObject) -> None:
    """lookup / full-compaction: replaying the changelog (as upserts and deletes) gives the table's state at
    every snapshot that produced changelog, and every -U / -D carries the exact previous value."""
    _, kinds = ENGINES[engine]
    workload = data.draw(workloads(kinds), label="workload")
    opts = _options(data)
    opts["write-only"] = "false"
    opts["changelog-producer.row-deduplicate"] = data.draw(st.sampled_from(["true", "false"]), label="dedupe")
    if producer == "full-compaction":
        opts["full-compaction.delta-commits"] = str(data.draw(st.integers(1, 3), label="delta-commits"))
    root = scratch_dir()
    try:
        t = create(f"{root}/t", engine, **{"changelog-producer": producer, **opts})
        for rows, compaction in workload:
            t.write(*batch(rows))
            if compaction is not None:
                t.compact(full=compaction == "full")
        t.compact(full=True)
        view: dict[int, tuple[Any, ...]] = {}
        previous = 0
        for snap in changelog_snapshots(t):
            rows = t.changelog(previous, snap.id).to_pylist()
            previous = snap.id
            apply_full_row_changelog(view, rows)
            if producer == "lookup" or (snap.properties or {}).get(FULL_COMPACTION_PROPERTY):
                assert view == state(t, snap.id), f"snapshot {snap.id}"
            else:  # a full compaction of some buckets only: the top levels hold what was replayed
                assert view == top_level_state(t, snap.id), f"snapshot {snap.id}"
        assert view == state(t)
        if engine.startswith("first-row") and previous:
            assert set(t.changelog(0, previous).column("_row_kind").to_pylist()) <= {"+I"}
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("producer", ["none", "input"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
@SETTINGS
@given(data=st.data())
def test_record_changelog_replays_through_the_engine(producer: str, engine: str, data: st.DataObject) -> None:
    """none / input: the changelog holds records (input records, or each commit's merged delta); writing it
    commit by commit into an empty table with the same merge engine reproduces the state of every data
    snapshot."""
    _, kinds = ENGINES[engine]
    workload = data.draw(workloads(kinds), label="workload")
    root = scratch_dir()
    try:
        opts = _options(data)
        if engine in RETRACTS_SHAPE_LATER_MERGES:
            opts["write-only"] = "true"
        t = create(f"{root}/t", engine, **{"changelog-producer": producer, **opts})
        for rows, compaction in workload:
            t.write(*batch(rows))
            if compaction is not None and engine not in RETRACTS_SHAPE_LATER_MERGES:
                t.compact(full=compaction == "full")
        replica = create(f"{root}/replica", engine, **{"write-only": "true"})
        previous = 0
        for snap in t.snapshots():
            if snap.commit_kind is CommitKind.COMPACT:
                continue
            rows = t.changelog(previous, snap.id)
            previous = snap.id
            if rows.num_rows:
                replica.write(rows.drop_columns(["_row_kind"]), row_kind=rows.column("_row_kind"))
            assert state(replica) == state(t, snap.id), f"snapshot {snap.id}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
