"""A DataFrame whose ``count()`` is known from the table's metadata.

:func:`mergetable.spark.native.native_read` of a whole snapshot without a filter knows how many rows it returns
before Spark reads any: the row counts of its files minus the positions their deletion vectors mark (what
``Table.count()`` answers). :func:`with_count` returns the DataFrame as a :class:`CountedDataFrame`, whose
``count()`` answers that number; everything else is the DataFrame's own, and every transformation of it
(``where``, ``select``, ``limit``, a join …) returns an ordinary DataFrame, whose ``count()`` Spark computes. The
DataFrame is pinned to its snapshot, so the number stays true for as long as its files exist (Spark's own count
would then fail where this one still answers).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame  # Spark Connect's is left as it is


class CountedDataFrame(ClassicDataFrame):
    """A classic DataFrame whose ``count()`` is ``rows``, known in advance (see the module docstring)."""

    _mergetable_rows: int

    def count(self) -> int:
        """The number of rows, known without running a Spark job."""
        return self._mergetable_rows


def with_count(df: DataFrame, rows: int) -> DataFrame:
    """``df`` (of a classic session), answering ``count()`` with ``rows``; ``df`` itself elsewhere.

    >>> with_count(object(), 3)  # not a classic DataFrame: returned as it is  # doctest: +ELLIPSIS
    <object object at ...>
    """
    if type(df) is not ClassicDataFrame:
        return df
    out = CountedDataFrame(df._jdf, df.sparkSession)
    out._mergetable_rows = rows
    return out


__all__ = ["CountedDataFrame", "with_count"]
