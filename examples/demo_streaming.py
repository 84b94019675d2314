"""The streaming part of ``make demo``: a two-stage exactly-once pipeline, with a driver killed mid-way.

Stage 1 (its own driver process): a CDC file stream (Parquet files of ``+I``/``+U``/``-D`` rows, one file
per micro-batch) upserts and deletes into ``customers`` (deduplicate, ``changelog-producer=lookup``)
through ``writeStream.format("mergetable")``.
Stage 2 (the demo's session): ``readStream.format("mergetable")`` follows ``customers``' changelog
(``+I -U +U -D``) into ``region_totals``, an aggregation table summing amounts and customers per region:
``-U``/``-D`` retract what the customer contributed before.
Stage 1 is killed with SIGKILL after a few batches and restarted from its checkpoint; the downstream totals
are then checked against the upstream table and against a plain-Python replay of the CDC files.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import mergetable as mt

REGIONS = ["north", "south", "east", "west", "center"]
FILES, KEYS = 6, 3000
# A change's position in the CDC log orders it (Paimon's sequence.field): a micro-batch may hold several files
# (Spark's file source can join two after a driver restart), and the rows of one batch arrive in no set order.
CUSTOMERS_OPTIONS = {"primary-key": "id", "bucket": "2", "changelog-producer": "lookup", "sequence.field": "seq"}
TOTALS_OPTIONS = {
    "primary-key": "region",
    "bucket": "1",
    "merge-engine": "aggregation",
    "fields.amount.aggregate-function": "sum",
    "fields.customers.aggregate-function": "sum",
}


def cdc_files(folder: Path, seed: int = 7) -> dict[int, tuple[str, int]]:
    """Write FILES CDC files (each key at most once per file); returns the final state id -> (region, amount)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    state: dict[int, tuple[str, int]] = {}
    next_id = 0
    for n in range(FILES):
        rows: list[tuple[int, str, int, str]] = []
        live = list(state)
        rng.shuffle(live)
        for key in live[: len(live) // 5]:  # update a fifth, moving some customers to another region
            state[key] = (rng.choice(REGIONS), rng.randrange(1, 1000))
            rows.append((key, *state[key], "+U"))
        for key in live[len(live) // 5 : len(live) // 5 + len(live) // 12]:  # delete a few
            rows.append((key, *state.pop(key), "-D"))
        for _ in range(KEYS // FILES):
            state[next_id] = (rng.choice(REGIONS), rng.randrange(1, 1000))
            rows.append((next_id, *state[next_id], "+I"))
            next_id += 1
        ids, regions, amounts, kinds = (list(c) for c in zip(*rows, strict=True))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "region": regions,
                "amount": pa.array(amounts, pa.int64()),
                "_row_kind": kinds,
                "seq": pa.array(range(n * 1_000_000, n * 1_000_000 + len(rows)), pa.int64()),
            }
        )
        path = folder / f"cdc-{n:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # Spark's file source goes by modification time
    return state


def ingest_main(source: str, checkpoint: str, uri: str) -> None:
    """Stage 1 in its own driver process (``python demo_streaming.py ingest …``)."""
    from demo import session

    spark = session()
    ingest(spark, source, checkpoint, uri)
    spark.stop()


def ingest(spark: SparkSession, source: str, checkpoint: str, uri: str) -> None:
    """Stage 1: the CDC files → customers, one file per micro-batch (availableNow: all files, then stop)."""
    cdc = spark.readStream.schema("id long, region string, amount long, _row_kind string, seq long")
    query = (
        cdc.option("maxFilesPerTrigger", 1)
        .parquet(source)
        .coalesce(1)  # keep each file's order: one task per micro-batch
        .writeStream.format("mergetable")
        .options(**CUSTOMERS_OPTIONS)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination()


def follow(spark: SparkSession, customers: str, totals: str, checkpoint: str) -> None:
    """Stage 2: customers' changelog → region_totals (availableNow: everything up to now, then stop)."""
    changes = spark.readStream.format("mergetable").option("read.changelog", "true").load(customers)
    per_region = changes.select("region", "amount", F.lit(1).cast("long").alias("customers"), "_row_kind")
    query = (
        per_region.writeStream.format("mergetable")
        .options(**TOTALS_OPTIONS)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(totals)
    )
    query.awaitTermination()


def run(spark: SparkSession, out: Path, say: Callable[[str], None] = print) -> None:
    """The whole streaming demo under ``out``; ``say`` prints a (timed) heading."""
    source, customers, totals = out / "cdc", str(out / "customers"), str(out / "region_totals")
    ck_ingest, ck_follow = str(out / "_checkpoints" / "ingest"), str(out / "_checkpoints" / "follow")
    expected_state = cdc_files(source)
    ingest_cmd = [sys.executable, __file__, "ingest", str(source), ck_ingest, customers]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}

    say(f"Streaming stage 1 in its own driver: {FILES} CDC files → customers (lookup changelog producer)")
    proc = subprocess.Popen(ingest_cmd, env=env, start_new_session=True)
    while _batches(customers) < 2 and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    table = mt.open_table(customers)
    print(f"  killed the stage-1 driver (SIGKILL) after {len(table.snapshots())} snapshots")

    say("Streaming stage 2: customers' changelog → region_totals (aggregation), while stage 1 is down")
    follow(spark, customers, totals, ck_follow)
    print(f"  region_totals so far: {_totals(totals)}")

    say("Restarting stage 1 from its checkpoint (in this driver), then stage 2 catches up")
    ingest(spark, str(source), ck_ingest, customers)
    follow(spark, customers, totals, ck_follow)

    upstream: dict[str, list[int]] = {}
    for row in mt.open_table(customers).read().to_pylist():
        upstream.setdefault(row["region"], [0, 0])
        upstream[row["region"]][0] += row["amount"]
        upstream[row["region"]][1] += 1
    replay: dict[str, list[int]] = {}
    for region, amount in expected_state.values():
        replay.setdefault(region, [0, 0])
        replay[region][0] += amount
        replay[region][1] += 1
    got = _totals(totals)
    for region in sorted(got):
        print(f"  {region:7} amount {got[region][0]:>9,}  customers {got[region][1]:>5,}")
    assert got == upstream == replay, f"downstream totals are wrong: {got} != {upstream} / {replay}"
    print(f"  exact: {sum(v[1] for v in got.values()):,} customers, totals equal upstream and a replay of the CDC")


def _batches(uri: str) -> int:
    """Micro-batches committed so far (APPEND snapshots; the lookup producer adds COMPACT ones)."""
    if not mt.table_exists(uri):
        return 0
    return sum(1 for s in mt.open_table(uri).snapshots() if s.commit_kind.value == "APPEND")


def _totals(uri: str) -> dict[str, list[int]]:
    rows = mt.open_table(uri).read().to_pylist()
    return {r["region"]: [r["amount"], r["customers"]] for r in rows if r["customers"]}


if __name__ == "__main__":
    if sys.argv[1:2] == ["ingest"]:
        ingest_main(*sys.argv[2:5])
    else:  # the streaming part of the demo alone
        import shutil

        from demo import OUT, session, step

        shutil.rmtree(OUT / "streaming", ignore_errors=True)
        demo_session = session()
        run(demo_session, OUT / "streaming", step)
        demo_session.stop()
