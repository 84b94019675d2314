"""A Spark driver process on a standalone cluster: the compaction job with a speculative task attempt.

usage: speculation_driver.py MASTER_URL TABLE_URI EVENT_LOG_DIR

Writes a table whose partition ``p=0`` holds most rows (its compaction task is by far the slowest), runs
``mergetable.spark.compact`` with ``spark.speculation`` on, and prints one JSON line: the rows before and after,
the files under the table that no snapshot references, and how many speculative attempts Spark launched (from
its event log).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

import mergetable as mt
from mergetable.spark.compact import compact

SCHEMA = pa.schema([("p", pa.int64()), ("k", pa.int64()), ("v", pa.string())])
ROWS = 2_400_000


def make_table(uri: str) -> mt.Table:
    options = {"bucket": "1", "target-file-size": "256 kb", "write-only": "true"}
    t = mt.create_table(uri, SCHEMA, primary_key=["p", "k"], partition_keys=["p"], options=options)
    for i in range(3):
        upsert(t, i)
    return t


def upsert(t: mt.Table, i: int) -> None:
    """Every key again (a run more in each bucket to compact), values tagged ``i``."""
    keys = np.arange(ROWS)
    part = np.where(keys < ROWS - ROWS // 40, 0, 1 + keys % 3)  # p=0: 97.5% of the rows; p=1..3: small
    values = pa.array([f"value-{i}-{k:09d}" for k in range(10)] * (ROWS // 10))
    t.write(pa.table({"p": part, "k": keys, "v": values}, schema=SCHEMA))


def speculated(attempts: list[dict[str, object]]) -> bool:
    """Whether a speculative attempt of a compaction stage launched (stage 0 warms the workers up)."""
    return any(a["speculative"] and int(str(a["stage"])) > 0 for a in attempts)


def task_attempts(event_log_dir: str) -> list[dict[str, object]]:
    """Every task attempt Spark launched, from its event log: stage, index, speculative, host, end reason."""
    attempts: dict[int, dict[str, object]] = {}
    for path in glob.glob(f"{event_log_dir}/**/*", recursive=True):
        if os.path.isfile(path):
            with open(path) as log:
                for line in log:
                    if '"SparkListenerTaskStart"' in line or '"SparkListenerTaskEnd"' in line:
                        event = json.loads(line)
                        info = event["Task Info"]
                        attempt = attempts.setdefault(info["Task ID"], {"stage": event["Stage ID"]})
                        attempt.update(index=info["Index"], speculative=info["Speculative"], host=info["Host"])
                        if "Task End Reason" in event:
                            attempt["end"] = event["Task End Reason"]["Reason"]
    return list(attempts.values())


def main() -> None:
    master, uri, event_log_dir = sys.argv[1:4]
    t = make_table(uri)
    order = [("p", "ascending"), ("k", "ascending")]
    spark = (
        SparkSession.builder.master(master)
        .appName("mergetable-speculation")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.speculation", "true")
        .config("spark.speculation.multiplier", "1.1")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.minTaskRuntime", "200ms")
        .config("spark.speculation.interval", "100ms")
        .config("spark.speculation.efficiency.enabled", "false")  # the slow task reads more, not slower
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", event_log_dir)
        .config("spark.eventLog.compress", "false")
        # a killed attempt's Python worker finishes its work instead of being destroyed after 2 s, so the
        # losing attempt always writes its files (else whether it gets that far is a matter of timing)
        .config("spark.python.task.killTimeout", "120s")
        .config("spark.executor.memory", "1g")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    warm = spark.sparkContext.parallelize(range(8), 8)  # Python workers with mergetable imported, on both workers
    warm.map(lambda x: __import__("mergetable.spark.compact") and x).collect()
    compacted, same_rows, rounds = True, True, 0
    try:
        # Whether Spark speculates depends on timing (a worker slow to start can finish last with a small task):
        # up to three rounds, each compacting one more run, until a speculative attempt really launched. The
        # event log is flushed at the end of every stage.
        while rounds < 3 and (rounds == 0 or not speculated(task_attempts(event_log_dir))):
            if rounds:
                upsert(t, 3 + rounds)
            before = t.read().sort_by(order)
            snapshot = compact(spark, uri, full=True)
            compacted &= snapshot is not None and snapshot.commit_kind.value == "COMPACT"
            same_rows &= mt.open_table(uri).read().sort_by(order).equals(before)
            rounds += 1
    finally:
        spark.stop()
    t = mt.open_table(uri)
    orphans = t.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000, dry_run=True, force=True)
    print(
        json.dumps(
            {
                "compacted": compacted,
                "same_rows": same_rows,
                "rounds": rounds,
                "rows": t.count(),
                "orphans": orphans,
                "staging_left": os.path.exists(os.path.join(uri, "_spark_staging")),
                "attempts": task_attempts(event_log_dir),
            }
        )
    )


if __name__ == "__main__":
    main()
