"""``mt.write_table``: a table created from the data's schema (pandas, polars, Arrow, duckdb), its four modes,
and typed errors naming what is wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.core.errors import ArgumentError

ROWS = {"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": [1.5, 2.5, None]}


def _inputs() -> dict[str, object]:
    arrow = pa.table(ROWS)
    out: dict[str, object] = {
        "arrow": arrow,
        "reader": pa.RecordBatchReader.from_batches(arrow.schema, arrow.to_batches(max_chunksize=1)),
        "dict": ROWS,
    }
    try:
        import pandas as pd

        out["pandas"] = pd.DataFrame(ROWS)
    except ImportError:
        pass
    try:
        import polars as pl

        out["polars"] = pl.DataFrame(ROWS)
        out["polars-lazy"] = pl.DataFrame(ROWS).lazy()
    except ImportError:
        pass
    try:
        import duckdb

        con = duckdb.connect()
        values = "(1::bigint, 'a', 1.5::double), (2, 'a', 2.5), (3, 'b', null)"
        out["duckdb"] = con.sql(f"select * from (values {values}) t(id, dt, v)")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("kind", sorted(_inputs()))
def test_created_from_each_input_with_its_schema(tmp_path: Path, kind: str) -> None:
    t = mt.write_table(str(tmp_path / kind), _inputs()[kind], primary_key=["id", "dt"], partition_by="dt")
    assert (t.primary_key, t.partition_keys) == (("id", "dt"), ("dt",))
    assert t.schema.names == ["id", "dt", "v"]
    assert not t.schema.field("id").nullable and t.schema.field("v").nullable
    assert pa.types.is_integer(t.schema.field("id").type) and pa.types.is_floating(t.schema.field("v").type)
    got = mt.open_table(t.uri).read().sort_by("id")
    assert got.column("id").to_pylist() == [1, 2, 3] and got.column("v").to_pylist() == [1.5, 2.5, None]
    assert t.version == 1


def test_modes(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.write_table(uri, ROWS, primary_key="id", partition_by=None, options={"bucket": "2"})
    assert t.options["bucket"] == "2"
    with pytest.raises(mt.TableExistsError, match="mode='append'"):
        mt.write_table(uri, ROWS, primary_key="id")
    assert mt.write_table(uri, {"id": [9]}, mode="ignore").version == 1  # nothing written
    mt.write_table(uri, {"id": [3, 4], "dt": ["c", "d"], "v": [3.0, 4.0]}, mode="append")
    assert t.read().sort_by("id").column("dt").to_pylist() == ["a", "a", "c", "d"]
    mt.write_table(uri, {"id": [7], "dt": ["z"], "v": [7.0]}, mode="overwrite")
    assert t.read().to_pydict() == {"id": [7], "dt": ["z"], "v": [7.0]}
    assert [s.id for s in t.snapshots()] == [1, 2, 3]


def test_overwrite_replaces_every_partition(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    t = mt.write_table(uri, ROWS, primary_key=["id", "dt"], partition_by=["dt"])
    removed = len(t.files())
    mt.write_table(uri, {"id": [5], "dt": ["a"], "v": [0.0]}, mode="overwrite")
    assert t.read().to_pydict() == {"id": [5], "dt": ["a"], "v": [0.0]}  # partition 'b' is gone too
    result = t.write({"id": [6], "dt": ["c"], "v": [1.0]}, overwrite={})  # what mode="overwrite" commits
    assert result.num_removed_files == 1 and removed == 2 and t.read().to_pydict()["id"] == [6]


def test_an_overwrite_of_one_partition(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    t = mt.write_table(uri, ROWS, primary_key=["id", "dt"], partition_by=["dt"])
    mt.write_table(uri, {"id": [8], "dt": ["b"], "v": [8.0]}, mode="overwrite", partition={"dt": "b"})
    assert t.read().sort_by("id").to_pydict() == {"id": [1, 2, 8], "dt": ["a", "a", "b"], "v": [1.5, 2.5, 8.0]}
    with pytest.raises(ArgumentError, match=r"argument 'partition': only goes with mode='overwrite'"):
        mt.write_table(uri, {"id": [9], "dt": ["b"], "v": [9.0]}, mode="append", partition={"dt": "b"})
    assert t.version == 2


def test_errors_name_what_is_wrong(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    keyless = mt.write_table(str(tmp_path / "log"), ROWS)  # no key: an append table, as write_deltalake's
    assert keyless.table_schema.is_append_table and keyless.count() == len(ROWS["id"])
    with pytest.raises(ArgumentError, match="mode"):
        mt.write_table(uri, ROWS, primary_key="id", mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(mt.SchemaError, match="column 'key'"):
        mt.write_table(uri, ROWS, primary_key="key")
    assert not mt.table_exists(uri)
    mt.write_table(uri, ROWS, primary_key="id")
    with pytest.raises(mt.SchemaError, match="'extra'"):
        mt.write_table(uri, {**ROWS, "extra": [1, 2, 3]}, mode="append")
    with pytest.raises(mt.SchemaError, match="column 'v'"):
        mt.write_table(uri, {"id": [1], "dt": ["a"], "v": ["not a number"]}, mode="append")
    with pytest.raises(mt.TableExistsError, match="primary key"):
        mt.write_table(uri, ROWS, primary_key=["id", "dt"], mode="append")
    with pytest.raises(mt.TableExistsError, match="option bucket"):
        mt.write_table(uri, ROWS, mode="append", options={"bucket": "8"})
    with pytest.raises(mt.OptionsError, match="did you mean 'bucket'"):
        mt.write_table(str(tmp_path / "u"), ROWS, primary_key="id", options={"buckett": "2"})
    unsupported = re.escape("Paimon option 'row-tracking.enabled' is not supported by mergetable")
    with pytest.raises(mt.OptionsError, match=unsupported):
        mt.write_table(str(tmp_path / "u"), ROWS, primary_key="id", options={"row-tracking.enabled": "true"})
    with pytest.raises(mt.SchemaError, match="no rows and no schema"):
        mt.write_table(str(tmp_path / "e"), iter([]), primary_key="id")
    assert mt.open_table(uri).version == 1  # every refused append left the table as it was
