"""Run every benchmark and the head-to-head against peers in one run (``make bench``), then summarize.

Each benchmark script prints its goals through ``goals.report`` (``GOAL |`` lines). The head-to-head writes
the same inputs once (a load, then upserts with 30% existing keys; 4 buckets) and measures each system in
its own process (``peers.py``): raw pyarrow and mergetable in this venv, deltalake and pypaimon (with
pypaimon-rust) in ``.venv-peers``. It checks that every system returns the same row counts and sums, prints
the systems × workloads table, and reports the ingest, size and lookup goals. At the end every goal line of
the run is gathered into one PASS/MISS table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from goals import parse, report  # noqa: E402

SCRIPTS = [
    "bench_core.py",
    "bench_merge.py",
    "bench_compaction.py",
    "bench_memory.py",
    "bench_dml.py",
    "bench_write.py",
    "bench_append.py",
    "bench_planning.py",
    "bench_spark.py",
    "bench_streaming.py",
    "bench_cli.py",
    "bench_deletion_vectors.py",
    "bench_buckets.py",
]
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
SYSTEMS = ("pyarrow", "mergetable", "deltalake", "pypaimon")
LOOKUPS = 100
REPEAT = 3
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()), ("n", pa.int32())])
AGG_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.float64()), ("n", pa.int64())])


def run_script(name: str, extra: list[str], goals: list[str]) -> None:
    path = HERE / name
    if not path.exists():
        print(f"== {name}: not present, skipped")
        return
    print(f"== {name}", flush=True)
    proc = subprocess.Popen([sys.executable, str(path), *extra], cwd=ROOT, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        if parse(line.rstrip("\n")):
            goals.append(line.rstrip("\n"))
    if proc.wait() != 0:
        print(f"== {name} failed (exit {proc.returncode})", flush=True)
        goals.append(f"GOAL | {name} ran to the end | failed | exit 0 | MISS")


def write_inputs(work: Path, rows: int, upserts: int) -> None:
    """The same inputs for every system: a load of ``rows`` keys, then ``upserts`` commits of ``rows``
    rows, 30% of them keys already written (no key twice in one commit), in random order."""
    rng = np.random.default_rng(11)
    next_key = 0
    for i in range(upserts + 1):
        repeated = int(rows * 0.3) if next_key else 0
        old = rng.choice(next_key, repeated, replace=False) if repeated else np.zeros(0, np.int64)
        keys = rng.permutation(np.concatenate([old, np.arange(next_key, next_key + rows - repeated)]))
        next_key += rows - repeated
        n = len(keys)
        main = pa.table(
            {
                "id": keys,
                "v": rng.random(n),
                "s": pa.array(np.char.add("val-", (keys % 100_000).astype(str))),
                "n": rng.integers(0, 1000, n, dtype=np.int32),
            },
            schema=SCHEMA,
        )
        pq.write_table(main, work / f"commit-{i}.parquet")
        agg = pa.table({"id": keys, "v": rng.random(n), "n": rng.integers(0, 1000, n)}, schema=AGG_SCHEMA)
        pq.write_table(agg, work / f"agg-{i}.parquet")
    probes = rng.choice(next_key, LOOKUPS, replace=False)
    (work / "lookups.json").write_text(json.dumps([int(k) for k in probes]))


def run_system(name: str, work: Path) -> dict[str, Any]:
    python = Path(sys.executable) if name in ("pyarrow", "mergetable") else PEER_PYTHON
    if not python.exists():
        return {"error": f"{python} is missing (make bench creates .venv-peers)"}
    env = {**os.environ, "PYTHONPATH": str(ROOT)} if name == "mergetable" else None
    proc = subprocess.run(
        [str(python), str(HERE / "peers.py"), name, str(work)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every timing over the repetitions; the other fields from the first (an error wins)."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    out = dict(runs[0])
    for key, value in runs[0].items():
        if key.endswith("_s"):
            out[key] = statistics.median(r[key] for r in runs)
        elif isinstance(value, dict) and any(r[key] != value for r in runs):
            out[key] = {"error": f"{key} differs between repetitions"}
    return out


def _cell(res: dict[str, Any], key: str, fmt: str = "{:.2f} s") -> str:
    return fmt.format(res[key]) if key in res else "—"


def results_table(results: dict[str, dict[str, Any]]) -> list[str]:
    names = [n for n in SYSTEMS if n in results]
    head = {"pyarrow": "raw pyarrow", "pypaimon": "pypaimon + rust"}
    lines = [
        "| workload | " + " | ".join(head.get(n, n) for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    rows = [
        ("ingest: load + upserts", lambda r: _cell(r, "ingest_s")),
        ("merged read of the latest snapshot to Arrow", lambda r: _cell(r, "read_s", "{:.3f} s")),
        (f"{LOOKUPS} point lookups", lambda r: _cell(r, "lookups_s")),
        (
            "aggregation (sum) table: ingest / merged read",
            lambda r: f"{_cell(r, 'agg_ingest_s')} / {_cell(r, 'agg_read_s', '{:.3f} s')}",
        ),
        (
            "table size on disk (mergetable: write-only)",
            lambda r: (
                _cell(r, "size_bytes", "{:.0f} B") if "size_bytes" not in r else f"{r['size_bytes'] / 1e6:.0f} MB"
            ),
        ),
    ]
    for label, cell in rows:
        cells = [r.get("error", "error")[:40] if "error" in r else cell(r) for r in (results[n] for n in names)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def consistent(results: dict[str, dict[str, Any]]) -> bool:
    """Every system's merged read and lookups agree with mergetable's (raw pyarrow's plain scan holds every
    version of a key, so only its distinct keys and its aggregation are compared)."""
    ours = results.get("mergetable", {})
    ok = "error" not in ours
    for name, res in results.items():
        if "error" in res or name == "mergetable":
            continue
        checks = [("read", "keys"), ("lookups", "keys")]
        if name != "pyarrow":
            checks += [("read", "rows"), ("read", "sum_n"), ("lookups", "rows"), ("lookups", "sum_n")]
        if "agg_read" in res:
            checks += [("agg_read", "rows"), ("agg_read", "sum_n")]
        for part, key in checks:
            theirs, mine = res[part][key], ours.get(part, {}).get(key)
            if theirs != mine:
                print(f"   MISMATCH {name} {part}.{key}: {theirs} vs mergetable {mine}")
                ok = False
    return ok


def peers(rows: int, upserts: int, goals: list[str], repeat: int = REPEAT) -> None:
    print(
        f"== head-to-head: a {rows:,}-row load then {upserts} upserts of {rows:,} rows (30% existing keys), "
        f"4 buckets, median of {repeat}",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="mt-peers-"))
    try:
        write_inputs(work, rows, upserts)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in SYSTEMS}
        for _ in range(repeat):  # the systems in turn, repetition by repetition: each sees the same load
            for name in SYSTEMS:
                runs[name].append(run_system(name, work))
        results = {name: medians(rs) for name, rs in runs.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=1), flush=True)
    for line in results_table(results):
        print(line)

    def emit(name: str, measured: float, target: float, unit: str = "x") -> None:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            report(name, measured, target, unit)
        print(buf.getvalue(), end="", flush=True)
        goals.extend(line for line in buf.getvalue().splitlines() if parse(line))

    same = consistent(results)
    emit("head-to-head: every system returns the same rows and sums (0 = yes)", 0.0 if same else 1.0, 0.0, " ")
    ours, raw = results.get("mergetable", {}), results.get("pyarrow", {})
    rivals = [results[n] for n in ("deltalake", "pypaimon") if "error" not in results.get(n, {"error": 1})]
    if "error" in ours or "error" in raw:
        return
    # ratios to raw pyarrow from the mergetable process, which runs raw's sort+write of the same rows
    # right before its own (the raw process's numbers fill the table)
    emit("ingest vs raw pyarrow sort+write", ours["ingest_s"] / ours["raw_ingest_s"], 1.15)
    if rivals:
        best = min(r["ingest_s"] for r in rivals)
        emit("ingest vs the best peer", ours["ingest_s"] / best, 0.8)
    emit("table size vs raw pyarrow Parquet", ours["size_bytes"] / raw["size_bytes"], 1.0)
    if "pypaimon" in results and "error" not in results["pypaimon"]:
        theirs = results["pypaimon"]["size_bytes"]  # pypaimon's writer never compacts: every file stays live
        emit("table size vs pypaimon (both write-only: the whole directory)", ours["size_bytes"] / theirs, 1.0)
        emit(
            "table size, default options (compacting), latest snapshot's files vs pypaimon",
            ours["default_latest_bytes"] / theirs,
            1.0,
        )
        emit(
            "table size, default options, whole directory (with files kept for time travel) vs pypaimon",
            ours["default_size_bytes"] / theirs,
            1.0,
        )
        if "default_compacted_bytes" in ours:
            whole, compacted = ours["default_size_bytes"], ours["default_compacted_bytes"]
            print(
                f"default options, whole directory {whole / 1e6:.0f} MB: {compacted / 1e6:.0f} MB written by "
                f"compaction, {(whole - compacted) / 1e6:.0f} MB the commits' level-0 files and metadata",
                flush=True,
            )
    emit(
        f"{LOOKUPS} point lookups vs raw pyarrow filtered read of the same files",
        ours["lookups_s"] / ours["raw_lookups_same_files_s"],
        1.0,
    )
    emit("aggregation table ingest vs raw pyarrow sort+write", ours["agg_ingest_s"] / ours["raw_agg_ingest_s"], 1.15)
    emit(
        "aggregation merged read vs pyarrow read + group_by().aggregate()", ours["agg_read_s"] / raw["agg_read_s"], 2.0
    )


def summary(goals: list[str]) -> None:
    parsed = [p for p in (parse(g) for g in goals) if p]
    print("\n== summary: every goal of this run", flush=True)
    width = max((len(p[0]) for p in parsed), default=10)
    for name, measured, target, flag in parsed:
        print(f"  {flag:4}  {name:<{width}}  {measured:>10}  {target}")
    passed = sum(p[3] == "PASS" for p in parsed)
    print(f"  {passed}/{len(parsed)} PASS; load: {os.getloadavg()[0]:.2f} (1 min)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller data for a fast look")
    ap.add_argument("--peer-rows", type=int, default=None, help="rows per commit of the head-to-head")
    ap.add_argument("--only-peers", action="store_true", help="run only the head-to-head")
    ap.add_argument("--repeat", type=int, default=REPEAT, help="repetitions of the head-to-head (median)")
    args = ap.parse_args()
    goals: list[str] = []
    if not args.only_peers:
        for name in SCRIPTS:
            extra: list[str] = []
            if args.quick:
                extra = {
                    "bench_core.py": ["--rows", "200000", "--commits", "3"],
                    "bench_streaming.py": ["--rows", "20000", "--probes", "2"],
                    "bench_write.py": ["--rows", "2000000"],
                    "bench_planning.py": ["--commits", "200"],
                    "bench_deletion_vectors.py": ["--rows", "200000", "--spark"],
                    "bench_dml.py": ["--repeat", "3", "--mem-rows", "2000000"],
                    "bench_buckets.py": ["--rows", "200000", "--repeat", "1"],
                }.get(name, ["--rows", "1000000"])
            elif name == "bench_deletion_vectors.py":
                extra = ["--spark"]
            run_script(name, extra, goals)
    peers(args.peer_rows or (200_000 if args.quick else 1_000_000), 5, goals, args.repeat)
    summary(goals)


if __name__ == "__main__":
    main()
