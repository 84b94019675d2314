"""Run every benchmark and the head-to-head against peers, in one run (``make bench``).

Each benchmark script prints its ratios against raw pyarrow (or native Spark). The peer comparison
writes the same upsert commits to mergetable, pypaimon and deltalake (the peers run in ``.venv-peers``,
created by ``make bench``, because pypaimon pins an older pyarrow) and prints the ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRIPTS = [
    "bench_core.py",
    "bench_merge.py",
    "bench_compaction.py",
    "bench_memory.py",
    "bench_spark.py",
    "bench_streaming.py",
]


def run_script(name: str, extra: list[str]) -> None:
    path = HERE / name
    if not path.exists():
        print(f"== {name}: not present, skipped")
        return
    print(f"== {name}", flush=True)
    subprocess.run([sys.executable, str(path), *extra], check=True, cwd=ROOT)


def peers(rows: int, commits: int) -> None:
    sys.path.insert(0, str(HERE))
    import bench_core

    import mergetable as mt

    python = ROOT / ".venv-peers" / "bin" / "python"
    print(f"== peers: {commits} commits x {rows:,} upserts (4 buckets), then a merged read", flush=True)
    if not python.exists():
        print("   .venv-peers is missing (make bench creates it): skipped")
        return
    rng = np.random.default_rng(11)
    work = Path(tempfile.mkdtemp(prefix="mt-peers-"))
    try:
        batches = []
        next_key = 0
        for i in range(commits):
            repeated = int(rows * 0.3) if next_key else 0
            old = rng.choice(next_key, repeated, replace=False) if repeated else np.zeros(0, np.int64)
            keys = np.concatenate([old, np.arange(next_key, next_key + rows - repeated)])
            next_key += rows - repeated
            b = bench_core.batch(rng, rng.permutation(keys))
            batches.append(b)
            pq.write_table(b, work / f"commit-{i}.parquet")
        t = mt.create_table(str(work / "mt"), bench_core.SCHEMA, primary_key=["id"], options={"bucket": "4"})
        t0 = time.perf_counter()
        for b in batches:
            t.write(b)
        ours_ingest = time.perf_counter() - t0
        ours_rows = t.read().num_rows
        ours_read = bench_core.best(t.read)
        print(f"   mergetable: ingest {ours_ingest:.2f}s, merged read {ours_read:.3f}s ({ours_rows:,} rows)")
        proc = subprocess.run([str(python), str(HERE / "peers.py"), str(work), "4"], capture_output=True, text=True)
        if proc.returncode != 0:
            print("   peers failed:", proc.stderr.strip().splitlines()[-1:] or proc.returncode)
            return
        for name, res in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            if "error" in res:
                print(f"   {name}: {res['error']}")
                continue
            print(
                f"   {name}: ingest {res['ingest_s']:.2f}s, merged read {res['merged_read_s']:.3f}s "
                f"({res['rows']:,} rows) -> mergetable ingest {res['ingest_s'] / ours_ingest:.1f}x faster, "
                f"read {res['merged_read_s'] / ours_read:.1f}x faster"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller data for a fast look")
    ap.add_argument("--peer-rows", type=int, default=200_000)
    args = ap.parse_args()
    core = ["--rows", "200000", "--commits", "3"] if args.quick else []
    for name in SCRIPTS:
        extra = core if name == "bench_core.py" else (["--rows", "1000000"] if args.quick else [])
        if name == "bench_streaming.py":
            extra = ["--rows", "20000", "--probes", "2"] if args.quick else []
        run_script(name, extra)
    peers(args.peer_rows, 3)


if __name__ == "__main__":
    main()
