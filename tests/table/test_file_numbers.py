"""Sequence numbers a writer stores: one per file, the start of the run's block plus the offset of the file's
first row, so a run's files hold ascending, disjoint numbers; compaction keeps every record's number (a
dictionary of a few values in its output), a later row of a key still wins, and reads are unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.compaction import spill as spill_module
from mergetable.core.schema import SEQUENCE_NUMBER
from mergetable.metadata.models import DataFileMeta
from mergetable.read.order import oldest_first, sequence_ordered
from mergetable.write import files as files_module
from mergetable.write.encoding import parquet_encodings

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string())])


def _rows(keys: np.ndarray, v: int) -> pa.Table:
    return pa.table({"k": keys, "v": np.full(len(keys), v), "s": [f"s{k}" for k in keys]}, schema=SCHEMA)


def _stored(t: mt.Table, f: DataFileMeta) -> pa.Table:
    """The file's keys and effective sequence numbers (stored value plus the file's offset)."""
    table = pq.read_table(t.path_factory.data_file((), 0, f.file_name), columns=["k", SEQUENCE_NUMBER])
    seq = pa.array(np.asarray(table.column(SEQUENCE_NUMBER)) + f.stored_sequence_offset)
    return table.set_column(1, SEQUENCE_NUMBER, seq)


def _seq_encodings(t: mt.Table, f: DataFileMeta) -> set[str]:
    md = pq.read_metadata(t.path_factory.data_file((), 0, f.file_name))
    col = md.schema.to_arrow_schema().get_field_index(SEQUENCE_NUMBER)
    return {e for rg in range(md.num_row_groups) for e in md.row_group(rg).column(col).encodings}


def _check_run(t: mt.Table, run: list[DataFileMeta], block_start: int) -> None:
    """The files of one run, in key order: one stored number each, block start + rows of the files before."""
    offset = 0
    for f in sorted(run, key=lambda f: f.min_key):
        stored = _stored(t, f)
        assert set(stored.column(SEQUENCE_NUMBER).to_pylist()) == {block_start + offset}
        assert f.min_sequence_number == f.max_sequence_number == block_start + offset
        offset += f.row_count
    assert sequence_ordered(oldest_first(run))  # ascending, disjoint ranges: the reader's fast order holds


@pytest.mark.parametrize("spill", [False, True])
def test_the_files_of_a_run_number_from_the_offset_of_their_first_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: bool
) -> None:
    """A run rolled into several files, written whole or merged from spilled runs (``RollingKvWriter``)."""
    monkeypatch.setattr(files_module, "ROW_GROUP_ROWS", 512)
    opts = {"bucket": "1", "target-file-size": "4kb", "write-only": "true"}
    if spill:
        opts["write-buffer-size"] = "64kb"
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options=opts)
    merges: list[int] = []
    real = spill_module.merge_spilled_runs
    monkeypatch.setattr(spill_module, "merge_spilled_runs", lambda *a, **k: merges.append(1) or real(*a, **k))
    keys = np.random.default_rng(5).permutation(20_000)
    batches = [_rows(keys[i : i + 2000], 1) for i in range(0, 20_000, 2000)]
    t.write(pa.RecordBatchReader.from_batches(SCHEMA, [b for tb in batches for b in tb.to_batches()]))
    run = [f for _, _, f in t.files()]
    assert bool(merges) == spill  # spilled runs merged into one by a RollingKvWriter
    assert len(run) > 2 and {f.level for f in run} == {0}
    _check_run(t, run, 0)
    snap = t.latest_snapshot()
    assert snap is not None and snap.next_sequence_number == max(f.max_sequence_number for f in run) + 1
    t.write(_rows(keys[:700], 2))  # the next commit's run: a block above every number of the first
    second = [f for _, _, f in t.files() if f.file_name not in {g.file_name for g in run}]
    _check_run(t, second, snap.next_sequence_number)
    got = dict(zip(*t.read(columns=["k", "v"]).to_pydict().values(), strict=True))
    assert got == {int(k): (2 if i < 700 else 1) for i, k in enumerate(keys)}


def test_a_later_row_of_a_key_wins_across_the_runs_of_one_commit(tmp_path: Path) -> None:
    """Runs spilled in one commit and kept apart (not spillable): each run's files number above the last's."""
    opts = {"bucket": "1", "write-buffer-size": "16kb", "write-only": "true", "write-buffer-spillable": "false"}
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options=opts)
    batches = [_rows(np.arange(300), v) for v in range(8)]  # every key in every batch: the last value wins
    t.write(pa.RecordBatchReader.from_batches(SCHEMA, [b for tb in batches for b in tb.to_batches()]))
    runs = oldest_first(f for _, _, f in t.files())
    assert len(runs) > 2 and sequence_ordered(runs)
    assert all(f.min_sequence_number == f.max_sequence_number for f in runs)
    assert t.read(columns=["v"]).column("v").to_pylist() == [7] * 300
    t.compact(full=True)
    assert t.read(columns=["v"]).column("v").to_pylist() == [7] * 300


def test_compaction_keeps_every_records_number_and_stores_them_as_a_dictionary(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={"bucket": "1", "write-only": "true"})
    rng = np.random.default_rng(7)
    for v in range(4):
        t.write(_rows(np.sort(rng.choice(20_000, 8000, replace=False)), v))
    before_id = t.latest_snapshot().id  # type: ignore[union-attr]
    newest: dict[int, int] = {}
    for f in oldest_first(f for _, _, f in t.files()):  # oldest first: a later file's number overrides
        stored = _stored(t, f).to_pydict()
        newest.update(zip(stored["k"], stored[SEQUENCE_NUMBER], strict=True))
    expected = t.read().sort_by("k")
    t.compact(full=True)
    [(_, _, top)] = t.files()
    out = _stored(t, top).to_pydict()
    assert dict(zip(out["k"], out[SEQUENCE_NUMBER], strict=True)) == newest  # no record renumbered
    assert len(set(newest.values())) == 4 and "RLE_DICTIONARY" in _seq_encodings(t, top)
    assert t.read().sort_by("k").equals(expected)
    after_id = t.latest_snapshot().id  # type: ignore[union-attr]
    assert t.changelog(before_id, after_id, mode="diff").num_rows == 0  # a compaction changes no record
    t.write(_rows(np.array([int(out["k"][0])]), 9))  # a new write still wins over the compacted numbers
    assert t.read(filter=[("k", "=", int(out["k"][0]))]).column("v").to_pylist() == [9]


def test_numbers_that_do_not_repeat_are_delta_encoded(tmp_path: Path) -> None:
    """A compaction of many one-row commits holds as many numbers as rows: no dictionary."""
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["k"], options={"bucket": "1", "write-only": "true"})
    for k in range(40):
        t.write(_rows(np.array([k]), k))
    t.compact(full=True)
    [(_, _, top)] = t.files()
    assert len(set(_stored(t, top).column(SEQUENCE_NUMBER).to_pylist())) == 40
    assert "DELTA_BINARY_PACKED" in _seq_encodings(t, top) and "RLE_DICTIONARY" not in _seq_encodings(t, top)
    dictionary, encodings = parquet_encodings(
        t.table_schema, pq.read_table(t.path_factory.data_file((), 0, top.file_name))
    )
    assert SEQUENCE_NUMBER not in dictionary and encodings[SEQUENCE_NUMBER] == "DELTA_BINARY_PACKED"
    assert t.read(columns=["v"]).column("v").to_pylist() == list(range(40))
