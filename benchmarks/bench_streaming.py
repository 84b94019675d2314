"""Structured Streaming into mergetable against Spark's file source → Parquet sink, in one run (local[2]).

* upsert throughput: a file stream of upsert batches (30% of each batch's keys seen before) written by
  ``writeStream.format("mergetable")`` into a primary-key table with the ``lookup`` changelog producer, vs
  the same stream written by ``writeStream.format("parquet")``; rows per second over the whole query
  (``availableNow``, one file per micro-batch). Ratio = mergetable rows/s / Parquet rows/s.
* end-to-end latency: two running queries each (processing-time trigger): upserts → table → its changelog
  (``readStream.format("mergetable")``) → a downstream aggregation table, vs files → Parquet sink → a file
  stream of that sink's output → a second Parquet sink. A probe file lands in the source; the latency is
  the time until the probe's rows are visible downstream (committed). Median of a few probes; ratio =
  Parquet latency / mergetable latency (1.0 = as fast).

Run: ``python benchmarks/bench_streaming.py [--rows 100000 --files 5 --probes 3]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_spark import session

import mergetable as mt

SCHEMA = "id long, g long, v long"
TRIGGER = "500 milliseconds"
UPSERT = {"primary-key": "id", "bucket": "2", "changelog-producer": "lookup"}
DOWNSTREAM = {"primary-key": "g", "bucket": "1", "merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}


def write_batches(folder: Path, rows: int, files: int, start: int = 0, seed: int = 3) -> int:
    """``files`` upsert files of ``rows`` rows (30% of the keys repeat earlier ones); returns the row count."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    next_key = 0
    for n in range(files):
        repeated = int(rows * 0.3) if next_key else 0
        old = rng.choice(next_key, repeated, replace=False) if repeated else np.zeros(0, np.int64)
        ids = np.concatenate([old, np.arange(next_key, next_key + rows - repeated)]).astype(np.int64)
        next_key += rows - repeated
        v = rng.integers(0, 1000, len(ids))
        pq.write_table(pa.table({"id": ids, "g": ids % 16, "v": v}), folder / f"batch-{start + n:05d}.parquet")
    return rows * files


def throughput(spark: Any, work: Path, rows: int, files: int) -> tuple[float, float]:
    """(mergetable rows/s, Parquet rows/s) of one availableNow query over the same files (after a warm-up)."""
    source = work / "tp-source"
    total = write_batches(source, rows, files)
    warm = work / "tp-warm"
    write_batches(warm, 1000, 1)

    def run(sink: str, src: Path, out: Path, options: dict[str, str]) -> float:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
        writer = df.writeStream.format(sink).options(**options).option("checkpointLocation", str(out) + "-ck")
        t0 = time.perf_counter()
        writer.trigger(availableNow=True).start(str(out)).awaitTermination()
        return time.perf_counter() - t0

    run("mergetable", warm, work / "tp-warm-mt", UPSERT)
    run("parquet", warm, work / "tp-warm-pq", {})
    native = run("parquet", source, work / "tp-pq", {})
    ours = run("mergetable", source, work / "tp-mt", UPSERT)
    assert mt.open_table(str(work / "tp-mt")).read(columns=["id"]).num_rows == next_key_count(rows, files)
    return total / ours, total / native


def next_key_count(rows: int, files: int) -> int:
    return rows + (files - 1) * (rows - int(rows * 0.3))


def parquet_sink_rows(folder: Path) -> int:
    """Rows committed to a Parquet sink (the files its ``_spark_metadata`` log lists)."""
    log = folder / "_spark_metadata"
    paths: set[str] = set()
    for entry in log.glob("*") if log.exists() else []:
        if entry.name.startswith(".") or not entry.name.split(".")[0].isdigit():
            continue
        for line in entry.read_text().splitlines()[1:]:
            paths.add(json.loads(line)["path"].removeprefix("file://"))
    return sum(pq.read_metadata(p).num_rows for p in paths)


def downstream_total(uri: str) -> int:
    try:
        v = mt.open_table(uri).read(columns=["v"]).column("v")
    except mt.TableNotFoundError:  # the sink creates the table with its first batch
        return 0
    return int(pa.compute.sum(v).as_py() or 0)


