"""Compaction speed, measured in one run.

* full compaction: C commits x R upsert rows (4 buckets, ~30% of the keys repeated, write-only) compacted
  into the top level, vs pyarrow reading the same level-0 files, sorting them by key and writing one
  Parquet file with the same compression (no merging at all: the floor of any compaction). Ratio =
  pyarrow time / mergetable time (>= 0.5 is the target).
* lookup changelog producer: a writer with ``changelog-producer=lookup`` compacts level 0 and looks up every
  key's previous value at each commit. Its cost per committed row, over the same commits made by a writer
  without a changelog producer, on a table preloaded with P rows.

Run: ``python benchmarks/bench_compaction.py [--rows 300000] [--commits 5] [--preload 500000]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_core import SCHEMA, batch

import mergetable as mt


def upserts(rng: np.random.Generator, commits: int, rows: int, start: int = 0) -> list[pa.Table]:
    """Commits whose keys repeat ~30% of the keys written before."""
    out = []
    next_key = start
    for _ in range(commits):
        repeated = int(rows * 0.3) if next_key else 0
        old = rng.integers(0, max(1, next_key), repeated)
        new = np.arange(next_key, next_key + rows - repeated)
        next_key += len(new)
        out.append(batch(rng, rng.permutation(np.concatenate([old, new]))))
    return out


def full_compaction(root: Path, rng: np.random.Generator, rows: int, commits: int, repeat: int) -> dict[str, float]:
    src = mt.create_table(str(root / "full"), SCHEMA, ["id"], options={"bucket": "4", "write-only": "true"})
    for b in upserts(rng, commits, rows):
        src.write(b)
    files = [src.path_factory.data_file(p, b, f.file_name) for p, b, f in src.files()]
    total = sum(f.row_count for _, _, f in src.files())
    expected = src.read().num_rows

    ours = []
    for i in range(repeat):
        copy = root / f"full-{i}"
        shutil.copytree(root / "full", copy)
        t = mt.open_table(str(copy))
        t0 = time.perf_counter()
        t.compact(full=True)
        ours.append(time.perf_counter() - t0)
        assert t.read().num_rows == expected
    theirs = []
    for i in range(repeat):
        t0 = time.perf_counter()
        table = pq.read_table(files).sort_by([("id", "ascending"), ("_SEQUENCE_NUMBER", "ascending")])
        pq.write_table(table, root / f"pyarrow-{i}.parquet", compression="zstd")
        theirs.append(time.perf_counter() - t0)
    best_ours, best_theirs = min(ours), min(theirs)
    print(
        f"   full compaction of {total:,} rows in {len(files)} level-0 files ({expected:,} keys): "
        f"{best_ours:.2f}s = {total / best_ours / 1e6:.2f} M rows/s; pyarrow read+sort+write {best_theirs:.2f}s "
        f"-> ratio {best_theirs / best_ours:.2f}x (target >= 0.5)"
    )
    return {
        "full_compaction_s": best_ours,
        "full_compaction_rows_per_s": total / best_ours,
        "pyarrow_read_sort_write_s": best_theirs,
        "full_compaction_ratio": best_theirs / best_ours,
    }


def lookup_cost(root: Path, rng: np.random.Generator, preload: int, commits: int, rows: int) -> dict[str, float]:
    base = upserts(rng, 1, preload)
    work = upserts(rng, commits, rows, start=preload)
    per_row = {}
    for producer in ("none", "lookup"):
        opts = {"bucket": "4", "changelog-producer": producer}
        t = mt.create_table(str(root / producer), SCHEMA, ["id"], options=opts)
        t.write(base[0])
        t.compact(full=True)
        t0 = time.perf_counter()
        for b in work:
            t.write(b)
        per_row[producer] = (time.perf_counter() - t0) / (commits * rows)
        if producer == "lookup":
            latest = t.latest_snapshot()
            assert latest is not None and t.changelog(1, latest.id).num_rows >= commits * rows
    overhead = per_row["lookup"] - per_row["none"]
    print(
        f"   lookup producer: {commits} commits x {rows:,} rows on {preload:,} preloaded: "
        f"{per_row['lookup'] * 1e6:.2f} us/row vs {per_row['none'] * 1e6:.2f} us/row without a producer "
        f"-> {overhead * 1e6:.2f} us per committed row for the changelog ({per_row['lookup'] / per_row['none']:.1f}x)"
    )
    return {
        "lookup_us_per_row": per_row["lookup"] * 1e6,
        "none_us_per_row": per_row["none"] * 1e6,
        "lookup_overhead_us_per_row": overhead * 1e6,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=300_000, help="rows per commit before the full compaction")
    ap.add_argument("--commits", type=int, default=5, help="commits before the full compaction")
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    ap.add_argument("--preload", type=int, default=500_000, help="rows in the table before the lookup commits")
    ap.add_argument("--lookup-commits", type=int, default=20)
    ap.add_argument("--lookup-rows", type=int, default=10_000, help="rows per lookup commit")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(5)
    root = Path(tempfile.mkdtemp(prefix="mt-bench-compaction-"))
    try:
        results = full_compaction(root, rng, args.rows, args.commits, args.repeat)
        results |= lookup_cost(root, rng, args.preload, args.lookup_commits, args.lookup_rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


if __name__ == "__main__":
    main()
