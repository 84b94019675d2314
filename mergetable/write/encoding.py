"""Parquet encodings of data files: chosen per column from its type and a sample of the rows being written.

Measured on the benchmark table (a 1M-row load then 5 upserts of 1M rows, 4 buckets, write-only, zstd;
raw pyarrow's sort+write of the same rows: 67 MB), each step on top of the one before:

====================================================================  ==========
step                                                                  table size
====================================================================  ==========
the earlier writer: 64Ki-row groups, dictionary strings, plain rest       103 MB
256Ki-row groups; DELTA_BINARY_PACKED sequence numbers and int key         89 MB
sequence numbers in key order inside each spilled run                      75 MB
BYTE_STREAM_SPLIT floats; dictionaries only where a sample repeats         63 MB
====================================================================  ==========

With the default options (the writer compacts), a 4M-row load then 5 upserts of 4M rows, the whole table
directory (every file kept for time travel; pypaimon, which never compacts: 403 MB):

====================================================================  ==========
step                                                                  table size
====================================================================  ==========
sequence numbers in key order inside each spilled run                     426 MB
one sequence number per level-0 file; a dictionary when few repeat        405 MB
data pages of up to 128Ki rows instead of Arrow's 20,000                  392 MB
====================================================================  ==========

(The compaction's output kept each record's number: in key order within each run, interleaved across the
five runs it merged, its ``_SEQUENCE_NUMBER`` column took 23.7 MB; one number per level-0 file, 2.5 MB.)

Per column, on one bucket's 250K-row file: the float column 1.88 -> 1.73 MB with BYTE_STREAM_SPLIT; an
int column of 1000 distinct values 0.44 -> 0.32 MB with a dictionary; near-unique sorted strings 0.83 MB
with a dictionary, 0.45 MB with DELTA_BYTE_ARRAY; ``_VALUE_KIND`` costs 0.001 MB either way, so it is
kept (dictionary/RLE) rather than omitted, which would change what readers must expect.

Every encoding here is a standard Parquet encoding that pyarrow, parquet-mr (Spark) and DuckDB read.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema

SAMPLE_ROWS = 16 * 1024
"""Rows of a file looked at to decide whether a column repeats enough for a dictionary."""
DICTIONARY_MAX_DISTINCT = 0.5
"""A string column whose sample is more distinct than this skips the dictionary (it would fall back to plain
pages after a dictionary page full of single-use values)."""
INT_DICTIONARY_MAX_DISTINCT = 0.1
"""An integer value column takes a dictionary only when its sample repeats a lot (few distinct codes)."""
_DELTA_KEY_TYPES = (pa.int32(), pa.int64())


def _distinct_ratio(column: pa.ChunkedArray | pa.Array) -> float:
    """Distinct values (NULL counted as one) per row. Of strings, ``unique`` counts them 3x faster than
    ``count_distinct`` (16Ki rows: 0.4 ms against 1.3 ms); of ints the other way round.

    >>> _distinct_ratio(pa.array(["a", None, "a", None])), _distinct_ratio(pa.array([1, 2, 2, 2]))
    (0.5, 0.5)
    """
    n = len(column)
    if n == 0:
        return 1.0
    t = column.type
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return len(pc.unique(column)) / n
    return pc.count_distinct(column, mode="all").as_py() / n


def parquet_encodings(schema: TableSchema, sample: pa.Table) -> tuple[list[str], dict[str, str]]:
    """``(use_dictionary, column_encoding)`` for ``pq.ParquetWriter``, from the first rows of a file.

    * ``_SEQUENCE_NUMBER``: a dictionary when the sample has few distinct numbers (a writer's file stores one,
      a compaction's output one per level-0 file it merged), else ``DELTA_BINARY_PACKED``;
    * a 32/64-bit integer first key column: ``DELTA_BINARY_PACKED`` (it ascends in a sorted file);
    * ``_VALUE_KIND``: dictionary (four values: RLE runs);
    * float and double value columns: ``BYTE_STREAM_SPLIT``;
    * strings and binaries: dictionary when the sample repeats values, else ``DELTA_BYTE_ARRAY``;
    * other integer value columns: dictionary when the sample has few distinct values, else plain.
    """
    keys = schema.trimmed_primary_keys
    fs = schema.file_schema
    system = not schema.is_append_table  # an append table's files hold no system columns
    head = sample.slice(0, SAMPLE_ROWS)
    encodings: dict[str, str] = {}
    dictionary = [VALUE_KIND] if system else []
    if system and _distinct_ratio(head.column(SEQUENCE_NUMBER)) <= INT_DICTIONARY_MAX_DISTINCT:
        dictionary.append(SEQUENCE_NUMBER)
    elif system:
        encodings[SEQUENCE_NUMBER] = "DELTA_BINARY_PACKED"
    if keys and fs.field(keys[0]).type in _DELTA_KEY_TYPES:
        encodings[keys[0]] = "DELTA_BINARY_PACKED"
    for f in fs:
        if f.name in encodings or f.name in dictionary:
            continue
        t = f.type
        if pa.types.is_floating(t) and not pa.types.is_float16(t):
            encodings[f.name] = "BYTE_STREAM_SPLIT"
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            if _distinct_ratio(head.column(f.name)) <= DICTIONARY_MAX_DISTINCT:
                dictionary.append(f.name)
            else:
                encodings[f.name] = "DELTA_BYTE_ARRAY"
        elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            dictionary.append(f.name)
        elif pa.types.is_integer(t) and f.name not in keys:
            if _distinct_ratio(head.column(f.name)) <= INT_DICTIONARY_MAX_DISTINCT:
                dictionary.append(f.name)
    return dictionary, encodings
