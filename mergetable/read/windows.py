"""Cutting a section's sorted runs into key windows, so a merge holds a few row groups per run, not a bucket.

Every run of a section is read row-group slice by row-group slice (:func:`group_slices`), in key order.
A window ends at a bound ``b`` on the first key column: the smallest last key among the runs' buffered
rows. Before the window is cut, every run loads its next slices while their smallest first key (Parquet
row-group statistics) is ``<= b``, so each run then holds all its rows with a first key ``<= b``; the
window takes exactly those rows of every run. Records of one key share the first key column, so a key is
never split between two windows, and windows come in key order: merging window after window gives the
same rows, in the same order, as merging the whole section.

A run shows its rows to windows in pieces of at most :data:`PIECE_ROWS` rows (the rest of a decoded slice
waits in its reserve, revealed while its first key is ``<= b``), so a window stays small even when one row
group holds far more rows than the window budget.

The bound is compared with statistics only for first key columns whose Parquet statistics order as Arrow
sorts them (integers, strings, dates); for other types no statistic is used and a section is one window.
A missing or truncated statistic only makes a run load earlier (never later) than needed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.metadata.models import DataFileMeta
from mergetable.read.datafile import RowGroupSlice

Load = Callable[[DataFileMeta, RowGroupSlice], pa.Table]
Piece = tuple[DataFileMeta, pa.Table]


def windowable(t: pa.DataType) -> bool:
    """Whether Parquet statistics of a first key column of type ``t`` can bound windows."""
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date32(t)


PIECE_ROWS = 64 * 1024
"""Rows a run shows a window at a time: a decoded row group larger than this waits in the run's reserve, so a
window holds about this many rows per run however large the files' row groups are."""


@dataclass
class RunCursor:
    """One sorted run: the row-group slices still to read, the rows read but held back (``reserve``, in pieces
    of :data:`PIECE_ROWS`), and the rows shown to windows but not yet merged (``buffer``)."""

    pending: deque[tuple[DataFileMeta, RowGroupSlice]]
    buffer: list[Piece] = field(default_factory=list)
    reserve: deque[Piece] = field(default_factory=deque)
    piece_rows: int = PIECE_ROWS
    least_rows: int = 1
    """Rows a run holds before a bound is chosen. With 1, a run the last window left with a few rows makes the next
    window a few rows long (cheap in memory: fewer large windows queue up); more rows even out the windows (fewer,
    so faster, merges)."""

    def load_next(self, load: Load) -> None:
        f, s = self.pending.popleft()
        table = load(f, s)
        for start in range(0, table.num_rows, self.piece_rows):
            self.reserve.append((f, table.slice(start, self.piece_rows)))

    def _show_next(self, load: Load) -> None:
        """Move the next piece from the reserve into the buffer, reading a slice first if the reserve is empty."""
        while not self.reserve and self.pending:
            self.load_next(load)
        if self.reserve:
            self.buffer.append(self.reserve.popleft())

    def fill(self, load: Load) -> None:
        """Show rows until at least ``least_rows`` are buffered or the run is exhausted."""
        while (self.reserve or self.pending) and sum(t.num_rows for _, t in self.buffer) < self.least_rows:
            self._show_next(load)

    def load_through(self, load: Load, key: str, bound: Any) -> None:
        """Show every row with a first key ``<= bound``: reserved pieces by their first key, slices still to read
        by their statistics."""
        while True:
            if self.reserve:
                if _above(self.reserve[0][1].column(key)[0].as_py(), bound):
                    return
                self.buffer.append(self.reserve.popleft())
            elif self.pending and not _above(self.pending[0][1].min_key, bound):
                self.load_next(load)
            else:
                return

    def take_through(self, key: str, bound: Any) -> list[Piece]:
        """Remove and return the buffered rows whose first key is ``<= bound`` (in key order)."""
        out: list[Piece] = []
        while self.buffer:
            f, table = self.buffer[0]
            n = _count_through(table.column(key), bound)
            if n == table.num_rows:
                out.append(self.buffer.pop(0))
                continue
            if n:
                out.append((f, table.slice(0, n)))
                self.buffer[0] = (f, table.slice(n))
            break
        return out


def _above(low: Any, bound: Any) -> bool:
    """Whether a statistic proves a slice starts above ``bound`` (unknown or incomparable: it does not)."""
    try:
        return low is not None and bool(low > bound)
    except TypeError:
        return False


def _count_through(col: pa.ChunkedArray, bound: Any) -> int:
    """Rows of an ascending column that are ``<= bound``."""
    if pa.types.is_integer(col.type):
        count = 0
        for chunk in col.chunks:  # chunk by chunk: no copy of the column
            values = chunk.to_numpy()
            if not len(values):
                continue
            if values[-1] > bound:
                return count + int(np.searchsorted(values, bound, side="right"))
            count += len(values)
        return count
    return int(pc.sum(pc.less_equal(col, pa.scalar(bound, col.type))).as_py() or 0)


def windows(cursors: Sequence[RunCursor], key: str, load: Load, bounded: bool) -> Iterator[list[Piece]]:
    """The rows of all runs, window by window (see the module docstring); ``bounded=False``: one window."""
    if not bounded:
        pieces: list[Piece] = []
        for c in cursors:
            while c.pending:
                c.load_next(load)
            pieces.extend(c.buffer)
            pieces.extend(c.reserve)
            c.buffer = []
            c.reserve.clear()
        if pieces:
            yield pieces
        return
    while True:
        for c in cursors:
            c.fill(load)
        active = [c for c in cursors if c.buffer]
        if not active:
            return
        lasts = [c.buffer[-1][1].column(key)[-1].as_py() for c in active]
        if any(v is None for v in lasts):  # a null key orders nowhere: the rest is one window
            yield from windows(cursors, key, load, False)
            return
        bound = min(lasts)
        for c in cursors:
            c.load_through(load, key, bound)
        out = [p for c in cursors for p in c.take_through(key, bound)]
        if not out:  # rows out of key order (never written so): the rest, merged as one window, is still exact
            yield from windows(cursors, key, load, False)
            return
        yield out
