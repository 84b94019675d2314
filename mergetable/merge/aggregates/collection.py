"""Collection aggregate functions: ``listagg`` (Fluss ``string_agg``), ``collect``, ``merge_map`` and
``merge_map_with_keytime``.

``listagg`` without ``distinct`` is vectorized (blank detection with a regex, one ``binary_join`` over a
list view of each key's values); ``distinct`` listagg and the array/map functions fold each key in
Python with Paimon's exact rules (value equality on nested and binary content, retraction removing one
occurrence per element or whole map keys).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import OptionsError
from mergetable.merge.aggregates.base import (
    ADD,
    RESET,
    AggFunction,
    FoldInput,
    NullSkipping,
    paimon_type_name,
    register_function,
    wrong_type,
)

# Characters for which Java's Character.isWhitespace is true (U+00A0, U+2007, U+202F are not).
_JAVA_WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680" + "".join(
    chr(c) for c in [*range(0x2000, 0x2007), *range(0x2008, 0x200B), 0x2028, 0x2029, 0x205F, 0x3000]
)
_BLANK_RE2 = "^[" + "".join(f"\\x{{{ord(c):x}}}" for c in _JAVA_WHITESPACE) + "]*$"
_WHITESPACE_SET = frozenset(_JAVA_WHITESPACE)


def is_blank(text: str) -> bool:
    """Paimon's ``StringUtils.isBlank``: empty or only ``Character.isWhitespace`` characters."""
    return all(ch in _WHITESPACE_SET for ch in text)


def freeze(value: Any) -> Any:
    """A hashable form of a Python value converted from Arrow (ROW/ARRAY/MAP compared by content)."""
    if isinstance(value, dict):
        return tuple((k, freeze(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


@register_function
class ListAgg(AggFunction):
    """``listagg``: joins non-blank strings with ``fields.<f>.list-agg-delimiter`` (default ``,``).

    ``fields.<f>.distinct=true`` appends only input tokens (split on the whole delimiter) that are not
    already in the accumulator.
    """

    name = "listagg"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        delimiter = self.options.raw("list-agg-delimiter")
        self.delimiter = "," if delimiter is None else delimiter
        self.distinct = self.options.flag("distinct")

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return None
        return wrong_type("list agg", "VarCharType", t)

    def _split(self, text: str) -> list[str]:
        return text.split(self.delimiter) if self.delimiter else re.split(r"\s", text)

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if x is None or is_blank(x):
            return acc
        if acc is None or is_blank(acc):
            return x
        if not self.distinct:
            return f"{acc}{self.delimiter}{x}"
        existing = set(self._split(acc))
        parts = [acc]
        for token in self._split(x):
            if is_blank(token) or token in existing:
                continue
            existing.add(token)
            parts.append(token)
        return self.delimiter.join(parts)

    def fold(self, fi: FoldInput) -> pa.Array:
        if self.distinct or not fi.only(ADD, RESET):
            return self.fold_scalar(fi)
        blank = np.asarray(
            pc.fill_null(pc.match_substring_regex(fi.values, _BLANK_RE2), True).to_numpy(zero_copy_only=False),
            dtype=bool,
        )
        element = ~blank & fi.from_last_reset
        order = fi.segments()[0]
        idx = np.arange(fi.size, dtype=np.int64) if order is None else order
        keep = element[idx]
        chosen = idx[keep]
        counts = np.bincount(fi.gid[chosen], minlength=fi.n_groups)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        values = fi.values.cast(pa.string()).take(pa.array(chosen))
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), values), self.delimiter)
        # Groups with no element keep what a RESET left (possibly blank) or NULL.
        last_reset = fi.last_where(fi.ev == RESET) if fi.has(RESET) else np.full(fi.n_groups, -1)
        fallback = fi.take_groups(last_reset).cast(pa.string())
        result = pc.if_else(pa.array(counts > 0), joined, fallback)
        return result.cast(self.type)


def typed_freeze(value: Any, t: pa.DataType) -> Any:
    """:func:`freeze` that knows the type: a MAP is the set of its entries, so maps holding the same entries
    in another order are equal (as Paimon's map equality), also inside rows and arrays.

    >>> m = pa.map_(pa.string(), pa.int32())
    >>> typed_freeze([("a", 1), ("b", 2)], m) == typed_freeze([("b", 2), ("a", 1)], m)
    True
    """
    if value is None:
        return None
    if pa.types.is_map(t):
        return frozenset((typed_freeze(k, t.key_type), typed_freeze(v, t.item_type)) for k, v in value)
    if pa.types.is_struct(t):
        return tuple((f.name, typed_freeze(value.get(f.name), f.type)) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return tuple(typed_freeze(v, t.value_type) for v in value)
    return freeze(value)


def _needs_content_equality(t: pa.DataType) -> bool:
    return pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t)


