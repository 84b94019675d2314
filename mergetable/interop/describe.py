"""A picture of a table's LSM tree: per bucket, its sorted runs and levels with their sizes.

:func:`describe_table` reads the file metadata of one snapshot (no data file) and returns a
:class:`TableDescription`: ``str()`` of it is a text picture for a terminal (one bar per level, scaled by
bytes; :meth:`TableDescription.text` draws fewer buckets, or ``#`` bars where the output has no block
characters: ``mergetable describe`` prints it), ``_repr_html_()`` the same as HTML with SVG bars for a
notebook, ``to_dict()`` plain data. A bucket whose sorted runs reach ``num-sorted-run.compaction-trigger`` is
marked *compaction due*, one above ``num-sorted-run.stop-trigger`` *behind* (a writer then waits for its
compaction): that is when to compact.

Example:
    >>> import tempfile, pyarrow as pa, mergetable as mt
    >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64())]), ["id"])
    >>> for i in range(3):
    ...     _ = t.write({"id": [i]})
    >>> d = describe_table(t)
    >>> [(b.bucket, b.runs, [(lv.level, lv.files) for lv in b.levels]) for b in d.buckets]
    [(0, 3, [(0, 3)])]
    >>> print(str(d).splitlines()[2])
    bucket 0: 3 sorted runs (compaction at 5)
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Protocol

from mergetable.compaction.lsm import Levels
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import DataFileMeta, Snapshot

BAR_WIDTH = 32
"""Characters (text) or units of 6 pixels (SVG) of the widest bar: the biggest level of the table."""
BLOCK = "█"
"""The character of the text bars where the output can write it (:func:`bar_mark`)."""


class DescribedTable(Protocol):
    """What :func:`describe_table` needs of a table (:class:`mergetable.Table` is one)."""

    @property
    def uri(self) -> str: ...

    @property
    def table_schema(self) -> TableSchema: ...

    def latest_snapshot(self) -> Snapshot | None: ...

    def snapshot(self, snapshot_id: int) -> Snapshot: ...

    def files(self, snapshot_id: int | None = None) -> list[tuple[tuple[str | None, ...], int, DataFileMeta]]: ...


@dataclass(frozen=True)
class LevelDescription:
    """One level of a bucket: level 0 holds one sorted run per file, every higher level one run."""

    level: int
    files: int
    runs: int
    records: int
    bytes: int


@dataclass(frozen=True)
class BucketDescription:
    """One bucket of one partition: its levels (the non-empty ones, lowest first) and how many runs they hold."""

    partition: dict[str, str | None]
    bucket: int
    levels: tuple[LevelDescription, ...]
    status: str
    """``ok``, ``compaction due`` (runs ≥ the compaction trigger) or ``behind`` (runs > the stop trigger)."""

    @property
    def runs(self) -> int:
        return sum(lv.runs for lv in self.levels)

    @property
    def bytes(self) -> int:
        return sum(lv.bytes for lv in self.levels)

    @property
    def label(self) -> str:
        spec = ", ".join(f"{k}={v}" for k, v in self.partition.items())
        return f"{spec} / bucket {self.bucket}" if spec else f"bucket {self.bucket}"


@dataclass(frozen=True)
class TableDescription:
    """The LSM tree of one snapshot of a table (see the module docstring); made by :func:`describe_table`."""

    uri: str
    snapshot_id: int | None
    primary_key: tuple[str, ...]
    partition_keys: tuple[str, ...]
    bucket_option: int
    compaction_trigger: int
    stop_trigger: int
    buckets: tuple[BucketDescription, ...]

    @property
    def files(self) -> int:
        return sum(lv.files for b in self.buckets for lv in b.levels)

    @property
    def records(self) -> int:
        return sum(lv.records for b in self.buckets for lv in b.levels)

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.buckets)

    def files_per_level(self) -> dict[int, int]:
        """How many data files each level holds, over every bucket."""
        out: dict[int, int] = {}
        for b in self.buckets:
            for lv in b.levels:
                out[lv.level] = out.get(lv.level, 0) + lv.files
        return dict(sorted(out.items()))

    def _widest(self) -> int:
        return max((lv.bytes for b in self.buckets for lv in b.levels), default=0)

    def _header(self) -> list[str]:
        version = "no snapshot yet" if self.snapshot_id is None else f"snapshot {self.snapshot_id}"
        parts = f", partitioned by {', '.join(self.partition_keys)}" if self.partition_keys else ""
        mode = ", dynamic" if self.bucket_option == -1 and self.primary_key else ""
        return [
            f"{self.uri} ({version}): {self.files} files, {self.records:,} records, {human_bytes(self.bytes)}",
            f"{_key_text(self.primary_key)}{parts}; {len(self.buckets)} bucket(s) with files "
            f"(bucket option {self.bucket_option}{mode})",
        ]

    def text(self, limit: int = 0, encoding: str | None = None, header: bool = True) -> str:
        """The picture as text: ``str()`` of the description is ``text()``.

        Args:
            limit: Draw at most this many buckets (0: all); a last line counts the ones left out.
            encoding: The encoding of where the text goes: bars are ``#`` where it has no block character.
            header: Start with the two lines about the whole table (its location, size, key and partitioning).

        Example:
            >>> import tempfile, pyarrow as pa, mergetable as mt
            >>> schema = pa.schema([("id", pa.int64())])
            >>> t = mt.create_table(tempfile.mkdtemp(), schema, ["id"], options={"bucket": "2"})
            >>> _ = t.write({"id": list(range(100))})
            >>> print(describe_table(t).text(limit=1, encoding="ascii", header=False))  # doctest: +ELLIPSIS
            bucket 0: 1 sorted run (compaction at 5)
              L0  ################################ ...  1 file(s) (a run each), ... records
            ... and 1 more bucket(s)
        """
        widest, mark = self._widest(), bar_mark(encoding)
        lines = self._header() if header else []
        if not self.buckets:
            lines.append("(no data files)")
        shown = self.buckets if limit <= 0 else self.buckets[:limit]
        for b in shown:
            note = "" if b.status == "ok" else f" <- {b.status}"
            lines.append(f"{b.label}: {_runs(b.runs)} (compaction at {self.compaction_trigger}){note}")
            for lv in b.levels:
                bar = mark * _bar(lv.bytes, widest, BAR_WIDTH)
                each = " (a run each)" if lv.level == 0 else ""
                lines.append(
                    f"  L{lv.level:<2} {bar:<{BAR_WIDTH}} {human_bytes(lv.bytes):>9}  {lv.files} file(s){each}, "
                    f"{lv.records:,} records"
                )
        if len(shown) < len(self.buckets):
            lines.append(f"... and {len(self.buckets) - len(shown)} more bucket(s)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"TableDescription({self.uri!r}, snapshot_id={self.snapshot_id}, buckets={len(self.buckets)})"

    def _repr_html_(self) -> str:
        widest, scale = self._widest(), 6
        head = "".join(f"<div>{html.escape(line)}</div>" for line in self._header())
        rows = []
        for b in self.buckets:
            color = {"ok": "#4c78a8", "compaction due": "#f58518", "behind": "#e45756"}[b.status]
            cells = []
            for lv in b.levels:
                width = _bar(lv.bytes, widest, BAR_WIDTH) * scale
                svg = (
                    f'<svg width="{BAR_WIDTH * scale}" height="12"><rect width="{width}" height="12" '
                    f'fill="{color}"><title>{human_bytes(lv.bytes)}</title></rect></svg>'
                )
                cells.append(
                    f"<tr><td>L{lv.level}</td><td>{svg}</td><td>{human_bytes(lv.bytes)}</td><td>{lv.files}</td>"
                    f"<td>{lv.runs}</td><td>{lv.records:,}</td></tr>"
                )
            rows.append(
                f'<tr><th colspan="6" style="text-align:left">{html.escape(b.label)}: {_runs(b.runs)} '
                f"(compaction at {self.compaction_trigger}) <span>{html.escape(b.status)}</span></th></tr>"
                + "".join(cells)
            )
        table = (
            "<table><thead><tr><th>level</th><th>size</th><th>bytes</th><th>files</th><th>runs</th>"
            f"<th>records</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        return f'<div class="mergetable-describe">{head}{table}</div>'

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready) of the description."""
        return {
            "uri": self.uri,
            "snapshot_id": self.snapshot_id,
            "primary_key": list(self.primary_key),
            "partition_keys": list(self.partition_keys),
            "compaction_trigger": self.compaction_trigger,
            "stop_trigger": self.stop_trigger,
            "buckets": [
                {
                    "partition": b.partition,
                    "bucket": b.bucket,
                    "runs": b.runs,
                    "status": b.status,
                    "levels": [vars(lv) for lv in b.levels],
                }
                for b in self.buckets
            ],
        }


