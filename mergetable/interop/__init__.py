"""Tier: interop. Tables as polars, pandas, duckdb and Arrow-stream data, with pushdown into mergetable's reads.

>>> lf = mt.scan_polars(t)                                        # doctest: +SKIP
>>> lf.filter(pl.col("id") > 10).select("qty").head(5).collect()  # doctest: +SKIP
>>> t.to_duckdb(con).filter("dt = '2024-01-01'").aggregate("sum(qty)")  # doctest: +SKIP

polars, pandas and duckdb are optional (``pip install 'mergetable[polars]'`` …): using a view without its
library raises :class:`mergetable.MissingExtraError`.
"""

from mergetable.interop.arrow_dataset import TableDataset, to_duckdb
from mergetable.interop.frames import PolarsSource, arrow_stream, scan_polars, to_pandas, to_polars
from mergetable.interop.scan import ReadableTable, ScanStats, TableScan, Travel

__all__ = [
    "PolarsSource",
    "ReadableTable",
    "ScanStats",
    "TableDataset",
    "TableScan",
    "Travel",
    "arrow_stream",
    "scan_polars",
    "to_duckdb",
    "to_pandas",
    "to_polars",
]
