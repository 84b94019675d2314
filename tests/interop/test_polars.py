"""polars over a table: real LazyFrame queries equal the same query over ``t.read()``, and filters prune files."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.interop import PolarsSource

pl = pytest.importorskip("polars")

PREDICATES = [
    pl.col("id") == 433,
    (pl.col("id") >= 300) & (pl.col("id") < 360),
    pl.col("id").is_in([3, 250, 999, 5000]),
    pl.col("id").is_between(590, 610),
    pl.col("dt") == "2024-01-02",
    (pl.col("dt") != "2024-01-02") & (pl.col("qty") > 1020),
    (pl.col("id") < 20) | (pl.col("id") > 1180),
    (pl.lit(1100) < pl.col("id")) & pl.col("note").is_null(),
    pl.col("note").str.starts_with("n3") & (pl.col("id") < 500),
    pl.col("price") > 50.0,
    pl.col("price").is_nan() | (pl.col("id") == 1),
    pl.col("day") >= datetime.date(2024, 2, 5),
    pl.col("amount") == decimal.Decimal("62.50"),
    (pl.col("qty") == 1001) | pl.col("qty").is_null(),
    ~(pl.col("id") > 5),
]


def merged(t: mt.Table, **travel: object) -> pl.DataFrame:
    return pl.from_arrow(t.read(**travel))  # type: ignore[return-value]


def same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    keys = [c for c in ("id", "dt") if c in a.columns] or a.columns
    return a.sort(keys, nulls_last=True).equals(b.sort(keys, nulls_last=True))


@pytest.mark.parametrize("predicate", PREDICATES, ids=[str(p) for p in PREDICATES])
def test_filtered_queries_equal_the_merged_read(table: mt.Table, predicate: pl.Expr) -> None:
    got = table.to_polars(lazy=True).filter(predicate).collect()
    want = merged(table).filter(predicate)
    assert same(got, want)
    assert got.height == want.height


def test_key_and_partition_filters_read_fewer_files(table: mt.Table) -> None:
    total = len(table.files())
    everything = PolarsSource(table)
    assert everything.lazy().select("id").collect().height == table.count()
    assert everything.stats.files_read == total

    by_key = PolarsSource(table)
    got = by_key.lazy().filter(pl.col("id").is_between(300, 320)).select("id", "qty").collect()
    assert same(got, merged(table).filter(pl.col("id").is_between(300, 320)).select("id", "qty"))
    assert 0 < by_key.stats.files_read < total
    assert by_key.pushed == [[[("id", ">=", 300), ("id", "<=", 320)]]]

    by_partition = PolarsSource(table)
    got = by_partition.lazy().filter(pl.col("dt") == "2024-01-03").collect()
    assert same(got, merged(table).filter(pl.col("dt") == "2024-01-03"))
    assert 0 < by_partition.stats.files_read < total
    partition_files = sum(1 for p, _, _ in table.files() if p == ("2024-01-03",))
    assert by_partition.stats.files_read == partition_files


def test_untranslatable_predicates_still_filter_exactly(table: mt.Table) -> None:
    source = PolarsSource(table)
    predicate = pl.col("note").str.contains("5") | (pl.col("qty") % 7 == 0)
    got = source.lazy().filter(predicate).collect()
    assert same(got, merged(table).filter(predicate))
    assert source.pushed == [None]
    assert source.stats.files_read == len(table.files())


def test_projection_and_limit_are_pushed(table: mt.Table) -> None:
    source = PolarsSource(table)
    got = source.lazy().select("qty", "id").head(7).collect()
    assert got.columns == ["qty", "id"] and got.height == 7
    assert source.stats.rows_out == 7
    ids = set(merged(table)["id"].to_list())
    assert set(got["id"].to_list()) <= ids
    limited = PolarsSource(table)
    got = limited.lazy().filter(pl.col("id") > 1000).head(3).collect()
    assert got.height == 3 and all(i > 1000 for i in got["id"].to_list())


def test_aggregations_and_joins(table: mt.Table) -> None:
    lf = mt.scan_polars(table)
    got = lf.group_by("dt").agg(pl.len(), pl.col("qty").sum()).sort("dt").collect()
    want = merged(table).group_by("dt").agg(pl.len(), pl.col("qty").sum()).sort("dt")
    assert got.equals(want)
    joined = lf.join(lf.select("id", "dt", pl.col("qty").alias("q2")), on=["id", "dt"]).collect()
    assert joined.height == table.count()


def test_time_travel_and_eager_frames(table: mt.Table) -> None:
    first = table.to_polars(snapshot_id=1)
    assert isinstance(first, pl.DataFrame)
    assert same(first, merged(table, snapshot_id=1))
    lazy_old = table.to_polars(lazy=True, snapshot_id=2).filter(pl.col("id") < 50).collect()
    assert same(lazy_old, merged(table, snapshot_id=2).filter(pl.col("id") < 50))
    tag_name = "polars-v3"
    if tag_name not in table.tags():
        table.create_tag(tag_name, snapshot_id=3)
    assert same(table.to_polars(tag=tag_name), merged(table, snapshot_id=3))
    ms = table.snapshot(2).time_millis
    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    resolved = table.resolve_snapshot(timestamp_ms=ms)
    assert resolved is not None and resolved.id >= 2  # a later commit in the same millisecond wins
    for when in (at, at.isoformat(), ms):
        assert same(table.to_polars(lazy=True, timestamp_ms=when).collect(), merged(table, snapshot_id=resolved.id))
    assert same(table.to_polars(version=2), merged(table, snapshot_id=2))
    assert table.count(version=2) == merged(table, snapshot_id=2).height
    cols = table.to_polars(columns=["qty", "id"], filter=[("id", "<", 10)])
    assert isinstance(cols, pl.DataFrame) and cols.columns == ["qty", "id"]
    assert same(cols, merged(table).filter(pl.col("id") < 10).select("qty", "id"))


def test_a_lazy_frame_keeps_its_snapshot(tmp_path: object) -> None:
    t = mt.create_table(str(tmp_path) + "/t", pa.schema([("id", pa.int64()), ("v", pa.int64())]), primary_key=["id"])
    t.write({"id": [1, 2], "v": [10, 20]})
    lf = t.to_polars(lazy=True)
    t.write({"id": [3], "v": [30]})
    assert lf.collect().height == 2
    assert t.to_polars(lazy=True).collect().height == 3


def test_arrow_stream_protocol(table: mt.Table) -> None:
    assert same(pl.DataFrame(table), merged(table))
    assert pa.table(table).num_rows == table.count()
    empty = mt.create_table(str(table.uri) + "-empty", table.schema, primary_key=["id", "dt"], exist_ok=True)
    assert pl.DataFrame(empty).height == 0 and pl.DataFrame(empty).columns == table.schema.names
    assert empty.to_polars(lazy=True).collect().height == 0


def test_sorted_limits_and_top_k(table: mt.Table) -> None:
    """Slices above a sort (where polars may add its own dynamic predicate hints) give the merged read's rows."""
    lf = table.to_polars(lazy=True)
    got = lf.filter(pl.col("id") > 100).sort("id", descending=True).head(5).collect()
    assert same(got, merged(table).filter(pl.col("id") > 100).sort("id", descending=True).head(5))
    assert lf.top_k(3, by="id").collect()["id"].to_list() == merged(table).top_k(3, by="id")["id"].to_list()
