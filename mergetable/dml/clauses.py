"""The clauses of a MERGE and how they resolve, shared by the Python merge builder and the Spark ``MergeTable``.

The target and the source are joined full-outer on the merge condition. Each joined row is *matched* (both
sides), *not matched* (source only) or *not matched by source* (target only); for each kind the clauses are
tried in the order they were added and the first whose condition holds applies (no clause: the row is left
alone). A condition that is NULL does not hold. As in Delta, when a target row is matched by several source
rows and a ``matched`` clause other than an unconditional delete exists, the merge fails before anything is
written (:func:`ambiguous_match`).

The clause model is generic in the expression type: pyarrow ``Expression`` for Python, Spark ``Column``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from mergetable.core.errors import MergeError, SchemaError
from mergetable.core.schema import TableSchema, check_column
from mergetable.dml.rules import check_assigned, check_delete, check_update

E = TypeVar("E")
Kind = Literal["matched", "not matched", "not matched by source"]
Action = Literal["update", "delete", "insert"]
MATCHED: Kind = "matched"
NOT_MATCHED: Kind = "not matched"
NOT_MATCHED_BY_SOURCE: Kind = "not matched by source"
ROW_KINDS: dict[Action, str] = {"update": "+U", "delete": "-D", "insert": "+I"}
_ACTIONS: dict[Kind, tuple[Action, ...]] = {
    MATCHED: ("update", "delete"),
    NOT_MATCHED: ("insert",),
    NOT_MATCHED_BY_SOURCE: ("update", "delete"),
}


@dataclass(frozen=True)
class Clause(Generic[E]):
    """One ``when …`` clause: ``values`` None means every column from the source (update all / insert all)."""

    kind: Kind
    action: Action
    condition: E | None
    values: dict[str, E] | None

    @property
    def row_kind(self) -> str:
        """The row kind this clause writes (``+U``, ``-D`` or ``+I``)."""
        return ROW_KINDS[self.action]


def resolve_columns(values: Mapping[str, Any], columns: Sequence[str], what: str) -> dict[str, Any]:
    """``values`` keyed by the table's spelling of each column (matched case-insensitively, as Spark does).

    >>> resolve_columns({"V": 1}, ["id", "v"], "update")
    {'v': 1}
    """
    if not isinstance(values, Mapping):
        raise SchemaError(f"{what} needs a mapping {{column: value}}, got {type(values).__name__}")
    lower = {c.lower(): c for c in columns}
    out: dict[str, Any] = {}
    for name, value in values.items():
        column = name if name in columns else lower.get(str(name).lower())
        out[column if column is not None else check_column(str(name), columns, f"{what} column")] = value
    return out


def make_clause(
    schema: TableSchema, kind: Kind, action: Action, condition: E | None, values: Mapping[str, E] | None
) -> Clause[E]:
    """A clause checked against the table: the engine's rules, key columns not assigned, inserts give the key."""
    if action not in _ACTIONS[kind]:
        raise SchemaError(f"a '{kind}' clause cannot {action}")
    operation = f"merge ({kind}: {action})"
    if values is not None and not values:
        raise SchemaError(
            f"{operation} needs {{column: value}} (argument '{'values' if action == 'insert' else 'set'}')"
        )
    if action == "delete":
        check_delete(schema.table_options, operation)
    elif action == "update":
        check_update(schema.table_options, operation)
    resolved = None if values is None else resolve_columns(values, schema.column_names, f"{kind} {action}")
    if resolved is not None and action == "update":
        check_assigned(schema, resolved, operation)
    if resolved is not None and action == "insert":
        missing = [k for k in schema.primary_keys if k not in resolved]
        if missing:
            raise SchemaError(f"{operation} must give the primary key {list(schema.primary_keys)}", missing[0])
    return Clause(kind, action, condition, resolved)


def check_clauses(clauses: Sequence[Clause[Any]]) -> None:
    """Refuse a merge without any clause (as Delta does): it would read both sides and change nothing.

    >>> check_clauses([])
    Traceback (most recent call last):
    ...
    mergetable.core.errors.MergeError: merge: no clause was added; add a when-matched, when-not-matched or ...
    """
    if not clauses:
        raise MergeError(
            "merge: no clause was added; add a when-matched, when-not-matched or when-not-matched-by-source "
            "clause (update, delete or insert) before execute()"
        )


def needs_single_match(clauses: Sequence[Clause[Any]]) -> bool:
    """Whether a target row matched by several source rows is an error (Delta's rule)."""
    return any(c.kind == MATCHED and not (c.action == "delete" and c.condition is None) for c in clauses)


def ambiguous_match(key: Mapping[str, Any]) -> MergeError:
    """The error for a target row (of primary key ``key``) that several source rows matched."""
    return MergeError(
        "merge: a target row was matched by several source rows, so it cannot be updated or deleted "
        f"unambiguously (key {json.dumps(dict(key), default=str)}); deduplicate the source or narrow the condition"
    )


__all__ = [
    "MATCHED",
    "NOT_MATCHED",
    "NOT_MATCHED_BY_SOURCE",
    "ROW_KINDS",
    "Action",
    "Clause",
    "Kind",
    "ambiguous_match",
    "check_clauses",
    "make_clause",
    "needs_single_match",
    "resolve_columns",
]
