"""A full disk: the write fails with a typed error naming the file it was writing, the table is unchanged and no
temporary or partial file stays behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.core import fileio
from mergetable.core.errors import StorageFullError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


class _FillingFile:
    """A real file that takes half of what it is given, then reports a full disk."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh

    def write(self, data: bytes) -> int:
        self._fh.write(data[: len(data) // 2])
        self._fh.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self) -> _FillingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


@pytest.mark.parametrize("failing", range(5))  # manifest, base and delta lists, snapshot, LATEST hint
def test_a_full_disk_at_any_metadata_file_is_typed_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, ["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    before, rows, latest = _files(root), t.read().sort_by("id"), t.latest_snapshot()
    opened: list[str] = []

    def filling_open(path: str, mode: str = "r", **kw: Any) -> Any:
        opened.append(path)
        fh = open(path, mode, **kw)
        return _FillingFile(fh) if len(opened) - 1 >= failing else fh  # the disk stays full

    monkeypatch.setattr(fileio, "open", filling_open, raising=False)
    try:
        t.write(pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=SCHEMA))
    except StorageFullError as exc:
        assert exc.errno == errno.ENOSPC
        assert exc.path.startswith(str(root)) and not os.path.basename(exc.path).startswith(".")
        assert exc.path in str(exc) and "No space left on device" in str(exc)
        monkeypatch.undo()
        assert _files(root) == before, "a failed write left files behind"
        assert t.read().sort_by("id").equals(rows) and t.latest_snapshot() == latest
        return
    monkeypatch.undo()
    assert len(opened) > failing, "the disk never filled up"
    # Only the LATEST hint may fail without failing the commit (readers verify it).
    assert os.path.basename(opened[failing]).startswith(".LATEST."), opened[failing]
    assert t.latest_snapshot().id == latest.id + 1
    assert not [f for f in _files(root) if os.path.basename(f).startswith(".")], "temporary files left behind"


def test_a_full_disk_while_writing_a_data_file_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    t = mt.create_table(str(root), SCHEMA, ["id"])
    t.write(pa.table({"id": [0], "v": ["x"]}, schema=SCHEMA))
    before = _files(root)

    def full(self: pq.ParquetWriter, table: pa.Table, row_group_size: int | None = None) -> None:
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    with pytest.raises(StorageFullError, match="No space left on device") as info:
        t.write(pa.table({"id": [1], "v": ["y"]}, schema=SCHEMA))
    monkeypatch.undo()
    assert "/bucket-0/data-" in info.value.path and info.value.path.endswith(".parquet")
    assert _files(root) == before
