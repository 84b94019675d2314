"""Auto-registration shim: PySpark imports every top-level ``pyspark_*`` module it can find and registers
its ``DefaultSource`` under ``DefaultSource.name()``, so ``format("mergetable")`` works with no register call.
"""

from mergetable.spark.source import DefaultSource

__all__ = ["DefaultSource"]
