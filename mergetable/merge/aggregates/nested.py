"""Nested-table aggregate functions over ``ARRAY<ROW>``: ``nested_update`` and ``nested_partial_update``.

Options (``fields.<f>.*``): ``nested-key`` (comma list of ROW fields identifying a nested row),
``nested-sequence-field`` (requires a key; a newer-or-equal sequence replaces), ``count-limit`` (maximum
number of nested rows; existing keys are still updated), ``nested-key-null-strategy``
(``merge`` — default, ``ignore`` or ``error``). Each key is folded in Python with Paimon's rules; NULL
array elements are dropped.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mergetable.core.errors import MergeError, OptionsError
from mergetable.merge.aggregates.base import AggFunction, paimon_type_name, register_function
from mergetable.merge.aggregates.collection import freeze

_INT_MAX = 2**31 - 1
_STRATEGIES = ("merge", "ignore", "error")


def _check_array_of_row(t: pa.DataType) -> str | None:
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        return None
    return f"Data type for nested table column must be 'Array<Row>' but was '{paimon_type_name(t)}'."


def _null_first(value: Any) -> tuple[int, Any]:
    return (0, 0) if value is None else (1, value)


class _NestedBase(AggFunction):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        fields = [f.name for f in self.type.value_type]
        self.key = self.options.names("nested-key")
        for name in self.key:
            if name not in fields:
                raise OptionsError(
                    self.options.key("nested-key"), f"Field {name} can not be found in nested ROW {fields}"
                )
        strategy = self.options.raw("nested-key-null-strategy")
        if strategy is not None and not self.key:
            raise OptionsError(
                self.options.key("nested-key-null-strategy"),
                "Option 'fields.<field-name>.nested-key-null-strategy' requires "
                "'fields.<field-name>.nested-key' to be configured.",
            )
        self.strategy = (strategy or "merge").strip().lower()
        if self.strategy not in _STRATEGIES:
            raise OptionsError(
                self.options.key("nested-key-null-strategy"),
                f"Unsupported nested-key-null-strategy '{strategy}'. Supported values are: {list(_STRATEGIES)}.",
            )

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        return _check_array_of_row(t)

    def _key_of(self, row: dict[str, Any]) -> Any:
        return tuple(freeze(row.get(k)) for k in self.key)

    def _keep_key(self, key: tuple[Any, ...]) -> bool:
        if all(v is not None for v in key):
            return True
        if self.strategy == "ignore":
            return False
        if self.strategy == "error":
            raise MergeError(
                f"column '{self.column}': Nested key contains null values. Primary key fields must not be null."
            )
        return True


@register_function
class NestedUpdate(_NestedBase):
    """``nested_update``: collects ROWs into an array, replacing rows with the same ``nested-key``."""

    name = "nested_update"
    supports_retract = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sequence = self.options.names("nested-sequence-field")
        if self.sequence and not self.key:
            raise OptionsError(
                self.options.key("nested-sequence-field"),
                "Option 'fields.<field-name>.nested-sequence-field' requires "
                "'fields.<field-name>.nested-key' to be configured.",
            )
        self.count_limit = self.options.integer("count-limit", _INT_MAX)

    def _seq(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_null_first(row.get(f)) for f in self.sequence)

    def _put_rows(self, rows: dict[Any, Any], array: list[Any], limit_new_keys: bool) -> None:
        for row in array:
            if row is None:
                continue
            key = self._key_of(row)
            if not self._keep_key(key):
                continue
            existing = rows.get(key)
            if existing is not None:
                if not self.sequence or self._seq(row) >= self._seq(existing):
                    rows[key] = row
            elif not limit_new_keys or len(rows) < self.count_limit:
                rows[key] = row

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if x is None:
            return acc
        if not self.key:
            if acc is None:
                return [r for r in x if r is not None][: self.count_limit]
            if len(acc) >= self.count_limit:
                return acc
            remain = self.count_limit - len(acc)
            return [r for r in acc if r is not None] + [r for r in x if r is not None][:remain]
        rows: dict[Any, Any] = {}
        if acc is not None:
            self._put_rows(rows, acc, limit_new_keys=False)
        self._put_rows(rows, x, limit_new_keys=True)
        return list(rows.values())

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None or x is None:
            return acc
        if not self.key:
            gone = [freeze(r) for r in x if r is not None]
            return [r for r in acc if r is not None and freeze(r) not in gone]
        rows: dict[Any, Any] = {}
        for row in acc:
            if row is not None and self._keep_key(self._key_of(row)):
                rows[self._key_of(row)] = row
        for row in x:
            if row is not None and self._keep_key(self._key_of(row)):
                rows.pop(self._key_of(row), None)
        return list(rows.values())


@register_function
class NestedPartialUpdate(_NestedBase):
    """``nested_partial_update``: per ``nested-key``, non-null nested fields overwrite."""

    name = "nested_partial_update"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if not self.key:
            raise OptionsError(self.options.key("nested-key"), "nested_partial_update requires a nested key")
        self.fields = [f.name for f in self.type.value_type]

    def agg(self, acc: Any, x: Any, state: Any) -> Any:
        if x is None:
            return acc
        rows = [r for r in (acc or []) if r is not None] + [r for r in x if r is not None]
        merged: dict[Any, dict[str, Any]] = {}
        for row in rows:
            key = self._key_of(row)
            if not self._keep_key(key):
                continue
            target = merged.setdefault(key, dict.fromkeys(self.fields))
            for name in self.fields:
                if row.get(name) is not None:
                    target[name] = row[name]
        return list(merged.values())


__all__ = ["NestedPartialUpdate", "NestedUpdate"]
