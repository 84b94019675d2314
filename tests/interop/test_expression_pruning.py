"""Pruning by a pyarrow expression (the duckdb path) never loses a row: random expressions against the merged read."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
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


def test_bucket_candidates_need_proof(table: mt.Table) -> None:
    schema = table.table_schema
    assert expression_buckets(pc.field("id") == 7, schema) is not None
    assert len(expression_buckets(pc.field("id").isin([7, 8, 9]), schema) or ()) >= 1
    # a candidate value that does not bound the key proves nothing
    assert expression_buckets((pc.field("id") == 7) | (pc.field("id") > 100), schema) is None
    assert expression_buckets(~(pc.field("id") == 7), schema) is None
    assert expression_buckets(pc.field("dt") == "2024-01-01", schema) is None
    assert expression_buckets(pa.compute.scalar(True), schema) is None
