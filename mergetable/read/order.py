"""The one total order over the records of a bucket, shared by merge-on-read, compaction and changelog.

A key's records are merged oldest → newest by (``sequence.field`` values, sequence number, file age).
Committed sequence numbers of one key's records are unique within a bucket (:mod:`mergetable.commit.sequence`;
the records of one file may share a number, and a file holds one record per key), so file age only breaks
the ties that tables of format version 1 (numbers fixed from the writer's base snapshot) and
``sequence.snapshot-ordering`` (one number per commit) can hold. File age depends on file metadata alone:
higher levels are older than lower ones, and level-0 files are ordered by (max sequence number, min
sequence number, creation time, name).

Why a compaction cannot change the winner of a tie: a compaction takes every level-0 file and the levels up
to its output level (universal compaction picks the newest runs, never a level-0 file without the newer
ones) and writes below every level it left alone. Its output is thus newer than every file it did not
take, exactly as each of its inputs was, and among its inputs it applied this same order.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from mergetable.core.schema import SEQUENCE_NUMBER
from mergetable.metadata.models import DataFileMeta, FileSource


def file_age(f: DataFileMeta) -> tuple[Any, ...]:
    """Sort key putting older files first."""
    return (-f.level, f.max_sequence_number, f.min_sequence_number, f.creation_time, f.file_name)


def oldest_first(files: Iterable[DataFileMeta]) -> list[DataFileMeta]:
    return sorted(files, key=file_age)


def sequence_ordered(files: Sequence[DataFileMeta]) -> bool:
    """Whether records of one key in ``files`` (oldest first) appear in strictly ascending sequence order.

    Each level above 0 is one group (its files hold distinct keys), each level-0 file a group of its own;
    the groups' sequence ranges must ascend without overlap.
    """
    ranges: list[tuple[int, int]] = []
    for level, group in itertools.groupby(files, key=lambda f: f.level):
        members = list(group)
        if level == 0:
            ranges.extend((f.min_sequence_number, f.max_sequence_number) for f in members)
        else:
            ranges.append((min(f.min_sequence_number for f in members), max(f.max_sequence_number for f in members)))
    return all(a[1] < b[0] for a, b in itertools.pairwise(ranges))


def effective_sequence(table: pa.Table, f: DataFileMeta, snapshot_ordering: bool) -> pa.Table:
    """``table`` (read from ``f``) with its committed sequence numbers.

    ``sequence.snapshot-ordering``: records of a file a writer appended all carry the committing snapshot's
    id (stamped into the file's min/max sequence number); otherwise the file's ``sequenceOffset`` is added.
    """
    if snapshot_ordering and f.file_source is FileSource.APPEND:
        values = np.full(table.num_rows, f.min_sequence_number, dtype=np.int64)
    elif f.sequence_offset:
        values = np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64) + np.int64(f.sequence_offset)
    else:
        return table
    i = table.schema.get_field_index(SEQUENCE_NUMBER)
    return table.set_column(i, table.schema.field(i), pa.array(values, pa.int64()))


SHARED_ROWS = 64 * 1024
"""Rows of the read-only array each constant column shares (see :func:`repeated`)."""
_SHARED_VALUES = 32
_SHARED: dict[tuple[str, int], np.ndarray] = {}
_SHARED_LOCK = threading.Lock()


def repeated(value: int, n: int, type: pa.DataType) -> pa.ChunkedArray:
    """``n`` copies of ``value`` as an integer column of ``type``, uncopied: chunks that view one read-only array
    shared by every column of that value (a file's maximum sequence number stands in for the sequence numbers a
    merge need not read, the same for every row of the file; an insert's kind for the kinds of a file without
    retractions). Arrow arrays are immutable, so sharing is safe; the latest few values are kept.

    >>> repeated(7, 3, pa.int64()).to_pylist(), repeated(2, 0, pa.int8()).num_chunks
    ([7, 7, 7], 0)
    """
    dtype = np.dtype(type.to_pandas_dtype())
    cache_key = (dtype.str, value)
    with _SHARED_LOCK:
        shared = _SHARED.pop(cache_key, None)
        if shared is None:
            shared = np.full(SHARED_ROWS, value, dtype=dtype)
            shared.flags.writeable = False
        _SHARED[cache_key] = shared  # most recent last
        while len(_SHARED) > _SHARED_VALUES:
            del _SHARED[next(iter(_SHARED))]
    whole, rest = divmod(n, SHARED_ROWS)
    chunk = pa.array(shared, type)
    chunks = [chunk] * whole + ([chunk.slice(0, rest)] if rest else [])
    return pa.chunked_array(chunks, type)
