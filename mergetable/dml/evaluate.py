"""Evaluating the ``pyarrow.compute.Expression`` conditions and assignments of delete, update and merge.

Expressions are evaluated vectorized by Acero, single-threaded so that the rows keep their order. An
assignment is a Python literal (coerced to the column's type) or an expression over the rows' columns; its
result is cast to the column's type as Delta casts assignments. Errors name the column or argument at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero

from mergetable.core.errors import SchemaError
from mergetable.write.input import cast_column

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)
_CAST_HINT = "convert it in the expression, e.g. pc.field('x').cast(pa.int64()) or pc.round(pc.field('x'), 2)"


def is_expression(value: Any) -> bool:
    return isinstance(value, pc.Expression)


def check_condition(condition: Any, argument: str) -> pc.Expression | None:
    """``condition`` if it is None or a pyarrow Expression, else a :class:`SchemaError` naming ``argument``."""
    if condition is None or is_expression(condition):
        return condition
    raise SchemaError(
        f"argument '{argument}' must be a pyarrow.compute.Expression (e.g. pc.field('v') > 1) or None, "
        f"got {type(condition).__name__}"
    )


def literal(value: Any, t: pa.DataType, column: str) -> pc.Expression:
    """A Python literal as an expression of type ``t`` (:class:`SchemaError` naming ``column`` if it does not fit)."""
    try:
        return pc.scalar(pa.scalar(value, type=t))
    except (*_ARROW_ERRORS, TypeError, ValueError, OverflowError):
        raise SchemaError(f"the value {value!r} is not a valid {t}", column) from None


def project(table: pa.Table, exprs: Mapping[str, pc.Expression], what: str) -> pa.Table:
    """``{name: expression}`` evaluated over ``table``'s rows, in order (errors name the output column)."""
    if not exprs:
        return table.select([])
    names = list(exprs)
    try:
        return _run(table, [exprs[n] for n in names], names)
    except _ARROW_ERRORS:
        for name in names:  # find the culprit for the message
            try:
                _run(table.slice(0, 0), [exprs[name]], [name])
            except _ARROW_ERRORS as exc:
                raise SchemaError(f"{what}: cannot evaluate {exprs[name]}: {_first_line(exc)}", name) from None
        raise


def _run(table: pa.Table, exprs: list[pc.Expression], names: list[str]) -> pa.Table:
    decl = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions(exprs, names)),
        ]
    )
    return decl.to_table(use_threads=False)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def masks(table: pa.Table, conditions: Mapping[str, pc.Expression], what: str) -> dict[str, np.ndarray]:
    """Each boolean condition evaluated over ``table`` as a numpy mask (NULL does not hold)."""
    out = project(table, conditions, what)
    result: dict[str, np.ndarray] = {}
    for name in conditions:
        col = out.column(name)
        if not pa.types.is_boolean(col.type) and not pa.types.is_null(col.type):
            raise SchemaError(f"{what}: the condition {conditions[name]} is not boolean (it is {col.type})", name)
        filled = pc.fill_null(col.cast(pa.bool_()), False)
        result[name] = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)
    return result


def cast_columns(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """``table``'s columns cast to the types of ``schema``'s fields of the same names, as a write casts its data
    (:func:`mergetable.write.input.cast_column`): a conversion that would change a value is an error."""
    arrays = []
    for f in schema:
        arrays.append(cast_column(table.column(f.name), f.type, f.name, hint=_CAST_HINT, what=what))
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in schema]))


def assignment(value: Any, t: pa.DataType, column: str) -> pc.Expression:
    """An assigned value (expression or literal) as an expression."""
    return value if is_expression(value) else literal(value, t, column)


__all__ = ["assignment", "cast_columns", "check_condition", "is_expression", "literal", "masks", "project"]
