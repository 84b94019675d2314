"""Merge-engine throughput against ``pyarrow.Table.group_by(...).aggregate(...)`` on the same rows.

Rows: ``--rows`` records (default 10M) over ``--keys`` keys (default rows / 10), one int64 key, an int64
and a float64 value column (10% NULLs), records in write order (``_SEQUENCE_NUMBER`` increasing) as a
write buffer or concatenated sorted runs present them. For each case the script prints the best of
``--repeat`` runs of the engine's ``merge`` and of the equivalent Arrow group-by, and their ratio
(Arrow time / engine time: 1.0 = as fast as Arrow, the target is >= 0.3).

Run: ``python benchmarks/bench_merge.py [--rows N] [--keys K] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from mergetable.merge import create_merge_function


def make_rows(n: int, keys: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    key = rng.integers(0, keys, n)
    ints = rng.integers(-1000, 1000, n)
    floats = rng.random(n)
    null_i = rng.random(n) < 0.1
    null_f = rng.random(n) < 0.1
    return pa.table(
        {
            "k": pa.array(key, pa.int64()),
            SEQUENCE_NUMBER: pa.array(np.arange(n, dtype=np.int64)),
            VALUE_KIND: pa.array(np.zeros(n, dtype=np.int8)),
            "v": pa.array(ints, mask=null_i),
            "f": pa.array(floats, mask=null_f),
        }
    )


def engine_for(options: dict[str, str]) -> Any:
    schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.int64()), pa.field("f", pa.float64())])
    return create_merge_function(TableSchema.create(schema, ["k"], [], options))


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    keys = args.keys or max(1, args.rows // 10)
    rows = make_rows(args.rows, keys)
    user = rows.select(["k", "v", "f"])
    cases: list[tuple[str, dict[str, str], list[tuple[str, str]], bool]] = [
        ("sum", {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                 "fields.f.aggregate-function": "sum"}, [("v", "sum"), ("f", "sum")], True),
        ("max", {"merge-engine": "aggregation", "fields.v.aggregate-function": "max",
                 "fields.f.aggregate-function": "max"}, [("v", "max"), ("f", "max")], True),
        ("last_non_null_value", {"merge-engine": "aggregation"}, [("v", "last"), ("f", "last")], False),
        ("partial-update", {"merge-engine": "partial-update"}, [("v", "last"), ("f", "last")], False),
    ]  # fmt: skip
    print(f"{args.rows:,} rows, {keys:,} keys (best of {args.repeat})")
    print(f"{'case':<22}{'engine s':>10}{'arrow s':>10}{'ratio':>8}")
    for name, options, aggs, threads in cases:
        fn = engine_for(options)
        t_engine = best(lambda fn=fn: fn.merge(rows), args.repeat)
        t_arrow = best(lambda aggs=aggs, threads=threads: user.group_by("k", use_threads=threads).aggregate(aggs),
                       args.repeat)  # fmt: skip
        print(f"{name:<22}{t_engine:>10.3f}{t_arrow:>10.3f}{t_arrow / t_engine:>8.2f}")


if __name__ == "__main__":
    main()
