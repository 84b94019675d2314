"""Windows merged by the process's merge threads give the rows one thread gives, for every merge engine."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.read import reader as reader_module
from mergetable.write import files

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("s", pa.string())])

ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    "first-row": {"merge-engine": "first-row"},
}


def _table(path: Path, options: dict[str, str]) -> mt.Table:
    rng = np.random.default_rng(7)
    opts = {"bucket": "1", "write-only": "true", **options}
    t = mt.create_table(str(path), SCHEMA, primary_key=["id"], options=opts)
    for _ in range(4):
        ids = rng.permutation(np.unique(rng.integers(0, 60_000, 40_000)))
        v = pa.array(rng.integers(0, 100, len(ids)))
        s = pa.array([None if i % 7 == 0 else f"s{i % 13}" for i in range(len(ids))])
        t.write(pa.table({"id": pa.array(ids), "v": v, "s": s}, schema=SCHEMA))
    return t


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_windows_merged_on_threads_equal_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    t = _table(tmp_path / engine, ENGINES[engine])
    reader = t.split_reader(None, None)
    reader.piece_rows = 2048  # many small windows
    splits = t.plan()
    one = pa.concat_tables(reader.read_splits(splits, ahead=None))
    scanned = pa.concat_tables(reader.read_splits(splits, ahead=1))
    monkeypatch.setattr(reader_module, "merge_threads", lambda: 4)
    monkeypatch.setattr(reader_module, "MERGE_AHEAD_STREAMING", 4)  # streamed windows on merge threads too
    threaded = pa.concat_tables(reader.read_splits(splits, ahead=None))
    streamed = pa.concat_tables(reader.read_splits(splits, ahead=1))
    assert one.num_rows > 50_000
    assert threaded.equals(one)
    assert streamed.equals(scanned)
    assert scanned.sort_by("id").equals(one.sort_by("id"))


@pytest.mark.parametrize(
    "filter", [None, [("k", ">=", "key0100"), ("k", "<", "key0600")], [("id", ">=", 1000), ("v", ">", 50)]]
)
def test_string_keys_and_filters_merge_on_threads_as_on_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filter: list[tuple[str, str, object]] | None
) -> None:
    rng = np.random.default_rng(3)
    schema = pa.schema([("k", pa.string()), ("id", pa.int64()), ("v", pa.int64())])
    t = mt.create_table(
        str(tmp_path / "s"), schema, primary_key=["k", "id"], options={"bucket": "1", "write-only": "true"}
    )
    for _ in range(3):
        ids = rng.integers(0, 50_000, 30_000)
        keys = pa.array([f"key{i % 977:04d}" for i in ids])
        t.write(pa.table({"k": keys, "id": pa.array(ids), "v": pa.array(rng.integers(0, 100, len(ids)))}))
    t.delete([("id", "<", 500)])
    one = t.read(filter=filter)
    monkeypatch.setattr(reader_module, "merge_threads", lambda: 4)
    threaded = t.read(filter=filter)
    assert one.num_rows > 1000
    assert threaded.equals(one)


def test_a_consumer_that_stops_early_leaves_no_merge_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(tmp_path / "t", {})
    reader = t.split_reader(None, None)
    reader.piece_rows = 1024
    monkeypatch.setattr(reader_module, "merge_threads", lambda: 4)
    stream = reader.read_splits(t.plan(), ahead=None)
    assert isinstance(stream, Generator)
    first = next(stream)
    stream.close()
    assert first.num_rows > 0


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"}, {}])
def test_sections_of_one_run_read_side_by_side_equal_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str]
) -> None:
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 4096)  # files roll at 8 KB
    rng = np.random.default_rng(11)
    opts = {"bucket": "1", "target-file-size": "8kb", **options}
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"], options=opts)
    for _ in range(4):
        ids = np.unique(rng.integers(0, 40_000, 20_000))
        t.write(
            pa.table(
                {"id": pa.array(ids), "v": pa.array(rng.integers(0, 9, len(ids))), "s": pa.array(["x"] * len(ids))},
                schema=SCHEMA,
            )
        )
    t.compact(full=True)
    if options:  # a vector marks the old copy of key 5
        t.write(pa.table({"id": [5, 50_000], "v": [1, 2], "s": ["y", "z"]}, schema=SCHEMA))
    splits = t.plan(target_split_size=1 << 30)
    assert any(len(s.sections) > 1 and all(len(r) == 1 for r in s.sections) for s in splits)
    reader = t.split_reader(None, None)
    one = pa.concat_tables(reader.read_splits(splits, ahead=None))
    monkeypatch.setattr(reader_module, "merge_threads", lambda: 4)
    assert pa.concat_tables(reader.read_splits(splits, ahead=None)).equals(one)
    assert one.num_rows > 30_000
