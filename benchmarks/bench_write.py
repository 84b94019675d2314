"""Write memory: ``Table.write`` of a stream (a RecordBatchReader) into one bucket, peak RSS in a child process.

The stream is generated batch by batch, so the input never exists whole: the child's peak RSS is what the
writer holds (its ``write-buffer-size`` buffer, the flush of one sorted run) on top of the interpreter.
The same rows written as one in-memory table serve as a check that the spilled runs read back the same.

Run: ``python benchmarks/bench_write.py [--rows 20000000]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from goals import report

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()), ("n", pa.int32())])
BATCH = 1 << 20


def batches(rows: int, seed: int = 5) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        ids = rng.integers(0, rows, n)
        yield pa.record_batch(
            [
                ids,
                rng.random(n),
                pa.array(np.char.add("val-", (ids % 100_000).astype(str))),
                rng.integers(0, 1000, n, dtype=np.int32),
            ],
            schema=SCHEMA,
        )


def child(root: str, rows: int) -> None:
    """Write the stream into a fresh single-bucket table; print the peak RSS (MB) and the time."""
    import mergetable as mt

    t = mt.create_table(root, SCHEMA, primary_key=["id"], options={"bucket": "1", "write-only": "true"})
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    t.write(pa.RecordBatchReader.from_batches(SCHEMA, batches(rows)))
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    files = len(list(t.files()))
    print(json.dumps({"peak_mb": peak, "base_mb": base, "seconds": elapsed, "files": files}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    work = Path(tempfile.mkdtemp(prefix="mt-bench-write-"))
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(work / "t"), str(args.rows)],
            capture_output=True,
            text=True,
            check=True,
        )
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"write() of a {args.rows:,}-row RecordBatchReader into one bucket: {res['seconds']:.1f} s, "
        f"{res['files']} level-0 files, peak RSS {res['peak_mb']:.0f} MB "
        f"(interpreter + imports {res['base_mb']:.0f} MB)"
    )
    report(f"peak RSS of write() of a {args.rows / 1e6:.0f}M-row stream (MB)", res["peak_mb"], 800.0, " MB")


if __name__ == "__main__":
    main()
