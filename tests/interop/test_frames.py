"""pandas views, Table.count/version/comment, and interop without the optional libraries."""

from __future__ import annotations

import decimal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mergetable as mt

pd = pytest.importorskip("pandas")


def test_to_pandas_keeps_dates_and_decimals_exact(table: mt.Table) -> None:
    df = table.to_pandas()
    assert len(df) == table.count()
    for column in ("day", "amount"):
        assert df[column].dtype != object
        assert isinstance(df[column].dtype, pd.ArrowDtype)
    assert df["qty"].dtype == pd.ArrowDtype(pa.int64())  # nulls kept, still integers
    merged = table.read()
    by_id = df.set_index(["id", "dt"]).sort_index()
    assert by_id["amount"].iloc[0] == merged.sort_by([("id", "ascending")])["amount"][0].as_py()
    assert isinstance(by_id["amount"].iloc[0], decimal.Decimal)
    old = table.to_pandas(columns=["id", "qty"], snapshot_id=1)
    assert list(old.columns) == ["id", "qty"] and len(old) == table.read(snapshot_id=1).num_rows


def test_pandas_round_trip(tmp_path: Path, table: mt.Table) -> None:
    copy = mt.create_table(str(tmp_path / "copy"), table.schema, primary_key=["id", "dt"], partition_keys=["dt"])
    copy.write(table.to_pandas())
    got, want = (repr(x.read().sort_by([("id", "ascending")]).to_pylist()) for x in (copy, table))
    assert got == want  # reprs: NaN is not equal to itself


def test_version_and_comment(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), primary_key=["id"], comment="orders")
    assert t.comment == "orders" and t.version is None and t.count() == 0
    t.write({"id": [1, 2]})
    t.write({"id": [3]})
    assert t.version == 2 and mt.open_table(t.uri).comment == "orders"


KEYS = st.integers(0, 40)


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["write", "delete", "compact"]), st.lists(KEYS, max_size=12)), max_size=8),
    engine=st.sampled_from(["deduplicate", "partial-update", "aggregation", "first-row"]),
)
def test_count_equals_the_merged_rows(tmp_path_factory: pytest.TempPathFactory, ops: list, engine: str) -> None:
    """count() against a dict oracle of the keys present, for every engine, with deletes and compaction."""
    uri = str(tmp_path_factory.mktemp("count") / "t")
    options = {"bucket": "2", "merge-engine": engine}
    if engine == "aggregation":
        options["fields.v.aggregate-function"] = "sum"
    if engine in ("aggregation", "partial-update"):
        options[
            "partial-update.remove-record-on-delete"
            if engine == "partial-update"
            else "aggregation.remove-record-on-delete"
        ] = "true"
    t = mt.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]), primary_key=["id"], options=options)
    present: set[int] = set()
    for op, keys in ops:
        if op == "write" and keys:
            t.write({"id": keys, "v": keys})
            present |= set(keys)
        elif op == "delete" and keys and engine != "first-row":
            t.delete_keys({"id": keys})
            present -= set(keys)
        elif op == "compact":
            t.compact(full=True)
    assert t.count() == t.read().num_rows == len(present)
    assert t.count(filter=[("id", "<", 20)]) == len({k for k in present if k < 20})


def test_count_of_a_single_run_reads_no_data(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("v", pa.int64())]), primary_key=["id"])
    t.write({"id": list(range(100)), "v": list(range(100))})
    for _, bucket, f in t.files():
        (tmp_path / "t" / f"bucket-{bucket}" / f.file_name).write_bytes(b"not parquet")
    assert t.count() == 100  # from file metadata: the (now unreadable) data is never opened
    with pytest.raises(mt.DataFileError):
        t.read()


BLOCK_PYSPARK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""

WITHOUT_SPARK = (
    BLOCK_PYSPARK
    + """
import mergetable as mt, mergetable.cli.main, mergetable.interop
t = mt.create_table(sys.argv[1], __import__("pyarrow").schema([("id", "int64")]), primary_key=["id"])
t.write({"id": [1, 2, 3]})
assert t.count() == 3 and t.to_polars().height == 3
assert not [m for m in sys.modules if m.startswith("pyspark")], "pyspark was imported"
try:
    import mergetable.spark
except ImportError as exc:
    assert isinstance(exc, mt.MissingExtraError) and isinstance(exc, mt.MergeTableError), type(exc)
    assert "mergetable[spark]" in str(exc) and exc.extra == "spark", str(exc)
    print("ok:", exc)
else:
    raise AssertionError("mergetable.spark imported without pyspark")
"""
)


def test_mergetable_never_imports_pyspark(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_SPARK, str(tmp_path / "t")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "ok: mergetable.spark" in out.stdout


def test_views_without_their_library_name_the_extra(tmp_path: Path) -> None:
    code = (
        BLOCK_PYSPARK.replace('"pyspark"', '"polars"').replace('"pyspark."', '"polars."')
        + """
import mergetable as mt
t = mt.create_table(sys.argv[1], __import__("pyarrow").schema([("id", "int64")]), primary_key=["id"])
try:
    t.to_polars()
except mt.MissingExtraError as exc:
    assert "mergetable[polars]" in str(exc), str(exc)
    print("ok")
"""
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_s3_without_s3fs_names_the_extra(tmp_path: Path) -> None:
    code = (
        BLOCK_PYSPARK.replace('"pyspark"', '"s3fs"').replace('"pyspark."', '"s3fs."')
        + """
import mergetable as mt
try:
    mt.open_table("s3://bucket/orders")
except mt.MissingExtraError as exc:
    assert "mergetable[s3]" in str(exc) and isinstance(exc, ImportError), str(exc)
    print("ok")
"""
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
