"""Dynamic bucket mode (``bucket`` = -1, the default of new primary-key tables) against fixed buckets.

* ingest: a load of N rows, then 5 upserts of N rows each (30% existing keys), into a dynamic-bucket table
  (default ``dynamic-bucket.target-row-num``), then the same into a fixed-bucket table with the bucket count
  the dynamic one ended with (goal <= 1.25x); both read back the same rows;
* cross-partition: the same load and upserts with a partition column ``dt`` (4 partitions; a third of each
  upsert's rows name another partition than their key's previous one) into a cross-partition upsert table
  (primary key ``id``, partitioned by ``dt``), against a dynamic-bucket table keyed ``(id, dt)``; no goal, the
  ratio is printed (wall and CPU);
* scale: ``--big-rows`` rows (20M) written in commits of ``--rows`` into a table created without a ``bucket``
  option end up in >= 8 buckets (smaller runs scale ``dynamic-bucket.target-row-num`` down with them), and its
  Python merged read is <= 1.5x a raw pyarrow scan of the same files.

Run: ``python benchmarks/bench_buckets.py [--rows 1000000] [--big-rows 20000000] [--only cross]``.
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
from bench_core import SCHEMA, batch, best, data_files, raw_scan
from bench_deletion_vectors import batches
from goals import report

import mergetable as mt

TARGET = 2_000_000  # Paimon's default dynamic-bucket.target-row-num
FULL_SCALE = 20_000_000


def ingest(uri: str, data: list[pa.Table], options: dict[str, str]) -> tuple[mt.Table, float]:
    t = mt.create_table(uri, SCHEMA, ["id"], options=options)
    t0 = time.perf_counter()
    for b in data:
        t.write(b)
    return t, time.perf_counter() - t0


def buckets_of(t: mt.Table) -> int:
    return len({b for _, b, _ in t.files()})


def ingest_goal(work: Path, rows: int, upserts: int, repeat: int) -> None:
    data = batches(rows, upserts)
    target = TARGET if rows >= 1_000_000 else max(1, TARGET * rows // 1_000_000)
    dyn_opts = {} if target == TARGET else {"dynamic-bucket.target-row-num": str(target)}
    dyn_times, fixed_times = [], []
    for run in range(repeat):  # alternated, best of each: the machine may be shared
        dyn, dyn_s = ingest(str(work / f"dyn{run}"), data, dyn_opts)
        n = buckets_of(dyn)
        fixed, fixed_s = ingest(str(work / f"fixed{run}"), data, {"bucket": str(n)})
        dyn_times.append(dyn_s)
        fixed_times.append(fixed_s)
    dyn_s, fixed_s = min(dyn_times), min(fixed_times)
    a, b = dyn.read().sort_by("id"), fixed.read().sort_by("id")
    assert a.equals(b), "the dynamic-bucket and the fixed-bucket table read differently"
    print(
        f"ingest {rows:,} + {upserts} upserts ({a.num_rows:,} keys): dynamic {dyn_s:.2f} s into {n} buckets, "
        f"fixed {n} buckets {fixed_s:.2f} s"
    )
    report(f"dynamic-bucket ingest vs fixed {n} buckets", dyn_s / fixed_s, 1.25)
    report("dynamic-bucket and fixed-bucket tables read the same rows (1 = yes)", 0.0 if a.equals(b) else 1.0, 0, "")


def with_partitions(data: list[pa.Table]) -> list[pa.Table]:
    """``data`` with a partition column ``dt``: the load in ``p<id mod 4>``, each upsert's rows there too but a
    third of them, which go to the next partition (a key written before then moves)."""
    out = []
    for i, b in enumerate(data):
        ids = b.column("id").to_numpy()
        shift = (np.arange(len(ids)) % 3 == 0) & (i > 0)
        dt = pa.array(np.char.add("p", ((ids + shift) % 4).astype(str)))
        out.append(b.append_column("dt", dt))
    return out


def cross_partition_ratio(work: Path, rows: int, upserts: int, repeat: int) -> None:
    data = with_partitions(batches(rows, upserts))
    schema = data[0].schema
    times: dict[str, list[tuple[float, float]]] = {"cross": [], "keyed": []}
    for run in range(repeat):  # alternated, best of each
        for name, pk in (("cross", ["id"]), ("keyed", ["id", "dt"])):
            t = mt.create_table(str(work / f"{name}{run}"), schema, pk, ["dt"])
            w0, c0 = time.perf_counter(), time.process_time()
            for b in data:
                t.write(b)
            times[name].append((time.perf_counter() - w0, time.process_time() - c0))
            if name == "cross":
                assert t.count() == len(set(np.concatenate([b.column("id").to_numpy() for b in data]).tolist()))
    cross, keyed = min(times["cross"]), min(times["keyed"])
    print(
        f"cross-partition ingest {rows:,} + {upserts} upserts (a third of each upsert's rows name the next "
        "partition; its existing keys among them move): "
        f"{cross[0]:.2f} s wall / {cross[1]:.2f} s CPU, a dynamic table keyed with the partition "
        f"{keyed[0]:.2f} s / {keyed[1]:.2f} s; ratio {cross[0] / keyed[0]:.2f}x wall, {cross[1] / keyed[1]:.2f}x CPU"
    )


def scale_goal(work: Path, big_rows: int, step: int) -> None:
    target = TARGET if big_rows >= FULL_SCALE else max(1, TARGET * big_rows // FULL_SCALE)
    options = {} if target == TARGET else {"dynamic-bucket.target-row-num": str(target)}
    t = mt.create_table(str(work / "big"), SCHEMA, ["id"], options=options)  # no bucket option
    rng = np.random.default_rng(11)
    t0 = time.perf_counter()
    for start in range(0, big_rows, step):
        t.write(batch(rng, np.arange(start, min(big_rows, start + step), dtype=np.int64)))
    written = time.perf_counter() - t0
    n = buckets_of(t)
    files = data_files(t)
    raw = best(lambda: raw_scan(files), 2)
    merged = best(lambda: t.read(), 2)
    assert t.count() == big_rows
    cores = os.cpu_count()
    print(
        f"{big_rows:,} rows in commits of {step:,} (target-row-num {target:,}): written in {written:.1f} s into "
        f"{n} buckets, {len(files)} files; merged read {merged:.2f} s, raw pyarrow {raw:.2f} s ({cores} cores)"
    )
    report(f"buckets of {big_rows:,} rows written without a bucket option (at least 8)", 8 / max(n, 1), 1.0)
    report(f"merged read of the dynamic-bucket table vs raw pyarrow ({cores} cores)", merged / raw, 1.5)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows per commit")
    ap.add_argument("--upserts", type=int, default=5)
    ap.add_argument("--big-rows", type=int, default=None, help="rows of the scale goal (default 20 x --rows)")
    ap.add_argument("--repeat", type=int, default=2, help="ingests of each table (the best counts)")
    ap.add_argument("--only", choices=["cross"], help="run only the cross-partition ingest")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="mt-bench-buckets-"))
    try:
        cross_partition_ratio(work, args.rows, args.upserts, args.repeat)
        if args.only == "cross":
            return
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        ingest_goal(work, args.rows, args.upserts, args.repeat)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        scale_goal(work, args.big_rows or 20 * args.rows, args.rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
