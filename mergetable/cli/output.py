"""Printing command results: aligned text tables for people, JSON for scripts (``--json``)."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import pyarrow as pa

from mergetable.core.read_options import iso_utc


def plain(value: Any) -> Any:
    """A JSON-friendly form of Arrow/Python values (bytes as hex, temporal as ISO text)."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:  # an instant: in UTC, with a Z
        return value.astimezone(datetime.UTC).replace(tzinfo=None).isoformat() + "Z"
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def timestamp(ms: int) -> str:
    """A metadata time (epoch milliseconds) as ISO-8601 UTC: ``2024-05-01T00:00:00.000Z``."""
    return iso_utc(ms)


class Output:
    """Where a command's result goes: ``emit`` takes the JSON form, ``table``/``text`` the human one."""

    def __init__(self, as_json: bool, stream: TextIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout

    def emit(self, data: Any, text: str | None = None) -> None:
        if self.as_json:
            self.stream.write(json.dumps(plain(data), indent=2) + "\n")
        elif text is not None:
            self.stream.write(text.rstrip("\n") + "\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], data: Any = None) -> None:
        """Rows as an aligned text table, or ``data`` (default: a list of row objects) as JSON."""
        if self.as_json:
            self.emit(data if data is not None else [dict(zip(headers, r, strict=True)) for r in rows])
            return
        self.emit(None, render_table(headers, rows))

    def arrow(self, table: pa.Table) -> None:
        rows = table.to_pylist()
        self.table(table.column_names, [[r[c] for c in table.column_names] for r in rows], rows)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in r] for r in rows]
    widths = column_widths(headers, cells)
    lines = [*header_lines(headers, widths), *cell_lines(cells, widths)]
    if not rows:
        lines.append("(no rows)")
    return "\n".join(lines)


def column_widths(headers: Sequence[str], cells: Sequence[Sequence[str]], at_least: Sequence[int] = ()) -> list[int]:
    """Each column's width: its header's, its widest cell's, or ``at_least``'s, whichever is largest."""
    floor = list(at_least) or [0] * len(headers)
    return [max([len(h), floor[i], *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]


def header_lines(headers: Sequence[str], widths: Sequence[int]) -> list[str]:
    return [_line(headers, widths), _line(["-" * w for w in widths], widths)]


def cell_lines(cells: Sequence[Sequence[str]], widths: Sequence[int]) -> list[str]:
    return [_line(r, widths) for r in cells]


def cells_of(rows: Sequence[Sequence[Any]]) -> list[list[str]]:
    return [[_cell(v) for v in r] for r in rows]


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    text = plain(value)
    return text if isinstance(text, str) else json.dumps(text)
