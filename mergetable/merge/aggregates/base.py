"""Aggregate functions: the fold protocol shared by the aggregation and partial-update engines.

An engine turns every value column into a :class:`FoldInput`: the column's participating records
(value + event), each tagged with its key's group id, records of one group in fold order. An
:class:`AggFunction` folds them into one accumulator per group, starting from NULL, exactly like
Paimon's ``FieldAggregator`` driven record by record:

* ``ADD``      — ``acc = agg(acc, x)`` (+I / +U records);
* ``ADD_OLD``  — ``acc = agg(x, acc)`` (Paimon's ``aggReversed``: a record older than the sequence group);
* ``RETRACT``  — ``acc = retract(acc, x)`` (-U / -D records);
* ``RESET``    — ``acc = x`` (the row is re-initialised from a record: ``remove-record-on-delete``, a
  partial-update row initialised from a leading retraction, a Fluss delete clearing the column).

Functions are vectorized over all groups at once with numpy/pyarrow; those on bitmaps, sketches and
nested collections fold each key in Python (:meth:`AggFunction.fold_scalar`). A function that cannot
retract raises :class:`~mergetable.core.errors.MergeError` with Paimon's message when a ``RETRACT``
reaches it; ``fields.<f>.ignore-retract`` makes the engine drop those events instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, TypeVar

import numpy as np
import pyarrow as pa

from mergetable.core.errors import MergeError, OptionsError, SchemaError
from mergetable.core.option_values import parse_bool, parse_int, parse_list
from mergetable.core.options import TableOptions
from mergetable.core.schema import arrow_to_type_json
from mergetable.merge.layout import group_first_where, group_last_where, stable_int_argsort

T = TypeVar("T")

ADD = 0
RETRACT = 1
RESET = 2
ADD_OLD = 3


@dataclass
class FoldInput:
    """One column's records to fold, grouped by key (see the module docstring).

    Attributes:
        column: the column name (for error messages).
        n_groups: number of groups (result length).
        gid: group id of every record; records of one group appear in fold order.
        values: the records' values.
        events: ``ADD``/``RETRACT``/``RESET``/``ADD_OLD`` per record, or ``None`` for all ``ADD``.
        active: groups whose result is used (others may be skipped and never raise), or ``None``.
        contiguous: whether every group's records are side by side.
    """

    column: str
    n_groups: int
    gid: np.ndarray
    values: pa.Array
    events: np.ndarray | None = None
    active: np.ndarray | None = None
    contiguous: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def size(self) -> int:
        """Number of records."""
        return len(self.gid)

    @cached_property
    def ev(self) -> np.ndarray:
        """The events as an int8 array (all ``ADD`` when ``events`` is ``None``)."""
        if self.events is None:
            return np.zeros(self.size, dtype=np.int8)
        return self.events

    def has(self, event: int) -> bool:
        """Whether any record carries ``event``."""
        return self.events is not None and bool(np.any(self.events == event))

    def only(self, *events: int) -> bool:
        """Whether every record's event is one of ``events``."""
        if self.events is None:
            return ADD in events
        return bool(np.isin(self.events, list(events)).all())

    @cached_property
    def valid(self) -> np.ndarray:
        """Non-null mask of the values."""
        if self.values.null_count == 0:
            return np.ones(self.size, dtype=bool)
        return np.asarray(self.values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)

    def active_records(self) -> np.ndarray | None:
        """Mask of records in active groups (``None`` when all are)."""
        return None if self.active is None else self.active[self.gid]

    def any_active(self, mask: np.ndarray) -> bool:
        """Whether ``mask`` is set on any record of an active group."""
        act = self.active_records()
        return bool(np.any(mask if act is None else mask & act))

    def last_where(self, mask: np.ndarray | None) -> np.ndarray:
        """Index of every group's last record with ``mask`` set (-1 when none)."""
        return group_last_where(self.gid, self.n_groups, mask)

    def first_where(self, mask: np.ndarray | None) -> np.ndarray:
        """Index of every group's first record with ``mask`` set (-1 when none)."""
        return group_first_where(self.gid, self.n_groups, mask)

    @cached_property
    def from_last_reset(self) -> np.ndarray:
        """Records at or after their group's last ``RESET`` (all records when there is none)."""
        if not self.has(RESET):
            return np.ones(self.size, dtype=bool)
        last = self.last_where(self.ev == RESET)
        return np.arange(self.size, dtype=np.int64) >= last[self.gid]

    def segments(self) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """``(order, starts, ends)``: ``order`` (or ``None``) puts each group's records side by side."""
        order = None if self.contiguous else stable_int_argsort(self.gid)
        gid = self.gid if order is None else self.gid[order]
        sizes = np.bincount(gid, minlength=self.n_groups).astype(np.int64)
        ends = np.cumsum(sizes)
        return order, ends - sizes, ends

    def take_groups(self, positions: np.ndarray) -> pa.Array:
        """Values at ``positions`` (one per group, -1 = NULL)."""
        idx = pa.array(positions, mask=positions < 0)
        return self.values.take(idx)


