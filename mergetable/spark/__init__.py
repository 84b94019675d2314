"""Tier: spark. The ``mergetable`` PySpark data source and its helpers (needs pyspark).

>>> spark.read.format("mergetable").load(uri)                                      # doctest: +SKIP
>>> df.write.format("mergetable").mode("append").option("primary-key", "id").save(uri)  # doctest: +SKIP
>>> import mergetable.spark as mts
>>> mts.write(df, uri, primary_key="id", bucket=4)                                 # doctest: +SKIP
>>> mts.compact(spark, uri, full=True)                                             # doctest: +SKIP

Installing the package registers the format in every SparkSession (through the top-level
``pyspark_mergetable`` module); :func:`register` does it explicitly. See ``docs/spark.md``.
"""

from mergetable.spark.api import read, register, register_view, write
from mergetable.spark.compact import compact
from mergetable.spark.delta import MergeTable
from mergetable.spark.source import DefaultSource, MergeTableDataSource

__all__ = [
    "DefaultSource",
    "MergeTable",
    "MergeTableDataSource",
    "compact",
    "read",
    "register",
    "register_view",
    "write",
]
