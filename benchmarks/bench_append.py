"""Append tables (no primary key) against raw pyarrow: write, read, and a read after many small commits.

* write: ``--rows`` rows in 5 commits through ``Table.write`` vs ``pyarrow.parquet.write_table`` of the same
  batches with the table's codec (zstd); the table's writes include its page checksums, page index, column
  statistics and commit. Measured with ``write-only`` (the append alone) and with the default options (the
  inline compaction after the fifth commit included).
* read: ``Table.read()`` vs ``pyarrow.parquet.read_table`` of the raw files.
* small commits: a read after 50 small commits and a compaction vs a read of the same rows written in one.
* with ``--spark`` (``--spark-rows``, default 5M; ``--skip-python`` for the Spark section alone), local[2]:
  ``df.write.format("mergetable")`` creating an append table vs ``df.write.parquet`` (goal 1.3x, out of reach
  of a Python data source: the API's own floor, :mod:`api_floor`'s writer that only drains its input, is printed
  beside it), ``mergetable.spark.write`` (Spark's own Parquet writer, then one commit) vs ``df.write.parquet``
  (goal 1.3x), and
  ``mergetable.spark.read`` of the append table vs ``spark.read.parquet`` of the same files (goal 1.1x), also
  with deletion vectors (a delete of the first 1% of the rows, marked in vectors; the native side reads the same
  files, every row; then, as no goal, 1% more scattered over every file), through :mod:`bench_spark`'s
  alternating best-of-3 pairs.

Each figure is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import mergetable as mt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from goals import report

COMMITS = 5


def batches(rows: int, parts: int, seed: int = 7) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    per = rows // parts
    out = []
    for i in range(parts):
        out.append(
            pa.table(
                {
                    "ts": np.arange(i * per, (i + 1) * per, dtype=np.int64),
                    "user": rng.integers(0, 1_000_000, per, dtype=np.int64),
                    "event": pa.array(rng.choice(["view", "click", "buy", "share"], per)),
                    "value": rng.random(per),
                }
            )
        )
    return out


def best(repeat: int, run: Callable[[], object], setup: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        setup()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also measure Spark's read and write of append tables")
    parser.add_argument("--spark-rows", type=int, default=5_000_000)
    parser.add_argument("--skip-python", action="store_true", help="only the Spark section")
    args = parser.parse_args()
    if not args.skip_python:
        python_section(args)
    if args.spark:
        spark_section(args.spark_rows)


def python_section(args: argparse.Namespace) -> None:
    data = batches(args.rows, COMMITS)
    work = Path(tempfile.mkdtemp(prefix="bench-append-"))
    raw_dir = work / "raw"

    def fresh_raw() -> None:
        shutil.rmtree(raw_dir, ignore_errors=True)
        raw_dir.mkdir()

    def write_raw() -> None:
        for i, b in enumerate(data):
            pq.write_table(b, raw_dir / f"part-{i}.parquet", compression="zstd")

    raw_write = best(args.repeat, write_raw, fresh_raw)
    table_uri = str(work / "table")
    holder: dict[str, mt.Table] = {}

    def fresh_table(options: dict[str, str]) -> Callable[[], None]:
        def setup() -> None:
            shutil.rmtree(table_uri, ignore_errors=True)
            holder["t"] = mt.create_table(table_uri, data[0].schema, options=options)

        return setup

    def write_table() -> None:
        for b in data:
            holder["t"].write(b)

    only = best(args.repeat, write_table, fresh_table({"write-only": "true"}))
    default = best(args.repeat, write_table, fresh_table({}))
    print(f"write {args.rows:,} rows in {COMMITS} commits: raw {raw_write:.2f}s, append table {only:.2f}s "
          f"(write-only), {default:.2f}s (default options, inline compaction included)")  # fmt: skip
    report("append table write vs pyarrow.parquet.write_table (write-only)", only / raw_write, 1.1)
    # Not a goal: the default options add the inline compaction the fifth small commit triggers (5 files rewritten).
    print(f"default options (inline compaction included) vs raw: {default / raw_write:.2f}x")

    fresh_table({"write-only": "true"})()
    write_table()
    t = holder["t"]
    raw_read = best(args.repeat, lambda: pq.read_table(raw_dir))
    table_read = best(args.repeat, t.read)
    assert t.count() == args.rows
    print(f"read: raw {raw_read:.2f}s, append table {table_read:.2f}s")
    report("append table read vs pyarrow.parquet.read_table", table_read / raw_read, 1.1)

    small = pa.concat_tables(data).slice(0, min(args.rows, 1_000_000))
    one_uri, many_uri = str(work / "one"), str(work / "many")
    one = mt.create_table(one_uri, small.schema)
    one.write(small)
    many = mt.create_table(many_uri, small.schema, options={"write-only": "true"})
    step = small.num_rows // 50
    for i in range(50):
        many.write(small.slice(i * step, step if i < 49 else small.num_rows - i * step))
    many.compact(progress=False)
    one_read, many_read = best(args.repeat, one.read), best(args.repeat, many.read)
    print(f"{small.num_rows:,} rows: one commit {one_read:.3f}s; 50 commits + compaction {many_read:.3f}s "
          f"({len(many.files())} files)")  # fmt: skip
    report("append read after 50 commits + compaction vs one commit", many_read / one_read, 1.2)
    zorder(work, args.rows)
    shutil.rmtree(work, ignore_errors=True)


def zorder(work: Path, rows: int) -> None:
    """Files a two-column range filter (10% of each column's range) reads before and after a z-ordered
    compaction (files rolled at 1 MB, in practice one row group each, so that a table of ``rows`` rows has many)."""
    rng = np.random.default_rng(5)
    data = pa.table({"x": rng.integers(0, 100_000, rows), "y": rng.integers(0, 100_000, rows), "v": rng.random(rows)})
    t = mt.create_table(str(work / "zorder"), data.schema, options={"target-file-size": "1 mb", "write-only": "true"})
    for part in batches_of(data, COMMITS):
        t.write(part)
    box = [[("x", ">=", 20_000), ("x", "<", 30_000), ("y", ">=", 50_000), ("y", "<", 60_000)]]

    def files_read() -> int:
        return len({f.file_name for s in t.plan(filter=box) for f in s.files})

    before, matching = files_read(), t.count(filter=box)
    start = time.perf_counter()
    t.compact(order_by=["x", "y"], strategy="zorder", progress=False)
    took = time.perf_counter() - start
    after = files_read()
    assert t.count(filter=box) == matching
    print(f"z-order of {rows:,} rows ({took:.1f}s): a two-column range filter reads {before} files before, "
          f"{after} after ({len(t.files())} files)")  # fmt: skip
    report("files read by a 2-column range filter after z-order compaction (fraction of before)", after / before, 0.25)


def batches_of(data: pa.Table, parts: int) -> list[pa.Table]:
    per = -(-data.num_rows // parts)
    return [data.slice(i * per, per) for i in range(parts)]


def spark_section(rows: int) -> None:
    """Spark's write and read of an append table against its native Parquet source (see the module docstring)."""
    import api_floor
    from bench_spark import best_pair, compare, frame, full_scan, session

    import mergetable.spark as mts

    spark = session()
    api_floor.register(spark)
    work = Path(tempfile.mkdtemp(prefix="bench-append-spark-"))
    print(f"Spark, append table of {rows:,} rows (id BIGINT, p STRING, v DOUBLE, s STRING), local[2]")
    df = frame(spark, rows).cache()
    df.count()
    runs = iter(range(1000))

    def native_write() -> int:
        df.write.mode("overwrite").parquet(str(work / "native-w"))
        return 0

    def table_write() -> int:
        path = work / f"w-{next(runs)}"
        df.write.format("mergetable").mode("append").save(str(path))
        assert mt.open_table(str(path)).table_schema.is_append_table
        shutil.rmtree(path)
        return 0

    def floor_write() -> int:
        df.write.format(api_floor.NAME).mode("append").save()
        return 0

    def fast_write() -> int:
        path = work / f"w-{next(runs)}"
        mts.write(df, str(path))
        t = mt.open_table(str(path))
        assert t.table_schema.is_append_table and t.count() == rows
        shutil.rmtree(path)
        return 0

    source = compare('append table df.write.format("mergetable")', 1.3, native_write, table_write)
    native_s, floor_s = best_pair(native_write, floor_write)
    print(f"  (the Python data source API alone, {api_floor.NAME}'s writer draining its input: native {native_s:.2f}s, "
          f"floor {floor_s:.2f}s = {floor_s / native_s:.2f}x; the data source {source:.2f}x is "
          f"{source / (floor_s / native_s):.2f}x the floor)")  # fmt: skip
    compare("append table mergetable.spark.write", 1.3, native_write, fast_write)
    for vectors in (False, True):
        uri = str(work / ("dv" if vectors else "plain"))
        options = {"deletion-vectors.enabled": "true"} if vectors else {}
        df.write.format("mergetable").mode("append").options(**options).save(uri)
        t = mt.open_table(uri)
        files = _data_paths(t)
        native = spark.read.parquet(*files).select("id", "p", "v", "s")
        ours = mts.read(spark, uri)
        assert ours.inputFiles(), "mergetable.spark.read did not plan a Parquet scan"
        if not vectors:
            scans = (lambda n=native: full_scan(n)), (lambda o=ours: full_scan(o))
            compare("append table mergetable.spark.read", 1.1, *scans)
            continue
        t.delete([("id", "<", rows // 100)])
        ours = mts.read(spark, uri)
        assert full_scan(ours)[0] == rows - rows // 100
        native_s, ours_s = best_pair(lambda n=native: full_scan(n), lambda o=ours: full_scan(o))
        print(f"  with deletion vectors ({rows // 100:,} rows marked): native {native_s:.2f}s, "
              f"mergetable {ours_s:.2f}s")  # fmt: skip
        report("Spark append table mergetable.spark.read with deletion vectors vs native", ours_s / native_s, 1.1)
        t.delete([("v", "<", 10.0)])  # about 1% more, scattered over every file: the anti-join drops them
        ours = mts.read(spark, uri)
        native_s, ours_s = best_pair(lambda n=native: full_scan(n), lambda o=ours: full_scan(o))
        print(f"  with scattered marks ({t.count():,} rows left; no goal): native {native_s:.2f}s, "
              f"mergetable {ours_s:.2f}s, {ours_s / native_s:.2f}x")  # fmt: skip
    df.unpersist()
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


def _data_paths(t: mt.Table) -> list[str]:
    return [t.path_factory.data_file(s.partition, s.bucket, f.file_name) for s in t.plan() for f in s.files]


if __name__ == "__main__":
    main()