def describe_table(table: DescribedTable, snapshot_id: int | None = None) -> TableDescription:
    """The LSM tree of ``snapshot_id`` (default: the latest) of ``table``, from file metadata only."""
    schema = table.table_schema
    opts = schema.table_options
    snap = table.latest_snapshot() if snapshot_id is None else table.snapshot(int(snapshot_id))
    grouped: dict[tuple[tuple[str | None, ...], int], list[DataFileMeta]] = {}
    for partition, bucket, f in table.files(None if snap is None else snap.id) if snap is not None else ():
        grouped.setdefault((partition, bucket), []).append(f)
    buckets = []
    for (partition, bucket), files in sorted(grouped.items(), key=lambda kv: (_sortable(kv[0][0]), kv[0][1])):
        levels = Levels(files, opts.max_levels, lambda f: f.file_name)
        described = []
        for level in sorted({f.level for f in files}):
            at = [f for f in files if f.level == level]
            described.append(
                LevelDescription(
                    level=level,
                    files=len(at),
                    runs=len(at) if level == 0 else 1,
                    records=sum(f.row_count for f in at),
                    bytes=sum(f.file_size for f in at),
                )
            )
        runs = levels.number_of_sorted_runs()
        status = (
            "behind"
            if runs > opts.stop_trigger
            else "compaction due"
            if runs >= opts.num_sorted_run_compaction_trigger
            else "ok"
        )
        spec = dict(zip(schema.partition_keys, partition, strict=True))
        buckets.append(BucketDescription(spec, bucket, tuple(described), status))
    return TableDescription(
        uri=table.uri,
        snapshot_id=None if snap is None else snap.id,
        primary_key=schema.primary_keys,
        partition_keys=schema.partition_keys,
        bucket_option=opts.bucket,
        compaction_trigger=opts.num_sorted_run_compaction_trigger,
        stop_trigger=opts.stop_trigger,
        buckets=tuple(buckets),
    )


