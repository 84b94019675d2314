"""Deletion vectors (merge-on-write) against merge-on-read and raw Parquet, measured in one run.

Workload: a load of N rows, then 5 upserts of N rows each (30% existing keys), into one bucket, into a table
with ``deletion-vectors.enabled`` and into the same table without.

* read: ``Table.read()`` of the deletion-vector table vs a raw pyarrow scan of the same live rows written as
  plain Parquet (goal <= 1.15x); the merge-on-read table's read is printed for comparison;
* count: ``Table.count()`` of the deletion-vector table (row counts minus cardinalities) vs the raw scan;
* ingest: the 6 commits with deletion vectors (each compacting its level 0 with lookup) vs without (goal <= 1.5x);
* Spark (``--spark``, on in ``make bench``): ``mergetable.spark.read`` of the table vs ``spark.read.parquet`` of the
  live rows (goal <= 1.2x), its ``count()`` (goal <= 1.5x; answered from the table's metadata), and no Python
  data source scan in its plan; the count Spark computes (``groupBy().count()``) is printed for comparison.

Run: ``python benchmarks/bench_deletion_vectors.py [--rows 1000000] [--spark]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_core import SCHEMA, batch, best
from goals import report

import mergetable as mt


def batches(rows: int, upserts: int) -> list[pa.Table]:
    """The load and the upserts: each upsert takes 30% of its keys from those written before."""
    rng = np.random.default_rng(7)
    out = [batch(rng, np.arange(rows, dtype=np.int64))]
    written = rows
    for _ in range(upserts):
        old = rng.choice(written, int(rows * 0.3), replace=False)
        new = np.arange(written, written + rows - len(old), dtype=np.int64)
        written += len(new)
        out.append(batch(rng, rng.permutation(np.concatenate([old, new]))))
    return out


def ingest(uri: str, data: list[pa.Table], options: dict[str, str]) -> tuple[mt.Table, float]:
    t = mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "1", **options})
    t0 = time.perf_counter()
    for b in data:
        t.write(b)
    return t, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--upserts", type=int, default=5)
    ap.add_argument("--spark", action="store_true", help="also measure mergetable.spark.read")
    ap.add_argument("--repeat", type=int, default=2, help="ingests of each table (the best counts)")
    args = ap.parse_args(argv)
    data = batches(args.rows, args.upserts)
    work = Path(tempfile.mkdtemp(prefix="mt-bench-dv-"))
    try:
        dv_times, mor_times = [], []
        for run in range(args.repeat):  # alternated, best of each: the machine may be shared
            dv, dv_s = ingest(str(work / f"dv{run}"), data, {"deletion-vectors.enabled": "true"})
            mor, mor_s = ingest(str(work / f"mor{run}"), data, {})
            dv_times.append(dv_s)
            mor_times.append(mor_s)
        dv_s, mor_s = min(dv_times), min(mor_times)
        live = dv.read()
        assert live.num_rows == mor.count(), "deletion vectors read otherwise than merge-on-read"
        raw_path = work / "raw.parquet"
        pq.write_table(live, raw_path)
        raw = best(lambda: pq.read_table(raw_path))
        dv_read = best(lambda: dv.read())
        mor_read = best(lambda: mor.read())
        dv_count = best(lambda: dv.count())
        vectors = dv.deletion_vectors()
        marked = sum(len(v) for v in vectors.values())
        cores = os.cpu_count()
        print(
            f"{args.rows:,} rows + {args.upserts} upserts, {live.num_rows:,} live rows, {len(dv.files())} files, "
            f"{marked:,} rows marked in {len(vectors)} vectors, {cores} cores"
        )
        print(f"ingest: deletion vectors {dv_s:.2f} s, merge-on-read {mor_s:.2f} s")
        print(
            f"read: deletion vectors {dv_read:.3f} s, merge-on-read {mor_read:.3f} s, raw pyarrow {raw:.3f} s, "
            f"count {dv_count * 1000:.1f} ms"
        )
        report(f"deletion-vector read vs raw pyarrow ({cores} cores)", dv_read / raw, 1.15)
        report(f"merge-on-read read vs raw pyarrow, for comparison ({cores} cores)", mor_read / raw, 1e9)
        report("deletion-vector count() vs raw pyarrow scan", dv_count / raw, 0.1)
        report("ingest with deletion vectors vs without", dv_s / mor_s, 1.5)
        if args.spark:
            spark_goals(dv, str(raw_path))
        return {"dv_read": dv_read, "mor_read": mor_read, "raw": raw, "dv_ingest": dv_s, "mor_ingest": mor_s}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spark_goals(t: mt.Table, raw_path: str) -> None:
    """``mergetable.spark.read`` of ``t`` against ``spark.read.parquet`` of the same live rows."""
    from bench_spark import best_pair, full_scan, session

    import mergetable.spark as mts

    spark = session()
    try:
        ours = mts.read(spark, t.uri)
        native = spark.read.parquet(raw_path)
        assert full_scan(ours) == full_scan(native), "mergetable.spark.read and spark.read.parquet disagree"
        plan = ours._jdf.queryExecution().executedPlan().toString()
        report("mergetable.spark.read plan has a Python scan (0 = none)", float("Python" in plan), 0, unit="")
        native_s, ours_s = best_pair(lambda: full_scan(native), lambda: full_scan(ours))
        print(f"spark read: spark.read.parquet {native_s:.2f} s, mergetable.spark.read {ours_s:.2f} s")
        report("mergetable.spark.read vs spark.read.parquet (deletion vectors)", ours_s / native_s, 1.2)
        native_c, ours_c = best_pair(native.count, ours.count)
        print(f"spark count: spark.read.parquet {native_c:.2f} s, mergetable.spark.read {ours_c:.2f} s")
        report("mergetable.spark.read count() vs spark.read.parquet (deletion vectors)", ours_c / native_c, 1.5)
        native_g, ours_g = best_pair(
            lambda: native.groupBy().count().collect(), lambda: ours.groupBy().count().collect()
        )
        print(f"spark groupBy().count(): spark.read.parquet {native_g:.2f} s, mergetable.spark.read {ours_g:.2f} s")
        report("the same count computed by Spark (groupBy().count()), for comparison", ours_g / native_g, 1e9)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
