"""How a table and its listings show in a terminal and in a notebook (``__repr__`` and ``_repr_html_``).

* :func:`table_text` / :func:`table_html`: a :class:`mergetable.Table` in short (location, version, records,
  schema, key, buckets, files per level, the options that differ from their defaults);
* :class:`ResultTable`: an Arrow table (``history()``) that prints as rows and columns; it is used as the
  ``pyarrow.Table`` it holds (every attribute of it, the Arrow C stream, ``==``);
* :class:`SnapshotList`: the list ``snapshots()`` returns, printed as one row per snapshot.

Example:
    >>> import pyarrow as pa
    >>> r = ResultTable(pa.table({"version": [2, 1], "operation": ["DELETE", "APPEND"]}))
    >>> r.num_rows, r.column("version").to_pylist()
    (2, [2, 1])
    >>> print(r)
    version  operation
    -------  ---------
          2  DELETE
          1  APPEND
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mergetable.core.option_view import OptionsView
from mergetable.core.schema import TableSchema
from mergetable.interop.describe import TableDescription, human_bytes
from mergetable.metadata.models import Snapshot

MAX_ROWS = 50
"""Rows shown of a listing; the rest are counted."""


def text_grid(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Fixed-width columns, numbers right-aligned, under a header line."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in rows) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    for r in cells:
        lines.append("  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(r, widths, numeric)).rstrip())
    return "\n".join(lines)


def html_grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], caption: str | None = None) -> str:
    """An HTML table of ``rows`` under ``headers``, values escaped."""
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    if isinstance(value, list) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return ", ".join(f"{k}={v}" for k, v in value)  # a map column
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


class ResultTable:
    """An Arrow table that prints as a grid (see the module docstring); ``.table`` is the ``pyarrow.Table``."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __getattr__(self, name: str) -> Any:
        if name == "table":
            raise AttributeError(name)
        return getattr(self.table, name)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.table.__arrow_c_stream__(requested_schema)

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __getitem__(self, key: Any) -> Any:
        return self.table[key]

    def __eq__(self, other: object) -> bool:
        return bool(self.table.equals(other.table if isinstance(other, ResultTable) else other))

    __hash__ = None  # type: ignore[assignment]

    def _rows(self) -> tuple[list[str], list[list[Any]], str]:
        shown = self.table.slice(0, MAX_ROWS).to_pylist()
        more = f"{self.table.num_rows - MAX_ROWS} more rows" if self.table.num_rows > MAX_ROWS else ""
        return self.table.schema.names, [list(r.values()) for r in shown], more

    def __repr__(self) -> str:
        headers, rows, more = self._rows()
        return text_grid(headers, rows) + (f"\n... {more}" if more else "")

    def _repr_html_(self) -> str:
        headers, rows, more = self._rows()
        return html_grid(headers, rows) + (f"<p>… {html.escape(more)}</p>" if more else "")


SNAPSHOT_COLUMNS = ("id", "kind", "time", "total_records", "delta_records", "changelog_records", "properties")


def _snapshot_row(s: Snapshot) -> list[Any]:
    time = datetime.datetime.fromtimestamp(s.time_millis / 1000, datetime.UTC)
    kind = s.commit_kind.value
    return [s.id, kind, time, s.total_record_count, s.delta_record_count, s.changelog_record_count, s.properties]


class SnapshotList(list[Snapshot]):
    """The snapshots of a table, a plain ``list`` that prints as one row per snapshot."""

    def __repr__(self) -> str:
        return text_grid(SNAPSHOT_COLUMNS, [_snapshot_row(s) for s in self])

    def _repr_html_(self) -> str:
        return html_grid(SNAPSHOT_COLUMNS, [_snapshot_row(s) for s in self], f"{len(self)} snapshots")


def non_default_options(options: dict[str, str]) -> dict[str, str]:
    """The options whose value differs from mergetable's default (``bucket``, the merge engine, …).

    >>> from mergetable.core.options import TableOptions
    >>> non_default_options({**TableOptions().to_map(), "bucket": "4"})
    {'bucket': '4'}
    """
    return OptionsView(options).non_default()


def _summary(d: TableDescription, schema: pa.Schema, options: dict[str, str]) -> list[tuple[str, str]]:
    version = "-" if d.snapshot_id is None else str(d.snapshot_id)
    levels = ", ".join(f"L{lv}: {n}" for lv, n in d.files_per_level().items()) or "-"
    fixed = d.bucket_option
    return [
        ("version", version),
        ("records", f"{d.records:,} in {d.files} files ({human_bytes(d.bytes)})"),
        ("schema", ", ".join(f"{f.name} {f.type}{'' if f.nullable else ' not null'}" for f in schema)),
        ("primary key", ", ".join(d.primary_key) or "none (an append table)"),
        ("partitioned by", ", ".join(d.partition_keys) or "-"),
        (
            "buckets",
            f"{fixed} per partition" if fixed > 0 else "none (bucket-unaware)" if not d.primary_key else "dynamic",
        ),
        ("files per level", levels),
        ("options", ", ".join(f"{k}={v}" for k, v in non_default_options(options).items()) or "defaults"),
    ]


def table_text(uri: str, snapshot: Snapshot | None, schema: TableSchema) -> str:
    """The short text of a table (its ``repr``): location, version, records, key, buckets and columns, read
    from the latest snapshot alone (no manifest).

    >>> import pyarrow as pa
    >>> s = TableSchema.create(pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"], options={"bucket": "2"})
    >>> table_text("/data/t", None, s)
    "<mergetable.Table /data/t (empty) key=['id'], bucket=2, 2 columns: id int64 not null, v string>"
    """
    version = "empty" if snapshot is None else f"version {snapshot.id}, {snapshot.total_record_count:,} records"
    parts = f", partitioned by {list(schema.partition_keys)}" if schema.partition_keys else ""
    columns = ", ".join(f"{f.name} {f.type}{'' if f.nullable else ' not null'}" for f in schema.arrow_schema)
    return (
        f"<mergetable.Table {uri} ({version}) key={list(schema.primary_keys)}{parts}, "
        f"bucket={schema.table_options.bucket}, {len(schema.arrow_schema)} columns: {columns}>"
    )


def table_html(d: TableDescription, schema: pa.Schema, options: dict[str, str]) -> str:
    """A table's summary as an HTML table (the version, records, schema, key, buckets, files per level)."""
    rows = "".join(
        f'<tr><th style="text-align:left">{html.escape(k)}</th><td style="text-align:left">{html.escape(v)}</td></tr>'
        for k, v in _summary(d, schema, options)
    )
    return f"<table><caption>mergetable.Table {html.escape(d.uri)}</caption><tbody>{rows}</tbody></table>"


__all__ = [
    "ResultTable",
    "SnapshotList",
    "html_grid",
    "non_default_options",
    "table_html",
    "table_text",
    "text_grid",
]
