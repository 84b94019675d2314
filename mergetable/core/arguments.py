"""Checks of the arguments users pass most often in the wrong shape, each failing with :class:`ArgumentError`.

A string where a list of names is expected (``primary_key="id"``), a dict where an Arrow schema is expected, a
single filter tuple where a list is expected: caught here, before they are taken apart character by character.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from mergetable.core.errors import ArgumentError


def name_list(value: Any, argument: str, allow_none: bool = False) -> tuple[str, ...]:
    """``value`` as a tuple of column names; a string, a non-sequence or non-string items are refused.

    >>> name_list(["id", "dt"], "primary_key")
    ('id', 'dt')
    >>> name_list("id", "primary_key")
    Traceback (most recent call last):
    ...
    mergetable.core.errors.ArgumentError: argument 'primary_key': expected a list of column names, ...
    """
    if value is None and allow_none:
        return ()
    if isinstance(value, str):
        raise ArgumentError(argument, f"expected a list of column names, got the string {value!r} (write [{value!r}])")
    if not isinstance(value, Sequence):
        raise ArgumentError(argument, f"expected a list of column names, got {type(value).__name__} {value!r}")
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise ArgumentError(argument, f"column names must be strings, got {bad[0]!r} in {list(value)!r}")
    return tuple(value)


def arrow_fields(value: Any, argument: str = "fields") -> list[pa.Field]:
    """``value`` (a field, a schema, or a list of fields or ``(name, type)`` pairs) as a list of Arrow fields.

    >>> [f.name for f in arrow_fields([("qty", pa.int32()), pa.field("note", pa.string())])]
    ['qty', 'note']
    >>> arrow_fields("qty")
    Traceback (most recent call last):
    ...
    mergetable.core.errors.ArgumentError: argument 'fields': expected Arrow fields ...
    """
    if isinstance(value, pa.Field):
        return [value]
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        value = [value]
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise ArgumentError(argument, f"expected Arrow fields or (name, type) pairs, got {type(value).__name__}")
    fields: list[pa.Field] = []
    for item in value:
        if isinstance(item, pa.Field):
            fields.append(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            try:
                fields.append(pa.field(item[0], item[1]))
            except (TypeError, ValueError, pa.ArrowException) as exc:
                raise ArgumentError(argument, f"bad type for column {item[0]!r}: {exc}") from None
        else:
            raise ArgumentError(argument, f"expected Arrow fields or (name, type) pairs, got {item!r}")
    return fields


def arrow_schema(value: Any, argument: str = "schema") -> pa.Schema:
    """``value`` if it is a ``pa.Schema``; anything else (a dict, a list of pairs) is refused with an example."""
    if isinstance(value, pa.Schema):
        return value
    hint = ""
    if isinstance(value, Mapping) or (isinstance(value, Sequence) and not isinstance(value, str)):
        hint = "; build one with pa.schema([('id', pa.int64()), ('v', pa.string())])"
    raise ArgumentError(argument, f"expected a pyarrow.Schema, got {type(value).__name__}{hint}")


def mapping(value: Any, argument: str) -> dict[Any, Any]:
    """``value`` as a dict (None: empty); a list of ``k=v`` strings or any other non-mapping is refused."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgumentError(argument, f"expected a dict of name to value, got {type(value).__name__} {value!r}")
    return dict(value)


def location(value: Any, argument: str = "uri") -> str:
    """A table location as text: a string or a path-like object."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ArgumentError(argument, f"expected a path or URL string, got {type(value).__name__} {value!r}")


def unknown_keywords(given: Mapping[str, Any], known: Sequence[str], call: str) -> None:
    """Refuse keyword arguments ``call`` does not take, naming the first and listing the known ones."""
    unknown = [k for k in given if k not in known]
    if unknown:
        raise ArgumentError(unknown[0], f"{call} takes no argument '{unknown[0]}' (it takes {', '.join(known)})")


__all__ = ["arrow_schema", "location", "mapping", "name_list", "unknown_keywords"]
