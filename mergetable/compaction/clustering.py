"""The row orders of sort compaction (Paimon's ``order_strategy``; Delta's ``OPTIMIZE ZORDER BY``).

A sort compaction of an append table rewrites a bucket's rows in the order of some columns, so that each of its
files covers a narrow range of them and a filtered read skips the others by their statistics:

* ``order``: sorted by the columns, the first one first (the files prune well on the first column);
* ``zorder``: sorted by the Z-value that interleaves the bits of every column's rank, so that files cover
  boxes of every column at once (a filter on any of them prunes).

Each column is first mapped to its dense rank (nulls last), scaled to the bits its share of 64 allows, so
every type orders as it compares and skewed values spread over the whole range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.arguments import name_list
from mergetable.core.errors import ArgumentError, UnsupportedError
from mergetable.core.schema import TableSchema, check_column

Strategy = Literal["order", "zorder"]
STRATEGIES: tuple[str, ...] = ("order", "zorder")


def check_strategy(strategy: str) -> Strategy:
    """``strategy`` checked against :data:`STRATEGIES` (lowercased).

    >>> check_strategy("ZOrder")
    'zorder'
    """
    value = strategy.lower() if isinstance(strategy, str) else strategy
    if value not in STRATEGIES:
        raise ArgumentError("strategy", f"must be one of {list(STRATEGIES)}, got {strategy!r}")
    return "zorder" if value == "zorder" else "order"


def sort_columns(schema: TableSchema, order_by: Sequence[str]) -> tuple[str, ...]:
    """``order_by`` checked: an append table's columns, at least one, none twice."""
    if not schema.is_append_table:
        raise UnsupportedError("a sort compaction (order_by) needs an append table (no primary key): a key table's "
                               "files are sorted by its key")  # fmt: skip
    columns = name_list(order_by, "order_by")
    if not columns or len(set(columns)) != len(columns):
        raise ArgumentError("order_by", f"expected distinct column names, got {list(columns)}")
    for c in columns:
        check_column(c, schema.column_names, "order_by column")
    return columns


def order_indices(rows: pa.Table, columns: Sequence[str], strategy: Strategy) -> pa.Array:
    """The positions of ``rows`` in the order ``strategy`` gives by ``columns``.

    >>> t = pa.table({"x": [3, 0, 1, 2], "y": [0, 3, 1, 2]})
    >>> order_indices(t, ["x", "y"], "order").to_pylist()
    [1, 2, 3, 0]
    >>> order_indices(t, ["x", "y"], "zorder").to_pylist()
    [2, 1, 0, 3]
    """
    if strategy == "order" or len(columns) == 1:
        return pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in columns])  # nulls last by default
    return pc.sort_indices(pa.array(zorder_values(rows, columns)))


def zorder_values(rows: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """The Z-value (uint64) of every row: the bits of each column's scaled dense rank, interleaved."""
    bits = 64 // len(columns)
    top = (1 << bits) - 1
    scaled = []
    for c in columns:
        rank = np.asarray(
            pc.rank(rows.column(c), sort_keys="ascending", tiebreaker="dense").to_numpy(),  # nulls ranked last
            dtype=np.uint64,
        )
        most = int(rank.max()) if len(rank) else 1
        if most > 1:  # ranks 1..most spread over 0..top
            rank = ((rank - np.uint64(1)).astype(np.float64) * (top / (most - 1))).astype(np.uint64)
        else:
            rank = np.zeros(len(rank), dtype=np.uint64)
        scaled.append(rank)
    n = len(columns)
    table = _spread_table(n)
    z = np.zeros(rows.num_rows, dtype=np.uint64)
    for i, v in enumerate(scaled):  # bit b of column i goes to bit b * n + (n - 1 - i): the first column leads
        spread = np.zeros(rows.num_rows, dtype=np.uint64)
        for k in range(0, bits, 8):  # a byte at a time through the lookup table
            byte = (v >> np.uint64(k)) & np.uint64(0xFF)
            spread |= table[byte.astype(np.intp)] << np.uint64(k * n)
        z |= spread << np.uint64(n - 1 - i)
    return z


def _spread_table(n: int) -> np.ndarray:
    """For every byte value, its 8 bits spread ``n`` apart (bit j at bit j * n)."""
    out = np.zeros(256, dtype=np.uint64)
    for j in range(8):
        out |= ((np.arange(256, dtype=np.uint64) >> np.uint64(j)) & np.uint64(1)) << np.uint64(j * n)
    return out


__all__ = ["STRATEGIES", "Strategy", "check_strategy", "order_indices", "sort_columns", "zorder_values"]
