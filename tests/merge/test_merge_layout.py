"""Key grouping: direct (counting) and sorted layouts agree; radix sort and dense ranks are exact."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND
from mergetable.merge.engines.partial_update import dense_rank
from mergetable.merge.layout import Layout, stable_int_argsort


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
