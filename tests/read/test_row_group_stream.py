"""Row groups decoded ahead of their consumer: taken in order, in any cut, and verified."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.core.fileio import FileIO
from mergetable.read.datafile import RowGroupStream


def _file(tmp_path: Path) -> str:
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"k": list(range(25)), "v": [str(i) for i in range(25)]}), path, row_group_size=10)
    return path


def _stream(tmp_path: Path, path: str, groups: list[list[int]] | None = None, ahead: int = 0) -> RowGroupStream:
    fileio, fs = FileIO(str(tmp_path)), pafs.LocalFileSystem()
    return RowGroupStream(fileio, fs, path, groups, ["k", "v"], 4, ahead)


@pytest.mark.parametrize("ahead", [0, 1, 8, 100])
def test_takes_cut_row_groups_anywhere_and_keep_their_order(tmp_path: Path, ahead: int) -> None:
    stream = _stream(tmp_path, _file(tmp_path), [[0], [2]], ahead=ahead)
    got = [stream.take(n) for n in (3, 10, 2)]
    assert [t.column("k").to_pylist() for t in got] == [[0, 1, 2], [*range(3, 10), 20, 21, 22], [23, 24]]
    assert got[1].schema.names == ["k", "v"]
    grouped = _stream(tmp_path, _file(tmp_path), [[0, 1], [2]], ahead=ahead)
    assert [t.num_rows for t in (grouped.take(19), grouped.take(6))] == [19, 6]
    whole = _stream(tmp_path, _file(tmp_path), None, ahead=ahead)
    assert whole.take(25).column("k").to_pylist() == list(range(25))


def test_a_file_shorter_than_its_row_groups_promise_is_an_error_naming_it(tmp_path: Path) -> None:
    path = _file(tmp_path)
    stream = _stream(tmp_path, path, [[1]])
    with pytest.raises(mt.DataFileError, match=r"f\.parquet"):
        stream.take(11)


@pytest.mark.parametrize("ahead", [0, 4])
def test_a_missing_file_is_an_error_naming_it(tmp_path: Path, ahead: int) -> None:
    with pytest.raises(mt.DataFileError, match="missing"):
        _stream(tmp_path, str(tmp_path / "gone.parquet"), ahead=ahead).take(1)
