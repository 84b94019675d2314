"""A table as a pyarrow ``Dataset`` whose scanner reads through mergetable: the duckdb interop.

duckdb pushes the projection and the filters of a query into a pyarrow dataset's ``scanner(columns=,
filter=)`` (the filter as a pyarrow expression it translated exactly). :class:`TableDataset` serves that
call from mergetable: files are pruned by the expression over their partition values and key ranges
(:func:`mergetable.interop.scan.prune_by_expression`), the rest are merged, and the expression is applied
exactly to the merged rows. pyarrow's own ``to_table``/``head``/``count_rows`` work through the same scanner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from mergetable.core.errors import UnsupportedError
from mergetable.core.extras import require
from mergetable.interop.scan import ReadableTable, ScanStats, TableScan, Travel

if TYPE_CHECKING:
    import duckdb


class TableDataset(ds.InMemoryDataset):  # type: ignore[misc]
    """The merged rows of one snapshot of a table as a pyarrow dataset (rows are only read by scanners).

    >>> rel = duckdb.connect().from_arrow(TableDataset(table))      # doctest: +SKIP
    """

    def __init__(self, table: ReadableTable, filter: pc.Expression | None = None, **travel: Unpack[Travel]) -> None:
        self._init(TableScan(table, **travel), filter)

    def _init(self, scan: TableScan, filter: pc.Expression | None) -> None:
        # The pyarrow base holds an empty table of the right schema; every read goes through scanner().
        super().__init__(scan.schema.empty_table())
        self._scan = scan
        self._filter = filter

    @property
    def stats(self) -> ScanStats:
        """The data files and rows scans of this dataset read."""
        return self._scan.stats

    @property
    def snapshot_id(self) -> int | None:
        return self._scan.snapshot_id

    def scanner(
        self,
        columns: Sequence[str] | dict[str, Any] | None = None,
        filter: pc.Expression | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> ds.Scanner:
        if isinstance(columns, dict):
            raise UnsupportedError("TableDataset.scanner: columns must be a list of names, not expressions")
        expression = _and(self._filter, filter)
        names = self._scan.check_columns(columns)
        reader = self._scan.reader(names, expression=expression)
        return ds.Scanner.from_batches(reader)

    def filter(self, expression: pc.Expression) -> TableDataset:
        out = TableDataset.__new__(TableDataset)
        out._init(self._scan, _and(self._filter, expression))
        return out

    def get_fragments(self, filter: pc.Expression | None = None) -> Any:
        raise UnsupportedError("a mergetable dataset has no file fragments: its rows exist only after merging")

    def replace_schema(self, schema: pa.Schema) -> Any:
        raise UnsupportedError("a mergetable dataset keeps its table's schema")


def _and(a: pc.Expression | None, b: pc.Expression | None) -> pc.Expression | None:
    if a is None or b is None:
        return b if a is None else a
    return a & b


def to_duckdb(
    table: ReadableTable,
    connection: duckdb.DuckDBPyConnection | None = None,
    **travel: Unpack[Travel],
) -> duckdb.DuckDBPyRelation:
    """A duckdb relation over the merged rows of a snapshot; its filters and projections reach mergetable.

    ``connection`` defaults to duckdb's default connection.

    Example:
        >>> import tempfile, duckdb, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("v", pa.int64())]), ["id"])
        >>> _ = t.write({"id": [1, 2, 3], "v": [10, 20, 30]})
        >>> con = duckdb.connect()
        >>> t.to_duckdb(con).filter("id > 1").aggregate("sum(v)").fetchall()
        [(50,)]
        >>> con.close()
    """
    duck = require("duckdb", "Table.to_duckdb()")
    con = connection if connection is not None else duck.default_connection()
    return con.from_arrow(TableDataset(table, **travel))
