"""Tier: spark. The ``mergetable`` PySpark data source and its helpers (needs ``pip install 'mergetable[spark]'``).

>>> spark.read.format("mergetable").load(uri)                                      # doctest: +SKIP
>>> df.write.format("mergetable").mode("append").option("primary-key", "id").save(uri)  # doctest: +SKIP
>>> import mergetable.spark as mts
>>> mts.write(df, uri, primary_key="id", bucket=4)                                 # doctest: +SKIP
>>> mts.compact(spark, uri, full=True)                                             # doctest: +SKIP

Installing the package registers the format in every SparkSession (through the top-level
``pyspark_mergetable`` module); :func:`register` does it explicitly. See ``docs/spark.md``. Importing
this package also silences PySpark's warning about pandas 3
(:func:`mergetable.core.extras.quiet_pyspark_pandas_warning`), so import it before creating the session.
"""

from mergetable.core.extras import quiet_pyspark_pandas_warning, require

quiet_pyspark_pandas_warning()  # before any session starts: see its documentation
require("pyspark", "mergetable.spark (the Spark data source)")

from mergetable.spark.api import foreach_batch, read, register, register_view, write  # noqa: E402
from mergetable.spark.compact import compact  # noqa: E402
from mergetable.spark.delta import MergeTable  # noqa: E402
from mergetable.spark.source import DefaultSource, MergeTableDataSource  # noqa: E402

__all__ = [
    "DefaultSource",
    "MergeTable",
    "MergeTableDataSource",
    "compact",
    "foreach_batch",
    "read",
    "register",
    "register_view",
    "write",
]
