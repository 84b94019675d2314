"""The notebook view of a table (``repr``, ``_repr_html_`` parsed back), listings printed as tables, and the
progress bars of long operations on stderr."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


class Rows(HTMLParser):
    """Every ``<tr>`` as the texts of its cells, and the caption."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.caption = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.rows[-1].append("")
            self._in = "cell"
        elif tag == "caption":
            self._in = "caption"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "caption"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "cell":
            self.rows[-1][-1] += data
        elif self._in == "caption":
            self.caption += data


def _parse(markup: str) -> Rows:
    p = Rows()
    p.feed(markup)
    p.close()
    return p


def _table(tmp_path: Path) -> mt.Table:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, ["id", "dt"], ["dt"], {"bucket": "2", "write-only": "true"})
    t.write({"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": ["x", "y", "<z>"]})
    t.write({"id": [1], "dt": ["a"], "v": ["x2"]})
    return t


def test_repr_and_html_summary(tmp_path: Path) -> None:
    t = _table(tmp_path)
    assert repr(t) == (
        f"<mergetable.Table {t.uri} (version 2, 4 records) key=['id', 'dt'], partitioned by ['dt'], bucket=2, "
        "3 columns: id int64 not null, dt string not null, v string>"
    )
    page = _parse(t._repr_html_())
    assert page.caption == f"mergetable.Table {t.uri}"
    fields = {r[0]: r[1] for r in page.rows}
    assert fields["version"] == "2"
    assert fields["records"].startswith("4 in 3 files")
    assert fields["schema"] == "id int64 not null, dt string not null, v string"
    assert fields["primary key"] == "id, dt" and fields["partitioned by"] == "dt"
    assert fields["buckets"] == "2 per partition"
    assert fields["files per level"] == "L0: 3"
    assert fields["options"] == "bucket=2, write-only=true"  # only what differs from the defaults
    empty = mt.create_table(str(tmp_path / "e"), SCHEMA, ["id"])
    assert "(empty)" in repr(empty) and {r[0]: r[1] for r in _parse(empty._repr_html_()).rows}["version"] == "-"


def test_snapshots_and_history_print_as_tables(tmp_path: Path) -> None:
    t = _table(tmp_path)
    snaps = t.snapshots()
    assert snaps == [t.snapshot(1), t.snapshot(2)] and isinstance(snaps, list)
    lines = repr(snaps).splitlines()
    header = ["id", "kind", "time", "total_records", "delta_records", "changelog_records", "properties"]
    assert lines[0].split() == header
    assert [ln.split()[:2] for ln in lines[2:]] == [["1", "APPEND"], ["2", "APPEND"]]
    page = _parse(snaps._repr_html_())  # type: ignore[attr-defined]
    assert page.caption == "2 snapshots" and [r[:2] for r in page.rows[1:]] == [["1", "APPEND"], ["2", "APPEND"]]
    hist = _parse(t.history()._repr_html_())
    assert hist.rows[0][:3] == ["version", "timestamp", "operation"]
    assert [r[0] for r in hist.rows[1:]] == ["2", "1"]


def test_options_print_as_a_table_of_those_that_differ(tmp_path: Path) -> None:
    t = _table(tmp_path)
    opts = t.options
    assert isinstance(opts, dict) and opts["merge-engine"] == "deduplicate"  # every option, defaults included
    assert repr(opts).splitlines() == ["option      value", "----------  -----", "bucket      2", "write-only  true"]
    page = _parse(opts._repr_html_())
    assert page.rows == [["option", "value"], ["bucket", "2"], ["write-only", "true"]]
    assert page.caption == f"2 of {len(opts)} options differ from their defaults"
    assert repr(mt.create_table(str(tmp_path / "d"), SCHEMA, ["id"]).options) == "(every option at its default)"


def test_progress_bars_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _table(tmp_path)
    rows = pa.table({"id": list(range(1000)), "dt": ["a"] * 1000, "v": ["p"] * 1000})
    t.write(rows, progress=True)
    err = capsys.readouterr().err
    assert "write" in err and "1.00k/1.00k" in err
    buckets = len({(p, b) for p, b, _ in t.files()})
    t.compact(full=True, progress=True)
    err = capsys.readouterr().err
    assert buckets == 3 and "compact" in err and f"{buckets}/{buckets}" in err  # one step per bucket
    t.merge({"id": [1], "dt": ["a"], "v": ["m"]}).when_matched_update_all().execute(progress=True)
    assert "merge" in capsys.readouterr().err
    t.expire_snapshots(retain_last=1, progress=True)
    assert "expire" in capsys.readouterr().err
    t.fileio.write_bytes(t.fileio.join("dt=a", "bucket-0", "data-stray.parquet"), b"")
    assert len(t.remove_orphan_files(older_than_ms=2**62, force=True, progress=True)) == 1
    assert "orphans" in capsys.readouterr().err
    t.write(rows, progress=False)
    t.compact(full=True, progress=False)
    assert capsys.readouterr().err == ""  # forced off; and stderr is not a terminal under pytest
    t.write(rows)
    assert capsys.readouterr().err == ""