def human_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB, … with one decimal.

    >>> human_bytes(512), human_bytes(1536), human_bytes(3 * 2**30)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def bar_mark(encoding: str | None) -> str:
    """The character of the text bars: a full block, or ``#`` where ``encoding`` cannot write one.

    >>> bar_mark("utf-8"), bar_mark("ascii"), bar_mark(None)
    ('█', '#', '█')
    """
    if encoding is None:
        return BLOCK
    try:
        BLOCK.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return "#"
    return BLOCK


def _bar(value: int, widest: int, width: int) -> int:
    """The length of a bar for ``value`` when ``widest`` gets ``width``; at least 1 for a non-empty level."""
    if widest <= 0 or value <= 0:
        return 0
    return max(1, round(value * width / widest))


def _runs(n: int) -> str:
    return f"{n} sorted run{'' if n == 1 else 's'}"


def _sortable(partition: tuple[str | None, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((v is not None, v or "") for v in partition)


def _key_text(primary_key: tuple[str, ...]) -> str:
    """``key a, b``, or what a table without a key is."""
    return f"key {', '.join(primary_key)}" if primary_key else "append table (no primary key)"


__all__ = [
    "BucketDescription",
    "DescribedTable",
    "LevelDescription",
    "TableDescription",
    "bar_mark",
    "describe_table",
    "human_bytes",
]
