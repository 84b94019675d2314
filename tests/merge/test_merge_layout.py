"""Key grouping: direct (counting) and sorted layouts agree; radix sort and dense ranks are exact."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND
from mergetable.merge.arrays import take_keyed
from mergetable.merge.engines.partial_update import dense_rank
from mergetable.merge.layout import Layout, newest_per_key, stable_int_argsort, take_rows


def rows(
    keys: list[object] | np.ndarray, seq: list[int] | np.ndarray | None = None, key_type: pa.DataType | None = None
) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "k": pa.array(keys, key_type),
            SEQUENCE_NUMBER: pa.array(np.arange(n) if seq is None else seq, pa.int64()),
            VALUE_KIND: pa.array(np.zeros(n, np.int8)),
        }
    )


def groups_of(layout: Layout) -> list[list[int]]:
    """Physical rows of each group in merge order."""
    out: list[list[int]] = [[] for _ in range(layout.n_groups)]
    for pos, g in enumerate(layout.gid.tolist()):
        out[g].append(int(layout.phys(np.array([pos]))[0]))
    return out


@pytest.mark.parametrize("span", [5, 1000, 10**12])
def test_direct_and_sorted_layouts_agree(span: int) -> None:
    rng = np.random.default_rng(span)
    keys = rng.integers(-span, span, 500)
    direct = Layout.build(rows(keys), ["k"], seq_ordered=True)
    shuffled_seq = rng.permutation(500)
    sorted_layout = Layout.build(rows(keys, shuffled_seq), ["k"])
    expected: dict[int, list[int]] = {}
    for i in np.argsort(keys, kind="stable"):
        expected.setdefault(int(keys[i]), []).append(int(i))
    assert groups_of(direct) == list(expected.values())
    by_seq: dict[int, list[int]] = {}
    for i in np.lexsort((shuffled_seq, keys)):
        by_seq.setdefault(int(keys[i]), []).append(int(i))
    assert groups_of(sorted_layout) == list(by_seq.values())
    assert sorted_layout.contiguous
    assert direct.phys(direct.last_pos).tolist() == [g[-1] for g in expected.values()]
    assert direct.phys(direct.first_pos).tolist() == [g[0] for g in expected.values()]


def test_contiguous_layout_and_restrict() -> None:
    layout = Layout.build(rows([3, 1, 3, 2, 1]), ["k"], seq_ordered=True)
    contiguous = layout.contiguous_layout()
    assert groups_of(contiguous) == groups_of(layout) == [[1, 4], [3], [0, 2]]
    assert contiguous.rank_in_group.tolist() == [0, 1, 0, 0, 1]
    sub, _ = contiguous.restrict(np.array([True, False, True]))
    assert groups_of(sub) == [[1, 4], [0, 2]]


@pytest.mark.parametrize("key_type", [pa.string(), pa.float64(), pa.timestamp("us")])
def test_non_integer_and_temporal_keys(key_type: pa.DataType) -> None:
    values = {"string": ["b", "a", "b"], "double": [2.0, 1.0, 2.0], "timestamp[us]": [2, 1, 2]}[str(key_type)]
    layout = Layout.build(rows(values, key_type=key_type), ["k"])
    assert groups_of(layout) == [[1], [0, 2]]


def test_multi_column_keys() -> None:
    t = rows([1, 1, 2, 1]).append_column("k2", pa.array(["x", "y", "x", "x"]))
    layout = Layout.build(t, ["k", "k2"])
    assert groups_of(layout) == [[0, 3], [1], [2]]


@pytest.mark.parametrize("span", [1, 300, 70_000, 2**40, 2**62])
def test_stable_int_argsort(span: int) -> None:
    rng = np.random.default_rng(1)
    values = rng.integers(-span, span, 2000, dtype=np.int64)
    assert stable_int_argsort(values).tolist() == np.argsort(values, kind="stable").tolist()


def test_dense_rank_nulls_lowest_lexicographic() -> None:
    a = pa.array([1, None, 1, None, 0])
    b = pa.array([None, 5, 0, None, 9])
    assert dense_rank([a, b]).tolist() == [3, 1, 4, 0, 2]


def _chunked(pieces: list[np.ndarray], key_type: pa.DataType | None = None) -> pa.Table:
    """Rows as a merge concatenates them: one chunk per (non-empty) piece, positions in sequence order."""
    key_type = key_type or pa.int64()
    schema = rows([], key_type=key_type).schema
    starts = np.cumsum([0] + [len(p) for p in pieces])
    batches = [
        pa.record_batch(
            [pa.array(p, key_type), pa.array(np.arange(a, a + len(p))), pa.array(np.zeros(len(p), np.int8))],
            schema=schema,
        )
        for p, a in zip(pieces, starts, strict=False)
        if len(p)
    ]
    return pa.Table.from_batches(batches, schema=schema)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(-40, 40), max_size=30).map(lambda v: sorted(set(v))), min_size=1, max_size=7),
    st.sampled_from([pa.int64(), pa.int32(), pa.int8(), pa.timestamp("us"), pa.int16()]),
)
def test_newest_per_key_matches_a_dict_of_last_positions(pieces: list[list[int]], key_type: pa.DataType) -> None:
    """Sorted runs, one chunk each: the newest position of every key, in key order; the sorted layout agrees."""
    table = _chunked([np.array(p, np.int64) for p in pieces], key_type)
    if table.num_rows == 0:
        return
    newest: dict[int, int] = {}
    for pos, k in enumerate(k for p in pieces for k in p):
        newest[k] = pos
    got = newest_per_key(table, ["k"], seq_ordered=True)
    assert got is not None
    assert got.tolist() == [newest[k] for k in sorted(newest)]
    layout = Layout.build(table, ["k"], seq_ordered=True)
    assert got.tolist() == layout.phys(layout.last_pos).tolist()
    assert newest_per_key(table, ["k"]).tolist() == got.tolist()  # _SEQUENCE_NUMBER ascends: same answer


def test_newest_per_key_declines_what_it_cannot_answer_without_a_sort() -> None:
    runs = [np.array([1, 3, 5]), np.array([2, 3])]
    assert newest_per_key(_chunked(runs), ["k"], seq_ordered=True).tolist() == [0, 3, 4, 2]
    # a chunk not strictly ascending (a repeated or out-of-order key), keys too sparse for a slot per value
    assert newest_per_key(_chunked([np.array([1, 3, 3])]), ["k"], seq_ordered=True) is None
    assert newest_per_key(_chunked([np.array([3, 1])]), ["k"], seq_ordered=True) is None
    assert newest_per_key(_chunked([np.array([0, 10**9])]), ["k"], seq_ordered=True) is None
    # sequence numbers out of position order, several key columns, a sequence field, string or null keys
    shuffled = _chunked(runs).set_column(1, SEQUENCE_NUMBER, pa.array([4, 3, 2, 1, 0], pa.int64()))
    assert newest_per_key(shuffled, ["k"]) is None
    assert newest_per_key(_chunked(runs), ["k", SEQUENCE_NUMBER], seq_ordered=True) is None
    assert newest_per_key(_chunked(runs), ["k"], [SEQUENCE_NUMBER], seq_ordered=True) is None
    assert newest_per_key(rows(["a", "b"]), ["k"], seq_ordered=True) is None
    assert newest_per_key(rows([1, None]), ["k"], seq_ordered=True) is None
    assert newest_per_key(_chunked(runs, pa.uint64()), ["k"], seq_ordered=True) is None


def test_take_rows_checks_bounds_once_for_every_column() -> None:
    table = _chunked([np.array([1, 3, 5]), np.array([2, 3])])
    assert take_rows(table, np.array([4, 0], np.int32)).column("k").to_pylist() == [3, 1]
    assert take_rows(table, np.arange(5)) is table  # every row in order: not copied
    for bad in ([0, 5], [-1, 2]):
        with pytest.raises(IndexError, match="out of bounds for 5 rows"):
            take_rows(table, np.array(bad))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(-20, 20), max_size=30).map(lambda v: sorted(set(v))), min_size=1, max_size=7),
    st.sampled_from([pa.int64(), pa.int32(), pa.int8(), pa.uint8(), pa.timestamp("us")]),
)
def test_take_keyed_equals_take_rows(pieces: list[list[int]], key_type: pa.DataType) -> None:
    """Survivors of sorted runs, dense in key or not: the key column made from its range is the one gathered."""
    if key_type == pa.uint8():
        pieces = [[k + 20 for k in p] for p in pieces]
    table = _chunked([np.array(p, np.int64) for p in pieces], key_type)
    if table.num_rows == 0:
        return
    idx = newest_per_key(table, ["k"], seq_ordered=True)
    assert idx is not None
    expected = take_rows(table, idx)
    for rows in (table, table.select(["k"])):  # with value columns, and the key alone (a count)
        got = take_keyed(rows, idx, "k")
        assert got.schema == rows.schema
        assert got.equals(expected.select(rows.column_names))


def test_take_keyed_gathers_what_is_not_a_range() -> None:
    table = rows([1, 2, 4, 4])
    assert take_keyed(table, np.array([0, 1, 3]), "k").column("k").to_pylist() == [1, 2, 4]  # 1..4 is not 3 keys
    assert take_keyed(table, np.array([0, 1]), None).column("k").to_pylist() == [1, 2]
    assert take_keyed(table, np.arange(4), "k") is table  # every row in order: not copied
    nulls = rows([1, 2, None])
    assert take_keyed(nulls, np.array([0, 2]), "k").column("k").to_pylist() == [1, None]  # a null key: gathered
