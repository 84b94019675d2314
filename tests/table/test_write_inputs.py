"""Every input ``Table.write`` accepts gives the same table; streams are written without being held whole."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("day", pa.date32())])
IDS = list(range(1, 7))
NAMES = [f"n{i}" if i % 3 else None for i in IDS]
DAYS = [datetime.date(2024, 1, i) for i in IDS]
ROWS = [{"id": i, "name": n, "day": d} for i, n, d in zip(IDS, NAMES, DAYS)]
ARROW = pa.table({"id": IDS, "name": NAMES, "day": DAYS}, schema=SCHEMA)


def _polars() -> Any:
    pl = pytest.importorskip("polars")
    return pl.DataFrame({"id": IDS, "name": NAMES, "day": DAYS})


def _duckdb() -> Any:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    arrow = ARROW  # noqa: F841 - read by the SQL below
    return con.sql("select id, name, day from arrow")


def _pandas() -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({"id": IDS, "name": NAMES, "day": DAYS})


class Stream:
    """An object with only the Arrow PyCapsule stream protocol (as nanoarrow or another library would export)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return ARROW.__arrow_c_stream__(requested_schema)


INPUTS: dict[str, Callable[[], Any]] = {
    "pyarrow table": lambda: ARROW,
    "record batch": lambda: ARROW.to_batches()[0],
    "record batch reader": lambda: pa.RecordBatchReader.from_batches(SCHEMA, ARROW.to_batches(max_chunksize=2)),
    "iterable of batches": lambda: iter(ARROW.to_batches(max_chunksize=4)),
    "list of tables": lambda: [ARROW.slice(0, 3), ARROW.slice(3)],
    "arrow c stream": Stream,
    "polars dataframe": _polars,
    "polars lazyframe": lambda: _polars().lazy(),
    "duckdb relation": _duckdb,
    "pandas dataframe": _pandas,
    "dict of lists": lambda: {"id": IDS, "name": NAMES, "day": DAYS},
    "list of dicts": lambda: ROWS,
    "generator of dicts": lambda: (dict(r) for r in ROWS),
    "rows with missing keys": lambda: [{k: v for k, v in r.items() if v is not None} for r in ROWS],
}


def make(path: Path, **options: str) -> mt.Table:
    return mt.create_table(str(path / "t"), SCHEMA, primary_key=["id"], options={"bucket": "2", **options})


@pytest.mark.parametrize("kind", list(INPUTS))
def test_every_accepted_input_writes_the_same_rows(tmp_path: Path, kind: str) -> None:
    t = make(tmp_path)
    assert t.write(INPUTS[kind]()).snapshot is not None
    assert t.read().sort_by("id").equals(ARROW)


@pytest.mark.parametrize(
    ("data", "culprit"),
    [
        (42, "cannot write a int"),
        ("id,name", "cannot write a str"),
        ([1, 2, 3], "item 0 is a int"),
        ((r for r in [ROWS[0], 7]), "item 1 is a int"),
        ({"id": [1, 2], "name": ["a"]}, "equally long"),
        ([{"id": 1}, {"id": "x"}], "row dicts"),
    ],
)
def test_anything_else_is_a_typed_error_naming_the_argument(tmp_path: Path, data: Any, culprit: str) -> None:
    t = make(tmp_path)
    with pytest.raises(mt.SchemaError, match="argument 'data'") as info:
        t.write(data)
    assert culprit in str(info.value)
    assert t.version is None and t.files() == []


def test_a_stream_is_written_while_it_is_still_being_produced(tmp_path: Path) -> None:
    t = make(tmp_path, **{"write-buffer-size": "4 kb"})
    seen_files: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for i in range(40):
            seen_files.append(len(list((tmp_path / "t").rglob("*.parquet"))))
            ids = list(range(i * 100, i * 100 + 100))
            yield pa.record_batch({"id": ids, "name": [f"n{k}" for k in ids], "day": [DAYS[0]] * 100}, schema=SCHEMA)

    t.write(pa.RecordBatchReader.from_batches(SCHEMA, batches()))
    assert t.count() == 4000
    assert seen_files[0] == 0 and seen_files[-1] > 0  # level-0 files were flushed before the stream ended


def test_a_failing_stream_leaves_the_table_unchanged(tmp_path: Path) -> None:
    t = make(tmp_path, **{"write-buffer-size": "4 kb"})
    t.write(ARROW)

    def batches() -> Iterator[dict[str, Any]]:
        yield from ({"id": i, "name": "x", "day": DAYS[0]} for i in range(70000))
        yield {"id": None, "name": "null key", "day": DAYS[0]}

    with pytest.raises(mt.SchemaError, match="primary key"):
        t.write(batches())
    assert t.version == 1 and t.read().sort_by("id").equals(ARROW)
    assert len(list((tmp_path / "t").rglob("*.parquet"))) == len(t.files())


def test_row_kinds_per_row_with_a_streamed_input(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.write(ARROW)
    reader = pa.RecordBatchReader.from_batches(SCHEMA, ARROW.slice(0, 4).to_batches(max_chunksize=1))
    t.write(reader, row_kind=["-D", "+U", "-D", "+I"])
    assert sorted(t.read().column("id").to_pylist()) == [2, 4, 5, 6]


def test_rows_of_one_bucket_in_a_row_are_buffered_uncopied_and_scattered_rows_copied(tmp_path: Path) -> None:
    """``split_by_bucket`` slices a group of consecutive rows (rows read back from a table come bucket by bucket)
    and takes the others: either way each group holds its rows in input order."""
    from mergetable.write.input import split_by_bucket

    schema = pa.schema([("p", pa.string()), ("id", pa.int64())])
    t = mt.create_table(str(tmp_path / "t"), schema, ["p", "id"], partition_keys=["p"], options={"bucket": "1"})
    grouped = pa.table({"p": ["a"] * 3 + ["b"] * 2, "id": [5, 1, 3, 2, 9]}, schema=schema)
    scattered = pa.table({"p": ["a", "b", "a", "b", "a"], "id": [5, 2, 1, 9, 3]}, schema=schema)
    base = grouped.column("id").chunks[0].buffers()[1].address
    for table, shared in ((grouped, True), (scattered, False)):
        got = {part: rows for part, _, rows in split_by_bucket(table, t.table_schema)}
        assert got[("a",)].column("id").to_pylist() == [5, 1, 3] and got[("b",)].column("id").to_pylist() == [2, 9]
        addresses = [rows.column("id").chunks[0].buffers()[1].address for rows in got.values()]
        assert all(a == base for a in addresses) == shared
