"""SQL expression strings as assigned values (``update(set={"note": "upper(note)"})``), as deltalake takes them.

A string value of ``update``'s ``set`` or of a merge clause is a SQL expression over the row's columns
(named plainly, case-insensitively; in a merge ``source.x``/``target.x`` by the aliases), evaluated
vectorized by duckdb (``pip install 'mergetable[duckdb]'``) over the Arrow rows, in order; its result is then
cast to the column type like any assigned value. A text is the SQL literal ``'text'`` (or, in ``update``,
passed through ``new_values``: literals as they are). An expression that does not evaluate is a
:class:`~mergetable.core.errors.SchemaError` naming the column and saying how to assign a literal.

Example:
    >>> import pyarrow as pa
    >>> rows = pa.table({"note": ["a", "b"], "qty": [1, 2]})
    >>> out = sql_values(rows, {"note": "upper(note) || '!'", "qty": "qty * 10"}, "update")
    >>> out["note"].to_pylist(), out["qty"].to_pylist()
    (['A!', 'B!'], [10, 20])
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from mergetable.core.errors import SchemaError
from mergetable.core.extras import require

_RELATION = "__mergetable_rows"


def sql_values(
    rows: pa.Table | Mapping[str, pa.Table], exprs: Mapping[str, str], what: str, literal_hint: bool = True
) -> dict[str, pa.ChunkedArray]:
    """Each SQL expression of ``exprs`` evaluated over ``rows``: ``{column: values}``, one value per row in order.

    ``rows`` is one table, or tables of as many rows by alias (a merge's ``target`` and ``source`` sides),
    joined by position. ``literal_hint``: the error message mentions ``new_values`` (``update`` has it).
    """
    if not exprs:
        return {}
    duckdb = require("duckdb", "SQL expression strings as assigned values")
    if isinstance(rows, pa.Table):
        named, source = {_RELATION: rows}, _RELATION
    else:
        named = {f"{_RELATION}_{i}": table for i, table in enumerate(rows.values())}
        source = " POSITIONAL JOIN ".join(f"{name} AS {_quote(alias)}" for name, alias in zip(named, rows))
    con = duckdb.connect()
    try:
        con.execute("SET preserve_insertion_order = true")
        for name, table in named.items():
            con.register(name, table)
        try:
            out = _select(con, exprs, source)
        except duckdb.Error:
            for column, expr in exprs.items():  # find the culprit for the message
                try:
                    _select(con, {column: expr}, source)
                except duckdb.Error as exc:
                    raise _error(what, column, expr, exc, literal_hint) from None
            raise
    finally:
        con.close()
    n = next(iter(named.values())).num_rows
    if out.num_rows != n:
        first = next(iter(exprs))
        raise SchemaError(f"{what}: a SQL value must be one value per row, not an aggregate or a set", first)
    return {c: out.column(i) for i, c in enumerate(exprs)}


def _select(con: object, exprs: Mapping[str, str], source: str) -> pa.Table:
    select = ", ".join(f"({e}) AS {_quote(c)}" for c, e in exprs.items())
    return pa.table(con.sql(f"SELECT {select} FROM {source}"))  # type: ignore[attr-defined]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _error(what: str, column: str, expr: str, exc: Exception, literal_hint: bool) -> SchemaError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    via = f"pass new_values={{{column!r}: {expr!r}}} or " if literal_hint else ""
    return SchemaError(
        f"{what}: the SQL expression {expr!r} does not evaluate ({first}); an assigned string is SQL: to assign "
        f"the text itself {via}the SQL literal {_sql_literal(expr)}",
        column,
    )


def _sql_literal(text: str) -> str:
    return '"' + "'" + text.replace("'", "''") + "'" + '"'


def check_sql(value: object, column: str) -> str:
    """``value`` when it is a non-empty SQL expression string, else a :class:`SchemaError` naming ``column``."""
    if not isinstance(value, str) or not value.strip():
        raise SchemaError("an empty SQL expression cannot be assigned (the empty text is the SQL literal '')", column)
    return value


__all__ = ["check_sql", "sql_values"]
