"""Row kinds (``_VALUE_KIND``): +I=0, -U=1, +U=2, -D=3, as in Paimon's RowKind.

Example:
    >>> RowKind.parse("-d"), RowKind.DELETE.short, RowKind.DELETE.is_retract
    (<RowKind.DELETE: 3>, '-D', True)
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import SchemaError


class RowKind(IntEnum):
    """The kind of a change row; the integer is what ``_VALUE_KIND`` stores.

    Example:
        >>> int(RowKind.UPDATE_AFTER), RowKind(1).short
        (2, '-U')
    """

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short(self) -> str:
        """The short spelling: ``+I``, ``-U``, ``+U`` or ``-D``.

        Example:
            >>> [k.short for k in RowKind]
            ['+I', '-U', '+U', '-D']
        """
        return _SHORT[self]

    @property
    def is_retract(self) -> bool:
        """Whether the kind retracts a row (-U or -D).

        Example:
            >>> [k.short for k in RowKind if k.is_retract]
            ['-U', '-D']
        """
        return self in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    @classmethod
    def parse(cls, value: str | int | RowKind) -> RowKind:
        """A row kind from its short spelling (any case, surrounding blanks ignored), integer or itself.

        Args:
            value: ``"+I"``, ``"-U"``, ``"+U"``, ``"-D"``, 0 to 3, or a :class:`RowKind`.

        Returns:
            The row kind.

        Raises:
            SchemaError: a string that is no row kind.
            SchemaError: an integer outside 0 to 3.

        Example:
            >>> RowKind.parse(" +u "), RowKind.parse(3)
            (<RowKind.UPDATE_AFTER: 2>, <RowKind.DELETE: 3>)
            >>> RowKind.parse("x")
            Traceback (most recent call last):
            ...
            mergetable.core.errors.SchemaError: unknown row kind 'x' (expected +I, -U, +U or -D)
        """
        if isinstance(value, RowKind):
            return value
        if isinstance(value, int):
            if not 0 <= value <= 3:
                raise SchemaError(f"unknown row kind {value} (expected 0 to 3: +I, -U, +U or -D)")
            return cls(value)
        try:
            return _FROM_SHORT[value.strip().upper()]
        except KeyError:
            raise SchemaError(f"unknown row kind '{value}' (expected +I, -U, +U or -D)") from None


ROW_KIND_COLUMN = "_row_kind"
"""The column that carries each change row's kind (``+I`` ``-U`` ``+U`` ``-D``) in change data."""

_SHORT = {RowKind.INSERT: "+I", RowKind.UPDATE_BEFORE: "-U", RowKind.UPDATE_AFTER: "+U", RowKind.DELETE: "-D"}
_FROM_SHORT = {v: k for k, v in _SHORT.items()}
KIND_STRINGS = pa.array(["+I", "-U", "+U", "-D"], pa.string())


def kinds_from_strings(values: pa.Array | pa.ChunkedArray, column: str = "row kind") -> pa.Array:
    """Vectorized: ``+I``/``-U``/``+U``/``-D`` strings (any case, blanks ignored) to int8 kinds.

    Args:
        values: a string array.
        column: the column the strings come from, named in the error.

    Returns:
        An int8 array of :class:`RowKind` values.

    Raises:
        SchemaError: a value (NULL included) is no row kind; names ``column`` and up to three values.

    Example:
        >>> kinds_from_strings(pa.array(["+I", "-d", " +U"])).to_pylist()
        [0, 3, 2]
    """
    values = pc.utf8_upper(pc.utf8_trim_whitespace(values))
    codes = pc.index_in(values, value_set=KIND_STRINGS)
    if codes.null_count:
        bad = pc.filter(values, pc.is_null(codes)).to_pylist()[:3]
        raise SchemaError(f"unknown row kind(s) {bad} (expected +I, -U, +U or -D)", column)
    return pc.cast(codes, pa.int8())


def kinds_to_strings(kinds: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Vectorized: int8 kinds to their short spellings (the inverse of :func:`kinds_from_strings`).

    Example:
        >>> kinds_to_strings(pa.array([0, 1, 2, 3], pa.int8())).to_pylist()
        ['+I', '-U', '+U', '-D']
    """
    return pc.take(KIND_STRINGS, pc.cast(kinds, pa.int32()))


def is_retract(kinds: np.ndarray) -> np.ndarray:
    """Boolean mask of the -U/-D rows of an int8 kind array.

    Example:
        >>> is_retract(np.array([0, 1, 2, 3], dtype=np.int8)).tolist()
        [False, True, False, True]
    """
    return (kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.DELETE)


def any_retract(kinds: pa.Array | pa.ChunkedArray) -> bool:
    """Whether an int8 ``_VALUE_KIND`` column holds a -U or -D row, found by Arrow without copying it out.

    Example:
        >>> any_retract(pa.array([0, 2, 0], pa.int8())), any_retract(pa.chunked_array([[0], [3]], pa.int8()))
        (False, True)
    """
    if len(kinds) == 0:
        return False
    bounds = pc.min_max(kinds)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if hi == RowKind.INSERT or lo == hi == RowKind.UPDATE_AFTER:
        return False
    retract = pc.or_(pc.equal(kinds, int(RowKind.UPDATE_BEFORE)), pc.equal(kinds, int(RowKind.DELETE)))
    return bool(pc.any(retract).as_py())
