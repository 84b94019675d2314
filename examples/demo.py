"""mergetable demo (``make demo``): a PySpark pipeline on local files, end to end.

1. Generate orders, then a later batch of updates and deletes (a ``+U``/``-D`` column).
2. Write them with Spark into three primary-key tables:
   ``orders`` (deduplicate: last write wins), ``customer_stats`` (aggregation: sum, max, last_non_null_value
   and an HLL sketch of distinct products) and ``order_facts`` (partial-update: two sources fill one wide row).
3. Read them back with Spark, time-travel to the first snapshot, list the snapshots.
4. Compact ``order_facts`` with a Spark compaction job, and read the changelog of ``orders``' update commit.
5. A two-stage streaming pipeline (CDC stream → table with a lookup changelog → downstream aggregation),
   whose first stage is killed with SIGKILL and restarted: the downstream totals stay exact
   (``demo_streaming.py``).
Everything goes to ``demo-output/`` (deleted at start).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mergetable as mt
import mergetable.spark as mts
from mergetable.spark.compact import compact

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "demo-output"
QUIET_LOG4J = ROOT / "tests" / "spark" / "log4j2-quiet.properties"
ORDERS, STATS, FACTS = (str(OUT / n) for n in ("orders", "customer_stats", "order_facts"))
N = 20_000
T0 = time.perf_counter()


def step(text: str) -> None:
    print(f"\n[{time.perf_counter() - T0:5.1f}s] {text}", flush=True)


def session() -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers must use this venv's Python
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java = f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J} -XX:+UseSerialGC"
    return (
        SparkSession.builder.master("local[2]")
        .appName("mergetable-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java)
        .getOrCreate()
    )


def generate(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    """N orders over three days, and a later batch: 10% of them updated, 5% deleted."""
    orders = spark.range(N).select(
        F.col("id").alias("order_id"),
        F.concat(F.lit("2024-05-0"), (F.col("id") % 3 + 1).cast("string")).alias("dt"),
        F.concat(F.lit("cust-"), (F.col("id") % 500).cast("string")).alias("customer"),
        (F.floor(F.col("id") / 500) % 40).alias("product"),
        F.round(F.col("id") % 997 * 0.5 + 5, 2).alias("amount"),
        F.lit("NEW").alias("status"),
        F.lit(1).alias("version"),
    )
    updates = orders.where(F.col("order_id") % 10 == 0).select(
        *[c for c in orders.columns if c not in ("amount", "status", "version")],
        (F.col("amount") * 2).alias("amount"),
        F.lit("SHIPPED").alias("status"),
        F.lit(2).alias("version"),
        F.lit("+U").alias("op"),
    )
    deletes = orders.where(F.col("order_id") % 20 == 7).withColumn("version", F.lit(2)).withColumn("op", F.lit("-D"))
    return orders, updates.unionByName(deletes)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    step("Starting a local[2] Spark session (format 'mergetable' is registered by the pyspark_mergetable package)")
    spark = session()
    orders, changes = generate(spark)

    step(f"orders (deduplicate, partitioned by dt, 2 buckets): write {N:,} orders, then the updates/deletes")
    dedup = {"primary-key": "dt,order_id", "partition-keys": "dt", "bucket": "2", "sequence.field": "version"}
    orders.write.format("mergetable").mode("append").options(**dedup).save(ORDERS)
    changes.write.format("mergetable").mode("append").option("row-kind-column", "op").save(ORDERS)

    step("customer_stats (aggregation): every order adds to its customer's row")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyspark nags about Arrow UDF type hints
        from mergetable.spark.functions import register_functions

        register_functions(spark)
    stats = orders.select(
        "customer",
        F.col("amount").alias("total_amount"),
        F.col("amount").alias("max_amount"),
        F.col("dt").alias("last_day"),
        F.lit(1).alias("order_count"),
        F.expr("HLL_SKETCH(product)").alias("products"),
    )
    agg = {
        "fields.total_amount.aggregate-function": "sum",
        "fields.max_amount.aggregate-function": "max",
        "fields.last_day.aggregate-function": "last_non_null_value",
        "fields.order_count.aggregate-function": "sum",
        "fields.products.aggregate-function": "hll_sketch",
    }
    mts.write(stats, STATS, primary_key="customer", bucket=2, merge_engine="aggregation", options=agg)

    step("order_facts (partial-update): shipping and payment systems each write their own columns")
    shipping = orders.select("order_id", F.lit("DHL").alias("carrier"), F.col("dt").alias("shipped_on"))
    payment = orders.select("order_id", F.col("amount").alias("paid"))
    wide = shipping.withColumn("paid", F.lit(None).cast("double"))
    wide.write.format("mergetable").mode("append").options(
        **{"primary-key": "order_id", "merge-engine": "partial-update", "bucket": "2"}
    ).save(FACTS)
    payment.write.format("mergetable").mode("append").save(FACTS)  # a subset of the columns is fine here

    step("Reading back with spark.read.format('mergetable')")
    current = spark.read.format("mergetable").load(ORDERS)
    print(f"orders now: {current.count():,} rows (was {N:,}; 5% deleted)")
    current.groupBy("dt", "status").count().orderBy("dt", "status").show()
    top = spark.read.format("mergetable").load(STATS).orderBy(F.desc("total_amount"))
    top.selectExpr("* EXCEPT (products)", "round(HLL_SKETCH_COUNT(products)) AS distinct_products").show(5)
    spark.read.format("mergetable").load(FACTS).orderBy("order_id").show(3)

    step("Time travel: the first snapshot of orders, before the updates and deletes")
    first = spark.read.format("mergetable").option("snapshot-id", "1").load(ORDERS)
    print(f"snapshot 1: {first.count():,} rows")
    first.where("order_id = 10").union(current.where("order_id = 10")).show()

    step("Snapshots of every table")
    for uri in (ORDERS, STATS, FACTS):
        for s in mt.open_table(uri).snapshots():
            name, kind = Path(uri).name, s.commit_kind.value
            print(f"  {name:15} #{s.id} {kind:9} {s.delta_record_count:>+7} records  by {s.commit_user}")

    step("Compaction (writes trigger it: COMPACT above); a full one of order_facts as a Spark job; a changelog")
    facts = mt.open_table(FACTS)

    def files_per_level() -> str:
        levels = Counter(f.level for _, _, f in facts.files())
        return ", ".join(f"{n} at level {lvl}" for lvl, n in sorted(levels.items()))

    print(f"  order_facts files: {files_per_level()}")
    compact(spark, FACTS, full=True)  # one task per bucket, one COMPACT commit
    print(f"  after a full compaction: {files_per_level()} ({facts.read().num_rows:,} rows)")
    table = mt.open_table(ORDERS)
    writes = [s.id for s in table.snapshots() if s.commit_kind is not mt.metadata.models.CommitKind.COMPACT]
    changes_log = table.changelog(writes[0], writes[1])
    kinds = changes_log.group_by("_row_kind").aggregate([("_row_kind", "count")]).to_pylist()
    print("  changelog of snapshot 2:", ", ".join(f"{k['_row_kind']} x{k['_row_kind_count']}" for k in kinds))

    import demo_streaming

    demo_streaming.run(spark, OUT / "streaming", step)
    spark.stop()
    step(f"Done. Tables are in {OUT.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
