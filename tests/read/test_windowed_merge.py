"""Merge-on-read window by window equals the whole-section merge, and scans yield bounded batches.

Tables are written with tiny row groups and read with a tiny window budget, so every section is cut into
many windows across many overlapping sorted runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
import mergetable.write.files as files
from mergetable.read.reader import SplitReader

ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    "first-row": {"merge-engine": "first-row"},
}
KEY_TYPES = {"int": pa.int64(), "string": pa.string()}

op = st.tuples(st.integers(0, 60), st.integers(0, 2), st.one_of(st.none(), st.integers(-50, 50)), st.booleans())


@pytest.fixture(autouse=True)
def tiny_row_groups(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 3)
    yield


def _key(t: pa.DataType, k: int) -> Any:
    return k if pa.types.is_integer(t) else f"k{k:03d}"


def build(
    root: str, engine: str, key_type: pa.DataType, composite: bool, commits: list[list[tuple[int, int, Any, bool]]]
) -> mt.Table:
    schema = pa.schema([("k", key_type), ("j", pa.int32()), ("v", pa.int64()), ("s", pa.string())])
    options = {**ENGINES[engine], "write-only": "true", "bucket": "1", "read.batch-size": "4"}
    if engine == "first-row":
        options["ignore-delete"] = "true"
    t = mt.create_table(root, schema, primary_key=["k", "j"] if composite else ["k"], options=options)
    for n, ops in enumerate(commits):
        rows = pa.table(
            {
                "k": [_key(key_type, o[0]) for o in ops],
                "j": [o[1] if composite else 0 for o in ops],
                "v": [o[2] for o in ops],
                "s": [f"c{n}" for _ in ops],
            },
            schema=schema,
        )
        kinds = ["-D" if o[3] and engine == "deduplicate" else "+I" for o in ops]
        t.write(rows, row_kind=kinds)
    return t


def windowed(
    reader: SplitReader, table: mt.Table, piece_rows: int = 64 * 1024, prefetch: bool = False
) -> tuple[list[tuple[Any, ...]], list[pa.Table], list[pa.Table]]:
    reader.window_bytes = 1  # every row group is a slice of its own
    reader.piece_rows = piece_rows  # a run shows a window this many rows of a slice at a time
    sections, whole, streamed = [], [], []
    for split in table.plan():
        for runs in split.sections:
            sections.append(tuple(len(r) for r in runs))
            whole.append(reader.merged_section(split, runs))
            streamed.append(list(reader.merged_windows(split, runs, prefetch=prefetch)))
    return sections, whole, [pa.concat_tables(w) if w else None for w in streamed]  # type: ignore[misc]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.lists(st.lists(op, min_size=1, max_size=30), min_size=1, max_size=7),
    engine=st.sampled_from(sorted(ENGINES)),
    key_type=st.sampled_from(sorted(KEY_TYPES)),
    composite=st.booleans(),
    piece_rows=st.sampled_from([1, 2, 3, 4, 64 * 1024]),
    prefetch=st.booleans(),
)
def test_windowed_merge_equals_whole_section_merge(
    commits: list[list[tuple[int, int, Any, bool]]],
    engine: str,
    key_type: str,
    composite: bool,
    piece_rows: int,
    prefetch: bool,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        t = build(f"{root}/t", engine, KEY_TYPES[key_type], composite, commits)
        reader = t.split_reader()
        _, whole, streamed = windowed(reader, t, piece_rows, prefetch)
        for w, s in zip(whole, streamed, strict=True):
            assert s is not None
            assert s.equals(w)
        # a key filter pushed into every row-group read
        keyed = t.split_reader(filter=[("k", ">=", _key(KEY_TYPES[key_type], 20))])
        for w, s in zip(*windowed(keyed, t, piece_rows, prefetch)[1:], strict=True):
            assert w.num_rows == 0 if s is None else s.equals(w)
        # The scan (windows, tiny batches) returns exactly the whole-section merge's visible rows.
        expected = [reader.finish(w) for w in whole]
        want = pa.concat_tables(expected) if expected else t.schema.empty_table()
        batches = list(t.scan())
        assert all(b.num_rows <= 4 for b in batches)
        got = pa.Table.from_batches(batches, t.schema)
        assert got.equals(want.cast(t.schema))


def test_many_runs_are_cut_into_several_windows(tmp_path: Path) -> None:
    commits = [[(k, 0, r * 100 + k, False) for k in range(r, 60, 2 + r % 3)] for r in range(6)]
    t = build(str(tmp_path / "t"), "deduplicate", pa.int64(), False, commits)
    reader = t.split_reader()
    reader.window_bytes = 1
    [split] = t.plan()
    [runs] = split.sections
    assert len(runs) == 6
    windows = list(reader.merged_windows(split, runs))
    assert len(windows) > 5
    assert max(w.num_rows for w in windows) < 30
    assert pa.concat_tables(windows).equals(reader.merged_section(split, runs))
    keys = pa.concat_tables(windows).column("k").to_pylist()
    assert keys == sorted(set(keys))


def test_reads_that_keep_every_row_top_up_runs_for_even_windows(tmp_path: Path) -> None:
    """A run the last window left with a few rows loads more before the next bound is chosen (prefetching reads and
    Spark's), so no window is only those few rows; a streaming scan does not, and shows runs half a piece at a
    time, keeping fewer and smaller windows queued."""
    commits = [[(k, 0, r * 100 + k, False) for k in range(r, 60, 6)] for r in range(6)]  # interleaved runs
    t = build(str(tmp_path / "t"), "deduplicate", pa.int64(), False, commits)
    reader = t.split_reader()
    reader.window_bytes, reader.piece_rows = 1, 4
    [split] = t.plan()
    [runs] = split.sections
    lazy = [w.num_rows for w in reader.merged_windows(split, runs)]
    even = list(reader.merged_windows(split, runs, prefetch=True))
    assert [w.num_rows for w in reader.merged_windows(split, runs, even=True)] == [w.num_rows for w in even]
    assert min(lazy[:4]) == 1 < 2 < min(w.num_rows for w in even[:3])  # (the last windows: runs running dry)
    assert max(lazy) <= 2 * len(runs) < max(w.num_rows for w in even)  # a scan shows runs in half pieces
    assert len(even) < len(lazy)
    assert pa.concat_tables(even).equals(reader.merged_section(split, runs))
    reader.piece_rows = 1  # half a piece rounds down to nothing: a run still shows a row at a time
    assert pa.concat_tables(list(reader.merged_windows(split, runs, prefetch=True))).equals(pa.concat_tables(even))


def test_batches_never_exceed_read_batch_size(tmp_path: Path) -> None:
    t = mt.create_table(
        str(tmp_path / "t"), pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"], options={"read.batch-size": "7"}
    )
    t.write(pa.table({"k": list(range(100)), "v": list(range(100))}))
    t.write(pa.table({"k": list(range(50, 150)), "v": list(range(100))}))
    sizes = [b.num_rows for b in t.scan()]
    assert max(sizes) <= 7
    assert sum(sizes) == 150


def test_read_batch_size_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(mt.OptionsError, match=r"read\.batch-size"):
        mt.create_table(str(tmp_path / "t"), pa.schema([("k", pa.int64())]), ["k"], options={"read.batch-size": "0"})


def test_large_row_groups_are_shown_to_windows_in_pieces(tmp_path: Path) -> None:
    commits = [[(k, 0, r * 100 + k, False) for k in range(r, 60, 1 + r % 3)] for r in range(4)]
    t = build(str(tmp_path / "t"), "deduplicate", pa.int64(), False, commits)
    reader = t.split_reader()
    [split] = t.plan()
    [runs] = split.sections
    whole = reader.merged_section(split, runs)
    reader.piece_rows = 5  # each file is one row group of up to 60 rows
    windows = list(reader.merged_windows(split, runs))
    assert len(windows) >= 60 // 5 - 1 and max(w.num_rows for w in windows) <= 5 * len(runs)
    assert pa.concat_tables(windows).equals(whole)
