"""Peak memory of reading and compacting one large bucket, and merged / compacted read speed vs raw Parquet.

Builds two single-bucket tables of ``--rows`` rows (default 20M; bench_core's schema): ``runs`` holds six
fully overlapping sorted runs (each commit writes every sixth key, plus 5% updates of earlier keys), and
``compacted`` is ``runs`` after a full compaction (one sorted run). Each measurement runs in a fresh
subprocess and reports that child's peak RSS (``ru_maxrss``; the table is built in a child as well, so the
parent stays small: a child's ``ru_maxrss`` counts its parent's RSS at the fork):

* ``scan()`` of each table consumed batch by batch (and the largest batch seen),
* a full compaction of the bucket,
* ``read()`` of each table to Arrow vs ``pyarrow.parquet.read_table`` of the same data files (all user
  columns: ``bench_core.raw_scan``), as a time ratio (best of ``--repeat``, the two reads taking turns after one
  untimed call of each), with the machine's core count and the CPU time of each,
* ``scan()`` of the six-run table once more with the thread counts of a 16-core machine (``os.cpu_count()`` and
  Arrow's pools say 16, whatever this machine has): every thread count mergetable picks comes from the core count,
  so this is the memory a 16-core machine's scan holds in flight (its speed is this machine's, not a 16-core one's).

Run: ``python benchmarks/bench_memory.py [--rows 20000000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_core import SCHEMA, batch, data_files, interleaved, raw_scan  # noqa: E402
from goals import report  # noqa: E402

import mergetable as mt  # noqa: E402

RUNS = 6
CHUNK = 2_000_000


def build(path: Path, rows: int) -> mt.Table:
    """A single-bucket table of ``rows`` keys in six overlapping sorted runs."""
    rng = np.random.default_rng(5)
    t = mt.create_table(str(path), SCHEMA, primary_key=["id"], options={"bucket": "1", "write-only": "true"})
    for r in range(RUNS):
        keys = np.arange(r, rows, RUNS, dtype=np.int64)
        if r:
            keys = np.concatenate([keys, rng.integers(0, rows, rows // 20 // RUNS)])
        keys = np.unique(keys)
        # one commit per run: the table's writer sorts each commit into one run
        t.write(batch(rng, rng.permutation(keys)))
    return t


SIMULATED_CORES = 16


def as_if_cores(cores: int) -> None:
    """Make this process pick the thread counts of a machine with ``cores`` cores: mergetable sizes its pools and
    key-range cuts by ``os.cpu_count()``, Arrow by its own CPU and I/O pools."""
    os.cpu_count = lambda: cores
    pa.set_cpu_count(cores)
    pa.set_io_thread_count(max(8, cores))


def child(task: str, path: str, repeat: int) -> dict[str, float]:
    """One measurement, in this (fresh) process (``build``: the table, of ``repeat`` rows; ``scan16``: ``scan`` with
    the thread counts of :data:`SIMULATED_CORES` cores)."""
    out: dict[str, float] = {}
    if task == "scan16":
        as_if_cores(SIMULATED_CORES)
        task = "scan"
    if task == "build":
        build(Path(path), repeat)
        return out
    t = mt.open_table(path)
    if task == "scan":
        rows = largest = 0
        t0 = time.perf_counter()
        for b in t.scan():
            rows += b.num_rows
            largest = max(largest, b.num_rows)
        out.update(rows=rows, largest=largest, seconds=time.perf_counter() - t0)
    elif task == "compact":
        t0 = time.perf_counter()
        t.compact(full=True)
        out["seconds"] = time.perf_counter() - t0
    elif task == "speed":
        files = data_files(t)
        timed = interleaved({"ours": t.read, "raw": lambda: raw_scan(files)}, repeat)
        for name, (wall, cpu) in timed.items():
            out[name], out[f"{name}_cpu"] = wall, cpu
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def measure(task: str, path: Path, repeat: int = 1) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", task, str(path), "--repeat", str(repeat)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.repeat)))
        return
    root = Path(tempfile.mkdtemp(prefix="mt-bench-mem-"))
    try:
        path = root / "t"
        t0 = time.perf_counter()
        # built in a child too: a child's ru_maxrss starts from its parent's RSS at fork, kept small here
        measure("build", path, args.rows)
        t = mt.open_table(str(path))
        n = f"{args.rows / 1e6:g}M rows"
        print(f"built {n} in {RUNS} runs, one bucket, in {time.perf_counter() - t0:.1f}s")
        scan = measure("scan", path)
        print(f"scan() of {RUNS} runs: {scan['rows']:,.0f} rows in {scan['seconds']:.2f}s, largest batch "
              f"{scan['largest']:,.0f} rows, peak {scan['peak_mb']:.0f} MB")  # fmt: skip
        report(f"scan() {n}, one bucket, {RUNS} runs: peak RSS", scan["peak_mb"], 500, unit=" MB")
        report(
            "scan() largest batch vs read.batch-size",
            scan["largest"] / t.table_schema.table_options.read_batch_size,
            1.0,
        )
        many = measure("scan16", path)
        print(f"scan() of {RUNS} runs with {SIMULATED_CORES} cores' threads on {os.cpu_count()} cores: "
              f"{many['rows']:,.0f} rows in {many['seconds']:.2f}s, peak {many['peak_mb']:.0f} MB")  # fmt: skip
        report(f"scan() {n}, one bucket, {RUNS} runs: peak RSS with {SIMULATED_CORES} cores' thread counts "
               f"(simulated on {os.cpu_count()} cores)", many["peak_mb"], 500, unit=" MB")  # fmt: skip
        speed = measure("speed", path, args.repeat)
        cores = os.cpu_count()
        print(f"merged read ({RUNS} runs): {speed['ours']:.2f}s, pyarrow scan of the same files {speed['raw']:.2f}s "
              f"(CPU per read, all {cores} cores: {speed['ours_cpu']:.2f}s and {speed['raw_cpu']:.2f}s, "
              f"{speed['ours_cpu'] / speed['raw_cpu']:.2f}x)")  # fmt: skip
        report(f"merged read {n}, one bucket, {RUNS} runs vs raw Parquet scan ({cores} cores)",
               speed["ours"] / speed["raw"], 1.5)  # fmt: skip
        compact = measure("compact", path)
        print(f"full compaction: {compact['seconds']:.1f}s, peak {compact['peak_mb']:.0f} MB")
        report(f"compaction of {n} in one bucket: peak RSS", compact["peak_mb"], 800, unit=" MB")
        scan = measure("scan", path)
        print(f"scan() compacted: {scan['seconds']:.2f}s, largest batch {scan['largest']:,.0f}, "
              f"peak {scan['peak_mb']:.0f} MB")  # fmt: skip
        report(f"scan() {n}, one bucket, compacted: peak RSS", scan["peak_mb"], 500, unit=" MB")
        speed = measure("speed", path, args.repeat)
        print(f"compacted read: {speed['ours']:.2f}s, pyarrow scan of the same files {speed['raw']:.2f}s")
        report("compacted read (one run) vs raw Parquet scan", speed["ours"] / speed["raw"], 1.1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
