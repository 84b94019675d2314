"""A commit whose writer spilled adds one sorted run per bucket (``write-buffer-spillable``, the default).

The spilled runs are merged with the table's merge engine into one level-0 run at ``prepare_commit``
(:mod:`mergetable.compaction.spill`): every engine reads the same as without the merge and as one in-memory
write, the spilled files are gone, compaction counts one run per commit, and partial writes keep their runs.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from compaction_support import ENGINES, SCHEMA, batch, create, state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.core.errors import DataFileError
from mergetable.core.schema import SEQUENCE_NUMBER
from mergetable.metadata.models import CommitKind

TINY = {"write-buffer-size": "1kb"}
NOT_SPILLABLE = {"write-buffer-spillable": "false"}


def kinds(t: mt.Table) -> list[str]:
    return ["A" if s.commit_kind is CommitKind.APPEND else "C" for s in t.snapshots()]


def runs_per_bucket(t: mt.Table) -> dict[int, int]:
    out: dict[int, int] = {}
    for _, bucket, f in t.files():
        out[bucket] = out.get(bucket, 0) + (1 if f.level == 0 else 0)
    return out


def data_files_on_disk(root: Path) -> set[str]:
    return {p.name for p in root.rglob("data-*.parquet")}


def commit_in_batches(t: mt.Table, batches: list[list[tuple[str, int, int | None, str | None]]]) -> None:
    """One commit of ``batches`` written one after another through one writer (a tiny buffer spills each)."""
    w = t.new_writer()
    for rows in batches:
        if rows:
            w.write(*batch(rows))
    t.commit(w.prepare_commit())


def _rows(kinds: tuple[str, ...]) -> st.SearchStrategy[list[tuple[str, int, int | None, str | None]]]:
    row = st.tuples(st.sampled_from(kinds), st.integers(0, 30), st.integers(0, 9), st.sampled_from(["a", "b", None]))
    return st.lists(row, max_size=40)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_engine_reads_the_same_with_its_spilled_runs_merged(
    tmp_path_factory: pytest.TempPathFactory, engine: str, data: st.DataObject
) -> None:
    _, allowed = ENGINES[engine]
    first = data.draw(_rows(tuple(k for k in allowed if k in ("+I", "+U")) or ("+I",)), "older commit")
    batches = data.draw(st.lists(_rows(allowed), min_size=1, max_size=5), "spilled commit")
    base = tmp_path_factory.mktemp("spill")
    only = {"write-only": "true"}  # no compaction before the explicit one at the end
    tables = {
        "merged": create(str(base / "merged"), engine, bucket="2", **TINY, **only),
        "runs": create(str(base / "runs"), engine, bucket="2", **TINY, **NOT_SPILLABLE, **only),
        "whole": create(str(base / "whole"), engine, bucket="2", **only),
    }
    for t in tables.values():
        commit_in_batches(t, [first])  # an older commit below: retracts of the spilled one apply to it
        commit_in_batches(t, batches)
    expected = state(tables["runs"])
    retracts = any(r[0] in ("-U", "-D") for rows in batches for r in rows)
    if not retracts:
        # merging the spilled runs changes nothing a read sees, and matches one in-memory write
        assert state(tables["merged"]) == expected == state(tables["whole"])
    else:
        # A retraction pre-merged in a run that lacks what it retracts leaves the engine less to undo, so with
        # retractions an aggregation's result depends on where runs were cut: merging the spilled runs gives
        # what the separate runs give or what one in-memory write gives, key by key (46 rows of +I then a -U of a
        # last_non_null_value column: 'a' in one buffer and merged, None across separate runs)
        expected = state(tables["merged"])
        runs, whole = state(tables["runs"]), state(tables["whole"])
        assert set(expected) == set(runs) == set(whole)
        assert all(expected[k] in (runs[k], whole[k]) for k in expected)
    merged = tables["merged"]
    assert all(n <= 2 for n in runs_per_bucket(merged).values())  # one run per commit and bucket
    assert data_files_on_disk(base / "merged") == {f.file_name for _, _, f in merged.files()}
    merged.compact(full=True)
    assert state(merged) == expected


def test_a_commit_that_spilled_adds_one_run_per_bucket_stored_with_one_number(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **TINY, **{"write-only": "true"})
    commit_in_batches(t, [[("+I", k, 1, "s") for k in range(i, i + 10)] for i in range(0, 200, 10)])
    commit_in_batches(t, [[("+I", k, 2, "s")] for k in range(100, 0, -1)])
    files = [f for _, _, f in t.files()]
    assert len(files) == 2 and {f.level for f in files} == {0}
    newest = max(files, key=lambda f: f.max_sequence_number)
    assert newest.row_count == 100
    path = t.path_factory.data_file((), 0, newest.file_name)
    seq = pq.read_table(path, columns=["k", SEQUENCE_NUMBER])
    assert seq.column("k").to_pylist() == list(range(1, 101))
    stored = seq.column(SEQUENCE_NUMBER).to_pylist()
    assert newest.min_sequence_number == newest.max_sequence_number  # one number for the merged run's file
    assert stored == [newest.min_sequence_number - newest.stored_sequence_offset] * 100
    assert state(t) == {k: (2 if 1 <= k <= 100 else 1, "s") for k in range(200)}


def test_compaction_counts_one_run_for_each_commit_that_spilled(tmp_path: Path) -> None:
    merged = create(str(tmp_path / "merged"), "deduplicate", bucket="1", **TINY)
    runs = create(str(tmp_path / "runs"), "deduplicate", bucket="1", **TINY, **NOT_SPILLABLE)
    for i in range(4):
        for t in (merged, runs):
            commit_in_batches(t, [[("+I", k, i, "s")] for k in range(i, 400, 4)])
    assert kinds(merged) == ["A"] * 4  # 4 runs: below num-sorted-run.compaction-trigger
    assert runs_per_bucket(merged) == {0: 4}
    assert "C" in kinds(runs)  # each spill was a run: the trigger fired within the first commits
    for t in (merged, runs):
        commit_in_batches(t, [[("+I", 99, 9, "s")]])
    assert kinds(merged) == ["A"] * 5 + ["C"]  # the fifth run: size amplification compacts, as in Paimon
    assert state(merged) == state(runs)


def test_partial_writes_keep_their_spilled_runs(table_uri: str) -> None:
    t = create(table_uri, "partial-update", bucket="1", **TINY, **{"write-only": "true"})
    t.write(pa.table({"k": list(range(400)), "v": [0] * 400, "s": ["old"] * 400}, schema=SCHEMA))
    w = t.new_writer()
    for k in range(0, 400, 2):
        w.write(pa.table({"k": [k], "v": [k]}), target_columns=["k", "v"])
    t.commit(w.prepare_commit())
    partial = [f for _, _, f in t.files() if f.write_cols is not None]
    assert len(partial) > 1  # left as spilled: partial records merge only at the bottom of the tree
    assert state(t) == {k: (k if k % 2 == 0 else 0, "old") for k in range(400)}


def test_input_changelog_keeps_every_input_record(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **TINY, **{"changelog-producer": "input", "write-only": "true"})
    commit_in_batches(t, [[("+I", k % 7, k, "s")] for k in range(50)])
    data = [f for _, _, f in t.files()]
    assert len(data) == 1 and data[0].row_count == 7  # the spilled runs, merged
    changelog = list(Path(table_uri).rglob("changelog-*.parquet"))
    assert sum(pq.read_metadata(p).num_rows for p in changelog) == 50  # every input record, as written
    assert state(t) == {k: (max(v for v in range(50) if v % 7 == k), "s") for k in range(7)}


def test_a_failed_merge_leaves_no_file_behind(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **TINY)
    w = t.new_writer()
    for k in range(40):
        w.write(*batch([("+I", k, k, "s")]))
    w.flush()
    spilled = data_files_on_disk(Path(table_uri))
    assert len(spilled) > 1
    Path(t.path_factory.data_file((), 0, sorted(spilled)[0])).unlink()  # the merge cannot read this run back
    with pytest.raises(DataFileError, match="missing"):
        w.prepare_commit()
    w.abort()
    assert data_files_on_disk(Path(table_uri)) == set()
    assert t.latest_snapshot() is None


def test_the_write_buffer_counts_the_hash_index_its_writer_holds(tmp_path: Path) -> None:
    """A dynamic-bucket table's writer counts the HASH index it holds (8 bytes a key, up to half of
    ``write-buffer-size``) against the buffer: rows that fit beside a small index spill beside a large one."""
    import numpy as np

    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    options = {"write-buffer-size": "2mb", **NOT_SPILLABLE}  # no bucket option: dynamic buckets

    def upsert(ids: np.ndarray) -> pa.Table:
        return pa.table({"id": ids, "v": ids * 2}, schema=schema)

    updates = [upsert(np.arange(900_000, 920_000)), upsert(np.arange(920_000, 940_000))]  # 0.34 MB each
    tables = {}
    for name, keys in (("small", 30_000), ("large", 1_000_000)):  # an index of 180 KB, of 6 MB
        t = tables[name] = mt.create_table(str(tmp_path / name), schema, ["id"], options=options)
        t.write(upsert(np.arange(keys)))
    small, large = tables["small"], tables["large"]
    assert len(runs_per_bucket(small)) == len(runs_per_bucket(large)) == 1
    spilled = {}
    for name, t in tables.items():
        w = t.new_writer()
        for update in updates:  # the second one is buffered knowing the index the first one loaded
            w.write(update)
        messages = w.prepare_commit()
        spilled[name] = sum(len(m.new_files) for m in messages)
        t.commit(messages)
    assert spilled == {"small": 1, "large": 2}
    got = large.read().sort_by("id")
    assert got.num_rows == 1_000_000 and got.column("v").to_pylist()[899_999:900_001] == [1_799_998, 1_800_000]
    assert small.read().num_rows == 70_000
