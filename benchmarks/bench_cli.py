"""The command line's ``read`` against ``t.read()`` in-process, on the same ~1M-row table.

``mergetable read URI --format parquet --output F`` runs as a real process; its time includes starting
Python and importing mergetable, which ``t.read()`` in an already running interpreter does not pay. So the
goal compares the CLI's time *minus* that startup with ``t.read()``: the CLI streams merged batches into a
Parquet file, and should cost at most 1.5× the in-process read. Like for like, both are a process's first
read of the table (``t.read()`` right after ``open_table`` in a fresh interpreter: a command line never
reads warm); the warm figure of repeated reads in one process is printed beside it. The split is measured
inside the CLI's own process (the clock read after the imports and after ``main``), which a loaded machine
disturbs far less than subtracting two separate process timings; the whole command's wall time and the bare startup
(``python -c "import mergetable.cli.main"``) are printed beside it.

Run: ``python benchmarks/bench_cli.py [--rows 1000000] [--commits 3]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from bench_core import SCHEMA, batch, best
from goals import report

import mergetable as mt


def build(root: Path, rows: int, commits: int) -> mt.Table:
    """``commits`` upserts of ``rows / commits`` rows each (30% of keys repeated), 4 buckets."""
    rng = np.random.default_rng(5)
    t = mt.create_table(str(root / "t"), SCHEMA, ["id"], options={"bucket": "4", "write-only": "true"})
    per = rows // commits
    next_key = 0
    for _ in range(commits):
        repeated = int(per * 0.3) if next_key else 0
        old = rng.choice(next_key, repeated, replace=False) if repeated else np.zeros(0, np.int64)
        keys = np.concatenate([old, np.arange(next_key, next_key + per - repeated)])
        next_key += per - repeated
        t.write(batch(rng, rng.permutation(keys)))
    return t


TIMED = """
import sys, time
t0 = time.perf_counter()
from mergetable.cli.main import main
t1 = time.perf_counter()
code = main(sys.argv[1:])
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, code)
"""


def run(*args: str) -> str:
    return subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True).stdout


COLD_READ = """
import sys, time
import mergetable as mt
t = mt.open_table(sys.argv[1])
t0 = time.perf_counter()
t.read()
print(0.0, time.perf_counter() - t0, 0)
"""


def fresh(code: str, argv: list[str], repeat: int) -> tuple[float, float]:
    """The best (import time, work time) of ``repeat`` runs of ``code`` in a fresh process."""
    runs = []
    for _ in range(repeat):
        imported, ran, status = run("-c", code, *argv).split()[-3:]
        assert status == "0"
        runs.append((float(imported), float(ran)))
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_300_000, help="rows written (about 1M distinct keys remain)")
    ap.add_argument("--commits", type=int, default=3)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mt-bench-cli-"))
    try:
        t = build(root, args.rows, args.commits)
        merged = t.read().num_rows
        warm = best(t.read, 5)
        in_process = fresh(COLD_READ, [t.uri], 5)[1]
        out = root / "out.parquet"
        argv = ["read", t.uri, "--format", "parquet", "--output", str(out)]
        imports, work = fresh(TIMED, argv, 5)
        assert pq.read_metadata(out).num_rows == merged
        startup = best(lambda: run("-c", "import mergetable.cli.main"))
        wall = best(lambda: run("-m", "mergetable.cli.main", *argv))
        print(f"   {merged:,} merged rows from {len(t.files())} files")
        print(f"   t.read() in-process, first read:       {in_process:.3f}s (repeated in one process: {warm:.3f}s)")
        print(f"   mergetable read --format parquet:      {work:.3f}s after its imports ({imports:.3f}s)")
        print(f"   the whole command, wall:               {wall:.3f}s (bare python + import: {startup:.3f}s)")
        print(f"   CLI work vs a repeated (warm) t.read(): {work / warm:.2f}x (for reference)")
        report("CLI read to parquet, minus interpreter+import startup, vs t.read()", work / in_process, 1.5)
        return {"t_read_s": in_process, "startup_s": startup, "cli_s": work, "wall_s": wall, "ratio": work / in_process}
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