def latency(spark: Any, work: Path, probe_rows: int, probes: int) -> tuple[list[float], list[float]]:
    """Latencies (s) of probe files through the mergetable pipeline and the Parquet pipeline."""
    src_mt, src_pq = work / "lat-src-mt", work / "lat-src-pq"
    table, totals = str(work / "lat-table"), str(work / "lat-totals")
    pq_mid, pq_out = work / "lat-pq-mid", work / "lat-pq-out"
    for src in (src_mt, src_pq):
        write_batches(src, 1000, 1, start=0, seed=5)  # something to start from
    mt.create_table(
        table,
        pa.schema([("id", pa.int64()), ("g", pa.int64()), ("v", pa.int64())]),
        ["id"],
        options={k: v for k, v in UPSERT.items() if k != "primary-key"},
    )
    queries = []

    def start(df: Any, sink: str, out: str, ck: str, options: dict[str, str]) -> None:
        w = df.writeStream.format(sink).options(**options).option("checkpointLocation", str(work / ck))
        queries.append(w.trigger(processingTime=TRIGGER).start(out))

    read_files = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
    start(read_files.parquet(str(src_mt)), "mergetable", table, "ck-a", {})
    changes = spark.readStream.format("mergetable").option("read.changelog", "true").load(table)
    start(changes.select("g", "v", "_row_kind"), "mergetable", totals, "ck-b", DOWNSTREAM)
    start(read_files.parquet(str(src_pq)), "parquet", str(pq_mid), "ck-c", {})
    start(spark.readStream.schema(SCHEMA).parquet(str(pq_mid)), "parquet", str(pq_out), "ck-d", {})
    ours: list[float] = []
    native: list[float] = []
    try:
        wait_until(lambda: downstream_total(totals) > 0 and parquet_sink_rows(pq_out) == 1000, queries)
        for i in range(probes):
            want = downstream_total(totals) + probe_rows
            ours.append(probe(src_mt, i, probe_rows, lambda w=want: downstream_total(totals) == w, queries))
            want = parquet_sink_rows(pq_out) + probe_rows
            native.append(probe(src_pq, i, probe_rows, lambda w=want: parquet_sink_rows(pq_out) == w, queries))
    finally:
        for q in queries:
            q.stop()
    return ours, native


def probe(source: Path, i: int, rows: int, arrived: Callable[[], bool], queries: list[Any]) -> float:
    """Drop a probe file of new keys (v = 1 each, so a downstream sum grows by ``rows``); seconds until seen."""
    ids = np.arange(10_000_000 * (i + 1), 10_000_000 * (i + 1) + rows, dtype=np.int64)
    table = pa.table({"id": ids, "g": ids % 16, "v": np.ones(rows, np.int64)})
    tmp = source.parent / f".probe-{source.name}-{i}.parquet"
    pq.write_table(table, tmp)
    t0 = time.perf_counter()
    tmp.rename(source / f"probe-{i:03d}.parquet")  # appears whole
    wait_until(arrived, queries)
    return time.perf_counter() - t0


def wait_until(condition: Callable[[], bool], queries: list[Any], timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while not condition():
        for q in queries:
            if not q.isActive:
                raise RuntimeError(f"a streaming query stopped: {q.exception()}")
        if time.time() > deadline:
            raise TimeoutError("the probe did not arrive")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per upsert batch (throughput)")
    ap.add_argument("--files", type=int, default=5, help="upsert batches (throughput)")
    ap.add_argument("--probe-rows", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=3)
    args = ap.parse_args()
    spark = session()
    work = Path(tempfile.mkdtemp(prefix="mt-bench-stream-"))
    try:
        ours_tp, native_tp = throughput(spark, work, args.rows, args.files)
        print(
            f"upsert throughput, {args.files} batches x {args.rows:,} rows: mergetable {ours_tp:,.0f} rows/s, "
            f"Parquet sink {native_tp:,.0f} rows/s -> ratio {ours_tp / native_tp:.2f}x"
        )
        ours_lat, native_lat = latency(spark, work, args.probe_rows, args.probes)
        o, n = statistics.median(ours_lat), statistics.median(native_lat)
        print(
            f"end-to-end latency (trigger {TRIGGER}), upsert -> changelog -> aggregation: mergetable median "
            f"{o:.2f}s {[round(x, 2) for x in ours_lat]}, files -> Parquet -> files -> Parquet median {n:.2f}s "
            f"{[round(x, 2) for x in native_lat]} -> ratio {n / o:.2f}x"
        )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
