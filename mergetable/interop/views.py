"""The interop methods of :class:`mergetable.Table`: Arrow C stream, polars, pandas and duckdb views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, Unpack

import pyarrow as pa

from mergetable.core.predicates import Filters
from mergetable.interop.arrow_dataset import to_duckdb
from mergetable.interop.describe import DescribedTable, TableDescription, describe_table
from mergetable.interop.frames import arrow_stream, to_pandas, to_polars
from mergetable.interop.notebook import table_html, table_text
from mergetable.interop.scan import ReadableTable, Travel

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl


class NotebookTable(DescribedTable, Protocol):
    """What the notebook view needs of a table."""

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def options(self) -> dict[str, str]: ...

    def describe(self, snapshot_id: int | None = None) -> TableDescription: ...


class DataViews:
    """Mixin of :class:`mergetable.Table`: each view reads one snapshot (latest unless ``travel`` says)."""

    def __arrow_c_stream__(self: ReadableTable, requested_schema: object | None = None) -> object:
        """The latest merged rows as an Arrow C stream: ``pl.DataFrame(t)``, ``duckdb.sql("from t")``, …"""
        return arrow_stream(self, requested_schema)

    def to_polars(
        self: ReadableTable, columns: Sequence[str] | None = None, filter: Filters | None = None, lazy: bool = False,
        **travel: Unpack[Travel],
    ) -> pl.DataFrame | pl.LazyFrame:  # fmt: skip
        """A polars DataFrame, or with ``lazy=True`` a LazyFrame pushing projections, filters and limits here."""
        return to_polars(self, columns, filter, lazy, **travel)

    def to_pandas(
        self: ReadableTable, columns: Sequence[str] | None = None, filter: Filters | None = None,
        **travel: Unpack[Travel],
    ) -> pd.DataFrame:  # fmt: skip
        """A pandas DataFrame of exact ``pd.ArrowDtype`` columns (dates and decimals are not ``object``)."""
        return to_pandas(self, columns, filter, **travel)

    def to_duckdb(
        self: ReadableTable, connection: duckdb.DuckDBPyConnection | None = None, **travel: Unpack[Travel]
    ) -> duckdb.DuckDBPyRelation:
        """A duckdb relation whose filters and projections are pushed into mergetable's reads."""
        return to_duckdb(self, connection, **travel)

    def describe(self: DescribedTable, snapshot_id: int | None = None) -> TableDescription:
        """The LSM tree of a snapshot (default: the latest) per bucket: its sorted runs and levels with their
        sizes, printed as text bars and shown in a notebook as HTML (:mod:`mergetable.interop.describe`).

        Example:
            >>> print(t.describe())  # doctest: +ELLIPSIS
            /... (snapshot 2): 2 files, 3 records, ...
            key id; 1 bucket(s) with files (bucket option -1, dynamic)
            bucket 0: 2 sorted runs (compaction at 5)
              L0  ████████████████████████████████ ... 2 file(s) (a run each), 3 records
        """
        return describe_table(self, snapshot_id)

    def __repr__(self: DescribedTable) -> str:
        """Location, version, records, key, buckets and columns (from the latest snapshot; no manifest read).

        Example:
            >>> repr(t).replace(t.uri, "URI").replace("2 columns: ", "")
            "<mergetable.Table URI (version 2, 3 records) key=['id'], bucket=-1, id int64 not null, v string>"
        """
        return table_text(self.uri, self.latest_snapshot(), self.table_schema)

    def _repr_html_(self: NotebookTable) -> str:
        """The notebook view: version, records, schema, key, buckets, files per level, non-default options."""
        return table_html(self.describe(), self.schema, self.options)
