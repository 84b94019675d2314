"""Group a bucket's records by key, each key's records in merge order, without per-row Python.

A :class:`Layout` numbers the keys ``0..n_groups-1`` in key order and gives every record (a *position*)
its group id. Records of one key appear in merge order (key, ``sequence.field``…, ``_SEQUENCE_NUMBER``)
when read by increasing position; positions map to physical rows through ``perm``.

Two ways to build it:

* **direct** — a single integer-like key with a dense value range, no ``sequence.field``, records
  already in sequence order (``seq_ordered`` or a non-decreasing ``_SEQUENCE_NUMBER`` column) and not a few
  ascending runs (those are merged by timsort): group ids
  come from a counting pass (``bincount`` + rank), no sort at all; positions are physical rows and the
  groups are interleaved (not contiguous).
* **sorted** — otherwise: one stable sort (LSD radix over 16-bit digits for integer keys, Arrow's sort
  for the rest); groups are contiguous runs.

Engines whose fold needs each key's records side by side call :meth:`Layout.contiguous_layout`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND
from mergetable.merge.arrays import pool_empty, raw_numpy, row_numbers, take_keyed, take_rows
from mergetable.merge.grouping import _int_view, _is_int_like, group_starts, sort_permutation

_RADIX_MAX_BITS = 48
_FEW_RUNS = 64  # at most this many descents: the values are ascending runs, merged by timsort


def stable_int_argsort(values: np.ndarray) -> np.ndarray:
    """Stable argsort of an integer array (LSD radix over 16-bit digits when the value span is small)."""
    n = len(values)
    if n < 2:
        return np.arange(n, dtype=np.int64)
    lo = int(values.min())
    span = int(values.max()) - lo
    if span == 0:
        return np.arange(n, dtype=np.int64)
    bits = span.bit_length()
    if bits > _RADIX_MAX_BITS:
        return np.argsort(values, kind="stable").astype(np.int64, copy=False)
    shifted = values.astype(np.int64, copy=False) - np.int64(lo) if lo else values.astype(np.int64, copy=False)
    order: np.ndarray | None = None
    for shift in range(0, bits, 16):
        digit = ((shifted >> shift) & 0xFFFF).astype(np.uint16)
        if order is None:
            order = np.argsort(digit, kind="stable")
        else:
            order = order[np.argsort(digit[order], kind="stable")]
    assert order is not None
    return order.astype(np.int64, copy=False)


def sorted_runs_argsort(values: np.ndarray, descents: int | None = None) -> np.ndarray:
    """Stable argsort of integers that are mostly a few ascending runs one after another (the sorted files of
    a merge): timsort merges such runs in near-linear time, where a radix sort makes every pass.
    ``descents``: :func:`_descents` of ``values`` when the caller has it."""
    descents = _descents(values) if descents is None else descents
    if descents == 0:
        return np.arange(len(values), dtype=np.int64)
    if descents <= _FEW_RUNS:
        return np.argsort(values, kind="stable").astype(np.int64, copy=False)
    return stable_int_argsort(values)


def _descents(values: np.ndarray) -> int:
    """How many times ``values`` steps down (0: ascending)."""
    return int(np.count_nonzero(values[1:] < values[:-1])) if len(values) > 1 else 0


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(arr.to_numpy(zero_copy_only=False))


_SLOT_SLACK = 1024
_SLOTS_PER_ROW = 8
"""How sparse keys may be for :func:`newest_per_key`: a slot per key value costs 5 bytes (an int32 and a mask
byte), so its span may reach 8 times the rows (a bucket of a hashed key holds a fraction of the values of its
range) and still cost less than a sort."""


def newest_per_key(
    rows: pa.Table, keys: Sequence[str], seq_fields: Sequence[str] = (), seq_ordered: bool = False
) -> np.ndarray | None:
    """Row of every key's newest record, in key order, found without sorting; ``None`` when the shortcut does not
    apply (the caller groups with :meth:`Layout.build`).

    It applies to the rows a merge concatenates from sorted files: a single integer-like key, no
    ``sequence.field``, rows in sequence order (``seq_ordered`` or a non-decreasing ``_SEQUENCE_NUMBER``),
    every chunk of the key column strictly ascending (a slice of one sorted file), and keys dense enough
    (their span at most :data:`_SLOTS_PER_ROW` times the rows). Each chunk's row numbers are then written,
    chunk after chunk, into a slot per key value, so a newer chunk overwrites an older one and the filled
    slots, read in order, are the newest rows in key order. Interleaved runs cost a sort ``log(runs)``
    passes; this is one pass.

    Example:
        >>> rows = pa.Table.from_batches([pa.record_batch({"k": [1, 3, 5]}), pa.record_batch({"k": [2, 3]})])
        >>> newest_per_key(rows, ["k"], seq_ordered=True).tolist()
        [0, 3, 4, 2]
    """
    n = rows.num_rows
    if n == 0 or len(keys) != 1 or seq_fields or not _is_int_like(rows.schema.field(keys[0]).type):
        return None
    column = rows.column(keys[0])
    if column.null_count or pa.types.is_uint64(column.type):
        return None
    if not seq_ordered:
        seq = _np(rows.column(SEQUENCE_NUMBER))
        if not bool(np.all(seq[1:] >= seq[:-1])):
            return None
    chunks = _key_chunks(column)
    longest = max(len(k) for k in chunks)
    # Large temporaries come from Arrow's pool (see pool_empty): a read merges window after window.
    ascending = pool_empty(longest, np.bool_)
    for k in chunks:
        if len(k) > 1 and not np.greater(k[1:], k[:-1], out=ascending[: len(k) - 1]).all():
            return None
    lo = min(int(k[0]) for k in chunks)
    span = max(int(k[-1]) for k in chunks) - lo + 1
    if span > _SLOTS_PER_ROW * n + _SLOT_SLACK:
        return None
    dtype = np.dtype(np.int32) if n <= np.iinfo(np.int32).max else np.dtype(np.int64)
    slot = pool_empty(span, dtype)
    slot.fill(-1)
    shifted = pool_empty(longest, np.int64)
    start = 0
    for k in chunks:
        m = len(k)
        # keys are unique within a chunk, so each assignment writes every slot at most once
        slot[np.subtract(k, np.int64(lo), out=shifted[:m])] = row_numbers(start, m, dtype)
        start += m
    if int(slot.min()) >= 0:  # every key value of the span is present (a dense key): the slots are the rows
        return slot
    filled = np.flatnonzero(np.greater_equal(slot, 0, out=pool_empty(span, np.bool_)))
    return np.take(slot, filled, out=pool_empty(len(filled), dtype))


def _key_chunks(column: pa.ChunkedArray) -> list[np.ndarray]:
    """The non-empty chunks of a null-free key column as integers in key order (integers: uncopied)."""
    t = column.type
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        return [raw_numpy(c) for c in column.chunks if len(c)]
    key = _int_view(column)
    bounds = np.cumsum([0] + [len(c) for c in column.chunks])
    return [key[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def group_last_where(gid: np.ndarray, n_groups: int, mask: np.ndarray | None) -> np.ndarray:
    """Per group: the index of its last record with ``mask`` set (-1 when none); ``gid`` = group of each record."""
    idx = np.arange(len(gid), dtype=np.int64)
    if mask is not None:
        idx = np.where(mask, idx, -1)
    out = np.full(n_groups, -1, dtype=np.int64)
    np.maximum.at(out, gid, idx)
    return out


def group_first_where(gid: np.ndarray, n_groups: int, mask: np.ndarray | None) -> np.ndarray:
    """Per group: the index of its first record with ``mask`` set (-1 when none)."""
    m = len(gid)
    idx = np.arange(m, dtype=np.int64)
    if mask is not None:
        idx = np.where(mask, idx, m)
    out = np.full(n_groups, m, dtype=np.int64)
    np.minimum.at(out, gid, idx)
    out[out == m] = -1
    return out


@dataclass(frozen=True)
class Layout:
    """Records grouped by key (see the module docstring).

    Attributes:
        rows: the records as given to the merge function.
        perm: physical row of every position, or ``None`` when positions are physical rows.
        gid: group id (key number, in key order) of every position.
        n_groups: number of distinct keys.
        contiguous: whether every group occupies a contiguous range of positions.
    """

    rows: pa.Table
    perm: np.ndarray | None
    group_ids: np.ndarray | None
    n_groups: int
    contiguous: bool

    @cached_property
    def gid(self) -> np.ndarray:
        """Group id of every position (for a sorted layout made lazily from the group sizes)."""
        if self.group_ids is not None:
            return self.group_ids
        return np.repeat(np.arange(self.n_groups, dtype=np.int64), self.sizes)

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        rows: pa.Table,
        keys: Sequence[str],
        seq_fields: Sequence[str] = (),
        seq_descending: bool = False,
        seq_ordered: bool = False,
    ) -> Layout:
        """Group ``rows`` by ``keys``; each key's records ordered by (seq fields, ``_SEQUENCE_NUMBER``)."""
        n = rows.num_rows
        if n == 0:
            return cls(rows, None, np.zeros(0, dtype=np.int64), 0, True)
        if len(keys) == 1 and not seq_fields and _is_int_like(rows.schema.field(keys[0]).type):
            key = _int_view(rows.column(keys[0]))
            ordered = seq_ordered
            if not ordered:
                seq = _np(rows.column(SEQUENCE_NUMBER))
                ordered = bool(np.all(seq[1:] >= seq[:-1]))
            if ordered:
                # Sorted runs one after another (a merge's files): timsort merges them faster than a counting
                # pass groups them, and leaves every key's records side by side.
                descents = _descents(key)
                direct = None if descents <= _FEW_RUNS else cls._direct(rows, key)
                if direct is not None:
                    return direct
                perm = sorted_runs_argsort(key, descents)
            else:
                perm = np.lexsort((_np(rows.column(SEQUENCE_NUMBER)), key)).astype(np.int64, copy=False)
            skey = key[perm]
            change = np.empty(n, dtype=bool)
            change[0] = True
            np.not_equal(skey[1:], skey[:-1], out=change[1:])
            return cls._from_sorted(rows, perm, np.flatnonzero(change))
        perm = sort_permutation(rows, keys, seq_fields, seq_descending, seq_ordered)
        sorted_keys = [pc.take(rows.column(k), pa.array(perm)) for k in keys]
        return cls._from_sorted(rows, perm, group_starts(sorted_keys))

    @classmethod
    def _direct(cls, rows: pa.Table, key: np.ndarray) -> Layout | None:
        n = len(key)
        lo = int(key.min())
        span = int(key.max()) - lo
        if span > 2 * n + 1024:
            return None
        offset = key - np.int64(lo) if lo else key.astype(np.int64, copy=False)
        counts = np.bincount(offset, minlength=span + 1)
        present = counts > 0
        rank = np.cumsum(present, dtype=np.int64) - 1
        gid = rank[offset]
        n_groups = int(rank[-1]) + 1
        contiguous = bool(np.all(gid[1:] >= gid[:-1]))
        layout = cls(rows, None, gid, n_groups, contiguous)
        object.__setattr__(layout, "sizes", counts[present].astype(np.int64))
        return layout

    @classmethod
    def _from_sorted(cls, rows: pa.Table, perm: np.ndarray, starts: np.ndarray) -> Layout:
        starts = starts.astype(np.int64, copy=False)
        ends = np.empty(len(starts), dtype=np.int64)
        ends[:-1] = starts[1:]
        ends[-1:] = len(perm)
        layout = cls(rows, perm, None, len(starts), True)
        object.__setattr__(layout, "starts", starts)
        object.__setattr__(layout, "ends", ends)
        object.__setattr__(layout, "sizes", ends - starts)
        return layout

    # -- derived arrays ---------------------------------------------------------------------------
    @property
    def num_positions(self) -> int:
        """Number of records."""
        return self.rows.num_rows if self.perm is None else len(self.perm)

    @cached_property
    def sizes(self) -> np.ndarray:
        """Number of records of every group."""
        return np.bincount(self.gid, minlength=self.n_groups).astype(np.int64)

    @cached_property
    def starts(self) -> np.ndarray:
        """First position of every group (only meaningful for contiguous layouts)."""
        if self.contiguous:
            return (np.cumsum(self.sizes) - self.sizes).astype(np.int64)
        return self.first_pos

    @cached_property
    def ends(self) -> np.ndarray:
        """One past the last position of every group (contiguous layouts)."""
        return (self.starts + self.sizes).astype(np.int64)

    @cached_property
    def last_pos(self) -> np.ndarray:
        """Position of every group's newest record."""
        if self.contiguous:
            return self.ends - 1
        return self.last_where(None)

    @cached_property
    def first_pos(self) -> np.ndarray:
        """Position of every group's oldest record."""
        if self.contiguous:
            return self.starts
        out = np.full(self.n_groups, self.num_positions, dtype=np.int64)
        np.minimum.at(out, self.gid, np.arange(self.num_positions, dtype=np.int64))
        return out

    @cached_property
    def rank_in_group(self) -> np.ndarray:
        """0-based index of every position among its group's records."""
        if self.contiguous:
            return np.arange(self.num_positions, dtype=np.int64) - self.starts[self.gid]
        lay = self.contiguous_layout()
        out = np.empty(self.num_positions, dtype=np.int64)
        assert lay.perm_from is not None
        out[lay.perm_from] = lay.rank_in_group
        return out

    def last_where(self, mask: np.ndarray | None) -> np.ndarray:
        """Position of every group's last record with ``mask`` set (-1 when none)."""
        return group_last_where(self.gid, self.n_groups, mask)

    def first_where(self, mask: np.ndarray | None) -> np.ndarray:
        """Position of every group's first record with ``mask`` set (-1 when none)."""
        return group_first_where(self.gid, self.n_groups, mask)

    def any_where(self, mask: np.ndarray) -> np.ndarray:
        """Per group: whether any of its records has ``mask`` set."""
        return np.bincount(self.gid[mask], minlength=self.n_groups) > 0

    def phys(self, positions: np.ndarray) -> np.ndarray:
        """Physical row indices of ``positions``."""
        return positions if self.perm is None else self.perm[positions]

    def take(self, positions: np.ndarray) -> pa.Table:
        """The rows at ``positions``: ``rows`` itself, uncopied, when that is every row in order (input already
        sorted, one record per key)."""
        return take_rows(self.rows, self.phys(positions))

    # -- column access ----------------------------------------------------------------------------
    def column(self, name: str) -> pa.Array:
        """A column of ``rows`` in position order."""
        col = self.rows.column(name)
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if self.perm is None:
            return arr
        return arr.take(pa.array(self.perm))

    def numpy(self, name: str) -> np.ndarray:
        """A null-free numeric column in position order, as numpy."""
        arr = _np(self.rows.column(name))
        return arr if self.perm is None else arr[self.perm]

    @cached_property
    def kinds(self) -> np.ndarray:
        """``_VALUE_KIND`` of every position."""
        return self.numpy(VALUE_KIND).astype(np.int8, copy=False)

    # -- re-layout ----------------------------------------------------------------------------------
    perm_from: np.ndarray | None = None
    """For a layout made by :meth:`contiguous_layout`: the position in the original layout of each position."""

    def contiguous_layout(self) -> Layout:
        """The same groups with every group's records side by side (stable; merge order kept)."""
        if self.contiguous:
            return self
        order = stable_int_argsort(self.gid)
        perm = order if self.perm is None else self.perm[order]
        lay = Layout(self.rows, perm, self.gid[order], self.n_groups, True)
        object.__setattr__(lay, "perm_from", order)
        object.__setattr__(lay, "sizes", self.sizes)
        return lay

    def restrict(self, groups: np.ndarray) -> tuple[Layout, np.ndarray]:
        """A layout of the records of the selected groups only (boolean mask over groups).

        Returns the new layout and, for each of its positions, the position in this layout.
        Group ids are renumbered in key order.
        """
        keep = groups[self.gid]
        positions = np.flatnonzero(keep).astype(np.int64)
        renumber = np.cumsum(groups, dtype=np.int64) - 1
        gid = renumber[self.gid[positions]]
        perm = positions if self.perm is None else self.perm[positions]
        return Layout(self.rows, perm, gid, int(groups.sum()), self.contiguous), positions


def empty_like(rows: pa.Table) -> pa.Table:
    """A zero-row table with the schema of ``rows``."""
    return rows.slice(0, 0)


__all__ = ["Layout", "newest_per_key", "stable_int_argsort", "take_keyed", "take_rows"]
