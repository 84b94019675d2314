"""duckdb over a table: real SQL over ``t.to_duckdb()`` equals the same SQL over ``t.read()``, filters prune files."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.interop import TableDataset

duckdb = pytest.importorskip("duckdb")

WHERE = [
    "id = 433",
    "id >= 300 and id < 360",
    "id in (3, 250, 999, 5000)",
    "id between 590 and 610",
    "dt = '2024-01-02'",
    "dt <> '2024-01-02' and qty > 1020",
    "id < 20 or id > 1180",
    "id > 1100 and note is null",
    "note like 'n3%' and id < 500",
    "price > 50",
    "isnan(price) or id = 1",
    "day >= date '2024-02-05'",
    "amount = 62.50",
    "qty = 1001 or qty is null",
    "not (id > 5)",
    "dt in ('2024-01-01', '2024-01-03') and id % 5 = 0",
]


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()


def rows(result: list[tuple[object, ...]]) -> list[str]:
    """Rows as sorted reprs (NaN compares unequal to itself, its repr does not)."""
    return sorted(map(repr, result))


@pytest.mark.parametrize("where", WHERE)
def test_sql_equals_sql_over_the_merged_read(table: mt.Table, con: duckdb.DuckDBPyConnection, where: str) -> None:
    merged = table.read()  # noqa: F841 - read by the SQL below
    source = TableDataset(table)
    rel = con.from_arrow(source)
    got = rows(rel.filter(where).fetchall())
    want = rows(con.sql(f"select * from merged where {where}").fetchall())
    assert got == want
    assert source.stats.files_read <= len(table.files())


def test_filters_and_projections_reach_mergetable(table: mt.Table, con: duckdb.DuckDBPyConnection) -> None:
    total = len(table.files())
    everything = TableDataset(table)
    assert con.from_arrow(everything).aggregate("count(*)").fetchall() == [(table.count(),)]
    assert everything.stats.files_read == total

    by_key = TableDataset(table)
    got = con.from_arrow(by_key).filter("id between 300 and 320").project("id, qty").fetchall()
    want = table.read(columns=["id", "qty"], filter=[("id", ">=", 300), ("id", "<=", 320)])
    assert rows(got) == rows(list(zip(*[c.to_pylist() for c in want.columns])))
    assert 0 < by_key.stats.files_read < total

    by_partition = TableDataset(table)
    n = con.from_arrow(by_partition).filter("dt = '2024-01-03'").aggregate("count(*)").fetchall()[0][0]
    assert n == table.count(filter=[("dt", "=", "2024-01-03")])
    assert by_partition.stats.files_read == sum(1 for p, _, _ in table.files() if p == ("2024-01-03",))


def test_key_equality_reads_one_bucket(table: mt.Table, con: duckdb.DuckDBPyConnection) -> None:
    source = TableDataset(table)
    got = con.from_arrow(source).filter("id = 433 and dt = '2024-01-03'").project("id, qty").fetchall()
    assert rows(got) == rows([(r["id"], r["qty"]) for r in table.read(filter=[("id", "=", 433)]).to_pylist()])
    bucket_files = {(p, b) for p, b, _ in table.files()}
    assert len(bucket_files) > 1
    assert 0 < source.stats.files_read <= max(sum(1 for p, b, _ in table.files() if (p, b) == k) for k in bucket_files)
    wide = TableDataset(table)
    con.from_arrow(wide).filter("id in (3, 433) or id = 1001").fetchall()
    assert wide.stats.files_read < len(table.files())


def test_relation_api_sql_and_snapshots(table: mt.Table, con: duckdb.DuckDBPyConnection) -> None:
    rel = table.to_duckdb(con)
    assert rel.aggregate("count(*)").fetchall() == [(table.count(),)]
    old = table.to_duckdb(con, snapshot_id=1)
    assert old.aggregate("count(*)").fetchall() == [(table.read(snapshot_id=1).num_rows,)]
    rel.create_view("orders")
    got = con.sql("select dt, count(*), sum(qty) from orders where id < 700 group by dt order by dt").fetchall()
    merged = table.read()  # noqa: F841
    want = con.sql("select dt, count(*), sum(qty) from merged where id < 700 group by dt order by dt").fetchall()
    assert got == want


def test_replacement_scan_through_the_arrow_stream(table: mt.Table, con: duckdb.DuckDBPyConnection) -> None:
    t = table  # noqa: F841 - found by duckdb's replacement scan
    assert con.sql("select count(*) from t").fetchall() == [(table.count(),)]


def test_pyarrow_dataset_api(table: mt.Table) -> None:
    source = TableDataset(table)
    expr = (pc.field("id") < 100) & (pc.field("dt") == "2024-01-01")
    got = source.to_table(columns=["id", "qty"], filter=expr).sort_by("id")
    want = table.read().filter(expr).select(["id", "qty"]).sort_by("id")
    assert got.equals(want)
    assert source.filter(expr).count_rows() == want.num_rows
    assert source.head(5).num_rows == 5
    with pytest.raises(mt.UnsupportedError):
        source.get_fragments()
    assert isinstance(source, pa.dataset.Dataset)