@register_function
class Collect(AggFunction):
    """``collect``: concatenates arrays; ``fields.<f>.distinct=true`` makes it a set union (elements compared by
    content; maps holding the same entries in another order are equal)."""

    name = "collect"
    supports_retract = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.distinct = self.options.flag("distinct")
        self._equaliser = self.distinct and _needs_content_equality(self.type.value_type)

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return None
        return wrong_type("collect", "Array", t)

    def _key(self, element: Any) -> Any:
        return typed_freeze(element, self.type.value_type)

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None and x is None:
            return None
        if (acc is None or x is None) and not self.distinct:
            return x if acc is None else acc
        if not self.distinct:
            return [*acc, *x]
        # Paimon hashes plain elements (acc deduplicated too); content-compared ones keep acc as is.
        out: list[Any] = []
        seen: set[Any] = set()
        for element in acc or []:
            key = self._key(element)
            if self._equaliser or key not in seen:
                out.append(element)
            seen.add(key)
        for element in x or []:
            key = self._key(element)
            if key not in seen:
                seen.add(key)
                out.append(element)
        return out

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None:
            return None
        if not x:
            return acc
        pending = [self._key(e) for e in x]
        out = []
        for element in acc:
            key = self._key(element)
            if key in pending:
                pending.remove(key)
            else:
                out.append(element)
        return out


def _map_items(value: Any) -> list[tuple[Any, Any]]:
    return list(value) if value is not None else []


@register_function
class MergeMap(NullSkipping):
    """``merge_map``: union of maps, the later value winning per key; retraction removes keys."""

    name = "merge_map"
    supports_retract = True

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        return None if pa.types.is_map(t) else wrong_type("merge map", "MAP", t, end="")

    def combine(self, acc: Any, x: Any) -> Any:
        merged: dict[Any, tuple[Any, Any]] = {}
        for k, v in [*_map_items(acc), *_map_items(x)]:
            merged[freeze(k)] = (k, v)
        return list(merged.values())

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None:
            return None
        if not x:
            return acc
        gone = {freeze(k) for k, _ in x}
        merged: dict[Any, tuple[Any, Any]] = {}
        for k, v in acc:
            if freeze(k) not in gone:
                merged[freeze(k)] = (k, v)
        return list(merged.values())


@register_function
class MergeMapWithKeyTime(AggFunction):
    """``merge_map_with_keytime``: per map key keep the ROW whose ``ts-field`` is larger (as strings).

    A NULL ROW removes the key; a ROW with a NULL timestamp is skipped. ``fields.<f>.ts-field`` names the
    timestamp field of the value ROW (default: its last field).
    """

    name = "merge_map_with_keytime"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        row_type = self.type.item_type
        names = [f.name for f in row_type]
        ts_field = self.options.raw("ts-field")
        if ts_field is not None and ts_field not in names:
            raise OptionsError(
                self.options.key("ts-field"),
                f"Timestamp field '{ts_field}' not found in ROW type for field '{self.column}'. "
                f"Available fields: {names}",
            )
        self.ts_name = names[-1] if ts_field is None else ts_field

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        if not pa.types.is_map(t):
            return f"Data type for field '{column}' must be 'MAP' but was '{paimon_type_name(t)}'"
        if not pa.types.is_struct(t.item_type):
            return f"Value type of MAP for field '{column}' must be ROW but was '{paimon_type_name(t.item_type)}'"
        if t.item_type.num_fields < 2:
            return f"ROW type for field '{column}' must have at least 2 fields, but found {t.item_type.num_fields}"
        return None

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None:
            return x
        if x is None:
            return acc
        merged: dict[Any, tuple[Any, Any]] = {freeze(k): (k, v) for k, v in acc}
        for k, row in x:
            key = freeze(k)
            if row is None:
                merged.pop(key, None)
                continue
            ts = row.get(self.ts_name)
            if ts is None:
                continue
            existing = merged.get(key)
            old = None if existing is None or existing[1] is None else existing[1].get(self.ts_name)
            if existing is None or old is None or str(ts) > str(old):
                merged[key] = (k, row)
        return list(merged.values())


__all__ = ["Collect", "ListAgg", "MergeMap", "MergeMapWithKeyTime", "freeze", "is_blank", "typed_freeze"]
