"""``t.describe()``: the LSM picture per bucket, as text bars and as HTML parsed back with ``html.parser``."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa

import mergetable as mt
from mergetable.interop.describe import describe_table

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


class Cells(HTMLParser):
    """The text of every table row, the ``width`` of every SVG rect, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.widths: list[int] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "rect":
            self.widths.append(int(dict(attrs)["width"] or 0))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self.lasttag == "title":
            self._cell.append(data)


def _table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, ["id", "dt"], ["dt"], {"bucket": "1", "write-only": "true"})
    for i in range(5):  # five runs in dt=b: compaction due; dt=a compacted into one
        t.write({"id": list(range(i * 100, i * 100 + 200)), "dt": ["b"] * 200, "v": ["x" * i] * 200})
    t.write({"id": [1, 2], "dt": ["a", "a"], "v": ["p", "q"]})
    t.compact(full=True, partitions=[{"dt": "a"}])
    return t


def test_describe_counts_runs_levels_and_marks_due_buckets(tmp_path: Path) -> None:
    t = _table(tmp_path)
    d = t.describe()
    assert [(b.label, b.runs, b.status) for b in d.buckets] == [
        ("dt=a / bucket 0", 1, "ok"),
        ("dt=b / bucket 0", 5, "compaction due"),
    ]
    a, b = d.buckets
    assert [(lv.level, lv.files, lv.records) for lv in a.levels] == [(5, 1, 2)]
    assert [(lv.level, lv.files, lv.records) for lv in b.levels] == [(0, 5, 1000)]
    assert d.files == 6 and d.records == 1002 and d.files_per_level() == {0: 5, 5: 1}
    assert d.bytes == sum(f.file_size for _, _, f in t.files())
    text = str(d).splitlines()
    assert text[2] == "dt=a / bucket 0: 1 sorted run (compaction at 5)"
    assert text[4] == "dt=b / bucket 0: 5 sorted runs (compaction at 5) <- compaction due"
    assert text[5].startswith("  L0  " + "█" * 32) and "5 file(s)" in text[5]
    assert d.to_dict()["buckets"][1]["levels"][0] == {
        "level": 0, "files": 5, "runs": 5, "records": 1000, "bytes": b.bytes
    }  # fmt: skip
    t.compact()  # the due bucket compacts; the picture says so
    after = t.describe()
    assert [(bk.runs, bk.status) for bk in after.buckets] == [(1, "ok"), (1, "ok")]
    assert describe_table(t, snapshot_id=d.snapshot_id).buckets == d.buckets  # an older snapshot, as it was


def test_describe_html_parses_to_the_same_levels(tmp_path: Path) -> None:
    d = _table(tmp_path).describe()
    parser = Cells()
    parser.feed(d._repr_html_())
    parser.close()
    assert parser.rows[0] == ["level", "size", "bytes", "files", "runs", "records"]
    headers = [r[0] for r in parser.rows[1:] if len(r) == 1]
    assert [h.split(":")[0] for h in headers] == [b.label for b in d.buckets]
    levels = [r for r in parser.rows[1:] if len(r) == 6]
    expected = [(f"L{lv.level}", str(lv.files), str(lv.runs)) for b in d.buckets for lv in b.levels]
    assert [(r[0], r[3], r[4]) for r in levels] == expected
    biggest = max(lv.bytes for b in d.buckets for lv in b.levels)
    sizes = [lv.bytes for b in d.buckets for lv in b.levels]
    assert parser.widths[sizes.index(biggest)] == 32 * 6 and all(0 < w <= 192 for w in parser.widths)


def test_describe_empty_table(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "e"), SCHEMA, ["id"])
    d = t.describe()
    assert d.snapshot_id is None and d.buckets == () and "no snapshot yet" in str(d)
    parser = Cells()
    parser.feed(d._repr_html_())
    assert parser.rows == [["level", "size", "bytes", "files", "runs", "records"]]


def test_describe_text_draws_fewer_buckets_and_ascii_bars(tmp_path: Path) -> None:
    d = _table(tmp_path).describe()
    full = d.text(encoding="utf-8").splitlines()
    assert full == str(d).splitlines() and any("█" in line for line in full)
    ascii_lines = d.text(encoding="ascii").splitlines()
    assert [line.replace("#", "█") for line in ascii_lines] == full and "".join(ascii_lines).isascii()
    one = d.text(limit=1, header=False).splitlines()
    assert one[0] == "dt=a / bucket 0: 1 sorted run (compaction at 5)" and not any("dt=b" in line for line in one)
    assert one[-1] == "... and 1 more bucket(s)" and one[1:-1] == full[3:4]
    empty = mt.create_table(str(tmp_path / "e"), SCHEMA, ["id"]).describe()
    assert empty.text(header=False) == "(no data files)"
