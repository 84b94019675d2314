"""Printing command results: aligned text tables for people, JSON for scripts (``--json``)."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import pyarrow as pa


def _plain(value: Any) -> Any:
    """A JSON-friendly form of Arrow/Python values (bytes as hex, temporal as ISO text)."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def timestamp(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


class Output:
    """Where a command's result goes: ``emit`` takes the JSON form, ``table``/``text`` the human one."""

    def __init__(self, as_json: bool, stream: TextIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream or sys.stdout

    def emit(self, data: Any, text: str | None = None) -> None:
        if self.as_json:
            self.stream.write(json.dumps(_plain(data), indent=2) + "\n")
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
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    if not rows:
        lines.append("(no rows)")
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    plain = _plain(value)
    return plain if isinstance(plain, str) else json.dumps(plain)
