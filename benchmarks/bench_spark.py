"""Spark data source speed against Spark's native Parquet source on the same data, measured in one run (local[2]).

Every goal is printed through :func:`goals.report` as mergetable time / native time (lower is better):

* compacted read: ``spark.read.format("mergetable")`` of a compacted table vs ``spark.read.parquet`` of the
  same rows; the query touches every user column (``count``, ``sum(id)``, ``sum(v)``, ``max(length(s))``),
  so native Parquet cannot win by pruning columns the Python data source API (4.3) cannot prune;
* merged read: a table with 8 sorted runs per bucket vs the native scan of the same rows (all runs);
* ``count()`` of the compacted table vs native ``count()``;
* partition-filtered and key-filtered reads (``p = 'p3'``, ``id = <k>``) vs native reads of a
  ``partitionBy("p")`` copy with the same filter, through a ``where()`` on the DataFrame (Spark's filter
  pushdown) and through the ``filter`` read option;
* the compacted read, ``count()`` and the ``where()`` reads again through ``mergetable.spark.read``, which
  scans raw-convertible sections (all of a compacted table's) with Spark's own Parquet reader;
* writes: ``df.write.format("mergetable")`` and ``mergetable.spark.write`` vs ``df.write.parquet``, and (as no
  goal) Spark's own ``repartition`` + ``write.parquet`` beside ``mergetable.spark.write``, which shuffles too;
* the peak resident memory of Spark's Python workers (their ``VmHWM`` in ``/proc``, polled while the
  benchmark runs).

Beside the ``spark.read.format`` / ``df.write.format`` goals it prints (as no goal) the **API floor** of the
same query: :mod:`api_floor`'s data source hands Spark the same rows as Arrow batches already decoded, and its
writer drains its input, so the floor's ratio to native is what any Python data source costs on this PySpark
before it decodes, merges or encodes anything, and mergetable's ratio to the floor is what mergetable adds.

Each figure is the best of 3 after a warm-up run, native and mergetable runs alternating, so a change in the
machine's load hits both alike.

Run: ``python benchmarks/bench_spark.py [--rows 5000000]``. The tables are written with ``bucket`` 2 (fixed
buckets); ``--bucket -1`` writes the default table of ``primary-key`` alone (dynamic buckets), and
``--skip read,merged,pipelined`` measures the writes alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_floor
from bench_core import data_files
from goals import report

import mergetable as mt

QUIET_LOG4J = Path(__file__).resolve().parent.parent / "tests" / "spark" / "log4j2-quiet.properties"
TARGETS = {
    "compacted": 1.2,
    "merged": 1.5,
    "count": 1.5,
    "filtered": 1.5,
    "write": 1.35,
    "write_api": 1.6,
    "worker_mb": 1024.0,
}
PARTITIONS = 8
RUNS = 8


def session() -> Any:
    """A quiet local[2] session (no test-only JIT flags: they slow long jobs down)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("mergetable-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "4g")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J} -XX:+UseSerialGC")
        .getOrCreate()
    )


