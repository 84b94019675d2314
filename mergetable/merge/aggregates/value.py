"""Value-pick aggregate functions: ``last_value``, ``last_non_null_value``, ``first_value``,
``first_non_null_value`` (legacy ``first_not_null_value``; Fluss ``*_ignore_nulls``) and the internal
``primary-key`` function.

Each picks one record's value per group, so the fold reduces to "index of the deciding record" computed
with ``np.maximum.at``/``np.minimum.at`` over the group ids, followed by one ``take``. Semantics follow
Paimon exactly, including its stateful ``first_value`` (the first add wins even when NULL; an older
record of a partial-update sequence group is adopted) and the retraction rules: ``last_value`` retracts
to NULL, ``last_non_null_value`` to NULL when the retracted value is non-null; the ``first_*`` functions
cannot retract.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from mergetable.merge.aggregates.base import (
    ADD,
    ADD_OLD,
    RESET,
    RETRACT,
    AggFunction,
    FoldInput,
    register_function,
)


class _State:
    __slots__ = ("initialized",)

    def __init__(self) -> None:
        self.initialized = False


def _non_null(fi: FoldInput) -> np.ndarray | None:
    """The non-null records (``None`` when every record is non-null)."""
    return fi.valid if fi.values.null_count else None


def _positions_except_retract(fi: FoldInput, pos: np.ndarray) -> np.ndarray:
    """``pos`` with groups whose deciding record is a RETRACT turned into NULL (-1)."""
    if fi.events is None:
        return pos
    out = pos.copy()
    hit = pos >= 0
    out[hit & (fi.ev[np.where(hit, pos, 0)] == RETRACT)] = -1
    return out


class _Pick(AggFunction):
    """Picks one record's value per group: the newest (``pick_last``) or the first added one.

    ``skip_nulls`` makes NULL inputs leave the accumulator alone (the ``*_non_null_*`` functions).
    Records without events are folded here; :meth:`fold_events` handles the others.
    """

    scalar_on_indices = True
    pick_last: ClassVar[bool] = True
    skip_nulls: ClassVar[bool] = False

    def fold(self, fi: FoldInput) -> pa.Array:
        if fi.events is None:
            candidates = _non_null(fi) if self.skip_nulls else None
            return fi.take_groups(fi.last_where(candidates) if self.pick_last else fi.first_where(candidates))
        return self.fold_events(fi)

    def fold_events(self, fi: FoldInput) -> pa.Array:
        """The fold of records that carry events."""
        raise NotImplementedError


class _Last(_Pick):
    """The newest value wins; a retraction sets NULL."""

    supports_retract = True

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        return acc if self.skip_nulls and x is None else x

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        return acc if self.skip_nulls and x is None else None


@register_function
class LastValue(_Last):
    """``last_value``: the newest value, NULL included; a retraction sets NULL."""

    name = "last_value"

    def fold_events(self, fi: FoldInput) -> pa.Array:
        return fi.take_groups(_positions_except_retract(fi, fi.last_where(fi.ev != ADD_OLD)))


@register_function
class PrimaryKey(_Last):
    """``primary-key`` (internal): returns the input, for key columns."""

    name = "primary-key"

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        return x

    def fold_events(self, fi: FoldInput) -> pa.Array:
        return fi.take_groups(fi.last_where(fi.ev != ADD_OLD))


@register_function
class LastNonNullValue(_Last):
    """``last_non_null_value`` (Fluss ``last_value_ignore_nulls``): the newest non-null value."""

    name = "last_non_null_value"
    skip_nulls = True

    def fold_events(self, fi: FoldInput) -> pa.Array:
        ev = fi.ev
        deciding = ((ev == ADD) & fi.valid) | ((ev == RETRACT) & fi.valid) | (ev == RESET)
        pos = _positions_except_retract(fi, fi.last_where(deciding))
        if fi.has(ADD_OLD):
            # agg(x, acc) fills an accumulator that is NULL at that point with an older non-null value.
            last = fi.last_where(deciding)
            filled = pos >= 0
            filled[filled] = fi.valid[pos[filled]]
            after = np.arange(fi.size, dtype=np.int64) > last[fi.gid]
            candidate = fi.first_where((ev == ADD_OLD) & fi.valid & after)
            pos = np.where(filled, pos, candidate)
        return fi.take_groups(pos)


class _First(_Pick):
    """The first added value wins, even NULL unless ``skip_nulls`` (Paimon's stateful semantics)."""

    pick_last = False

    def new_state(self) -> Any:
        return _State()

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if not state.initialized and not (self.skip_nulls and x is None):
            state.initialized = True
            return x
        return acc


@register_function
class FirstValue(_First):
    """``first_value``: the first added value (even NULL); Paimon's stateful semantics."""

    name = "first_value"

    def fold_events(self, fi: FoldInput) -> pa.Array:
        ev = fi.ev
        adds = (ev == ADD) | (ev == ADD_OLD)
        first = fi.first_where(adds)
        idx = np.arange(fi.size, dtype=np.int64)
        first_rec = first[fi.gid]
        older_after_first = (ev == ADD_OLD) & (first_rec >= 0) & (idx > first_rec)
        setting = (ev == RESET) | ((ev == ADD) & (idx == first_rec)) | older_after_first
        return fi.take_groups(fi.last_where(setting))


@register_function
class FirstNonNullValue(_First):
    """``first_non_null_value`` (legacy ``first_not_null_value``, Fluss ``first_value_ignore_nulls``)."""

    name = "first_non_null_value"
    skip_nulls = True

    def fold_events(self, fi: FoldInput) -> pa.Array:
        if fi.has(ADD_OLD):
            return self.fold_scalar(fi)
        ev = fi.ev
        first = fi.first_where((ev == ADD) & fi.valid)
        idx = np.arange(fi.size, dtype=np.int64)
        setting = (ev == RESET) | (idx == first[fi.gid])
        return fi.take_groups(fi.last_where(setting))


__all__ = ["FirstNonNullValue", "FirstValue", "LastNonNullValue", "LastValue", "PrimaryKey"]
