"""mergetable: a primary-key LSM table format on Parquet with Apache Paimon's merge semantics.

>>> import mergetable as mt
>>> t = mt.write_table(uri, pandas_df, primary_key="id", partition_by="dt")       # doctest: +SKIP
>>> t = mt.create_table(uri, schema, primary_key=["id"], options={"bucket": "4"})  # doctest: +SKIP
>>> t.write(arrow_table)                                                           # doctest: +SKIP
>>> t.read(filter=[("id", "=", 5)])                                                # doctest: +SKIP
"""

from mergetable.commit.result import CommitResult
from mergetable.core.errors import (
    BucketAssignmentConflictError,
    ClockSkewError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptMetadataError,
    DataFileError,
    FilterError,
    MergeError,
    MergeTableError,
    MissingExtraError,
    OptionsError,
    SchemaError,
    SnapshotNotFoundError,
    TableExistsError,
    TableNotFoundError,
    TableRecreatedError,
    UnsupportedError,
)
from mergetable.core.options import TableOptions
from mergetable.core.rowkind import RowKind
from mergetable.from_data import write_table
from mergetable.interop import scan_polars
from mergetable.interop.describe import TableDescription
from mergetable.metadata.models import CommitMessage, DataFileMeta, Snapshot, Tag
from mergetable.table import Table, create_table, open_table, table_exists

__version__ = "0.1.0"

__all__ = [
    "BucketAssignmentConflictError",
    "ClockSkewError",
    "CommitConflictError",
    "CommitMessage",
    "CommitResult",
    "CommitStateUnknownError",
    "CorruptMetadataError",
    "DataFileError",
    "DataFileMeta",
    "FilterError",
    "MergeError",
    "MergeTableError",
    "MissingExtraError",
    "OptionsError",
    "RowKind",
    "SchemaError",
    "Snapshot",
    "SnapshotNotFoundError",
    "Table",
    "TableDescription",
    "TableExistsError",
    "TableNotFoundError",
    "TableOptions",
    "TableRecreatedError",
    "Tag",
    "UnsupportedError",
    "create_table",
    "open_table",
    "scan_polars",
    "table_exists",
    "write_table",
]
