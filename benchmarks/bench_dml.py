"""Row-level operations against deltalake, side by side on the same data: update, merge, and merge memory.

* ``update``: ``v = v * 2`` where ``n < 300`` (about 30% of ``--rows`` rows, in all of 4 partitions);
* ``merge``: a ``--rows``-row source (30% existing keys) with update-all / insert-all into that table;
* merge memory: the peak RSS of a process merging a ``--mem-source``-row source into a ``--mem-rows``-row
  table (the same shape), beside deltalake's. The goal is stated for a 5M-row source into a 20M-row table,
  the default (about two and a half minutes on 2 cores, inputs and set-up included). With a smaller
  ``--mem-rows`` (``run_all.py --quick``: 2M) the peak is measured at the scale given and at half of it and
  extrapolated linearly to 20M / 5M (an overestimate: the merge's own memory stops growing once the source
  is merged in parts), and the goal line says so.

Each system runs in its own process (``dml_peer.py``; deltalake in ``.venv-peers``, which ``make bench``
creates), the systems in turn, ``--repeat`` times; the medians are compared, and every system must leave
the same rows and sums. Without ``.venv-peers`` only mergetable's figures are printed.

Run: ``python benchmarks/bench_dml.py [--rows N] [--repeat R] [--mem-rows N] [--mem-source N] [--skip-memory]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
GOAL_ROWS, GOAL_SOURCE = 20_000_000, 5_000_000
sys.path.insert(0, str(HERE))

from goals import report  # noqa: E402


def rows_of(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array(ids % 4, pa.int32()),
            "v": rng.random(n),
            "s": pc.binary_join_element_wise("val-", pc.cast(pa.array(ids % 100_000), pa.string()), ""),
            "n": pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
        }
    )


def write_inputs(work: Path, rows: int, source: int) -> None:
    """``table.parquet`` (keys 0..rows-1 in random order) and ``source.parquet`` (30% of them, then new keys)."""
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    pq.write_table(rows_of(rng.permutation(rows).astype(np.int64), rng), work / "table.parquet")
    old = rng.choice(rows, int(source * 0.3), replace=False)
    ids = rng.permutation(np.concatenate([old, np.arange(rows, rows + source - len(old))])).astype(np.int64)
    pq.write_table(rows_of(ids, rng), work / "source.parquet")


def systems() -> dict[str, Path]:
    found = {"mergetable": Path(sys.executable)}
    if PEER_PYTHON.exists():
        found["deltalake"] = PEER_PYTHON
    else:
        print(f"   {PEER_PYTHON} is missing (make bench creates it): mergetable only", flush=True)
    return found


def run(python: Path, name: str, op: str, work: Path) -> dict[str, Any]:
    env = {"PYTHONPATH": str(ROOT)} if name == "mergetable" else {}
    proc = subprocess.run(
        [str(python), str(HERE / "dml_peer.py"), name, op, str(work)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} {op}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def timings(work: Path, rows: int, repeat: int) -> None:
    write_inputs(work, rows, rows)
    found = systems()
    for name, python in found.items():
        run(python, name, "setup", work)
    times: dict[str, dict[str, list[float]]] = {n: {"update": [], "merge": []} for n in found}
    results: dict[str, dict[str, Any]] = {n: {} for n in found}
    for _ in range(repeat):  # the systems in turn, repetition by repetition: each sees the same load
        for op in ("update", "merge"):
            for name, python in found.items():
                out = run(python, name, op, work)
                times[name][op].append(out["seconds"])
                results[name][op] = out["result"]
    for op in ("update", "merge"):
        cells = ", ".join(f"{n} {statistics.median(times[n][op]):.3f} s" for n in found)
        print(f"   {op}: {cells} (median of {repeat})", flush=True)
    same = all(results[n] == results["mergetable"] for n in found)
    if not same:
        print(f"   MISMATCH: {json.dumps(results)}", flush=True)
    if "deltalake" in found:
        flag = 0.0 if same else 1.0
        report("row-level: mergetable and deltalake leave the same rows and sums (0 = yes)", flag, 0.0, " ")
        for op, what in (("update", "update of ~30% of"), ("merge", "merge (update all / insert all) of")):
            ratio = statistics.median(times["mergetable"][op]) / statistics.median(times["deltalake"][op])
            report(f"{what} {rows:,} rows in 4 partitions vs deltalake", ratio, 1.0)


def peak(work: Path, rows: int, source: int) -> dict[str, float]:
    shutil.rmtree(work, ignore_errors=True)
    write_inputs(work, rows, source)
    out = {}
    for name, python in systems().items():
        run(python, name, "setup", work)
        res = run(python, name, "merge-memory", work)
        out[name] = res["peak_mb"]
        what = f"merge of {source:,} rows into {rows:,}"
        print(f"   {what}: {name} peak RSS {res['peak_mb']:.0f} MB, {res['seconds']:.1f} s", flush=True)
        shutil.rmtree(work / name, ignore_errors=True)
    return out


def memory(work: Path, rows: int, source: int) -> None:
    if rows >= GOAL_ROWS:
        measured = peak(work, rows, source)
        label = f"peak RSS of merge, {source:,}-row source into {rows:,} rows (MB)"
    else:  # two smaller scales, a straight line through them, read at the goal's scale
        small, large = peak(work, rows // 2, source // 2), peak(work, rows, source)
        scale = (GOAL_SOURCE - source) / (source - source // 2)
        measured = {n: large[n] + (large[n] - small[n]) * scale for n in large}
        label = (
            f"peak RSS of merge, {GOAL_SOURCE:,}-row source into {GOAL_ROWS:,} rows (MB, extrapolated from "
            f"{source // 2:,}/{rows // 2:,} and {source:,}/{rows:,})"
        )
    if "deltalake" in measured:  # the goal line names deltalake's peak beside mergetable's
        label = f"{label[:-1]}; deltalake {measured['deltalake']:.0f} MB)"
    report(label, measured["mergetable"], 1000.0, " MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000, help="rows of the table and of the merge source")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--mem-rows", type=int, default=GOAL_ROWS, help="table rows of the merge-memory run")
    ap.add_argument("--mem-source", type=int, default=None, help="source rows of it (default: a quarter)")
    ap.add_argument("--skip-memory", action="store_true", help="time update and merge only (no merge-memory run)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mt-dml-"))
    try:
        print(f"== row-level operations: {args.rows:,} rows, 4 partitions, vs deltalake", flush=True)
        timings(work / "ops", args.rows, args.repeat)
        shutil.rmtree(work / "ops", ignore_errors=True)
        if not args.skip_memory:
            memory(work / "mem", args.mem_rows, args.mem_source or args.mem_rows // 4)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
