"""polars and pandas views of a table: a lazy polars scan with pushdown, eager polars and pandas frames.

The lazy scan is a polars IO source: polars hands it the projected columns, a predicate and a row limit;
the columns and the limit go into the read, the predicate's translatable part (see
:mod:`mergetable.interop.polars_expr`) into mergetable's planning and merge-on-read, and the whole
predicate is then applied to the rows returned. The snapshot is chosen when the frame is built.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import pyarrow as pa

from mergetable.core.extras import require
from mergetable.core.predicates import Filters
from mergetable.interop.polars_expr import applicable, to_dnf
from mergetable.interop.scan import ReadableTable, TableScan, Travel

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl


class PolarsSource:
    """A polars IO source over one snapshot of a table; :meth:`lazy` is the ``LazyFrame``, :attr:`stats` what it read.

    >>> lf = PolarsSource(table).lazy()                           # doctest: +SKIP
    >>> lf.filter(pl.col("id") == 5).select("qty").collect()      # doctest: +SKIP
    """

    def __init__(self, table: ReadableTable, filter: Filters | None = None, **travel: Unpack[Travel]) -> None:
        self.scan = TableScan(table, **travel)
        self.filter = filter
        self.pushed: list[Any] = []  # the DNF filters pushed into mergetable, one per read (for inspection)

    @property
    def stats(self) -> Any:
        return self.scan.stats

    def lazy(self) -> pl.LazyFrame:
        pl = require("polars", "Table.to_polars(lazy=True)")
        from polars.io.plugins import register_io_source

        schema = pl.from_arrow(self.scan.schema.empty_table()).schema
        return register_io_source(
            self.read,
            schema=schema,
            is_pure=True,
            explain_name="mergetable",
            explain_detail=f"{getattr(self.scan.table, 'uri', '')} @ snapshot {self.scan.snapshot_id}",
        )

    def read(
        self,
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        """The IO source function polars calls."""
        import polars as pl

        predicate = applicable(predicate) if predicate is not None else None
        dnf = self._combined(to_dnf(predicate, self.scan.schema) if predicate is not None else None)
        self.pushed.append(dnf)
        columns = list(self.scan.schema.names) if with_columns is None else list(with_columns)
        read = columns if predicate is None else list(dict.fromkeys([*columns, *predicate.meta.root_names()]))
        # With a predicate to apply here, the limit counts rows after it: the read itself is not limited.
        limit = n_rows if predicate is None else None
        remaining = n_rows
        for table in self.scan.batches(read, dnf, limit=limit):
            df = pl.from_arrow(table)
            assert isinstance(df, pl.DataFrame)
            if predicate is not None:
                df = df.filter(predicate)
            df = df.select(columns)
            if remaining is not None:
                df = df.head(remaining)
                remaining -= df.height
            if df.height:
                yield df
            if remaining is not None and remaining <= 0:
                return

    def _combined(self, dnf: list[Any] | None) -> Filters | None:
        base = self.filter
        if base is None or dnf is None:
            return dnf if base is None else base
        given = [list(base)] if isinstance(base[0], tuple) else [list(c) for c in base]
        return [[*g, *d] for g in given for d in dnf]


def scan_polars(
    table: ReadableTable, columns: Sequence[str] | None = None, filter: Filters | None = None, **travel: Unpack[Travel]
) -> pl.LazyFrame:
    """A polars ``LazyFrame`` over the merged rows of a snapshot of ``table`` (latest by default).

    Projections, predicates and ``head``/``limit`` of the query are pushed into mergetable's read.

    Example:
        >>> import tempfile, polars as pl, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
        >>> _ = t.write({"id": [1, 2, 3], "v": ["a", "b", "c"]})
        >>> mt.scan_polars(t).filter(pl.col("id") >= 2).select("v").collect()["v"].to_list()
        ['b', 'c']
    """
    lf = PolarsSource(table, filter, **travel).lazy()
    return lf if columns is None else lf.select(list(columns))


def to_polars(
    table: ReadableTable,
    columns: Sequence[str] | None = None,
    filter: Filters | None = None,
    lazy: bool = False,
    **travel: Unpack[Travel],
) -> pl.DataFrame | pl.LazyFrame:
    """The merged rows as a polars ``DataFrame`` (or a pushdown ``LazyFrame`` with ``lazy=True``)."""
    if lazy:
        return scan_polars(table, columns, filter, **travel)
    pl = require("polars", "Table.to_polars()")
    scan = TableScan(table, **travel)
    out = pl.from_arrow(_read_all(scan, columns, filter))
    assert isinstance(out, pl.DataFrame)
    return out


def to_pandas(
    table: ReadableTable, columns: Sequence[str] | None = None, filter: Filters | None = None, **travel: Unpack[Travel]
) -> pd.DataFrame:
    """The merged rows as a pandas ``DataFrame`` of ``pd.ArrowDtype`` columns.

    Every column keeps its exact Arrow type: dates, decimals and nested values are not ``object``, integer
    columns with nulls stay integers and a null stays distinct from NaN, so the frame writes back unchanged.

    Example:
        >>> import datetime, tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("day", pa.date32())]), ["id"])
        >>> _ = t.write({"id": [1], "day": [datetime.date(2024, 5, 1)]})
        >>> str(to_pandas(t)["day"].dtype)
        'date32[day][pyarrow]'
    """
    pd = require("pandas", "Table.to_pandas()")
    return _read_all(TableScan(table, **travel), columns, filter).to_pandas(types_mapper=pd.ArrowDtype)


def arrow_stream(table: ReadableTable, requested_schema: object | None = None, **travel: Unpack[Travel]) -> object:
    """The Arrow C stream capsule of the merged rows (the ``__arrow_c_stream__`` protocol)."""
    return TableScan(table, **travel).reader().__arrow_c_stream__(requested_schema)


def _read_all(scan: TableScan, columns: Sequence[str] | None, filter: Filters | None) -> pa.Table:
    names = scan.check_columns(columns)
    parts = list(scan.batches(names, filter))
    return pa.concat_tables(parts) if parts else pa.schema([scan.schema.field(c) for c in names]).empty_table()
