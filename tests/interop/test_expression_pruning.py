"""Pruning by a pyarrow expression (the duckdb path) never loses a row: random expressions against the merged read,
of a key table and of an append table (pruned by column statistics too)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.interop import TableDataset
from mergetable.interop.scan import expression_buckets

IDS = st.integers(-5, 1300)
DTS = st.sampled_from(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-09"])


def leaves() -> st.SearchStrategy[pc.Expression]:
    field_id, field_dt = pc.field("id"), pc.field("dt")
    return st.one_of(
        IDS.map(lambda v: field_id == v),
        IDS.map(lambda v: field_id < v),
        IDS.map(lambda v: field_id >= v),
        st.lists(IDS, min_size=1, max_size=4).map(lambda vs: field_id.isin(vs)),
        DTS.map(lambda v: field_dt == v),
        DTS.map(lambda v: field_dt != v),
        st.integers(0, 1100).map(lambda v: pc.field("qty") > v),
        st.just(pc.field("note").is_null()),
    )


EXPRESSIONS = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda ab: ab[0] & ab[1]),
        st.tuples(inner, inner).map(lambda ab: ab[0] | ab[1]),
        inner.map(lambda a: ~a),
    ),
    max_leaves=5,
)


@settings(max_examples=60, deadline=None)
@given(expression=EXPRESSIONS)
def test_pruned_scans_return_exactly_the_matching_merged_rows(table: mt.Table, expression: pc.Expression) -> None:
    source = TableDataset(table)
    got = source.to_table(filter=expression).sort_by([("id", "ascending"), ("dt", "ascending")])
    want = table.read().filter(expression).sort_by([("id", "ascending"), ("dt", "ascending")])
    assert repr(got.to_pylist()) == repr(want.to_pylist())
    assert source.stats.files_read <= len(table.files())


@pytest.fixture(scope="module")
def append_table(table: mt.Table, tmp_path_factory: pytest.TempPathFactory) -> mt.Table:
    """The key table's rows as an append table: files of narrow id ranges, deletion vectors, a column added
    between writes."""
    uri = str(Path(tmp_path_factory.mktemp("interop-append")) / "t")
    data = table.read().sort_by("id")
    t = mt.create_table(
        uri, table.schema, partition_keys=["dt"], options={"deletion-vectors.enabled": "true", "write-only": "true"}
    )
    for start in range(0, 480, 120):
        t.write(data.slice(start, 120))
    t.delete([("id", "in", list(range(0, 600, 7)))])
    t.alter.add_columns([pa.field("extra", pa.int64())])
    t = mt.open_table(uri)
    for start in range(480, data.num_rows, 120):  # files of the new schema (their statistics count)
        part = data.slice(start, 120)
        t.write(part.append_column("extra", pa.array([start] * part.num_rows, pa.int64())))
    return t


@settings(max_examples=60, deadline=None)
@given(expression=EXPRESSIONS)
def test_an_append_tables_pruned_scans_return_exactly_the_matching_rows(
    append_table: mt.Table, expression: pc.Expression
) -> None:
    source = TableDataset(append_table)
    got = source.to_table(filter=expression).sort_by([("id", "ascending"), ("dt", "ascending")])
    want = append_table.read().filter(expression).sort_by([("id", "ascending"), ("dt", "ascending")])
    assert repr(got.to_pylist()) == repr(want.to_pylist())
    assert source.stats.files_read <= len(append_table.files())


def test_an_append_tables_statistics_prune_files(append_table: mt.Table) -> None:
    narrow = TableDataset(append_table)
    assert narrow.to_table(filter=pc.field("id") == 1000).column("id").to_pylist() == [1000]
    older = sum(f.schema_id != append_table.table_schema.id for _, _, f in append_table.files())
    assert older >= 3 and narrow.stats.files_read == older + 1  # files of the earlier schema are kept
    nulls = TableDataset(append_table)
    expected = append_table.read().filter(pc.field("qty").is_null()).num_rows
    assert expected and nulls.to_table(filter=pc.field("qty").is_null()).num_rows == expected


def test_bucket_candidates_need_proof(table: mt.Table) -> None:
    schema = table.table_schema
    assert expression_buckets(pc.field("id") == 7, schema) is not None
    assert len(expression_buckets(pc.field("id").isin([7, 8, 9]), schema) or ()) >= 1
    # a candidate value that does not bound the key proves nothing
    assert expression_buckets((pc.field("id") == 7) | (pc.field("id") > 100), schema) is None
    assert expression_buckets(~(pc.field("id") == 7), schema) is None
    assert expression_buckets(pc.field("dt") == "2024-01-01", schema) is None
    assert expression_buckets(pa.compute.scalar(True), schema) is None
