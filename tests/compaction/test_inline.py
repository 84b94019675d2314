"""Compaction after a writer's commit: when it runs, what it picks, and that conflicts never fail a write."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pyarrow as pa
import pytest
from compaction_support import batch, create, state

import mergetable as mt
from mergetable.compaction.job import BucketPlan, CompactionJob, run_plan
from mergetable.core.hashing import bucket_of
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind, CommitMessage


def write(t: mt.Table, k: int, v: int = 1) -> None:
    t.write(*batch([("+I", k, v, "s")]))


def kinds(t: mt.Table) -> list[str]:
    return ["A" if s.commit_kind is CommitKind.APPEND else "C" for s in t.snapshots()]


def test_writer_compacts_the_buckets_it_touched_at_the_run_trigger(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1")
    for i in range(4):
        write(t, i)
    assert kinds(t) == ["A"] * 4
    write(t, 4)  # 5 runs = trigger: size amplification compacts everything to the top level
    assert kinds(t) == ["A"] * 5 + ["C"]
    assert {f.level for _, _, f in t.files()} == {5}
    assert sorted(state(t)) == [0, 1, 2, 3, 4]


def test_other_buckets_are_left_alone(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="2", **{"num-sorted-run.compaction-trigger": "2"})
    buckets = bucket_of([pa.array(range(100), pa.int64())], 2, ("k",))
    first, other = 0, next(k for k in range(1, 100) if buckets[k] != buckets[0])
    write(t, first)
    write(t, other)
    write(t, other, 2)  # second run in the other bucket: it compacts, the first bucket keeps its level-0 file
    levels = {b: {f.level for _, bb, f in t.files() if bb == b} for b in (0, 1)}
    assert levels[int(buckets[first])] == {0}
    assert 0 not in levels[int(buckets[other])]


def test_write_only_never_compacts(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **{"write-only": "true"})
    for i in range(12):
        write(t, i)
    assert kinds(t) == ["A"] * 12
    assert t.compact() is not None  # the dedicated job does


def test_full_compaction_every_n_commits(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="2", **{"full-compaction.delta-commits": "3"})
    for i in range(7):
        write(t, i)
    assert kinds(t) == ["A", "A", "A", "C", "A", "A", "A", "C", "A"]
    full = [s for s in t.snapshots() if s.commit_kind is CommitKind.COMPACT]
    assert all(s.properties == {"mergetable.full-compaction": "true"} for s in full)


def _job_losing_once(t: mt.Table) -> CompactionJob:
    """A job (of a table with write-only off) whose first attempt loses to a concurrent compaction."""
    # through JSON: a model copy would keep the cached options of the original
    schema = TableSchema.from_json(
        t.table_schema.with_options({**t.table_schema.options, "write-only": "false"}).to_json()
    )
    other = mt.open_table(t.uri)
    calls: list[int] = []

    def executor(plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        calls.append(len(plans))
        if len(calls) == 1:
            other.compact(full=True)
            for k in range(95, 100):  # enough new runs for the next attempt to have work again
                write(other, k)
        return [m for m in (run_plan(t.fileio, schema, t.merge_function, p) for p in plans) if not m.is_empty]

    return CompactionJob(t.fileio, schema, t.merge_function, executor)


def test_a_conflict_after_the_write_is_skipped_below_the_stop_trigger(
    table_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **{"write-only": "true"})
    for i in range(5):
        write(t, i)
    job = _job_losing_once(t)
    with caplog.at_level(logging.WARNING):
        assert job.after_write([((), 0)]) is None
    assert "skipped" in caplog.text
    assert kinds(t)[-6:] == ["C", "A", "A", "A", "A", "A"]  # only the competitor's compaction and writes


def test_a_conflict_after_the_write_is_retried_beyond_the_stop_trigger(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **{"write-only": "true", "num-sorted-run.stop-trigger": "5"})
    for i in range(6):
        write(t, i)
    job = _job_losing_once(t)
    snap = job.after_write([((), 0)])
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert kinds(t)[-7:] == ["C", "A", "A", "A", "A", "A", "C"]
    assert sorted(state(t)) == [0, 1, 2, 3, 4, 5, 95, 96, 97, 98, 99]


def test_lookup_writers_compact_level_0_at_every_commit(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **{"changelog-producer": "lookup"})
    for i in range(3):
        write(t, i)
        assert all(f.level > 0 for _, _, f in t.files())
    assert kinds(t) == ["A", "C"] * 3
    lazy = create(table_uri + "2", "deduplicate", bucket="1", **{"changelog-producer": "lookup", "write-only": "true"})
    write(lazy, 1)
    assert kinds(lazy) == ["A"]
    lazy.compact()
    assert [r["_row_kind"] for r in lazy.changelog(0, 2).to_pylist()] == ["+I"]