class AggFunction:
    """Base class of an aggregate function bound to one column.

    Subclasses set ``name`` and ``supports_retract`` and implement :meth:`fold` (vectorized) and/or the
    scalar operations used by :meth:`fold_scalar`.
    """

    name: ClassVar[str] = "?"
    supports_retract: ClassVar[bool] = False
    #: Whether the scalar fold works on record indices (value-pick functions) rather than values.
    scalar_on_indices: ClassVar[bool] = False

    def __init__(self, column: str, type_: pa.DataType, options: FieldOptions) -> None:
        self.column = column
        self.type = type_
        self.options = options

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        """An error message when the function cannot aggregate ``t`` (``None`` when it can)."""
        return None

    # -- entry point ------------------------------------------------------------------------------
    def run(self, fi: FoldInput) -> pa.Array:
        """Fold ``fi`` (checks retraction support first)."""
        if fi.events is not None and not self.supports_retract and fi.any_active(fi.events == RETRACT):
            raise MergeError(unsupported_retraction(self.name, self.column))
        if fi.size == 0:
            return pa.nulls(fi.n_groups, self.type)
        return self.fold(fi)

    def fold(self, fi: FoldInput) -> pa.Array:
        """Vectorized fold; the default folds every key in Python."""
        return self.fold_scalar(fi)

    # -- scalar fold ------------------------------------------------------------------------------
    def new_state(self) -> Any:
        """Per-key state of stateful functions (Paimon's ``reset()``)."""
        return None

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        """Paimon's ``agg(accumulator, input)`` on Python values."""
        raise NotImplementedError

    def agg_old(self, acc: Any, x: Any, state: Any) -> Any:
        """``aggReversed``: fold a record that is older than the accumulator."""
        return self.agg(x, acc, state)

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        """Paimon's ``retract(accumulator, input)``; functions that cannot retract raise."""
        raise MergeError(unsupported_retraction(self.name, self.column))

    def to_arrow(self, results: list[Any]) -> pa.Array:
        """Per-group Python results as an array of the column's type."""
        try:
            return pa.array(results, type=self.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise MergeError(f"column '{self.column}': {self.name} produced an invalid value: {exc}") from None

    def fold_scalar(self, fi: FoldInput) -> pa.Array:
        """Fold every active group record by record in Python."""
        order, starts, ends = fi.segments()
        events = fi.ev if order is None else fi.ev[order]
        if self.scalar_on_indices:
            idx = np.arange(fi.size, dtype=np.int64) if order is None else order
            valid = fi.valid[idx]
            values: list[Any] = [int(i) if v else None for i, v in zip(idx.tolist(), valid.tolist())]
        else:
            vals = fi.values if order is None else fi.values.take(pa.array(order))
            values = vals.to_pylist()
        out: list[Any] = [None] * fi.n_groups
        ev = events.tolist()
        active = None if fi.active is None else fi.active.tolist()
        for g, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
            if s == e or (active is not None and not active[g]):
                continue
            state = self.new_state()
            acc: Any = None
            for i in range(s, e):
                kind = ev[i]
                if kind == ADD:
                    acc = self.agg(acc, values[i], state)
                elif kind == ADD_OLD:
                    acc = self.agg_old(acc, values[i], state)
                elif kind == RETRACT:
                    acc = self.retract(acc, values[i], state)
                else:
                    acc = values[i]
            out[g] = acc
        if self.scalar_on_indices:
            positions = np.array([-1 if p is None else p for p in out], dtype=np.int64)
            return fi.take_groups(positions)
        return self.to_arrow(out)


class NullSkipping(AggFunction):
    """A function with Paimon's null rule: ``agg(null, x) = x`` and ``agg(acc, null) = acc``.

    Subclasses implement :meth:`combine` for two non-null values.
    """

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        return self.combine(acc, x)

    def combine(self, acc: Any, x: Any) -> Any:
        """The accumulator after adding ``x`` (both non-null)."""
        raise NotImplementedError


def wrong_type(label: str, expected: str, t: pa.DataType, end: str = ".") -> str:
    """Paimon's message for a column type a function cannot aggregate."""
    return f"Data type for {label} column must be '{expected}' but was '{paimon_type_name(t)}'{end}"


def considered_records(fi: FoldInput) -> np.ndarray | None:
    """Records that feed a null-skipping accumulator: non-null and at/after the group's last RESET.

    ``None`` means every record.
    """
    mask = fi.valid if fi.values.null_count else None
    if fi.events is not None and not bool(fi.from_last_reset.all()):
        mask = fi.from_last_reset if mask is None else mask & fi.from_last_reset
    return mask


def groups_with(fi: FoldInput, records: np.ndarray | None) -> np.ndarray:
    """Per group: whether any of the selected records belongs to it."""
    gid = fi.gid if records is None else fi.gid[records]
    return np.bincount(gid, minlength=fi.n_groups) > 0


def unsupported_retraction(name: str, column: str) -> str:
    """Paimon's message for a retraction reaching a function that cannot retract."""
    return (
        f"Aggregate function '{name}' does not support retraction, If you allow this function to ignore "
        f"retraction messages, you can configure 'fields.{column}.ignore-retract'='true'."
    )


def paimon_type_name(t: pa.DataType) -> str:
    """The Paimon spelling of an Arrow type (``STRING``, ``DECIMAL(10, 2)``, ``ARRAY<INT>`` …)."""
    return _type_name(arrow_to_type_json(t))


def _type_name(tj: Any) -> str:
    if isinstance(tj, str):
        return tj
    head = str(tj["type"])
    base = head.removesuffix(" NOT NULL")
    suffix = head[len(base) :]
    if base == "ARRAY":
        return f"ARRAY<{_type_name(tj['element'])}>{suffix}"
    if base == "MAP":
        return f"MAP<{_type_name(tj['key'])}, {_type_name(tj['value'])}>{suffix}"
    if base == "ROW":
        inner = ", ".join(f"{f['name']} {_type_name(f['type'])}" for f in tj["fields"])
        return f"ROW<{inner}>{suffix}"
    return head


class FieldOptions:
    """The ``fields.<column>.*`` options of one column, parsed on demand with errors naming the key."""

    def __init__(self, column: str, opts: TableOptions) -> None:
        self.column = column
        self._opts = opts

    def key(self, suffix: str) -> str:
        """The full option key ``fields.<column>.<suffix>``."""
        return f"fields.{self.column}.{suffix}"

    def raw(self, suffix: str) -> str | None:
        """The option's string value, if set."""
        return self._opts.field_option(self.column, suffix)

    def _parsed(self, suffix: str, default: T, parse: Callable[[str], T]) -> T:
        """An option parsed by ``parse``; a malformed value is an error naming the option."""
        value = self.raw(suffix)
        if value is None:
            return default
        try:
            return parse(value)
        except ValueError as exc:
            raise OptionsError(self.key(suffix), str(exc)) from None

    def flag(self, suffix: str) -> bool:
        """A boolean option (default false)."""
        return self._parsed(suffix, False, parse_bool)

    def integer(self, suffix: str, default: int) -> int:
        """An integer option."""
        return self._parsed(suffix, default, parse_int)

    def names(self, suffix: str) -> tuple[str, ...]:
        """A comma-separated list option."""
        value = self.raw(suffix)
        return () if value is None else parse_list(value)


FunctionClass = type[AggFunction]
_FUNCTIONS: dict[str, FunctionClass] = {}
#: Fluss and legacy spellings of Paimon's function names.
ALIASES = {
    "last_value_ignore_nulls": "last_non_null_value",
    "first_value_ignore_nulls": "first_non_null_value",
    "first_not_null_value": "first_non_null_value",
    "string_agg": "listagg",
}


def register_function(cls: FunctionClass) -> FunctionClass:
    """Class decorator: make an aggregate function available by its ``name``."""
    _FUNCTIONS[cls.name] = cls
    return cls


def function_names() -> list[str]:
    """Every accepted ``fields.<f>.aggregate-function`` name: Paimon's names, then the aliases.

    Example:
        >>> import mergetable.merge
        >>> names = function_names()
        >>> "sum" in names, "string_agg" in names, "primary-key" in names
        (True, True, False)
    """
    return sorted(n for n in _FUNCTIONS if n != "primary-key") + sorted(ALIASES)


def resolve_function(name: str, option: str) -> FunctionClass:
    """The class of a function name (aliases resolved). Unknown names raise :class:`OptionsError`."""
    canonical = ALIASES.get(name.strip().lower(), name.strip().lower())
    try:
        return _FUNCTIONS[canonical]
    except KeyError:
        raise OptionsError(
            option,
            f"Could not find any factory for identifier '{name}' that implements 'FieldAggregatorFactory'. "
            f"Supported functions: {', '.join(function_names())}.",
        ) from None


def create_function(name: str, column: str, type_: pa.DataType, opts: TableOptions, option: str) -> AggFunction:
    """Build the function ``name`` for ``column`` (type and option checks raise at create time)."""
    cls = resolve_function(name, option)
    problem = cls.check_type(column, type_)
    if problem is not None:
        raise SchemaError(problem, column)
    return cls(column, type_, FieldOptions(column, opts))


Vectorized = Callable[[FoldInput], pa.Array]

__all__ = [
    "ADD",
    "ADD_OLD",
    "ALIASES",
    "RESET",
    "RETRACT",
    "AggFunction",
    "FieldOptions",
    "FoldInput",
    "NullSkipping",
    "considered_records",
    "create_function",
    "function_names",
    "groups_with",
    "paimon_type_name",
    "register_function",
    "resolve_function",
    "unsupported_retraction",
    "wrong_type",
]