class WorkerMemory:
    """Polls the peak RSS (``VmHWM``) of this run's Spark Python workers (descendants of this process)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.poll()

    def poll(self) -> None:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:  # the process ended
                    continue
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
        todo, mine = [os.getpid()], []
        while todo:  # only this benchmark's own JVM and its Python workers
            pid = todo.pop()
            mine.append(pid)
            todo.extend(children.get(pid, []))
        for pid in mine:
            try:
                if not _python_worker(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")):
                    continue
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except OSError:
                continue


def _python_worker(argv: list[bytes]) -> bool:
    """Whether a command line is a Spark Python worker's (``python -m pyspark.daemon ...``), not the JVM's (whose
    class path also names pyspark)."""
    return b"python" in Path(argv[0].decode(errors="replace")).name.encode() and any(
        a.startswith(b"pyspark.") for a in argv
    )


def best_pair(native: Callable[[], Any], ours: Callable[[], Any], repeat: int = 3) -> tuple[float, float]:
    """Best wall times of ``repeat`` alternating runs of each, after a warm-up run of each."""
    native()
    ours()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, out in ((native, times[0]), (ours, times[1])):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return min(times[0]), min(times[1])


def frame(spark: Any, rows: int, start: int = 0, step: int = 1) -> Any:
    """``rows`` rows of (id BIGINT, p STRING, v DOUBLE, s STRING), ids ``start, start+step, ...``."""
    from pyspark.sql import functions as F

    ids = spark.range(rows).select((F.col("id") * step + start).alias("id"))
    return ids.select(
        F.col("id"),
        F.concat(F.lit("p"), (F.col("id") % PARTITIONS).cast("string")).alias("p"),
        (F.col("id") * 0.37 % 1000).alias("v"),
        F.concat(F.lit("val-"), (F.col("id") % 100_000).cast("string")).alias("s"),
    )


def full_scan(df: Any) -> Any:
    from pyspark.sql import functions as F

    return tuple(df.agg(F.count("*"), F.sum("id"), F.round(F.sum("v"), 1), F.max(F.length("s"))).collect()[0])


def compare(name: str, target: float, native: Callable[[], Any], ours: Callable[[], Any]) -> float:
    assert native() == ours(), f"{name}: mergetable and native Spark disagree"
    native_s, ours_s = best_pair(native, ours)
    print(f"  {name}: native {native_s:.2f}s, mergetable {ours_s:.2f}s")
    report(f"Spark {name} vs native", ours_s / native_s, target)
    return ours_s / native_s


FLOORS: list[Callable[[], None]] = []
"""Read floors, measured once every goal is: the batches the floor keeps in the workers then count against no goal."""


def floor(
    name: str, ours_ratio: float, native: Callable[[], Any], api: Callable[[], Any], same: Any = None, now: bool = False
) -> None:
    """Print the API floor (no goal) of a query mergetable's data source answered at ``ours_ratio`` x native, at the
    end of the run (``now``: at once; ``same``: the floor's answer, when it is not native's)."""

    def measure() -> None:
        assert api() == (native() if same is None else same), f"{name}: the API floor returned other rows"
        native_s, api_s = best_pair(native, api)
        ratio = api_s / native_s
        print(f"  API floor, {name}: {api_s:.2f}s, {ratio:.2f}x native; mergetable {ours_ratio / ratio:.2f}x the floor")

    if now:
        measure()
    else:
        FLOORS.append(measure)


def floor_frame(spark: Any, files: list[str], schema: Any) -> Any:
    """The rows of ``files`` (columns of ``schema``) through the API floor (:mod:`api_floor`)."""
    return spark.read.format(api_floor.NAME).schema(schema).option("paths", ",".join(files)).load()


def bench_writes(spark: Any, work: Path, df: Any, bucket: int) -> None:
    import mergetable.spark as mts

    runs = iter(range(1000))
    options = {"primary-key": "id", "bucket": str(bucket)}

    def native() -> int:
        df.write.mode("overwrite").parquet(str(work / "native-w"))
        return 0

    def fmt() -> int:
        path = work / f"w-{next(runs)}"
        df.write.format("mergetable").mode("append").options(**options).save(str(path))
        shutil.rmtree(path)
        return 0

    def api() -> int:
        path = work / f"w-{next(runs)}"
        mts.write(df, str(path), options=options)
        shutil.rmtree(path)
        return 0

    def drain() -> int:
        df.write.format(api_floor.NAME).mode("append").save()
        return 0

    def repartitioned() -> int:
        tasks = int(str(spark.conf.get("spark.sql.shuffle.partitions")))
        df.repartition(tasks, "id").write.mode("overwrite").parquet(str(work / "native-r"))
        return 0

    ratio = compare('df.write.format("mergetable")', TARGETS["write"], native, fmt)
    floor("write (an Arrow writer that drains its input)", ratio, native, drain, now=True)
    compare("mergetable.spark.write", TARGETS["write_api"], native, api)
    # the helper = a bucket (Spark expressions for a BIGINT key) + a shuffle + df.write.format, beside Spark's own
    shuffled_s, api_s = best_pair(repartitioned, api)
    print(
        f"  Spark's repartition(id) + write.parquet {shuffled_s:.2f}s, mergetable.spark.write {api_s:.2f}s: "
        f"{api_s / shuffled_s:.2f}x (without the shuffles, df.write.format was {ratio:.2f}x df.write.parquet)"
    )


PIPELINED = "spark.python.udf.pipelined.enabled"


def pipelined(rows: int, bucket: int, pairs: int = 2) -> None:
    """``df.write.format("mergetable")`` with Spark's pipelined JVM-Python transfer (a core conf of PySpark 4.3+,
    fixed when the session starts) against without: one fresh session per measurement, alternating (no goal)."""
    times: dict[str, list[float]] = {"false": [], "true": []}
    for _ in range(pairs):
        for value in times:
            cmd = [sys.executable, __file__, "--write-once", value, "--rows", str(rows), "--bucket", str(bucket)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"  {PIPELINED}: could not be measured ({done.stderr.strip().splitlines()[-1:]})")
                return
            times[value].append(float(done.stdout.strip().splitlines()[-1]))
    off, on = min(times["false"]), min(times["true"])
    what = 'df.write.format("mergetable")'
    print(f"  {PIPELINED}: {what} {off:.2f}s off, {on:.2f}s on ({on / off:.2f}x), {pairs} pairs")


def write_once(value: str, rows: int, bucket: int) -> None:
    """Print the best of two timed ``df.write.format("mergetable")`` runs (after a warm-up) in a session started
    with ``spark.python.udf.pipelined.enabled=value``."""
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--conf {PIPELINED}={value} pyspark-shell"
    spark = session()
    work = Path(tempfile.mkdtemp(prefix="mt-bench-pipelined-"))
    try:
        df = frame(spark, rows)
        best = float("inf")
        for i in range(3):
            t0 = time.perf_counter()
            df.write.format("mergetable").mode("append").options(**{"primary-key": "id", "bucket": str(bucket)}).save(
                str(work / f"w{i}")
            )
            if i:
                best = min(best, time.perf_counter() - t0)
        assert spark.sparkContext.getConf().get(PIPELINED) == value
        print(best)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def merged_table(spark: Any, work: Path, rows: int, bucket: int) -> tuple[str, list[str]]:
    """A table of ``RUNS`` commits per bucket (write-only: never compacted), and its data files."""
    uri = str(work / "merged")
    per_run = rows // RUNS
    for i in range(RUNS):
        # every commit rewrites the upper half of the previous one's keys and adds new ones
        frame(spark, per_run, start=i * per_run // 2).write.format("mergetable").mode("append").options(
            **{"primary-key": "id", "bucket": str(bucket), "write-only": "true"}
        ).save(uri)
    return uri, data_files(mt.open_table(uri))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--bucket", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: write, read, merged, pipelined")
    ap.add_argument("--write-once", choices=["true", "false"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.write_once is not None:
        write_once(args.write_once, args.rows, args.bucket)
        return
    spark = session()
    api_floor.register(spark)
    work = Path(tempfile.mkdtemp(prefix="mt-bench-spark-"))
    try:
        with WorkerMemory() as memory:
            run(spark, work, args.rows, args.bucket, set(args.skip.split(",")))
        report("Spark Python worker peak RSS", memory.peak_kb / 1024, TARGETS["worker_mb"], unit=" MB")
        print("what reads through the Python data source API cost by themselves (see api_floor.py):")
        for measure in FLOORS:
            measure()
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    if "pipelined" not in set(args.skip.split(",")):
        pipelined(args.rows, args.bucket)


def run(spark: Any, work: Path, rows: int, bucket: int, skip: set[str]) -> None:
    print(f"Spark data source, {rows:,} rows (id BIGINT, p STRING, v DOUBLE, s STRING), bucket={bucket}, local[2]")
    print(f"  load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    df = frame(spark, rows)
    if "write" not in skip:
        bench_writes(spark, work, df, bucket)
    if "read" not in skip:
        bench_reads(spark, work, df, rows, bucket)
    if "merged" not in skip:
        bench_merged(spark, work, rows, bucket)


def bench_reads(spark: Any, work: Path, df: Any, rows: int, bucket: int) -> None:
    """A compacted table partitioned by p against a native ``partitionBy("p")`` copy: scans, count, filters."""
    import mergetable.spark as mts

    uri = str(work / "table")
    df.write.format("mergetable").mode("append").options(
        **{"primary-key": "id,p", "partition": "p", "bucket": str(bucket)}
    ).save(uri)
    mt.open_table(uri).compact(full=True)
    df.write.partitionBy("p").parquet(str(work / "native"))
    ours = spark.read.format("mergetable").load(uri)
    native = spark.read.parquet(str(work / "native")).select("id", "p", "v", "s")
    ratio = compare("compacted read", TARGETS["compacted"], lambda: full_scan(native), lambda: full_scan(ours))
    api = floor_frame(spark, data_files(mt.open_table(uri)), native.schema)
    floor("compacted read", ratio, lambda: full_scan(native), lambda: full_scan(api))
    ratio = compare("count()", TARGETS["count"], native.count, ours.count)
    floor("count()", ratio, native.count, api.count)
    hybrid = mts.read(spark, uri)
    assert hybrid.inputFiles(), "mergetable.spark.read did not scan the compacted files with Spark's reader"
    compare(
        "compacted read, mergetable.spark.read",
        TARGETS["compacted"],
        lambda: full_scan(native),
        lambda: full_scan(hybrid),
    )
    compare("count(), mergetable.spark.read", TARGETS["count"], native.count, hybrid.count)

    # each filtered query loads its DataFrame (the filter option is given at load), native Spark too
    key = rows // 3

    def native_where(sql: str) -> Any:
        return full_scan(spark.read.parquet(str(work / "native")).select("id", "p", "v", "s").where(sql))

    for what, sql, dnf in (("partition", "p = 'p3'", [("p", "=", "p3")]), ("key", f"id = {key}", [("id", "=", key)])):
        compare(
            f"{what}-filtered read, where()",
            TARGETS["filtered"],
            lambda sql=sql: native_where(sql),
            lambda sql=sql: full_scan(spark.read.format("mergetable").load(uri).where(sql)),
        )
        compare(
            f"{what}-filtered read, filter option",
            TARGETS["filtered"],
            lambda sql=sql: native_where(sql),
            lambda dnf=dnf: full_scan(spark.read.format("mergetable").option("filter", _json(dnf)).load(uri)),
        )
        compare(
            f"{what}-filtered read, mergetable.spark.read + where()",
            TARGETS["filtered"],
            lambda sql=sql: native_where(sql),
            lambda sql=sql: full_scan(mts.read(spark, uri).where(sql)),
        )


def bench_merged(spark: Any, work: Path, rows: int, bucket: int) -> None:
    """A read of ``RUNS`` sorted runs per bucket vs the native scan of the same files."""
    merged_uri, files = merged_table(spark, work, rows, bucket)
    ours_m = spark.read.format("mergetable").load(merged_uri)
    native_m = spark.read.parquet(*files).select("id", "p", "v", "s")
    assert ours_m.count() == native_m.select("id").distinct().count()
    expected = full_scan(ours_m)
    native_s, ours_s = best_pair(lambda: full_scan(native_m), lambda: full_scan(ours_m))
    print(
        f"  merged read ({len(files)} files): native scan of the same files {native_s:.2f}s, mergetable {ours_s:.2f}s"
    )
    report(f"Spark merged read ({RUNS} runs/bucket) vs native", ours_s / native_s, TARGETS["merged"])
    # the floor hands Spark the merged rows (the files of a full compaction of a copy) as decoded Arrow batches
    shutil.copytree(merged_uri, work / "merged-compacted")
    compacted = mt.open_table(str(work / "merged-compacted"))
    compacted.compact(full=True)
    api = floor_frame(spark, data_files(compacted), native_m.schema)
    floor(
        "merged read (the merged rows)",
        ours_s / native_s,
        lambda: full_scan(native_m),
        lambda: full_scan(api),
        expected,
    )


def _json(dnf: list[tuple[str, str, Any]]) -> str:
    import json

    return json.dumps([list(p) for p in dnf])


if __name__ == "__main__":
    main()
