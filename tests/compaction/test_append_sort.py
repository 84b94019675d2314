"""Sort compaction of append tables (``order_by`` with ``order`` or ``zorder``): files clustered so that a filtered
read skips most of them, the rows unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.core.errors import ArgumentError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _random_xy(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"x": rng.integers(0, 1000, n), "y": rng.integers(0, 1000, n), "pad": rng.random(n)})


def _files_read(t: mt.Table, dnf: list[list[tuple[str, str, object]]]) -> int:
    return len({f.file_name for s in t.plan(filter=dnf) for f in s.files})


@pytest.mark.parametrize("strategy", ["order", "zorder"])
def test_sort_compaction_clusters_files_for_filtered_reads(tmp_path: Path, strategy: str) -> None:
    data = _random_xy(200_000, 3)
    t = mt.create_table(str(tmp_path / "t"), data.schema, options={"target-file-size": "128 kb", "write-only": "true"})
    for i in range(8):
        t.write(data.slice(i * 25_000, 25_000))
    box = [[("x", ">=", 100), ("x", "<", 200), ("y", ">=", 300), ("y", "<", 400)]]
    before = _files_read(t, box)
    expected = sorted(t.read(filter=box).to_pylist(), key=lambda r: (r["x"], r["y"], r["pad"]))
    snap = t.compact(order_by=["x", "y"], strategy=strategy, progress=False)
    assert snap is not None and snap.commit_kind.name == "COMPACT"
    after = _files_read(t, box)
    assert after * 4 <= before, (before, after)
    got = sorted(t.read(filter=box).to_pylist(), key=lambda r: (r["x"], r["y"], r["pad"]))
    assert got == expected and t.count() == data.num_rows
    if strategy == "order":
        xs = t.read().column("x").to_pylist()
        assert xs == sorted(xs)


def test_sort_compaction_arguments_are_checked(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA)
    t.write(pa.table({"id": [2, 1], "name": ["b", "a"]}, schema=SCHEMA))
    with pytest.raises(mt.SchemaError, match="nope"):
        t.compact(order_by=["nope"], progress=False)
    with pytest.raises(ArgumentError, match="strategy"):
        t.compact(order_by=["id"], strategy="hilbert", progress=False)
    keyed = mt.create_table(str(tmp_path / "k"), SCHEMA, ["id"])
    with pytest.raises(mt.UnsupportedError, match="append table"):
        keyed.compact(order_by=["name"], progress=False)
    t.compact(order_by=["id"], progress=False)
    assert t.read().column("id").to_pylist() == [1, 2]


@pytest.mark.parametrize("strategy", ["order", "zorder"])
def test_the_cli_sort_compacts_an_append_table(tmp_path: Path, strategy: str) -> None:
    from mergetable.cli.main import main

    data = _random_xy(40_000, 5)
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, data.schema, options={"target-file-size": "64 kb", "write-only": "true"})
    for i in range(4):
        t.write(data.slice(i * 10_000, 10_000))
    box = [[("x", ">=", 100), ("x", "<", 200), ("y", ">=", 300), ("y", "<", 400)]]
    before = _files_read(t, box)
    expected = sorted(t.read(filter=box).to_pylist(), key=lambda r: (r["x"], r["y"], r["pad"]))
    assert main(["compact", uri, "--order-by", "x,y", "--strategy", strategy, "--no-progress"]) == 0
    t = mt.open_table(uri)
    assert t.latest_snapshot().commit_kind.name == "COMPACT"  # type: ignore[union-attr]
    assert _files_read(t, box) * 2 <= before, (before, _files_read(t, box))
    assert sorted(t.read(filter=box).to_pylist(), key=lambda r: (r["x"], r["y"], r["pad"])) == expected
    assert t.count() == data.num_rows
    if strategy == "order":
        xs = t.read().column("x").to_pylist()
        assert xs == sorted(xs)
    assert main(["compact", uri, "--order-by", "nope", "--no-progress"]) != 0  # an unknown column: an error
