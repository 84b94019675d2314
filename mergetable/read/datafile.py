"""Reading one data file, verified: page checksums, the row count its metadata records, typed errors.

Files are written with CRC page checksums; every read verifies them, so a flipped bit in a data page is
an error, never different rows. Parts of a Parquet file that no page checksum covers (page headers, the
footer) are checked as far as the table's metadata allows: an unfiltered read must return exactly the
row count recorded in the file's :class:`DataFileMeta`. Every failure is a :class:`DataFileError`
naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mergetable.core.errors import DataFileError
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import DataFileMeta


def read_data_file(
    fileio: FileIO,
    afs: pafs.FileSystem,
    path: str,
    meta: DataFileMeta,
    columns: Sequence[str],
    filter_expr: pc.Expression | None = None,
    row_group_pruning: bool = True,
) -> pa.Table:
    """``columns`` of the data file at ``path`` (rows matching ``filter_expr``), verified against ``meta``.

    ``row_group_pruning=False`` applies ``filter_expr`` after reading rather than letting Parquet
    statistics skip row groups (they cannot be trusted for NaN).
    """
    pushed = filter_expr if row_group_pruning else None
    try:
        table = pq.read_table(
            path,
            columns=list(columns),
            filters=pushed,
            filesystem=afs,
            use_threads=True,
            page_checksum_verification=True,
        )
    except FileNotFoundError:
        raise DataFileError(path, "data file is missing (the table references it)") from None
    except (OSError, pa.ArrowException, ValueError, IndexError) as exc:
        if not fileio.exists(path):
            raise DataFileError(path, "data file is missing (the table references it)") from None
        raise DataFileError(path, f"cannot read data file (corrupt?): {exc}") from exc
    if pushed is None and table.num_rows != meta.row_count:
        raise DataFileError(path, f"holds {table.num_rows} rows but the table recorded {meta.row_count} (corrupt?)")
    return table if pushed is not None or filter_expr is None else table.filter(filter_expr)
