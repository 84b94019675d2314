"""Translating a polars predicate into mergetable's DNF filter, where it can be done exactly.

The predicate polars pushes into an IO source is read from its serialized tree. Comparisons (= != < <= > >=)
of a column with a constant, ``is_in`` and ``is_between`` become DNF predicates; AND keeps the conjuncts that
translate (a weaker filter), OR translates only when both sides do. Constants are evaluated by polars itself
and must convert exactly to the column's Arrow type. Float columns are never pushed (NaN orders differently).
The source still applies the whole polars predicate to the rows it returns, so what is pushed only has to
keep every row the predicate keeps; it prunes files and reads.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mergetable.core.predicates import Conjunct, Predicate

if TYPE_CHECKING:
    import polars as pl

Tree = Any
DNF = list[Conjunct]
_COMPARISONS = {"Eq": "=", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_MAX_DNF_TERMS = 64


class Untranslatable(Exception):
    """A part of a predicate that has no exact DNF form."""


def to_dnf(predicate: pl.Expr, schema: pa.Schema) -> DNF | None:
    """The DNF of the parts of ``predicate`` that translate exactly, or None when none does.

    >>> import polars as pl, pyarrow as pa
    >>> schema = pa.schema([("id", pa.int64()), ("v", pa.float64())])
    >>> to_dnf((pl.col("id") > 3) & (pl.col("v") < 1.0), schema)
    [[('id', '>', 3)]]
    """
    tree = json.loads(predicate.meta.serialize(format="json"))
    stripped = _strip_dynamic(tree)
    if stripped is None:
        return None
    try:
        dnf = _translate(stripped, schema)
    except Untranslatable:
        return None
    return dnf or None


def applicable(predicate: pl.Expr) -> pl.Expr | None:
    """``predicate`` without polars' dynamic-predicate hints (which cannot be evaluated), None if only hints."""
    tree = json.loads(predicate.meta.serialize(format="json"))
    stripped = _strip_dynamic(tree)
    if stripped is None or stripped is tree:
        return None if stripped is None else predicate
    return _expr(stripped)


# -- tree walking -------------------------------------------------------------------------------------
def _is_dynamic(node: Tree) -> bool:
    display = node.get("Display") if isinstance(node, dict) else None
    return isinstance(display, dict) and str(display.get("fmt_str", "")).startswith("dynamic_pred")


def _strip_dynamic(tree: Tree) -> Tree | None:
    """Remove dynamic-predicate conjuncts (slice/top-k hints of polars' optimizer) from a top-level AND."""
    if _is_dynamic(tree):
        return None
    binary = tree.get("BinaryExpr") if isinstance(tree, dict) else None
    if isinstance(binary, dict) and binary.get("op") == "And":
        left, right = _strip_dynamic(binary["left"]), _strip_dynamic(binary["right"])
        if left is None or right is None:
            return right if left is None else left
        if left is binary["left"] and right is binary["right"]:
            return tree
        return {"BinaryExpr": {**binary, "left": left, "right": right}}
    return tree


def _expr(tree: Tree) -> pl.Expr:
    import polars as pl

    return pl.Expr.deserialize(io.BytesIO(json.dumps(tree).encode()), format="json")


def _and(a: DNF, b: DNF) -> DNF:
    if not a:
        return b
    if not b:
        return a
    out = [[*x, *y] for x in a for y in b]
    if len(out) > _MAX_DNF_TERMS:
        raise Untranslatable("too many terms")
    return out


def _translate(tree: Tree, schema: pa.Schema) -> DNF:
    """DNF implied by ``tree``; ``[]`` means "no restriction" (only allowed under AND)."""
    if not isinstance(tree, dict) or len(tree) != 1:
        raise Untranslatable(str(tree)[:80])
    [(kind, body)] = tree.items()
    if kind == "BinaryExpr":
        op = body["op"]
        if op == "And":
            return _and(_translate_or_empty(body["left"], schema), _translate_or_empty(body["right"], schema))
        if op == "Or":
            left, right = _translate(body["left"], schema), _translate(body["right"], schema)
            if not left or not right:
                raise Untranslatable("an OR side restricts nothing")
            return [*left, *right]
        if op in _COMPARISONS:
            return [[_comparison(_COMPARISONS[op], body["left"], body["right"], schema)]]
        raise Untranslatable(op)
    if kind == "Function":
        function = body.get("function", {}).get("Boolean")
        inputs = body.get("input", [])
        if isinstance(function, dict) and "IsIn" in function and len(inputs) == 2:
            column, field = _column(inputs[0], schema)
            values = _constant(inputs[1])
            values = values[0] if len(values) == 1 and isinstance(values[0], list) else values
            return [[(column, "in", [_exact(v, field) for v in values])]]
        if isinstance(function, dict) and "IsBetween" in function and len(inputs) == 3:
            closed = function["IsBetween"].get("closed", "Both")
            low = _comparison(">=" if closed in ("Both", "Left") else ">", inputs[0], inputs[1], schema)
            high = _comparison("<=" if closed in ("Both", "Right") else "<", inputs[0], inputs[2], schema)
            return [[low, high]]
    raise Untranslatable(kind)


def _translate_or_empty(tree: Tree, schema: pa.Schema) -> DNF:
    try:
        return _translate(tree, schema)
    except Untranslatable:
        return []


def _comparison(op: str, left: Tree, right: Tree, schema: pa.Schema) -> Predicate:
    if isinstance(left, dict) and "Column" in left:
        column, field = _column(left, schema)
        values = _constant(right)
    elif isinstance(right, dict) and "Column" in right:
        column, field = _column(right, schema)
        values, op = _constant(left), _FLIPPED[op]
    else:
        raise Untranslatable("no column side")
    if len(values) != 1:
        raise Untranslatable("not a single constant")
    return (column, op, _exact(values[0], field))


def _column(tree: Tree, schema: pa.Schema) -> tuple[str, pa.Field]:
    if not isinstance(tree, dict) or not isinstance(tree.get("Column"), str):
        raise Untranslatable("not a plain column")
    name = tree["Column"]
    if name not in schema.names:
        raise Untranslatable(name)
    field = schema.field(name)
    if pa.types.is_floating(field.type) or pa.types.is_nested(field.type):
        raise Untranslatable(f"column {name} is not pushed")
    return name, field


def _constant(tree: Tree) -> list[Any]:
    """The values of a column-free expression, evaluated by polars."""
    import polars as pl

    try:
        expr = _expr(tree)
        if expr.meta.root_names():
            raise Untranslatable("not a constant")
        values: list[Any] = pl.select(expr).to_series().to_list()
    except Untranslatable:
        raise
    except Exception as exc:  # whatever polars refuses to evaluate alone is not a constant
        raise Untranslatable(str(exc)) from None
    return values


def _exact(value: Any, field: pa.Field) -> Any:
    """``value`` as the column's type holds it, when it converts exactly (no null, no rounding)."""
    if value is None:
        raise Untranslatable("null constant")
    try:
        scalar = pa.scalar(value, field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        raise Untranslatable(f"{value!r} is not a {field.type}") from None
    out = scalar.as_py()
    if out != value:
        raise Untranslatable(f"{value!r} changes as a {field.type}")
    return out
