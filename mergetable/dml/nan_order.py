"""Spark's order of NaN in the comparisons of a ``pyarrow.compute`` expression (merge conditions).

pyarrow compares floating-point values as IEEE 754 does: NaN is equal to nothing, itself included, and
neither smaller nor larger than any number. Spark and Delta order NaN as the largest value: ``NaN = NaN``
holds and NaN is greater than every number, ``+inf`` included; the DNF filters of ``read``/``delete``/
``update`` already compare so (:mod:`mergetable.core.filters`). :func:`spark_nan_order` rewrites each
comparison (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``) of an expression whose operands are floating point
into one with those semantics; everything else, nulls included, is left as it is.

An expression is opaque in pyarrow's Python API; its tree is read from the form pyarrow pickles it in:
an Arrow IPC file whose schema metadata lists the nodes in prefix order (``call``/``end`` around a call's
arguments, ``field_ref``, ``nested_field_ref``, ``literal`` and ``options`` naming a column of the record
batch holding the value). The metadata, which repeats keys, is read through the Arrow C data interface.
An expression pyarrow cannot take apart (a field referenced by position) is left as it is.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero

_COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


class _ArrowSchema(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


def _metadata_items(schema: pa.Schema) -> list[tuple[str, str]]:
    """The schema's metadata as (key, value) pairs in order, repeated keys kept."""
    capsule = schema.__arrow_c_schema__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    c_schema = _ArrowSchema.from_address(get(capsule, b"arrow_schema"))
    if not c_schema.metadata:
        return []
    address = c_schema.metadata

    def take(size: int) -> bytes:
        nonlocal address
        out = ctypes.string_at(address, size)
        address += size
        return out

    items = []
    for _ in range(struct.unpack("<i", take(4))[0]):
        key = take(struct.unpack("<i", take(4))[0]).decode()
        items.append((key, take(struct.unpack("<i", take(4))[0]).decode()))
    return items


def spark_nan_order(expression: pc.Expression, schema: pa.Schema) -> pc.Expression:
    """``expression`` (over rows of ``schema``) with Spark's NaN order in its floating-point comparisons.

    >>> t = pa.table({"a": [float("nan"), 1.0, None], "b": [float("nan"), float("inf"), 1.0]})
    >>> t.filter(pc.field("a") == pc.field("b")).num_rows
    0
    >>> e = spark_nan_order((pc.field("a") == pc.field("b")) | (pc.field("a") > float("inf")), t.schema)
    >>> t.filter(e).to_pydict()
    {'a': [nan], 'b': [nan]}
    """
    try:
        buffer = expression.__reduce__()[1][0]
    except pa.ArrowNotImplementedError:  # a field referenced by position: pyarrow cannot take it apart
        return expression
    batch = pa.ipc.open_file(buffer).read_all()
    items = _metadata_items(batch.schema)
    empty = schema.empty_table()
    rebuilt, end = _parse(items, 0, batch, lambda name, args: _rewritten(name, args, lambda e: _type(empty, e)))
    if end != len(items):
        raise ValueError(f"cannot read the expression {expression}")
    return rebuilt


def _type(empty: pa.Table, e: pc.Expression) -> pa.DataType | None:
    """The type ``e`` evaluates to over ``empty``'s columns (None: it does not evaluate; the caller says why)."""
    decl = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(empty)),
            acero.Declaration("project", acero.ProjectNodeOptions([e], ["_"])),
        ]
    )
    try:
        return decl.to_table(use_threads=False).schema.field(0).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


Builder = Callable[[str, list[pc.Expression]], pc.Expression | None]


def _parse(items: list[tuple[str, str]], i: int, batch: pa.Table, build: Builder) -> tuple[pc.Expression, int]:
    key, value = items[i]
    if key == "literal":
        return pc.scalar(batch.column(int(value))[0]), i + 1
    if key == "field_ref":
        return pc.field(value), i + 1
    if key == "nested_field_ref":
        names, j = [], i + 1
        for _ in range(int(value)):
            names.append(items[j][1])
            j += 1
        return pc.field(*names), j
    if key != "call":
        raise ValueError(f"unexpected node {key}")
    args: list[pc.Expression] = []
    options: Any = None
    j = i + 1
    while items[j][0] != "end":
        if items[j][0] == "options":
            options = _options(batch.column(int(items[j][1])))
            j += 1
            continue
        arg, j = _parse(items, j, batch, build)
        args.append(arg)
    rewritten = build(value, args) if options is None else None
    return (rewritten if rewritten is not None else pc.Expression._call(value, args, options)), j + 1


def _options(column: pa.ChunkedArray) -> pc.FunctionOptions:
    sink = pa.BufferOutputStream()
    batch = pa.record_batch([column.combine_chunks()], names=[""])
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return pc.FunctionOptions.deserialize(sink.getvalue())


def _rewritten(
    name: str, args: list[pc.Expression], type_of: Callable[[pc.Expression], pa.DataType | None]
) -> pc.Expression | None:
    """A comparison of floating-point operands with Spark's NaN order (None: leave the call as it is)."""
    if name not in _COMPARISONS or len(args) != 2:
        return None
    types = [type_of(a) for a in args]
    if None in types or not any(t is not None and pa.types.is_floating(t) for t in types):
        return None
    a, b = args
    if name in ("greater", "greater_equal"):
        a, b, name = b, a, "less" if name == "greater" else "less_equal"
    nan_a, nan_b = pc.Expression._call("is_nan", [a]), pc.Expression._call("is_nan", [b])
    ieee = pc.Expression._call(name, [a, b])
    if name in ("equal", "not_equal"):
        equal = pc.Expression._call("equal", [a, b]) | (nan_a & nan_b)
        return equal if name == "equal" else ~equal
    if name == "less":
        return ieee | (nan_b & ~nan_a)  # a number is below NaN; NaN is below nothing
    return ieee | (nan_b & a.is_valid())  # every value is <= NaN (NaN = NaN); NULL stays NULL


__all__ = ["spark_nan_order"]
