"""Storage-core speed against raw pyarrow on the same data, measured in one run.

* ingest: N commits × R upsert rows (4 buckets, ~30% of keys repeated) vs pyarrow sort + write of the same rows
* merge-on-read: 5 sorted runs per bucket vs a plain pyarrow scan of the same files
* single-run read vs a plain pyarrow scan of the same files
* point lookup by key vs a full read

Run: ``python benchmarks/bench_core.py [--rows 1000000] [--commits 10]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()), ("n", pa.int32())])


def batch(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "v": rng.random(n),
            "s": pa.array(np.char.add("val-", (ids % 100_000).astype(str))),
            "n": rng.integers(0, 1000, n, dtype=np.int32),
        },
        schema=SCHEMA,
    )


def best(fn: Callable[[], Any], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def data_files(t: mt.Table) -> list[str]:
    return [t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files()]


def raw_scan(files: list[str]) -> pa.Table:
    """The baseline of every merged-read ratio: the user columns of ``files`` as one pyarrow dataset, on Arrow's
    threads (``use_threads`` left on), without page-checksum verification (pyarrow's defaults)."""
    return pq.read_table(files, columns=list(SCHEMA.names))


def interleaved(reads: dict[str, Callable[[], Any]], repeat: int = 3) -> dict[str, tuple[float, float]]:
    """Best wall and CPU seconds (all threads: ``process_time``) of each read, after one untimed call of each,
    the reads taking turns (A, B, A, B …) so that a shared machine's load swings hit them alike."""
    for read in reads.values():
        read()  # the first reads of a process pay for fresh memory (page faults)
    walls: dict[str, list[float]] = {name: [] for name in reads}
    cpus: dict[str, list[float]] = {name: [] for name in reads}
    for _ in range(repeat):
        for name, read in reads.items():
            cpu, wall = time.process_time(), time.perf_counter()
            read()
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
    return {name: (min(walls[name]), min(cpus[name])) for name in reads}


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows per commit")
    ap.add_argument("--commits", type=int, default=10)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(7)
    root = Path(tempfile.mkdtemp(prefix="mt-bench-"))
    results: dict[str, float] = {}
    opts = {"bucket": "4", "write-only": "true"}
    try:
        # -- ingest: each commit repeats ~30% of the keys already written -----------------------
        batches = []
        next_key = 0
        for _ in range(args.commits):
            repeated = int(args.rows * 0.3) if next_key else 0
            old = rng.integers(0, max(1, next_key), repeated)
            new = np.arange(next_key, next_key + args.rows - repeated)
            next_key += len(new)
            batches.append(batch(rng, rng.permutation(np.concatenate([old, new]))))
        t = mt.create_table(str(root / "ingest"), SCHEMA, primary_key=["id"], options=opts)
        t0 = time.perf_counter()
        for b in batches:
            t.write(b)
        ours = time.perf_counter() - t0
        raw_dir = root / "raw"
        raw_dir.mkdir()
        t0 = time.perf_counter()
        for i, b in enumerate(batches):
            pq.write_table(b.sort_by("id"), raw_dir / f"{i}.parquet", compression="zstd")
        raw = time.perf_counter() - t0
        total = args.rows * args.commits
        results["ingest_rows_per_s"] = total / ours
        results["ingest_vs_pyarrow"] = raw / ours
        print(
            f"ingest {args.commits}x{args.rows:,} upserts: mergetable {ours:.2f}s, pyarrow sort+write {raw:.2f}s "
            f"-> {raw / ours:.2f}x of raw ({total / ours / 1e6:.2f} M rows/s)"
        )

        # -- merge-on-read: 5 sorted runs per bucket ----------------------------------------------
        t = mt.create_table(str(root / "mor"), SCHEMA, primary_key=["id"], options=opts)
        keys = np.arange(args.rows)
        for _ in range(5):
            t.write(batch(rng, rng.permutation(keys)[: int(args.rows * 0.8)]))
        files = data_files(t)
        merged_rows = t.read().num_rows
        ours = best(lambda: t.read())
        raw = best(lambda: raw_scan(files))
        results["merge_on_read_vs_raw_scan"] = raw / ours
        print(
            f"merge-on-read, 5 runs/bucket ({sum(f.row_count for _, _, f in t.files()):,} rows -> {merged_rows:,}): "
            f"mergetable {ours:.3f}s, pyarrow scan {raw:.3f}s -> {raw / ours:.2f}x of raw"
        )

        # -- single-run read and point lookup ------------------------------------------------------
        t = mt.create_table(str(root / "single"), SCHEMA, primary_key=["id"], options=opts)
        t.write(batch(rng, rng.permutation(np.arange(args.rows * 5))))
        files = data_files(t)
        ours = best(lambda: t.read())
        raw = best(lambda: raw_scan(files))
        results["single_run_vs_raw_scan"] = raw / ours
        print(
            f"single-run read ({args.rows * 5:,} rows): mergetable {ours:.3f}s, pyarrow scan {raw:.3f}s "
            f"-> {raw / ours:.2f}x of raw"
        )
        probe = int(args.rows * 2.5)
        assert t.read(filter=[("id", "=", probe)]).num_rows == 1
        lookup = best(lambda: t.read(filter=[("id", "=", probe)]), repeat=5)
        results["point_lookup_speedup_vs_full_read"] = ours / lookup
        print(f"point lookup: {lookup * 1000:.1f} ms vs full read {ours * 1000:.0f} ms -> {ours / lookup:.0f}x faster")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


if __name__ == "__main__":
    main()
