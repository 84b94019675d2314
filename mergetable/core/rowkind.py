"""Row kinds (``_VALUE_KIND``): +I=0, -U=1, +U=2, -D=3, as in Paimon's RowKind."""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import SchemaError


class RowKind(IntEnum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short(self) -> str:
        return _SHORT[self]

    @property
    def is_retract(self) -> bool:
        return self in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    @classmethod
    def parse(cls, value: str | int | RowKind) -> RowKind:
        if isinstance(value, RowKind):
            return value
        if isinstance(value, int):
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
    """Vectorized ``'+I'|'-U'|'+U'|'-D'`` strings to int8 kinds; anything else is a :class:`SchemaError`."""
    values = pc.utf8_upper(pc.utf8_trim_whitespace(values))
    codes = pc.index_in(values, value_set=KIND_STRINGS)
    if codes.null_count:
        bad = pc.filter(values, pc.is_null(codes)).to_pylist()[:3]
        raise SchemaError(f"unknown row kind(s) {bad} (expected +I, -U, +U or -D)", column)
    return pc.cast(codes, pa.int8())


def kinds_to_strings(kinds: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.take(KIND_STRINGS, pc.cast(kinds, pa.int32()))


def is_retract(kinds: np.ndarray) -> np.ndarray:
    """Boolean mask of -U/-D rows for an int8 kind array."""
    return (kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.DELETE)
