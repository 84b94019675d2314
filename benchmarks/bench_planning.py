"""Planning: a read of the latest snapshot of a table with many commits against the same read at snapshot 10.

The table holds the same keys throughout: commit 1 loads them, every later commit updates a few of them,
and ``full-compaction.delta-commits=1`` compacts each bucket to one file after every commit. So snapshot 10
(a COMPACT one) and the latest hold the same data in the same layout and the difference is the metadata: the manifests a
snapshot's plan has to fold (manifest merging keeps their number bounded) and how they are read (each
immutable manifest is parsed once per process). Each read opens the table afresh (a new ``Table``); the
median of 5 reads is reported.

Run: ``python benchmarks/bench_planning.py [--commits 1000]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import mergetable as mt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from goals import report

KEYS = 20_000
PER_COMMIT = 50
OPTIONS = {"bucket": "4", "full-compaction.delta-commits": "1"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--commits", type=int, default=1000)
    args = ap.parse_args()
    rng = np.random.default_rng(3)
    root = Path(tempfile.mkdtemp(prefix="mt-bench-plan-"))
    try:
        schema = pa.schema([("id", pa.int64()), ("v", pa.float64())])
        t = mt.create_table(str(root / "t"), schema, primary_key=["id"], options=OPTIONS)
        t.write(pa.table({"id": np.arange(KEYS), "v": rng.random(KEYS)}, schema=schema))
        t0 = time.perf_counter()
        for _ in range(args.commits - 1):
            ids = rng.choice(KEYS, PER_COMMIT, replace=False)
            t.write(pa.table({"id": ids, "v": rng.random(PER_COMMIT)}, schema=schema))
        build = time.perf_counter() - t0
        latest = t.latest_snapshot()
        assert latest is not None
        uri = str(root / "t")

        def timed(snapshot_id: int) -> float:
            times = []
            for _ in range(5):
                table = mt.open_table(uri)
                t0 = time.perf_counter()
                rows = table.read(snapshot_id=snapshot_id).num_rows
                times.append(time.perf_counter() - t0)
                assert rows == KEYS
            return statistics.median(times)

        early = timed(10)
        late = timed(latest.id)
        print(
            f"{args.commits} commits ({latest.id} snapshots; built in {build:.1f} s): "
            f"read at snapshot 10 {early * 1000:.1f} ms, at the latest {late * 1000:.1f} ms"
        )
        report(f"read of the latest of {args.commits} commits vs the same read at snapshot 10", late / early, 2.0)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
